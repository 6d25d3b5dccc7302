//! Policies keep their contracts and models match hand-computed figures: the epoch-based
//! baselines of seeds 000 and 001 — `hma-epoch` (HMA_HS_OS_AR, 001 §2.4, after Meswani et
//! al.), `fthp` (first-touch hot-page, 000 §6.4, with 000 §5.1's costs) and `mempod`
//! (MemPod_no_AR, 001 §2.4, after Prodromou et al.).
//!
//! Hand-computed figures use `hbm-ddr4` (HBM reads 32 ns, DDR4 reads 30 ns, DDR4 19.2 GB/s;
//! page fault 5 µs and TLB shootdown 3 µs per page, copy from the bandwidth: a 4 KiB page
//! takes 4096 / 19.2 ns either way) or `dram-pmem` (50 / 150 ns) under the `simple` model.

mod common;
use common::{run, write_pages};
use tierkit_core::engine::{run_policy, Job, SimResult};
use tierkit_core::mechanics::{Op, TierId, UNPLACED};
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::epoch_os::Initial;
use tierkit_core::policy::mempod::MemPod;
use tierkit_core::policy::{Ctx, Needs, Policy, PolicySpec, Served, REGISTRY};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::synth::{SynthKind, SynthSpec};
use tierkit_core::units::{Capacity, Period};

const HALF: [(usize, Capacity); 1] = [(0, Capacity::Fraction(0.5))];
/// 4 KiB copied between HBM (128 GB/s) and one DDR4 channel (19.2 GB/s), ns.
const COPY: f64 = 4096.0 / 19.2;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

fn ts_rows(r: &SimResult) -> Vec<Vec<f64>> {
    let ts = &r.stats.policy["timeseries"];
    assert_eq!(ts["columns"][0], "epoch", "{ts}");
    assert_eq!((ts["columns"][1].as_str(), ts["columns"][2].as_str()), (Some("time_ms"), Some("migrations")));
    ts["rows"].as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()).collect()
}

// ------------------------------------------------------------------------------ hma-epoch

/// 8 pages, 17 accesses. Epoch 0 (13 accesses): 0 1 2 3 4 5 6 7 5 5 6 6 7; epoch 1: 5 6 0 1.
const HMA_TRACE: [u64; 17] = [0, 1, 2, 3, 4, 5, 6, 7, 5, 5, 6, 6, 7, 5, 6, 0, 1];

