//! `nimble` (Yan et al., ASPLOS 2019, as seed 004 §2.3 and §5.1 describe and evaluate it;
//! rules from its kernel patch's `mm_manage`, see `src/policy/nimble.rs`): first touch fills
//! DRAM, every period the slow tier's active-list tail moves into free DRAM frames or is
//! exchanged with DRAM's inactive-list tail, hotness only.
//!
//! Periods are given in accesses so that the worked examples need no timing arithmetic, and
//! the fixed costs are set to 0. Page ids are the trace's page numbers (each trace touches
//! pages 0, 1, 2, … first in that order). With the default `new_pages=active` (Linux 5.6) a
//! page joins the head of its tier's active list; the list aging of each call deactivates
//! half of each active list from its tail (`len / 2` pages, clearing their accessed bits) and
//! scans half of each inactive list from its tail, slow tiers first.

mod common;
use common::{run, write_pages};
use std::sync::{Arc, Mutex};
use tierkit_core::engine::{run_policy, Job, SimResult};

use tierkit_core::mechanics::{MoveBy, Op, TierId};
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::nimble::{nimble, Nimble, NIMBLE};
use tierkit_core::policy::{Ctx, Needs, Params, Policy, PolicySpec, Served};
use tierkit_core::trace::TraceInput;
use tierkit_core::units::{Capacity, Period};

const FREE: &str = "syscall_ns=0,tlb_flush_ns=0,lru_scan_ns=0";

type Moves = Vec<(PageId, TierId, TierId, bool)>;

/// What [`Watch`] saw: after each call, the tier of every page and the moves made (page,
/// from, to, part of a swap).
#[derive(Default)]
struct Seen {
    tiers: Vec<Vec<TierId>>,
    moves: Vec<Moves>,
}

/// Wraps `nimble` and records [`Seen`]; the first `slow_first` pages are placed in the slow
/// tier (as `guided:...,then=nimble` would) and handed to nimble with `adopt`.
struct Watch {
    inner: Nimble,
    slow_first: u64,
    seen: Arc<Mutex<Seen>>,
}

impl Policy for Watch {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        self.inner.needs()
    }
    fn init(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        self.inner.init(ctx)
    }
    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        if (page as u64) < self.slow_first {
            self.inner.adopt(page, 1, ctx);
            return 1;
        }
        self.inner.place(page, ctx)
    }
    fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        self.inner.on_access(page, addr, write, ctx)
    }
    fn period(&self) -> Option<Period> {
        self.inner.period()
    }
    fn on_period(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        self.inner.on_period(ctx)?;
        let mut moves = Moves::new();
        for o in &ctx.mem.ops {
            if let Op::Move(m) = o {
                assert_eq!(m.by, MoveBy::OsBatch, "Nimble's moves are one OS batch per call");
                moves.push((m.page, m.from, m.to, m.swap));
            }
        }
        let mut seen = self.seen.lock().unwrap();
        seen.moves.push(moves);
        seen.tiers.push(ctx.mem.tier_of().iter().take(ctx.pages).copied().collect());
        Ok(())
    }
    fn report(&self) -> serde_json::Value {
        self.inner.report()
    }
}

/// Runs `spec` (a `nimble:...` spec) wrapped in [`Watch`] on dram-dcpmm with `dram_pages`
/// DRAM frames.
fn watch(input: &TraceInput, dram_pages: u64, slow_first: u64, spec: &str) -> (SimResult, Vec<Vec<TierId>>, Vec<Moves>) {
    let params = Params::parse("nimble", NIMBLE.params, &PolicySpec::parse(spec).unwrap()).unwrap();
    let mut job = Job::new(input, Platform::load("dram-dcpmm").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(dram_pages * 4096))];
    job.paranoid = true;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let r = run_policy(Watch { inner: nimble(&params), slow_first, seen: seen.clone() }, &mut job).unwrap();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (r, seen.tiers, seen.moves)
}

fn dram(tiers: &[TierId]) -> Vec<PageId> {
    tiers.iter().enumerate().filter(|&(_, &t)| t == 0).map(|(p, _)| p as PageId).collect()
}

