//! Policies keep their contracts: `hyplacer` (seed 004 §4, parameters §5.1) — the control
//! loop's mode table (§4.4), classification by clear-then-delay (§4.4), CLOCK demotion
//! (§4.2, §4.4), exchanges (SWITCH) and the per-activation cap (§5.1).
//!
//! Worked by hand on `dram-dcpmm` under the `simple` model: DRAM reads 101.5 ns, writes
//! 86.9 ns; DCPMM reads 305 ns, writes 90.4 ns; a TLB flush/shootdown 3 µs, a kernel entry
//! (fault) 5 µs; copies at min(source read, destination write) bandwidth. Activations every
//! 20 µs, a 5 µs delay; walk and counter-read costs are 0 unless a test says otherwise. Pages
//! are 4 KiB at 0x10000 + page·4096, so page order is address order.

mod common;
use common::write_records;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tierkit_core::engine::{run_policy, Job, SimResult};
use tierkit_core::error::Result;
use tierkit_core::mechanics::TierId;
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::hyplacer::{classify, hyplacer, mode, target_pages, Class, HyPlacer, Mode};
use tierkit_core::policy::{lookup, Ctx, Needs, Params, Policy, PolicySpec, Served};
use tierkit_core::trace::TraceInput;
use tierkit_core::tracking::refbits::{DIRTY, REFERENCED};
use tierkit_core::units::{Capacity, Period};

const BASE: &str = "hyplacer:interval=20us,delay=5us,walk_ns_per_pte=0,counter_read_ns=0";

fn addr(page: u64) -> u64 {
    0x10000 + page * 4096
}

/// DRAM holding `n` pages.
fn dram(n: u64) -> [(usize, Capacity); 1] {
    [(0, Capacity::Bytes(n * 4096))]
}

/// `hyplacer` as registered, watched: after every hook it notes each page's tier, so that
/// the test can read where the pages ended (`tiers` in its report, by page number).
struct Watched {
    inner: HyPlacer,
    tiers: BTreeMap<u64, TierId>,
}

impl Watched {
    fn note(&mut self, ctx: &Ctx) {
        for id in 0..ctx.pages.min(ctx.mem.slots()) as PageId {
            self.tiers.insert((ctx.page_addr(id) - 0x10000) / 4096, ctx.mem.tier(id));
        }
    }
}

impl Policy for Watched {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        self.inner.needs()
    }
    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.inner.init(ctx)
    }
    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.inner.place(page, ctx)
    }
    fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        let s = self.inner.on_access(page, addr, write, ctx);
        self.note(ctx);
        s
    }
    fn period(&self) -> Option<Period> {
        self.inner.period()
    }
    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.inner.on_period(ctx)?;
        self.note(ctx);
        Ok(())
    }
    fn report(&self) -> Value {
        let mut r = self.inner.report();
        r["tiers"] = json!(self.tiers.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>());
        r
    }
}

/// Simulate `hyplacer:...` (`spec`) on `dram-dcpmm` with `caps`, invariants checked.
fn run(input: &TraceInput, caps: &[(usize, Capacity)], spec: &str) -> SimResult {
    let info = lookup("hyplacer").unwrap();
    let params = Params::parse("hyplacer", info.params, &PolicySpec::parse(spec).unwrap()).unwrap();
    let mut job = Job::new(input, Platform::load("dram-dcpmm").unwrap());
    job.capacity = caps.to_vec();
    job.paranoid = true;
    run_policy(Watched { inner: hyplacer(&params).unwrap(), tiers: BTreeMap::new() }, &mut job).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// The tier of every page at the end, by page number (page `p` lives at `addr(p)`).
fn tiers_of(r: &SimResult, pages: &[u64]) -> Vec<u64> {
    let t = &r.stats.policy["tiers"];
    pages.iter().map(|p| t[p.to_string()].as_u64().unwrap_or(99)).collect()
}

fn stat<'a>(r: &'a SimResult, path: &[&str]) -> &'a Value {
    let mut v = &r.stats.policy["stats"];
    for k in path {
        v = &v[*k];
    }
    v
}

