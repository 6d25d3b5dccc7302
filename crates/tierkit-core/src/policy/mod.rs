//! Layer 5: policies — decisions only. A policy says where a new page goes, and, from what
//! its [tracking](crate::tracking) lets it observe, which pages to move and when; the
//! [mechanics](crate::mechanics) carry the moves out.
//!
//! Adding a policy is one file plus one line in [`REGISTRY`]: the file implements [`Policy`]
//! and exports a [`PolicyInfo`] that declares the name, a one-line summary, the paper it
//! follows and each parameter with its type, unit, default and source. `tierkit policies`
//! is generated from those declarations, and the same declarations parse `NAME:key=value`.
//!
//! Calling order, per run (the engine guarantees it):
//! 1. [`Policy::needs`] once, before anything else; then [`Policy::records`] once for each
//!    reader of the trace;
//! 2. [`Policy::init`] once, before the first access (after the pre-pass, if asked for);
//! 3. for each access, in trace order: [`Policy::place`] if the page has never been touched
//!    (its return value is where the page goes), then [`Policy::on_access`] (only for
//!    policies with `PER_ACCESS = true`);
//! 4. [`Policy::on_period`] at every period boundary, before the first access of the new
//!    period; the tracking then holds the period just ended as `prev_*`;
//! 5. [`Policy::on_event`] for allocation, free and marker records (only with
//!    `needs().events`), between the accesses they sit between;
//! 6. [`Policy::report`] and [`Policy::activity`] once at the end, for the policy's subtree
//!    of the statistics and for the result's `activations` and `warnings`.

pub mod arena_layout;
pub mod basic;
pub mod cache_mode;
pub mod clock_dwf;
pub mod damon_tiering;
pub mod epoch_os;
pub mod external;
pub mod guided;
pub mod hyplacer;
pub mod learned;
pub mod mea;
pub mod memos;
pub mod mempod;
pub mod nimble;
pub mod os_tiering;
pub mod otf;
pub mod page_scheduler;
pub mod params;

pub use params::{time_dim, ParamSpec, ParamType, Params, PolicySpec, TimeDim, Value};

use crate::error::{Error, Result};
use crate::mechanics::{Memory, TierId};
use crate::pagemap::PageId;
use crate::platform::Resolved;
use crate::trace::Event;
use crate::tracking::{FutureCounts, Tracking};
use crate::units::Period;
use serde::Serialize;

/// What a policy needs the engine to keep or do. Everything defaults to off: a policy pays
/// only for what it asks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Per-page access counts per period (current and previous) and the touched-page lists.
    pub counts: bool,
    /// Per-page write counts per period (implies `counts`).
    pub rw_counts: bool,
    /// The index of each page's last access (for LRU decisions).
    pub recency: bool,
    /// Per-page counts of the *next* period (future knowledge: oracles only).
    pub future: bool,
    /// Page ids for every page of the trace before the first access (a pre-pass over the
    /// trace; ids are still in first-access order).
    pub all_pages_upfront: bool,
    /// Ignore tier capacities (single-tier reference policies).
    pub unlimited_capacity: bool,
    /// Allocation, free and marker records.
    pub events: bool,
}

// the timing model's accounting modes and the "no tier" of mechanics, as policies name them
pub use crate::mechanics::NO_TIER;
pub use crate::timing::Compat;

/// One line of memory traffic beyond the demand access itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub tier: TierId,
    pub write: bool,
}

/// How a demand access was served, when a policy decides it per access (cache-like
/// policies). Most policies return [`Served::RESIDENT`]: the page's own tier serves it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Served {
    /// The tier whose latency the access sees ([`RESIDENT`] = the page's tier).
    pub tier: TierId,
    /// A tier whose read latency is added before (e.g. the tag probe of a DRAM cache);
    /// [`NO_TIER`] if none.
    pub probe: TierId,
    /// Extra line transfers caused by the access (fills, writebacks); they use bandwidth and
    /// energy but add no latency of their own.
    pub extra: [Traffic; 3],
    pub n_extra: u8,
    /// Latency the policy's own hardware adds before the memory request (a remap-table
    /// lookup, say), ns.
    pub delay_ns: f64,
}

pub const RESIDENT: TierId = 254;

impl Served {
    pub const RESIDENT: Served = Served { tier: RESIDENT, probe: NO_TIER, extra: [Traffic { tier: 0, write: false }; 3], n_extra: 0, delay_ns: 0.0 };
    pub fn by(tier: TierId) -> Served {
        Served { tier, ..Served::RESIDENT }
    }
    pub fn with_probe(mut self, tier: TierId) -> Served {
        self.probe = tier;
        self
    }
    /// The page's own tier serves it, `ns` later than it would have.
    pub fn delayed(ns: f64) -> Served {
        Served { delay_ns: ns, ..Served::RESIDENT }
    }
    pub fn plus(mut self, tier: TierId, write: bool) -> Served {
        self.extra[self.n_extra as usize] = Traffic { tier, write };
        self.n_extra += 1;
        self
    }
}

