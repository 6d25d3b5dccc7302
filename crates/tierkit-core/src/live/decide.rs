//! Daemon policies for `tierkit run`: which of the simulator's policies can decide on live
//! observations, and how they are built.
//!
//! Each daemon policy runs the simulator's own decision code on a mirror of the program's
//! placement ([`Mirror`]): a [`Memory`] whose fast tier holds the budget, kept equal to what
//! the observations say, whose move log is the list of moves a step asks for. What differs
//! from the simulator is only where the inputs come from and who pays:
//!
//! * `hyplacer` ([`LiveHyPlacer`]): [`hyplacer::Decisions`], the code the simulator's
//!   `hyplacer` runs. Referenced bits come from DAMON, dirty bits from soft-dirty; each
//!   observation's bits add to the decision code's copy of the bits, which its walks clear as
//!   the simulator's MMU emulation has them cleared. DCPMM's write throughput, which no
//!   counter gives live, is estimated from soft-dirty pages (see [`LiveHyPlacer`]). The walks
//!   and flushes are the kernel's (`clear_refs`, `move_pages`): nothing is charged.
//! * every other daemon policy ([`LivePeriodic`], one driver for all): the simulator's
//!   policy value itself, driven through the [`Policy`] hooks the engine calls
//!   (`adopt`/`forget` as the mirror changes, `on_access` once per page accessed in the
//!   window, `on_period` at each boundary of the policy's period), with DAMON's access
//!   counts as the period's per-page counts: `history` (003 §3.1), `nimble` (its LRU lists'
//!   referenced bits), `clock-dwf` with `detect=interval` (dirty bits instead of
//!   write-protection faults) and `memos` with `balance=off` (no bandwidth counters live).
//!   A policy qualifies when its per-access hook keeps only what the MMU's bits and a
//!   per-window count keep; `live_shared_decisions.rs` checks each one.
//!
//! Protocol common to all (see [`super`]): every step returns `clear_bits: true`, so each
//! observation covers exactly the time since the previous step (soft-dirty cleared, a new
//! DAMON window) and the windows are disjoint and contiguous. Activations / periods fall on
//! a fixed grid of the policy's interval from the program's start (`t_ns = 0`), as the
//! simulator's period boundaries do; `next_in_ns` counts from the observation's `t_ns`.
//!
//! The budget: the mirror's fast tier holds `fast_budget_pages`, and [`Memory`] refuses a move
//! into a full tier, so no decision takes the fast tier past it. Pages observed on the fast
//! tier beyond the budget (the program's own first touches, or the kernel's moves) are
//! demoted first, at the head of the step's moves: the least accessed (DAMON count, then not
//! referenced before referenced, clean before dirty), and among equals the highest address.
//! Within a swap the demotion comes before the promotion, so that the Linux side, carrying
//! the moves out in order, never has the fast tier past the budget.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::json;

use super::{LiveDecider, LiveMove, MoveResult, Observation, Step};
use crate::error::{Error, Result};
use crate::mechanics::{Memory, Op, TierId, UNPLACED};
use crate::pagemap::{PageId, PageMap};
use crate::platform::{Platform, Resolved};
use crate::policy::clock_dwf::clock_dwf;
use crate::policy::hyplacer::{self, Costs, Decisions, Mode, Placement};
use crate::policy::memos::memos;
use crate::policy::nimble::nimble;
use crate::policy::page_scheduler::{PageScheduler, Source};
use crate::policy::{lookup, Ctx, Deploy, Now, Params, Policy, PolicySpec, REGISTRY};
use crate::tracking::Tracking;
use crate::units::Period;

/// The policies that can run as a daemon, with the simulator's decision code: those the
/// registry says deploy as one ([`Deploy::Daemon`]).
pub fn live_policies() -> Vec<&'static str> {
    REGISTRY.iter().filter(|p| p.deploy == Deploy::Daemon).map(|p| p.name).collect()
}