/// 001 §2.4 (HMA_HS_OS_AR) and §4.1, worked by hand on `hbm-ddr4`, fast tier 4 of 8 pages,
/// epochs of 13 accesses, hotness threshold 3.
///
/// Placement 4/4 (001 §4.1): pages 0-3 in HBM, 4-7 in DDR4.
/// Epoch 0 counts: 5:3, 6:3, 7:2, the others 1. Hot (≥ 3): 5 and 6, ranked 5, 6 (equal
///   counts in first-touch order). Both fit in HBM and both are in DDR4. HBM has no free
///   frame; LRU fast pages not hot: 0 (last access 0), 1 (1). Swaps (5,0) and (6,1): 4 pages
///   moved. Page 7 (2 accesses) stays.
/// Epoch 1: 5 6 in HBM, 0 1 in DDR4.
/// Latency: epoch 0: 4 HBM + 9 DDR4 = 128 + 270 = 398; epoch 1: 2·32 + 2·30 = 124; 522 ns.
/// The platform's costs (`ar_costs=platform`; 001's are tested below):
/// os_costs=epoch (default): one OS batch: one fault (5 µs) and one shootdown (3 µs), and
///   each page its copy: 522 + 8000 + 4·COPY.
/// os_costs=page: every page pays both: 522 + 4·(8000 + COPY).
#[test]
fn hma_epoch_swaps_the_hot_slow_pages_and_charges_once_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &HMA_TRACE, None);

    let r = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=3,ar_costs=platform");
    assert_eq!((r.pages, r.fast_capacity_pages, r.migrations), (8, Some(4), 4));
    assert_eq!(r.stats.migration.swaps, 2);
    assert_eq!(r.stats.migration.by_hardware, 0);
    assert_eq!(r.fast_hit_ratio, 6.0 / 17.0, "0-3 in epoch 0, 5 and 6 in epoch 1");
    assert!(close(r.runtime_ns, 522.0 + 8000.0 + 4.0 * COPY), "{}", r.runtime_ns);
    let c = &r.stats.migration.charges;
    assert_eq!((c["OS entry (epoch batch)"].count, c["OS entry (epoch batch)"].ns), (1, 5000.0));
    assert_eq!((c["TLB shootdown (epoch batch)"].count, c["TLB shootdown (epoch batch)"].halted_ns), (1, 3000.0));
    let e = &r.stats.policy["epochs"];
    assert_eq!((e["candidates"].as_u64(), e["promoted"].as_u64(), e["swaps"].as_u64(), e["batches"].as_u64()), (Some(2), Some(2), Some(2), Some(1)));
    // the series: epoch 0 ended at 398 ns with 4 pages moved, 2 promoted, 2 hot, 13 accesses
    assert_eq!(ts_rows(&r), vec![vec![0.0, 398e-6, 4.0, 2.0, 2.0, 13.0, 4.0 / 13.0]]);

    // the same moves, each page paying the platform's fault and shootdown
    let p = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=3,os_costs=page,ar_costs=platform");
    assert_eq!(p.migrations, 4);
    assert!(close(p.runtime_ns, 522.0 + 4.0 * (8000.0 + COPY)), "{}", p.runtime_ns);
    assert!(p.stats.migration.charges.is_empty());

    // threshold 2 makes page 7 hot too: a third swap, with the next LRU page (2)
    let t = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=2");
    assert_eq!((t.migrations, t.stats.migration.swaps), (6, 3));

    // a limit of one page per epoch: only page 5 comes in (with page 0)
    let l = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=3,limit_pages=1,ar_costs=platform");
    assert_eq!(l.migrations, 2);
    assert_eq!(l.stats.policy["epochs"]["over_limit"], 1);
    // epoch 1: 5 and 1 in HBM, 6 and 0 in DDR4: the same 124 ns
    assert!(close(l.runtime_ns, 522.0 + 8000.0 + 2.0 * COPY), "{}", l.runtime_ns);
}

/// `hma-epoch` stands for 001's HMA_HS_OS_AR, the scheme whose reconciliation
/// is done by the OS, so by default it pays 001's OS figures (§2.3.1), not the platform's
/// hardware ones: each moved page's cache lines are flushed (`flush_cache_page()`, 4 µs,
/// "This process halts the user program"), and the TLBs are shot down by IPI, 8 µs on 001's
/// 16 cores ("4, 5, 8, and 13 µs for 4, 8, 16, and 32 cores"), once per epoch batch — the
/// amortization §2.4 credits epoch-based reconciliation with — or once per page with
/// `os_costs=page`. The kernel entry and the per-page cost are still the platform's.
/// Same trace and moves as above on `hbm-ddr4` (fault 5 µs, per-page cost 0), 4 pages moved:
/// batch: 522 + 5000 + 4·4000 + 8000 + 4·COPY; per page: 522 + 4·(5000 + 8000 + 4000 + COPY);
/// on 32 cores the batch's shootdown is 13 µs.
#[test]
fn hma_epoch_charges_001s_os_reconciliation() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &HMA_TRACE, None);
    let r = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=3");
    assert_eq!(r.migrations, 4);
    assert!(close(r.runtime_ns, 522.0 + 5000.0 + 4.0 * 4000.0 + 8000.0 + 4.0 * COPY), "{}", r.runtime_ns);
    let c = &r.stats.migration.charges;
    assert_eq!((c["OS entry (epoch batch)"].count, c["OS entry (epoch batch)"].halted_ns), (1, 5000.0));
    assert_eq!((c["cache flush (OS reconciliation)"].count, c["cache flush (OS reconciliation)"].halted_ns), (1, 16000.0));
    assert_eq!((c["TLB shootdown (epoch batch)"].count, c["TLB shootdown (epoch batch)"].halted_ns), (1, 8000.0));
    assert_eq!(r.stats.policy["ar_costs"], "001");

    let p = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=3,os_costs=page");
    assert_eq!(p.migrations, 4);
    assert!(close(p.runtime_ns, 522.0 + 4.0 * (5000.0 + 8000.0 + 4000.0 + COPY)), "{}", p.runtime_ns);
    assert_eq!(p.stats.migration.charges["TLB shootdown (per page)"].halted_ns, 4.0 * 8000.0);

    let c32 = run(&input, "hbm-ddr4", &HALF, "hma-epoch:epoch=13,threshold=3,cores=32,flush_us=0");
    assert!(close(c32.runtime_ns, 522.0 + 5000.0 + 13000.0 + 4.0 * COPY), "{}", c32.runtime_ns);

    // on 001's platform the per-page OS cost is Table 3's reverse mapping and page walk
    let h = run(&input, "hbm-pcm", &HALF, "hma-epoch:epoch=13,threshold=3");
    let plat = run(&input, "hbm-pcm", &HALF, "hma-epoch:epoch=13,threshold=3,ar_costs=platform");
    assert_eq!((h.migrations, plat.migrations), (4, 4));
    // 001's shootdown (8 µs) replaces the platform's hardware figure (300 cycles = 93.75 ns)
    assert!(close(h.runtime_ns - plat.runtime_ns, 4.0 * 4000.0 + 8000.0 - 93.75), "{} vs {}", h.runtime_ns, plat.runtime_ns);
}

