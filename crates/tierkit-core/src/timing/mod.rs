//! Layer 2 (models): how long the accesses and migrations of a run take. A timing model is
//! told every demand access (with the tier that served it), every extra line transfer, every
//! migration and every period, and at the end turns that into runtime. It knows nothing about
//! policies. The formulas are documented in `docs/models.md`.

pub mod detailed;
pub mod simple;

use crate::error::{Error, Result};
use crate::mechanics::{Charge, MigrationOp, TierId};
use crate::pagemap::PageId;
use serde::{Deserialize, Serialize};

/// Accounting conventions of another simulator that a policy can ask the timing model to
/// follow (`compat=` parameters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compat {
    #[default]
    None,
    /// The accounting of GTkernel/cori-sim (see `docs/models.md`).
    CoriSim,
}

pub use detailed::DetailedTiming;
pub use simple::SimpleTiming;

/// Which timing model a run uses (`--timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimingKind {
    Simple,
    Detailed,
}

impl TimingKind {
    pub fn parse(s: &str) -> Result<TimingKind> {
        match s.trim() {
            "simple" => Ok(TimingKind::Simple),
            "detailed" => Ok(TimingKind::Detailed),
            _ => Err(Error::config("--timing", format!("unknown timing model '{s}' (known: simple, detailed)"))),
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            TimingKind::Simple => "simple",
            TimingKind::Detailed => "detailed",
        }
    }
}

/// Per-tier traffic counted by the engine, handed to the timing model at the end.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TierCounters {
    /// Demand reads and writes served by this tier.
    pub reads: u64,
    pub writes: u64,
    /// Tag probes (cache-like policies): a read whose latency precedes the serving tier's.
    pub probes: u64,
    /// Extra line transfers (fills, writebacks) that add no latency.
    pub extra_reads: u64,
    pub extra_writes: u64,
    /// Bytes read from / written to the tier, by demand, extra traffic and migration.
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Everything the engine counted, for [`Timing::finish`].
#[derive(Clone, Debug, Default)]
pub struct RunCounters {
    pub accesses: u64,
    pub tiers: Vec<TierCounters>,
    pub migrations: u64,
    /// Activations of a periodic policy, each charged `per_period_ns` (one [`Timing::period`]
    /// call each; boundaries at which the policy did nothing are not counted).
    pub periods: u64,
    pub line_bytes: u64,
    pub page_bytes: u64,
    /// Instructions of the program (last instruction count seen), when the trace has them.
    pub instructions: Option<u64>,
}

/// What a timing model reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TimingReport {
    pub runtime_ns: f64,
    /// Time charged to migrations (fixed costs and copies), ns.
    pub migration_time_ns: f64,
    /// Instructions per cycle (detailed model, traces with instruction counts).
    pub ipc: Option<f64>,
    /// The model's own breakdown (its subtree of the statistics).
    pub detail: serde_json::Value,
}

/// One demand access, as the timing model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessEvent {
    pub page: PageId,
    /// The tier that serves it.
    pub tier: TierId,
    pub write: bool,
    /// A tier whose read (a tag probe) precedes it, or [`NO_TIER`](crate::mechanics::NO_TIER).
    pub probe: TierId,
    /// Latency the policy's own hardware adds to it (e.g. a remap-table lookup), ns.
    pub delay_ns: f64,
    /// Instruction count when it is issued.
    pub insn: u64,
}

pub trait Timing: Send {
    /// A demand access.
    fn access(&mut self, a: AccessEvent);
    /// A line moved to or from `tier` on the side of an access (no latency of its own).
    fn traffic(&mut self, tier: TierId, write: bool);
    /// A page migration carried out by the mechanics; its cost depends on who moves it
    /// ([`MoveBy`](crate::mechanics::MoveBy)).
    fn migration(&mut self, op: &MigrationOp);
    /// A cost a policy charged (address reconciliation...): time that stops the program, or
    /// runs alongside it.
    fn charge(&mut self, c: &Charge);
    /// Multi-core runs: a charge whose halting time stops core `core` (the owner of the page
    /// it was for), which need not be the active one. One core: [`Timing::charge`].
    fn charge_core(&mut self, _core: usize, c: &Charge) {
        self.charge(c)
    }
    /// One activation of a periodic policy: its scheduling work ran (charged `per_period_ns`).
    fn period(&mut self);
    /// Simulated time so far, ns (drives periods given in ns).
    fn now_ns(&self) -> f64;
    /// When the copies of the hardware-engine moves ([`MoveBy::Hw`](crate::mechanics::MoveBy))
    /// handed over so far are all done, ns (0 if there were none): a policy driving a
    /// migration engine that moves one page at a time waits for this.
    fn hw_idle_ns(&self) -> f64;
    /// Multi-core runs ([`TimingSetup::cores`] > 1): the core the following events are for.
    /// A migration or charge goes to the core whose access (or period boundary) caused it,
    /// but for a charge for pages ([`Timing::charge_core`]).
    fn set_core(&mut self, _core: usize) {}
    /// Per core, what it ran: only multi-core runs have more than one.
    fn core_reports(&self) -> Vec<CoreReport> {
        Vec::new()
    }
    fn finish(&mut self, counters: &RunCounters) -> TimingReport;
}

/// One core of a multi-core run, at its end.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CoreReport {
    /// When its last instruction retired, ns.
    pub runtime_ns: f64,
    pub instructions: u64,
    pub ipc: Option<f64>,
}

pub use crate::trace::clocks::ClockBoard;

/// How a run's policy and trace configure the timing model.
#[derive(Clone, Debug, Default)]
pub struct TimingSetup {
    /// Cores sharing the tiers (0 or 1: one), and the board their clocks are posted to.
    pub cores: usize,
    pub board: Option<std::sync::Arc<ClockBoard>>,
    pub compat: Compat,
    /// Period of the policy in accesses, if it is periodic in accesses (cori-sim's period
    /// count needs it).
    pub period_accesses: Option<u64>,
    /// The trace carries instruction counts.
    pub has_insn: bool,
    /// Bytes of one memory transfer (the trace's line size); 0 means 64.
    pub line_bytes: u64,
}
