//! Layer 6: the engine. Feeds the records of a trace to a policy, keeps the mechanics, the
//! tracking and the timing model in step, calls the policy's hooks in their documented order
//! (see [`crate::policy`]), checks the invariants and builds the statistics tree.
//!
//! The loop is generic over the policy and the timing model, so each pair is compiled into
//! its own loop: no dynamic dispatch and no allocation per access. Dynamic dispatch happens
//! once per run ([`run_built`]) and once per batch (the record source).

use crate::error::{Error, Result};
use crate::mechanics::{Charge, Memory, MigrationStats, Op, TierId, NO_OWNER_PAGE, UNPLACED};
use crate::pagemap::{PageId, PageMap};
use crate::platform::{Platform, Resolved};
use crate::policy::external::External;
use crate::policy::{self, Activity, Built, Compat, Ctx, Needs, Now, Params, Policy, PolicySpec, NO_TIER, RESIDENT};
use crate::runspec::{PlatformSource, RunSpec};
use crate::timing::{AccessEvent, DetailedTiming, RunCounters, SimpleTiming, TierCounters, Timing, TimingKind, TimingReport, TimingSetup};
use crate::trace::summary::Summary;
use crate::trace::{Batch, EventKind, MarkerKind, RecordSource, BATCH_RECORDS};
use crate::tracking::{FutureCounts, Tracking};
use crate::units::{Capacity, Period};
use serde::Serialize;
use std::sync::Arc;

pub use crate::trace::opener::{Repeated, TraceOpener};
pub use crate::trace::ProgressFn;

/// An address range a run watches: `name` is `[start, end)` of the trace's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchRegion {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// Regions whose pages a run samples over simulated time (`Job::watch`): at every `every_ns`
/// of simulated time, and at the end, the accesses to each region since the last sample and
/// its pages on the fast tier and elsewhere; with the trace's user markers (`TIERKIT_MARK`)
/// and when they came. What `tierkit validate` compares with the kernel's pages per region
/// (docs/validation.md, "Hot data").
#[derive(Clone, Debug, Default)]
pub struct Watch {
    pub regions: Vec<WatchRegion>,
    pub every_ns: f64,
}

/// What a watched run saw (`SimResult::watch`): `rows` are `[time_ms, region index,
/// accesses, pages_fast, pages_slow]` (pages placed on tier 0 / on another tier; pages not
/// touched yet are in neither), `marks` are `[id, time_ms]` of the trace's user markers.
#[derive(Clone, Debug, Serialize, Default)]
pub struct WatchReport {
    pub every_ns: f64,
    pub regions: Vec<String>,
    pub columns: [&'static str; 5],
    pub rows: Vec<(f64, usize, u64, u64, u64)>,
    pub marks: Vec<(u64, f64)>,
}

struct Watcher {
    /// sorted by start: (start, end, index in the report)
    ranges: Vec<(u64, u64, usize)>,
    acc: Vec<u64>,
    next_ns: f64,
    report: WatchReport,
}

impl Watcher {
    fn new(w: &Watch) -> Result<Watcher> {
        if !(w.every_ns > 0.0 && w.every_ns.is_finite()) {
            return Err(Error::config("watch", format!("every {} ns: give a positive interval", w.every_ns)));
        }
        let mut ranges = Vec::with_capacity(w.regions.len());
        for (i, r) in w.regions.iter().enumerate() {
            if r.end <= r.start {
                return Err(Error::config("watch", format!("region {}: empty range 0x{:x}..0x{:x}", r.name, r.start, r.end)));
            }
            ranges.push((r.start, r.end, i));
        }
        ranges.sort();
        Ok(Watcher {
            ranges,
            acc: vec![0; w.regions.len()],
            next_ns: w.every_ns,
            report: WatchReport {
                every_ns: w.every_ns,
                regions: w.regions.iter().map(|r| r.name.clone()).collect(),
                columns: ["time_ms", "region", "accesses", "pages_fast", "pages_slow"],
                ..Default::default()
            },
        })
    }

    /// Count an access in every region that holds `addr` (regions may overlap).
    #[inline]
    fn access(&mut self, addr: u64) {
        let n = self.ranges.partition_point(|r| r.0 <= addr);
        for r in self.ranges[..n].iter().rev() {
            if addr < r.1 {
                self.acc[r.2] += 1;
            }
        }
    }

    fn sample(&mut self, now_ns: f64, pm: &PageMap, mem: &Memory) {
        let shift = pm.page_shift();
        let mut by_index = self.ranges.clone();
        by_index.sort_by_key(|r| r.2);
        for &(start, end, i) in &by_index {
            let (mut fast, mut slow) = (0u64, 0u64);
            for pn in (start >> shift)..=((end - 1) >> shift) {
                if let Some(id) = pm.get(pn << shift) {
                    match mem.tier(id) {
                        UNPLACED => {}
                        0 => fast += 1,
                        _ => slow += 1,
                    }
                }
            }
            self.report.rows.push((now_ns / 1e6, i, self.acc[i], fast, slow));
            self.acc[i] = 0;
        }
    }

    /// Sample if the interval has come (at most once per access: a long gap is one sample).
    #[inline]
    fn tick(&mut self, now_ns: f64, pm: &PageMap, mem: &Memory) {
        if now_ns >= self.next_ns {
            self.sample(now_ns, pm, mem);
            let p = self.report.every_ns;
            self.next_ns += (((now_ns - self.next_ns) / p).floor() + 1.0) * p;
        }
    }

    fn event(&mut self, e: &EventKind, now_ns: f64) {
        if let EventKind::Marker { marker: MarkerKind::User, id, .. } = e {
            self.report.marks.push((*id, now_ns / 1e6));
        }
    }
}

/// One simulation to run.
pub struct Job<'a> {
    pub trace: &'a dyn TraceOpener,
    /// The trace's summary, if already known (saves a pass when comparing policies).
    pub summary: Option<Summary>,
    pub platform: Platform,
    /// Capacity overrides by tier index (`--fast-capacity` is tier 0).
    pub capacity: Vec<(usize, Capacity)>,
    pub timing: TimingKind,
    /// Check the mechanics' invariants from scratch at every period boundary as well as at
    /// the end (always on in debug builds).
    pub paranoid: bool,
    /// Decode the trace on a second thread while simulating (same results; on by default
    /// when the machine has more than one CPU).
    pub read_ahead: bool,
    pub progress: Option<&'a mut ProgressFn<'a>>,
    /// Filled by [`simulate`]: the policy as the user wrote it, and its full parameters.
    pub policy_label: String,
    pub params: Option<Params>,
    /// Filled by [`simulate`] when `time_scale != 1`: the parameters the policy ran with.
    pub scaled_params: Option<Params>,
    /// Replay the trace this many times as one continuous run (`--repeat`, 1 = once).
    pub repeat: u32,
    /// Divide every time constant and per-event cost of the policy, and the platform's
    /// migration costs, by this (`--time-scale`, 1 = none; see docs/models.md).
    pub time_scale: f64,
    /// Regions to sample over simulated time ([`Watch`]; `None`: none).
    pub watch: Option<Watch>,
    /// Cores sharing the tiers (1: one): a mix of programs or a trace's threads, read from a
    /// [`MixOpener`](crate::trace::mix::MixOpener) whose clock board is `board`.
    pub cores: usize,
    pub board: Option<Arc<crate::timing::ClockBoard>>,
    /// A mix of programs: each core's accesses are in an address space of its own (the
    /// owner of a page is its address's bits from [`PROGRAM_SHIFT`](crate::trace::mix::PROGRAM_SHIFT)).
    pub programs: bool,
    /// Accesses a core runs at once before the cores are compared again (`--quantum`, 1:
    /// exact interleaving; more warns, see [`quantum_warning`]).
    pub quantum: usize,
}