/// `hyplacer`'s live write threshold when the spec leaves it at its default (004 §5.1: 10 MB/s
/// of DCPMM write bandwidth, from the memory controller's counters). Live, the estimate is the
/// slow tier's soft-dirty pages per second, times 4 KiB: a write set, not a byte count. In the
/// paced testbed VM a program writing a 16 MiB region at random on the slow node peaked at 9.2
/// MB/s (`make experiments-live`), so at the paper's figure SWITCH would never run there
/// (docs/real-linux.md, "Daemon policies"); 1 MB/s is a written set of 256 pages per second.
pub const HYPLACER_LIVE_WRITE_THRESHOLD_MB_PER_S: f64 = 1.0;

/// `history`'s live period when the spec leaves `period` at its default (1000 accesses, which
/// a daemon cannot count): one DAMON aggregation window at DAMON's default (100 ms).
pub const HISTORY_LIVE_PERIOD_NS: u64 = 100_000_000;

/// The slow tier's capacity in the mirror: the slow node is the daemon's to fill, not to
/// budget (the kernel refuses a move that does not fit, and the move is counted as failed).
const SLOW_CAPACITY_PAGES: u64 = u64::MAX / 4;

/// Build a daemon policy from its spec, for a fast tier of at most `fast_budget_pages` pages
/// of `page_bytes` bytes.
pub fn build_decider(spec: &PolicySpec, fast_budget_pages: u64, page_bytes: u64) -> Result<Box<dyn LiveDecider>> {
    let info = lookup(&spec.name)?; // an unknown name gets the registry's error
    if info.deploy != Deploy::Daemon {
        return Err(Error::config("--policy", format!("'{}' cannot run as a daemon policy (daemon policies: {})", spec.name, live_policies().join(", "))));
    }
    if page_bytes == 0 || !page_bytes.is_power_of_two() {
        return Err(Error::config("page size", format!("{page_bytes} bytes is not a power of two")));
    }
    if fast_budget_pages > SLOW_CAPACITY_PAGES {
        return Err(Error::config("--fast-capacity", format!("{fast_budget_pages} pages is beyond any machine")));
    }
    let (budget, page) = (fast_budget_pages, page_bytes);
    match info.name {
        "hyplacer" => {
            // the write threshold, unless given, for what the live estimate sees
            let (spec, notes) = live_default(
                spec,
                "write_threshold_mb_per_s",
                &HYPLACER_LIVE_WRITE_THRESHOLD_MB_PER_S.to_string(),
                "its write estimate counts each slow-tier page written in a window once, 4 KiB, whatever the program wrote to it (soft-dirty bits), not the bytes a bandwidth counter would (004 \u{a7}5.1's 10 MB/s)",
            );
            Ok(Box::new(LiveHyPlacer::new(&Params::parse(info.name, info.params, &spec)?, budget, page, notes)?))
        }
        "history" => {
            let p = Params::parse(info.name, info.params, spec)?;
            if p.text("compat") != "none" {
                return Err(Error::config("history:compat", format!("compat={} reproduces a simulator, not a daemon; use compat=none live", p.text("compat"))));
            }
            // the default period (1000 accesses) cannot be counted by a daemon: one DAMON window
            let period = match p.period("period") {
                Period::Accesses(_) if !given(spec, "period") => Period::Ns(HISTORY_LIVE_PERIOD_NS),
                other => other,
            };
            let sched = PageScheduler::new(Source::History, period, p.int("bins") as u32, false);
            Ok(Box::new(LivePeriodic::new("history", "period", sched, budget, page, Vec::new())?))
        }
        "nimble" => Ok(Box::new(LivePeriodic::new("nimble", "period", nimble(&Params::parse(info.name, info.params, spec)?), budget, page, Vec::new())?)),
        "clock-dwf" => {
            let (spec, notes) = live_form(
                spec,
                "detect",
                "interval",
                "fault",
                "a daemon takes no write-protection fault; it reads the slow pages' soft-dirty bits every interval",
            )?;
            Ok(Box::new(LivePeriodic::new("clock-dwf", "interval", clock_dwf(&Params::parse(info.name, info.params, &spec)?), budget, page, notes)?))
        }
        "memos" => {
            let (spec, notes) = live_form(
                spec,
                "balance",
                "off",
                "counters",
                "no per-tier bandwidth counter is readable live (a VM exposes no uncore counters), so no bandwidth balance",
            )?;
            Ok(Box::new(LivePeriodic::new("memos", "period", memos(&Params::parse(info.name, info.params, &spec)?), budget, page, notes)?))
        }
        other => Err(Error::Invariant(format!("policy '{other}' is registered as a daemon policy but has no live decider"))),
    }
}

