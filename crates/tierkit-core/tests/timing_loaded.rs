//! Models match hand-computed figures: loaded latency, the per-tier `loaded_latency` curve that
//! raises a tier's latency with its bandwidth utilization (docs/models.md, "Loaded latency";
//! seed 004 §3 and Fig. 2: on DRAM + Optane the read latency climbs as demand approaches a
//! tier's peak, far sooner and higher on DCPMM than on DRAM).
//!
//! Unless a test says otherwise the platform is the one of `timing_detailed.rs`:
//!   tier 0 "DRAM": 50 ns read and write, 64 GB/s → 1 ns per 64-byte line
//!   tier 1 "PMEM": 150 ns read and write, 6.4 GB/s → 10 ns per line, 640 ns per 4 KiB page
//!   CPU: 2 GHz, CPI 1 → 0.5 ns per instruction; ROB 128; 32 outstanding misses; 64 writes;
//!        load window 1000 ns
//!   migration: fault 1000 + TLB 500 + per page 250 = 1750 ns fixed; period 3000 ns.

mod common;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::mechanics::{MigrationOp, MoveBy, TierId};
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::{Platform, Resolved};
use tierkit_core::policy::{PolicySpec, NO_TIER};
use tierkit_core::timing::{AccessEvent, DetailedTiming, RunCounters, SimpleTiming, TierCounters, Timing, TimingKind, TimingReport, TimingSetup};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

fn platform() -> Platform {
    let mut p = common::hand_platform();
    p.cpu.load_window_ns = 1000.0;
    p
}

fn resolved(edit: impl FnOnce(&mut Platform)) -> Resolved {
    let mut p = platform();
    edit(&mut p);
    p.resolve(0, 4096, &[]).unwrap()
}

/// A curve whose factor is 1 everywhere: it switches the loaded bookkeeping on and must
/// change nothing.
const ALL_ONES: [[f64; 2]; 3] = [[0.0, 1.0], [0.5, 1.0], [1.0, 1.0]];

#[track_caller]
fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

fn d(r: &TimingReport, key: &str) -> f64 {
    r.detail[key].as_f64().unwrap_or_else(|| panic!("no {key} in {}", r.detail))
}

fn tier_f(r: &TimingReport, tier: usize, key: &str) -> f64 {
    r.detail["tiers"][tier][key].as_f64().unwrap_or_else(|| panic!("no tiers[{tier}].{key} in {}", r.detail))
}

fn detailed(r: &Resolved, has_insn: bool) -> DetailedTiming {
    DetailedTiming::new(r, TimingSetup { has_insn, line_bytes: 64, ..Default::default() })
}

fn finish_detailed(m: &mut DetailedTiming, instructions: Option<u64>) -> TimingReport {
    m.finish(&RunCounters { instructions, line_bytes: 64, page_bytes: 4096, ..Default::default() })
}

fn read(m: &mut impl Timing, tier: TierId, insn: u64) {
    m.access(AccessEvent { page: 0, tier, write: false, probe: NO_TIER, delay_ns: 0.0, insn });
}

// -- (a) no curve, or a curve of ones: exactly the old results ------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    Acc { tier: TierId, write: bool, probe: TierId, dinsn: u64 },
    Traffic { tier: TierId, write: bool },
    Mig { from: TierId, to: TierId, by: MoveBy },
    Period,
}

fn replay(r: &Resolved, ops: &[Op]) -> TimingReport {
    let mut m = detailed(r, true);
    let mut insn = 0;
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Acc { tier, write, probe, dinsn } => {
                insn += dinsn;
                m.access(AccessEvent { page: (i % 7) as PageId, tier, write, probe, delay_ns: 0.0, insn });
            }
            Op::Traffic { tier, write } => m.traffic(tier, write),
            Op::Mig { from, to, by } => m.migration(&MigrationOp { page: (i % 7) as PageId, from, to, swap: false, by }),
            Op::Period => m.period(),
        }
    }
    finish_detailed(&mut m, Some(insn))
}

