//! Policies keep their contracts, and models match hand-computed figures: the on-the-fly
//! migration policies of seed 001 (`otf`, `otf-adaptive`, `otf-reverse`): migration when a
//! count reaches the threshold (§2.1), one-way and two-way moves (§2.2), the ReMap table and
//! address reconciliation (§2.1, §2.3, §2.4), the adaptive algorithms (§3.1, §3.2, §5.4,
//! Algorithms 1–3), reverse migration (§3.3, §5.5), and the engine's invariants.
//!
//! Hand-worked traces run on `dram-pmem` (DRAM 50 ns, 10 GB/s; PMEM 150 ns, 3.7 GB/s; CPU at
//! 3.2 GHz, so the 10-cycle ReMap lookup adds 3.125 ns to every access) with the `simple`
//! model. Pages get ids in order of first touch; every trace touches pages 0..7 first, so the
//! ids are the labels, and the 4/4 interleave of 001 §4.1 puts 0–3 in DRAM and 4–7 in PMEM.

mod common;
use std::sync::mpsc;

use tierkit_core::engine::{run_policy, simulate, Job, SimResult, TraceOpener};
use tierkit_core::mechanics::TierId;
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::otf::{self, adapt, AdaptState, Algorithm, Bounds, Otf, Rule, WindowObs};
use tierkit_core::policy::{Ctx, Needs, Policy, PolicySpec, Served, REGISTRY};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::synth::{SynthKind, SynthSpec};
use tierkit_core::units::Capacity;

const PAGE: u64 = 4096;

fn pages(n: u64) -> Vec<(usize, Capacity)> {
    vec![(0, Capacity::Bytes(n * PAGE))]
}

fn job<'a>(input: &'a dyn TraceOpener, platform: &str, caps: &[(usize, Capacity)], timing: TimingKind) -> Job<'a> {
    let mut job = Job::new(input, Platform::load(platform).unwrap());
    job.capacity = caps.to_vec();
    job.timing = timing;
    job.paranoid = true;
    job.read_ahead = false;
    job
}

fn sim(input: &dyn TraceOpener, platform: &str, caps: &[(usize, Capacity)], timing: TimingKind, spec: &str) -> SimResult {
    simulate(&mut job(input, platform, caps, timing), &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn run(trace: &[u64], caps: &[(usize, Capacity)], spec: &str) -> SimResult {
    let dir = tempfile::tempdir().unwrap();
    let input = common::write_pages(dir.path(), trace, None);
    sim(&input, "dram-pmem", caps, TimingKind::Simple, spec)
}

fn counter(r: &SimResult, k: &str) -> f64 {
    r.stats.policy["counters"][k].as_f64().unwrap_or_else(|| panic!("no counters.{k} in {}", r.stats.policy))
}

fn policy(r: &SimResult, k: &str) -> serde_json::Value {
    r.stats.policy[k].clone()
}

/// The pages 0..7 once each, then `rest`.
fn trace(rest: &[u64]) -> Vec<u64> {
    (0..8).chain(rest.iter().copied()).collect()
}

/// Runs an on-the-fly policy and reports the tier of `watch`'s pages after the accesses
/// listed in `at` (after the policy's hook, so moves it started there are included).
struct Probe {
    inner: Otf,
    watch: Vec<PageId>,
    at: Vec<u64>,
    tx: mpsc::Sender<Vec<TierId>>,
}

impl Policy for Probe {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        self.inner.needs()
    }
    fn init(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        self.inner.init(ctx)
    }
    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.inner.place(page, ctx)
    }
    fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        let s = self.inner.on_access(page, addr, write, ctx);
        if self.at.contains(&ctx.now.accesses) {
            self.tx.send(self.watch.iter().map(|&p| ctx.mem.tier(p)).collect()).unwrap();
        }
        s
    }
    fn report(&self) -> serde_json::Value {
        self.inner.report()
    }
    fn input_warnings(&self, digest: Option<&str>, ran: &tierkit_core::policy::RunExtent) -> Vec<String> {
        self.inner.input_warnings(digest, ran)
    }
}

/// The tiers of `watch` after the accesses `at` of `trace` under `spec`, and the result.
fn tiers_at(trace: &[u64], caps: &[(usize, Capacity)], spec: &str, watch: &[PageId], at: &[u64]) -> (Vec<Vec<TierId>>, SimResult) {
    let dir = tempfile::tempdir().unwrap();
    let input = common::write_pages(dir.path(), trace, None);
    let (tx, rx) = mpsc::channel();
    let p = Probe { inner: otf::from_spec(spec).unwrap(), watch: watch.to_vec(), at: at.to_vec(), tx };
    let r = run_policy(p, &mut job(&input, "dram-pmem", caps, TimingKind::Simple)).unwrap();
    (at.iter().map(|_| rx.recv().unwrap()).collect(), r)
}

/// The tiers of `watch` at the end of `trace` under `spec`, and the result.
fn tiers_after(trace: &[u64], caps: &[(usize, Capacity)], spec: &str, watch: &[PageId]) -> (Vec<TierId>, SimResult) {
    let (mut t, r) = tiers_at(trace, caps, spec, watch, &[trace.len() as u64 - 1]);
    (t.pop().unwrap(), r)
}

// ------------------------------------------------------------------ §2.1-2.2: migration

/// 001 §2.1: a slow page is migrated as soon as its count reaches the threshold; the move
/// starts right after that access (MigC waits for the access it has issued), so the
/// crossing access is served by PMEM and the next accesses by DRAM.
///
/// Fast tier of 8 pages (4 free after the interleave). Trace: 0..7, then 4 4 0 4 4.
/// threshold=3: page 4's count is 1 (first touch), 2, 3 at access 9 → pending; access 10
///   (page 0) starts a one-way move (a free DRAM frame); accesses 11 and 12 hit DRAM.
///   DRAM serves 0-3, 10, 11, 12 = 7 of 13; PMEM 6 (4-7, 8, 9).
///   Runtime (simple): 7·50 + 6·150 + 13·3.125 (lookups) = 1290.625 ns; the bandwidth floor,
///   PMEM's (6·64 + 4096) B / 3.7 GB/s = 1210.8 ns, is below it.
/// threshold=4: the count reaches 4 at access 11; access 12 (page 4 itself) starts the move
///   and is still served by PMEM: DRAM 5, one migration.
/// threshold=5: never reached: DRAM 5, no migration.
#[test]
fn otf_migrates_exactly_when_the_count_reaches_the_threshold() {
    let t = trace(&[4, 4, 0, 4, 4]);
    let r = run(&t, &pages(8), "otf:threshold=3,ar=none");
    assert_eq!((r.migrations, r.fast_hit_ratio), (1, 7.0 / 13.0));
    assert_eq!(r.runtime_ns, 1290.625);
    assert_eq!(counter(&r, "migrations_one_way"), 1.0);
    assert_eq!(r.stats.migration.by_hardware, 1, "MigC moves the page (MoveBy::Hw)");
    let r = run(&t, &pages(8), "otf:threshold=4,ar=none");
    assert_eq!((r.migrations, r.fast_hit_ratio), (1, 5.0 / 13.0));
    let r = run(&t, &pages(8), "otf:threshold=5,ar=none");
    assert_eq!((r.migrations, r.fast_hit_ratio), (0, 5.0 / 13.0));
}