fn given(spec: &PolicySpec, key: &str) -> bool {
    spec.args.iter().any(|(k, _)| k == key)
}

/// The form of a policy a daemon can run: `key=live` (said in a note) unless given; the
/// simulator-only value `sim_only` refused with `why`.
fn live_form(spec: &PolicySpec, key: &str, live: &str, sim_only: &str, why: &str) -> Result<(PolicySpec, Vec<String>)> {
    if spec.args.iter().any(|(k, v)| k == key && v == sim_only) {
        return Err(Error::config(format!("{}:{key}", spec.name), format!("{key}={sim_only} is simulation only: {why}; use {key}={live}")));
    }
    Ok(live_default(spec, key, live, &format!("{why}; first touches go where the kernel puts them")))
}

/// `spec` with `key=live` when it does not give `key`, and the note that says so and `why`.
fn live_default(spec: &PolicySpec, key: &str, live: &str, why: &str) -> (PolicySpec, Vec<String>) {
    if given(spec, key) {
        return (spec.clone(), Vec::new());
    }
    let mut s = spec.clone();
    s.args.push((key.to_string(), live.to_string()));
    (s, vec![format!("{} runs with {key}={live} live: {why}", spec.name)])
}

/// The next point of the grid of `every` ns strictly after `t_ns`.
fn next_grid(t_ns: u64, every: u64) -> u64 {
    (t_ns / every + 1) * every
}

#[derive(Clone, Debug, Default, Serialize)]
struct MirrorStats {
    /// observations taken
    observations: u64,
    /// pages seen for the first time (or again, after they were gone)
    pages_new: u64,
    /// pages that disappeared between two observations (unmapped)
    pages_gone: u64,
    /// pages observed on another tier than the mirror had them (moved by the kernel, or a
    /// move reported done that did not hold)
    relocated: u64,
    /// pages observed on the fast tier beyond the budget, demoted first
    over_budget_demoted: u64,
    /// moves asked for / reported done / failed (by errno; -1: not tried by the Linux side)
    moves_requested: u64,
    moves_done: u64,
    moves_failed: BTreeMap<i32, u64>,
}

/// The observed placement of the program, as a [`Memory`] whose fast tier holds the budget.
struct Mirror {
    pm: PageMap,
    mem: Memory,
    page_bytes: u64,
    budget: u64,
    /// observation number at which each page was last seen
    seen: Vec<u64>,
    /// pages the decision code knows (given to it as new, not yet gone); a page can be known
    /// and out of the mirror, after a failed move the mirror could not undo
    known: Vec<bool>,
    /// the moves of the last step, for [`Mirror::moved`]
    last_moves: Vec<LiveMove>,
    /// pages [`Mirror::moved`] put back where they were (their move failed)
    reverted: Vec<PageId>,
    /// time of the latest observation, ns
    last_t_ns: u64,
    stats: MirrorStats,
}

/// What [`Mirror::sync`] found.
struct Synced {
    /// pages new to the mirror, `(address, page)`, in address order
    new: Vec<(u64, PageId)>,
    gone: Vec<PageId>,
    /// demotions of pages over the budget, in the order they are to be carried out
    excess: Vec<LiveMove>,
    /// each observed page's id, in the observation's order
    ids: Vec<PageId>,
    /// known pages the mirror put on another tier than the decision code had them on (the
    /// kernel moved them, or they were demoted for the budget), in the observation's order
    shifted: Vec<PageId>,
}

impl Mirror {
    fn new(budget: u64, page_bytes: u64) -> Mirror {
        Mirror {
            pm: PageMap::new(page_bytes),
            mem: Memory::new(&[budget, SLOW_CAPACITY_PAGES], page_bytes),
            page_bytes,
            budget,
            seen: Vec::new(),
            known: Vec::new(),
            last_moves: Vec::new(),
            reverted: Vec::new(),
            last_t_ns: 0,
            stats: MirrorStats::default(),
        }
    }