/// Where the run is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Now {
    /// Accesses processed so far.
    pub accesses: u64,
    /// Instruction count of the latest access.
    pub insn: u64,
    /// Simulated time, ns.
    pub ns: f64,
    /// When a hardware migration engine ([`MoveBy::Hw`](crate::mechanics::MoveBy)) has
    /// finished copying every page handed to it before this hook, ns (0 if none): it is idle
    /// once `ns >= hw_idle_ns`. Set with `ns`.
    pub hw_idle_ns: f64,
    /// Index of the current period (0 before the first boundary).
    pub period: u64,
}

/// What a policy sees and can act on in a hook.
pub struct Ctx<'a> {
    /// The mechanics: where pages are, free frames, and the move/swap requests.
    pub mem: &'a mut Memory,
    /// What the policy may observe.
    pub track: &'a Tracking,
    /// Next-period counts, for policies that declared `needs().future`.
    pub future: Option<&'a FutureCounts>,
    pub now: Now,
    pub platform: &'a Resolved,
    /// Pages known to the engine (all pages of the trace with `all_pages_upfront`).
    pub pages: usize,
    /// The trace's line size: the bytes of one access and of one extra line of traffic.
    pub line_bytes: u64,
    /// Page ids and their addresses.
    pub pagemap: &'a crate::pagemap::PageMap,
    /// In [`Policy::place`]: whether the first access to the page is a store (a partitioned
    /// policy puts written pages and read pages in different tiers). False in other hooks.
    pub first_write: bool,
    /// The run's time scale K (`--time-scale`, 1 by default). Parameters and the platform's
    /// migration costs come already divided by it; a policy divides by it the time constants
    /// and per-event costs it holds in code rather than in parameters.
    pub time_scale: f64,
}

impl Ctx<'_> {
    /// Virtual address of the first byte of a page.
    pub fn page_addr(&self, page: PageId) -> u64 {
        self.pagemap.page_addr(page)
    }
}

/// How often a policy's periodic or epoch work ran ([`Policy::activity`]), for the result's
/// `activations` and for the warning about a policy that had no chance to act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// The engine's count: every [`Policy::on_period`] call is one activation, at the
    /// interval of [`Policy::period`]. A policy without a period does no periodic work and
    /// moves no page on its own (first-touch, all-fast, cache-mode): its `activations` is
    /// `null` and it gets no warning.
    Boundaries,
    /// The policy's own count of the times its periodic or epoch work really ran, and the
    /// interval that work is meant to run at (it may differ from [`Policy::period`]: DAMON
    /// samples every 5 ms but applies its schemes every aggregation; a boundary the clock
    /// passed while the program was stopped does not count).
    Ran { times: u64, every: Period },
    /// No periodic work, but the policy moves pages from its per-access hook (otf, clock-dwf):
    /// `activations` is `null`; a run in which it moved nothing is still flagged.
    OnAccess,
}