fn random_ops(rng: &mut ChaCha8Rng, n: usize, dinsn_max: u64) -> Vec<Op> {
    (0..n)
        .map(|_| {
            let tier = rng.random_range(0..2u8);
            match rng.random_range(0..1000) {
                0..=849 => Op::Acc {
                    tier,
                    write: rng.random_range(0..3) == 0,
                    probe: if rng.random_range(0..8) == 0 { 0 } else { NO_TIER },
                    dinsn: rng.random_range(0..dinsn_max),
                },
                850..=979 => Op::Traffic { tier, write: rng.random_range(0..2) == 0 },
                980..=995 => Op::Mig { from: tier, to: 1 - tier, by: [MoveBy::Os, MoveBy::Hw, MoveBy::OsBatch][rng.random_range(0..3)] },
                _ => Op::Period,
            }
        })
        .collect()
}

#[test]
fn detailed_without_curves_or_with_a_curve_of_ones_is_unchanged_bit_for_bit() {
    for seed in 0..12u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let shared = seed % 2 == 1;
        let sync = seed % 3 == 0;
        let edit = |p: &mut Platform| {
            p.tiers[1].shared_bandwidth = shared;
            p.tiers[1].write_bw_gb_per_s = 2.0;
            p.migration.copy_from_bandwidth = sync;
        };
        let ops = random_ops(&mut rng, 3000, [2u64, 30, 400][seed as usize % 3]);
        let flat = replay(&resolved(edit), &ops);
        let ones = replay(
            &resolved(|p| {
                edit(p);
                p.tiers[0].loaded_latency = ALL_ONES.to_vec();
                p.tiers[1].loaded_latency = ALL_ONES.to_vec();
            }),
            &ops,
        );
        assert_eq!(flat.runtime_ns.to_bits(), ones.runtime_ns.to_bits(), "seed {seed}");
        for k in ["rob_stall_ns", "mshr_stall_ns", "write_queue_stall_ns", "tail_ns", "avg_miss_latency_ns", "migration_stall_ns"] {
            assert_eq!(d(&flat, k).to_bits(), d(&ones, k).to_bits(), "seed {seed}: {k}");
        }
        for t in 0..2 {
            close(tier_f(&flat, t, "avg_read_latency_ns"), tier_f(&ones, t, "avg_read_latency_ns"));
            assert_eq!(tier_f(&ones, t, "mean_latency_factor"), 1.0, "seed {seed}");
        }
        // without curves the detail has no loaded-latency keys at all (old output)
        assert!(flat.detail["tiers"][1].get("mean_latency_factor").is_none());
    }
}