    /// Take the time of a new observation: observations come in time order.
    fn advance(&mut self, t_ns: u64) -> Result<u64> {
        if t_ns < self.last_t_ns {
            return Err(Error::Invariant(format!("observation at {} ns, before the previous one ({} ns)", t_ns, self.last_t_ns)));
        }
        self.last_t_ns = t_ns;
        Ok(t_ns)
    }

    fn check(&self, obs: &Observation) -> Result<()> {
        let mut last: Option<u64> = None;
        for p in &obs.pages {
            if p.addr % self.page_bytes != 0 {
                return Err(Error::Invariant(format!("observation: page address {:#x} is not {}-byte aligned", p.addr, self.page_bytes)));
            }
            if p.tier > 1 {
                return Err(Error::Invariant(format!("observation: page {:#x} on tier {} (0 = fast, 1 = slow)", p.addr, p.tier)));
            }
            if last.is_some_and(|l| l >= p.addr) {
                return Err(Error::Invariant(format!("observation: page {:#x} out of address order or twice", p.addr)));
            }
            last = Some(p.addr);
        }
        Ok(())
    }

    /// Make the mirror what `obs` says, and pick the pages over the budget.
    fn sync(&mut self, obs: &Observation) -> Result<Synced> {
        self.check(obs)?;
        self.stats.observations += 1;
        let stamp = self.stats.observations;
        let mut ids = Vec::with_capacity(obs.pages.len());
        let mut to_place: Vec<usize> = Vec::new();
        let mut new = Vec::new();
        let mut shift = vec![false; obs.pages.len()];
        for (i, p) in obs.pages.iter().enumerate() {
            let id = self.pm.id(p.addr);
            let n = self.pm.len();
            self.mem.grow(n);
            if self.seen.len() < n {
                self.seen.resize(n.max(self.seen.len() * 2), 0);
                self.known.resize(self.seen.len(), false);
            }
            self.seen[id as usize] = stamp;
            ids.push(id);
            let t = self.mem.tier(id);
            if t == UNPLACED {
                if !self.known[id as usize] {
                    self.known[id as usize] = true;
                    new.push((p.addr, id));
                } else {
                    shift[i] = true; // left out of the mirror after a failed move
                }
                to_place.push(i);
            } else if t != p.tier {
                self.mem.unplace(id)?;
                self.stats.relocated += 1;
                to_place.push(i);
                shift[i] = true;
            }
        }
        let mut gone = Vec::new();
        for id in 0..self.pm.len() as PageId {
            if self.known[id as usize] && self.seen[id as usize] != stamp {
                if self.mem.tier(id) != UNPLACED {
                    self.mem.unplace(id)?;
                }
                self.known[id as usize] = false;
                gone.push(id);
            }
        }
        self.stats.pages_new += new.len() as u64;
        self.stats.pages_gone += gone.len() as u64;

        let mut over = vec![false; obs.pages.len()];
        let mut excess = Vec::new();
        for i in super::over_budget(&obs.pages, self.budget) {
            over[i] = true;
            let id = ids[i];
            if self.mem.tier(id) == 0 {
                self.mem.unplace(id)?;
                to_place.push(i);
                shift[i] = true;
            }
            excess.push(LiveMove { addr: obs.pages[i].addr, from: 0, to: 1 });
        }
        self.stats.over_budget_demoted += excess.len() as u64;
        for i in to_place {
            let t = if over[i] { 1 } else { obs.pages[i].tier };
            self.mem.place(ids[i], t)?;
        }
        let shifted = (0..obs.pages.len()).filter(|&i| shift[i]).map(|i| ids[i]).collect();
        Ok(Synced { new, gone, excess, ids, shifted })
    }