impl<'a> Job<'a> {
    pub fn new(trace: &'a dyn TraceOpener, platform: Platform) -> Job<'a> {
        Job {
            trace,
            summary: None,
            platform,
            capacity: Vec::new(),
            timing: TimingKind::Simple,
            paranoid: cfg!(debug_assertions),
            read_ahead: std::thread::available_parallelism().map(|n| n.get() > 1).unwrap_or(false),
            progress: None,
            policy_label: String::new(),
            params: None,
            scaled_params: None,
            repeat: 1,
            time_scale: 1.0,
            watch: None,
            cores: 1,
            board: None,
            programs: false,
            quantum: 1,
        }
    }

    /// Run on the cores of a mix (programs, or a trace's threads).
    pub fn with_mix(mut self, mix: &crate::trace::mix::MixOpener, programs: bool) -> Job<'a> {
        self.cores = mix.cores();
        self.board = Some(mix.board());
        self.programs = programs;
        self.quantum = mix.quantum();
        self
    }

    fn summary(&mut self) -> Result<Summary> {
        if self.summary.is_none() {
            self.summary = Some(self.trace.summary()?);
        }
        Ok(self.summary.clone().unwrap())
    }
}

pub use crate::policy::RunExtent;

/// Run a policy the registry built: the bridge from the registry's dynamic world to the
/// generic loop, one monomorphized [`run_policy`] per concrete type. Policies never name the
/// engine ([`Built`] is theirs); the engine knows them all here.
pub fn run_built(built: Built, job: &mut Job) -> Result<SimResult> {
    match built {
        Built::AllFast(p) => run_policy(p, job),
        Built::AllSlow(p) => run_policy(p, job),
        Built::FirstTouch(p) => run_policy(p, job),
        Built::Interleave(p) => run_policy(p, job),
        Built::CacheMode(p) => run_policy(p, job),
        Built::Scheduler(mut p) => {
            if p.needs_period_maxima() {
                // cori-sim bins against each page's whole-run maximum: one pass over the trace first
                p.scan_period_maxima(job.trace.open()?)?;
            }
            run_policy(p, job)
        }
        Built::Otf(p) => run_policy(p, job),
        Built::Epoch(p) => run_policy(p, job),
        Built::MemPod(p) => run_policy(p, job),
        Built::GuidedStay(p) => run_policy(p, job),
        Built::GuidedOtf(p) => run_policy(p, job),
        Built::GuidedEpoch(p) => run_policy(p, job),
        Built::DamonTiering(p) => run_policy(p, job),
        Built::ClockDwf(p) => run_policy(p, job),
        Built::Memos(p) => run_policy(p, job),
        Built::NumaTiering(p) => run_policy(p, job),
        Built::HyPlacer(p) => run_policy(p, job),
        Built::Nimble(p) => run_policy(p, job),
    }
}

/// Statistics of one tier.
#[derive(Clone, Debug, Serialize)]
pub struct TierStats {
    pub name: String,
    #[serde(flatten)]
    pub counters: TierCounters,
    /// Capacity in pages (`null` when unlimited).
    pub capacity_pages: Option<u64>,
    /// Pages in the tier at the end of the run.
    pub used_pages: u64,
    pub energy_j: f64,
}

/// The exact configuration that produced a result.
#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    pub tierkit_version: &'static str,
    pub trace: String,
    pub trace_format: String,
    pub trace_digest: Option<String>,
    pub policy: String,
    pub timing: &'static str,
    pub page_size: u64,
    /// The platform as given (before `time_scale`).
    pub platform: Resolved,
    /// Replays of the trace in the run (`--repeat`).
    pub repeat: u32,
    /// `--time-scale`: `policy` and `platform` are as given; the run divided their times by it.
    pub time_scale: f64,
    /// The policy's parameters after time scaling, as it ran (absent when `time_scale` is 1).
    pub scaled_policy: Option<String>,
    /// The one description of the run it was made from, the platform written out: running it
    /// again replays the result (`crate::runspec`; absent for a run made without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSpec>,
}

/// The statistics tree, mirroring the components.
#[derive(Clone, Debug, Serialize)]
pub struct StatsTree {
    pub engine: EngineStats,
    pub platform: PlatformStats,
    pub policy: serde_json::Value,
    pub migration: MigrationStats,
    pub timing: serde_json::Value,
}

/// What the engine itself used.
#[derive(Clone, Debug, Serialize)]
pub struct EngineStats {
    /// Bytes of per-page state at the end of the run (page map, placement, tracking).
    pub state_bytes: u64,
    /// Period boundaries crossed.
    pub boundaries: u64,
    /// Boundaries of a period in simulated time that fell while the policy's own work (or
    /// one long access) ran and were folded into the next one (at most one per access).
    pub coalesced_boundaries: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PlatformStats {
    pub name: String,
    pub tiers: Vec<TierStats>,
}

/// The result of one run. The top-level numbers are the ones every front end shows.
#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    pub trace: String,
    pub platform: String,
    pub policy: String,
    pub timing: &'static str,
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub pages: u64,
    pub runtime_ns: f64,
    pub fast_hit_ratio: f64,
    pub migrations: u64,
    pub migrated_bytes: u64,
    pub migration_time_ns: f64,
    pub energy_j: f64,
    pub ipc: Option<f64>,
    pub periods: u64,
    /// How many times the policy's periodic or epoch work ran (`None`: a policy with no
    /// periodic work: a fixed placement such as first-touch, or one that acts per access,
    /// such as otf). See [`Activity`].
    pub activations: Option<u64>,
    /// The interval the policy's periodic work is meant to run at (`None` with
    /// `activations`): what a report needs to say at which `--time-scale` or `--repeat` a
    /// policy that acted too few times would act.
    pub activation_interval: Option<Period>,
    /// Plain sentences on what this result cannot show: a policy that acted fewer than
    /// [`MIN_ACTIVATIONS`] times, or one that can move pages and moved none.
    pub warnings: Vec<String>,
    pub fast_capacity_pages: Option<u64>,
    /// The watched regions over time (`Job::watch`), absent when none were watched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchReport>,
    /// A multi-core run's cores (a mix's programs, in the order given), absent on one core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<CoreResult>>,
    pub stats: StatsTree,
    pub config: RunConfig,
}

/// One core of a multi-core run.
#[derive(Clone, Debug, Serialize)]
pub struct CoreResult {
    pub core: usize,
    /// When its last instruction retired, ns.
    pub runtime_ns: f64,
    pub instructions: u64,
    pub ipc: Option<f64>,
    pub accesses: u64,
    pub fast_hit_ratio: f64,
    /// A mix of programs: migrations of the program's own pages (absent for threads, which
    /// share their pages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
}

/// Parse a policy spec, build it and run it.
pub fn simulate(job: &mut Job, spec: &PolicySpec) -> Result<SimResult> {
    check_scale(job)?;
    let (runnable, params, scaled) = policy::build_scaled(spec, job.time_scale)?;
    job.policy_label = spec.to_string_short();
    job.params = Some(params);
    job.scaled_params = (job.time_scale != 1.0).then_some(scaled);
    run_built(runnable, job)
}

fn check_scale(job: &Job) -> Result<()> {
    if job.repeat == 0 {
        return Err(Error::config("--repeat", "0 replays: give at least 1"));
    }
    if !(job.time_scale > 0.0 && job.time_scale.is_finite()) {
        return Err(Error::config("--time-scale", format!("{}: give a positive number (1 = no scaling)", job.time_scale)));
    }
    Ok(())
}