/// A placement and migration policy.
pub trait Policy: Send + 'static {
    /// Whether [`Policy::on_access`] must be called on every access. Policies that do not
    /// need it leave it false and the hook costs nothing.
    const PER_ACCESS: bool = false;

    fn needs(&self) -> Needs;

    fn init(&mut self, _ctx: &mut Ctx) -> Result<()> {
        Ok(())
    }

    /// Where a page goes on its first access. Must name a tier with a free frame.
    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId;

    /// A page that guided placement (`guided:...,then=NAME`) put in `tier` on its first
    /// access, instead of [`Policy::place`]: a policy with per-page state sets it up here as
    /// `place` would have.
    fn adopt(&mut self, _page: PageId, _tier: TierId, _ctx: &mut Ctx) {}

    /// A page the policy must drop its per-page state for: live, the program unmapped it, or
    /// it is no longer where the policy put it (the kernel moved it, a move failed, it was
    /// demoted to keep the fast tier in its budget); [`Policy::adopt`] follows when it is still
    /// mapped. The simulator never unmaps or moves a page behind a policy's back, so it never
    /// calls this (see [`crate::live`]).
    fn forget(&mut self, _page: PageId, _ctx: &mut Ctx) {}

    #[inline(always)]
    fn on_access(&mut self, _page: PageId, _addr: u64, _write: bool, _ctx: &mut Ctx) -> Served {
        Served::RESIDENT
    }

    /// A page that [`Policy::on_access`] will see a few accesses from now: a per-access
    /// policy with per-page state prefetches it here (see [`crate::prefetch`]), so that its
    /// cache miss overlaps the work in between. The page may not be placed yet, and may lie
    /// beyond the policy's arrays: never dereference, only prefetch.
    #[inline(always)]
    fn prefetch(&self, _page: PageId) {}

    /// The period of [`Policy::on_period`], if the policy is periodic.
    fn period(&self) -> Option<Period> {
        None
    }

    fn on_period(&mut self, _ctx: &mut Ctx) -> Result<()> {
        Ok(())
    }

    fn on_event(&mut self, _ev: &Event, _ctx: &mut Ctx) -> Result<()> {
        Ok(())
    }

    /// The record stream the run reads, made from the trace's. Called once for each reader of
    /// the run (main loop, page pre-pass, look-ahead), so that all read the same stream. A
    /// policy that models where the program's allocator puts its data rewrites addresses here
    /// (guided's arena layout, [`arena_layout`]); the default reads the trace as it is.
    fn records(&self, src: Box<dyn crate::trace::RecordSource>) -> Result<Box<dyn crate::trace::RecordSource>> {
        Ok(src)
    }

    /// Input files made for one trace (a predictions file), as (file, the digest of the trace
    /// it was made for): the engine refuses a run whose trace has another digest.
    fn made_for_trace(&self) -> Option<(&str, &str)> {
        None
    }

    /// Warnings about the policy's input files and this run (per-phase guidance made from
    /// another run, say), given the trace's digest and the run's extent; the engine adds
    /// them to the result's `warnings` and prints them on stderr.
    fn input_warnings(&self, _digest: Option<&str>, _ran: &RunExtent) -> Vec<String> {
        Vec::new()
    }

    /// Accounting conventions the timing model must follow for this policy.
    fn compat(&self) -> Compat {
        Compat::None
    }

    /// The policy's own statistics (its subtree of the statistics tree).
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// How many times the policy's periodic or epoch work ran (called once, at the end, and
    /// at period boundaries to charge the platform's `per_period_ns` for each activation).
    /// Override it when the work runs at a cadence other than every [`Policy::on_period`].
    fn activity(&self) -> Activity {
        Activity::Boundaries
    }
}

/// How far a run went, in each unit a policy's interval may be given in.
pub struct RunExtent {
    pub runtime_ns: f64,
    pub accesses: u64,
    /// Instruction count at the last access, when the trace has them and they were read.
    pub instructions: Option<u64>,
}

