//! Many cores sharing the tiers (docs/models.md, "Many cores"): the detailed model's
//! cores with their own clocks and windows in front of shared tier queues, hand-computed; a
//! mix of programs against the same accesses as a trace's threads; determinism.
//!
//! Platform: the timing tests' (`common::hand_platform`) with a ROB of one miss: tier 1
//! "PMEM" 150 ns, 10 ns per 64-byte line; CPU 2 GHz, CPI 1 → 0.5 ns per instruction.

mod common;

use std::sync::Arc;
use tierkit_core::engine::{simulate, Job, SimResult, TraceOpener};
use tierkit_core::platform::{Platform, Resolved};
use tierkit_core::policy::{PolicySpec, NO_TIER};
use tierkit_core::timing::{AccessEvent, ClockBoard, DetailedTiming, RunCounters, Timing, TimingKind, TimingSetup};
use tierkit_core::trace::mix::{MixOpener, PROGRAM_SHIFT};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

fn platform() -> Platform {
    // a window of one miss, so that a core's second read waits for its first
    let mut p = common::hand_platform();
    p.cpu.rob_entries = 1;
    p
}

fn resolved() -> Resolved {
    platform().resolve(0, 4096, &[]).unwrap()
}

fn read(page: u32, tier: u8) -> AccessEvent {
    AccessEvent { page, tier, write: false, probe: NO_TIER, delay_ns: 0.0, insn: 0 }
}

#[test]
fn two_cores_queue_at_the_shared_tier_but_not_behind_each_others_window() {
    // one core, ROB of 1: the second read's instruction cannot dispatch before the first read
    // retires (150.5 ns); it issues then and is back at 300.5
    let r = resolved();
    let mut one = DetailedTiming::new(&r, TimingSetup { line_bytes: 64, ..Default::default() });
    one.access(read(0, 1));
    one.access(read(1, 1));
    let rep = one.finish(&RunCounters { line_bytes: 64, page_bytes: 4096, ..Default::default() });
    assert_eq!(rep.runtime_ns, 300.5);
    // two cores, one read each: both issue at 0.5 ns (one instruction); the tier's read queue
    // takes core 0's line first (0.5 → 10.5), core 1's waits 10 ns: back at 0.5 + 10 + 150
    let board = ClockBoard::new(2);
    let mut two = DetailedTiming::new(&r, TimingSetup { line_bytes: 64, cores: 2, board: Some(board.clone()), ..Default::default() });
    two.set_core(0);
    two.access(read(0, 1));
    // core 0's next access (a read at the next instruction) waits for this one to retire:
    // the ROB holds one miss
    assert_eq!(board.get(0), 150.5);
    two.set_core(1);
    two.access(read(1, 1));
    let cores = two.core_reports();
    assert_eq!(cores.iter().map(|c| c.runtime_ns).collect::<Vec<_>>(), vec![150.5, 160.5]);
    assert_eq!(cores.iter().map(|c| c.instructions).collect::<Vec<_>>(), vec![1, 1]);
    let rep = two.finish(&RunCounters { line_bytes: 64, page_bytes: 4096, ..Default::default() });
    assert_eq!(rep.runtime_ns, 160.5);
    let t1 = &rep.detail["tiers"][1];
    assert_eq!(t1["read_queue_delay_ns"], 10.0);
    assert_eq!(t1["reads"], 2);
    assert_eq!(rep.detail["cores"], 2);
}

/// Two programs on two cores under `otf` with OS reconciliation, one fast page, a two-entry
/// ReMap table (so the first swap is reconciled) and `flush_us` of cache flush per page: the
/// runs of the reconciliation-halt tests, which differ only in the flush.
fn otf_pair_mix(p0: &TraceInput, p1: &TraceInput, flush_us: u32) -> SimResult {
    let mix = MixOpener::programs(vec![Arc::new(p0.clone()), Arc::new(p1.clone())], 1).unwrap();
    let mut job = Job::new(&mix, platform()).with_mix(&mix, true);
    job.timing = TimingKind::Detailed;
    job.capacity = vec![(0, Capacity::Bytes(4096))];
    job.paranoid = true;
    let spec = format!("otf:ar=os,initial=first-touch,remap=2,ar_start=0.5,threshold=8,flush_us={flush_us}");
    simulate(&mut job, &PolicySpec::parse(&spec).unwrap()).unwrap()
}