/// Run an already-built policy (Rust API and Python policies).
pub fn run_policy<P: Policy>(policy: P, job: &mut Job) -> Result<SimResult> {
    match job.timing {
        TimingKind::Simple => run_with(policy, job, SimpleTiming::new),
        TimingKind::Detailed => run_with(policy, job, DetailedTiming::new),
    }
}

/// Reads ahead of the main loop to give oracles the next period's counts.
struct Lookahead {
    src: Box<dyn RecordSource>,
    batch: Batch,
    pos: usize,
    /// index of the next access the lookahead will read
    index: u64,
    done: bool,
}

impl Lookahead {
    /// Count into `fut` the accesses of the period starting at access `start` (accesses
    /// unit: indices [start, start + n); insn unit: instruction counts [start, start + n)).
    fn count_period(&mut self, pm: &mut PageMap, fut: &mut FutureCounts, unit: Period, start: u64) -> Result<()> {
        for &p in &fut.touched {
            fut.count[p as usize] = 0;
        }
        fut.touched.clear();
        loop {
            if self.pos >= self.batch.len() {
                if self.done || !self.src.next_batch(&mut self.batch)? {
                    self.done = true;
                    return Ok(());
                }
                self.pos = 0;
                if self.batch.is_empty() {
                    continue;
                }
            }
            let (before, after) = match unit {
                Period::Accesses(n) => (self.index < start, self.index >= start + n),
                Period::Insn(n) => {
                    let i = self.batch.insn_at(self.pos);
                    (i < start, i >= start + n)
                }
                Period::Ns(_) => unreachable!("checked before the run"),
            };
            if after {
                return Ok(());
            }
            let page = pm.id(self.batch.addr[self.pos]) as usize;
            if !before {
                if fut.count.len() <= page {
                    fut.count.resize((page + 1).max(fut.count.len() * 2), 0);
                }
                if fut.count[page] == 0 {
                    fut.touched.push(page as u32);
                }
                fut.count[page] += 1;
            }
            self.pos += 1;
            self.index += 1;
        }
    }
}

struct Boundaries {
    unit: Option<Period>,
    next_acc: u64,
    next_insn: u64,
    next_ns: f64,
}

impl Boundaries {
    fn new(p: Option<Period>) -> Boundaries {
        let mut b = Boundaries { unit: p, next_acc: u64::MAX, next_insn: u64::MAX, next_ns: f64::INFINITY };
        match p {
            Some(Period::Accesses(n)) => b.next_acc = n,
            Some(Period::Insn(n)) => b.next_insn = n,
            Some(Period::Ns(n)) => b.next_ns = n as f64,
            None => {}
        }
        b
    }
    /// Start of the period that begins at the boundary just crossed (in the period's unit).
    fn start_and_advance(&mut self) -> u64 {
        match self.unit {
            Some(Period::Accesses(n)) => {
                let s = self.next_acc;
                self.next_acc += n;
                s
            }
            Some(Period::Insn(n)) => {
                let s = self.next_insn;
                self.next_insn += n;
                s
            }
            Some(Period::Ns(n)) => {
                let s = self.next_ns;
                self.next_ns += n as f64;
                s as u64
            }
            None => unreachable!(),
        }
    }

    /// After a boundary of a period in simulated time: move the next boundary past `now_ns`,
    /// returning how many boundaries that skips. A periodic daemon that overran its interval
    /// runs once when it next gets the CPU, not once per missed tick; running every missed
    /// boundary back to back would let a period at or below the work of one boundary cascade
    /// forever (docs/limits.md). This bounds the boundaries of a run by its accesses.
    fn coalesce_ns(&mut self, now_ns: f64) -> u64 {
        let Some(Period::Ns(n)) = self.unit else { return 0 };
        if now_ns < self.next_ns {
            return 0;
        }
        let p = n.max(1) as f64;
        let skip = ((now_ns - self.next_ns) / p).floor() + 1.0;
        self.next_ns += skip * p;
        // float rounding at huge times: make sure the next boundary lies ahead
        while self.next_ns <= now_ns {
            self.next_ns += p;
        }
        skip as u64
    }
}

struct State<'p, T> {
    pm: PageMap,
    mem: Memory,
    track: Tracking,
    future: FutureCounts,
    look: Option<Lookahead>,
    timing: T,
    tiers: Vec<TierCounters>,
    now: Now,
    resolved: &'p Resolved,
    line_bytes: u64,
    paranoid: bool,
    /// migrations handed to the timing model
    charged: u64,
    /// activations charged the platform's `per_period_ns`
    charged_periods: u64,
    time_scale: f64,
    /// a mix of programs: migrations of each program's pages
    owner_moves: Vec<u64>,
    /// several cores: each page's owner, the core that touched it first (a mix's program's
    /// core; among a trace's threads, the core whose thread touched it first), `u32::MAX`
    /// until then; empty on one core
    page_core: Vec<u32>,
}

impl<'p, T: Timing> State<'p, T> {
    #[inline]
    fn ctx(&mut self) -> Ctx<'_> {
        let now = self.now;
        self.ctx_at(now)
    }

    #[inline(always)]
    fn ctx_at(&mut self, now: Now) -> Ctx<'_> {
        Ctx {
            mem: &mut self.mem,
            track: &self.track,
            future: if self.look.is_some() { Some(&self.future) } else { None },
            now,
            platform: self.resolved,
            pages: self.pm.len(),
            line_bytes: self.line_bytes,
            pagemap: &self.pm,
            first_write: false,
            time_scale: self.time_scale,
        }
    }

    /// Hand the operations the mechanics carried out to the timing model.
    #[inline]
    fn drain_ops(&mut self) {
        for op in self.mem.ops.drain(..) {
            match op {
                Op::Move(m) => {
                    self.charged += 1;
                    if !self.owner_moves.is_empty() {
                        let owner = (self.pm.page_addr(m.page) >> crate::trace::mix::PROGRAM_SHIFT) as usize;
                        if let Some(x) = self.owner_moves.get_mut(owner) {
                            *x += 1;
                        }
                    }
                    self.timing.migration(&m);
                }
                Op::Charge(c) => self.timing.charge(&c),
                Op::ChargeFor { pages, charge } => Self::charge_owners(&self.page_core, &mut self.timing, &pages, &charge),
            }
        }
    }

    /// A charge for pages: on one core, or if it does not halt, a plain charge; otherwise
    /// its time split evenly among the pages, each share stopping its page's owner (a core
    /// owning both pages is stopped for the whole time).
    fn charge_owners(page_core: &[u32], timing: &mut T, pages: &[PageId; 2], c: &Charge) {
        if page_core.is_empty() || !c.halts {
            return timing.charge(c);
        }
        let owner = |p: PageId| page_core.get(p as usize).copied().filter(|&o| o != u32::MAX);
        let (mut owners, mut n) = ([None; 2], 0);
        for &p in pages.iter().filter(|&&p| p != NO_OWNER_PAGE) {
            owners[n] = owner(p);
            n += 1;
        }
        let mut charge_owner = |o: Option<u32>, c: &Charge| match o {
            Some(o) => timing.charge_core(o as usize, c),
            // (a page no access touched yet: the active core)
            None => timing.charge(c),
        };
        if n == 2 && owners[0] != owners[1] {
            let share = Charge { ns: c.ns / 2.0, ..*c };
            for o in owners {
                charge_owner(o, &share);
            }
        } else {
            charge_owner(owners[0], c);
        }
    }

    /// Charge `per_period_ns` once for each activation of a periodic policy not charged yet:
    /// a boundary at which the policy did nothing (the program was stopped, or its own
    /// interval had not come) costs nothing.
    fn charge_periods<P: Policy>(&mut self, policy: &P, period: Option<Period>) {
        if period.is_none() {
            return;
        }
        if let Some((n, _)) = activations(policy, period, self.now.period) {
            while self.charged_periods < n {
                self.timing.period();
                self.charged_periods += 1;
            }
        }
    }

    fn boundary<P: Policy>(&mut self, policy: &mut P, b: &mut Boundaries) -> Result<()> {
        let start = b.start_and_advance();
        self.track.end_period();
        self.now.period += 1;
        if let Some(look) = self.look.as_mut() {
            look.count_period(&mut self.pm, &mut self.future, b.unit.unwrap(), start)?;
            let n = self.pm.len();
            self.mem.grow(n);
            self.track.grow(n);
        }
        let mut ctx = self.ctx();
        policy.on_period(&mut ctx)?;
        self.drain_ops();
        self.charge_periods(policy, b.unit);
        if self.paranoid {
            self.mem.check_invariants()?;
        }
        Ok(())
    }
}

