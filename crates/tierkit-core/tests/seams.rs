//! The engine seams per-access and hardware-migration policies need (001's on-the-fly
//! migration): latency a policy's hardware adds to an access, migrations by a hardware engine
//! (no fault, copy alongside the program, accesses to the page in flight wait for the
//! engine's buffer), costs charged by the policy that halt the program or run alongside it,
//! and simulated time visible to per-access hooks. Figures hand-computed on `dram-pmem`
//! (DRAM 50 ns and 10 GB/s, PMEM 150 ns and 3.7 GB/s).

mod common;
use tierkit_core::engine::{run_policy, Job, SimResult};
use tierkit_core::mechanics::{Charge, MoveBy, TierId};
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::{Ctx, Needs, Policy, Served};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::TraceInput;
use tierkit_core::units::Capacity;

/// Places every page in the slow tier; at access `move_at` moves page 0 to the fast tier
/// (by `by`); at access `charge_at` charges `charge`; adds `delay_ns` to every access; records
/// the simulated time its hook saw at each access.
struct Scripted {
    move_at: u64,
    by: MoveBy,
    charge_at: u64,
    charge: Option<Charge>,
    delay_ns: f64,
    seen_ns: Vec<f64>,
}

impl Policy for Scripted {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, _ctx: &mut Ctx) -> TierId {
        1
    }
    fn on_access(&mut self, _page: PageId, _addr: u64, _write: bool, ctx: &mut Ctx) -> Served {
        self.seen_ns.push(ctx.now.ns);
        if ctx.now.accesses == self.move_at {
            ctx.mem.migrate_by(0, 0, self.by).unwrap();
        }
        if ctx.now.accesses == self.charge_at {
            if let Some(c) = self.charge {
                ctx.mem.charge(c);
            }
        }
        Served::delayed(self.delay_ns)
    }
}

fn run(input: &TraceInput, timing: TimingKind, p: &mut Option<Scripted>) -> SimResult {
    let mut job = Job::new(input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, Capacity::Fraction(0.5))];
    job.timing = timing;
    let pol = p.take().unwrap();
    run_policy(pol, &mut job).unwrap()
}

fn scripted(move_at: u64, by: MoveBy, charge: Option<Charge>, delay_ns: f64) -> Option<Scripted> {
    Some(Scripted { move_at, by, charge_at: 1, charge, delay_ns, seen_ns: Vec::new() })
}

/// Two pages, reads: page 0, page 1, page 0, page 0.
fn trace(dir: &std::path::Path) -> TraceInput {
    common::write_pages(dir, &[0, 1, 0, 0], None)
}

#[test]
fn simple_model_added_latency_charges_and_hardware_moves() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path());
    // no move, no charge, 10 ns added per access: 4 slow reads 4*150 + 4*10 = 640 ns
    let r = run(&input, TimingKind::Simple, &mut scripted(u64::MAX, MoveBy::Os, None, 10.0));
    assert_eq!(r.runtime_ns, 640.0);
    // an OS move of page 0 after its first access costs the platform's 1 µs per page (no
    // fault or shootdown on dram-pmem, copy not charged): accesses 2 and 3 hit DRAM:
    // 150 + 150 + 50 + 50 + 1000 = 1400 ns
    let r = run(&input, TimingKind::Simple, &mut scripted(1, MoveBy::Os, None, 0.0));
    assert_eq!((r.runtime_ns, r.migrations, r.stats.migration.by_hardware), (1400.0, 1, 0));
    // the same move by a hardware engine costs nothing fixed (latency 400 ns), but its copy
    // still reads 4096 B from PMEM, which with the two slow reads' 128 B sets the bandwidth
    // floor: (4096 + 128) B / 3.7 GB/s
    let r = run(&input, TimingKind::Simple, &mut scripted(1, MoveBy::Hw, None, 0.0));
    assert_eq!((r.runtime_ns, r.migrations, r.stats.migration.by_hardware), ((4096.0 + 128.0) / 3.7, 1, 1));
    // a halting charge of 500 ns adds 500; one alongside the program adds nothing; both are
    // totalled by name, with their energy
    let halt = Charge { what: "address reconciliation", ns: 500.0, halts: true, energy_j: 1e-9 };
    let r = run(&input, TimingKind::Simple, &mut scripted(u64::MAX, MoveBy::Os, Some(halt), 0.0));
    assert_eq!(r.runtime_ns, 600.0 + 500.0);
    let t = &r.stats.migration.charges["address reconciliation"];
    assert_eq!((t.count, t.ns, t.halted_ns, t.energy_j), (1, 500.0, 500.0, 1e-9));
    assert!((r.energy_j - 1e-9).abs() < 1e-18, "charged energy is part of the run's energy");
    let bg = Charge { halts: false, ..halt };
    let r = run(&input, TimingKind::Simple, &mut scripted(u64::MAX, MoveBy::Os, Some(bg), 0.0));
    assert_eq!(r.runtime_ns, 600.0);
    assert_eq!(r.stats.migration.charges["address reconciliation"].halted_ns, 0.0);
}

#[test]
fn per_access_hooks_see_simulated_time() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path());
    let mut p = scripted(u64::MAX, MoveBy::Os, None, 10.0);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, Capacity::Fraction(0.5))];
    // the policy runs by value ('static), so the times it saw come back through a channel;
    // the simple clock is the latency so far: 150 + 10 per access
    let (tx, rx) = std::sync::mpsc::channel();
    struct Report(Scripted, std::sync::mpsc::Sender<Vec<f64>>);
    impl Policy for Report {
        const PER_ACCESS: bool = true;
        fn needs(&self) -> Needs {
            Needs::default()
        }
        fn place(&mut self, p: PageId, ctx: &mut Ctx) -> TierId {
            self.0.place(p, ctx)
        }
        fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
            let s = self.0.on_access(page, addr, write, ctx);
            if ctx.now.accesses == 3 {
                self.1.send(self.0.seen_ns.clone()).unwrap();
            }
            s
        }
    }
    run_policy(Report(p.take().unwrap(), tx), &mut job).unwrap();
    assert_eq!(rx.recv().unwrap(), vec![0.0, 160.0, 320.0, 480.0]);
}