    /// The moves the decision code made since the last call, as the Linux side is to carry
    /// them out: in order, but within a swap the demotion first.
    fn take_moves(&mut self) -> Vec<LiveMove> {
        let ops: Vec<Op> = std::mem::take(&mut self.mem.ops);
        let mut out = Vec::new();
        let mut i = 0;
        while i < ops.len() {
            if let Op::Move(a) = ops[i] {
                let mv = |m: &crate::mechanics::MigrationOp| LiveMove { addr: self.pm.page_addr(m.page), from: m.from, to: m.to };
                if a.swap {
                    if let Some(Op::Move(b)) = ops.get(i + 1) {
                        let (first, second) = if a.to > a.from { (a, *b) } else { (*b, a) };
                        out.push(mv(&first));
                        out.push(mv(&second));
                        i += 2;
                        continue;
                    }
                }
                out.push(mv(&a));
            }
            i += 1;
        }
        out
    }

    /// Record the outcome of the last step's moves: a page whose move failed goes back to
    /// where it was (the next observation confirms or corrects it). Returns the pages that
    /// moved to the slow tier.
    fn moved(&mut self, results: &[MoveResult]) -> u64 {
        let mut into_slow = 0;
        let mut failed: Vec<(PageId, TierId)> = Vec::new();
        // where each failed move came from: the last move of that page to that tier (looked up
        // once per step, not once per failure: a step cut at its time bound fails thousands)
        let mut from_of: rustc_hash::FxHashMap<(u64, TierId), TierId> = rustc_hash::FxHashMap::default();
        if results.iter().any(|r| r.errno != 0) {
            from_of.extend(self.last_moves.iter().map(|m| ((m.addr, m.to), m.from)));
        }
        for r in results {
            if r.errno == 0 {
                self.stats.moves_done += 1;
                into_slow += (r.to == 1) as u64;
                continue;
            }
            *self.stats.moves_failed.entry(r.errno).or_default() += 1;
            let from = from_of.get(&(r.addr, r.to)).copied();
            if let (Some(id), Some(from)) = (self.pm.get(r.addr), from) {
                failed.push((id, from));
            }
        }
        // promotions back first: they free the fast frames failed demotions return to
        failed.sort_by_key(|&(_, from)| std::cmp::Reverse(from));
        for (id, from) in failed {
            if self.mem.tier(id) != UNPLACED && self.mem.tier(id) != from {
                let _ = self.mem.unplace(id);
                // no frame for it (the Linux side went past the budget): the page is left out
                // of the mirror until the next observation, which applies the budget rule
                let _ = self.mem.place(id, from);
                self.reverted.push(id);
            }
        }
        into_slow
    }

    fn finish_step(&mut self, moves: &[LiveMove]) {
        self.stats.moves_requested += moves.len() as u64;
        self.last_moves = moves.to_vec();
    }
}

#[derive(Clone, Debug, Default, Serialize)]
struct HyStats {
    /// steps (observations decided on)
    steps: u64,
    /// PageFinds run (promoting modes)
    page_finds: u64,
    /// DCPMM write throughput estimates: last one, and the largest, MB/s
    last_write_estimate_mb_per_s: f64,
    max_write_estimate_mb_per_s: f64,
}

/// `hyplacer` as a daemon: the simulator's [`Decisions`] on live observations.
///
/// Steps (`t` = the observation's `t_ns`; activations on the grid of `interval` from 0):
/// * a step whose PageFind is due (`t >= activation + delay`) runs it on the bits of the
///   delay window, and its moves are the step's;
/// * a step at or past the next grid point, with no PageFind waiting, activates the control
///   loop: mode from DRAM usage (the mirror's fast pages / the budget) and the DCPMM write
///   estimate; DEMOTE's moves now, or DCPMM_CLEAR for a promoting mode, whose PageFind is
///   then due `delay` later (`next_in_ns = delay`); a grid point passed while a PageFind
///   waits is skipped, as the simulator skips it (`busy`);
/// * otherwise `next_in_ns` is the time to the next grid point (`interval - delay` after an
///   on-time PageFind, `interval` after a non-promoting activation).
///
/// Every step returns `clear_bits: true`: each observation covers the time since the last
/// step, and its bits add to the decision code's copy, which only the decision code clears
/// (DCPMM_CLEAR, the CLOCK hand, a move), as the MMU's bits in the simulator.
///
/// DCPMM write throughput: no counter exists live (no PCM or uncore counter in a VM; pcm
/// needs MSR access). It is estimated, at each activation, as the bytes of the slow-tier
/// pages found soft-dirty in each observation since the previous activation (a page counts
/// once per observation window), plus the pages moved into the slow tier since then (PCM
/// counts their copies too), times the page size, over the time since the previous
/// activation. Biases: a page written many times in a window counts once (under-estimate,
/// for pages rewritten in place), and a page with one written line counts whole (over-
/// estimate, up to page size / 64 for sparse stores); writes the CPU caches absorb count
/// although the media never sees them. The threshold compares against this estimate.
pub struct LiveHyPlacer {
    d: Decisions,
    m: Mirror,
    interval_ns: u64,
    delay_ns: u64,
    next_act_ns: u64,
    /// a PageFind waiting: mode, its activation's row, due time
    pending: Option<(Mode, usize, u64)>,
    /// the write estimate's bytes and start
    est_bytes: u64,
    est_since_ns: u64,
    stats: HyStats,
    /// what the live form does differently from simulate's default
    notes: Vec<String>,
}

