//! Live tiering: the simulator's decision code, fed by observations of a running program
//! instead of the models (`tierkit run`, docs/real-linux.md).
//!
//! The split of work: the Linux side (crate `tierkit-run`: DAMON, soft-dirty bits, pagemap,
//! `move_pages(2)`, the interval loop) observes the program and carries moves out; this
//! module decides. It never touches a process and compiles on every platform, so the same
//! decisions can be checked without a kernel: the simulator's driver and the live driver call
//! the same policy code (see [`decide`]).
//!
//! Protocol, per program run:
//! 1. [`build_decider`] once, with the policy spec and the fast tier's budget in pages;
//! 2. the Linux side observes (an [`Observation`]) and calls [`LiveDecider::step`];
//! 3. it carries out [`Step::moves`] in order with `move_pages(2)` (a move to the fast tier
//!    is never carried out if it would take the fast tier past the budget), reports each
//!    outcome with [`LiveDecider::moved`], clears the soft-dirty bits and starts a new DAMON
//!    window if [`Step::clear_bits`], and observes again [`Step::next_in_ns`] later;
//! 4. [`LiveDecider::report`] once at the end.
//!
//! Tiers: 0 is the fast node, 1 the slow node; pages on other nodes are not the daemon's.

pub mod decide;

pub use decide::{build_decider, live_policies};

use crate::error::Result;
use crate::mechanics::TierId;

/// One resident page of the program, as one observation saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageObs {
    /// Virtual address of the page's first byte (page aligned).
    pub addr: u64,
    /// Where it is now: 0 = fast node, 1 = slow node.
    pub tier: TierId,
    /// Accessed in the last DAMON aggregation window (its region's `nr_accesses` > 0).
    pub referenced: bool,
    /// Written since the soft-dirty bits were last cleared (bit 55 of `/proc/PID/pagemap`).
    pub dirty: bool,
    /// DAMON's access frequency for the page's region in the last window: the number of
    /// sampling intervals, of the window's, in which the region was found accessed.
    pub accesses: u32,
}

/// What the Linux side saw of the program at one time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// Time since the program started, ns.
    pub t_ns: u64,
    /// Time since the soft-dirty bits were last cleared (or since the start), ns.
    pub since_clear_ns: u64,
    /// Resident pages on the fast or slow node, sorted by address, no duplicates.
    pub pages: Vec<PageObs>,
}

/// A page move the decider asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveMove {
    pub addr: u64,
    pub from: TierId,
    pub to: TierId,
}

/// A decision: moves to carry out now, and when to look again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// In order; the Linux side carries them out in this order.
    pub moves: Vec<LiveMove>,
    /// Clear the soft-dirty bits (and start a new DAMON window) after the moves.
    pub clear_bits: bool,
    /// Observe again and call [`LiveDecider::step`] this much later, ns (> 0).
    pub next_in_ns: u64,
}

/// What `move_pages(2)` did with one requested move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveResult {
    pub addr: u64,
    pub to: TierId,
    /// 0 if the page moved, else the (positive) errno `move_pages` gave for it, or `-1` if
    /// the Linux side did not try it (it would have exceeded the budget).
    pub errno: i32,
}

/// A daemon policy: the decision code of one of the simulator's policies, behind the live
/// protocol above.
pub trait LiveDecider: Send {
    /// The policy's name, as `tierkit policies` lists it.
    fn name(&self) -> &str;
    /// Decide on one observation.
    fn step(&mut self, obs: &Observation) -> Result<Step>;
    /// The outcome of the last step's moves (a page whose move failed stayed where it was).
    fn moved(&mut self, results: &[MoveResult]);
    /// The policy's own statistics (as `simulate` reports them).
    fn report(&self) -> serde_json::Value;
    /// What the live form of the policy does differently from `simulate`'s default, said
    /// once when the run starts (and in a dry run).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The budget rule, shared by the Linux side (which demotes the program's own first-touch
/// excess before calling the decider) and the deciders' mirror: the fast-tier pages of
/// `pages` beyond `budget_pages`, in the order to demote them. Least accessed first (DAMON
/// frequency, then unreferenced before referenced, clean before dirty), the highest address
/// first among equals. Indices into `pages`.
pub fn over_budget(pages: &[PageObs], budget_pages: u64) -> Vec<usize> {
    let mut fast: Vec<usize> = (0..pages.len()).filter(|&i| pages[i].tier == 0).collect();
    let excess = (fast.len() as u64).saturating_sub(budget_pages) as usize;
    if excess == 0 {
        return Vec::new();
    }
    fast.sort_by_key(|&i| {
        let p = &pages[i];
        (p.accesses, p.referenced, p.dirty, std::cmp::Reverse(p.addr))
    });
    fast.truncate(excess);
    fast
}