fn rows(r: &SimResult) -> Vec<(String, u64)> {
    let ts = &r.stats.policy["timeseries"];
    assert_eq!(ts["columns"], serde_json::json!(["time_ms", "mode", "dram_usage", "dcpmm_write_mb_per_s", "moved"]));
    ts["rows"].as_array().unwrap().iter().map(|row| (row[1].as_str().unwrap().to_string(), row[4].as_u64().unwrap())).collect()
}

/// 004 §4.4, the whole table of `mode`: DRAM below its target (has space), between target
/// and limit (inclusive), above the limit; DCPMM writes at/below or above the threshold.
/// Above the threshold: PROMOTE_INT while DRAM has space, else SWITCH. At or below it:
/// PROMOTE while DRAM has space, DEMOTE above the limit, nothing in between (hysteresis).
#[test]
fn the_mode_table() {
    let (limit, target, thr) = (0.96, 0.95, 10.0);
    for (usage, low, high) in [
        (0.50, Mode::Promote, Mode::PromoteInt),
        (0.9499, Mode::Promote, Mode::PromoteInt),
        (0.95, Mode::None, Mode::Switch),
        (0.955, Mode::None, Mode::Switch),
        (0.96, Mode::None, Mode::Switch),
        (0.97, Mode::Demote, Mode::Switch),
        (1.00, Mode::Demote, Mode::Switch),
    ] {
        assert_eq!(mode(usage, limit, target, 0.0, thr), low, "usage {usage}, no writes");
        assert_eq!(mode(usage, limit, target, 10.0, thr), low, "usage {usage}, writes at the threshold");
        assert_eq!(mode(usage, limit, target, 10.001, thr), high, "usage {usage}, writes above the threshold");
    }
    assert!(Mode::Switch.promotes() && Mode::Promote.promotes() && Mode::PromoteInt.promotes());
    assert!(!Mode::Demote.promotes() && !Mode::None.promotes());
    // DRAM has space exactly while it holds fewer pages than target_pages
    assert_eq!(target_pages(0.95, 100), 95);
    assert_eq!(target_pages(0.5, 4), 2);
    assert_eq!(target_pages(0.95, 10), 10, "9/10 = 0.9 < 0.95: ten pages are needed");
    assert_eq!(target_pages(1.0, 7), 7);
}

/// 004 §4.4: after DCPMM_CLEAR, a page modified in the window is write-intensive, one only
/// referenced read-intensive, one untouched cold.
#[test]
fn classes_from_the_bits() {
    assert_eq!(classify(REFERENCED | DIRTY), Class::WriteIntensive);
    assert_eq!(classify(REFERENCED), Class::ReadIntensive);
    assert_eq!(classify(0), Class::Cold);
}

/// The classification trace: pages A=0, B=1, C=2, D=3, all placed in DCPMM
/// (`placement=dcpmm`), DRAM holds 8 (target 0.5: 4 pages).
/// Phase 1 (before the clear): A written, B C D read (first touches), then A written 100
///   more times: 90.4 + 3·305 + 100·90.4 = 10045.4 ns.
/// Phase 2: B written, C read, 45 times (395.4 ns a pair). The first activation comes at the
///   first access at or after 20 µs (after 25 pairs and B's 26th write: 20020.8 ns). Writes
///   to DCPMM until then: 101 + 26 lines = 8128 B in 20020.8 ns → 406 MB/s. DCPMM_CLEAR clears every DCPMM
///   page's bits (flush: 3 µs); 5 µs later (due 28020.8 ns, after 38 pairs) the PageFind
///   reads them: B dirty (write-intensive), C referenced (read-intensive), A and D clear
///   (cold: A's writes and D's read came before the clear and do not count).
fn classification_trace() -> Vec<(u64, bool)> {
    let mut t = vec![(addr(0), true), (addr(1), false), (addr(2), false), (addr(3), false)];
    t.extend(std::iter::repeat_n((addr(0), true), 100));
    for _ in 0..45 {
        t.push((addr(1), true));
        t.push((addr(2), false));
    }
    t
}

