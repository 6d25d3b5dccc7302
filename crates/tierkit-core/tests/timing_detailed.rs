//! Models match hand-computed figures: the `detailed` timing model (docs/models.md, section
//! `detailed`), driven directly through the `Timing` trait and end to end through the engine.
//!
//! Unless a test says otherwise the platform is (set field by field, so that edits to the
//! presets do not move these figures):
//!   tier 0 "DRAM": 50 ns read and write, 64 GB/s read and write → 1 ns per 64-byte line
//!   tier 1 "PMEM": 150 ns read and write, 6.4 GB/s read and write → 10 ns per line,
//!                  640 ns per 4 KiB page
//!   CPU: 2 GHz, CPI 1 → 0.5 ns per instruction; ROB 128; 32 outstanding misses; 64 writes
//!   migration: fault 1000 + TLB 500 + per page 250 = 1750 ns fixed; period 3000 ns.

mod common;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tierkit_core::engine::{run_policy, simulate, Job};
use tierkit_core::mechanics::{MigrationOp, MoveBy, TierId};
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::{Platform, Resolved};
use tierkit_core::policy::{Ctx, Needs, Policy, PolicySpec, NO_TIER};
use tierkit_core::timing::{AccessEvent, DetailedTiming, RunCounters, Timing, TimingKind, TimingReport, TimingSetup};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, TraceInput, TraceMeta};
use tierkit_core::units::{Capacity, Period};

fn platform() -> Platform {
    common::hand_platform()
}

fn resolved(edit: impl FnOnce(&mut Platform)) -> Resolved {
    let mut p = platform();
    edit(&mut p);
    p.resolve(0, 4096, &[]).unwrap()
}

fn model(r: &Resolved, has_insn: bool) -> DetailedTiming {
    DetailedTiming::new(r, TimingSetup { has_insn, line_bytes: 64, ..Default::default() })
}

fn finish(m: &mut DetailedTiming, instructions: Option<u64>) -> TimingReport {
    m.finish(&RunCounters { instructions, line_bytes: 64, page_bytes: 4096, ..Default::default() })
}

#[track_caller]
fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

fn d(r: &TimingReport, key: &str) -> f64 {
    r.detail[key].as_f64().unwrap_or_else(|| panic!("no {key} in {}", r.detail))
}

fn read(m: &mut DetailedTiming, tier: TierId, insn: u64) {
    m.access(AccessEvent { page: 0, tier, write: false, probe: NO_TIER, delay_ns: 0.0, insn });
}

fn write(m: &mut DetailedTiming, tier: TierId, insn: u64) {
    m.access(AccessEvent { page: 0, tier, write: true, probe: NO_TIER, delay_ns: 0.0, insn });
}

#[test]
fn a_single_read_on_an_idle_tier_costs_compute_plus_latency() {
    let r = resolved(|_| {});
    // 100 instructions · 0.5 ns = 50 ns, then 150 ns of PMEM latency
    let mut m = model(&r, true);
    read(&mut m, 1, 100);
    let rep = finish(&mut m, Some(100));
    close(rep.runtime_ns, 200.0);
    // IPC = 100 / (200 ns · 2 GHz)
    close(rep.ipc.unwrap(), 0.25);
    close(d(&rep, "compute_ns"), 50.0);
    close(d(&rep, "tail_ns"), 150.0);
    close(rep.detail["tiers"][1]["avg_read_latency_ns"].as_f64().unwrap(), 150.0);
    // DRAM: 50 + 50
    let mut m = model(&r, true);
    read(&mut m, 0, 100);
    close(finish(&mut m, Some(100)).runtime_ns, 100.0);
}

#[test]
fn independent_reads_within_the_rob_overlap() {
    let r = resolved(|_| {});
    // read A at insn 100: issued at 50, starts 50, queue busy to 60, done 200
    // read B at insn 110 (< 100 + 128): issued at 55, waits for the queue to 60, done 210
    // one latency plus a line's transfer, not 50 + 150 + 5 + 150 = 355
    let mut m = model(&r, true);
    read(&mut m, 1, 100);
    read(&mut m, 1, 110);
    let rep = finish(&mut m, Some(110));
    close(rep.runtime_ns, 210.0);
    close(rep.detail["tiers"][1]["read_queue_delay_ns"].as_f64().unwrap(), 5.0);
    close(d(&rep, "window_stall_ns"), 0.0);
    // B at insn 227, the last instruction that fits behind A: issued at 113.5, done 263.5
    let mut m = model(&r, true);
    read(&mut m, 1, 100);
    read(&mut m, 1, 227);
    close(finish(&mut m, Some(227)).runtime_ns, 263.5);
}