fn counter(r: &SimResult, k: &str) -> u64 {
    r.stats.policy["counters"][k].as_u64().unwrap_or_else(|| panic!("{k}: {}", r.stats.policy))
}

/// 004 §2.3 (Nimble fills DRAM first and uses the active/inactive lists), exchange rule of
/// `mm_manage`. DRAM holds 2 pages; period 6 accesses.
/// Trace: 0 1 2 3 4 5 | 5 5 5 5 5 5 | 4.
/// * First touch: 0, 1 → DRAM (active list 1, 0: tail 0); 2-5 → DCPMM (active 5 4 3 2).
/// * Call 1 (before access 7): aging deactivates 1 of DRAM's 2 active pages (0) and 2 of
///   DCPMM's 4 (2, 3). Candidates, from DCPMM's active tail: 4, 5. DRAM has no free frame,
///   and its inactive list holds only 0: 4 ⇄ 0 is exchanged, 5 is put back.
///   DRAM {1, 4}; DCPMM inactive 0 3 2, active 5.
/// * Accesses to 5. Call 2 (before access 13): DCPMM's inactive scan looks at 1 page (its
///   tail, 2: unreferenced, stays); its active list (1 page) ages 1/2 = 0; DRAM's active list
///   4 1 deactivates its tail 1. Candidate 5 ⇄ 1. DRAM {4, 5}.
#[test]
fn nimble_exchanges_slow_active_pages_with_fast_inactive_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace: Vec<u64> = (0..6).collect();
    trace.extend([5; 6]);
    trace.push(4);
    let input = write_pages(dir.path(), &trace, None);
    let (r, tiers, moves) = watch(&input, 2, 0, &format!("nimble:period=6,{FREE}"));
    assert_eq!(tiers.len(), 2, "{}", r.stats.policy);
    assert_eq!(dram(&tiers[0]), vec![1, 4]);
    assert_eq!(moves[0], vec![(4, 1, 0, true), (0, 0, 1, true)]);
    assert_eq!(dram(&tiers[1]), vec![4, 5]);
    assert_eq!(moves[1], vec![(5, 1, 0, true), (1, 0, 1, true)]);
    assert_eq!((counter(&r, "exchanges"), counter(&r, "put_back"), counter(&r, "into_free_frames")), (2, 1, 0));
    assert_eq!(counter(&r, "hot_candidates"), 3);
    assert_eq!(r.stats.migration.migrations, 4);
    assert_eq!(counter(&r, "batches"), 2);

    // the same through the registry
    let r = run(&input, "dram-dcpmm", &[(0, Capacity::Bytes(2 * 4096))], &format!("nimble:period=6,{FREE}"));
    assert_eq!((counter(&r, "exchanges"), r.stats.migration.swaps), (2, 2), "{}", r.stats.policy);
}

/// `mm_manage`: candidates go into the fast node's free frames first; only the rest need a
/// cold page to exchange with. DRAM holds 3; pages 0-2 are placed in DCPMM (guided-like),
/// 3, 4 in DRAM: 1 DRAM frame free. Period 5; trace 0 1 2 3 4 | 3.
/// Call 1: aging deactivates DCPMM's active tail 0 (3 pages → 1) and DRAM's 3 (2 → 1).
/// Candidates 1, 2 (DCPMM's active tail): 1 takes the free frame, 2 ⇄ 3 (DRAM's inactive
/// tail). DRAM {1, 2, 4}.
#[test]
fn nimble_promotes_into_free_frames_before_exchanging() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0, 1, 2, 3, 4, 3], None);
    let (r, tiers, moves) = watch(&input, 3, 3, &format!("nimble:period=5,{FREE}"));
    assert_eq!(tiers.len(), 1, "{}", r.stats.policy);
    assert_eq!(moves[0], vec![(1, 1, 0, false), (2, 1, 0, true), (3, 0, 1, true)]);
    assert_eq!(dram(&tiers[0]), vec![1, 2, 4]);
    assert_eq!((counter(&r, "into_free_frames"), counter(&r, "exchanges")), (1, 1));
}

