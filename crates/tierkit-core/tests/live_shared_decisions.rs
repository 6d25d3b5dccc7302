//! One implementation serves both (docs/real-linux.md): the daemon policies of `tierkit run` make
//! the simulator's decisions. The same observation sequence goes through the simulator's driver
//! (the engine, on a synthetic trace) and through the live driver
//! (`live::build_decider(...).step(...)`, fed by a replay of that trace as a Linux side
//! would observe it), and the two make the same moves, in the same order.
//!
//! Checked: every policy the registry says deploys as a daemon (the test fails for one with
//! no scenario here): `hyplacer` (seed 004 §4.4: clear-then-delay classification, the mode
//! table, CLOCK demotion, SWITCH), `history` (seed 003 §3.1: the previous period's hottest
//! pages in the fast tier), `nimble` (its LRU aging, slow active pages into free frames or
//! exchanged with the fast inactive tail), `clock-dwf` with `detect=interval` (written slow
//! pages into DRAM, victims by the dirty-bit clock with write history) and `memos` with
//! `balance=off` (write-hot pages into DRAM, cold victims first). Then the live protocol itself: 004 §4.4's
//! clear-then-delay as `clear_bits`/`next_in_ns`, write-intensive pages classified from dirty
//! bits, the fast-tier budget on random observation sequences, failed moves.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use tierkit_core::engine::{run_policy, Job};
use tierkit_core::error::Result;
use tierkit_core::live::{build_decider, live_policies, LiveDecider, LiveMove, MoveResult, Observation, PageObs, Step};
use tierkit_core::mechanics::{Op, TierId};
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::clock_dwf::clock_dwf;
use tierkit_core::policy::hyplacer::hyplacer;
use tierkit_core::policy::memos::memos;
use tierkit_core::policy::nimble::nimble;
use tierkit_core::policy::page_scheduler::{PageScheduler, Source};
use tierkit_core::policy::{lookup, Ctx, Needs, Params, Policy, PolicySpec, Served};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, TraceInput, TraceMeta};
use tierkit_core::units::{Capacity, Period};

const PAGE: u64 = 4096;

fn addr(page: u64) -> u64 {
    0x10000 + page * PAGE
}

/// A move as both drivers report it: (page address, from, to).
type Mv = (u64, TierId, TierId);

/// What the simulator's driver did, as the engine ran it.
#[derive(Default)]
struct Log {
    /// every access: (time ns, page address, write)
    accesses: Vec<(f64, u64, bool)>,
    /// the tier each page was placed in at its first access
    placed: HashMap<u64, TierId>,
    /// the moves the decision code made, in order; within a swap the demotion first, the
    /// order the live side carries a swap out in (so that the fast tier never exceeds its
    /// budget in between)
    moves: Vec<Mv>,
}

/// Any simulator policy, watched: its placements, the accesses it saw, and the moves it
/// made (the mechanics' operations each hook added).
struct Recorded<P: Policy> {
    inner: P,
    log: Arc<Mutex<Log>>,
}

impl<P: Policy> Recorded<P> {
    fn take_moves(&mut self, ctx: &Ctx, from: usize) {
        let ops = &ctx.mem.ops[from..];
        let mut log = self.log.lock().unwrap();
        let mut i = 0;
        while i < ops.len() {
            if let Op::Move(a) = ops[i] {
                let mv = |m: &tierkit_core::mechanics::MigrationOp| (ctx.page_addr(m.page), m.from, m.to);
                if let (true, Some(Op::Move(b))) = (a.swap, ops.get(i + 1)) {
                    let (d, p) = if a.to > a.from { (a, *b) } else { (*b, a) };
                    log.moves.push(mv(&d));
                    log.moves.push(mv(&p));
                    i += 2;
                    continue;
                }
                log.moves.push(mv(&a));
            }
            i += 1;
        }
    }
}

impl<P: Policy> Policy for Recorded<P> {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        self.inner.needs()
    }
    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.inner.init(ctx)
    }
    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        let t = self.inner.place(page, ctx);
        self.log.lock().unwrap().placed.insert(ctx.page_addr(page), t);
        t
    }
    fn on_access(&mut self, page: PageId, a: u64, write: bool, ctx: &mut Ctx) -> Served {
        self.log.lock().unwrap().accesses.push((ctx.now.ns, ctx.page_addr(page), write));
        let n = ctx.mem.ops.len();
        let s = if P::PER_ACCESS { self.inner.on_access(page, a, write, ctx) } else { Served::RESIDENT };
        self.take_moves(ctx, n);
        s
    }
    fn period(&self) -> Option<Period> {
        self.inner.period()
    }
    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        let n = ctx.mem.ops.len();
        self.inner.on_period(ctx)?;
        self.take_moves(ctx, n);
        Ok(())
    }
    fn activity(&self) -> tierkit_core::policy::Activity {
        self.inner.activity()
    }
    fn report(&self) -> Value {
        self.inner.report()
    }
}