/// 001 §4.1's placement is the default: 4 pages to HBM, then 4 to DDR4, while HBM has room.
/// 12 pages, HBM holds 6: 4/4 puts 0-3 and 8-9 in HBM, first-touch puts 0-5 there. The trace
/// touches 0-11 once, then 4 5 4 5 (no epoch ends): HBM serves 6 + 0 or 6 + 4 accesses.
#[test]
fn hma_epoch_initial_placement() {
    let dir = tempfile::tempdir().unwrap();
    let trace: Vec<u64> = (0..12).chain([4, 5, 4, 5]).collect();
    let input = write_pages(dir.path(), &trace, None);
    for (spec, hbm) in [("hma-epoch", 6), ("hma-epoch:initial=first-touch", 10)] {
        let r = run(&input, "hbm-ddr4", &HALF, spec);
        assert_eq!((r.stats.platform.tiers[0].counters.reads, r.migrations), (hbm, 0), "{spec}");
    }
}

// ------------------------------------------------------------------------------ fthp

/// 000 §6.4 (FTHP) with 000 §5.1's costs, worked by hand on `hbm-ddr4`: 4 pages, HBM holds
/// 2, epochs of 200 ns (`epoch=200ns`).
///
/// First touch fills HBM: 0 and 1 in HBM, 2 and 3 in DDR4.
/// Epoch 0: 0 1 2 3 3 3 2 (32 32 30 30 30 30 30: 214 ns; the boundary comes before the
///   access at which the clock first reads ≥ 200 ns, the 8th). Counts 3:3, 2:2, 0:1, 1:1: the
///   hottest two, 3 and 2, are in DDR4. Coldest fast pages: 0 and 1 (count 1 each; 0 less
///   recently used). Swaps (3,0) and (2,1): 4 pages, each 5 µs + 3 µs + COPY.
/// The clock then reads 214 + 4·(8000 + COPY) = 33067.33 ns: the 164 further boundaries it
///   has passed (400 ns, 600 ns, … 33000 ns) are folded into the next one (at most one
///   boundary per access; docs/limits.md), which closes epoch 1 at the 9th access.
/// Epoch 1: 3 2 0 1: HBM, HBM, DDR4, DDR4 = 124 ns.
/// Runtime 214 + 124 + 4·(8000 + COPY); HBM serves 4 of 11 accesses.
#[test]
fn fthp_fills_the_fast_tier_then_migrates_the_epochs_hottest_pages() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0, 1, 2, 3, 3, 3, 2, 3, 2, 0, 1], None);
    let r = run(&input, "hbm-ddr4", &HALF, "fthp:epoch=200ns");
    assert_eq!((r.migrations, r.stats.migration.swaps, r.fast_capacity_pages), (4, 2, Some(2)));
    assert_eq!(r.fast_hit_ratio, 4.0 / 11.0);
    assert!(close(r.migration_time_ns, 4.0 * (5000.0 + 3000.0 + COPY)), "{}", r.migration_time_ns);
    assert!(close(r.runtime_ns, 338.0 + 4.0 * (5000.0 + 3000.0 + COPY)), "{}", r.runtime_ns);
    assert!(r.stats.migration.charges.is_empty(), "per-page costs, no batch charge");
    assert_eq!(r.periods, 2, "one boundary ran after the migrations, the 164 passed during them folded into it");
    assert_eq!(r.stats.engine.coalesced_boundaries, 164);
    assert_eq!(r.stats.policy["epochs"]["epochs"], 1);
    let rows = ts_rows(&r);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][..6], [0.0, 214e-6, 4.0, 2.0, 4.0, 7.0]);
    assert_eq!(rows[0][6], 2.0 / 7.0);
    // 000 §5.1's costs on hbm-ddr3 too
    let r3 = run(&input, "hbm-ddr3", &HALF, "fthp:epoch=200ns");
    assert_eq!(r3.migrations, 4);
    assert!(close(r3.migration_time_ns, 4.0 * (8000.0 + 4096.0 / 12.8)), "{}", r3.migration_time_ns);
}