#[test]
fn reads_further_apart_than_the_rob_do_not_overlap() {
    let r = resolved(|_| {});
    // A at insn 100 retires at 200. Instruction 228 = 100 + 128 needs A retired: the core
    // reaches it at 114 and waits 86 ns; then 72 instructions (36 ns): B issued at 236,
    // done at 386 = compute 150 + stall 86 + latency 150.
    let mut m = model(&r, true);
    read(&mut m, 1, 100);
    read(&mut m, 1, 300);
    let rep = finish(&mut m, Some(300));
    close(rep.runtime_ns, 386.0);
    close(d(&rep, "rob_stall_ns"), 86.0);
    close(d(&rep, "mshr_stall_ns"), 0.0);
}

#[test]
fn the_rob_holds_at_most_rob_entries_misses() {
    let r = resolved(|p| {
        p.cpu.rob_entries = 4;
        p.cpu.max_outstanding = 256;
    });
    // Six DRAM reads at the same instruction (100, at 50 ns): read k starts at 50 + k (1 ns
    // per line) and is done at 100 + k. The ROB holds four: read 4 waits for read 0 to retire
    // (100), starts at 100, done 150; read 5 waits for read 1 (101), done 151.
    let mut m = model(&r, true);
    for _ in 0..6 {
        read(&mut m, 0, 100);
    }
    let rep = finish(&mut m, Some(100));
    close(rep.runtime_ns, 151.0);
    close(d(&rep, "rob_stall_ns"), 101.0 - 50.0);
}

#[test]
fn one_outstanding_miss_serializes() {
    let r = resolved(|p| p.cpu.max_outstanding = 1);
    // B (insn 110, at 55) waits for A's MSHR until 200 (145 ns), then 150 ns: done 350
    let mut m = model(&r, true);
    read(&mut m, 1, 100);
    read(&mut m, 1, 110);
    let rep = finish(&mut m, Some(110));
    close(rep.runtime_ns, 350.0);
    close(d(&rep, "mshr_stall_ns"), 145.0);
}

#[test]
fn a_bandwidth_bound_stream_takes_bytes_over_bandwidth() {
    let r = resolved(|_| {});
    // No instruction counts: one instruction (0.5 ns) per access. PMEM takes 10 ns per line,
    // so read k starts at 0.5 + 10k whatever the MSHR stalls (they only hold the core until
    // done_{k-32} = 10k - 169.5, before the queue frees) and is done at 0.5 + 10k + 150.
    let n = 1000u64;
    let mut m = model(&r, false);
    for _ in 0..n {
        read(&mut m, 1, 0);
    }
    let rep = finish(&mut m, None);
    close(rep.runtime_ns, 0.5 + 10.0 * (n - 1) as f64 + 150.0);
    assert!(rep.ipc.is_none());
    close(d(&rep, "instructions"), n as f64);
    close(rep.detail["tiers"][1]["busy_read_ns"].as_f64().unwrap(), 10.0 * n as f64);
    // ≈ N · 64 B / 6.4 GB/s = 10 µs
    assert!((rep.runtime_ns / (n as f64 * 10.0) - 1.0).abs() < 0.02);
}

#[test]
fn write_heavy_traffic_to_a_slow_write_tier_stalls_the_core() {
    // 1000 writes, 20 instructions (10 ns) apart, all to PMEM.
    let n = 1000u64;
    let run = |r: &Resolved| {
        let mut m = model(r, true);
        for k in 0..n {
            write(&mut m, 1, 20 * (k + 1));
        }
        finish(&mut m, Some(20 * n))
    };
    // Symmetric PMEM (10 ns per line): each write drains before the next arrives; the
    // runtime is the compute, 1000 · 20 · 0.5 = 10 µs.
    let sym = run(&resolved(|_| {}));
    close(sym.runtime_ns, 10_000.0);
    close(d(&sym, "write_queue_stall_ns"), 0.0);
    // Write bandwidth 0.64 GB/s: 100 ns per line. The queue is busy from the first write
    // (arrives at 10) on: write k drains at 10 + 100(k+1). Once 64 writes are unfinished
    // (from k = 71 on) write k waits for write k-64; the last (k = 999) waits until write
    // 935 drains at 10 + 100 · 936 = 93 610 ns.
    let asym = run(&resolved(|p| p.tiers[1].write_bw_gb_per_s = 0.64));
    close(asym.runtime_ns, 93_610.0);
    close(d(&asym, "write_queue_stall_ns"), 93_610.0 - 10_000.0);
    // Pending writes do not extend the runtime: 64 are still draining (6400 ns).
    close(d(&asym, "queues_drain_after_ns"), 6_400.0);
}