impl LiveHyPlacer {
    fn new(p: &Params, budget: u64, page_bytes: u64, notes: Vec<String>) -> Result<LiveHyPlacer> {
        let cfg = hyplacer::config(p)?;
        if cfg.placement == Placement::Dcpmm {
            return Err(Error::config(
                "hyplacer:placement",
                "live, new pages go where the kernel's first touch puts them (dram-first while the fast node has room); placement=dcpmm is simulation only",
            ));
        }
        Ok(LiveHyPlacer {
            interval_ns: cfg.interval_ns,
            delay_ns: cfg.delay_ns,
            next_act_ns: cfg.interval_ns,
            d: Decisions::new(cfg),
            m: Mirror::new(budget, page_bytes),
            pending: None,
            est_bytes: 0,
            est_since_ns: 0,
            stats: HyStats::default(),
            notes,
        })
    }
}

impl LiveDecider for LiveHyPlacer {
    fn name(&self) -> &str {
        "hyplacer"
    }

    fn step(&mut self, obs: &Observation) -> Result<Step> {
        let t = self.m.advance(obs.t_ns)?;
        self.stats.steps += 1;
        let s = self.m.sync(obs)?;
        self.d.forget(&s.gone);
        for &(addr, id) in &s.new {
            self.d.new_page(id, addr);
        }
        let mut dirty_slow = 0u64;
        for (p, &id) in obs.pages.iter().zip(&s.ids) {
            self.d.observe_bits(id, p.referenced, p.dirty);
            dirty_slow += (p.tier == 1 && p.dirty) as u64;
        }
        self.est_bytes += dirty_slow * self.m.page_bytes;
        for mv in &s.excess {
            if let Some(id) = self.m.pm.get(mv.addr) {
                self.d.clear_bits(id); // moved: a new PTE, both bits clear (see hyplacer)
            }
        }
        let mut moves = s.excess;

        if let Some((mode, row, due)) = self.pending {
            if t >= due {
                self.pending = None;
                self.d.find(&mut self.m.mem, &Costs::NONE, mode, row)?;
                self.stats.page_finds += 1;
            }
        }
        if t >= self.next_act_ns {
            if self.pending.is_some() {
                self.d.note_boundary(true, false);
            } else {
                self.d.note_boundary(false, false);
                let span = t - self.est_since_ns;
                // bytes per ns = GB/s; MB/s = 1000 x that
                let write_mb = if span > 0 { self.est_bytes as f64 / span as f64 * 1e3 } else { 0.0 };
                self.est_bytes = 0;
                self.est_since_ns = t;
                self.stats.last_write_estimate_mb_per_s = write_mb;
                self.stats.max_write_estimate_mb_per_s = self.stats.max_write_estimate_mb_per_s.max(write_mb);
                let a = self.d.activate(&mut self.m.mem, &Costs::NONE, t as f64, write_mb)?;
                if a.cleared_ns.is_some() {
                    self.pending = Some((a.mode, a.row, t + self.delay_ns));
                }
            }
            self.next_act_ns = next_grid(t, self.interval_ns);
        }
        moves.extend(self.m.take_moves());
        self.m.finish_step(&moves);
        let next = match self.pending {
            Some((_, _, due)) => due,
            None => self.next_act_ns,
        };
        Ok(Step { moves, clear_bits: true, next_in_ns: (next - t).max(1) })
    }