/// Declares [`Built`] and, for each variant, `From` its policy type: one list of the types.
macro_rules! built {
    ($($(#[$doc:meta])* $v:ident($t:ty)),* $(,)?) => {
        /// A policy the registry built, as its concrete type: the engine runs each variant
        /// through its generic loop (`engine::run_built`), so no policy names the engine (the
        /// layers of docs/architecture.md). A new policy type adds a line here and an arm
        /// there (the compiler finds a missing one).
        pub enum Built {
            $($(#[$doc])* $v($t)),*
        }

        $(impl From<$t> for Built {
            fn from(p: $t) -> Built {
                Built::$v(p)
            }
        })*
    };
}

built!(
    AllFast(basic::AllFast),
    AllSlow(basic::AllSlow),
    FirstTouch(basic::FirstTouch),
    Interleave(basic::Interleave),
    CacheMode(cache_mode::CacheMode),
    /// history, oracle, kleio, kleoniki
    Scheduler(page_scheduler::PageScheduler),
    Otf(otf::Otf),
    /// hma-epoch, fthp
    Epoch(epoch_os::EpochOs),
    MemPod(mempod::MemPod),
    GuidedStay(guided::Guided<guided::Stay>),
    GuidedOtf(guided::Guided<otf::Otf>),
    GuidedEpoch(guided::Guided<epoch_os::EpochOs>),
    DamonTiering(damon_tiering::DamonTiering),
    ClockDwf(clock_dwf::ClockDwf),
    Memos(memos::Memos),
    /// autonuma-tiering, tpp
    NumaTiering(os_tiering::NumaTiering),
    HyPlacer(hyplacer::HyPlacer),
    Nimble(nimble::Nimble),
);

/// A registered policy: its declaration and how to build it.
pub struct PolicyInfo {
    pub name: &'static str,
    /// One line for `tierkit policies`.
    pub summary: &'static str,
    /// The paper and section it follows.
    pub source: &'static str,
    /// How it runs on a real machine, if it can (`tierkit policies`, `tierkit run`).
    pub deploy: Deploy,
    pub params: &'static [ParamSpec],
    pub build: fn(&Params) -> Result<Built>,
}

impl PolicyInfo {
    /// Uses knowledge of the future (an oracle bound, not a realizable policy).
    pub fn future_knowledge(&self) -> bool {
        self.deploy == Deploy::FutureKnowledge
    }
}

/// How a policy can be deployed on a real machine (docs/policies.md, "Deploying a policy").
/// `tierkit run` runs the first three; the others say why it cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Deploy {
    /// A memory policy set when the program starts (`set_mempolicy`), by `tierkit run`.
    Memory,
    /// Linux's own tiering, set up by `tierkit run` (sysctls, DAMON schemes) and restored after.
    Kernel,
    /// A daemon of `tierkit run`: the simulator's decision code on what Linux exposes of the
    /// program (pagemap, soft-dirty bits, DAMON), moving pages with `move_pages`.
    Daemon,
    /// Allocation-site guidance applied by the preloaded allocator of `tierkit run --guidance`.
    Allocator,
    /// Needs hardware that Linux does not give user space (a memory controller that moves or
    /// counts pages itself): simulation only.
    Hardware { why: &'static str },
    /// Uses knowledge of the future: a bound to compare against, never deployable.
    FutureKnowledge,
    /// Could run from what Linux exposes, but tierkit has no live version of it yet.
    NotLive { why: &'static str },
}

impl Deploy {
    /// Whether `tierkit run` runs it.
    pub fn live(&self) -> bool {
        matches!(self, Deploy::Memory | Deploy::Kernel | Deploy::Daemon | Deploy::Allocator)
    }
}

/// Every registered policy. One line per policy.
pub static REGISTRY: &[&PolicyInfo] = &[
    &basic::ALL_FAST,
    &basic::ALL_SLOW,
    &basic::FIRST_TOUCH,
    &basic::INTERLEAVE,
    &page_scheduler::HISTORY,
    &page_scheduler::ORACLE,
    &learned::KLEIO,
    &learned::KLEONIKI,
    &cache_mode::CACHE_MODE,
    &otf::OTF,
    &otf::OTF_ADAPTIVE,
    &otf::OTF_REVERSE,
    &epoch_os::HMA_EPOCH,
    &epoch_os::FTHP,
    &mempod::MEMPOD,
    &guided::GUIDED,
    &damon_tiering::DAMON_TIERING,
    &clock_dwf::CLOCK_DWF,
    &memos::MEMOS,
    &os_tiering::AUTONUMA_TIERING,
    &os_tiering::TPP,
    &hyplacer::HYPLACER,
    &nimble::NIMBLE,
];

pub fn lookup(name: &str) -> Result<&'static PolicyInfo> {
    REGISTRY.iter().copied().find(|p| p.name == name).ok_or_else(|| {
        let names = || REGISTRY.iter().map(|p| p.name);
        Error::config(
            "--policy",
            format!("unknown policy '{name}'{}; known: {}", crate::error::did_you_mean(name, names()), names().collect::<Vec<_>>().join(", ")),
        )
    })
}

/// Parse a policy spec and build the policy.
pub fn build(spec: &PolicySpec) -> Result<(Built, Params)> {
    let (runnable, params, _) = build_scaled(spec, 1.0)?;
    Ok((runnable, params))
}

/// Parse a policy spec and build the policy with its times scaled by `k`
/// ([`Params::time_scaled`]). Returns the policy, the parameters as given (what replays the
/// run, with the scale) and the parameters it was built from. The parameters a guided policy
/// passes to its inner policy (`then.KEY=VALUE`) are scaled by the inner policy's
/// declarations.
pub fn build_scaled(spec: &PolicySpec, k: f64) -> Result<(Built, Params, Params)> {
    let info = lookup(&spec.name)?;
    let params = Params::parse(info.name, info.params, spec)?;
    let mut scaled = params.time_scaled(info.params, k);
    if k != 1.0 {
        if let Some(Value::Text(inner)) = params.values.get("then").filter(|_| info.params.iter().any(|d| d.name == "then")) {
            // an unknown inner policy or parameter is the guided policy's to report
            let inner_spec = PolicySpec { name: inner.clone(), args: params.then_args() };
            let parsed = lookup(inner).ok().and_then(|i| Params::parse(i.name, i.params, &inner_spec).ok().map(|p| (i, p)));
            if let Some((inner_info, ip)) = parsed {
                let is = ip.time_scaled(inner_info.params, k);
                for (key, v) in &is.values {
                    if ip.values.get(key) != Some(v) {
                        scaled.values.insert(format!("then.{key}"), Value::Text(v.to_string()));
                    }
                }
            }
        }
    }
    let runnable = (info.build)(&scaled)?;
    Ok((runnable, params, scaled))
}