/// `dram-dcpmm` with whole-nanosecond costs (so that the recorded times are exact) and a
/// free TLB flush: the simulator starts 004's delay after the clearing walk's cost, the live
/// side when its step returns; with the flush free both start at the activation.
fn platform() -> Platform {
    let mut p = Platform::load("dram-dcpmm").unwrap();
    for (t, (r, w)) in p.tiers.iter_mut().zip([(100.0, 90.0), (300.0, 100.0)]) {
        t.read_latency_ns = r;
        t.write_latency_ns = w;
    }
    p.migration.tlb_shootdown_ns = 0.0;
    p.migration.fault_ns = 2000.0;
    p.migration.per_page_ns = 1000.0;
    p.migration.per_period_ns = 0.0;
    p.migration.copy_from_bandwidth = false;
    p
}

fn trace(dir: &std::path::Path, recs: &[(u64, bool)]) -> TraceInput {
    let p = dir.join("t.tkt");
    let mut w = TktWriter::create(&p, &TraceMeta::default(), true).unwrap();
    for (i, &(a, write)) in recs.iter().enumerate() {
        w.write_access(&Access { addr: a + (i as u64 % 64) * 64, write, size: 64, ..Default::default() }).unwrap();
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn simulate<P: Policy>(inner: P, recs: &[(u64, bool)], fast_pages: u64) -> (Log, Value) {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), recs);
    let mut job = Job::new(&input, platform());
    job.capacity = vec![(0, Capacity::Bytes(fast_pages * PAGE))];
    job.paranoid = true;
    let log = Arc::new(Mutex::new(Log::default()));
    let r = run_policy(Recorded { inner, log: log.clone() }, &mut job).unwrap();
    let log = std::mem::take(&mut *log.lock().unwrap());
    (log, r.stats.policy.clone())
}

/// The live driver's view: a Linux side replaying the recorded run. It observes at the first
/// access at or after each time the decider asked for (what it saw is what happened before
/// that access), places new pages where the kernel did (the simulator's placement), and
/// carries the moves out in order, checking each starts where the page is.
fn replay(log: &Log, dec: &mut dyn LiveDecider, at: impl Fn(usize) -> Option<(usize, u64)>, budget: u64) -> (Vec<Mv>, Vec<Step>) {
    let mut kernel: BTreeMap<u64, TierId> = BTreeMap::new();
    let (mut moves, mut steps) = (Vec::new(), Vec::new());
    let mut i = 0;
    let mut last_t = 0u64;
    let mut due = 0u64;
    let mut k = 0;
    loop {
        // the first access at or after `due` (or the k-th given (access index, time))
        let (j, t) = match at(k) {
            Some(jt) => jt,
            None => match log.accesses[i..].iter().position(|a| a.0 >= due as f64) {
                Some(p) => (i + p, log.accesses[i + p].0 as u64),
                None => break,
            },
        };
        if j >= log.accesses.len() && k > 0 {
            break; // the simulator has no boundary after the last access
        }
        let mut seen: BTreeMap<u64, (u32, bool)> = BTreeMap::new();
        for &(ns, a, w) in &log.accesses[i..j] {
            assert_eq!(ns.fract(), 0.0, "whole-nanosecond times");
            kernel.entry(a).or_insert(log.placed[&a]);
            let e = seen.entry(a).or_default();
            e.0 += 1;
            e.1 |= w;
        }
        let pages = kernel
            .iter()
            .map(|(&a, &tier)| {
                let (n, w) = seen.get(&a).copied().unwrap_or((0, false));
                PageObs { addr: a, tier, referenced: n > 0, dirty: w, accesses: n }
            })
            .collect();
        let step = dec.step(&Observation { t_ns: t, since_clear_ns: t - last_t, pages }).unwrap();
        assert!(step.clear_bits && step.next_in_ns > 0);
        let mut results = Vec::new();
        for m in &step.moves {
            let cur = kernel.get_mut(&m.addr).expect("a move of a page the program has");
            assert_eq!(*cur, m.from, "move {m:?} from where the page is");
            *cur = m.to;
            assert!(kernel.values().filter(|&&t| t == 0).count() as u64 <= budget, "budget");
            moves.push((m.addr, m.from, m.to));
            results.push(MoveResult { addr: m.addr, to: m.to, errno: 0 });
        }
        dec.moved(&results);
        last_t = t;
        due = t + step.next_in_ns;
        steps.push(step);
        i = j;
        k += 1;
    }
    (moves, steps)
}