fn write_trace(dir: &std::path::Path, name: &str, recs: &[(u64, bool, u32)]) -> TraceInput {
    let p = dir.join(name);
    let mut w = TktWriter::create(&p, &TraceMeta::default(), true).unwrap();
    for &(addr, write, tid) in recs {
        w.write_access(&Access { addr, write, size: 64, tid, ..Default::default() }).unwrap();
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

/// A program: a stream over 64 pages, every fourth access a write, a hot page in between.
fn program() -> Vec<(u64, bool)> {
    (0..4000u64).map(|i| (0x10000 + if i % 3 == 0 { 7 * 4096 } else { (i % 64) * 4096 + (i % 64) * 64 }, i % 4 == 0)).collect()
}

fn run(opener: &dyn TraceOpener, mix: Option<(&MixOpener, bool)>, spec: &str, quantum_note: &str) -> SimResult {
    let mut job = Job::new(opener, platform());
    if let Some((m, programs)) = mix {
        job = job.with_mix(m, programs);
    }
    job.timing = TimingKind::Detailed;
    job.capacity = vec![(0, Capacity::Fraction(0.25))];
    job.paranoid = true;
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec} {quantum_note}: {e}"))
}

#[test]
fn a_mix_of_a_program_with_itself_is_its_two_copies_as_threads() {
    let d = tempfile::tempdir().unwrap();
    let prog = program();
    let a = write_trace(d.path(), "a.tkt", &prog.iter().map(|&(x, w)| (x, w, 0)).collect::<Vec<_>>());
    // the same accesses twice as two threads, the second in the second program's address space
    let mut both: Vec<(u64, bool, u32)> = prog.iter().map(|&(x, w)| (x, w, 0)).collect();
    both.extend(prog.iter().map(|&(x, w)| (x | 1 << PROGRAM_SHIFT, w, 1)));
    let t = write_trace(d.path(), "t.tkt", &both);
    for quantum in [1, 16] {
        for spec in ["first-touch", "history:period=500", "otf"] {
            let shared: Arc<dyn TraceOpener + Send> = Arc::new(a.clone());
            let mix = MixOpener::programs(vec![shared.clone(), shared], quantum).unwrap();
            let m = run(&mix, Some((&mix, true)), spec, &format!("quantum {quantum}"));
            let threads = MixOpener::threads(Arc::new(t.clone()), 2, quantum).unwrap();
            let th = run(&threads, Some((&threads, false)), spec, &format!("quantum {quantum}"));
            assert_eq!(m.runtime_ns, th.runtime_ns, "{spec} quantum {quantum}");
            assert_eq!(m.fast_hit_ratio, th.fast_hit_ratio, "{spec}");
            assert_eq!(m.migrations, th.migrations, "{spec}");
            let (mc, tc) = (m.cores.as_ref().unwrap(), th.cores.as_ref().unwrap());
            assert_eq!(mc.len(), 2);
            for (x, y) in mc.iter().zip(tc) {
                assert_eq!((x.runtime_ns, x.accesses, x.fast_hit_ratio), (y.runtime_ns, y.accesses, y.fast_hit_ratio), "{spec}");
            }
            assert_eq!(mc[0].accesses, 4000);
            assert_eq!(m.pages, 2 * 64, "two address spaces: each program's 64 pages are its own");
            // the programs' migrations add up to the run's
            assert_eq!(mc.iter().map(|c| c.migrations.unwrap()).sum::<u64>(), m.migrations);
            // and the same inputs give the same results, bit for bit
            let again = run(&mix, Some((&mix, true)), spec, "again");
            assert_eq!(serde_json::to_string(&again.stats).unwrap(), serde_json::to_string(&m.stats).unwrap());
        }
    }
}

#[test]
fn sharing_the_tiers_slows_each_program_down() {
    // two copies of a streaming program, every access a read of PMEM (no fast capacity to
    // speak of): each program alone against each in the mix
    let d = tempfile::tempdir().unwrap();
    let recs: Vec<(u64, bool, u32)> = (0..3000u64).map(|i| (0x100000 + i * 64, false, 0)).collect();
    let a = write_trace(d.path(), "s.tkt", &recs);
    let mut job = Job::new(&a, platform());
    job.timing = TimingKind::Detailed;
    job.capacity = vec![(0, Capacity::Bytes(4096))];
    let alone = simulate(&mut job, &PolicySpec::parse("all-slow").unwrap()).unwrap();
    let shared: Arc<dyn TraceOpener + Send> = Arc::new(a.clone());
    let mix = MixOpener::programs(vec![shared.clone(), shared], 1).unwrap();
    let mut job = Job::new(&mix, platform()).with_mix(&mix, true);
    job.timing = TimingKind::Detailed;
    job.capacity = vec![(0, Capacity::Bytes(4096))];
    let m = simulate(&mut job, &PolicySpec::parse("all-slow").unwrap()).unwrap();
    let cores = m.cores.unwrap();
    // alone, one read per 10 ns of queue at best and a window of one miss: latency-bound
    // (150.5 ns per read); two cores overlap their misses on the shared queue
    assert!(cores.iter().all(|c| c.runtime_ns >= alone.runtime_ns), "{:?} vs {}", cores, alone.runtime_ns);
    assert!(m.runtime_ns < 2.0 * alone.runtime_ns);
    // the simple model is one core's: a mix says so
    let mut job = Job::new(&mix, platform()).with_mix(&mix, true);
    let e = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap_err().to_string();
    assert!(e.contains("simple timing model is one core's"), "{e}");
    // an oracle cannot see a mix's future
    let mut job = Job::new(&mix, platform()).with_mix(&mix, true);
    job.timing = TimingKind::Detailed;
    let e = simulate(&mut job, &PolicySpec::parse("oracle:period=100").unwrap()).unwrap_err().to_string();
    assert!(e.contains("future of the access stream"), "{e}");
}

#[test]
fn a_traced_programs_threads_count_their_own_instructions() {
    // A tracer runs one thread at a time and counts the instructions of all of them together:
    // here thread 0 makes its 2,000 accesses (one every 10 instructions), then thread 1 its
    // own. On two cores each thread counts its own instructions, so the two run side by side,
    // exactly as two programs whose traces count 10, 20, ..., 20,000.
    let d = tempfile::tempdir().unwrap();
    let meta = TraceMeta { time_insn: true, ..Default::default() };
    let write = |name: &str, recs: &[(u64, bool, u32, u64)]| {
        let p = d.path().join(name);
        let mut w = TktWriter::create(&p, &meta, true).unwrap();
        for &(addr, write, tid, insn) in recs {
            w.write_access(&Access { addr, write, size: 64, tid, insn, ..Default::default() }).unwrap();
        }
        w.finish().unwrap();
        TraceInput::new(p)
    };
    let prog: Vec<(u64, bool)> = program().into_iter().take(2000).collect();
    let own: Vec<(u64, bool, u32, u64)> = prog.iter().enumerate().map(|(i, &(x, w))| (x, w, 0, 10 * (i as u64 + 1))).collect();
    let a = write("a.tkt", &own);
    let mut serial = own.clone();
    serial.extend(prog.iter().enumerate().map(|(i, &(x, w))| (x | 1 << PROGRAM_SHIFT, w, 1, 20_000 + 10 * (i as u64 + 1))));
    let t = write("t.tkt", &serial);
    for spec in ["first-touch", "history:period=500"] {
        let shared: Arc<dyn TraceOpener + Send> = Arc::new(a.clone());
        let mix = MixOpener::programs(vec![shared.clone(), shared], 1).unwrap();
        let m = run(&mix, Some((&mix, true)), spec, "");
        let threads = MixOpener::threads(Arc::new(t.clone()), 2, 1).unwrap();
        let th = run(&threads, Some((&threads, false)), spec, "");
        assert_eq!(m.runtime_ns, th.runtime_ns, "{spec}");
        let tc = th.cores.as_ref().unwrap();
        assert_eq!(tc.iter().map(|c| c.instructions).collect::<Vec<_>>(), vec![20_000, 20_000], "{spec}");
        // one core runs them one after the other: about twice as long
        let one = MixOpener::threads(Arc::new(t.clone()), 1, 1).unwrap();
        let o = run(&one, Some((&one, false)), spec, "");
        assert!(o.runtime_ns > 1.8 * th.runtime_ns, "{spec}: {} on one core, {} on two", o.runtime_ns, th.runtime_ns);
    }
}

#[test]
fn a_charge_for_a_page_halts_its_owner_not_the_active_core() {
    // The detailed model alone, hand-computed. Two cores, one read each (both back at 150.5
    // and 160.5 ns, as above), then, while core 1 is active, a 1000 ns halt for a page of
    // core 0: core 0's clock moves on by 1000 ns, core 1's does not, and core 0's next access
    // (a read at instruction 2) is posted again, flagged for the source to read back.
    use tierkit_core::mechanics::Charge;
    let r = resolved();
    let board = ClockBoard::new(2);
    let mut two = DetailedTiming::new(&r, TimingSetup { line_bytes: 64, cores: 2, board: Some(board.clone()), ..Default::default() });
    two.set_core(0);
    two.access(read(0, 1));
    two.set_core(1);
    two.access(read(1, 1));
    board.set_next(0, 2, false);
    assert!(!board.take_moved());
    let halt = Charge { what: "address reconciliation", ns: 1000.0, halts: true, energy_j: 0.0 };
    two.charge_core(0, &halt);
    assert!(board.take_moved() && !board.take_moved());
    // core 0: dispatched its first instruction at 0.5 ns; halted to 1000.5 ns; its next read
    // (one instruction on) issues at 1001 ns, after its first one retired (150.5)
    assert_eq!(board.get(0), 1001.0);
    let cores = two.core_reports();
    assert_eq!(cores.iter().map(|c| c.runtime_ns).collect::<Vec<_>>(), vec![1000.5, 160.5]);
    // the active core's own charge stays the active core's, as a plain charge
    two.charge_core(1, &halt);
    assert!(!board.take_moved());
    assert_eq!(two.core_reports().iter().map(|c| c.runtime_ns).collect::<Vec<_>>(), vec![1000.5, 1000.5]);
    let rep = two.finish(&RunCounters { line_bytes: 64, page_bytes: 4096, ..Default::default() });
    assert_eq!(rep.detail["charge_stall_ns"], 2000.0);
}

#[test]
fn address_reconciliation_in_a_mix_halts_the_core_that_owns_the_pages() {
    // otf with ar=os, a fast tier of one page (first touch) and a two-entry ReMap table
    // (reconcile from one entry). Program A reads page F once (it takes the fast page), then
    // page H 8 times: H reaches the threshold at A's last access and swaps with F, and A is
    // done. Program B streams over 4,000 pages of PMEM, each read once, so none of its pages
    // moves. The swap's copy completes, and the pair (H, F) is reconciled, at one of B's
    // accesses: B's core is the active one. The authors' model halts the pages' core
    // (HMA_onfly_adaptive, src/Processor.cpp: mig_cores[ar_page_1_core_id]), so the halt
    // lands on A: A's runtime grows by the reconciliation's halting time, B's does not. Two
    // runs that differ only in the cache flush of ar=os (flush_us, 0 and 1000 µs a page, so
    // 2 ms for the pair) show it.
    let d = tempfile::tempdir().unwrap();
    let mut a_recs = vec![(0x10000u64, false, 0u32)];
    a_recs.extend((0..8).map(|_| (0x20000u64, false, 0)));
    let a = write_trace(d.path(), "a.tkt", &a_recs);
    let b = write_trace(d.path(), "b.tkt", &(0..4000u64).map(|i| (0x100000 + i * 4096, false, 0)).collect::<Vec<_>>());
    let (quick, slow) = (otf_pair_mix(&a, &b, 0), otf_pair_mix(&a, &b, 1000));
    let ar = |r: &SimResult| r.stats.migration.charges["address reconciliation"].clone();
    let (arq, ars) = (ar(&quick), ar(&slow));
    assert_eq!((arq.count, ars.count), (1, 1), "one reconciliation, of A's pair");
    assert_eq!(ars.halted_ns - arq.halted_ns, 2e6, "1000 µs of flush for each page of the pair");
    let (cq, cs) = (quick.cores.unwrap(), slow.cores.unwrap());
    assert_eq!(cq.iter().map(|c| c.migrations.unwrap()).collect::<Vec<_>>(), vec![2, 0], "A's pages swapped, none of B's moved");
    assert_eq!(cq.iter().map(|c| c.accesses).collect::<Vec<_>>(), vec![9, 4000]);
    // B, whose core was active, is not halted: its runtime is the same, bit for bit
    assert_eq!(cs[1].runtime_ns, cq[1].runtime_ns);
    assert!(cs[1].runtime_ns < 2e6, "B ran {} ns, less than the halt", cs[1].runtime_ns);
    // A is halted for the whole reconciliation (both pages are A's): its runtime grows by the
    // 2 ms of flush
    let grew = cs[0].runtime_ns - cq[0].runtime_ns;
    assert!((grew - 2e6).abs() < 1e-6, "A grew by {grew} ns ({} vs {})", cs[0].runtime_ns, cq[0].runtime_ns);
    assert!(cs[0].runtime_ns > ars.halted_ns && cq[0].runtime_ns > arq.halted_ns);
}

#[test]
fn a_reconciled_pair_of_two_programs_halts_each_for_its_page() {
    // As above, with the swapped pair's pages of two programs: program 0 reads page X once
    // (it takes the one fast page), then streams over 4,000 PMEM pages; program 1 reads page
    // H 8 times, and H swaps with X. The pair is reconciled at one of program 0's accesses;
    // each page's share of the halt (half of it, 1 ms of flush at flush_us=1000) stops its
    // owner, as the authors' model does for a pair of two cores (os_halt_cycle of
    // ar_stage_11 for each of mig_cores[ar_page_1_core_id] and [ar_page_2_core_id]).
    let d = tempfile::tempdir().unwrap();
    let mut p0 = vec![(0x10000u64, false, 0u32)];
    p0.extend((0..4000u64).map(|i| (0x100000 + i * 4096, false, 0)));
    let p0 = write_trace(d.path(), "p0.tkt", &p0);
    let p1 = write_trace(d.path(), "p1.tkt", &(0..8).map(|_| (0x20000u64, false, 0)).collect::<Vec<_>>());
    let (quick, slow) = (otf_pair_mix(&p0, &p1, 0), otf_pair_mix(&p0, &p1, 1000));
    let ar = |r: &SimResult| r.stats.migration.charges["address reconciliation"].clone();
    assert_eq!((ar(&quick).count, ar(&slow).count), (1, 1));
    assert_eq!(ar(&slow).halted_ns - ar(&quick).halted_ns, 2e6);
    let (cq, cs) = (quick.cores.unwrap(), slow.cores.unwrap());
    assert_eq!(cq.iter().map(|c| c.migrations.unwrap()).collect::<Vec<_>>(), vec![1, 1], "a swap of X and H");
    for (c, (q, s)) in cq.iter().zip(&cs).enumerate() {
        let grew = s.runtime_ns - q.runtime_ns;
        assert!((grew - 1e6).abs() < 1e-3, "core {c} grew by {grew} ns");
    }
}

#[test]
fn a_quantum_above_one_warns_that_it_is_not_exact_and_quantum_one_does_not() {
    let d = tempfile::tempdir().unwrap();
    let a = write_trace(d.path(), "a.tkt", &program().iter().map(|&(x, w)| (x, w, 0)).collect::<Vec<_>>());
    let shared: Arc<dyn TraceOpener + Send> = Arc::new(a.clone());
    let lax = |w: &[String]| w.iter().any(|w| w.contains("lax synchronization is not exact") && w.contains("docs/models.md"));
    for quantum in [1, 2, 16] {
        let mix = MixOpener::programs(vec![shared.clone(), shared.clone()], quantum).unwrap();
        let m = run(&mix, Some((&mix, true)), "first-touch", &format!("quantum {quantum}"));
        assert_eq!(lax(&m.warnings), quantum > 1, "programs, quantum {quantum}: {:?}", m.warnings);
        let threads = MixOpener::threads(Arc::new(a.clone()), 2, quantum).unwrap();
        let th = run(&threads, Some((&threads, false)), "first-touch", &format!("quantum {quantum}"));
        assert_eq!(lax(&th.warnings), quantum > 1, "threads, quantum {quantum}: {:?}", th.warnings);
        if quantum > 1 {
            assert!(m.warnings.iter().any(|w| w.starts_with(&format!("quantum {quantum}:"))), "{:?}", m.warnings);
        }
    }
    // one core: the quantum changes nothing and says nothing
    assert_eq!(tierkit_core::engine::quantum_warning(1, 16), None);
}