/// 004 §4.4 (clear-then-delay classification; PROMOTE_INT promotes intensive pages only,
/// write-intensive first; PROMOTE takes cold pages too, in address order) and §5.1's cap.
/// DCPMM writes are high (406 MB/s > 10), DRAM is empty (below target): PROMOTE_INT. It
/// wants 4 pages (up to the target) and finds B (write) and C (read): both move in, A and D
/// stay. The migrations (one batch: 5 µs + 3 µs + 2 copies of 314.1 ns) end past 36 µs; the
/// trace ends before the next activation at 40 µs.
/// With max_pages=1 only B (the write-intensive page) moves.
/// With the threshold raised so that DCPMM counts as quiet, the mode is PROMOTE: B, C, then
/// the cold pages in address order, A and D; with max_pages=3, B C A.
#[test]
fn classification_after_clear_and_delay() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_records(dir.path(), &classification_trace());
    let caps = dram(8);
    let spec = format!("{BASE},placement=dcpmm,dram_target=0.5,dram_limit=0.75");

    let r = run(&input, &caps, &spec);
    assert_eq!(rows(&r), vec![("promote_int".to_string(), 2)]);
    let c = stat(&r, &["classified"]);
    assert_eq!((c["write_intensive"].as_u64(), c["read_intensive"].as_u64(), c["cold"].as_u64()), (Some(1), Some(1), Some(2)));
    assert_eq!(tiers_of(&r, &[0, 1, 2, 3]), vec![1, 0, 0, 1], "B and C promoted, A and D stay");
    assert_eq!((stat(&r, &["promote_int", "promoted"]).as_u64(), stat(&r, &["clears"]).as_u64()), (Some(2), Some(1)));
    assert_eq!(r.migrations, 2);
    let dcpmm_mb = r.stats.policy["timeseries"]["rows"][0][3].as_f64().unwrap();
    assert!((dcpmm_mb - 8128.0 / 20020.8 * 1e3).abs() < 1e-6, "{dcpmm_mb}");

    let one = run(&input, &caps, &format!("{spec},max_pages=1"));
    assert_eq!(rows(&one), vec![("promote_int".to_string(), 1)]);
    assert_eq!(tiers_of(&one, &[0, 1, 2, 3]), vec![1, 0, 1, 1], "the write-intensive page first");

    let quiet = format!("{spec},write_threshold_mb_per_s=1e6");
    let p = run(&input, &caps, &quiet);
    assert_eq!(rows(&p)[0], ("promote".to_string(), 4));
    assert_eq!(tiers_of(&p, &[0, 1, 2, 3]), vec![0, 0, 0, 0]);
    let p3 = run(&input, &caps, &format!("{quiet},max_pages=3"));
    assert_eq!(rows(&p3)[0], ("promote".to_string(), 3));
    assert_eq!(tiers_of(&p3, &[0, 1, 2, 3]), vec![0, 0, 0, 1], "write, read, then cold in address order");
}

/// CLOCK demotion (004 §4.2, §4.4), worked by hand. DRAM holds 4 pages, target 0.5, limit
/// 0.75 (DEMOTE when DRAM holds 4, down to 2); DCPMM counts as quiet (threshold raised: the
/// demotions' own copies into DCPMM would otherwise read as write traffic).
/// Phase 1: first touches 0 (write), 1 (read), 2 (read), 3 (write) fill DRAM; page 0 is
///   written 240 times. At the activation after 20 µs: DEMOTE 2. The hand's first pass finds
///   every page referenced (first touches): it clears them all and selects none cold; DEMOTE
///   then takes passed pages, read-dominated first: 1 and 2 (0 and 3 were written).
/// Phase 2: first touches 4 (read) and 5 (read) fill DRAM again; page 0 written 100 times.
///   At the activation after 40 µs: DEMOTE 2. From the hand (back at page 0 after the full
///   pass): 0 written since (cleared, passed), 3 unreferenced since the last pass: cold,
///   selected; 4 and 5 referenced, read-only. Victims: 3 (cold) first, then 4 (read-only,
///   before the written 0).
fn demote_trace() -> Vec<(u64, bool)> {
    let mut t = vec![(addr(0), true), (addr(1), false), (addr(2), false), (addr(3), true)];
    t.extend(std::iter::repeat_n((addr(0), true), 240));
    t.push((addr(4), false));
    t.push((addr(5), false));
    t.extend(std::iter::repeat_n((addr(0), true), 100));
    t
}

