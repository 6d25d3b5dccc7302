//! docs/policies.md, "Activations and warnings": no policy may silently do nothing. Every result
//! counts how many times the policy's periodic or epoch work ran (`activations`), at the cadence
//! the work really runs (not the engine's boundaries when they differ), warns in plain words when
//! that is fewer than three times or when a policy able to move pages moved none, and charges the
//! platform's `per_period_ns` only for activations. Figures hand-computed on `dram-pmem`
//! (DRAM 50 ns, PMEM 150 ns, 1 µs per migrated page, 3 µs per period).

mod common;
use common::{run, write_pages};
use tierkit_core::engine::{activity_warnings, human_ns, run_policy, Job, RunExtent, SimResult};
use tierkit_core::mechanics::TierId;
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::{Activity, Ctx, Needs, Policy};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::TraceInput;
use tierkit_core::units::{Capacity, Period};

const ALL_FIT: [(usize, Capacity); 1] = [(0, Capacity::Fraction(1.0))];

/// A periodic policy (boundaries every 10 accesses) whose work runs at every other boundary,
/// as hyplacer's does when a boundary passes while its last PageFind is still pending.
struct EveryOther {
    boundaries: u64,
    acted: u64,
}

impl Policy for EveryOther {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        ctx.mem.first_free_from(0).unwrap()
    }
    fn period(&self) -> Option<Period> {
        Some(Period::Accesses(10))
    }
    fn on_period(&mut self, _ctx: &mut Ctx) -> tierkit_core::Result<()> {
        self.boundaries += 1;
        self.acted += self.boundaries.is_multiple_of(2) as u64;
        Ok(())
    }
    fn activity(&self) -> Activity {
        Activity::Ran { times: self.acted, every: Period::Accesses(20) }
    }
}

fn run_every_other(input: &TraceInput, timing: TimingKind) -> SimResult {
    let mut job = Job::new(input, Platform::load("dram-pmem").unwrap());
    job.capacity = ALL_FIT.to_vec();
    job.timing = timing;
    job.policy_label = "every-other".into();
    run_policy(EveryOther { boundaries: 0, acted: 0 }, &mut job).unwrap()
}

/// `per_period_ns` is the cost of a period whose scheduling ran: 45 accesses to one page,
/// boundaries at 10, 20, 30 and 40, work at 20 and 40 → 2 activations, 45·50 + 2·3000 =
/// 8250 ns (it used to charge every boundary plus the unfinished last period: 5·3000).
#[test]
fn per_period_cost_is_charged_only_for_activations() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0; 45], None);
    let r = run_every_other(&input, TimingKind::Simple);
    assert_eq!(r.stats.engine.boundaries, 4);
    assert_eq!(r.activations, Some(2));
    assert_eq!(r.runtime_ns, 45.0 * 50.0 + 2.0 * 3000.0);
    assert_eq!(r.stats.timing["period_ns"], 6000.0);
    // the detailed model stops the core for the same activations
    let d = run_every_other(&input, TimingKind::Detailed);
    assert_eq!(d.stats.timing["period_stall_ns"], 6000.0);
    // two activations: flagged, with the reason in the policy's own unit; and it moved nothing
    assert_eq!(
        r.warnings,
        [
            "every-other acted 2 times: its period of 20 accesses fits only 2.25 times in the run's 45 accesses, too few to show how it behaves; see --repeat / --time-scale",
            "every-other acted 2 times but moved no page: its result is that of its initial placement alone",
        ]
    );
}

/// 003 §3.1: history's scheduler runs at every period boundary: 35 accesses to one page
/// (placed in DRAM), period 10 → 3 activations (10, 20, 30), 4 periods in the trace; the
/// page is already fast, so it moves nothing and says so. Runtime 35·50 + 3·3000.
#[test]
fn history_counts_its_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &[0; 35], None);
    let r = run(&input, "dram-pmem", &ALL_FIT, "history:period=10");
    assert_eq!((r.activations, r.periods, r.migrations), (Some(3), 4, 0));
    assert_eq!(r.runtime_ns, 35.0 * 50.0 + 3.0 * 3000.0);
    assert_eq!(r.warnings, ["history:period=10 acted 3 times but moved no page: its result is that of its initial placement alone"]);
}