fn check_needs(needs: &Needs, period: Option<Period>, has_insn: bool, compat: Compat, timing: TimingKind, label: &str) -> Result<()> {
    let key = format!("policy '{label}'");
    if let Some(Period::Insn(_)) = period {
        if !has_insn {
            return Err(Error::config(
                key,
                "its period is in instructions, but the trace has no instruction counts; give it in accesses (e.g. period=100K) or ns",
            ));
        }
    }
    if needs.future && matches!(period, Some(Period::Ns(_))) {
        return Err(Error::config(key, "an oracle cannot look ahead by simulated time; give its period in accesses or instructions"));
    }
    if compat == Compat::CoriSim && timing != TimingKind::Simple {
        return Err(Error::config(key, "compat=cori-sim reproduces the simple timing model; run it with --timing simple"));
    }
    Ok(())
}

/// What a job asks that the engine cannot run, said before anything is read.
fn check_job(job: &Job, needs: &Needs, label: &str) -> Result<()> {
    check_scale(job)?;
    if job.time_scale != 1.0 && job.params.is_none() {
        return Err(Error::config(
            "--time-scale",
            format!("policy '{label}' has no declared parameters to scale: give its times already scaled and leave --time-scale at 1"),
        ));
    }
    if job.cores > 1 {
        if job.timing != TimingKind::Detailed {
            return Err(Error::config(
                "--timing",
                "the simple timing model is one core's: a mix or a trace's threads on several cores needs --timing detailed (docs/models.md, \"Many cores\")",
            ));
        }
        if needs.future {
            return Err(Error::config(
                format!("policy '{label}'"),
                "it reads the future of the access stream, which on several cores is decided as the run goes; run it on one core",
            ));
        }
        if job.watch.is_some() {
            return Err(Error::config("--watch", "not available on several cores"));
        }
    }
    Ok(())
}

/// The run's platform: capacities resolved against the footprint (read from the trace's
/// summary when a capacity is a fraction of it), and the copy the run uses when
/// `--time-scale` scales the platform's OS costs. Also the summary, when one was needed.
fn resolve_platform(job: &mut Job, needs: &Needs, page_bytes: u64) -> Result<(Option<Summary>, Resolved, Option<Resolved>)> {
    // capacities: fractions need the footprint
    let needs_footprint = job.capacity.iter().any(|(_, c)| matches!(c, Capacity::Fraction(_))) || job.platform.tiers.iter().any(|t| t.capacity.is_some());
    let summary = if needs_footprint { Some(job.summary()?) } else { job.summary.clone() };
    let footprint = summary.as_ref().map(|s| s.pages).unwrap_or(0);
    for (i, _) in &job.capacity {
        if *i >= job.platform.tiers.len() {
            return Err(Error::config("capacity", format!("platform {} has no tier {i}", job.platform.name)));
        }
    }
    let mut overrides = job.capacity.clone();
    if needs.unlimited_capacity {
        overrides = (0..job.platform.tiers.len()).map(|i| (i, Capacity::Unlimited)).collect();
    }
    let resolved = job.platform.resolve(footprint, page_bytes, &overrides)?;
    // what the run uses: the platform's migration costs are OS work per event, scaled like
    // the policy's; latencies and bandwidths (and so the copy of a page) are not
    let mut scaled_platform = None;
    if job.time_scale != 1.0 {
        let mut r = resolved.clone();
        let m = &mut r.platform.migration;
        let k = job.time_scale;
        m.fault_ns /= k;
        m.tlb_shootdown_ns /= k;
        m.per_page_ns /= k;
        m.per_period_ns /= k;
        scaled_platform = Some(r);
    }
    Ok((summary, resolved, scaled_platform))
}

/// Before the first access: the pages' ids from a pre-pass (`all_pages_upfront`), the
/// look-ahead of an oracle (`future`), and the policy's `init`.
fn prepare<P: Policy, T: Timing>(policy: &mut P, st: &mut State<'_, T>, needs: &Needs, opener: &dyn TraceOpener) -> Result<()> {
    if needs.all_pages_upfront {
        let mut pre = policy.records(opener.open()?)?;
        let mut b = Batch::with_capacity(BATCH_RECORDS);
        while pre.next_batch(&mut b)? {
            for &a in &b.addr {
                st.pm.id(a);
            }
        }
    }
    if needs.future {
        st.look = Some(Lookahead { src: policy.records(opener.open()?)?, batch: Batch::default(), pos: 0, index: 0, done: false });
    }
    let n = st.pm.len();
    st.mem.grow(n);
    st.track.grow(n);
    {
        let mut ctx = st.ctx();
        policy.init(&mut ctx)?;
    }
    st.drain_ops();
    Ok(())
}

/// What the loop leaves for the report.
struct Fed {
    /// accesses read
    k: u64,
    last_insn: u64,
    /// demand accesses per tier and direction
    demand: [[u64; 2]; 256],
    /// period boundaries folded into the next (`Period::Ns` only)
    coalesced: u64,
    /// several cores: per core, accesses and fast-tier hits
    core_acc: Vec<[u64; 2]>,
}