#[test]
fn clock_demotion_prefers_unreferenced_then_read_only_pages() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_records(dir.path(), &demote_trace());
    let caps = dram(4);
    let spec = format!("{BASE},dram_target=0.5,dram_limit=0.75,write_threshold_mb_per_s=1e6");
    let r = run(&input, &caps, &spec);
    assert_eq!(rows(&r)[..2], [("demote".to_string(), 2), ("demote".to_string(), 2)]);
    assert_eq!(tiers_of(&r, &[0, 1, 2, 3, 4, 5]), vec![0, 1, 1, 1, 1, 0]);
    assert_eq!(stat(&r, &["demote", "demoted"]).as_u64(), Some(4));
    let w = stat(&r, &["dram_walk"]);
    // pass 1: 1, 2 read; 0, 3 written. Pass 2: 0 written; 3 cold; 4, 5 read.
    assert_eq!((w["cold"].as_u64(), w["read"].as_u64(), w["written"].as_u64()), (Some(1), Some(4), Some(3)));
    assert_eq!(r.stats.migration.moves, vec![vec![0, 4], vec![0, 0]]);
}

/// The same trace with the costs on (004 §4.4's walks; the parameters' defaults are not used
/// here): walk_ns_per_pte=10, counter_read_ns=100. Pass 1 visits 4 PTEs, pass 2 six (every
/// page of the process, two of them in DCPMM): 100 ns of walking; both passes cleared bits:
/// two flushes of 3 µs; one counter read per activation; two move_pages batches, each one
/// kernel entry (5 µs) and one shootdown (3 µs), the pages only their copies (DRAM to
/// DCPMM: 4096 B at 4.44 GB/s). `os_costs=page` charges no batch: every page pays fault +
/// shootdown itself.
#[test]
fn walks_flushes_counter_reads_and_batches_are_charged() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_records(dir.path(), &demote_trace());
    let caps = dram(4);
    let spec = "hyplacer:interval=20us,delay=5us,walk_ns_per_pte=10,counter_read_ns=100,dram_target=0.5,dram_limit=0.75,write_threshold_mb_per_s=1e6";
    let r = run(&input, &caps, spec);
    assert_eq!(rows(&r)[..2], [("demote".to_string(), 2), ("demote".to_string(), 2)]);
    let acts = rows(&r).len() as u64;
    let c = &r.stats.migration.charges;
    assert_eq!((c["page-table walk (hyplacer)"].count, c["page-table walk (hyplacer)"].ns), (2, 100.0));
    assert_eq!((c["TLB flush after clearing walk (hyplacer)"].count, c["TLB flush after clearing walk (hyplacer)"].halted_ns), (2, 6000.0));
    assert_eq!((c["bandwidth counter read (hyplacer)"].count, c["bandwidth counter read (hyplacer)"].ns), (acts, 100.0 * acts as f64));
    assert_eq!(c["bandwidth counter read (hyplacer)"].halted_ns, 0.0, "counter reads never stop the program");
    assert_eq!((c["OS entry (move_pages batch)"].count, c["OS entry (move_pages batch)"].ns), (2, 10000.0));
    assert_eq!(c["TLB shootdown (move_pages batch)"].count, 2);
    assert_eq!(stat(&r, &["ptes_visited"]).as_u64(), Some(10));

    // os_costs=page: activation 1's two demotions cost 2·(5 + 3 µs + 922.5 ns) and move the
    // clock past 40 µs before another access: that boundary is folded into the next access's
    // (docs/limits.md: at most one boundary per access), and the trace ends before 60 µs: one
    // activation moves pages
    let p = run(&input, &caps, &format!("{spec},os_costs=page"));
    assert!(!p.stats.migration.charges.contains_key("OS entry (move_pages batch)"));
    assert_eq!((p.migrations, stat(&p, &["idle"]).as_u64()), (2, Some(0)));
    assert!(p.stats.engine.coalesced_boundaries >= 1);
    let copy = 4096.0 / 4.44;
    assert!((p.migration_time_ns - 2.0 * (8000.0 + copy)).abs() < 1e-6, "{}", p.migration_time_ns);
    assert!((r.migration_time_ns - 4.0 * copy).abs() < 1e-6, "batch: the pages pay their copies only: {}", r.migration_time_ns);
}