/// 004 §4: HyPlacer's control loop runs every `interval` (1 s by default). A run of a few
/// µs never reaches it: 0 activations, a warning that says why, and no period cost, so the
/// result is exactly first-touch's (both fill DRAM first).
#[test]
fn hyplacer_with_an_interval_longer_than_the_run_acts_zero_times_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..200).map(|i| i % 20).collect();
    let input = write_pages(dir.path(), &pages, None);
    let half = [(0, Capacity::Fraction(0.5))];
    let h = run(&input, "dram-pmem", &half, "hyplacer");
    let ft = run(&input, "dram-pmem", &half, "first-touch");
    assert_eq!(h.activations, Some(0));
    assert_eq!(h.migrations, 0);
    assert_eq!(h.runtime_ns, ft.runtime_ns, "no activation, no per-period cost");
    assert_eq!(h.warnings.len(), 1);
    let w = &h.warnings[0];
    assert_eq!(
        w,
        &format!("hyplacer acted 0 times: its 1 s interval is longer than the run's {} of simulated time; see --repeat / --time-scale", human_ns(h.runtime_ns))
    );
    // first-touch has no periodic work: no count, nothing to warn about
    assert_eq!((ft.activations, ft.warnings.len()), (None, 0));
}

/// 004 §5.1: Memos classifies over a cycle of `classifications` walks and moves pages at
/// the cycle's end; the activation is the cycle, not the walk. period=40 with 4 walks: a
/// boundary every 10 accesses; 85 accesses → 8 walks, 2 cycles.
#[test]
fn memos_counts_cycles_not_walks() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..85).map(|i| i % 8).collect();
    let input = write_pages(dir.path(), &pages, None);
    let r = run(&input, "dram-pmem", &[(0, Capacity::Fraction(0.5))], "memos:period=40,classifications=4");
    assert_eq!(r.stats.engine.boundaries, 8);
    assert_eq!(r.stats.policy["memos"]["walks"], 8);
    assert_eq!(r.activations, Some(2));
    assert!(r.warnings[0].starts_with("memos:period=40,classifications=4 acted 2 times: its period of 40 accesses fits only 2.12 times"), "{:?}", r.warnings);
}

/// DAMON samples every `sample` but applies its schemes once every `apply_aggrs`
/// aggregation intervals: activations are the applications (each also counted in the
/// policy's own statistics), one per 2 aggregations, far fewer than sampling boundaries.
#[test]
fn damon_counts_scheme_applications_not_samples() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..20_000).map(|i| (i * 7) % 64).collect();
    let input = write_pages(dir.path(), &pages, None);
    let r = run(&input, "dram-pmem", &[(0, Capacity::Fraction(0.5))], "damon-tiering:sample=5us,aggr=50us,apply_aggrs=2");
    let applies = r.stats.policy["activity"]["applies"].as_u64().unwrap();
    let aggregations = r.stats.policy["aggregations"].as_u64().unwrap();
    let b = r.stats.engine.boundaries;
    assert_eq!(r.activations, Some(applies));
    assert_eq!(applies, aggregations / 2, "{aggregations} aggregations");
    assert!(applies >= 3 && applies * 20 <= b, "{applies} applications, {b} boundaries");
}

/// 001 §2: plain otf moves pages as they become hot, with no periodic work (`null`); a run
/// in which no page reached the threshold is flagged all the same.
#[test]
fn otf_that_moved_nothing_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..64).collect();
    let input = write_pages(dir.path(), &pages, None);
    let r = run(&input, "dram-pmem", &[(0, Capacity::Fraction(0.25))], "otf");
    assert_eq!((r.activations, r.migrations), (None, 0));
    assert_eq!(r.warnings, ["otf moved no page: its result is that of its initial placement alone"]);
}