/// 000 §6.4: equal heat causes no migration. Epoch 0 (0 1 2 3 0 1 2, 218 ns ≥ 200 before the
/// 8th access): counts 0:2, 1:2, 2:2, 3:1; the hottest two are 0 and 1 (ties go to the page
/// already in HBM), so page 2 does not displace either.
#[test]
fn fthp_does_not_swap_pages_of_equal_heat() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0, 1, 2, 3, 0, 1, 2, 3], None);
    let r = run(&input, "hbm-ddr4", &HALF, "fthp:epoch=200ns");
    assert_eq!(r.migrations, 0);
    assert_eq!(r.stats.policy["epochs"]["candidates"], 4);
}

#[test]
fn fthp_default_epochs_are_000s() {
    let info = REGISTRY.iter().find(|p| p.name == "fthp").unwrap();
    let d = info.params.iter().find(|p| p.name == "epoch").unwrap();
    assert_eq!(d.default, "100ms");
    assert!(d.source.contains("000 §6.4"));
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0, 1, 2, 3], None);
    for spec in ["fthp", "fthp:epoch=1s"] {
        let r = run(&input, "hbm-ddr4", &HALF, spec);
        assert_eq!(r.periods, 1, "{spec}: no epoch ends in 4 accesses");
    }
    assert!(run(&input, "hbm-ddr4", &HALF, "fthp").config.policy.contains("epoch=100000000ns"));
}

// ------------------------------------------------------------------------------ mempod

/// Wraps MemPod and checks, after every epoch, that each move kept its pages in their pod:
/// a swap pairs two pages of one pod, and no pod holds more pages in a tier than its frames
/// (each tier's capacity split over the pods as documented: evenly, remainders to pods 0, 1,
/// … continuing from tier to tier).
struct PodCheck {
    inner: MemPod,
    pods: usize,
    frames: Vec<Vec<u64>>,
    epochs_checked: u64,
    moves_checked: u64,
}