/// 001 §2.2: with no free fast frame, the hot page swaps with the least-recently-used fast
/// page. Fast tier of 4 pages (0-3). Trace: 0..7, 1 2 3 (page 0 is now the LRU), 4 4
/// (threshold 3 reached), 1 (the swap starts): page 4 in DRAM, page 0 in PMEM.
#[test]
fn otf_swaps_with_the_lru_fast_page_when_the_fast_tier_is_full() {
    let mut rest = vec![1, 2, 3, 4, 4, 1];
    rest.extend([1; 30]); // until the copies are done
    let (tiers, r) = tiers_after(&trace(&rest), &pages(4), "otf:threshold=3,ar=none", &[4, 0, 1, 2, 3]);
    assert_eq!(tiers, [0, 1, 0, 0, 0]);
    assert_eq!((r.migrations, r.stats.migration.swaps), (2, 1));
    assert_eq!(counter(&r, "migrations_two_way"), 1.0);
    assert_eq!(counter(&r, "pages_migrated"), 2.0);
}

/// 001 §2.1: while the controller is busy (one page at a time), a page reaching the
/// threshold waits as the pending candidate and moves when the controller is free; of two
/// such pages, the one with the higher count is taken.
/// Fast tier of 8 pages. Trace: 0..7, 4 4 (page 4 pending), 0 (its move starts: a PMEM→DRAM
/// copy of 4096 B at 3.7 GB/s takes 1107 ns), 5 5 6 6 6 (pages 5 and 6 reach 3 while it
/// copies; 6 reaches 4), then DRAM accesses until the copy is done: page 6 moves next. Page
/// 5 is no longer the candidate; as in the authors' model it becomes one again at its next
/// access, and moves once the controller is free.
#[test]
fn otf_moves_one_page_at_a_time_and_keeps_the_hottest_waiting_page() {
    let mut rest = vec![4, 4, 0, 5, 5, 6, 6, 6];
    rest.extend([1; 24]); // 24 · 53.125 ns: past the first copy, not past the second
    let (tiers, r) = tiers_after(&trace(&rest), &pages(8), "otf:threshold=3,ar=none", &[4, 5, 6]);
    assert_eq!(tiers, [0, 1, 0], "page 4 moved, then page 6 (count 4) before page 5 (count 3)");
    assert_eq!(r.migrations, 2);
    rest.extend([1; 40]);
    let (tiers, r) = tiers_after(&trace(&rest), &pages(8), "otf:threshold=3,ar=none", &[4, 5, 6]);
    assert_eq!((tiers, r.migrations), (vec![0, 1, 0], 2));
    rest.extend([5, 1]);
    let (tiers, r) = tiers_after(&trace(&rest), &pages(8), "otf:threshold=3,ar=none", &[4, 5, 6]);
    assert_eq!((tiers, r.migrations), (vec![0, 0, 0], 3));
}

// ------------------------------------------------------------------ §2.1, §2.3: the ReMap table