/// The loop: every access of `src`, in order, through the policy's hooks, the mechanics, the
/// tracking and the timing model; the period boundaries; the progress callback.
#[allow(clippy::too_many_arguments)]
fn feed<P: Policy, T: Timing>(
    policy: &mut P,
    st: &mut State<'_, T>,
    src: &mut dyn RecordSource,
    job: &mut Job,
    needs: &Needs,
    period: Option<Period>,
    mut watcher: Option<&mut Watcher>,
    label: &str,
) -> Result<Fed> {
    let multi = job.cores > 1;
    let mut bounds = Boundaries::new(period);
    let ns_periods = matches!(period, Some(Period::Ns(_)));
    let mut coalesced: u64 = 0;
    let line = st.line_bytes;
    let mut k: u64 = 0;
    let mut last_insn = 0u64;
    // indexed by the u8 tier id, so no bounds check on the hot path
    let mut demand = [[0u64; 2]; 256];
    let mut batch = Batch::with_capacity(BATCH_RECORDS);
    let mut ids: Vec<PageId> = Vec::with_capacity(BATCH_RECORDS);
    let mut dict_ids: Vec<PageId> = Vec::new();
    // several cores: each core's instruction count, and the run's (their sum, which the
    // policies' boundaries in instructions follow); per core, accesses and fast-tier hits
    let mut core_insn = vec![0u64; job.cores.max(1)];
    let mut run_insn = 0u64;
    let mut core_acc = vec![[0u64; 2]; if multi { job.cores } else { 0 }];
    let mut reported = u64::MAX;
    if let Some(b) = &job.board {
        b.reset();
    }

    while src.next_batch(&mut batch)? {
        // Translate the whole batch first: the lookups are independent, so their cache misses
        // overlap; then, in the main loop, prefetch the per-page state of the access AHEAD
        // positions on. Ids are still assigned in first-access order.
        let n = batch.len();
        let has_insn = !batch.insn.is_empty();
        if multi && n > 0 {
            // a mix's batch is one core's
            st.pm.use_cursor(batch.tid[0] as usize);
        }
        ids.clear();
        if batch.dict_shift == st.pm.page_shift() && batch.dict_idx.len() == n {
            // the reader's page dictionary: one lookup per distinct page of the batch
            let shift = batch.dict_shift;
            dict_ids.clear();
            for (j, &pg) in batch.dict_pages.iter().enumerate() {
                if let Some(&ahead) = batch.dict_pages.get(j + AHEAD) {
                    st.pm.prefetch(ahead << shift);
                }
                dict_ids.push(st.pm.id(pg << shift));
            }
            ids.extend(batch.dict_idx.iter().map(|&j| dict_ids[j as usize]));
        } else {
            for i in 0..n {
                if let Some(&a) = batch.addr.get(i + AHEAD) {
                    st.pm.prefetch(a);
                }
                ids.push(st.pm.id(batch.addr[i]));
            }
        }
        // the source's hints: translations to load for later, per-page state for soon
        for &a in &batch.later {
            st.pm.prefetch(a);
        }
        for &a in &batch.soon {
            if let Some(p) = st.pm.peek(a) {
                st.mem.prefetch(p);
                st.track.prefetch(p);
                if P::PER_ACCESS {
                    policy.prefetch(p);
                }
            }
        }
        let known = st.pm.len();
        if multi && n > 0 {
            // the pages' owners: the batch's core, for the pages it is the first to touch
            let c = batch.tid[0];
            if st.page_core.len() < known {
                st.page_core.resize(known, u32::MAX);
            }
            for &p in &ids {
                let o = &mut st.page_core[p as usize];
                if *o == u32::MAX {
                    *o = c;
                }
            }
        }
        st.mem.grow(known);
        st.track.grow(known);
        let mut ev = 0usize;
        let nev = batch.events.len();
        for i in 0..n {
            if let Some(&p) = ids.get(i + AHEAD) {
                st.mem.prefetch(p);
                st.track.prefetch(p);
                if P::PER_ACCESS {
                    policy.prefetch(p);
                }
            }
            if ev < nev && batch.events[ev].at as usize <= i {
                while ev < nev && batch.events[ev].at as usize <= i {
                    if needs.events {
                        st.now.accesses = k;
                        let mut ctx = st.ctx();
                        policy.on_event(&batch.events[ev], &mut ctx)?;
                        st.drain_ops();
                    }
                    if let Some(w) = watcher.as_deref_mut() {
                        w.event(&batch.events[ev].kind, st.timing.now_ns());
                    }
                    ev += 1;
                }
            }
            let addr = if P::PER_ACCESS { batch.addr[i] } else { 0 };
            let write = batch.write[i];
            let core_i = if has_insn { batch.insn[i] } else { 0 };
            let mut insn = core_i;
            if multi {
                let c = batch.tid[i] as usize;
                st.timing.set_core(c);
                run_insn += core_i.saturating_sub(core_insn[c]);
                core_insn[c] = core_i;
                insn = run_insn;
            }
            if k == bounds.next_acc || insn >= bounds.next_insn || (ns_periods && st.timing.now_ns() >= bounds.next_ns) {
                st.now.accesses = k;
                st.now.insn = insn;
                st.now.ns = st.timing.now_ns();
                st.now.hw_idle_ns = st.timing.hw_idle_ns();
                if ns_periods {
                    // one boundary per access at most: missed ones are folded into it
                    st.boundary(policy, &mut bounds)?;
                    coalesced += bounds.coalesce_ns(st.timing.now_ns());
                } else {
                    // instructions the program ran between two accesses: every period they
                    // span is real (and bounded by the trace's instruction counts)
                    loop {
                        st.boundary(policy, &mut bounds)?;
                        if insn < bounds.next_insn {
                            break;
                        }
                    }
                }
            }
            let page = ids[i];
            let mut tier = st.mem.tier(page);
            if tier == UNPLACED {
                st.now.accesses = k;
                let mut ctx = st.ctx();
                ctx.first_write = write;
                tier = policy.place(page, &mut ctx);
                st.mem.place(page, tier).map_err(|e| placement_error(label, e))?;
            }
            let mut probe = NO_TIER;
            let mut delay_ns = 0.0;
            if P::PER_ACCESS {
                // built in registers and handed over whole: writing the fields of `st.now`
                // and copying it into the context stalls on store forwarding
                let now = Now { accesses: k, insn, ns: st.timing.now_ns(), hw_idle_ns: st.timing.hw_idle_ns(), period: st.now.period };
                st.now = now;
                let mut ctx = st.ctx_at(now);
                let s = policy.on_access(page, addr, write, &mut ctx);
                if s.tier != RESIDENT {
                    tier = s.tier;
                }
                probe = s.probe;
                delay_ns = s.delay_ns;
                for x in &s.extra[..s.n_extra as usize] {
                    let c = &mut st.tiers[x.tier as usize];
                    if x.write {
                        c.extra_writes += 1;
                        c.bytes_written += line;
                    } else {
                        c.extra_reads += 1;
                        c.bytes_read += line;
                    }
                    st.timing.traffic(x.tier, x.write);
                }
                if probe != NO_TIER {
                    let c = &mut st.tiers[probe as usize];
                    c.probes += 1;
                    c.bytes_read += line;
                }
                if !st.mem.ops.is_empty() {
                    st.drain_ops();
                }
            }
            if let Some(w) = watcher.as_deref_mut() {
                w.access(batch.addr[i]);
                w.tick(st.timing.now_ns(), &st.pm, &st.mem);
            }
            st.track.record(page, write, k);
            // demand counts per tier and direction; bytes follow from them after the loop
            demand[tier as usize][write as usize] += 1;
            if multi {
                let a = &mut core_acc[batch.tid[i] as usize];
                a[0] += 1;
                a[1] += (tier == 0) as u64;
            }
            st.timing.access(AccessEvent { page, tier, write, probe, delay_ns, insn: core_i });
            last_insn = insn;
            k += 1;
        }
        if needs.events || watcher.is_some() {
            while ev < nev {
                if needs.events {
                    st.now.accesses = k;
                    let mut ctx = st.ctx();
                    policy.on_event(&batch.events[ev], &mut ctx)?;
                    st.drain_ops();
                }
                if let Some(w) = watcher.as_deref_mut() {
                    w.event(&batch.events[ev].kind, st.timing.now_ns());
                }
                ev += 1;
            }
        }
        if let Some(cb) = job.progress.as_mut() {
            let p = src.progress();
            // (a mix hands out small batches: call back only when reading moved on)
            if p.bytes_read != reported || !multi {
                reported = p.bytes_read;
                if !cb(p.bytes_read, p.bytes_total) {
                    return Err(Error::Interrupted);
                }
            }
        }
    }
    Ok(Fed { k, last_insn, demand, coalesced, core_acc })
}

/// The invariants of every run: capacities and placements (the mechanics' own), every access
/// counted once, every replay of the trace read, every migration handed to the timing model.
fn check_invariants<T: Timing>(st: &State<'_, T>, k: u64, summary: Option<&Summary>, repeat: u32, ms: &MigrationStats) -> Result<()> {
    st.mem.check_invariants()?;
    let served: u64 = st.tiers.iter().map(|t| t.reads + t.writes).sum();
    if served != k {
        return Err(Error::Invariant(format!("{k} accesses read but {served} served")));
    }
    if let Some(s) = summary {
        // the summary is of one pass; the run read every replay
        if s.accesses * repeat as u64 != k {
            return Err(Error::Invariant(format!("the trace summary counts {} accesses ({} replays), the run read {k}", s.accesses, repeat)));
        }
    }
    if st.charged != ms.migrations {
        return Err(Error::Invariant(format!("{} pages migrated but {} migrations charged to the timing model", ms.migrations, st.charged)));
    }
    Ok(())
}