#[test]
fn detailed_model_hardware_move_overlaps_and_accesses_wait_for_the_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path());
    let os = run(&input, TimingKind::Detailed, &mut scripted(1, MoveBy::Os, None, 0.0));
    let hw = run(&input, TimingKind::Detailed, &mut scripted(1, MoveBy::Hw, None, 0.0));
    let none = run(&input, TimingKind::Detailed, &mut scripted(u64::MAX, MoveBy::Os, None, 0.0));
    // the OS move stops the core for its 1 µs; the engine's does not
    assert!(os.runtime_ns >= none.runtime_ns + 1000.0 - 1e-9, "{} vs {}", os.runtime_ns, none.runtime_ns);
    assert!(hw.runtime_ns < os.runtime_ns);
    // page 0 is moved just before access 1 (page 1); accesses 2 and 3 (page 0) come while the
    // engine copies it (4096 B at 3.7 GB/s = 1107 ns of source reads), so they are served
    // from its buffer once the page is in
    let t = &hw.stats.timing;
    assert_eq!(t["engine_buffer_hits"], 2, "{t}");
    assert!(t["engine_buffer_wait_ns"].as_f64().unwrap() > 0.0);
    assert_eq!(hw.stats.migration.by_hardware, 1);
    // added latency delays reads: 4 dependent-free reads, each 10 ns later
    let d = run(&input, TimingKind::Detailed, &mut scripted(u64::MAX, MoveBy::Os, None, 10.0));
    assert!(d.runtime_ns > none.runtime_ns && d.runtime_ns <= none.runtime_ns + 40.0 + 1e-9, "{} vs {}", d.runtime_ns, none.runtime_ns);
    // a halting charge stops the core for its time: charged in the hook of access 1 (whose
    // instruction is the 2nd, 0.3125 ns each at CPI 1 and 3.2 GHz), accesses 1-3 issue after
    // 700 + 2·0.3125 ns and queue for PMEM 64 B / 3.7 GB/s apart; the last is back 150 ns
    // after its start: 700.625 + 2·64/3.7 + 150
    let halt = Charge { what: "ar", ns: 700.0, halts: true, energy_j: 0.0 };
    let c = run(&input, TimingKind::Detailed, &mut scripted(u64::MAX, MoveBy::Os, Some(halt), 0.0));
    assert!((c.runtime_ns - (700.625 + 2.0 * 64.0 / 3.7 + 150.0)).abs() < 1e-9, "{}", c.runtime_ns);
    assert_eq!(c.stats.timing["charge_stall_ns"], 700.0);
}

/// Places every page in the slow tier, moves page 0 to the fast tier by the hardware engine
/// at access 1, and reports, at the last access, `ctx.now.hw_idle_ns` as each hook saw it and
/// how many pages the engine asked it to prefetch.
struct Idle {
    seen: Vec<f64>,
    prefetched: std::cell::Cell<u64>,
    last: u64,
    tx: std::sync::mpsc::Sender<(Vec<f64>, u64)>,
}

impl Policy for Idle {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, _ctx: &mut Ctx) -> TierId {
        1
    }
    fn prefetch(&self, _page: PageId) {
        self.prefetched.set(self.prefetched.get() + 1);
    }
    fn on_access(&mut self, _page: PageId, _addr: u64, _write: bool, ctx: &mut Ctx) -> Served {
        self.seen.push(ctx.now.hw_idle_ns);
        if ctx.now.accesses == 1 {
            ctx.mem.migrate_by(0, 0, MoveBy::Hw).unwrap();
        }
        if ctx.now.accesses == self.last {
            self.tx.send((self.seen.clone(), self.prefetched.get())).unwrap();
        }
        Served::RESIDENT
    }
}

/// Per-access hooks see when the hardware engine's copies will be done (a controller that
/// moves one page at a time waits for it), and per-access policies are asked to prefetch
/// their per-page state ahead of the accesses.
#[test]
fn per_access_hooks_see_when_the_hardware_engine_is_idle_and_prefetch_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let mut pages = vec![0, 1, 0, 0];
    pages.extend([1; 96]);
    let input = common::write_pages(dir.path(), &pages, None);
    for timing in [TimingKind::Simple, TimingKind::Detailed] {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = Idle { seen: Vec::new(), prefetched: Default::default(), last: 99, tx };
        let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
        job.capacity = vec![(0, Capacity::Fraction(0.5))];
        job.timing = timing;
        run_policy(p, &mut job).unwrap();
        let (seen, prefetched) = rx.recv().unwrap();
        assert_eq!(&seen[..2], [0.0, 0.0], "no copy before the move");
        if timing == TimingKind::Simple {
            // requested in access 1's hook, at 150 ns (access 0's PMEM read): the copy takes
            // 4096 B / min(3.7, 10) GB/s
            assert_eq!(seen[2], 150.0 + 4096.0 / 3.7);
        } else {
            assert!(seen[2] > 4096.0 / 3.7, "{}", seen[2]);
        }
        assert!(seen[2..].iter().all(|&t| t == seen[2]));
        // one batch of 100 accesses: the engine looks a few dozen accesses ahead
        assert!(prefetched > 50 && prefetched < 100, "{prefetched}");
    }
}