#[test]
fn on_shared_bandwidth_writes_delay_the_reads_behind_them() {
    // 10 PMEM writes at insns 1..10 (arriving 0.5..5 ns), 100 ns each on a 0.64 GB/s write
    // path; then a read at insn 11 (5.5 ns).
    let run = |shared: bool| {
        let r = resolved(|p| {
            p.tiers[1].write_bw_gb_per_s = 0.64;
            p.tiers[1].shared_bandwidth = shared;
        });
        let mut m = model(&r, true);
        for i in 1..=10 {
            write(&mut m, 1, i);
        }
        read(&mut m, 1, 11);
        finish(&mut m, Some(11))
    };
    // separate queues: the read starts at once, done at 5.5 + 150
    close(run(false).runtime_ns, 155.5);
    // one queue: the writes hold the media until 0.5 + 10 · 100 = 1000.5; done at 1150.5
    let shared = run(true);
    close(shared.runtime_ns, 1150.5);
    close(shared.detail["tiers"][1]["read_queue_delay_ns"].as_f64().unwrap(), 995.0);
}

#[test]
fn a_migration_charges_fixed_costs_and_occupies_both_queues() {
    let op = MigrationOp { page: 0, from: 1, to: 0, swap: false, by: MoveBy::Os };
    // Asynchronous copy: the core pays 1750 ns; the copy holds PMEM's read queue for 640 ns
    // (to 2390) and DRAM's write queue for 64 ns (to 1814).
    // Then a PMEM read at insn 1 (1750.5) waits to 2390, done 2540; a DRAM write at insn 2
    // (1751) waits to 1814 (63 ns of write queueing).
    let r = resolved(|_| {});
    let mut m = model(&r, true);
    m.migration(&op);
    close(m.now_ns(), 1750.0);
    read(&mut m, 1, 1);
    write(&mut m, 0, 2);
    let rep = finish(&mut m, Some(2));
    close(rep.runtime_ns, 2540.0);
    close(rep.migration_time_ns, 1750.0);
    let t = &rep.detail["tiers"];
    close(t[1]["busy_read_ns"].as_f64().unwrap(), 640.0 + 10.0);
    close(t[1]["read_queue_delay_ns"].as_f64().unwrap(), 2390.0 - 1750.5);
    close(t[0]["busy_write_ns"].as_f64().unwrap(), 64.0 + 1.0);
    close(t[0]["write_queue_delay_ns"].as_f64().unwrap(), 63.0);
    close(d(&rep, "async_copy_ns"), 640.0);

    // Synchronous copy (move_pages): the core also waits for the copy, which streams at the
    // slower side: max(640, 64) → 2390 ns charged; the read at insn 1 (2390.5) finds the
    // queue free: done 2540.5.
    let r = resolved(|p| p.migration.copy_from_bandwidth = true);
    let mut m = model(&r, true);
    m.migration(&op);
    close(m.now_ns(), 2390.0);
    read(&mut m, 1, 1);
    let rep = finish(&mut m, Some(1));
    close(rep.runtime_ns, 2540.5);
    close(rep.migration_time_ns, 2390.0);
    close(d(&rep, "migration_copy_ns"), 640.0);
}

#[test]
fn a_period_stalls_the_core_and_a_probe_adds_its_latency() {
    let r = resolved(|_| {});
    let mut m = model(&r, true);
    m.period();
    close(m.now_ns(), 3000.0);
    // probe DRAM at 3050 (insn 100): done 3100; the PMEM read then takes 150 → 3250.
    // A fill written to DRAM alongside adds no latency.
    m.traffic(0, true);
    m.access(AccessEvent { page: 0, tier: 1, write: false, probe: 0, delay_ns: 0.0, insn: 100 });
    let rep = finish(&mut m, Some(100));
    close(rep.runtime_ns, 3250.0);
    close(d(&rep, "period_stall_ns"), 3000.0);
    assert_eq!(rep.detail["tiers"][0]["probes"], 1);
}