/// What a result cannot show, in plain sentences: too few activations, old parameter names,
/// inputs made for another trace, an incomplete trace, boundaries folded away.
#[allow(clippy::too_many_arguments)]
fn run_warnings<P: Policy>(
    policy: &P,
    job: &Job,
    label: &str,
    period: Option<Period>,
    acts: Option<(u64, Period)>,
    migrations: u64,
    ran: &RunExtent,
    digest: Option<&str>,
    coalesced: u64,
    boundaries: u64,
) -> Vec<String> {
    let moves_pages = !(policy.activity() == Activity::Boundaries && period.is_none());
    let mut warnings = activity_warnings(label, acts, moves_pages, migrations, ran);
    // old parameter names, read under their new ones (policy::params::RENAMED)
    warnings.extend(job.params.iter().flat_map(|p| p.renamed.iter().cloned()));
    for w in policy.input_warnings(digest, ran) {
        // said as it happens too: a long comparison's table comes at the end
        eprintln!("tierkit: warning: {w}");
        warnings.push(w);
    }
    if migrations > ran.accesses && ran.accesses > 0 {
        // each access can justify at most one move: more moves than accesses is churn
        warnings.push(format!(
            "policy '{label}' moved {migrations} pages for {} accesses: more moves than the trace has accesses, so most moved pages were not used where they went",
            ran.accesses
        ));
    }
    if let Some(why) = job.trace.incomplete() {
        warnings.push(format!("trace {}: incomplete ({why}); the results cover only what was recorded", job.trace.describe()));
    }
    if let (Some(Period::Ns(pn)), true) = (period, coalesced > 0) {
        // more missed than run: the period is about the work of one boundary or shorter
        if coalesced >= boundaries {
            warnings.push(format!(
                "policy '{label}': {coalesced} of its {} period boundaries fell while its own work ran and were folded into the next (period {}{}); lengthen the period",
                coalesced + boundaries,
                human_ns(pn as f64),
                if job.time_scale != 1.0 { format!(" after --time-scale {}", job.time_scale) } else { String::new() },
            ));
        }
    }
    warnings
}

/// When the fast tier holds every page the trace touches, no placement decision is left: every
/// policy puts every page there and its result is all-fast's (003 §3.1's upper bound), which a
/// size given in bytes (`-c 512MB` on an 8 MiB trace) hides. A fraction of the footprint
/// (`-c 1.0`) or an unlimited tier says so itself; all-fast and all-slow ignore capacities.
fn capacity_warning(resolved: &Resolved, pages: u64, page_bytes: u64, needs: &Needs) -> Option<String> {
    let cap = *resolved.capacity_pages.first()?;
    let in_bytes = matches!(resolved.capacity.first(), Some(Capacity::Bytes(_)));
    if !in_bytes || needs.unlimited_capacity || resolved.tiers() < 2 || pages == 0 || cap < pages {
        return None;
    }
    let tier = &resolved.platform.tiers[0].name;
    Some(format!(
        "the fast tier {tier} holds the whole footprint: its capacity, {} ({cap} pages), is at least the {pages} pages ({}) the trace touches, so every policy places every page fast and equals all-fast; give a capacity below the footprint (e.g. --fast-capacity 0.2, a fifth of it)",
        human_bytes(cap.saturating_mul(page_bytes)),
        human_bytes(pages.saturating_mul(page_bytes)),
    ))
}

/// A quantum above 1 on several cores is lax synchronization (docs/models.md, "Many cores"):
/// a core runs that many accesses before the cores are compared again, so its later requests
/// reach the shared queues before other cores' earlier ones and the runtime comes out longer.
/// The figures are the measured error on `bench/mix.py`'s 16-program mixes (docs/models.md,
/// "Lax synchronization's error"; bench/README.md, "mix").
pub fn quantum_warning(cores: usize, quantum: usize) -> Option<String> {
    if cores < 2 || quantum < 2 {
        return None;
    }
    Some(format!(
        "quantum {quantum}: lax synchronization is not exact (each core runs {quantum} accesses before the cores are compared again); on a bandwidth-bound 16-program mix on dram-dcpmm the runtime came out 1.55x quantum 1's at quantum 2, 1.85x at 4 and 5.41x at 16, and 4.8x to 13.5x on a latency-bound one (docs/models.md, \"Many cores\"); use --quantum 1 for results"
    ))
}

/// A size for people: 512 MiB, 8.2 MiB, 4 KiB.
fn human_bytes(b: u64) -> String {
    let (v, unit) = match b {
        b if b >= 1 << 30 => (b as f64 / (1u64 << 30) as f64, "GiB"),
        b if b >= 1 << 20 => (b as f64 / (1u64 << 20) as f64, "MiB"),
        b if b >= 1 << 10 => (b as f64 / 1024.0, "KiB"),
        b => return format!("{b} B"),
    };
    let s = format!("{v:.1}");
    format!("{} {unit}", s.strip_suffix(".0").unwrap_or(&s))
}

/// A warning on stderr as it happens, once per process: a comparison runs many policies on
/// the same trace and capacity, and says it again under its table.
fn say_once(w: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|s| s == w) {
        eprintln!("tierkit: warning: {w}");
        said.push(w.to_string());
    }
}