/// 001 §2.1-2.2: one ReMap entry per moved page: a one-way move takes one, a swap two (the
/// pair). Fast tier of 5 pages (one free): page 4 moves one way, page 5 swaps with the LRU.
/// No reconciliation (ar_start=1 on a 64-entry table): 3 entries held.
#[test]
fn remap_entries_one_per_one_way_move_two_per_swap() {
    let rest = [4, 4, 1, 5, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
    let r = run(&trace(&rest), &pages(5), "otf:threshold=3,ar=hw,remap=64,ar_start=1");
    assert_eq!((counter(&r, "migrations_one_way"), counter(&r, "migrations_two_way")), (1.0, 1.0));
    assert_eq!(policy(&r, "remap_held"), 3);
    assert_eq!(counter(&r, "remap_peak"), 3.0);
    assert_eq!(counter(&r, "address_reconciliations"), 0.0);
    let rows = r.stats.policy["timeseries"]["rows"].as_array().unwrap();
    assert_eq!(rows.last().unwrap()[6], 3.0, "remap_occupancy column");
}

/// Filler: DRAM accesses (53.125 ns each with the lookup) to let copies and reconciliations
/// finish.
fn filler(n: usize) -> Vec<u64> {
    vec![1; n]
}

/// 001 §2.1, §2.4: reconciliation starts when the table is half full. Table of 4 entries,
/// one-way moves only (fast tier of 16 pages). One move (1 entry): nothing reconciled. Two
/// moves (2 entries = 50%): the oldest entry (page 4's, once its copy is done) is reconciled
/// by MigC: (4480 + 150 + 300 + 64 lines · 2) cycles at 3.2 GHz = 1580.625 ns in all, of which
/// the OS's reverse mapping and page walk, (4480 + 150) cycles = 1446.875 ns, halt the program
/// and MigC's invalidations, 133.75 ns, do not; after it one entry (page 5's) remains.
#[test]
fn reconciliation_starts_at_half_the_table() {
    let mut one = vec![4, 4, 0];
    one.extend(filler(120));
    let r = run(&trace(&one), &pages(16), "otf:threshold=3,ar=hw,remap=4");
    assert_eq!((r.migrations, counter(&r, "address_reconciliations")), (1, 0.0));
    assert!(r.stats.migration.charges.is_empty());
    assert_eq!(policy(&r, "remap_held"), 1);

    let mut two = vec![4, 4, 0, 5, 5, 0];
    two.extend(filler(120));
    let r = run(&trace(&two), &pages(16), "otf:threshold=3,ar=hw,remap=4");
    assert_eq!(r.migrations, 2);
    let c = &r.stats.migration.charges["address reconciliation"];
    assert_eq!((c.count, c.ns, c.halted_ns), (1, 1446.875, 1446.875));
    let c = &r.stats.migration.charges["address reconciliation (MigC invalidations)"];
    assert_eq!((c.count, c.ns, c.halted_ns), (1, 133.75, 0.0));
    assert_eq!((counter(&r, "address_reconciliations"), counter(&r, "reconciled_pages")), (1.0, 1.0));
    assert_eq!(policy(&r, "remap_held"), 1);
    assert_eq!(policy(&r, "ar_ns_per_page"), 1580.625);
    assert_eq!(policy(&r, "ar_halted_ns_per_page"), 1446.875);
    // at ar_start=0.75 two entries of four are not enough
    let r = run(&trace(&two), &pages(16), "otf:threshold=3,ar=hw,remap=4,ar_start=0.75");
    assert_eq!((counter(&r, "address_reconciliations"), policy(&r, "remap_held")), (0.0, 2.into()));
}

/// 001 §2.3: a swapped pair is reconciled together (the Pair flag): one reconciliation, two
/// pages, twice the per-page cost. Fast tier of 4 pages; table of 4 entries: one swap fills
/// it to 50%.
#[test]
fn a_swapped_pair_is_reconciled_together() {
    let mut rest = vec![1, 2, 3, 4, 4, 1];
    rest.extend(filler(150));
    let r = run(&trace(&rest), &pages(4), "otf:threshold=3,ar=hw,remap=4");
    let c = &r.stats.migration.charges["address reconciliation"];
    assert_eq!((c.count, c.ns), (1, 2.0 * 1446.875));
    assert_eq!(r.stats.migration.charges["address reconciliation (MigC invalidations)"].ns, 2.0 * 133.75);
    assert_eq!((counter(&r, "address_reconciliations"), counter(&r, "reconciled_pages")), (1.0, 2.0));
    assert_eq!(policy(&r, "remap_held"), 0);
}

/// 001 §2.4: "We stop migration if the ReMap table does not contain free entries, and wait
/// for address reconciliation to free up space." Table of 2 entries, reconciliation made
/// to last longer than the trace (tlb_dir_cycles = 10^9, a part that does not halt the
/// program): pages 4 and 5 move one way and fill
/// the table; page 6 reaches the threshold but stalls. A 3-entry table lets it move, and
/// `ar=none` (an unbounded table) never reconciles.
#[test]
fn migrations_stall_while_the_table_is_full() {
    let mut rest = vec![4, 4, 0, 5, 5, 0];
    rest.extend(filler(40));
    rest.extend([6, 6, 0]);
    rest.extend(filler(40));
    let t = trace(&rest);
    let r = run(&t, &pages(16), "otf:threshold=3,ar=hw,remap=2,ar_start=1,tlb_dir_cycles=1000000000");
    assert_eq!(r.migrations, 2);
    assert_eq!(counter(&r, "full_table_stalls"), 1.0);
    assert!(counter(&r, "full_table_stall_ns") > 0.0);
    assert_eq!(r.stats.migration.charges["address reconciliation"].count, 1, "reconciliation under way");
    assert_eq!(counter(&r, "reconciled_pages"), 0.0);
    let r = run(&t, &pages(16), "otf:threshold=3,ar=hw,remap=3,ar_start=1,tlb_dir_cycles=1000000000");
    assert_eq!((r.migrations, counter(&r, "full_table_stalls")), (3, 0.0));
    let r = run(&t, &pages(16), "otf:threshold=3,ar=none,remap=2");
    assert_eq!((r.migrations, counter(&r, "full_table_stalls")), (3, 0.0));
    assert!(r.stats.migration.charges.is_empty());
    assert_eq!(policy(&r, "remap_entries"), serde_json::Value::Null, "unbounded");
}

fn zipf(accesses: u64, pages: u64) -> SynthSpec {
    SynthSpec { kind: SynthKind::Zipf, accesses, pages, seed: 7, write_ratio: 0.2, theta: 0.99, insn_per_access: 20, ..Default::default() }
}

/// 001 §2.4 (OTF_no_AR): with `ar=none` nothing is ever reconciled, however many pages move.
#[test]
fn ar_none_never_reconciles() {
    let spec = zipf(100_000, 4_000);
    let r = sim(&spec, "dram-pmem", &[(0, Capacity::Fraction(0.1))], TimingKind::Simple, "otf:ar=none,threshold=8");
    assert!(r.migrations > 1000, "{}", r.migrations);
    assert!(r.stats.migration.charges.is_empty());
    assert_eq!(counter(&r, "address_reconciliations"), 0.0);
    assert_eq!(counter(&r, "full_table_stalls"), 0.0);
    assert!(policy(&r, "remap_held").as_u64().unwrap() > 1024, "the table grows without bound");
}

/// 001 §2.3.1: OS reconciliation halts the program — per page a 4 µs cache flush, the
/// reverse mapping and page walk ((4480 + 150) cycles = 1446.875 ns) and a TLB shootdown of
/// 8 µs on 16 cores: 13446.875 ns. MigC's path halts it only for the OS functions it still
/// calls, the reverse mapping and page walk (§2.3.2, Table 3): 1446.875 ns per page; its
/// write-invalidates and TLB-directory invalidation (133.75 ns) run "without interrupting
/// the core" (§2.3.1).
#[test]
fn os_reconciliation_halts_the_program_longer_than_hardware_reconciliation() {
    let mut rest = vec![1, 2, 3, 4, 4, 1];
    rest.extend(filler(150));
    let t = trace(&rest);
    let os = run(&t, &pages(4), "otf:threshold=3,ar=os,remap=4");
    let hw = run(&t, &pages(4), "otf:threshold=3,ar=hw,remap=4");
    let (o, h) = (&os.stats.migration.charges["address reconciliation"], &hw.stats.migration.charges["address reconciliation"]);
    assert_eq!((o.ns, o.halted_ns), (2.0 * 13446.875, 2.0 * 13446.875));
    assert_eq!((h.ns, h.halted_ns), (2.0 * 1446.875, 2.0 * 1446.875));
    assert_eq!(hw.stats.migration.charges["address reconciliation (MigC invalidations)"].halted_ns, 0.0);
    assert_eq!(os.stats.timing["halting_charges_ns"], 2.0 * 13446.875);
    assert_eq!(hw.stats.timing["halting_charges_ns"], 2.0 * 1446.875);
    assert_eq!(os.runtime_ns - hw.runtime_ns, 2.0 * (13446.875 - 1446.875));
    // more cores, longer shootdowns (§2.3.1: 13 µs on 32 cores)
    let os32 = run(&t, &pages(4), "otf:threshold=3,ar=os,remap=4,cores=32");
    assert_eq!(os32.stats.migration.charges["address reconciliation"].ns, 2.0 * (4000.0 + 1446.875 + 13000.0));
}

/// 001 §2.4, Figure 2: on a migration-friendly trace (few pages take most accesses, all
/// placed by the 4/4 interleave), OTF_HW_AR beats OTF_OS_AR, and beats not migrating at all.
/// hbm-pcm (001's platform), detailed model.
#[test]
fn hardware_reconciliation_beats_os_reconciliation_on_a_friendly_trace() {
    let spec = zipf(300_000, 8_000);
    let caps = [(0, Capacity::Fraction(0.125))];
    let base = sim(&spec, "hbm-pcm", &caps, TimingKind::Detailed, "interleave:weights=4/4");
    let hw = sim(&spec, "hbm-pcm", &caps, TimingKind::Detailed, "otf:ar=hw,remap=256");
    let os = sim(&spec, "hbm-pcm", &caps, TimingKind::Detailed, "otf:ar=os,remap=256");
    assert!(counter(&os, "address_reconciliations") > 10.0);
    assert!(hw.runtime_ns < os.runtime_ns, "hw {} os {}", hw.runtime_ns, os.runtime_ns);
    assert!(hw.runtime_ns < base.runtime_ns, "hw {} no migration {}", hw.runtime_ns, base.runtime_ns);
    assert!(hw.fast_hit_ratio > base.fast_hit_ratio);
}

// ------------------------------------------------------------------ §3.3, §5.5: reverse migration

/// 001 §3.3 (Figure 4): a swapped pair comes back as a pair, each page to its original
/// tier. Fast tier of 4 pages, table of 2 entries. Page 4 swaps with page 0 (the LRU); the
/// table is full. When page 5 reaches the threshold, the pair (4, 0) is the only group and
/// has been in place longer than `min_residency_cycles=10`: it is swapped back (page 4 to
/// PMEM, page 0 to DRAM) at access 8 + 48, its entries are freed when the copies are done,
/// and page 5 then swaps with the LRU page, page 2 (page 0 is used meanwhile).
#[test]
fn reverse_migration_returns_a_swapped_pair_to_its_original_tiers() {
    let mut rest = vec![1, 2, 3, 4, 4, 3];
    rest.extend(filler(40)); // the swap's copies: 4096 B at 3.7 GB/s, 1107 ns
    rest.extend([5, 5, 3]); // the last access starts the move back
    rest.extend([0; 40]); // the pair's copies
    rest.extend(filler(40)); // page 5 swaps in
    let t = trace(&rest);
    let spec = "otf-reverse:threshold=3,remap=2,min_residency_cycles=10";
    let (tiers, r) = tiers_at(&t, &pages(4), spec, &[4, 0, 5, 2], &[8 + 47, 8 + 48, t.len() as u64 - 1]);
    assert_eq!(tiers[0], [0, 1, 1, 0], "before: the pair swapped, page 5 waiting");
    assert_eq!(tiers[1], [1, 0, 1, 0], "the pair back: page 4 in PMEM, page 0 in DRAM");
    assert_eq!(tiers[2], [1, 0, 0, 1], "then page 5 swapped with the LRU page");
    assert_eq!((counter(&r, "reverse_migrations"), counter(&r, "reverse_pages")), (1.0, 2.0));
    assert_eq!(counter(&r, "migrations_two_way"), 2.0);
    assert_eq!(r.stats.migration.swaps, 3, "forward, back, forward");
    assert!(r.stats.migration.charges.is_empty(), "no reconciliation");
    assert_eq!(policy(&r, "address_reconciliation"), "reverse migration");
}

/// 001 §5.5: "after making sure that migrated pages remain in HBM for a minimum duration
/// (in our case one million cycles)": with the default 1 M cycles (312.5 µs) the pair is
/// too young to go back, no group qualifies, and page 5's migration is delayed.
#[test]
fn reverse_migration_waits_for_the_minimum_residency() {
    let mut rest = vec![1, 2, 3, 4, 4, 3];
    rest.extend(filler(40));
    rest.extend([5, 5, 3]);
    rest.extend(filler(80));
    let (tiers, r) = tiers_after(&trace(&rest), &pages(4), "otf-reverse:threshold=3,remap=2", &[4, 0, 5]);
    assert_eq!(tiers, [0, 1, 1]);
    assert_eq!(counter(&r, "reverse_migrations"), 0.0);
    assert!(counter(&r, "reverse_none_qualified") >= 1.0);
    assert_eq!(counter(&r, "full_table_stalls"), 1.0);
}

/// 001 §5.5: "pages with least number of accesses in a window are candidates for reverse
/// migration". Fast tier of 16 pages (one-way moves), table of 2. Pages 4 and 5 move in;
/// page 4 is then used often, page 5 once; when page 6 needs an entry, page 5 (fewest
/// accesses) goes back to PMEM, and page 6 takes its place in the table.
#[test]
fn reverse_migration_picks_the_group_with_the_fewest_accesses() {
    let mut rest = vec![4, 4, 0, 5, 5, 0];
    rest.extend(filler(40));
    rest.extend([5, 4, 4, 4, 4, 4, 4, 6, 6, 0]);
    rest.extend(filler(80));
    let spec = "otf-reverse:threshold=3,remap=2,min_residency_cycles=10";
    let (tiers, r) = tiers_after(&trace(&rest), &pages(16), spec, &[4, 5, 6]);
    assert_eq!(tiers, [0, 1, 0]);
    assert_eq!((counter(&r, "reverse_migrations"), counter(&r, "reverse_pages")), (1.0, 1.0));
    assert_eq!(counter(&r, "migrations_one_way"), 3.0);
    assert_eq!(policy(&r, "remap_held"), 2);
}

// ------------------------------------------------------------------ §3, §5.4: adaptive rules

fn step(alg: Algorithm, migrations: u64, mbq: f64, threshold: u32) -> u32 {
    adapt(alg, &Bounds::listing(alg), &WindowObs { migrations, mbq, migwindow_mbq: None }, AdaptState::new(threshold, false)).threshold
}

/// Drive the algorithm through scripted windows (migrations, MBQ) from `start` and return
/// the threshold after each.
fn script(alg: Algorithm, start: u32, windows: &[(u64, f64)]) -> Vec<u32> {
    let mut t = start;
    windows
        .iter()
        .map(|&(m, q)| {
            t = step(alg, m, q, t);
            t
        })
        .collect()
}

/// 001 Algorithm 1 (§3.1): double at ≥ 240 pages migrated (below 256), halve at ≤ 160
/// (above 64); the MBQ plays no part in the threshold.
#[test]
fn algorithm_1_adapts_the_threshold_to_the_migration_count() {
    let a = Algorithm::MigrationCount;
    assert_eq!(
        Bounds::listing(a),
        Bounds {
            min_threshold: 64,
            max_threshold: 256,
            min_mig_count: 160,
            max_mig_count: 240,
            min_mbq: 50.0,
            max_mbq: 70.0,
            upper_mbq: 100.0,
            rule: Rule::Listing,
            high_mbq: 130.0,
            halt_windows: 25
        }
    );
    let w = [(240, 0.0), (500, 1e6), (239, 0.0), (161, 0.0), (160, 0.0), (0, 1e6), (0, 0.0), (300, 0.0)];
    assert_eq!(script(a, 128, &w), [256, 256, 256, 256, 128, 64, 64, 128]);
}

/// 001 Algorithm 2 (§3.2), as listed: if MBQ ≤ max_MBQ (70) and below 256, double; else if
/// MBQ ≥ min_MBQ (50) and above 64, halve. (The prose's 130/50 differ; the listing rules.)
/// Taken literally, at 256 an MBQ in [50, 70] falls through to the halving branch.
#[test]
fn algorithm_2_adapts_the_threshold_to_the_mbq() {
    let a = Algorithm::Mbq;
    assert_eq!(Bounds::listing(a).min_threshold, 64);
    let w = [(0, 70.0), (999, 71.0), (0, 10.0), (0, 60.0), (0, 49.0), (0, 200.0), (0, 200.0), (0, 200.0), (0, 50.0), (0, 0.0)];
    assert_eq!(script(a, 128, &w), [256, 128, 256, 128, 256, 128, 64, 64, 128, 256]);
    assert_eq!(step(a, 0, 49.0, 256), 256, "below min_MBQ at the top: no branch applies");
    assert_eq!(step(a, 0, 50.0, 256), 128, "the listing's fall-through");
}

/// 001 Algorithm 3 (§5.4): double when ≥ max_mig_count pages moved and MBQ ≤ upper_MBQ
/// (100); halve when ≤ min_mig_count moved and MBQ ≤ max_MBQ (70); thresholds 32-256. The
/// listing leaves max/min_mig_count undefined: Algorithm 1's 240/160.
#[test]
fn algorithm_3_combines_migration_count_and_mbq() {
    let a = Algorithm::Combined;
    let b = Bounds::listing(a);
    assert_eq!((b.min_threshold, b.max_threshold, b.min_mig_count, b.max_mig_count, b.upper_mbq), (32, 256, 160, 240, 100.0));
    let w = [(240, 100.0), (240, 100.0), (240, 101.0), (160, 70.0), (160, 71.0), (100, 0.0), (100, 0.0), (0, 0.0), (200, 0.0), (1000, 100.0)];
    assert_eq!(script(a, 64, &w), [128, 256, 256, 128, 128, 64, 32, 32, 32, 64]);
}

/// 001 Algorithms 1-3, lines "if migclk mod migwindow == 0": at the end of a migration
/// window, pause if MBQ ≤ min_MBQ (50); resume if paused and MBQ ≥ max_MBQ (70); between
/// the two nothing changes. Windows that end no migration window never pause or resume.
#[test]
fn pause_and_resume_from_the_mbq_of_the_migration_window() {
    for a in [Algorithm::MigrationCount, Algorithm::Mbq, Algorithm::Combined] {
        let b = Bounds::listing(a);
        let mut s = AdaptState::new(128, false);
        let mut seen = Vec::new();
        for (q, end_of_migwindow) in
            [(10.0, false), (60.0, true), (50.0, true), (60.0, true), (69.9, true), (200.0, false), (70.0, true), (60.0, true), (50.1, true), (0.0, true)]
        {
            let w = WindowObs { migrations: 200, mbq: q, migwindow_mbq: end_of_migwindow.then_some(q) };
            s = adapt(a, &b, &w, AdaptState::new(128, s.paused));
            seen.push(s.paused);
        }
        assert_eq!(seen, [false, false, true, true, true, true, false, false, false, true], "algorithm {}", a.number());
    }
}

/// The glue follows the listing: on a real run, every threshold in the time series is what
/// the algorithm makes of the previous window's recorded migrations and MBQ (001 §3, §5.4),
/// once migrations have begun. Small windows (20 K cycles), no migration window.
#[test]
fn adaptive_runs_follow_their_listing_window_by_window() {
    let spec = zipf(150_000, 3_000);
    for alg in [1, 2, 3] {
        let p = format!("otf-adaptive:algorithm={alg},rule=listing,threshold=32,twindow=20000,migwindow=1G,min_mig_count=2,max_mig_count=6");
        let r = sim(&spec, "dram-pmem", &[(0, Capacity::Fraction(0.1))], TimingKind::Simple, &p);
        let a = Algorithm::from_number(alg).unwrap();
        let b = Bounds { min_mig_count: 2, max_mig_count: 6, ..Bounds::listing(a) };
        let ts = &r.stats.policy["timeseries"];
        assert_eq!(
            ts["columns"],
            serde_json::json!(["window", "time_ms", "mbq", "migrations", "threshold", "paused", "remap_occupancy", "mbq_window", "mbq_cumulative"])
        );
        let rows: Vec<Vec<f64>> = serde_json::from_value(ts["rows"].clone()).unwrap();
        assert!(rows.len() > 20, "{}", rows.len());
        let first = rows.iter().position(|w| w[3] > 0.0).expect("some migrations");
        let mut changes = 0;
        for i in first..rows.len() - 1 {
            let (w, next) = (&rows[i], &rows[i + 1]);
            assert_eq!(w[0] + 1.0, next[0]);
            let s = adapt(a, &b, &WindowObs { migrations: w[3] as u64, mbq: w[2], migwindow_mbq: None }, AdaptState::new(w[4] as u32, false));
            assert_eq!(s.threshold as f64, next[4], "algorithm {alg}, window {}", w[0]);
            changes += (next[4] != w[4]) as u32;
        }
        assert!(changes > 0, "algorithm {alg}: the threshold never moved");
        let c = counter(&r, "threshold_increases") + counter(&r, "threshold_decreases");
        assert!(c >= changes as f64);
    }
}

/// 001 Algorithms 1-3: a low MBQ at the end of a migration window pauses migrations; none
/// starts while paused (without probes). (min_mbq and max_mbq raised so that any MBQ is
/// "low".)
#[test]
fn adaptive_runs_pause_migrations() {
    let spec = zipf(150_000, 3_000);
    let p = "otf-adaptive:algorithm=2,twindow=20000,migwindow=100000,min_mbq=1e9,max_mbq=1e9,probe=0";
    let r = sim(&spec, "dram-pmem", &[(0, Capacity::Fraction(0.1))], TimingKind::Simple, p);
    assert_eq!((counter(&r, "pauses"), counter(&r, "resumes")), (1.0, 0.0));
    let rows: Vec<Vec<f64>> = serde_json::from_value(r.stats.policy["timeseries"]["rows"].clone()).unwrap();
    let paused = rows.iter().position(|w| w[5] == 1.0).expect("a paused window");
    // windows close when the controller is idle: nothing is in flight at the pause
    assert!(rows[paused..].iter().all(|w| w[3] == 0.0 && w[5] == 1.0), "migrations after the pause");
    assert!(rows[..paused].iter().any(|w| w[3] > 0.0));
}

// ------------------------------------------------------------------ contracts

/// The engine's invariants (no tier over capacity, every access counted once, every
/// migrated byte accounted, checked from scratch at every boundary: `paranoid`) hold for
/// the three policies on two and three tiers, under both timing models, with tables small
/// enough to reconcile, stall and reverse-migrate all the time; runs are deterministic.
#[test]
fn invariants_on_two_and_three_tiers() {
    let spec =
        SynthSpec { kind: SynthKind::Phases, accesses: 20_000, pages: 1_000, seed: 9, write_ratio: 0.3, phases: 3, insn_per_access: 15, ..Default::default() };
    let policies = [
        "otf",
        "otf:ar=os,remap=8,threshold=4",
        "otf:ar=hw,remap=2,threshold=2,initial=first-touch",
        "otf:ar=none,threshold=3",
        "otf-adaptive:algorithm=1,twindow=10000,migwindow=50000",
        "otf-adaptive:algorithm=2,threshold=16,twindow=10000,migwindow=50000,ar=os,remap=16",
        "otf-adaptive:algorithm=3,threshold=8,twindow=5000,migwindow=20000,ar=none",
        "otf-reverse",
        "otf-reverse:remap=4,threshold=4,min_residency_cycles=100,twindow=10000",
        "otf-reverse:remap=16,threshold=2,min_residency_cycles=0,initial=first-touch",
    ];
    for platform in ["dram-pmem", "hbm-dram-cxl", "hbm-pcm"] {
        let mut caps = vec![(0, Capacity::Fraction(0.1))];
        if platform == "hbm-dram-cxl" {
            caps.push((1, Capacity::Fraction(0.3)));
        }
        for timing in [TimingKind::Simple, TimingKind::Detailed] {
            for p in policies {
                let r = sim(&spec, platform, &caps, timing, p);
                let m = &r.stats.migration;
                let served: u64 = r.stats.platform.tiers.iter().map(|t| t.counters.reads + t.counters.writes).sum();
                assert_eq!(served, r.accesses, "{p} on {platform}");
                assert_eq!(m.by_hardware, m.migrations, "{p}: MigC moves every page");
                assert_eq!(m.migrated_bytes, m.migrations * PAGE);
                assert_eq!(counter(&r, "remap_lookups"), r.accesses as f64);
                let pages = counter(&r, "pages_migrated") + counter(&r, "reverse_pages");
                assert_eq!(pages, m.migrations as f64, "{p} on {platform}");
                if let Some(cap) = policy(&r, "remap_entries").as_u64() {
                    assert!(counter(&r, "remap_peak") as u64 <= cap, "{p}: table over capacity");
                }
                if p.contains("threshold=") {
                    assert!(r.migrations > 0, "{p} on {platform}: nothing migrated");
                }
                let again = sim(&spec, platform, &caps, timing, p);
                assert_eq!((again.runtime_ns, again.migrations, again.energy_j), (r.runtime_ns, r.migrations, r.energy_j), "{p}: not deterministic");
                assert_eq!(again.stats.policy, r.stats.policy);
            }
        }
    }
}

/// Energy (001 §5.7): the controller's per-page and per-lookup energies are declared
/// parameters (0 by default: 001 reports no CACTI figure) charged on top of the platform's
/// traffic energy.
#[test]
fn controller_energy_is_charged_per_page_moved_and_per_lookup() {
    let t = trace(&[4, 4, 0, 4, 4]);
    let base = run(&t, &pages(8), "otf:threshold=3,ar=none");
    let e = run(&t, &pages(8), "otf:threshold=3,ar=none,mig_energy_nj=2,lookup_energy_pj=5");
    let extra = e.energy_j - base.energy_j;
    assert!((extra - (2e-9 + 13.0 * 5e-12)).abs() < 1e-18, "{extra}");
    assert_eq!(e.stats.migration.charges["remap lookup"].count, 13);
    assert_eq!(e.stats.migration.charges["migration controller"].energy_j, 2e-9);
    assert!(base.stats.migration.charges.is_empty());
}

/// 001 §4.1 vs first touch: `initial=first-touch` fills the fast tier first.
#[test]
fn initial_placement_interleaves_four_and_four_or_fills_the_fast_tier_first() {
    let t: Vec<u64> = (0..8).collect();
    let r = run(&t, &pages(6), "otf");
    assert_eq!(r.fast_hit_ratio, 4.0 / 8.0, "0-3 fast, 4-7 slow (the fast tier keeps 2 free frames)");
    let r = run(&t, &pages(6), "otf:initial=first-touch");
    assert_eq!(r.fast_hit_ratio, 6.0 / 8.0);
}

/// The policies are registered and documented (`tierkit policies`): every parameter has a
/// unit or type, a default that parses, and a source; unknown or ill-typed parameters are
/// errors naming the policy and the parameter.
#[test]
fn registered_with_sourced_parameters_and_clear_errors() {
    for name in ["otf", "otf-adaptive", "otf-reverse"] {
        let info = REGISTRY.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name} not registered"));
        assert!(info.source.contains("001"), "{name}");
        for p in info.params {
            assert!(!p.source.is_empty() && !p.help.is_empty(), "{name}:{}", p.name);
        }
        let dir = tempfile::tempdir().unwrap();
        let input = common::write_pages(dir.path(), &[0, 1], None);
        let e = simulate(&mut job(&input, "dram-pmem", &[], TimingKind::Simple), &PolicySpec::parse(&format!("{name}:treshold=5")).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(name) && e.contains("treshold") && e.contains("threshold"), "{e}");
        let e = simulate(&mut job(&input, "dram-pmem", &[], TimingKind::Simple), &PolicySpec::parse(&format!("{name}:threshold=hot")).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(&format!("{name}:threshold")), "{e}");
    }
    let e = otf::from_spec("otf-adaptive:min_threshold=512").err().unwrap().to_string();
    assert!(e.contains("otf-adaptive:min_threshold"), "{e}");
    let e = otf::from_spec("otf-adaptive:algorithm=4").err().unwrap().to_string();
    assert!(e.contains("otf-adaptive:algorithm") && e.contains("out of range"), "{e}");
    let e = otf::from_spec("otf:ar=maybe").err().unwrap().to_string();
    assert!(e.contains("otf:ar") && e.contains("hw"), "{e}");
    assert!(otf::from_spec("otf-reverse:ar=hw").is_err(), "reverse migration has no reconciliation");
}