// -- runtime never decreases when latency or traffic increases ------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    Acc { tier: TierId, write: bool, probe: TierId, dinsn: u64 },
    Traffic { tier: TierId, write: bool },
    Mig { from: TierId, to: TierId },
    Period,
}

fn replay(r: &Resolved, ops: &[Op]) -> TimingReport {
    let mut m = model(r, true);
    let mut insn = 0;
    for op in ops {
        match *op {
            Op::Acc { tier, write, probe, dinsn } => {
                insn += dinsn;
                m.access(AccessEvent { page: 0, tier, write, probe, delay_ns: 0.0, insn });
            }
            Op::Traffic { tier, write } => m.traffic(tier, write),
            Op::Mig { from, to } => m.migration(&MigrationOp { page: 0, from, to, swap: false, by: MoveBy::Os }),
            Op::Period => m.period(),
        }
    }
    finish(&mut m, Some(insn))
}

fn random_platform(rng: &mut ChaCha8Rng) -> Platform {
    let mut p = platform();
    let mut third = p.tiers[1].clone();
    third.name = "CXL".into();
    p.tiers.push(third);
    for t in &mut p.tiers {
        t.read_latency_ns = rng.random_range(20.0..400.0);
        t.write_latency_ns = rng.random_range(20.0..400.0);
        t.read_bw_gb_per_s = rng.random_range(0.5..20.0);
        t.write_bw_gb_per_s = rng.random_range(0.1..20.0);
        t.shared_bandwidth = rng.random_range(0..2) == 1;
    }
    p.cpu.freq_ghz = rng.random_range(1.0..4.0);
    p.cpu.base_cpi = rng.random_range(0.3..2.0);
    p.cpu.rob_entries = rng.random_range(4..256);
    p.cpu.max_outstanding = rng.random_range(1..16);
    p.cpu.write_queue_entries = rng.random_range(1..16);
    p.migration.copy_from_bandwidth = rng.random_range(0..2) == 1;
    p.migration.fault_ns = 0.0;
    p.migration.tlb_shootdown_ns = 0.0;
    p.migration.per_page_ns = rng.random_range(0.0..500.0);
    p.migration.per_period_ns = rng.random_range(0.0..500.0);
    p
}

fn random_op(rng: &mut ChaCha8Rng, dinsn_max: u64) -> Op {
    let tier = rng.random_range(0..3u8);
    match rng.random_range(0..1000) {
        0..=849 => Op::Acc {
            tier,
            write: rng.random_range(0..3) == 0,
            probe: if rng.random_range(0..8) == 0 { 0 } else { NO_TIER },
            dinsn: rng.random_range(0..dinsn_max),
        },
        850..=989 => Op::Traffic { tier, write: rng.random_range(0..2) == 0 },
        990..=995 => Op::Mig { from: tier, to: (tier + 1) % 3 },
        _ => Op::Period,
    }
}

#[test]
fn runtime_never_decreases_when_latency_or_traffic_increases() {
    for seed in 0..40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let p = random_platform(&mut rng);
        let dinsn_max = [2u64, 20, 400][seed as usize % 3];
        let ops: Vec<Op> = (0..1500).map(|_| random_op(&mut rng, dinsn_max)).collect();
        let base = replay(&p.resolve(0, 4096, &[]).unwrap(), &ops);

        // every stall is accounted: runtime = the sum of the parts
        let parts = ["compute_ns", "window_stall_ns", "tail_ns", "write_queue_stall_ns", "migration_stall_ns", "period_stall_ns"];
        let sum: f64 = parts.iter().map(|k| d(&base, k)).sum();
        assert!((sum - base.runtime_ns).abs() <= 1e-6 * base.runtime_ns, "seed {seed}: parts {sum} runtime {}", base.runtime_ns);

        let check = |what: &str, r: TimingReport| {
            assert!(r.runtime_ns >= base.runtime_ns * (1.0 - 1e-12), "seed {seed}: {what} lowered the runtime from {} to {}", base.runtime_ns, r.runtime_ns);
        };
        for t in 0..3 {
            let f = rng.random_range(1.05..3.0);
            let mut q = p.clone();
            q.tiers[t].read_latency_ns *= f;
            check("more read latency", replay(&q.resolve(0, 4096, &[]).unwrap(), &ops));
            let mut q = p.clone();
            q.tiers[t].write_latency_ns *= f;
            check("more write latency", replay(&q.resolve(0, 4096, &[]).unwrap(), &ops));
            let mut q = p.clone();
            q.tiers[t].read_bw_gb_per_s /= f;
            check("less read bandwidth", replay(&q.resolve(0, 4096, &[]).unwrap(), &ops));
            let mut q = p.clone();
            q.tiers[t].write_bw_gb_per_s /= f;
            check("less write bandwidth", replay(&q.resolve(0, 4096, &[]).unwrap(), &ops));
        }
        let r = p.resolve(0, 4096, &[]).unwrap();
        // extra traffic and extra accesses (at the same instruction count) inserted anywhere
        for what in ["traffic", "accesses", "migrations", "instructions"] {
            let mut more = ops.clone();
            for _ in 0..50 {
                let at = rng.random_range(0..more.len());
                match what {
                    "traffic" => more.insert(at, Op::Traffic { tier: rng.random_range(0..3), write: rng.random_range(0..2) == 0 }),
                    "accesses" => more.insert(at, Op::Acc { tier: rng.random_range(0..3), write: rng.random_range(0..2) == 0, probe: NO_TIER, dinsn: 0 }),
                    "migrations" => more.insert(at, Op::Mig { from: 2, to: 0 }),
                    _ => {
                        if let Op::Acc { dinsn, .. } = &mut more[at] {
                            *dinsn += rng.random_range(1..50);
                        }
                    }
                }
            }
            check(what, replay(&r, &more));
        }
    }
}