/// The live driver made the simulator's moves, in the same order.
fn assert_same_moves(what: &str, live: &[Mv], sim: &[Mv]) {
    let first = live.iter().zip(sim).position(|(a, b)| a != b);
    assert!(
        first.is_none() && live.len() == sim.len(),
        "{what}: the same moves in the same order; first difference at {first:?} of {} live / {} simulated",
        live.len(),
        sim.len()
    );
}

/// A seeded synthetic program over `pages` pages: it maps them all first (before the first
/// activation), then runs phases with a shifting hot set, some pages written, some only read.
///
/// Mapping first avoids the one place where the two drivers see different pages: the engine
/// places a page at its first access and then runs the hooks, so a PageFind that runs before
/// that access already walks the new page (cold, no bits), while live that page is not
/// mapped until the access, and the observation taken then does not show it.
fn program(seed: u64, pages: u64, n: usize) -> Vec<(u64, bool)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut recs: Vec<(u64, bool)> = (0..pages).map(|p| (addr(p), false)).collect();
    let mut hot: Vec<u64> = (0..pages / 4).map(|_| rng.random_range(0..pages)).collect();
    for i in 0..n {
        if i % (n / 5) == 0 {
            hot = (0..pages / 4).map(|_| rng.random_range(0..pages)).collect();
        }
        let p = if rng.random_bool(0.8) { hot[rng.random_range(0..hot.len())] } else { rng.random_range(0..pages) };
        // a third of the pages take writes
        let write = p % 3 == 0 && rng.random_bool(0.5);
        recs.push((addr(p), write));
    }
    recs
}

fn hyplacer_sim(spec: &str) -> tierkit_core::policy::hyplacer::HyPlacer {
    let info = lookup("hyplacer").unwrap();
    hyplacer(&Params::parse("hyplacer", info.params, &PolicySpec::parse(spec).unwrap()).unwrap()).unwrap()
}

/// The control loop's activations as both report them: (mode, DRAM usage, pages moved).
fn activations(report: &Value) -> Vec<(String, f64, u64)> {
    report["timeseries"]["rows"].as_array().unwrap().iter().map(|r| (r[1].as_str().unwrap().into(), r[2].as_f64().unwrap(), r[4].as_u64().unwrap())).collect()
}

/// 004 §4.4 through both drivers: the same trace, the same referenced/dirty bits (live, as
/// DAMON and soft-dirty would give them per window), the same activations, modes, PageFinds,
/// CLOCK victims and exchanges: the same moves in the same order. With the write threshold
/// at 0 MB/s the simulator's PCM counter and the live soft-dirty estimate agree on "DCPMM
/// written or not" in every interval, so the modes include PROMOTE_INT and SWITCH; with a
/// high threshold, PROMOTE and DEMOTE.
fn hyplacer_scenarios() -> usize {
    let base = "hyplacer:interval=20us,delay=5us,walk_ns_per_pte=0,counter_read_ns=0";
    let mut modes_seen = std::collections::BTreeSet::new();
    let mut total = 0;
    // placement is the kernel's live (an input of the replay, as the simulator placed):
    // with placement=dcpmm the simulator starts with DRAM empty, and promotes
    for (seed, extra, fast, placement) in [
        (1, "write_threshold_mb_per_s=0", 16, "dram-first"),
        (2, "write_threshold_mb_per_s=1e6,dram_target=0.75,dram_limit=0.8", 16, "dram-first"),
        (3, "write_threshold_mb_per_s=0,max_pages=6", 12, "dcpmm"),
        (4, "write_threshold_mb_per_s=1e6,dram_target=0.5,dram_limit=0.75", 20, "dcpmm"),
    ] {
        let spec = format!("{base},{extra}");
        let recs = program(seed, 64, 8000);
        let (log, sim) = simulate(hyplacer_sim(&format!("{spec},placement={placement}")), &recs, fast);
        let mut dec = build_decider(&PolicySpec::parse(&spec).unwrap(), fast, PAGE).unwrap();
        let (live, _) = replay(&log, dec.as_mut(), |_| None, fast);
        let rep = dec.report();
        assert!(!log.moves.is_empty(), "{spec}: the scenario moves pages");
        total += log.moves.len();
        assert_same_moves(&spec, &live, &log.moves);
        assert_eq!(activations(&rep), activations(&sim), "{spec}: the same activations");
        assert_eq!(rep["stats"]["classified"], sim["stats"]["classified"], "{spec}");
        assert_eq!(rep["stats"]["dram_walk"], sim["stats"]["dram_walk"], "{spec}");
        for (m, _, _) in activations(&sim) {
            modes_seen.insert(m);
        }
    }
    assert!(total > 200, "{total} moves compared");
    for m in ["promote", "promote_int", "switch", "demote"] {
        assert!(modes_seen.contains(m), "the scenarios exercise {m}: {modes_seen:?}");
    }
    total
}