    fn moved(&mut self, results: &[MoveResult]) {
        let into_slow = self.m.moved(results);
        // PCM counts the copies into DCPMM: so does the estimate
        self.est_bytes += into_slow * self.m.page_bytes;
    }

    fn report(&self) -> serde_json::Value {
        let mut r = self.d.report();
        r["live"] = json!({
            "budget_pages": self.m.budget,
            "fast_pages": self.m.mem.used(0),
            "slow_pages": self.m.mem.used(1),
            "steps": self.stats,
            "mirror": self.m.stats,
            "write_estimate": "soft-dirty slow-tier pages per window + pages moved into the slow tier, x page size, per second since the previous activation",
        });
        r
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

/// Any periodic policy as a daemon ([`LivePeriodic`]): history, nimble, clock-dwf
/// (detect=interval) and memos (balance=off) are all this one driver over their simulator code.
///
/// The policy is driven through the hooks the engine calls, in the engine's order, from each
/// observation:
/// * the mirror's placement first: a page gone from the observation is [`Policy::forget`]-ten;
///   a page the kernel moved, a move that failed, a page demoted to keep the fast tier in its
///   budget are forgotten and then [`Policy::adopt`]-ed where they are; a page seen for the
///   first time is adopted where the kernel put it (first-touch placement is the kernel's:
///   live, nothing chooses where a first touch lands);
/// * each page with an access in the window (`max(accesses, 1 if referenced, dirty or new)`)
///   is one access to [`Policy::on_access`], a store if it is dirty, in address order, and
///   its count goes to the period's tracking (DAMON cannot say which page of a window was
///   accessed last: the higher address counts as the more recent);
/// * at the first observation at or past a boundary of the grid of the policy's period,
///   [`Policy::on_period`], as the engine calls it at the boundary.
///
/// So the policy's decisions are the simulator's exactly when what its per-access hook keeps
/// is what the MMU's bits keep: a referenced bit, a dirty bit, a per-period count (the
/// shared-decision tests check this for every daemon policy). Costs the policy charges go
/// nowhere: live, the kernel and the CPU pay them.
pub struct LivePeriodic<P: Policy> {
    name: &'static str,
    p: P,
    m: Mirror,
    track: Tracking,
    resolved: Resolved,
    period_ns: u64,
    next_ns: u64,
    /// pages given an access so far (the engine's access index)
    accesses: u64,
    period: u64,
    started: bool,
    steps: u64,
    notes: Vec<String>,
}

/// A live period: a time. `key` names the parameter for the error.
fn live_period(name: &str, key: &str, period: Option<Period>) -> Result<u64> {
    match period {
        Some(Period::Ns(n)) if n > 0 => Ok(n),
        Some(other) => Err(Error::config(
            format!("{name}:{key}"),
            format!("live, a period is a time (e.g. {key}=100ms); {} cannot be counted by a daemon", other.describe()),
        )),
        None => Err(Error::Invariant(format!("policy '{name}' is registered as a daemon policy but has no period"))),
    }
}

impl<P: Policy> LivePeriodic<P> {
    fn new(name: &'static str, key: &str, p: P, budget: u64, page_bytes: u64, notes: Vec<String>) -> Result<LivePeriodic<P>> {
        let period_ns = live_period(name, key, p.period())?;
        // no policy driven here reads a platform figure to decide; a context needs one (its
        // costs are charged to a mirror nobody reads)
        let platform = Platform::presets().into_iter().next().ok_or_else(|| Error::Invariant("no platform preset".into()))?;
        Ok(LivePeriodic {
            name,
            p,
            m: Mirror::new(budget, page_bytes),
            track: Tracking::new(true, false, true),
            resolved: Resolved { platform, capacity: Vec::new(), capacity_pages: vec![budget, SLOW_CAPACITY_PAGES], page_size: page_bytes, footprint_pages: 0 },
            period_ns,
            next_ns: period_ns,
            accesses: 0,
            period: 0,
            started: false,
            steps: 0,
            notes,
        })
    }

    fn now(&self, t_ns: u64) -> Now {
        Now { accesses: self.accesses, insn: 0, ns: t_ns as f64, hw_idle_ns: 0.0, period: self.period }
    }
}

/// The context the engine would give the policy, over the mirror.
fn mirror_ctx<'a>(m: &'a mut Mirror, track: &'a Tracking, resolved: &'a Resolved, now: Now) -> Ctx<'a> {
    Ctx {
        pages: m.pm.len(),
        mem: &mut m.mem,
        track,
        future: None,
        now,
        platform: resolved,
        line_bytes: 64,
        pagemap: &m.pm,
        first_write: false,
        time_scale: 1.0,
    }
}