// ------------------------------------------------------------------ regressions (docs/experiments.md)

/// Windows (rows of the time series) in which migrations completed.
fn windows_with_migrations(r: &SimResult) -> Vec<usize> {
    let rows: Vec<Vec<f64>> = serde_json::from_value(r.stats.policy["timeseries"]["rows"].clone()).unwrap();
    rows.iter().enumerate().filter(|(_, w)| w[3] > 0.0).map(|(i, _)| i).collect()
}

/// The otf-family deadlock. A swap leaves its promoted page in the fast tier
/// holding a ReMap entry, and such a page is never a victim (001 §2.3: an entry is freed
/// only by reconciliation, §3.3: or by moving back). With a fast tier of 100 pages, 100
/// swaps (200 entries) pin every fast frame before the table reaches its occupancy trigger
/// (512 of 1,024 entries for AR, §2.1, §2.4; all 1,024 for reverse migration, §5.5), so no
/// victim was ever found again and migration stopped for the rest of the run. 001 §3.3
/// lets reverse migration run "on demand": a migration that finds no victim now triggers a
/// reconciliation (`ar=os|hw`) or a move back (`otf-reverse`), and migration goes on to
/// the last windows.
#[test]
fn a_fast_tier_full_of_remapped_pages_triggers_reconciliation_or_reverse_migration() {
    let spec = zipf(200_000, 2_000);
    let caps = [(0, Capacity::Fraction(0.05))];
    // the adaptive threshold held at 64, so that only the table can stop migration
    for p in ["otf-reverse:max_threshold=64,threshold=64", "otf:ar=hw", "otf:ar=os", "otf-adaptive:algorithm=3,max_threshold=64,threshold=64"] {
        let r = sim(&spec, "dram-pmem", &caps, TimingKind::Simple, p);
        let freed = counter(&r, "address_reconciliations") + counter(&r, "reverse_migrations");
        assert!(freed > 0.0, "{p}: nothing reconciled or moved back ({})", r.stats.policy["counters"]);
        let busy = windows_with_migrations(&r);
        let n = counter(&r, "windows") as usize;
        assert!(n >= 10, "{p}: {n} windows");
        assert!(
            busy.iter().any(|&i| i + 3 >= n),
            "{p}: migrations stopped in window {:?} of {n}: {} {}",
            busy.last(),
            r.stats.policy["counters"],
            r.stats.policy["timeseries"]["rows"]
        );
        assert!(r.migrations > 2 * 100, "{p}: {} pages moved", r.migrations);
        // freeing entries on demand keeps migration going but tends to thrash: said in the result
        assert!(r.warnings.iter().any(|w| w.contains("every fast page held a ReMap entry")), "{p}: {:?}", r.warnings);
    }
}