/// 003 §3.1 through both drivers: per period, the previous period's counts rank the pages,
/// the top ones go to the fast tier in place of LRU ones. The live counts are DAMON's per
/// window; here they are the exact counts of the period, and each period touches its pages
/// in ascending address order first and last (DAMON cannot tell which page of a window was
/// accessed last; the live driver takes the higher address as the more recent), so that the
/// simulator's recency order is the live one.
fn history_scenarios() -> usize {
    let (pages, fast, per) = (40u64, 10u64, 12usize);
    let mut total = 0;
    for (seed, bins) in [(5u64, 0u32), (6, 16), (7, 1)] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut recs = Vec::new();
        let extra = 3 * per;
        let n = 2 * per + extra; // accesses per period
        for _ in 0..30 {
            let mut set: Vec<u64> = Vec::new();
            while set.len() < per {
                let p = rng.random_range(0..pages);
                if !set.contains(&p) {
                    set.push(p);
                }
            }
            set.sort();
            let mut more = vec![0usize; per];
            for _ in 0..extra {
                more[rng.random_range(0..per)] += 1;
            }
            let sweep = |recs: &mut Vec<(u64, bool)>| recs.extend(set.iter().map(|&p| (addr(p), false)));
            sweep(&mut recs);
            for r in 0..*more.iter().max().unwrap() {
                recs.extend(set.iter().zip(&more).filter(|(_, &m)| m > r).map(|(&p, _)| (addr(p), false)));
            }
            sweep(&mut recs);
        }
        let period = n as u64;
        let sched = PageScheduler::new(Source::History, Period::Accesses(period), bins, false);
        let (log, sim) = simulate(sched, &recs, fast);
        let spec = format!("history:period=1ms,bins={bins}");
        let mut dec = build_decider(&PolicySpec::parse(&spec).unwrap(), fast, PAGE).unwrap();
        // one observation per simulated period, at t = k ms; the first at the start
        let (live, steps) = replay(&log, dec.as_mut(), |k| Some((k * n, k as u64 * 1_000_000)), fast);
        let rep = dec.report();
        assert!(log.moves.len() > 20, "bins={bins}: the scenario moves pages ({})", log.moves.len());
        assert_same_moves(&format!("bins={bins}"), &live, &log.moves);
        assert_eq!(rep["scheduler"], sim["scheduler"], "bins={bins}");
        assert!(steps.iter().all(|s| s.next_in_ns == 1_000_000), "one step per period");
        total += log.moves.len();
    }
    total
}

/// The policies [`tierkit_core::live::LivePeriodic`] drives: the simulator's policy value,
/// built by the registry's constructor from `spec`, and the live one from the same spec, on
/// the same seeded program; the same moves in the same order, and the same decision counters
/// (`keys` of the policy's report).
fn periodic_scenarios(name: &str) -> usize {
    let (specs, keys): (&[&str], &[&str]) = match name {
        "nimble" => (&["nimble:period=20us", "nimble:period=30us,new_pages=inactive", "nimble:period=20us,managed_pages=3"], &["counters", "lru"]),
        "clock-dwf" => (
            &[
                "clock-dwf:detect=interval,interval=20us",
                "clock-dwf:detect=interval,interval=50us,expiration=0",
                "clock-dwf:detect=interval,interval=10us,hot_threshold=2,expiration=3",
            ],
            &[],
        ),
        "memos" => (&["memos:balance=off,period=20us", "memos:balance=off,period=60us,classifications=3,max_pages=5"], &[]),
        other => panic!("no scenario for daemon policy {other}"),
    };
    let mut total = 0;
    for (i, spec) in specs.iter().enumerate() {
        let ps = PolicySpec::parse(spec).unwrap();
        let params = Params::parse(name, lookup(name).unwrap().params, &ps).unwrap();
        let recs = program(20 + i as u64, 64, 8000);
        let fast = 16;
        let (log, sim) = match name {
            "nimble" => simulate(nimble(&params), &recs, fast),
            "clock-dwf" => simulate(clock_dwf(&params), &recs, fast),
            _ => simulate(memos(&params), &recs, fast),
        };
        let mut dec = build_decider(&ps, fast, PAGE).unwrap();
        let (live, _) = replay(&log, dec.as_mut(), |_| None, fast);
        let rep = dec.report();
        assert!(log.moves.len() > 20, "{spec}: the scenario moves pages ({})", log.moves.len());
        assert_same_moves(spec, &live, &log.moves);
        let stats = |r: &Value| match name {
            "clock-dwf" => {
                let c = &r["clock_dwf"];
                ["promoted", "demoted", "replacements", "hand_steps", "passed_dirty", "passed_history", "interval_looks", "interval_written"]
                    .map(|k| c[k].clone())
                    .to_vec()
            }
            "memos" => {
                let c = &r["memos"];
                ["walks", "cycles", "write_hot", "read_hot", "cold", "promoted_write_hot", "evicted_cold", "evicted_read_hot", "capped"]
                    .map(|k| c[k].clone())
                    .to_vec()
            }
            _ => keys.iter().map(|k| r[*k].clone()).collect(),
        };
        assert_eq!(stats(&rep), stats(&sim), "{spec}: the same decisions");
        total += log.moves.len();
    }
    total
}