/// 004 §5.2: Nimble's selection "exclusively considers page hotness" — a read-hot and a
/// write-hot page of equal hotness are treated alike. DRAM holds 4, pages 4-7 in DCPMM;
/// pages 6 and 7 are each accessed 8 times, one only by reads, the other only by writes, and
/// then the roles are swapped: every call moves the same pages either way (an r/w-aware
/// policy would favour the written page in one of the two runs).
#[test]
fn nimble_ignores_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace: Vec<u64> = (0..8).collect();
    for _ in 0..8 {
        trace.extend([6, 7]);
    }
    trace.extend(0..8);
    let n = trace.len();
    let runs: Vec<_> = [None, Some(6), Some(7)]
        .iter()
        .map(|w| {
            let writes: Vec<bool> = (0..n).map(|i| (8..24).contains(&i) && Some(trace[i]) == *w).collect();
            let input = write_pages(dir.path(), &trace, Some(&writes));
            watch(&input, 4, 0, &format!("nimble:period=8,{FREE}"))
        })
        .collect();
    assert!(runs[1].0.writes == 8 && runs[2].0.writes == 8);
    assert!(runs[0].2.iter().any(|m| !m.is_empty()), "the example moves pages");
    for (r, tiers, moves) in &runs[1..] {
        assert_eq!(tiers, &runs[0].1, "{}", r.stats.policy);
        assert_eq!(moves, &runs[0].2);
    }
}

/// `managed_pages` caps the pages promoted per call (the launcher's --managed_pages, the
/// syscall's nr_pages). DRAM holds 4 (pages 0-3), DCPMM 4-7; period 8; trace 0..7 | 0.
/// Call 1: aging deactivates DRAM's 0, 1 and DCPMM's 4, 5; candidates from DCPMM's active
/// tail: 6, 7; DRAM's inactive tail: 0, 1. Uncapped: 6 ⇄ 0 and 7 ⇄ 1. Capped at 1: only
/// 6 ⇄ 0 (and, with no free frame, no inactive slow page is taken).
#[test]
fn nimble_respects_the_per_period_cap() {
    let dir = tempfile::tempdir().unwrap();
    let trace: Vec<u64> = (0..8).chain([0]).collect();
    let input = write_pages(dir.path(), &trace, None);
    let (_, tiers, moves) = watch(&input, 4, 0, &format!("nimble:period=8,{FREE}"));
    assert_eq!(moves[0], vec![(6, 1, 0, true), (0, 0, 1, true), (7, 1, 0, true), (1, 0, 1, true)]);
    assert_eq!(dram(&tiers[0]), vec![2, 3, 6, 7]);
    let (r, tiers, moves) = watch(&input, 4, 0, &format!("nimble:period=8,managed_pages=1,{FREE}"));
    assert_eq!(moves[0], vec![(6, 1, 0, true), (0, 0, 1, true)]);
    assert_eq!(dram(&tiers[0]), vec![1, 2, 3, 6]);
    assert_eq!((counter(&r, "hot_candidates"), counter(&r, "cold_candidates"), counter(&r, "hot_and_cold_calls")), (1, 0, 0));
}

/// `mm_manage`: when the request is smaller than the fast node's free frames, inactive slow
/// pages are taken too (`ISOLATE_HOT_AND_COLD_PAGES`), inactive tail first. DRAM holds 4;
/// pages 0-2 in DCPMM, 3 in DRAM: 3 free frames. Period 4; trace 0 1 2 3 | 3.
/// Call 1: aging deactivates DCPMM's 0 (3 → 1). managed_pages=2 < 3 free: candidates 0
/// (inactive tail), then 1 (active tail), both into free frames. Without a cap only the
/// active pages 1, 2 move.
#[test]
fn nimble_takes_cold_slow_pages_when_the_cap_fits_in_free_frames() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0, 1, 2, 3, 3], None);
    let (r, tiers, _) = watch(&input, 4, 3, &format!("nimble:period=4,managed_pages=2,{FREE}"));
    assert_eq!(dram(&tiers[0]), vec![0, 1, 3]);
    assert_eq!((counter(&r, "cold_candidates"), counter(&r, "hot_candidates"), counter(&r, "hot_and_cold_calls")), (1, 1, 1));
    let (_, tiers, _) = watch(&input, 4, 3, &format!("nimble:period=4,{FREE}"));
    assert_eq!(dram(&tiers[0]), vec![1, 2, 3]);
}