impl<P: Policy> LiveDecider for LivePeriodic<P> {
    fn name(&self) -> &str {
        self.name
    }

    fn step(&mut self, obs: &Observation) -> Result<Step> {
        let t = self.m.advance(obs.t_ns)?;
        self.steps += 1;
        if !self.started {
            self.started = true;
            let now = self.now(t);
            self.p.init(&mut mirror_ctx(&mut self.m, &self.track, &self.resolved, now))?;
        }
        let sy = self.m.sync(obs)?;
        let n = self.m.pm.len();
        self.track.grow(n);
        let now = self.now(t);
        {
            let mut ctx = mirror_ctx(&mut self.m, &self.track, &self.resolved, now);
            for &id in &sy.gone {
                self.p.forget(id, &mut ctx);
            }
            for &id in &sy.shifted {
                self.p.forget(id, &mut ctx);
                let tier = ctx.mem.tier(id);
                if tier != UNPLACED {
                    self.p.adopt(id, tier, &mut ctx);
                }
            }
            for &(_, id) in &sy.new {
                let tier = ctx.mem.tier(id);
                if tier != UNPLACED {
                    self.p.adopt(id, tier, &mut ctx);
                }
            }
        }
        let new: std::collections::HashSet<PageId> = sy.new.iter().map(|e| e.1).collect();
        for (p, &id) in obs.pages.iter().zip(&sy.ids) {
            let seen = (p.referenced || p.dirty || new.contains(&id)) as u32;
            let count = p.accesses.max(seen);
            if count == 0 {
                continue;
            }
            self.track.record(id, p.dirty, self.accesses);
            let c = &mut self.track.count[id as usize];
            *c = c.saturating_add(count - 1);
            if P::PER_ACCESS {
                let now = self.now(t);
                self.p.on_access(id, p.addr, p.dirty, &mut mirror_ctx(&mut self.m, &self.track, &self.resolved, now));
            }
            self.accesses += 1;
        }
        let mut moves = sy.excess;
        if t >= self.next_ns {
            self.track.end_period();
            self.period += 1;
            let now = self.now(t);
            // the engine's boundary: the period's counts become prev_*, then the hook
            self.p.on_period(&mut mirror_ctx(&mut self.m, &self.track, &self.resolved, now))?;
            self.next_ns = next_grid(t, self.period_ns);
        }
        moves.extend(self.m.take_moves());
        self.m.finish_step(&moves);
        Ok(Step { moves, clear_bits: true, next_in_ns: (self.next_ns - t).max(1) })
    }

    fn moved(&mut self, results: &[MoveResult]) {
        self.m.moved(results);
        let back = std::mem::take(&mut self.m.reverted);
        let now = self.now(self.m.last_t_ns);
        let mut ctx = mirror_ctx(&mut self.m, &self.track, &self.resolved, now);
        for id in back {
            self.p.forget(id, &mut ctx);
            let tier = ctx.mem.tier(id);
            if tier != UNPLACED {
                self.p.adopt(id, tier, &mut ctx);
            }
        }
    }

    fn report(&self) -> serde_json::Value {
        let mut r = self.p.report();
        r["live"] = json!({
            "budget_pages": self.m.budget,
            "fast_pages": self.m.mem.used(0),
            "slow_pages": self.m.mem.used(1),
            "period_ns": self.period_ns,
            "steps": self.steps,
            "periods": self.period,
            "mirror": self.m.stats,
            "notes": self.notes,
        });
        r
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