/// `ar=hw` used to run entirely alongside the program, so it equalled
/// `ar=none`. 001 §2.3.1 says only that "actual invalidation at each core will be carried
/// out by a per-core hardware invalidation controller without interrupting the core"; the
/// reverse mapping that finds the page's virtual addresses is the existing Linux function
/// (§2.3.2), timed at 4480 cycles, and the page walk that updates the PTE 150 cycles
/// (Table 3). Two one-way moves, one reconciled page (as in
/// `reconciliation_starts_at_half_the_table`): `ar=hw` is slower than `ar=none` by exactly
/// (4480 + 150) / 3.2 GHz = 1446.875 ns, and `ar=os` by 4000 + 1446.875 + 8000 = 13446.875 ns.
#[test]
fn hardware_reconciliation_costs_the_os_reverse_mapping_and_page_walk() {
    let mut two = vec![4, 4, 0, 5, 5, 0];
    two.extend(filler(120));
    let t = trace(&two);
    let none = run(&t, &pages(16), "otf:threshold=3,ar=none");
    let hw = run(&t, &pages(16), "otf:threshold=3,ar=hw,remap=4");
    let os = run(&t, &pages(16), "otf:threshold=3,ar=os,remap=4");
    assert_eq!((none.migrations, hw.migrations, os.migrations), (2, 2, 2));
    assert_eq!((counter(&hw, "reconciled_pages"), counter(&os, "reconciled_pages")), (1.0, 1.0));
    assert_eq!(hw.runtime_ns - none.runtime_ns, 1446.875);
    assert_eq!(os.runtime_ns - none.runtime_ns, 13446.875);
    // without the OS functions (rmap_cycles = page_walk_cycles = 0) nothing halts
    let free = run(&t, &pages(16), "otf:threshold=3,ar=hw,remap=4,rmap_cycles=0,page_walk_cycles=0");
    assert_eq!(free.runtime_ns, none.runtime_ns);
}