/// §5.1's cap on the DEMOTE trace: max_pages=1. Activation 1 demotes one page, the first
/// read-only one passed (1); DRAM then holds 3 of 4 (not above the limit of 3). Page 4 takes
/// the free frame, page 5 goes to DCPMM (DRAM full). Activation 2: DRAM holds 4: DEMOTE 1;
/// the hand (back at page 0) passes 0 (written since) and finds 2 unreferenced since pass 1:
/// cold, selected, the walk stops. 1 and 2 demoted, one per activation.
#[test]
fn at_most_max_pages_move_per_activation() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_records(dir.path(), &demote_trace());
    let spec = format!("{BASE},dram_target=0.5,dram_limit=0.75,write_threshold_mb_per_s=1e6,max_pages=1");
    let r = run(&input, &dram(4), &spec);
    assert_eq!(rows(&r)[..2], [("demote".to_string(), 1), ("demote".to_string(), 1)]);
    assert_eq!(tiers_of(&r, &[0, 1, 2, 3, 4, 5]), vec![0, 1, 1, 0, 0, 1]);
}

/// SWITCH (004 §4.4, Table 2), worked by hand. DRAM holds 4 pages, target 0.5, limit 1.0
/// (never above it: no excess to demote). First touches 0 1 2 3 (DRAM) and 4 5 (DCPMM), all
/// reads; then (read 0, read 1, write 4) 200 times: DCPMM writes ~200 MB/s, DRAM full:
/// every activation is a SWITCH.
/// Activation 1 (~20 µs): DCPMM_CLEAR; after the delay 4 is write-intensive (5 cold): one
///   exchange wanted. The DRAM hand's first pass finds 0-3 all referenced (first touches,
///   and 0 1 since): it clears them, no cold page: nothing moves.
/// Activation 2 (~40 µs): 4 write-intensive again; the hand (back at 0) passes 0 and 1
///   (referenced since), finds 2 unreferenced since its last pass: cold: 4 and 2 exchange.
/// Activation 3 (~60 µs): the interval still saw 4's writes in DCPMM (before the exchange)
///   and the copy of 2 into it: SWITCH, but no DCPMM page is intensive (2 and 5 are never
///   touched): nothing. Activation 4 (~80 µs): DCPMM quiet, DRAM full but not above the
///   limit: nothing.
#[test]
fn switch_exchanges_intensive_dcpmm_pages_with_cold_dram_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut t: Vec<(u64, bool)> = (0..6).map(|p| (addr(p), false)).collect();
    for _ in 0..200 {
        t.extend([(addr(0), false), (addr(1), false), (addr(4), true)]);
    }
    let input = write_records(dir.path(), &t);
    let spec = format!("{BASE},dram_target=0.5,dram_limit=1.0");
    let r = run(&input, &dram(4), &spec);
    let rs = rows(&r);
    let sw = |n: u64| ("switch".to_string(), n);
    assert_eq!(rs, vec![sw(0), sw(2), sw(0), ("none".to_string(), 0)]);
    assert_eq!(tiers_of(&r, &[0, 1, 2, 3, 4, 5]), vec![0, 0, 1, 0, 0, 1]);
    let s = stat(&r, &["switch"]);
    assert_eq!((s["switched"].as_u64(), s["promoted"].as_u64(), s["demoted"].as_u64()), (Some(1), Some(1), Some(1)));
    assert_eq!((r.migrations, r.stats.migration.swaps), (2, 1));

    // With the default limit (0.96) DRAM (4 of 4) is above it: each SWITCH also demotes the
    // excess down to the target (2 pages). Activation 1: the hand's first pass finds no cold
    // page, so no exchange; the excess goes, read-dominated passed pages first, in walk
    // order: 0 and 1 (CLOCK's first pass cannot tell them from 2 and 3). Activation 2: DRAM
    // at the target (still SWITCH: writes high); DCPMM: 4 write-intensive, 0 and 1
    // read-intensive (read in the window); the hand finds 2 and 3 unreferenced since its
    // pass: 4 <-> 2 and 0 <-> 3 exchange (4 pages moved). From then on DRAM holds 0 and 4,
    // both referenced at every pass: 1 stays in DCPMM, nothing moves (SWITCH once more while
    // the interval still holds 4's writes to DCPMM, then nothing: DCPMM quiet, DRAM at target).
    let d = run(&input, &dram(4), &format!("{BASE},dram_target=0.5"));
    let ds = rows(&d);
    let none = ("none".to_string(), 0);
    assert_eq!(ds, vec![sw(2), sw(4), sw(0), none.clone(), none]);
    assert_eq!(tiers_of(&d, &[0, 1, 2, 3, 4, 5]), vec![0, 1, 1, 1, 0, 1]);
    let s = stat(&d, &["switch"]);
    assert_eq!((s["switched"].as_u64(), s["promoted"].as_u64(), s["demoted"].as_u64()), (Some(2), Some(2), Some(4)));
}