/// One run, in its phases: the job's checks ([`check_job`]), the trace opened and the platform
/// resolved ([`resolve_platform`]), the state and the policy's start ([`prepare`]), the loop
/// ([`feed`]), the invariants ([`check_invariants`]), the warnings ([`run_warnings`]) and the
/// result.
fn run_with<P: Policy, T: Timing>(mut policy: P, job: &mut Job, make_timing: impl FnOnce(&Resolved, TimingSetup) -> T) -> Result<SimResult> {
    let needs = policy.needs();
    let period = policy.period();
    let compat = policy.compat();
    let label = if job.policy_label.is_empty() { "policy".to_string() } else { job.policy_label.clone() };
    check_job(job, &needs, &label)?;
    let multi = job.cores > 1;
    // every reader of the run (main loop, look-ahead, pre-pass) opens the same stream
    let repeated;
    let opener: &dyn TraceOpener = if job.repeat > 1 {
        repeated = Repeated { inner: job.trace.shared(), passes: job.repeat };
        &repeated
    } else {
        job.trace
    };

    let mut src = policy.records(opener.open()?)?;
    let meta = src.meta().clone();
    // decode instruction counts only when something reads them
    let wants_insn = job.timing == TimingKind::Detailed || matches!(period, Some(Period::Insn(_)));
    // and addresses only for per-access policies (the others work from page ids)
    let mut watcher = job.watch.as_ref().map(Watcher::new).transpose()?;
    src.set_projection(crate::trace::Projection { insn: wants_insn, ns: false, addr: P::PER_ACCESS || watcher.is_some() });
    // (not on several cores: which core reads next depends on where the simulation is)
    if job.read_ahead && !multi {
        src = Box::new(crate::trace::threaded::ReadAhead::new(src));
    }
    check_needs(&needs, period, meta.time_insn, compat, job.timing, &label)?;
    let page_bytes = meta.page_size;

    let (summary, resolved, scaled_platform) = resolve_platform(job, &needs, page_bytes)?;
    let run_platform = scaled_platform.as_ref().unwrap_or(&resolved);

    let setup = TimingSetup {
        cores: job.cores,
        board: job.board.clone(),
        compat,
        period_accesses: match period {
            Some(Period::Accesses(n)) => Some(n),
            _ => None,
        },
        has_insn: meta.time_insn,
        line_bytes: meta.line_size,
    };
    let n_tiers = resolved.tiers();
    let mut st = State {
        pm: PageMap::new(page_bytes),
        mem: Memory::new(&resolved.capacity_pages, page_bytes),
        track: Tracking::new(needs.counts, needs.rw_counts, needs.recency),
        future: FutureCounts::default(),
        look: None,
        timing: make_timing(run_platform, setup),
        tiers: vec![TierCounters::default(); n_tiers],
        now: Now::default(),
        resolved: run_platform,
        line_bytes: meta.line_size,
        paranoid: job.paranoid,
        charged: 0,
        charged_periods: 0,
        time_scale: job.time_scale,
        owner_moves: if multi && job.programs { vec![0; job.cores] } else { Vec::new() },
        page_core: Vec::new(),
    };

    prepare(&mut policy, &mut st, &needs, opener)?;

    let fed = feed(&mut policy, &mut st, src.as_mut(), job, &needs, period, watcher.as_mut(), &label)?;
    let Fed { k, last_insn, demand, coalesced, core_acc } = fed;
    let line = st.line_bytes;
    let digest = src.digest();
    drop(src);
    if let Some(w) = watcher.as_mut() {
        w.sample(st.timing.now_ns(), &st.pm, &st.mem);
    }
    if let (Some((file, want)), Some(got)) = (policy.made_for_trace(), &digest) {
        if want != got {
            let short = |d: &str| d.chars().take(16).collect::<String>();
            return Err(Error::config(file, format!("made for the trace with digest {}…, not this one ({}…)", short(want), short(got))));
        }
    }
    let ms = st.mem.stats();
    for (t, (c, d)) in st.tiers.iter_mut().zip(&demand[..n_tiers]).enumerate() {
        c.reads += d[0];
        c.writes += d[1];
        c.bytes_read += d[0] * line + ms.bytes_out[t];
        c.bytes_written += d[1] * line + ms.bytes_in[t];
    }
    let reads: u64 = demand[..n_tiers].iter().map(|d| d[0]).sum();

    check_invariants(&st, k, summary.as_ref(), job.repeat, &ms)?;

    let periods = if period.is_some() { st.now.period + 1 } else { 0 };
    // activations after the last boundary (work a policy ran from its per-access hook)
    st.charge_periods(&policy, period);
    let counters = RunCounters {
        accesses: k,
        tiers: st.tiers.clone(),
        migrations: ms.migrations,
        periods: st.charged_periods,
        line_bytes: line,
        page_bytes,
        instructions: (meta.time_insn && wants_insn).then_some(last_insn),
    };
    let report: TimingReport = st.timing.finish(&counters);
    let cores = multi.then(|| {
        st.timing
            .core_reports()
            .into_iter()
            .zip(&core_acc)
            .enumerate()
            .map(|(c, (r, a))| CoreResult {
                core: c,
                runtime_ns: r.runtime_ns,
                instructions: r.instructions,
                ipc: r.ipc,
                accesses: a[0],
                fast_hit_ratio: if a[0] > 0 { a[1] as f64 / a[0] as f64 } else { 0.0 },
                migrations: st.owner_moves.get(c).copied(),
            })
            .collect()
    });

    let mut tiers = Vec::with_capacity(n_tiers);
    let mut energy = 0.0;
    for (i, c) in st.tiers.iter().enumerate() {
        let t = &resolved.platform.tiers[i];
        let e = (c.bytes_read as f64 * 8.0 * t.read_energy_pj_per_bit + c.bytes_written as f64 * 8.0 * t.write_energy_pj_per_bit) * 1e-12;
        energy += e;
        let cap = resolved.capacity_pages[i];
        tiers.push(TierStats {
            name: t.name.clone(),
            counters: c.clone(),
            capacity_pages: (cap != u64::MAX).then_some(cap),
            used_pages: st.mem.used(i as TierId),
            energy_j: e,
        });
    }
    // what policies charged beyond traffic (a migration controller, say)
    energy += st.mem.charged_energy_j();
    let fast = st.tiers[0].reads + st.tiers[0].writes;
    let cap0 = resolved.capacity_pages[0];
    let acts = activations(&policy, period, st.now.period);
    let ran = RunExtent { runtime_ns: report.runtime_ns, accesses: k, instructions: (meta.time_insn && wants_insn).then_some(last_insn) };
    let mut warnings = run_warnings(&policy, job, &label, period, acts, ms.migrations, &ran, digest.as_deref(), coalesced, st.now.period);
    if let Some(w) = capacity_warning(&resolved, st.pm.len() as u64, page_bytes, &needs) {
        say_once(&w);
        warnings.push(w);
    }
    if let Some(w) = quantum_warning(job.cores, job.quantum) {
        say_once(&w);
        warnings.push(w);
    }
    Ok(SimResult {
        trace: job.trace.describe(),
        platform: resolved.platform.name.clone(),
        policy: label,
        timing: job.timing.name(),
        accesses: k,
        reads,
        writes: k - reads,
        pages: st.pm.len() as u64,
        runtime_ns: report.runtime_ns,
        fast_hit_ratio: if k > 0 { fast as f64 / k as f64 } else { 0.0 },
        migrations: ms.migrations,
        migrated_bytes: ms.migrated_bytes,
        migration_time_ns: report.migration_time_ns,
        energy_j: energy,
        ipc: report.ipc,
        periods,
        activations: acts.map(|(n, _)| n),
        activation_interval: acts.map(|(_, p)| p),
        warnings,
        fast_capacity_pages: (cap0 != u64::MAX).then_some(cap0),
        watch: watcher.map(|w| w.report),
        cores,
        stats: StatsTree {
            engine: EngineStats {
                state_bytes: (st.pm.heap_bytes() + st.mem.slots() + st.track.heap_bytes() + st.future.count.capacity() * 4) as u64,
                boundaries: st.now.period,
                coalesced_boundaries: coalesced,
            },
            platform: PlatformStats { name: resolved.platform.name.clone(), tiers },
            policy: policy.report(),
            migration: ms.clone(),
            timing: report.detail,
        },
        config: RunConfig {
            tierkit_version: env!("CARGO_PKG_VERSION"),
            trace: job.trace.describe(),
            trace_format: job.trace.format_name(),
            trace_digest: digest,
            policy: job.params.as_ref().map(|p| p.canonical()).unwrap_or_else(|| job.policy_label.clone()),
            timing: job.timing.name(),
            page_size: page_bytes,
            platform: resolved.clone(),
            repeat: job.repeat,
            time_scale: job.time_scale,
            scaled_policy: job.scaled_params.as_ref().map(|p| p.canonical()),
            run: None,
        },
    })
}

/// A policy that acted fewer times than this gets a warning: one or two activations show
/// a transient, not the policy (docs/policies.md, "Activations and warnings").
pub const MIN_ACTIVATIONS: u64 = 3;

/// The policy's activations so far and the interval they are meant to run at; `None` for a
/// policy with no periodic work.
fn activations<P: Policy>(policy: &P, period: Option<Period>, boundaries: u64) -> Option<(u64, Period)> {
    match policy.activity() {
        Activity::Boundaries => period.map(|p| (boundaries, p)),
        Activity::Ran { times, every } => Some((times, every)),
        Activity::OnAccess => None,
    }
}