/// The thresholds after each scripted window (migrations, MBQ) under `rule`.
fn script_rule(alg: Algorithm, rule: Rule, start: u32, windows: &[(u64, f64)]) -> Vec<u32> {
    let b = Bounds { rule, ..Bounds::listing(alg) };
    let mut s = AdaptState::new(start, false);
    windows
        .iter()
        .map(|&(migrations, mbq)| {
            s = adapt(alg, &b, &WindowObs { migrations, mbq, migwindow_mbq: None }, s);
            s.threshold
        })
        .collect()
}

/// Algorithm 3 both ways. The listing (001 Algorithm 3, line 12)
/// halves when few pages moved and MBQ ≤ max_MBQ (70); §7's prose (the default) reduces the threshold
/// "when the number of pages migrated is low and MBQ is high", high being above upper_MBQ
/// (100), where §5.4 stops doubling. Both double on many pages and MBQ ≤ 100.
#[test]
fn algorithm_3_halves_on_a_low_mbq_by_the_listing_and_on_a_high_one_by_the_prose() {
    let a = Algorithm::Combined;
    let w = [(100, 60.0), (100, 150.0), (100, 100.0), (240, 90.0), (240, 101.0)];
    assert_eq!(script_rule(a, Rule::Listing, 128, &w), [64, 64, 64, 128, 128]);
    assert_eq!(script_rule(a, Rule::Prose, 128, &w), [128, 64, 64, 128, 128]);
    for (spec, rule) in [("otf-adaptive:algorithm=3", "prose"), ("otf-adaptive:algorithm=3,rule=listing", "listing"), ("otf-reverse", "prose")] {
        let r = run(&trace(&[4, 4, 0]), &pages(8), spec);
        assert_eq!(policy(&r, "rule"), rule, "{spec}");
    }
    assert_eq!(policy(&run(&trace(&[0]), &pages(8), "otf"), "rule"), serde_json::Value::Null);
}