/// One implementation, two drivers, for every daemon policy of the registry (as the
/// invariant tests iterate over the registry): a new daemon policy fails here until it has a
/// scenario.
#[test]
fn every_daemon_policy_makes_the_same_moves_in_the_simulator_and_live() {
    let names = live_policies();
    for want in ["history", "hyplacer", "nimble", "clock-dwf", "memos"] {
        assert!(names.contains(&want), "{want} runs live: {names:?}");
    }
    for name in names {
        let moves = match name {
            "hyplacer" => hyplacer_scenarios(),
            "history" => history_scenarios(),
            other => periodic_scenarios(other),
        };
        eprintln!("{name}: {moves} moves compared");
    }
}

// ------------------------------------------------------------------ the live protocol

/// A daemon policy's spec with its period (`interval` or `period`, the key `tierkit run
/// --interval` sets) at `every`, and the extra arguments each test gives some of them.
fn live_spec(name: &str, every: &str, extra: &[(&str, &str)]) -> PolicySpec {
    let key = if lookup(name).unwrap().params.iter().any(|p| p.name == "interval") { "interval" } else { "period" };
    let mut s = format!("{name}:{key}={every}");
    for (n, e) in extra {
        if *n == name {
            s = format!("{s},{e}");
        }
    }
    PolicySpec::parse(&s).unwrap()
}

fn obs(t_ns: u64, pages: &[(u64, TierId, bool, bool, u32)]) -> Observation {
    Observation {
        t_ns,
        since_clear_ns: 0,
        pages: pages.iter().map(|&(p, tier, r, d, n)| PageObs { addr: addr(p), tier, referenced: r, dirty: d, accesses: n }).collect(),
    }
}

fn mv(p: u64, from: TierId, to: TierId) -> LiveMove {
    LiveMove { addr: addr(p), from, to }
}

/// 004 §4.4, live: an activation in a promoting mode clears the bits (DCPMM_CLEAR) and looks
/// again `delay` later; that observation's bits cover exactly the delay window, the PageFind
/// runs on them (write-intensive first, then read-intensive, then cold), and the next
/// activation comes `interval - delay` later. A non-promoting activation comes back after
/// `interval`.
#[test]
fn hyplacer_live_clears_then_waits_the_delay_then_finds() {
    let spec = PolicySpec::parse("hyplacer:interval=1ms,delay=100us,write_threshold_mb_per_s=1e6").unwrap();
    let mut d = build_decider(&spec, 10, PAGE).unwrap();
    let (ms, us) = (1_000_000u64, 1_000u64);
    // the program starts: first touches, no activation before the first interval ends
    let s = d.step(&obs(0, &[])).unwrap();
    assert_eq!((s.moves.len(), s.clear_bits, s.next_in_ns), (0, true, ms));
    // 2 pages in DRAM, 6 in DCPMM: usage 0.2 < 0.95, PROMOTE: clear, then wait the delay
    let all: Vec<(u64, TierId, bool, bool, u32)> = (0..8).map(|p| (p, (p >= 2) as TierId, true, true, 3)).collect();
    let s = d.step(&obs(ms, &all)).unwrap();
    assert_eq!((s.moves.len(), s.clear_bits, s.next_in_ns), (0, true, 100 * us), "DCPMM_CLEAR, then the delay");
    // in the delay window page 5 was written, pages 3 and 7 read, the rest of DCPMM cold
    let win: Vec<_> = (0..8).map(|p| (p, (p >= 2) as TierId, p == 5 || p == 3 || p == 7, p == 5, 0)).collect();
    let s = d.step(&obs(ms + 100 * us, &win)).unwrap();
    // target 95% of 10 = 10 pages: room for 8, 6 in DCPMM: write-intensive, read, cold
    assert_eq!(s.moves, vec![mv(5, 1, 0), mv(3, 1, 0), mv(7, 1, 0), mv(2, 1, 0), mv(4, 1, 0), mv(6, 1, 0)]);
    assert_eq!((s.clear_bits, s.next_in_ns), (true, 900 * us), "interval - delay to the next activation");
    d.moved(&s.moves.iter().map(|m| MoveResult { addr: m.addr, to: m.to, errno: 0 }).collect::<Vec<_>>());
    let r = d.report();
    assert_eq!(r["stats"]["classified"], serde_json::json!({"write_intensive": 1, "read_intensive": 2, "cold": 3}), "from the delay window's bits");
    // everything in DRAM (8 of 10 pages, below target), nothing in DCPMM: no clear, no delay
    let fast: Vec<_> = (0..8).map(|p| (p, 0, true, false, 1)).collect();
    let s = d.step(&obs(2 * ms, &fast)).unwrap();
    assert_eq!((s.moves.len(), s.next_in_ns), (0, ms), "nothing to find: back after an interval");
    // a late observation keeps the grid: 2.3 ms -> the activation at 3 ms is 0.7 ms away
    let s = d.step(&obs(2 * ms + 300 * us, &fast)).unwrap();
    assert_eq!(s.next_in_ns, 700 * us);
    assert_eq!(d.report()["timeseries"]["rows"].as_array().unwrap().len(), 2, "no activation between grid points");
}