/// Defaults and costs: a 5 s period (Nimble's launcher scripts), no cap; with the default
/// costs a call that moves pages pays one kernel entry and one TLB shootdown, whatever the
/// number of pages, and the list aging its pages scanned.
#[test]
fn nimble_defaults_and_batch_costs() {
    let d = &NIMBLE;
    assert_eq!(d.params.iter().find(|p| p.name == "period").unwrap().default, "5s");
    assert_eq!(d.params.iter().find(|p| p.name == "managed_pages").unwrap().default, "0");
    assert!(d.source.contains("ASPLOS 2019"));
    let dir = tempfile::tempdir().unwrap();
    let trace: Vec<u64> = (0..8).chain([0]).collect();
    let input = write_pages(dir.path(), &trace, None);
    let caps = [(0, Capacity::Bytes(4 * 4096))];
    let r = run(&input, "dram-dcpmm", &caps, "nimble:period=8,syscall_ns=1000,tlb_flush_ns=300,lru_scan_ns=10");
    assert_eq!(r.stats.migration.migrations, 4, "{}", r.stats.policy);
    let c = &r.stats.migration.charges;
    assert_eq!((c["OS entry (Nimble mm_manage batch)"].count, c["OS entry (Nimble mm_manage batch)"].halted_ns), (1, 1000.0));
    assert_eq!((c["TLB shootdown (Nimble mm_manage batch)"].count, c["TLB shootdown (Nimble mm_manage batch)"].ns), (1, 300.0));
    // the aging looked at 2 + 2 pages (half of each tier's active list of 4): 40 ns
    assert_eq!(counter(&r, "lru_scanned"), 4);
    assert_eq!(c["LRU scan (Nimble list aging)"].ns, 40.0);
    // the default period does not end within 9 accesses
    let r = run(&input, "dram-dcpmm", &caps, "nimble");
    assert_eq!(counter(&r, "calls"), 0);
}

/// The mechanics' invariants hold at every call on two and three tiers (the three-tier
/// platform's slow tiers 1 and 2 both supply candidates), with periods short enough that a
/// synthetic trace moves pages.
#[test]
fn nimble_keeps_the_invariants_with_short_periods_on_two_and_three_tiers() {
    use tierkit_core::engine::simulate;
    use tierkit_core::trace::synth::{SynthKind, SynthSource, SynthSpec};
    use tierkit_core::trace::tkt::TktWriter;
    use tierkit_core::trace::{Batch, RecordSource};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.tkt");
    let spec = SynthSpec { kind: SynthKind::Zipf, accesses: 40_000, pages: 2_000, seed: 5, write_ratio: 0.3, phases: 3, ..Default::default() };
    let mut src = SynthSource::new(spec).unwrap();
    let mut w = TktWriter::create(&p, src.meta(), true).unwrap();
    let mut b = Batch::default();
    while src.next_batch(&mut b).unwrap() {
        w.write_batch(&b).unwrap();
    }
    w.finish().unwrap();
    let input = TraceInput::new(p);
    for (platform, caps) in
        [("dram-dcpmm", vec![(0, Capacity::Fraction(0.1))]), ("hbm-dram-cxl", vec![(0, Capacity::Fraction(0.1)), (1, Capacity::Fraction(0.3))])]
    {
        let mut job = Job::new(&input, Platform::load(platform).unwrap());
        job.capacity = caps;
        job.paranoid = true;
        let r = simulate(&mut job, &PolicySpec::parse("nimble:period=2000").unwrap()).unwrap();
        assert!(counter(&r, "exchanges") > 0, "{platform}: {}", r.stats.policy);
        assert_eq!(r.stats.migration.promotions + r.stats.migration.demotions, r.stats.migration.migrations);
        assert_eq!(counter(&r, "calls"), 19, "{platform}");
    }
}