impl Policy for PodCheck {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        self.inner.needs()
    }
    fn init(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        let n = self.pods as u64;
        let mut next = 0;
        self.frames = vec![vec![0; ctx.mem.tiers()]; self.pods];
        for t in 0..ctx.mem.tiers() {
            let c = ctx.mem.capacity(t as TierId);
            for k in 0..self.pods {
                self.frames[k][t] = if c == u64::MAX { u64::MAX } else { c / n };
            }
            if c != u64::MAX {
                for _ in 0..c % n {
                    self.frames[next][t] += 1;
                    next = (next + 1) % self.pods;
                }
            }
        }
        self.inner.init(ctx)
    }
    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.inner.place(page, ctx)
    }
    fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        self.inner.on_access(page, addr, write, ctx)
    }
    fn period(&self) -> Option<Period> {
        self.inner.period()
    }
    fn on_period(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        assert!(ctx.mem.ops.is_empty());
        self.inner.on_period(ctx)?;
        let moves: Vec<_> = ctx.mem.ops.iter().filter_map(|o| if let Op::Move(m) = o { Some(*m) } else { None }).collect();
        let mut i = 0;
        while i < moves.len() {
            let m = moves[i];
            assert_eq!(m.by, tierkit_core::mechanics::MoveBy::Hw, "MemPod's engine moves pages");
            assert_eq!(m.to, 0, "MemPod moves hot pages into the fast tier");
            if m.swap {
                let v = moves[i + 1];
                assert!(v.swap && v.from == 0 && v.to == m.from);
                assert_eq!(m.page as usize % self.pods, v.page as usize % self.pods, "swap across pods: {m:?} {v:?}");
                i += 2;
            } else {
                i += 1;
            }
            self.moves_checked += 1;
        }
        let mut held = vec![vec![0u64; ctx.mem.tiers()]; self.pods];
        for (p, &t) in ctx.mem.tier_of().iter().enumerate() {
            if t != UNPLACED {
                held[p % self.pods][t as usize] += 1;
            }
        }
        for (k, (held, frames)) in held.iter().zip(&self.frames).enumerate() {
            for (t, (h, f)) in held.iter().zip(frames).enumerate() {
                assert!(h <= f, "pod {k} holds {h} pages in tier {t}, its frames {f}");
            }
        }
        self.epochs_checked += 1;
        Ok(())
    }
    fn report(&self) -> serde_json::Value {
        let mut r = self.inner.report();
        r["checked"] = serde_json::json!({ "epochs": self.epochs_checked, "moves": self.moves_checked });
        r
    }
}

/// A synthetic trace, generated as the engine reads it (a `SynthSpec` is a trace source).
fn synth(kind: SynthKind, accesses: u64, pages: u64) -> SynthSpec {
    SynthSpec { kind, accesses, pages, seed: 5, write_ratio: 0.3, phases: 3, ..Default::default() }
}

fn caps(platform: &str) -> Vec<(usize, Capacity)> {
    let mut c = vec![(0, Capacity::Fraction(0.1))];
    if platform == "hbm-dram-cxl" {
        c.push((1, Capacity::Fraction(0.3)));
    }
    c
}

/// 001 §2.4 / MemPod: pods are separate — every move stays within its pod's frames — on two
/// and three tiers, in both placements, and every move is the hardware engine's.
#[test]
fn mempod_keeps_pods_separate() {
    let input = synth(SynthKind::Zipf, 40_000, 2_001);
    for platform in ["dram-pmem", "hbm-dram-cxl"] {
        for (pods, initial) in [(4, Initial::Interleave), (3, Initial::FirstTouch), (7, Initial::Interleave)] {
            let mut job = Job::new(&input, Platform::load(platform).unwrap());
            job.capacity = caps(platform);
            job.paranoid = true;
            let p = PodCheck { inner: MemPod::new(pods, 16, Period::Accesses(500), initial), pods, frames: Vec::new(), epochs_checked: 0, moves_checked: 0 };
            let r = run_policy(p, &mut job).unwrap();
            let checked = &r.stats.policy["checked"];
            assert!(checked["epochs"].as_u64().unwrap() >= 70, "{checked}");
            assert!(checked["moves"].as_u64().unwrap() > 0, "{platform} {pods}: nothing moved");
            assert_eq!(r.stats.migration.by_hardware, r.migrations);
            assert!(r.stats.migration.charges.is_empty(), "no address reconciliation");
            assert_eq!(r.stats.policy["mempod"]["placed_outside_pod"], 0);
            for pod in r.stats.policy["per_pod"].as_array().unwrap() {
                for (used, frames) in pod["pages"].as_array().unwrap().iter().zip(pod["frames"].as_array().unwrap()) {
                    assert!(frames.is_null() || used.as_u64() <= frames.as_u64(), "{pod}");
                }
            }
        }
    }
}