/// Algorithm 2 both ways. The listing doubles at MBQ ≤ max_MBQ (70), else
/// halves at MBQ ≥ min_MBQ (50); §3.2's prose halves "when the MBQ is high (greater than
/// 130)" and doubles "if the MBQ is low (less than 50)", between the two nothing changes.
#[test]
fn algorithm_2_by_the_listing_and_by_the_prose() {
    let a = Algorithm::Mbq;
    let w = [(0, 131.0), (0, 131.0), (0, 130.0), (0, 49.0), (0, 50.0), (0, 70.0), (0, 10.0), (0, 10.0)];
    assert_eq!(script_rule(a, Rule::Listing, 128, &w), [64, 64, 64, 128, 256, 128, 256, 256]);
    assert_eq!(script_rule(a, Rule::Prose, 128, &w), [64, 64, 64, 128, 128, 128, 256, 256]);
}

/// 001 §3.2's prose: "We halt migrations if the MBQ is low for several consecutive windows
/// (more than 25 windows)": the 26th consecutive window below 50 pauses, a window at or
/// above 50 restarts the count; the listing pauses only from a migration window's MBQ.
/// A paused controller resumes, as in the listing, when a migration window's MBQ reaches
/// max_MBQ (70).
#[test]
fn algorithm_2_prose_halts_after_more_than_25_low_windows() {
    let a = Algorithm::Mbq;
    let run_windows = |rule: Rule, qs: &[(f64, Option<f64>)]| {
        let b = Bounds { rule, ..Bounds::listing(a) };
        let mut s = AdaptState::new(128, false);
        qs.iter()
            .map(|&(mbq, migwindow_mbq)| {
                s = adapt(a, &b, &WindowObs { migrations: 0, mbq, migwindow_mbq }, s);
                s.paused
            })
            .collect::<Vec<bool>>()
    };
    let low = vec![(10.0, None); 26];
    let p = run_windows(Rule::Prose, &low);
    assert!(!p[24] && p[25], "paused at the 26th low window: {p:?}");
    assert!(run_windows(Rule::Listing, &low).iter().all(|&x| !x), "the listing waits for a migration window");
    let mut broken = vec![(10.0, None); 25];
    broken.push((60.0, None));
    broken.extend(vec![(10.0, None); 25]);
    assert!(run_windows(Rule::Prose, &broken).iter().all(|&x| !x));
    let mut resumed = low.clone();
    resumed.push((10.0, Some(69.0)));
    resumed.push((10.0, Some(70.0)));
    resumed.push((10.0, None));
    let p = run_windows(Rule::Prose, &resumed);
    assert_eq!(&p[25..], [true, true, false, false]);
}

// ------------------------------------------------------------------ the MBQ, resuming, warnings

/// Rows of the time series, by column name.
fn rows(r: &SimResult) -> (Vec<String>, Vec<Vec<f64>>) {
    let ts = &r.stats.policy["timeseries"];
    (serde_json::from_value(ts["columns"].clone()).unwrap(), serde_json::from_value(ts["rows"].clone()).unwrap())
}

fn col(cols: &[String], name: &str) -> usize {
    cols.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name} in {cols:?}"))
}

/// The two MBQs by hand. Fast tier of 8 pages (0-3 fast, 4-7 slow, four frames free), a
/// 10 µs threshold window (32 K cycles at 3.2 GHz), threshold 3, no reconciliation. Page 4
/// (touched once in 0..7) reaches 3 with `4 4`; the next access starts its one-way move,
/// which completes while page 0 is read 40 times (2.1 µs). Then page 4 ×10, page 0 ×200
/// (10.6 µs: window 0 closes), page 4 ×5.
///   window 0: 10 accesses to the one promoted page: MBQ 10/1 = 10 in both modes.
///   window 1 (under way at the end): the window MBQ counts its own 5 accesses, 5/1 = 5; the
///   cumulative MBQ (the authors' `migrated_hbm_access / pages_migrated`, never reset)
///   counts all 15, 15/1 = 15.
#[test]
fn the_mbq_by_window_and_cumulative_by_hand() {
    let mut rest = vec![4, 4];
    rest.extend(std::iter::repeat_n(0, 40));
    rest.extend(std::iter::repeat_n(4, 10));
    rest.extend(std::iter::repeat_n(0, 200));
    rest.extend(std::iter::repeat_n(4, 5));
    let t = trace(&rest);
    for (mode, used) in [("cumulative", [10.0, 15.0]), ("window", [10.0, 5.0])] {
        let r = run(&t, &pages(8), &format!("otf-adaptive:threshold=3,ar=none,twindow=32000,migwindow=1G,mbq={mode}"));
        assert_eq!(r.migrations, 1, "{mode}");
        let (cols, rows) = rows(&r);
        assert_eq!(rows.len(), 2, "{mode}: {rows:?}");
        let (m, w, c) = (col(&cols, "mbq"), col(&cols, "mbq_window"), col(&cols, "mbq_cumulative"));
        assert_eq!([rows[0][w], rows[0][c]], [10.0, 10.0], "{mode}");
        assert_eq!([rows[1][w], rows[1][c]], [5.0, 15.0], "{mode}");
        assert_eq!([rows[0][m], rows[1][m]], used, "{mode}: the rules read the chosen MBQ");
        assert_eq!(policy(&r, "mbq_mode"), mode);
        assert_eq!(policy(&r, "mbq_cumulative"), 15.0);
    }
}

/// A swap counts two pages in the cumulative MBQ's denominator (the authors'
/// `pages_migrated += 2`), and its victim's accesses, in the slow tier, count for nothing.
/// Fast tier of 4 pages (0-3), full: page 4 swaps with the LRU page 0. Then 4 ×12: MBQ
/// 12 / 2 = 6.
#[test]
fn the_cumulative_mbq_counts_a_swap_as_two_pages() {
    let mut rest = vec![1, 2, 3, 4, 4, 1];
    rest.extend(std::iter::repeat_n(1, 40));
    rest.extend(std::iter::repeat_n(4, 12));
    rest.extend(std::iter::repeat_n(0, 3));
    let r = run(&trace(&rest), &pages(4), "otf-adaptive:threshold=3,ar=none,twindow=1G,migwindow=1G");
    assert_eq!((r.migrations, counter(&r, "migrations_two_way")), (2, 1.0));
    assert_eq!(policy(&r, "mbq_cumulative"), 6.0);
}