/// The sentences themselves, in each of the interval's units.
#[test]
fn warning_sentences() {
    let ran = RunExtent { runtime_ns: 0.25e9, accesses: 1_000_000, instructions: Some(5_000_000) };
    assert_eq!(
        activity_warnings("hyplacer", Some((0, Period::Ns(1_000_000_000))), true, 0, &ran),
        ["hyplacer acted 0 times: its 1 s interval is longer than the run's 250 ms of simulated time; see --repeat / --time-scale"]
    );
    assert_eq!(
        activity_warnings("hyplacer", Some((5, Period::Ns(1_000_000))), true, 0, &ran),
        ["hyplacer acted 5 times but moved no page: its result is that of its initial placement alone"]
    );
    assert_eq!(
        activity_warnings("nimble", Some((1, Period::Ns(100_000_000))), true, 10, &ran),
        ["nimble acted 1 time: its 100 ms interval fits only 2.50 times in the run's 250 ms of simulated time, too few to show how it behaves; see --repeat / --time-scale (10 migrations came from work outside it, such as demotion under memory pressure)"]
    );
    assert_eq!(
        activity_warnings("tpp", Some((2, Period::Ns(10_000_000))), true, 10, &ran),
        ["tpp acted 2 times: its 10 ms interval passed 25 times in the run's 250 ms of simulated time, but its work ran in only 2 of them (see stats.policy for the skipped ones) (10 migrations came from work outside it, such as demotion under memory pressure)"]
    );
    assert_eq!(
        activity_warnings("kleio", Some((0, Period::Insn(10_000_000))), true, 0, &ran),
        ["kleio acted 0 times: its period of 10000000 instructions is longer than the run's 5000000 instructions; see --repeat / --time-scale"]
    );
    // tpp on a short trace: no scan ran, but kswapd demoted, which made room for new pages
    assert_eq!(
        activity_warnings("tpp", Some((0, Period::Ns(1_000_000_000))), true, 6315, &ran),
        ["tpp acted 0 times: its 1 s interval is longer than the run's 250 ms of simulated time; see --repeat / --time-scale (6315 migrations came from work outside it, such as demotion under memory pressure)"]
    );
    // enough activations and moves, or a fixed placement: nothing to say
    assert!(activity_warnings("history", Some((3, Period::Accesses(1000))), true, 1, &ran).is_empty());
    assert!(activity_warnings("first-touch", None, false, 0, &ran).is_empty());
    assert_eq!(human_ns(1500.0), "1.5 µs");
    assert_eq!(human_ns(0.25e9), "250 ms");
}

/// Swaps every page it finds in the slow tier with the last page it saw in the fast tier:
/// two moves per access once both tiers are in use.
struct Churn {
    last_fast: Option<PageId>,
}

impl Policy for Churn {
    const PER_ACCESS: bool = true;
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        ctx.mem.first_free_from(0).unwrap()
    }
    fn on_access(&mut self, page: PageId, _addr: u64, _write: bool, ctx: &mut Ctx) -> tierkit_core::policy::Served {
        if ctx.mem.tier(page) == 0 {
            self.last_fast = Some(page);
        } else if let Some(f) = self.last_fast.take() {
            ctx.mem.swap_by(page, f, tierkit_core::mechanics::MoveBy::Hw).unwrap();
            self.last_fast = Some(page);
        }
        tierkit_core::policy::Served::RESIDENT
    }
    fn activity(&self) -> Activity {
        Activity::OnAccess
    }
}

/// A policy that moves more pages than the trace has accesses gets a warning: no access can
/// justify more than one move. Two pages, one fast frame, 0 1 0 1 …: every access from the
/// second on swaps the pair (two moves), 2·99 moves for 100 accesses.
#[test]
fn more_moves_than_accesses_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..100).map(|i| i % 2).collect();
    let input = write_pages(dir.path(), &pages, None);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(4096))];
    job.policy_label = "churn".into();
    let r = run_policy(Churn { last_fast: None }, &mut job).unwrap();
    assert_eq!(r.migrations, 198);
    let w: Vec<_> = r.warnings.iter().filter(|w| w.contains("more moves than the trace has accesses")).collect();
    assert_eq!(w.len(), 1, "{:?}", r.warnings);
    assert!(w[0].contains("moved 198 pages for 100 accesses"), "{}", w[0]);
    // a policy that moves fewer pages than accesses is not flagged
    let pages: Vec<u64> = (0..100).map(|i| (i / 10) % 2).collect();
    let input = write_pages(dir.path(), &pages, None);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(4096))];
    job.policy_label = "churn".into();
    let r = run_policy(Churn { last_fast: None }, &mut job).unwrap();
    assert!(r.migrations > 0 && r.migrations < 100);
    assert!(!r.warnings.iter().any(|w| w.contains("more moves")), "{:?}", r.warnings);
}