/// 004 §4.4 classifies a DCPMM page written in the delay window as write-intensive: live,
/// from its soft-dirty bit, whatever DAMON said (a written page was accessed, even if
/// DAMON's sampling missed it); SWITCH exchanges it with a CLOCK-cold DRAM page.
#[test]
fn hyplacer_live_write_intensive_pages_come_from_dirty_bits() {
    let spec = PolicySpec::parse("hyplacer:interval=1ms,delay=100us,write_threshold_mb_per_s=1").unwrap();
    let mut d = build_decider(&spec, 4, PAGE).unwrap();
    let ms = 1_000_000u64;
    d.step(&obs(0, &[])).unwrap();
    // DRAM full (4 of 4), DCPMM pages 4..8 written hard: the estimate is far above 1 MB/s
    // DRAM pages 0, 1 referenced since the start, 2 and 3 not (cold for the CLOCK hand)
    let w: Vec<_> = (0..8).map(|p| (p, (p >= 4) as TierId, !(2..4).contains(&p), p >= 4, 5)).collect();
    let s = d.step(&obs(ms, &w)).unwrap();
    assert_eq!(s.next_in_ns, 100_000, "SWITCH promotes: clear, then the delay");
    let r = d.report();
    // 4 dirty pages of 4 KiB over 1 ms: 16.384 MB/s
    assert!((r["live"]["steps"]["last_write_estimate_mb_per_s"].as_f64().unwrap() - 16.384).abs() < 1e-9, "{}", r["live"]);
    // in the delay window: page 6 dirty but DAMON saw nothing, page 4 read; DRAM pages 0, 1
    // referenced again
    let win: Vec<_> = (0..8).map(|p| (p, (p >= 4) as TierId, p == 4 || p < 2, p == 6, 0)).collect();
    let s = d.step(&obs(ms + 100_000, &win)).unwrap();
    // write-intensive first (6), then read-intensive (4); each with a cold DRAM page (2, 3);
    // the demotion of each swap first
    assert_eq!(s.moves, vec![mv(2, 0, 1), mv(6, 1, 0), mv(3, 0, 1), mv(4, 1, 0)]);
    let r = d.report();
    assert_eq!(r["stats"]["classified"]["write_intensive"], 1);
    assert_eq!(r["stats"]["switch"]["switched"], 2);
}