/// MemPod's MEA (Misra–Gries) tracks a page holding a majority of its pod's accesses, and the
/// pod's engine swaps it in at the epoch's end; worked by hand on `dram-pmem`, 8 pages, DRAM
/// 4 pages, 2 pods (even pages pod 0, odd pages pod 1; 2 fast frames each), one counter per
/// pod (the majority vote), epochs of 20 accesses.
///
/// Placement 4/4 within each pod: pod 0 puts 0 and 2 in DRAM (its 2 frames), 4 and 6 in
///   PMEM; pod 1 puts 1 and 3 in DRAM, 5 and 7 in PMEM.
/// Epoch 0: 0 1 2 3 4 5 6 7, then 6 ×6, 5 4 7 3 0 1. Pod 0 sees 0 2 4 6 6 6 6 6 6 6 4 0: page
///   6 has 7 of 12, a majority, so its one counter ends on 6. Pod 1 sees 1 3 5 7 5 7 3 1, no
///   majority; its counter ends free.
/// Boundary: pod 0's fast frames are full; the clock passes 0 and 2 (both referenced: bits
///   cleared) and takes 0. One hardware swap (6, 0): 2 pages, nothing charged.
/// Epoch 1: 6 6 from DRAM.
/// DRAM served 0 1 2 3 and 3 0 1 in epoch 0 and 6 6 in epoch 1: 9 of 22.
#[test]
fn mempod_tracks_a_majority_page_and_swaps_it_in_by_hardware() {
    let dir = tempfile::tempdir().unwrap();
    let trace = [0, 1, 2, 3, 4, 5, 6, 7, 6, 6, 6, 6, 6, 6, 5, 4, 7, 3, 0, 1, 6, 6];
    let input = write_pages(dir.path(), &trace, None);
    let r = run(&input, "dram-pmem", &HALF, "mempod:pods=2,mea_counters=1,epoch=20");
    assert_eq!((r.migrations, r.stats.migration.swaps, r.stats.migration.by_hardware), (2, 1, 2));
    assert!(r.stats.migration.charges.is_empty());
    assert_eq!(r.migration_time_ns, 0.0, "a hardware move stops nothing");
    assert_eq!(r.fast_hit_ratio, 9.0 / 22.0);
    let m = &r.stats.policy["mempod"];
    assert_eq!((m["tracked"].as_u64(), m["promoted"].as_u64(), m["swaps"].as_u64()), (Some(1), Some(1), Some(1)));
    let pods = r.stats.policy["per_pod"].as_array().unwrap();
    assert_eq!(pods[0]["frames"], serde_json::json!([2, null]));
    assert_eq!((pods[0]["promoted"].as_u64(), pods[1]["promoted"].as_u64()), (Some(1), Some(0)));
    let rows = ts_rows(&r);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][2..6], [2.0, 1.0, 1.0, 20.0]);
    assert_eq!(rows[0][6], 7.0 / 20.0);
    // latency: DRAM 9·50, PMEM 13·150; a swap's copy does not stop the program
    assert!(r.runtime_ns >= 9.0 * 50.0 + 13.0 * 150.0);
    assert_eq!(r.stats.timing["migration_ns"], 0.0);
}

#[test]
fn mempod_defaults() {
    let info = REGISTRY.iter().find(|p| p.name == "mempod").unwrap();
    let d = |n: &str| info.params.iter().find(|p| p.name == n).unwrap().default;
    assert_eq!((d("pods"), d("mea_counters"), d("epoch"), d("initial")), ("4", "64", "50us", "interleave"));
}

// ------------------------------------------------------------------------------ all three

const SPECS: [&str; 6] = [
    "hma-epoch:epoch=2000,threshold=4",
    "hma-epoch:epoch=20us,threshold=2,os_costs=page,initial=first-touch,limit_pages=8",
    "fthp:epoch=50us",
    "fthp:epoch=20us,os_costs=epoch",
    "mempod:epoch=500",
    "mempod:epoch=5us,pods=3,mea_counters=8,initial=first-touch",
];