// -- end to end ----------------------------------------------------------------------------

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

#[test]
fn first_touch_end_to_end_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    // 8 reads, 1000 instructions (500 ns) apart; the fast tier holds 2 of 4 pages, filled
    // first-touch: pages 0 and 2 in DRAM, 1 and 3 in PMEM → tiers F F S S F F S S.
    // A DRAM read (50 ns) retires before the core is 128 instructions (64 ns) past it; a
    // PMEM read holds the ROB 150 - 64 = 86 ns; the last read (PMEM) adds its 150 ns.
    // runtime = 8000 · 0.5 + 2 · 86 (reads 3, 4) + 86 (read 7) + 150 = 4408 ns
    let input = write_trace(dir.path(), &[0, 2, 1, 3, 0, 2, 1, 3], &[false; 8], 1000);
    let mut job = Job::new(&input, platform());
    job.capacity = vec![(0, Capacity::Fraction(0.5))];
    job.timing = TimingKind::Detailed;
    let r = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap();
    assert_eq!(r.timing, "detailed");
    assert_eq!(r.fast_hit_ratio, 0.5);
    close(r.runtime_ns, 4408.0);
    close(r.ipc.unwrap(), 8000.0 / (4408.0 * 2.0));
    close(r.stats.timing["rob_stall_ns"].as_f64().unwrap(), 258.0);
    // the same trace under the simple model ignores the overlap: 4·50 + 4·150
    job.timing = TimingKind::Simple;
    let s = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap();
    close(s.runtime_ns, 800.0);
}

/// Places every page in tier 1 and promotes page 0 at the first period boundary.
struct PromoteFirst;

impl Policy for PromoteFirst {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, _ctx: &mut Ctx) -> TierId {
        1
    }
    fn period(&self) -> Option<Period> {
        Some(Period::Accesses(4))
    }
    fn on_period(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        if ctx.mem.tier(0) == 1 {
            ctx.mem.migrate(0, 0)?;
        }
        Ok(())
    }
}

#[test]
fn a_periodic_migration_end_to_end_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    // 8 reads of page 0, 1000 instructions apart. Reads 0-3 from PMEM: each but the last
    // holds the ROB 86 ns, so read 3 issues at 4·500 + 3·86 = 2258 (done 2408). At the
    // boundary before read 4: migration 1750 ns (4008), period 3000 ns (7008). Reads 4-7
    // from DRAM need no stall; read 7 issues at 7008 + 4·500 = 9008 and is done at 9058.
    // runtime = compute 4000 + ROB 258 + migration 1750 + period 3000 + tail 50 = 9058
    let input = write_trace(dir.path(), &[0; 8], &[false; 8], 1000);
    let mut job = Job::new(&input, platform());
    job.timing = TimingKind::Detailed;
    let r = run_policy(PromoteFirst, &mut job).unwrap();
    assert_eq!(r.migrations, 1);
    assert_eq!(r.fast_hit_ratio, 0.5);
    close(r.runtime_ns, 9058.0);
    close(r.migration_time_ns, 1750.0);
    close(r.stats.timing["period_stall_ns"].as_f64().unwrap(), 3000.0);

    // synchronous copy: the core also waits for 4 KiB at 6.4 GB/s = 640 ns
    let mut p = platform();
    p.migration.copy_from_bandwidth = true;
    let mut job = Job::new(&input, p);
    job.timing = TimingKind::Detailed;
    let r = run_policy(PromoteFirst, &mut job).unwrap();
    close(r.runtime_ns, 9698.0);
    close(r.migration_time_ns, 2390.0);
}