/// A move that failed leaves the page where it was: the mirror puts it back (the next
/// observation, which shows it there, is no surprise), and the next decisions start from
/// there (docs/real-linux.md: failures counted, not fatal).
#[test]
fn failed_moves_keep_the_page_in_place() {
    for name in live_policies() {
        let spec = live_spec(name, "1ms", &[("history", "bins=0"), ("hyplacer", "delay=100us,write_threshold_mb_per_s=1e6")]);
        let mut d = build_decider(&spec, 4, PAGE).unwrap();
        let ms = 1_000_000u64;
        d.step(&obs(0, &[])).unwrap();
        // 6 pages, all on the slow tier, all hot (4 of them written, for clock-dwf, which
        // would bring every written page in): each policy promotes 4 of them, nimble 3 (its
        // list aging first deactivates half of the slow active list: 004 §5.1's launcher)
        let want: u64 = if name == "nimble" { 3 } else { 4 };
        let dirty = |p: u64| name != "clock-dwf" || p < 4;
        let hot: Vec<_> = (0..6).map(|p| (p, 1, true, dirty(p), 10 + p as u32)).collect();
        let mut s = d.step(&obs(ms, &hot)).unwrap();
        let mut t = ms;
        while s.moves.is_empty() {
            t += s.next_in_ns;
            s = d.step(&obs(t, &hot)).unwrap();
        }
        assert_eq!(s.moves.len() as u64, want, "{name}: {:?}", s.moves);
        // the first promotion fails (EBUSY), the others succeed
        let res: Vec<_> = s.moves.iter().enumerate().map(|(i, m)| MoveResult { addr: m.addr, to: m.to, errno: if i == 0 { 16 } else { 0 } }).collect();
        d.moved(&res);
        let r = d.report();
        assert_eq!(
            (r["live"]["fast_pages"].as_u64(), r["live"]["slow_pages"].as_u64()),
            (Some(want - 1), Some(7 - want)),
            "{name}: the failed page stayed slow"
        );
        assert_eq!(r["live"]["mirror"]["moves_failed"]["16"], 1, "{name}");
        let failed = s.moves[0].addr;
        let after: Vec<_> = (0..6)
            .map(|p| {
                let on_fast = s.moves.iter().any(|m| m.addr == addr(p) && m.addr != failed);
                (p, (!on_fast) as TierId, true, dirty(p), 10 + p as u32)
            })
            .collect();
        d.step(&obs(t + s.next_in_ns, &after)).unwrap();
        assert_eq!(d.report()["live"]["mirror"]["relocated"], 0, "{name}: the mirror already had every page where the kernel has it");
    }
}

/// The budget (docs/real-linux.md: "tierkit never puts more of the program on the fast node than
/// that"): on random observation sequences — pages appearing and disappearing, the kernel
/// putting pages on the fast node beyond the budget, random bits and counts, moves failing
/// at random — every step's moves, carried out in order, start from where each page is, and
/// once the over-budget pages are demoted (they come first) never take the fast tier past
/// the budget; the mirror matches the kernel whenever no move failed.
#[test]
fn the_budget_is_never_exceeded_on_random_observations() {
    for name in live_policies() {
        for seed in 0..12u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed * 7 + 1);
            let budget = rng.random_range(0..12u64);
            let spec =
                live_spec(name, "1ms", &[("history", "bins=4"), ("hyplacer", "delay=200us,write_threshold_mb_per_s=0.5,dram_target=0.7,dram_limit=0.8")]);
            let mut d = build_decider(&spec, budget, PAGE).unwrap();
            let mut kernel: BTreeMap<u64, TierId> = BTreeMap::new();
            let mut t = 0u64;
            for _ in 0..150 {
                // the program maps and unmaps; the kernel places first touches anywhere
                for _ in 0..rng.random_range(0..4) {
                    kernel.entry(addr(rng.random_range(0..48))).or_insert(rng.random_range(0..2));
                }
                if rng.random_bool(0.2) && !kernel.is_empty() {
                    let k = *kernel.keys().nth(rng.random_range(0..kernel.len())).unwrap();
                    kernel.remove(&k);
                }
                let pages: Vec<PageObs> = kernel
                    .iter()
                    .map(|(&a, &tier)| {
                        let n = if rng.random_bool(0.4) { rng.random_range(0..20) } else { 0 };
                        PageObs { addr: a, tier, referenced: n > 0, dirty: n > 0 && rng.random_bool(0.3), accesses: n }
                    })
                    .collect();
                let fast0 = kernel.values().filter(|&&x| x == 0).count() as u64;
                let s = d.step(&Observation { t_ns: t, since_clear_ns: 0, pages }).unwrap();
                let over = fast0.saturating_sub(budget) as usize;
                assert!(s.moves[..over.min(s.moves.len())].iter().all(|m| m.from == 0 && m.to == 1), "{name} seed {seed}: over-budget pages demoted first");
                let mut fast = fast0;
                let mut results = Vec::new();
                let mut failed_pages: Vec<u64> = Vec::new();
                for (i, m) in s.moves.iter().enumerate() {
                    let mut errno = if rng.random_bool(0.1) { 16 } else { 0 };
                    if failed_pages.contains(&m.addr) {
                        errno = 22; // an earlier move of this page failed: it is not where the decider thought
                    } else {
                        assert_eq!(kernel[&m.addr], m.from, "{name} seed {seed}: {m:?}");
                    }
                    if errno == 0 && m.to == 0 && fast >= budget {
                        // the Linux side's own guard; only a failure earlier in the step can lead here
                        assert!(!failed_pages.is_empty(), "{name} seed {seed}: a promotion past the budget ({fast} of {budget})");
                        errno = -1;
                    }
                    if errno == 0 {
                        kernel.insert(m.addr, m.to);
                        fast = if m.to == 0 { fast + 1 } else { fast - 1 };
                    } else {
                        failed_pages.push(m.addr);
                    }
                    if i + 1 >= over && failed_pages.is_empty() {
                        assert!(fast <= budget, "{name} seed {seed}: fast tier past the budget ({fast} > {budget})");
                    }
                    results.push(MoveResult { addr: m.addr, to: m.to, errno });
                }
                let any_failed = !failed_pages.is_empty();
                d.moved(&results);
                let r = d.report();
                assert!(r["live"]["fast_pages"].as_u64().unwrap() <= budget);
                if !any_failed {
                    assert_eq!(
                        r["live"]["fast_pages"].as_u64().unwrap(),
                        kernel.values().filter(|&&x| x == 0).count() as u64,
                        "{name} seed {seed}: the mirror is the kernel's placement"
                    );
                }
                t += s.next_in_ns.min(rng.random_range(1..400_000));
            }
        }
    }
}