fn write_trace(dir: &std::path::Path, pages: &[u64], writes: &[bool], insn_step: u64) -> TraceInput {
    let p = dir.join("t.tkt");
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let mut w = TktWriter::create(&p, &meta, true).unwrap();
    for (i, (&pg, &wr)) in pages.iter().zip(writes).enumerate() {
        let a = Access { addr: 0x10000 + pg * 4096 + (i as u64 % 64) * 64, write: wr, insn: insn_step * (i as u64 + 1), size: 64, ..Default::default() };
        w.write_access(&a).unwrap();
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn run(input: &TraceInput, p: Platform, timing: TimingKind, spec: &str) -> SimResult {
    let mut job = Job::new(input, p);
    job.capacity = vec![(0, Capacity::Fraction(0.5))];
    job.timing = timing;
    job.paranoid = true;
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

#[test]
fn end_to_end_without_curves_gives_the_known_figures_and_ones_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // timing_detailed.rs, first_touch_end_to_end_hand_computed: 8 reads 1000 instructions
    // apart, tiers F F S S F F S S: detailed 4408 ns; simple 4 · 50 + 4 · 150 = 800 ns.
    let input = write_trace(dir.path(), &[0, 2, 1, 3, 0, 2, 1, 3], &[false; 8], 1000);
    let mut ones = platform();
    for t in &mut ones.tiers {
        t.loaded_latency = ALL_ONES.to_vec();
    }
    for p in [platform(), ones] {
        let r = run(&input, p.clone(), TimingKind::Detailed, "first-touch");
        close(r.runtime_ns, 4408.0);
        assert_eq!(r.runtime_ns, 4408.0);
        let s = run(&input, p, TimingKind::Simple, "first-touch");
        assert_eq!(s.runtime_ns, 800.0);
    }
    // a longer run with migrations, writes and periods: bit for bit, both models
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let pages: Vec<u64> = (0..4000).map(|_| rng.random_range(0..64u64).min(rng.random_range(0..64u64))).collect();
    let writes: Vec<bool> = (0..4000).map(|_| rng.random_range(0..4) == 0).collect();
    let input = write_trace(dir.path(), &pages, &writes, 7);
    let mut ones = platform();
    for t in &mut ones.tiers {
        t.loaded_latency = ALL_ONES.to_vec();
    }
    for timing in [TimingKind::Simple, TimingKind::Detailed] {
        for spec in ["history:period=100", "first-touch"] {
            let a = run(&input, platform(), timing, spec);
            let b = run(&input, ones.clone(), timing, spec);
            assert_eq!(a.runtime_ns.to_bits(), b.runtime_ns.to_bits(), "{spec} {timing:?}");
            assert_eq!(a.migration_time_ns.to_bits(), b.migration_time_ns.to_bits(), "{spec} {timing:?}");
            if timing == TimingKind::Simple {
                // flat platforms keep the old breakdown; a curve adds the per-tier load
                assert!(a.stats.timing.get("tiers").is_none());
                assert_eq!(b.stats.timing["tiers"][1]["latency_factor"].as_f64(), Some(1.0));
            }
        }
    }
}

// -- (b) simple: the runtime is the fixed point of its own utilization ----------------------

/// Four PMEM reads through the simple model: 4 · 150 = 600 ns of latency, 4 lines of bytes.
fn simple_four_reads(edit: impl FnOnce(&mut Platform)) -> TimingReport {
    let r = resolved(edit);
    let mut m = SimpleTiming::new(&r, TimingSetup { line_bytes: 64, ..Default::default() });
    for i in 0..4 {
        read(&mut m, 1, i);
    }
    let tiers = vec![TierCounters::default(), TierCounters { reads: 4, bytes_read: 4 * 64, ..Default::default() }];
    m.finish(&RunCounters { accesses: 4, tiers, line_bytes: 64, page_bytes: 4096, ..Default::default() })
}

#[test]
fn simple_model_solves_the_loaded_runtime_by_hand() {
    // Flat: 600 ns of latency; PMEM is busy 4 · 64 B / 6.4 GB/s = 40 ns, far below.
    close(simple_four_reads(|_| {}).runtime_ns, 600.0);

    // Curve f(u) = 1 + 3.6 u ([0, 1] to [1, 4.6]). With u = 40 / R:
    //   R = 600 · (1 + 3.6 · 40 / R)  ⇔  R² − 600 R − 86 400 = 0
    //   R = (600 + √(360 000 + 345 600)) / 2 = (600 + 840) / 2 = 720 ns,
    //   u = 40 / 720 = 1/18, factor 1 + 3.6 / 18 = 1.2 (and 600 · 1.2 = 720).
    let r = simple_four_reads(|p| p.tiers[1].loaded_latency = vec![[0.0, 1.0], [1.0, 4.6]]);
    close(r.runtime_ns, 720.0);
    close(tier_f(&r, 1, "utilization"), 1.0 / 18.0);
    close(tier_f(&r, 1, "latency_factor"), 1.2);
    close(d(&r, "latency_ns"), 720.0);
    close(d(&r, "unloaded_latency_ns"), 600.0);
    close(d(&r, "queue_ns"), 0.0);
    // DRAM served nothing: idle, factor 1
    assert_eq!(tier_f(&r, 0, "utilization"), 0.0);
    assert_eq!(tier_f(&r, 0, "latency_factor"), 1.0);

    // PMEM at 0.32 GB/s: 200 ns per line, busy 800 ns: flat, the floor binds (600 → 800).
    close(simple_four_reads(|p| p.tiers[1].read_bw_gb_per_s = 0.32).runtime_ns, 800.0);
    // With f(u) = 1 + 0.5625 u the loaded latency overtakes the floor:
    //   R = 600 · (1 + 0.5625 · 800 / R)  ⇔  R² − 600 R − 270 000 = 0
    //   R = (600 + √(360 000 + 1 080 000)) / 2 = (600 + 1200) / 2 = 900 ns,
    //   u = 800 / 900, factor 1 + 0.5625 · 8/9 = 1.5.
    let r = simple_four_reads(|p| {
        p.tiers[1].read_bw_gb_per_s = 0.32;
        p.tiers[1].loaded_latency = vec![[0.0, 1.0], [1.0, 1.5625]];
    });
    close(r.runtime_ns, 900.0);
    close(tier_f(&r, 1, "utilization"), 8.0 / 9.0);
    close(tier_f(&r, 1, "latency_factor"), 1.5);
    // With f(u) = 1 + 0.2 u it does not: at R = 800, u = 1, latency 600 · 1.2 = 720 < 800,
    // so R = 800 with 80 ns of queue.
    let r = simple_four_reads(|p| {
        p.tiers[1].read_bw_gb_per_s = 0.32;
        p.tiers[1].loaded_latency = vec![[0.0, 1.0], [1.0, 1.2]];
    });
    close(r.runtime_ns, 800.0);
    close(tier_f(&r, 1, "latency_factor"), 1.2);
    close(d(&r, "latency_ns"), 720.0);
    close(d(&r, "queue_ns"), 80.0);
}

#[test]
fn simple_model_counts_periods_in_the_elapsed_time() {
    // One period of 3000 ns (a periodic policy's cost) lengthens the run the utilization is
    // taken over. Curve f(u) = 1 + 36 u, busy 40 ns:
    //   R = 600 · (1 + 36 · 40 / R) + 3000  ⇔  R² − 3600 R − 864 000 = 0
    //   R = (3600 + √(12 960 000 + 3 456 000)) / 2 = (3600 + 4051.67...) / 2
    let r = resolved(|p| p.tiers[1].loaded_latency = vec![[0.0, 1.0], [1.0, 37.0]]);
    let mut m = SimpleTiming::new(&r, TimingSetup { line_bytes: 64, ..Default::default() });
    for i in 0..4 {
        read(&mut m, 1, i);
    }
    m.period();
    let tiers = vec![TierCounters::default(), TierCounters { reads: 4, bytes_read: 256, ..Default::default() }];
    let rep = m.finish(&RunCounters { accesses: 4, tiers, periods: 1, line_bytes: 64, page_bytes: 4096, ..Default::default() });
    let expect = (3600.0 + (3600.0f64 * 3600.0 + 4.0 * 864_000.0).sqrt()) / 2.0;
    close(rep.runtime_ns, expect);
    close(tier_f(&rep, 1, "utilization"), 40.0 / expect);
}

// -- (c) detailed: the recent utilization raises the latency ---------------------------------

#[test]
fn detailed_decaying_busy_estimate_by_hand() {
    // Curve f(u) = 1 + 100 u on PMEM, τ = 1000 ns, a line holds PMEM's read queue x = 10 ns.
    // Read A at insn 100 (50 ns): PMEM idle, u = 0, done 50 + 150 = 200. Its transfer
    // [50, 60) leaves B(60) = τ (1 − e^{−x/τ}) = 1000 (1 − e^{−0.01}) = 9.9502 ns of busy time.
    // Read B at insn 110 (55 ns) waits for the queue until 60: u = B(60)/τ = 1 − e^{−0.01},
    // factor 1 + 100 u = 1.99502, latency 150 · 1.99502 = 299.25; done 60 + 299.25.
    let r = resolved(|p| p.tiers[1].loaded_latency = vec![[0.0, 1.0], [1.0, 101.0]]);
    let mut m = detailed(&r, true);
    read(&mut m, 1, 100);
    read(&mut m, 1, 110);
    let rep = finish_detailed(&mut m, Some(110));
    let u = 1.0 - (-0.01f64).exp();
    close(rep.runtime_ns, 60.0 + 150.0 * (1.0 + 100.0 * u));
    close(tier_f(&rep, 1, "mean_latency_factor"), (1.0 + 1.0 + 100.0 * u) / 2.0);
    // the queue delay is unchanged (5 ns for B); the mean read latency includes the factor
    close(tier_f(&rep, 1, "read_queue_delay_ns"), 5.0);
    close(tier_f(&rep, 1, "avg_read_latency_ns"), (150.0 + 150.0 * (1.0 + 100.0 * u) + 5.0) / 2.0);

    // Read B at insn 1100 instead: past the ROB, so the core runs to insn 228 (114 ns), waits
    // for A to retire at 200, and runs 872 more instructions: B starts at 636. The estimate
    // decays over the 576 ns since A's transfer ended: u = (1 − e^{−0.01}) e^{−0.576}.
    let mut m = detailed(&r, true);
    read(&mut m, 1, 100);
    read(&mut m, 1, 1100);
    let rep = finish_detailed(&mut m, Some(1100));
    let u = (1.0 - (-0.01f64).exp()) * (-0.576f64).exp();
    close(rep.runtime_ns, 636.0 + 150.0 * (1.0 + 100.0 * u));
}

/// `n` PMEM reads `step` instructions apart (0.5 ns each).
fn stream(edit: impl FnOnce(&mut Platform), n: u64, step: u64) -> TimingReport {
    let r = resolved(edit);
    let mut m = detailed(&r, true);
    for k in 1..=n {
        read(&mut m, 1, k * step);
    }
    finish_detailed(&mut m, Some(n * step))
}

#[test]
fn detailed_saturating_stream_pays_the_curve_and_a_light_one_does_not() {
    let knee = vec![[0.0, 1.0], [0.5, 1.0], [1.0, 3.0]];
    // Streaming: a read every 0.5 ns against 10 ns per line. Flat, PMEM's read queue is never
    // idle: runtime 0.5 + 10 · 2999 + 150 (timing_detailed.rs, bandwidth-bound stream).
    let flat = stream(|_| {}, 3000, 1);
    close(flat.runtime_ns, 0.5 + 10.0 * 2999.0 + 150.0);
    // Loaded, the 32 MSHRs limit the stream (Little's law): 32 reads in flight, each 150 · f,
    // give u = 10 ns · 32 / (150 f) = 2.1333 / f; above the knee f = 1 + 4 (u − 0.5) = 4u − 1,
    // so f² + f − 8.5333 = 0: f = 2.464, u = 0.866, one read per 10 / u = 11.55 ns. The mean
    // factor is a little lower (the first µs, while the estimate builds up).
    let loaded = stream(|p| p.tiers[1].loaded_latency = knee.clone(), 3000, 1);
    let f_eq = (-1.0 + (1.0f64 + 4.0 * 32.0 * 10.0 * 4.0 / 150.0).sqrt()) / 2.0;
    let f = tier_f(&loaded, 1, "mean_latency_factor");
    assert!(f > f_eq - 0.1 && f < f_eq, "mean factor {f}, equilibrium {f_eq}");
    let per_read = loaded.runtime_ns / 3000.0;
    let expect = 150.0 * f_eq / 32.0;
    assert!((per_read - expect).abs() < 0.02 * expect, "{per_read} ns per read, expected {expect}");
    let (fl, ld) = (tier_f(&flat, 1, "avg_read_latency_ns"), tier_f(&loaded, 1, "avg_read_latency_ns"));
    assert!(ld > fl + 40.0, "saturated: {ld} vs flat {fl}");
    // Light: a read every 2000 instructions (1000 ns): PMEM is busy 10 ns in 1000, u ≈ 0.01,
    // below the knee: exactly the flat figures.
    let flat = stream(|_| {}, 300, 2000);
    let loaded = stream(|p| p.tiers[1].loaded_latency = knee.clone(), 300, 2000);
    close(tier_f(&loaded, 1, "avg_read_latency_ns"), tier_f(&flat, 1, "avg_read_latency_ns"));
    assert_eq!(loaded.runtime_ns, flat.runtime_ns);
    assert_eq!(tier_f(&loaded, 1, "mean_latency_factor"), 1.0);
    // ... and with a curve rising from u = 0 the light stream pays almost nothing (u ≈ 0.016)
    let slope = stream(|p| p.tiers[1].loaded_latency = vec![[0.0, 1.0], [1.0, 3.0]], 300, 2000);
    let f = tier_f(&slope, 1, "mean_latency_factor");
    assert!(f > 1.0 && f < 1.05, "{f}");
}

#[test]
fn detailed_writes_and_copies_load_the_tier_too() {
    // Shared-bandwidth PMEM: 50 posted writes, then one read right behind them. The writes
    // occupy the media as much as reads would, so the read sees a loaded tier.
    let curve = vec![[0.0, 1.0], [1.0, 3.0]];
    let run = |with: bool| {
        let r = resolved(|p| {
            p.tiers[1].shared_bandwidth = true;
            if with {
                p.tiers[1].loaded_latency = curve.clone();
            }
        });
        let mut m = detailed(&r, true);
        for i in 1..=50 {
            m.access(AccessEvent { page: 0, tier: 1, write: true, probe: NO_TIER, delay_ns: 0.0, insn: i });
        }
        read(&mut m, 1, 51);
        finish_detailed(&mut m, Some(51))
    };
    let (flat, loaded) = (run(false), run(true));
    let f = tier_f(&loaded, 1, "mean_latency_factor");
    assert!(f > 1.3, "{f}");
    close(loaded.runtime_ns - flat.runtime_ns, 150.0 * (f - 1.0));
    // A page copy out of PMEM (640 ns of its read queue) loads it for the reads that follow.
    let r = resolved(|p| p.tiers[1].loaded_latency = curve.clone());
    let mut m = detailed(&r, true);
    m.migration(&MigrationOp { page: 9, from: 1, to: 0, swap: false, by: MoveBy::Hw });
    read(&mut m, 1, 1);
    let rep = finish_detailed(&mut m, Some(1));
    // the read starts when the copy's read ends (640.5 ns of B ≈ τ(1 − e^{−0.64}))
    let u = 1.0 - (-0.64f64).exp();
    close(tier_f(&rep, 1, "mean_latency_factor"), 1.0 + 2.0 * u);
}

#[test]
fn detailed_loaded_runtime_never_drops_below_the_flat_one() {
    for seed in 0..10u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let ops = random_ops(&mut rng, 2000, [2u64, 30, 400][seed as usize % 3]);
        let flat = replay(&resolved(|_| {}), &ops);
        let loaded = replay(
            &resolved(|p| {
                p.tiers[0].loaded_latency = vec![[0.0, 1.0], [0.8, 1.5], [1.0, 2.0]];
                p.tiers[1].loaded_latency = vec![[0.0, 1.0], [0.6, 2.0], [1.0, 7.0]];
                p.cpu.load_window_ns = [200.0, 1000.0, 5000.0][seed as usize % 3];
            }),
            &ops,
        );
        assert!(loaded.runtime_ns >= flat.runtime_ns, "seed {seed}: {} < {}", loaded.runtime_ns, flat.runtime_ns);
        // deterministic: the same inputs give the same bits
        let again = replay(
            &resolved(|p| {
                p.tiers[0].loaded_latency = vec![[0.0, 1.0], [0.8, 1.5], [1.0, 2.0]];
                p.tiers[1].loaded_latency = vec![[0.0, 1.0], [0.6, 2.0], [1.0, 7.0]];
                p.cpu.load_window_ns = [200.0, 1000.0, 5000.0][seed as usize % 3];
            }),
            &ops,
        );
        assert_eq!(loaded.runtime_ns.to_bits(), again.runtime_ns.to_bits());
    }
}

#[test]
fn presets_with_curves_run_end_to_end_and_cost_at_least_the_flat_time() {
    let dir = tempfile::tempdir().unwrap();
    // a tight loop over 32 pages, 2 instructions apart: enough demand to load the tiers
    let pages: Vec<u64> = (0..20_000u64).map(|i| (i * 7) % 32).collect();
    let writes: Vec<bool> = (0..20_000).map(|i| i % 3 == 0).collect();
    let input = write_trace(dir.path(), &pages, &writes, 2);
    for name in ["dram-dcpmm", "dram-cxl"] {
        let p = Platform::load(name).unwrap();
        let mut flat = p.clone();
        for t in &mut flat.tiers {
            t.loaded_latency.clear();
        }
        for timing in [TimingKind::Simple, TimingKind::Detailed] {
            let a = run(&input, flat.clone(), timing, "first-touch");
            let b = run(&input, p.clone(), timing, "first-touch");
            assert!(b.runtime_ns >= a.runtime_ns, "{name} {timing:?}: {} < {}", b.runtime_ns, a.runtime_ns);
        }
    }
}

// -- (d) bad curves are refused with the file and key named ---------------------------------

fn toml_platform(curve: &str, load_window: &str) -> String {
    format!(
        r#"name = "box"
[[tiers]]
name = "DRAM"
read_latency_ns = 50.0
write_latency_ns = 50.0
read_bw_gb_per_s = 64.0
write_bw_gb_per_s = 64.0
{curve}

[[tiers]]
name = "PMEM"
read_latency_ns = 150.0
write_latency_ns = 150.0
read_bw_gb_per_s = 6.4
write_bw_gb_per_s = 6.4

[cpu]
{load_window}
"#
    )
}

fn load_err(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("box.toml");
    std::fs::write(&f, text).unwrap();
    let path = f.to_str().unwrap().to_string();
    let e = Platform::load(&path).expect_err(text);
    let s = e.to_string();
    assert!(e.is_user_error(), "{s}");
    assert!(s.starts_with(&path), "the message names the file: {s}");
    assert!(!s.contains('\n'), "one line: {s}");
    s
}

#[test]
fn bad_curves_name_the_file_and_the_key() {
    // a good curve (integers allowed) loads
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ok.toml");
    std::fs::write(&f, toml_platform("loaded_latency = [[0, 1], [0.8, 1.5], [1, 3]]", "load_window_ns = 500.0")).unwrap();
    let p = Platform::load(f.to_str().unwrap()).unwrap();
    assert_eq!(p.tiers[0].loaded_latency, vec![[0.0, 1.0], [0.8, 1.5], [1.0, 3.0]]);
    assert_eq!(p.cpu.load_window_ns, 500.0);
    assert!(p.tiers[1].loaded_latency.is_empty());

    let key = "tiers[0] (DRAM).loaded_latency";
    for (curve, why) in [
        ("[[0.5, 1.2], [0.4, 1.5]]", "strictly increasing"),
        ("[[0.5, 1.2], [0.5, 1.5]]", "strictly increasing"),
        ("[[0.2, 0.9]]", "at least 1"),
        ("[[0.2, 1.5], [0.6, 1.2]]", "must not decrease"),
        ("[[1.5, 2.0]]", "in [0, 1]"),
        ("[[-0.1, 1.0]]", "in [0, 1]"),
        ("[[0.5, nan]]", "at least 1"),
    ] {
        let s = load_err(&toml_platform(&format!("loaded_latency = {curve}"), ""));
        assert!(s.contains(key) && s.contains(why), "{curve}: {s}");
    }
    // a point that is not a pair is a parse error that names the field
    let s = load_err(&toml_platform("loaded_latency = [[0.5]]", ""));
    assert!(s.contains("loaded_latency") || s.contains("length"), "{s}");
    for w in ["load_window_ns = 0.0", "load_window_ns = -5.0"] {
        let s = load_err(&toml_platform("", w));
        assert!(s.contains("cpu.load_window_ns") && s.contains("positive"), "{s}");
    }
}