// -- throughput ----------------------------------------------------------------------------

/// First-touch into unlimited tiers (alternating), then every period moves 16 pages to the
/// other tier: a periodic policy with steady migration traffic, for timing the hot loop.
struct Shuffle16;

impl Policy for Shuffle16 {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, page: PageId, _ctx: &mut Ctx) -> TierId {
        (page % 2) as TierId
    }
    fn period(&self) -> Option<Period> {
        Some(Period::Accesses(100_000))
    }
    fn on_period(&mut self, ctx: &mut Ctx) -> tierkit_core::Result<()> {
        let n = ctx.pages as u64;
        for i in 0..16 {
            let p = ((ctx.now.period * 16 + i) * 7919 % n.max(1)) as PageId;
            let t = ctx.mem.tier(p);
            if t != tierkit_core::mechanics::UNPLACED {
                ctx.mem.migrate(p, 1 - t)?;
            }
        }
        Ok(())
    }
}

/// CPU time of this thread, s (wall time where /proc is missing): the machines these run on
/// are shared, and wall time counts the time other programs hold the core.
fn cpu_seconds() -> f64 {
    match std::fs::read_to_string("/proc/thread-self/schedstat") {
        Ok(s) => s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) * 1e-9,
        Err(_) => std::time::UNIX_EPOCH.elapsed().unwrap().as_secs_f64(),
    }
}

/// `cargo test --release -p tierkit-core --test timing_detailed -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, run in release"]
fn throughput_of_a_periodic_run() {
    use tierkit_core::trace::synth::{SynthKind, SynthSource, SynthSpec};
    use tierkit_core::trace::{Batch, RecordSource};
    let accesses = std::env::var("TIERKIT_BENCH_ACCESSES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000_000);
    let spec = SynthSpec { kind: SynthKind::Zipf, accesses, pages: 100_000, write_ratio: 0.3, ..SynthSpec::default() };
    // write the trace once, so that what is timed is the simulation (decoding included), not
    // the generator
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.tkt");
    let mut src = SynthSource::new(spec.clone()).unwrap();
    let mut w = TktWriter::create(&path, src.meta(), true).unwrap();
    let mut b = Batch::default();
    while src.next_batch(&mut b).unwrap() {
        w.write_batch(&b).unwrap();
    }
    w.finish().unwrap();
    let input = TraceInput::new(path);
    // TIERKIT_BENCH_ONLY=simple|detailed|POLICY|POLICY:TIMING measures one row only (profiling)
    let only = std::env::var("TIERKIT_BENCH_ONLY").ok();
    // Shuffle16 (periodic, migrating), history (periodic, registered) and cache-mode (a probe
    // and extra traffic on every access)
    for policy in ["shuffle16", "history:period=10000", "cache-mode"] {
        for timing in [TimingKind::Simple, TimingKind::Detailed] {
            if only.as_deref().is_some_and(|o| o != timing.name() && o != policy && o != format!("{policy}:{}", timing.name())) {
                continue;
            }
            let mut best = f64::INFINITY;
            let mut runtime = 0.0;
            for _ in 0..3 {
                let mut job = Job::new(&input, platform());
                job.capacity = vec![(0, Capacity::Fraction(0.25))];
                job.timing = timing;
                job.paranoid = false;
                let t0 = cpu_seconds();
                let r = match policy {
                    "shuffle16" => {
                        job.capacity.clear();
                        run_policy(Shuffle16, &mut job)
                    }
                    spec => simulate(&mut job, &PolicySpec::parse(spec).unwrap()),
                }
                .unwrap();
                best = best.min(cpu_seconds() - t0);
                runtime = r.runtime_ns;
            }
            println!(
                "{policy:<22} {:>8}: {:5.1} M accesses/s (best of 3, thread CPU time); simulated runtime {:.3} ms",
                timing.name(),
                spec.accesses as f64 / best / 1e6,
                runtime / 1e6
            );
        }
    }
}