/// Bad specs: one clear line naming the key.
#[test]
fn specs_that_cannot_run_live_are_refused_with_the_key() {
    let e = |s: &str| build_decider(&PolicySpec::parse(s).unwrap(), 8, PAGE).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e("oracle").contains("cannot run as a daemon policy"), "{}", e("oracle"));
    assert!(e("no-such-policy").contains("unknown policy"));
    assert!(e("history:period=500").contains("history:period"), "{}", e("history:period=500"));
    assert!(e("history:compat=cori-sim").contains("history:compat"));
    assert!(e("hyplacer:placement=dcpmm").contains("hyplacer:placement"));
    assert!(e("hyplacer:interval=1ms,delay=2ms").contains("hyplacer:delay"));
    assert!(e("nimble:period=500").contains("nimble:period"), "{}", e("nimble:period=500"));
    assert!(e("clock-dwf:detect=fault").contains("clock-dwf:detect"), "{}", e("clock-dwf:detect=fault"));
    assert!(e("memos:balance=counters").contains("memos:balance"), "{}", e("memos:balance=counters"));
    // the live form, when not given, is said in a note
    let d = build_decider(&PolicySpec::parse("clock-dwf").unwrap(), 8, PAGE).unwrap();
    assert!(d.notes().iter().any(|n| n.contains("detect=interval")), "{:?}", d.notes());
    assert!(build_decider(&PolicySpec::parse("memos:balance=off").unwrap(), 8, PAGE).unwrap().notes().is_empty());
    // the default period (1000 accesses) maps to 100 ms live
    let mut d = build_decider(&PolicySpec::parse("history").unwrap(), 8, PAGE).unwrap();
    assert_eq!(d.step(&obs(0, &[])).unwrap().next_in_ns, 100_000_000);
    let bad = Observation {
        t_ns: 1,
        since_clear_ns: 0,
        pages: vec![
            PageObs { addr: addr(2), tier: 0, referenced: false, dirty: false, accesses: 0 },
            PageObs { addr: addr(1), tier: 0, referenced: false, dirty: false, accesses: 0 },
        ],
    };
    assert!(d.step(&bad).unwrap_err().to_string().contains("address order"));
}

/// The rule for pages the kernel put on the fast node beyond the budget (the program's own
/// first touches): they are demoted first, before the policy decides, the least accessed
/// first, and among equals the highest address first; the mirror then holds the budget.
#[test]
fn pages_over_the_budget_are_demoted_least_accessed_then_highest_address_first() {
    for name in live_policies() {
        let spec = live_spec(name, "1ms", &[("hyplacer", "delay=100us")]);
        let mut d = build_decider(&spec, 2, PAGE).unwrap();
        // five pages on the fast node, budget two: pages 1 and 3 idle, page 4 read once,
        // page 0 and 2 busy
        let s = d
            .step(&obs(0, &[(0, 0, true, true, 9), (1, 0, false, false, 0), (2, 0, true, false, 7), (3, 0, false, false, 0), (4, 0, true, false, 1)]))
            .unwrap();
        assert_eq!(s.moves[..3], [mv(3, 0, 1), mv(1, 0, 1), mv(4, 0, 1)], "{name}");
        assert!(s.moves[3..].iter().all(|m| m.to == 1), "{name}: nothing promoted past the budget: {:?}", s.moves);
        let r = d.report();
        assert_eq!(r["live"]["fast_pages"].as_u64().unwrap() as usize, 2 - s.moves[3..].len(), "{name}");
        assert_eq!(r["live"]["mirror"]["over_budget_demoted"], 3, "{name}");
    }
}