/// The resume path (001 §3.1: "migrations are resumed if the MBQ is greater than another
/// threshold (max_MBQ)"; §7: "resume migrations if the MBQ increases"). With the cumulative
/// MBQ, the pages migrated before a pause go on counting while no page moves, so the MBQ
/// rises when they are used and the pause ends. Threshold windows of 10 µs, migration
/// windows of 20 µs, pause at MBQ ≤ 20, resume at ≥ 30. Page 4 moves, is read 10 times
/// (MBQ 10), then page 0 for 32 µs: a migration window ends with MBQ 10 and migrations
/// pause. Page 5 reaches the threshold while paused and stays in the slow tier. Page 4 is
/// read 40 more times (MBQ 50); at the next migration window's end migrations resume and
/// page 5, still the pending candidate, moves.
#[test]
fn a_pause_ends_when_the_cumulative_mbq_rises() {
    let mut rest = vec![4, 4];
    rest.extend(std::iter::repeat_n(0, 40));
    rest.extend(std::iter::repeat_n(4, 10));
    rest.extend(std::iter::repeat_n(0, 600));
    rest.extend([5, 5, 5]);
    rest.extend(std::iter::repeat_n(4, 40));
    rest.extend(std::iter::repeat_n(0, 500));
    rest.extend(std::iter::repeat_n(5, 3));
    let t = trace(&rest);
    let spec = |mode: &str| format!("otf-adaptive:threshold=3,ar=none,twindow=32000,migwindow=64000,min_mbq=20,max_mbq=30,mbq={mode},probe=0");
    let (tiers, r) = tiers_after(&t, &pages(8), &spec("cumulative"), &[4, 5]);
    assert_eq!((counter(&r, "pauses"), counter(&r, "resumes")), (1.0, 1.0), "{}", r.stats.policy["timeseries"]["rows"]);
    assert_eq!(tiers, [0, 0], "page 5 moved after the resume");
    assert_eq!(r.migrations, 2);
    assert!(!r.warnings.iter().any(|w| w.contains("never resumed")), "{:?}", r.warnings);
    // the window MBQ of a migration window without new migrations stays low: no resume
    let (tiers, r) = tiers_after(&t, &pages(8), &spec("window"), &[4, 5]);
    assert_eq!((counter(&r, "pauses"), counter(&r, "resumes")), (1.0, 0.0), "{}", r.stats.policy["timeseries"]["rows"]);
    assert_eq!(tiers, [0, 1]);
    assert!(r.warnings.iter().any(|w| w.contains("paused migrations at") && w.contains("never resumed")), "{:?}", r.warnings);
}

/// A run too short for the migration window (100 M cycles, 31 ms at 3.2 GHz) says so: its
/// pause and resume rules never ran. One that fits three windows does not.
#[test]
fn too_few_migration_windows_are_a_warning() {
    let spec = zipf(20_000, 1_000);
    let r = sim(&spec, "dram-pmem", &[(0, Capacity::Fraction(0.1))], TimingKind::Simple, "otf-adaptive");
    assert!(r.runtime_ns < 31.25e6 * 3.0);
    let w: Vec<_> = r.warnings.iter().filter(|w| w.contains("migration window")).collect();
    assert_eq!(w.len(), 1, "{:?}", r.warnings);
    assert!(w[0].contains("0 decisions"), "{}", w[0]);
    let r = sim(&spec, "dram-pmem", &[(0, Capacity::Fraction(0.1))], TimingKind::Simple, "otf-adaptive:twindow=2000,migwindow=10000");
    assert!(!r.warnings.iter().any(|w| w.contains("migration window")), "{:?}", r.warnings);
    // plain otf has no migration window
    let r = sim(&spec, "dram-pmem", &[(0, Capacity::Fraction(0.1))], TimingKind::Simple, "otf");
    assert!(!r.warnings.iter().any(|w| w.contains("migration window")), "{:?}", r.warnings);
}

/// Probes (tierkit's resume path for the window MBQ): a paused controller still migrates
/// `probe` candidates per threshold window, and their accesses make the window MBQ, so a
/// pause ends when migrating pays again. Same windows and levels as above, window MBQ.
/// Page 4 moves and is read 10 times; page 0 for 32 µs: the migration window's mean MBQ
/// (10, 0, 0) pauses migrations. Page 5 reaches the threshold while paused: with probe=1
/// it moves at once (the window's one probe), page 6 reaching it next waits for the
/// next window's. Page 5 is then read every other access for 42 µs (about 100 times per
/// window, against 3 promoted pages): a migration window's mean MBQ passes 30 and migrations
/// resume, and page 7 moves. With probe=0 nothing moves while paused and nothing resumes.
#[test]
fn probes_let_a_paused_controller_measure_and_resume() {
    let mut rest = vec![4, 4];
    rest.extend(std::iter::repeat_n(0, 40));
    rest.extend(std::iter::repeat_n(4, 10));
    rest.extend(std::iter::repeat_n(0, 600));
    rest.extend([5, 5, 5, 6, 6, 6]);
    rest.extend(std::iter::repeat_n(0, 40));
    for _ in 0..400 {
        rest.extend([5, 0]);
    }
    rest.extend([7, 7, 7, 0]);
    let t = trace(&rest);
    let spec = |probe: u32| format!("otf-adaptive:threshold=3,ar=none,twindow=32000,migwindow=64000,min_mbq=20,max_mbq=30,probe={probe}");
    let (tiers, r) = tiers_after(&t, &pages(16), &spec(1), &[5, 6, 7]);
    let rows = r.stats.policy["timeseries"]["rows"].clone();
    assert_eq!((counter(&r, "pauses"), counter(&r, "resumes")), (1.0, 1.0), "{rows}");
    assert!(counter(&r, "probes") >= 1.0, "{rows}");
    assert_eq!(tiers, [0, 0, 0], "page 5 probed, page 6 after, page 7 after the resume: {rows}");
    let (tiers, r) = tiers_after(&t, &pages(16), &spec(0), &[5, 6, 7]);
    assert_eq!((counter(&r, "pauses"), counter(&r, "resumes"), counter(&r, "probes")), (1.0, 0.0, 0.0));
    assert_eq!(tiers, [1, 1, 1]);
}

/// 001 §4.1: "in some experiments we tested with larger ReMap tables and adjusted access
/// times appropriately". `remap_lookup_cycles=auto` (the default) scales the 10 cycles of
/// the 1024-entry table with CACTI's access time (docs/remap-latency.md): 35 cycles for
/// 65,536 entries, 10.9375 ns at 3.2 GHz; the unbounded table of `ar=none` keeps 10 cycles;
/// a number is taken as given.
#[test]
fn remap_lookup_latency_grows_with_the_table() {
    let t = trace(&[0]);
    let ns = |spec: &str| policy(&run(&t, &pages(8), spec), "remap_lookup_ns").as_f64().unwrap();
    assert_eq!(ns("otf"), 3.125);
    assert_eq!(ns("otf:remap=16384"), 21.0 / 3.2);
    assert_eq!(ns("otf:remap=65536"), 10.9375);
    assert_eq!(ns("otf:ar=none,remap=65536"), 3.125);
    assert_eq!(ns("otf:remap=65536,remap_lookup_cycles=10"), 3.125);
    assert_eq!(ns("otf-reverse:remap=65536"), 10.9375);
}