fn check(r: &SimResult) {
    let tiers = &r.stats.platform.tiers;
    let served: u64 = tiers.iter().map(|t| t.counters.reads + t.counters.writes).sum();
    assert_eq!(served, r.accesses, "{}: every access served once", r.policy);
    let m = &r.stats.migration;
    assert_eq!(m.migrated_bytes, m.migrations * 4096);
    assert_eq!(m.bytes_out.iter().sum::<u64>(), m.migrated_bytes);
    assert_eq!(m.bytes_in.iter().sum::<u64>(), m.migrated_bytes);
    for t in tiers {
        if let Some(cap) = t.capacity_pages {
            assert!(t.used_pages <= cap, "{}: {} over capacity", r.policy, t.name);
        }
    }
    assert!(r.runtime_ns.is_finite() && r.runtime_ns > 0.0);
}

/// The invariants (no tier over capacity, every access served once, every migrated byte
/// accounted; mechanics checked at every boundary with `paranoid`) on two and three tiers
/// and both timing models, with epochs short enough for pages to move; and the same inputs
/// give the same results.
#[test]
fn invariants_on_two_and_three_tiers() {
    let input = synth(SynthKind::Phases, 60_000, 3_000);
    for platform in ["dram-pmem", "hbm-dram-cxl"] {
        for timing in [TimingKind::Simple, TimingKind::Detailed] {
            for spec in SPECS {
                let mut job = Job::new(&input, Platform::load(platform).unwrap());
                job.capacity = caps(platform);
                job.timing = timing;
                job.paranoid = true;
                let r = tierkit_core::engine::simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"));
                check(&r);
                assert!(r.migrations > 0, "{spec} on {platform} ({timing:?}) moved nothing");
                assert!(!ts_rows(&r).is_empty(), "{spec}: no time series");
                let again = tierkit_core::engine::simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap();
                assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&again).unwrap(), "{spec} is not deterministic");
            }
        }
    }
}

/// The OS-batch seam in the `detailed` model: an epoch's batch stops the core for one fault
/// and one shootdown instead of one per page, so the four moves of the hand-worked
/// `hma-epoch` trace cost 3 · 8000 ns less.
#[test]
fn detailed_model_charges_an_os_batch_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &HMA_TRACE, None);
    let go = |spec: &str| {
        let mut job = Job::new(&input, Platform::load("hbm-ddr4").unwrap());
        job.capacity = HALF.to_vec();
        job.timing = TimingKind::Detailed;
        tierkit_core::engine::simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap()
    };
    let batch = go("hma-epoch:epoch=13,threshold=3,ar_costs=platform");
    let page = go("hma-epoch:epoch=13,threshold=3,os_costs=page,ar_costs=platform");
    assert_eq!((batch.migrations, page.migrations), (4, 4));
    assert!(close(page.runtime_ns - batch.runtime_ns, 3.0 * 8000.0), "{} vs {}", page.runtime_ns, batch.runtime_ns);
    assert_eq!(batch.stats.timing["charge_stall_ns"], 8000.0);
}

#[test]
fn registered_with_documented_parameters() {
    for name in ["hma-epoch", "fthp", "mempod"] {
        let info = REGISTRY.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name} is not registered"));
        assert!(!info.future_knowledge());
        for p in info.params {
            assert!(!p.source.is_empty() && !p.help.is_empty(), "{name}:{}", p.name);
        }
    }
    let e = tierkit_core::policy::build(&PolicySpec::parse("mempod:pod=3").unwrap()).err().unwrap().to_string();
    assert!(e.contains("mempod") && e.contains("pod") && e.contains("pods"), "{e}");
    let e = tierkit_core::policy::build(&PolicySpec::parse("fthp:epoch=soon").unwrap()).err().unwrap().to_string();
    assert!(e.contains("fthp:epoch"), "{e}");
}