/// A duration for people, to three significant digits: 1 s, 250 ms, 1.5 µs.
pub fn human_ns(ns: f64) -> String {
    let (v, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    // three significant digits, without trailing zeros
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    format!("{s} {unit}")
}

fn times(n: u64) -> String {
    format!("{n} time{}", if n == 1 { "" } else { "s" })
}

/// The warnings of docs/policies.md ("Activations and warnings"), in words a user
/// understands: a policy that acted fewer than [`MIN_ACTIVATIONS`] times (and why: its
/// interval against the run's length, or skipped intervals), and a policy able to move pages
/// that moved none (its result is then its initial placement's, whatever its name).
pub fn activity_warnings(label: &str, acts: Option<(u64, Period)>, moves_pages: bool, migrations: u64, ran: &RunExtent) -> Vec<String> {
    let mut w = Vec::new();
    const SEE: &str = "see --repeat / --time-scale";
    if let Some((n, every)) = acts {
        if n < MIN_ACTIVATIONS {
            // the interval and the run, in the interval's own unit
            let (interval, run, fits) = match every {
                Period::Ns(i) => {
                    (format!("{} interval", human_ns(i as f64)), format!("{} of simulated time", human_ns(ran.runtime_ns)), ran.runtime_ns / i.max(1) as f64)
                }
                Period::Accesses(i) => (format!("period of {i} accesses"), format!("{} accesses", ran.accesses), ran.accesses as f64 / i.max(1) as f64),
                Period::Insn(i) => match ran.instructions {
                    Some(r) => (format!("period of {i} instructions"), format!("{r} instructions"), r as f64 / i.max(1) as f64),
                    None => (format!("period of {i} instructions"), format!("{} accesses", ran.accesses), f64::NAN),
                },
            };
            let why = if fits < 1.0 {
                format!("its {interval} is longer than the run's {run}; {SEE}")
            } else if fits < MIN_ACTIVATIONS as f64 {
                format!("its {interval} fits only {fits:.2} times in the run's {run}, too few to show how it behaves; {SEE}")
            } else if fits.is_finite() {
                format!(
                    "its {interval} passed {} times in the run's {run}, but its work ran in only {} of them (see stats.policy for the skipped ones)",
                    fits.floor(),
                    n
                )
            } else {
                format!("its {interval} passed too few times in the run; {SEE}")
            };
            // pages can still move outside that work (kswapd demotion, say): say where they came from
            let other = if migrations > 0 {
                format!(" ({migrations} migrations came from work outside it, such as demotion under memory pressure)")
            } else {
                String::new()
            };
            w.push(format!("{label} acted {}: {why}{other}", times(n)));
        }
    }
    // (a policy that never acted moved nothing periodically: the first warning says why)
    if moves_pages && migrations == 0 {
        match acts {
            Some((0, _)) => {}
            Some((n, _)) => w.push(format!("{label} acted {} but moved no page: its result is that of its initial placement alone", times(n))),
            None => w.push(format!("{label} moved no page: its result is that of its initial placement alone")),
        }
    }
    w
}

/// How many accesses ahead the loop prefetches per-page state.
const AHEAD: usize = 24;

fn placement_error(label: &str, e: Error) -> Error {
    match e {
        Error::Invariant(m) => Error::Invariant(format!("policy '{label}': {m}")),
        other => other,
    }
}

/// What runs the policy: the spec's own policy, or a policy object of the front end's (a
/// Python `PeriodicPolicy`), which the spec names by its name.
pub enum Decider {
    Spec,
    External(External),
}

/// Run a run's description (`crate::runspec`, `config.run` of every result): build its inputs, platform, capacities, cores and policy, simulate, check the
/// digest, and record the spec in the result (`config.run`, the platform written out).
pub fn run_spec(spec: &RunSpec, decider: Decider, summary: Option<Summary>, paranoid: bool, mut progress: Option<&mut ProgressFn>) -> Result<SimResult> {
    // the job borrows its callback for as long as it borrows the trace: a local one that asks
    // the caller's
    let mut cb = |done: u64, total: Option<u64>| progress.as_mut().map(|p| p(done, total)).unwrap_or(true);
    let inp = spec.input(spec.trace.as_path())?;
    let plat = spec.platform()?;
    let mut caps = Vec::new();
    for (tier, val) in &spec.capacity {
        let idx = plat
            .tiers
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(tier))
            .or_else(|| tier.parse::<usize>().ok().filter(|&i| i < plat.tiers.len()))
            .ok_or_else(|| {
                Error::config(
                    "--capacity",
                    format!(
                        "platform {} has no tier '{tier}' (tiers: {})",
                        plat.name,
                        plat.tiers.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                )
            })?;
        let key = if idx == 0 && tier == "0" { "--fast-capacity".to_string() } else { format!("--capacity {tier}") };
        caps.push((idx, Capacity::parse(&key, val)?));
    }
    let timing = TimingKind::parse(&spec.timing)?;
    if spec.cores == 0 || spec.quantum == 0 {
        return Err(Error::config("--cores", "cores and quantum are at least 1"));
    }
    if !spec.mix.is_empty() && spec.cores > 1 {
        return Err(Error::config("--cores", "a mix runs each program on a core of its own; --cores is for one trace's threads"));
    }
    // several cores: the other programs of a mix, or the trace's threads on `cores` cores
    let mixed = if !spec.mix.is_empty() {
        let mut parts: Vec<Arc<dyn TraceOpener + Send>> = vec![TraceOpener::shared(&inp)];
        for o in &spec.mix {
            parts.push(TraceOpener::shared(&spec.input(o.as_path())?));
        }
        Some((crate::trace::mix::MixOpener::programs(parts, spec.quantum)?, true))
    } else if spec.cores > 1 {
        Some((crate::trace::mix::MixOpener::threads(TraceOpener::shared(&inp), spec.cores, spec.quantum)?, false))
    } else {
        None
    };
    let recorded_platform = plat.clone();
    let mut job = match &mixed {
        Some((m, programs)) => Job::new(m, plat).with_mix(m, *programs),
        None => Job::new(&inp, plat),
    };
    job.capacity = caps;
    job.timing = timing;
    job.paranoid = paranoid || cfg!(debug_assertions);
    job.repeat = spec.repeat;
    job.time_scale = spec.time_scale;
    job.watch = spec.watch.as_ref().map(|w| Watch {
        regions: w.regions.iter().map(|(name, start, end)| WatchRegion { name: name.clone(), start: *start, end: *end }).collect(),
        every_ns: w.every_ns,
    });
    job.summary = summary;
    job.progress = Some(&mut cb);
    let mut r = match decider {
        Decider::Spec => simulate(&mut job, &PolicySpec::parse(&spec.policy)?)?,
        Decider::External(ext) => {
            job.policy_label = ext.decider.name();
            run_policy(ext, &mut job)?
        }
    };
    // the trace read must be the one the spec names by its digest (computed as it was read)
    if let (Some(want), Some(got)) = (&spec.trace_digest, &r.config.trace_digest) {
        if want != got {
            let names: Vec<String> = std::iter::once(&spec.trace).chain(&spec.mix).map(|p| p.0.display().to_string()).collect();
            let (name, w, g) = names
                .iter()
                .zip(want.split('+').zip(got.split('+')))
                .find(|(_, (w, g))| w != g)
                .map(|(n, (w, g))| (n.clone(), w.to_string(), g.to_string()))
                .unwrap_or((names[0].clone(), want.clone(), got.clone()));
            return Err(Error::config(
                "replay",
                format!(
                    "{name} has digest {}..., the result was made from {}...: give the trace it was made from",
                    &g[..g.len().min(12)],
                    &w[..w.len().min(12)]
                ),
            ));
        }
    }
    let mut recorded = spec.clone();
    recorded.platform = PlatformSource::Inline(Box::new(recorded_platform));
    recorded.trace_digest = r.config.trace_digest.clone();
    r.config.run = Some(recorded);
    Ok(r)
}