/// The parameters are checked: the delay must be shorter than the interval, the limit at
/// or above the target, and both periods times.
#[test]
fn parameters_are_checked() {
    let info = lookup("hyplacer").unwrap();
    let build = |s: &str| {
        let spec = PolicySpec::parse(s).unwrap();
        Params::parse("hyplacer", info.params, &spec).and_then(|p| (info.build)(&p).map(|_| ()))
    };
    assert!(build("hyplacer").is_ok());
    assert!(build("hyplacer:interval=10ms,delay=10ms").is_err());
    assert!(build("hyplacer:dram_target=0.9,dram_limit=0.8").is_err());
    assert!(build("hyplacer:interval=1000").is_err(), "an interval in accesses");
    let p = Params::parse("hyplacer", info.params, &PolicySpec::parse("hyplacer").unwrap()).unwrap();
    assert_eq!(p.int("max_pages"), 128 * 1024);
    assert_eq!((p.float("dram_target"), p.float("dram_limit"), p.float("write_threshold_mb_per_s")), (0.95, 0.96, 10.0));
}

/// The contracts at scale: synthetic traces (60K accesses over 3000 pages, 30% writes) on a
/// two-tier (`dram-dcpmm`, DRAM 10% of the footprint) and a three-tier platform
/// (`hbm-dram-cxl`: "DRAM" is tier 0 and "DCPMM" the slowest tier, the middle one never
/// managed), both timing models, invariants checked at every boundary: every activation is
/// counted once, the series' moves add up to the mechanics' migrations, at most `max_pages`
/// move per activation, nothing ever moves into or out of the middle tier, and the same
/// inputs give the same result bit for bit.
#[test]
fn contracts_on_synthetic_traces() {
    use tierkit_core::engine::simulate;
    use tierkit_core::timing::TimingKind;
    use tierkit_core::trace::synth::{SynthKind, SynthSource, SynthSpec};
    use tierkit_core::trace::tkt::TktWriter;
    use tierkit_core::trace::{Batch, RecordSource};

    let dir = tempfile::tempdir().unwrap();
    let mut modes_seen = std::collections::BTreeSet::new();
    for kind in SynthKind::ALL {
        let p = dir.path().join(format!("{}.tkt", kind.name()));
        let spec = SynthSpec { kind, accesses: 60_000, pages: 3_000, seed: 5, write_ratio: 0.3, phases: 3, ..Default::default() };
        let mut src = SynthSource::new(spec).unwrap();
        let mut w = TktWriter::create(&p, src.meta(), true).unwrap();
        let mut b = Batch::default();
        while src.next_batch(&mut b).unwrap() {
            w.write_batch(&b).unwrap();
        }
        w.finish().unwrap();
        let input = TraceInput::new(p);
        for platform in ["dram-dcpmm", "hbm-dram-cxl"] {
            for timing in [TimingKind::Simple, TimingKind::Detailed] {
                for policy in
                    ["hyplacer:interval=200us,delay=40us,max_pages=64", "hyplacer:interval=200us,delay=40us,max_pages=64,placement=dcpmm,os_costs=page"]
                {
                    let once = || {
                        let mut job = Job::new(&input, Platform::load(platform).unwrap());
                        job.capacity = vec![(0, Capacity::Fraction(0.1))];
                        if platform == "hbm-dram-cxl" {
                            job.capacity.push((1, Capacity::Fraction(0.3)));
                        }
                        job.timing = timing;
                        job.paranoid = true;
                        simulate(&mut job, &PolicySpec::parse(policy).unwrap()).unwrap_or_else(|e| panic!("{policy} on {platform}: {e}"))
                    };
                    let r = once();
                    let label = format!("{policy} on {platform}, {} {timing:?}", kind.name());
                    let ts = &r.stats.policy["timeseries"]["rows"];
                    let rows = ts.as_array().unwrap();
                    let s = &r.stats.policy["stats"];
                    let acts: u64 = ["none", "demote", "promote", "promote_int", "switch"].iter().map(|m| s[m]["activations"].as_u64().unwrap()).sum();
                    assert_eq!(acts, rows.len() as u64, "{label}");
                    assert_eq!(s["boundaries"].as_u64().unwrap(), acts + s["idle"].as_u64().unwrap() + s["busy"].as_u64().unwrap(), "{label}");
                    let moved: u64 = rows.iter().map(|row| row[4].as_u64().unwrap()).sum();
                    assert_eq!((moved, s["moved"].as_u64().unwrap()), (r.migrations, r.migrations), "{label}");
                    assert!(rows.iter().all(|row| row[4].as_u64().unwrap() <= 64), "{label}");
                    let m = &r.stats.migration.moves;
                    if m.len() == 3 {
                        assert_eq!((m[0][1], m[1][0], m[1][2], m[2][1]), (0, 0, 0, 0), "{label}: the middle tier is not managed");
                    }
                    for row in rows {
                        modes_seen.insert(row[1].as_str().unwrap().to_string());
                    }
                    assert!(r.runtime_ns.is_finite());
                    let again = once();
                    assert_eq!((again.runtime_ns.to_bits(), again.migrations), (r.runtime_ns.to_bits(), r.migrations), "{label}: deterministic");
                    assert_eq!(again.stats.policy, r.stats.policy, "{label}: deterministic");
                }
            }
        }
    }
    for m in ["demote", "promote", "promote_int", "switch"] {
        assert!(modes_seen.contains(m), "mode {m} never chosen: {modes_seen:?}");
    }
}

/// One rule for bandwidth-counter reads (docs/policies.md; memos follows it too, see rw_aware.rs):
/// they are recorded but never stop the program. 004 §4.3: PCMon writes the per-node
/// throughput to a file that Control, a user-space process of its own, reads; on 004's
/// Cascade Lake pcm-memory reads the memory controllers' counters through PCI configuration
/// space, which interrupts no core. The same run with reads of 1 ms each and of 0 ends at the
/// same simulated time, bit for bit.
#[test]
fn counter_reads_are_recorded_and_never_halt() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_records(dir.path(), &demote_trace());
    let spec = "hyplacer:interval=20us,delay=5us,walk_ns_per_pte=0,dram_target=0.5,dram_limit=0.75,write_threshold_mb_per_s=1e6";
    let slow = run(&input, &dram(4), &format!("{spec},counter_read_ns=1000000"));
    let free = run(&input, &dram(4), &format!("{spec},counter_read_ns=0"));
    let c = &slow.stats.migration.charges["bandwidth counter read (hyplacer)"];
    assert!(c.count >= 2 && c.ns == 1e6 * c.count as f64 && c.halted_ns == 0.0, "{c:?}");
    assert_eq!(slow.runtime_ns.to_bits(), free.runtime_ns.to_bits());
}
