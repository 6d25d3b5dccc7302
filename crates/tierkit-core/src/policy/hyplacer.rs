//! `hyplacer`: HyPlacer's tiered page placement for DRAM + Intel Optane DC persistent memory
//! (DCPMM in App Direct mode), after seed 004 §4 (design §4.1-§4.3, control loop and page
//! selection §4.4, parameters §5.1).
//!
//! *Fill DRAM first* (004 §4.1, Observation 2): a new page goes to DRAM while DRAM has a free
//! frame (Linux's local allocation, 004's ADM default), else to DCPMM. A control loop then
//! keeps three properties (004 §4.2): DRAM keeps a free buffer, DCPMM's write throughput
//! stays nominal, and a full DRAM beside a write-loaded DCPMM is fixed by exchanging pages.
//!
//! Every `interval` (an activation) the control loop reads the per-tier bandwidth counters
//! (PCMon, [`BandwidthCounters`]) and DRAM's usage, and picks a mode with [`mode`] (004 §4.4,
//! Table 2):
//!
//! | DCPMM writes \ DRAM usage | below `dram_target` | target..=`dram_limit` | above the limit |
//! | --- | --- | --- | --- |
//! | above `write_threshold_mb_per_s` | PROMOTE_INT | SWITCH | SWITCH (+ demote to target) |
//! | at or below it | PROMOTE | nothing | DEMOTE (down to target) |
//!
//! Target and limit are a hysteresis band: promotions fill DRAM up to the target and never
//! beyond it; DEMOTE starts only above the limit and brings DRAM back down to the target.
//! Between them nothing moves when DCPMM is quiet, so the pages that first touch adds each
//! interval do not trigger a demotion of a few pages every activation.
//!
//! A promoting mode (PROMOTE, PROMOTE_INT, SWITCH) first clears the referenced/dirty bits of
//! every DCPMM-resident page (DCPMM_CLEAR, a page-table walk), then waits `delay`: the pages
//! the MMU marks in that window are intensive (write-intensive if dirty, else read-intensive),
//! the others cold ([`classify`]). The PageFind then walks DCPMM pages in virtual-address
//! order from where the previous DCPMM walk stopped, and selects write-intensive pages, then
//! read-intensive ones, then (PROMOTE only) cold ones; a walk that finds enough
//! write-intensive pages stops there, and the next resumes after it (004 §4.4: "PTEs that have
//! not been inspected for longer are prioritized"). Promotions never take DRAM past the
//! target. SWITCH exchanges each promoted page with a cold DRAM page (a swap: DRAM's usage is
//! unchanged, the free buffer preserved); if DRAM was above the limit it also demotes the
//! excess, as DEMOTE would.
//!
//! Demotion (DEMOTE, and SWITCH's victims) is CLOCK over DRAM pages (004 §4.2, §4.4): a hand
//! walks DRAM pages in virtual-address order from where it last stopped; a page whose
//! referenced bit is clear (not referenced since the hand last passed it and cleared it) is
//! cold and selected; a referenced page has its bits cleared and is passed over. The walk
//! stops once it has selected enough or has passed every page once. DEMOTE, which must free
//! frames, then takes passed pages if it lacks cold ones: read-dominated (not dirty) before
//! write-dominated (004 §4.2: CLOCK "modified to separate intensive pages into read- and
//! write-dominated"). SWITCH exchanges only with cold pages (Table 2).
//!
//! At most `max_pages` pages move per activation (a swap moves two).
//!
//! Time: activations fall on the engine's period boundaries (`interval`), before the first
//! access at or after each; the PageFind runs before the first access at or after the end of
//! the delay (or at the next boundary, if no access came). A boundary passed while a PageFind
//! waits, or with no access since the last activation (the clock jumped over it while the
//! program was stopped), activates nothing. The DCPMM write throughput is what PCM measures:
//! demand writes and the copies of pages moved into DCPMM in the interval.
//!
//! Migrated pages get a new PTE with both bits clear: Linux 5.8 (004 §5.1's kernel) makes the
//! PTE it installs after a migration old and clean (`mm/migrate.c`, `remove_migration_pte`;
//! the young and dirty bits are carried over only since Linux 6.1).
//!
//! Costs charged to the program (halting): every PTE a walk visits (`walk_ns_per_pte`; a
//! walk covers the process's whole address space, `walk_page_range`, whatever the tier of
//! the pages); a TLB flush (the platform's `tlb_shootdown_ns`) after each walk that cleared
//! bits. Reading the counters (`counter_read_ns`) is recorded but does not stop the program:
//! PCMon and Control are processes of their own (004 §4.3), and on 004's Cascade Lake
//! pcm-memory reads the memory controllers' uncore counters through PCI configuration space,
//! with no interrupt to the program's core (memos follows the same rule; docs/tracking.md,
//! "Bandwidth counters"). Moves are `move_pages` calls: with
//! `os_costs=batch` (default) one call per activation carries all of its moves, each page a
//! [`MoveBy::OsBatch`] (per-page cost and copy) and the call one kernel entry (the platform's
//! `fault_ns`) and one TLB shootdown; with `os_costs=page` every page pays fault + shootdown
//! ([`MoveBy::Os`]), as Linux 5.8 migration flushes per page (batched flushing of migrated
//! pages came with Linux 6.3's `migrate_pages_batch`).
//!
//! With more than two tiers, DRAM is tier 0 and DCPMM the slowest tier; pages in the tiers in
//! between are never moved (they still count in the walks' PTEs).
//!
//! One implementation, two drivers: the decisions (which mode, which pages) are
//! [`Decisions`], on a [`Memory`] and a copy of the referenced/dirty bits. The simulator's
//! [`HyPlacer`] sets the bits from its MMU emulation, times activations and PageFinds on the
//! engine's clock and charges the costs ([`Costs`]); the live daemon (`crate::live::decide`)
//! adds the bits it observes (DAMON, soft-dirty) to the same copy, times them on the wall
//! clock, estimates DCPMM's write throughput from soft-dirty pages, and charges nothing.

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo};
use crate::error::{Error, Result};
use crate::mechanics::{Charge, Memory, MoveBy, TierId};
use crate::pagemap::PageId;
use crate::tracking::bandwidth::BandwidthCounters;
use crate::tracking::refbits::{RefBits, ScanCost, DIRTY, REFERENCED};
use crate::units::Period;

/// The PageFind a control-loop activation requests (004 Table 2), or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    None,
    /// Demote cold DRAM pages (DRAM above its limit, DCPMM writes nominal).
    Demote,
    /// Promote DCPMM pages, intensive first, cold ones too (DRAM below target, writes nominal).
    Promote,
    /// Promote intensive DCPMM pages only (DRAM below target, DCPMM writes high).
    PromoteInt,
    /// Exchange intensive DCPMM pages with cold DRAM pages (DRAM at/above target, writes high).
    Switch,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Demote => "demote",
            Mode::Promote => "promote",
            Mode::PromoteInt => "promote_int",
            Mode::Switch => "switch",
        }
    }
    /// Whether the mode promotes (and so is preceded by DCPMM_CLEAR and the delay).
    pub fn promotes(self) -> bool {
        matches!(self, Mode::Promote | Mode::PromoteInt | Mode::Switch)
    }
}

/// The control loop's decision (004 §4.4). `usage`, `limit` and `target` are fractions of
/// DRAM's capacity; DCPMM's write throughput and its threshold are in MB/s. "Above the
/// threshold" is strictly above; DRAM "has space" below the target; DEMOTE starts strictly
/// above the limit.
pub fn mode(usage: f64, limit: f64, target: f64, write_mb_per_s: f64, threshold_mb_per_s: f64) -> Mode {
    if write_mb_per_s > threshold_mb_per_s {
        if usage >= target {
            Mode::Switch
        } else {
            Mode::PromoteInt
        }
    } else if usage < target {
        Mode::Promote
    } else if usage > limit {
        Mode::Demote
    } else {
        Mode::None
    }
}

/// A DCPMM page's class after a clear-and-delay window (004 §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    WriteIntensive,
    ReadIntensive,
    Cold,
}

/// The class of a page from its referenced/dirty bits read at the end of the window.
pub fn classify(bits: u8) -> Class {
    if bits & DIRTY != 0 {
        Class::WriteIntensive
    } else if bits & REFERENCED != 0 {
        Class::ReadIntensive
    } else {
        Class::Cold
    }
}

/// The smallest page count `n` with `n / capacity >= target`: DRAM "has space" (usage below
/// the target) exactly while it holds fewer pages than this.
pub fn target_pages(target: f64, capacity: u64) -> u64 {
    if capacity == 0 {
        return 0;
    }
    let cap = capacity as f64;
    let mut n = ((target * cap).ceil().max(0.0) as u64).min(capacity);
    while n < capacity && (n as f64) / cap < target {
        n += 1;
    }
    while n > 0 && ((n - 1) as f64) / cap >= target {
        n -= 1;
    }
    n
}

/// How `move_pages` costs are paid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsCosts {
    Batch,
    Page,
}

/// Where a new page goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// DRAM while it has a free frame, else DCPMM (004: Linux local allocation, ADM default).
    DramFirst,
    /// DCPMM (as Memos allocates, 004 §5.2); DRAM is then filled by promotion alone.
    Dcpmm,
}

/// Parameters, as values.
#[derive(Clone, Debug)]
pub struct Config {
    pub interval_ns: u64,
    pub delay_ns: u64,
    pub dram_target: f64,
    pub dram_limit: f64,
    pub write_threshold_mb_per_s: f64,
    pub max_pages: u64,
    pub walk_ns_per_pte: f64,
    pub counters_read_ns: f64,
    pub os_costs: OsCosts,
    pub placement: Placement,
}

#[derive(Clone, Debug, Default, Serialize)]
struct ModeStats {
    /// activations that chose this mode
    activations: u64,
    /// pages moved DCPMM -> DRAM / DRAM -> DCPMM (a switch counts in both)
    promoted: u64,
    demoted: u64,
    /// exchanges (switch only)
    switched: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
struct Classified {
    write_intensive: u64,
    read_intensive: u64,
    cold: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
struct DramWalk {
    /// DRAM pages the CLOCK hand found unreferenced since its last pass
    cold: u64,
    /// ... found referenced (and cleared), not dirty / dirty
    read: u64,
    written: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// period boundaries crossed
    boundaries: u64,
    /// boundaries with no access since the previous activation (the program did not run)
    idle: u64,
    /// boundaries passed while a PageFind still waited for its delay to end
    busy: u64,
    none: ModeStats,
    demote: ModeStats,
    promote: ModeStats,
    promote_int: ModeStats,
    switch: ModeStats,
    /// DCPMM_CLEAR walks
    clears: u64,
    /// promoting modes with no page in DCPMM (nothing to find: no clear, no walk)
    nothing_in_dcpmm: u64,
    /// DCPMM pages classified by the promoting walks (each time a walk passed them)
    classified: Classified,
    dram_walk: DramWalk,
    /// PTEs visited by all walks
    ptes_visited: u64,
    /// TLB flushes after clearing walks
    flushes: u64,
    /// `move_pages` batches (os_costs=batch)
    batches: u64,
    /// pages moved
    moved: u64,
}

/// One row of the time series: one activation.
#[derive(Clone, Copy, Debug)]
struct Row {
    time_ms: f64,
    mode: Mode,
    dram_usage: f64,
    dcpmm_write_mb_per_s: f64,
    moved: u64,
}

/// A promoting PageFind waiting for its delay to end.
#[derive(Clone, Copy, Debug)]
struct Pending {
    mode: Mode,
    row: usize,
    due_ns: f64,
}

/// What the decision code's walks and `move_pages` batches cost, and whether they are charged.
/// The simulator charges them to the program ([`Costs::charged`]); live, the kernel pays them
/// (`clear_refs`, `move_pages`) and nothing is charged ([`Costs::NONE`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    pub charge: bool,
    /// A page-table walk, per PTE visited, ns.
    pub per_pte_ns: f64,
    /// A TLB flush (after a clearing walk, and a batch's shootdown), ns.
    pub flush_ns: f64,
    /// A kernel entry (one per `move_pages` batch), ns.
    pub fault_ns: f64,
}

impl Costs {
    /// Nothing charged: the live daemon, whose walks and moves the kernel pays for.
    pub const NONE: Costs = Costs { charge: false, per_pte_ns: 0.0, flush_ns: 0.0, fault_ns: 0.0 };

    /// The simulator's charges: walks at `walk_ns_per_pte`, the platform's flush and fault.
    fn charged(cfg: &Config, ctx: &Ctx) -> Costs {
        let m = &ctx.platform.platform.migration;
        Costs { charge: true, per_pte_ns: cfg.walk_ns_per_pte, flush_ns: m.tlb_shootdown_ns, fault_ns: m.fault_ns }
    }
}

/// An activation's outcome ([`Decisions::activate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activation {
    pub mode: Mode,
    /// The time-series row of the activation (its `moved` is filled in later by the PageFind).
    pub row: usize,
    /// Some(ns the clearing walk cost) if DCPMM_CLEAR ran: the PageFind is due after the
    /// delay ([`Decisions::find`]).
    pub cleared_ns: Option<f64>,
}

/// HyPlacer's decision code (004 §4.4), shared by the simulator's driver ([`HyPlacer`], fed by
/// its MMU emulation through [`Decisions::access`]) and the live daemon
/// (`crate::live::decide`, fed by observations through [`Decisions::observe_bits`]). It
/// decides which pages move and which mode runs, on a [`Memory`] (the simulator's, or the
/// daemon's mirror of the observed placement) whose move log is what the drivers carry out;
/// it does not know what time it is, nor where the referenced/dirty bits come from.
pub struct Decisions {
    cfg: Config,
    bits: RefBits,
    /// every page, by virtual address: `(address, page)`
    order: Vec<(u64, PageId)>,
    /// pages placed since `order` was last merged, with their addresses
    fresh: Vec<(u64, PageId)>,
    /// where the next DRAM / DCPMM walk starts (a virtual address)
    hand: [u64; 2],
    stats: Stats,
    rows: Vec<Row>,
    // scratch
    cold: Vec<PageId>,
    read: Vec<PageId>,
    written: Vec<PageId>,
    w: Vec<PageId>,
    r: Vec<PageId>,
    c: Vec<PageId>,
}

/// The simulator's `hyplacer`: [`Decisions`] driven by the engine's accesses and periods.
pub struct HyPlacer {
    d: Decisions,
    bw: Option<BandwidthCounters>,
    pending: Option<Pending>,
    /// `now.accesses` at the last activation
    last_accesses: u64,
}

const DRAM: TierId = 0;

impl Decisions {
    pub fn new(cfg: Config) -> Decisions {
        Decisions {
            cfg,
            bits: RefBits::new(),
            order: Vec::new(),
            fresh: Vec::new(),
            hand: [0; 2],
            stats: Stats::default(),
            rows: Vec::new(),
            cold: Vec::new(),
            read: Vec::new(),
            written: Vec::new(),
            w: Vec::new(),
            r: Vec::new(),
            c: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// A page the decisions now cover, at virtual address `addr`.
    pub fn new_page(&mut self, page: PageId, addr: u64) {
        self.bits.grow(page as usize + 1);
        self.fresh.push((addr, page));
    }

    /// Pages that are gone (the live program unmapped them): no walk visits them again.
    pub fn forget(&mut self, gone: &[PageId]) {
        if gone.is_empty() {
            return;
        }
        let set: std::collections::HashSet<PageId> = gone.iter().copied().collect();
        self.order.retain(|e| !set.contains(&e.1));
        self.fresh.retain(|e| !set.contains(&e.1));
        for &p in gone {
            self.bits.clear(p);
        }
    }

    /// What the MMU does on an access (the simulator's emulation).
    #[inline(always)]
    pub fn access(&mut self, page: PageId, write: bool) {
        self.bits.access(page, write);
    }

    /// Bits seen by the live daemon for one window since its previous step: they add to the
    /// page's bits as the MMU's would (set since the decisions last cleared them).
    pub fn observe_bits(&mut self, page: PageId, referenced: bool, dirty: bool) {
        if referenced || dirty {
            self.bits.grow(page as usize + 1);
            // a written page was accessed: dirty sets both bits, as a store does
            self.bits.access(page, dirty);
        }
    }

    /// A page's bits (`REFERENCED | DIRTY`).
    pub fn bits(&self, page: PageId) -> u8 {
        self.bits.get(page)
    }

    /// Clear a page's bits (a live move that failed, say: the page starts afresh).
    pub fn clear_bits(&mut self, page: PageId) {
        self.bits.clear(page);
    }

    /// Bring the fresh pages into the address-ordered list.
    fn merge_fresh(&mut self) {
        if self.fresh.is_empty() {
            return;
        }
        let add: Vec<(u64, PageId)> = std::mem::take(&mut self.fresh);
        crate::tracking::merge_by_address(&mut self.order, add);
    }

    /// Charge a walk over `ptes` entries (and a TLB flush if it cleared bits), ns charged.
    fn charge_walk(&mut self, mem: &mut Memory, costs: &Costs, ptes: u64, cleared: bool) -> f64 {
        let cost = ScanCost { per_pte_ns: costs.per_pte_ns, flush_ns: costs.flush_ns };
        self.stats.ptes_visited += ptes;
        let mut ns = 0.0;
        if ptes > 0 && costs.charge {
            let w = cost.walk_ns(ptes, false);
            mem.charge(Charge { what: "page-table walk (hyplacer)", ns: w, halts: true, energy_j: 0.0 });
            ns += w;
        }
        if cleared {
            if costs.charge {
                mem.charge(Charge { what: "TLB flush after clearing walk (hyplacer)", ns: cost.flush_ns, halts: true, energy_j: 0.0 });
                ns += cost.flush_ns;
            }
            self.stats.flushes += 1;
        }
        ns
    }

    /// DCPMM_CLEAR: clear the bits of every DCPMM page (a walk over all PTEs, then a flush).
    fn dcpmm_clear(&mut self, mem: &mut Memory, costs: &Costs) -> f64 {
        self.merge_fresh();
        let slow = mem.tiers() as TierId - 1;
        for &(_, p) in &self.order {
            if mem.tier(p) == slow {
                self.bits.clear(p);
            }
        }
        self.stats.clears += 1;
        self.charge_walk(mem, costs, self.order.len() as u64, true)
    }

    /// Index in `order` where a walk starting at address `hand` begins.
    fn start(&self, hand: u64) -> usize {
        let s = self.order.partition_point(|&(a, _)| a < hand);
        if s == self.order.len() {
            0
        } else {
            s
        }
    }
    /// The CLOCK hand over DRAM pages, wanting `want` cold pages: fills `cold` (at most
    /// `want`), `read` and `written` (passed pages whose bits it cleared, in walk order).
    /// Returns the PTEs visited.
    fn clock_walk(&mut self, mem: &Memory, want: usize) -> (u64, bool) {
        self.cold.clear();
        self.read.clear();
        self.written.clear();
        let n = self.order.len();
        if want == 0 || n == 0 || mem.used(DRAM) == 0 {
            return (0, false);
        }
        let s = self.start(self.hand[0]);
        let mut visited = 0usize;
        let mut cleared = false;
        while visited < n {
            let (_, p) = self.order[(s + visited) % n];
            visited += 1;
            if mem.tier(p) != DRAM {
                continue;
            }
            let b = self.bits.get(p);
            if b & REFERENCED == 0 {
                self.cold.push(p);
                self.stats.dram_walk.cold += 1;
                if self.cold.len() == want {
                    break;
                }
            } else {
                self.bits.clear(p);
                cleared = true;
                if b & DIRTY != 0 {
                    self.written.push(p);
                    self.stats.dram_walk.written += 1;
                } else {
                    self.read.push(p);
                    self.stats.dram_walk.read += 1;
                }
            }
        }
        self.hand[0] = self.order[(s + visited) % n].0;
        (visited as u64, cleared)
    }

    /// The promoting PageFind over DCPMM pages, wanting `want` pages: fills `w`, `r` and (with
    /// `with_cold`) `c`; stops once `w` alone has `want`. Returns the PTEs visited.
    fn dcpmm_walk(&mut self, mem: &Memory, want: usize, with_cold: bool) -> u64 {
        self.w.clear();
        self.r.clear();
        self.c.clear();
        let n = self.order.len();
        if want == 0 || n == 0 {
            return 0;
        }
        let slow = mem.tiers() as TierId - 1;
        let s = self.start(self.hand[1]);
        let mut visited = 0usize;
        while visited < n {
            let (_, p) = self.order[(s + visited) % n];
            visited += 1;
            if mem.tier(p) != slow {
                continue;
            }
            match classify(self.bits.get(p)) {
                Class::WriteIntensive => {
                    self.stats.classified.write_intensive += 1;
                    self.w.push(p);
                    if self.w.len() == want {
                        break;
                    }
                }
                Class::ReadIntensive => {
                    self.stats.classified.read_intensive += 1;
                    if self.r.len() < want {
                        self.r.push(p);
                    }
                }
                Class::Cold => {
                    self.stats.classified.cold += 1;
                    if with_cold && self.c.len() < want {
                        self.c.push(p);
                    }
                }
            }
        }
        self.hand[1] = self.order[(s + visited) % n].0;
        visited as u64
    }

    fn by(&self) -> MoveBy {
        match self.cfg.os_costs {
            OsCosts::Batch => MoveBy::OsBatch,
            OsCosts::Page => MoveBy::Os,
        }
    }

    /// Open a `move_pages` batch (os_costs=batch): one kernel entry.
    fn batch_open(&mut self, mem: &mut Memory, costs: &Costs) {
        if self.cfg.os_costs == OsCosts::Batch && costs.charge {
            mem.charge(Charge { what: "OS entry (move_pages batch)", ns: costs.fault_ns, halts: true, energy_j: 0.0 });
        }
    }

    /// Close it: one TLB shootdown for the batch.
    fn batch_close(&mut self, mem: &mut Memory, costs: &Costs) {
        if self.cfg.os_costs == OsCosts::Batch {
            if costs.charge {
                mem.charge(Charge { what: "TLB shootdown (move_pages batch)", ns: costs.flush_ns, halts: true, energy_j: 0.0 });
            }
            self.stats.batches += 1;
        }
    }

    fn mode_stats(&mut self, m: Mode) -> &mut ModeStats {
        match m {
            Mode::None => &mut self.stats.none,
            Mode::Demote => &mut self.stats.demote,
            Mode::Promote => &mut self.stats.promote,
            Mode::PromoteInt => &mut self.stats.promote_int,
            Mode::Switch => &mut self.stats.switch,
        }
    }

    /// Demote up to `n` DRAM pages, CLOCK order: cold, then read-dominated, then written.
    /// Returns the pages moved. `skip` cold pages at the front are already used (by swaps).
    fn demote_from_walk(&mut self, mem: &mut Memory, n: usize, skip: usize) -> Result<u64> {
        let slow = mem.tiers() as TierId - 1;
        let by = self.by();
        let n = n.min(mem.free(slow) as usize);
        let victims: Vec<PageId> = self.cold[skip.min(self.cold.len())..].iter().chain(&self.read).chain(&self.written).copied().take(n).collect();
        for &v in &victims {
            mem.migrate_by(v, slow, by)?;
            self.bits.clear(v);
        }
        Ok(victims.len() as u64)
    }

    /// DEMOTE: CLOCK over DRAM, down to the target.
    fn demote(&mut self, mem: &mut Memory, costs: &Costs) -> Result<u64> {
        self.merge_fresh();
        let slow = mem.tiers() as TierId - 1;
        let tp = target_pages(self.cfg.dram_target, mem.capacity(DRAM));
        let n = mem.used(DRAM).saturating_sub(tp).min(self.cfg.max_pages).min(mem.free(slow)) as usize;
        let (ptes, cleared) = self.clock_walk(mem, n);
        self.charge_walk(mem, costs, ptes, cleared);
        let want = n.min(self.cold.len() + self.read.len() + self.written.len());
        if want == 0 {
            return Ok(0);
        }
        self.batch_open(mem, costs);
        let moved = self.demote_from_walk(mem, want, 0)?;
        self.batch_close(mem, costs);
        self.stats.demote.demoted += moved;
        Ok(moved)
    }

    /// A control-loop activation at `time_ns` (004 §4.4): the mode from DRAM's usage and
    /// DCPMM's write throughput, then DEMOTE's moves, or DCPMM_CLEAR for a promoting mode
    /// (whose PageFind, [`Decisions::find`], the driver runs once the delay has passed).
    pub fn activate(&mut self, mem: &mut Memory, costs: &Costs, time_ns: f64, write_mb: f64) -> Result<Activation> {
        let slow = mem.tiers() as TierId - 1;
        let cap = mem.capacity(DRAM);
        let usage = mem.used(DRAM) as f64 / cap.max(1) as f64;
        let m = mode(usage, self.cfg.dram_limit, self.cfg.dram_target, write_mb, self.cfg.write_threshold_mb_per_s);
        self.mode_stats(m).activations += 1;
        let row = self.rows.len();
        self.rows.push(Row { time_ms: time_ns / 1e6, mode: m, dram_usage: usage, dcpmm_write_mb_per_s: write_mb, moved: 0 });
        let mut cleared_ns = None;
        match m {
            Mode::None => {}
            Mode::Demote => {
                let moved = self.demote(mem, costs)?;
                self.stats.moved += moved;
                self.rows[row].moved = moved;
            }
            _ if mem.used(slow) == 0 => self.stats.nothing_in_dcpmm += 1,
            _ => cleared_ns = Some(self.dcpmm_clear(mem, costs)),
        }
        Ok(Activation { mode: m, row, cleared_ns })
    }

    /// The promoting PageFind of mode `mode` (activation row `row`), after DCPMM_CLEAR and
    /// the delay. Returns the pages moved.
    #[cold]
    #[inline(never)]
    pub fn find(&mut self, mem: &mut Memory, costs: &Costs, mode: Mode, row: usize) -> Result<u64> {
        self.merge_fresh();
        let slow = mem.tiers() as TierId - 1;
        let cap = mem.capacity(DRAM);
        let used = mem.used(DRAM);
        let tp = target_pages(self.cfg.dram_target, cap);
        let by = self.by();
        let mut moved = 0u64;
        match mode {
            Mode::Promote | Mode::PromoteInt => {
                let n = tp.saturating_sub(used).min(self.cfg.max_pages).min(mem.free(DRAM)) as usize;
                let ptes = self.dcpmm_walk(mem, n, mode == Mode::Promote);
                self.charge_walk(mem, costs, ptes, false);
                let sel: Vec<PageId> = self.w.iter().chain(&self.r).chain(&self.c).copied().take(n).collect();
                if !sel.is_empty() {
                    self.batch_open(mem, costs);
                    for &q in &sel {
                        mem.migrate_by(q, DRAM, by)?;
                        self.bits.clear(q);
                    }
                    self.batch_close(mem, costs);
                }
                moved = sel.len() as u64;
                self.mode_stats(mode).promoted += moved;
            }
            Mode::Switch => {
                // above the limit, the switch also restores the free buffer (down to target)
                let usage = used as f64 / cap.max(1) as f64;
                let excess = if usage > self.cfg.dram_limit { used.saturating_sub(tp) } else { 0 };
                let excess = excess.min(self.cfg.max_pages).min(mem.free(slow)) as usize;
                let pairs_max = ((self.cfg.max_pages as usize).saturating_sub(excess)) / 2;
                let ptes = self.dcpmm_walk(mem, pairs_max, false);
                self.charge_walk(mem, costs, ptes, false);
                let sel: Vec<PageId> = self.w.iter().chain(&self.r).copied().take(pairs_max).collect();
                let (ptes, cleared) = self.clock_walk(mem, sel.len() + excess);
                self.charge_walk(mem, costs, ptes, cleared);
                let pairs = sel.len().min(self.cold.len());
                let extra = excess.min(self.cold.len() - pairs + self.read.len() + self.written.len());
                if pairs + extra > 0 {
                    self.batch_open(mem, costs);
                    for (&up, &down) in sel.iter().zip(&self.cold).take(pairs) {
                        mem.swap_by(up, down, by)?;
                        self.bits.clear(up);
                        self.bits.clear(down);
                    }
                    let d = self.demote_from_walk(mem, extra, pairs)?;
                    self.batch_close(mem, costs);
                    let s = &mut self.stats.switch;
                    s.switched += pairs as u64;
                    s.promoted += pairs as u64;
                    s.demoted += pairs as u64 + d;
                    moved = 2 * pairs as u64 + d;
                }
            }
            Mode::None | Mode::Demote => unreachable!("not a promoting mode"),
        }
        self.stats.moved += moved;
        self.rows[row].moved = moved;
        Ok(moved)
    }

    /// The statistics and time series, as `simulate` reports them (the `hyplacer` subtree).
    pub fn report(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self.rows.iter().map(|r| json!([r.time_ms, r.mode.name(), r.dram_usage, r.dcpmm_write_mb_per_s, r.moved])).collect();
        json!({
            "name": "hyplacer",
            "interval_ns": self.cfg.interval_ns,
            "delay_ns": self.cfg.delay_ns,
            "dram_target": self.cfg.dram_target,
            "dram_limit": self.cfg.dram_limit,
            "write_threshold_mb_per_s": self.cfg.write_threshold_mb_per_s,
            "max_pages": self.cfg.max_pages,
            "walk_ns_per_pte": self.cfg.walk_ns_per_pte,
            "counter_read_ns": self.cfg.counters_read_ns,
            "os_costs": match self.cfg.os_costs { OsCosts::Batch => "batch", OsCosts::Page => "page" },
            "placement": match self.cfg.placement { Placement::DramFirst => "dram-first", Placement::Dcpmm => "dcpmm" },
            "stats": self.stats,
            "timeseries": {
                "columns": ["time_ms", "mode", "dram_usage", "dcpmm_write_mb_per_s", "moved"],
                "rows": rows,
            },
        })
    }

    /// Activations so far (rows of the time series).
    pub fn activations(&self) -> u64 {
        self.rows.len() as u64
    }

    /// Count a period boundary the driver passed (`busy`: while a PageFind waited; `idle`:
    /// with no access since the last activation).
    pub fn note_boundary(&mut self, busy: bool, idle: bool) {
        self.stats.boundaries += 1;
        self.stats.busy += busy as u64;
        self.stats.idle += idle as u64;
    }
}

impl HyPlacer {
    pub fn new(cfg: Config) -> HyPlacer {
        HyPlacer { d: Decisions::new(cfg), bw: None, pending: None, last_accesses: 0 }
    }

    fn run_find(&mut self, ctx: &mut Ctx, p: Pending) -> Result<()> {
        let costs = Costs::charged(&self.d.cfg, ctx);
        self.d.find(ctx.mem, &costs, p.mode, p.row)?;
        Ok(())
    }

    fn finish_pending(&mut self, ctx: &mut Ctx) -> Result<()> {
        if let Some(p) = self.pending {
            if ctx.now.ns >= p.due_ns {
                self.pending = None;
                self.run_find(ctx, p)?;
            }
        }
        Ok(())
    }
}

impl Policy for HyPlacer {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.bw = Some(BandwidthCounters::new(ctx.mem.tiers(), ctx.line_bytes));
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.d.new_page(page, ctx.page_addr(page));
        let slow = ctx.mem.tiers() as TierId - 1;
        let first = match self.d.cfg.placement {
            Placement::DramFirst => DRAM,
            Placement::Dcpmm => slow,
        };
        if ctx.mem.free(first) > 0 {
            first
        } else if ctx.mem.free(slow) > 0 {
            slow
        } else {
            ctx.mem.first_free_from(0).unwrap_or(first)
        }
    }

    fn adopt(&mut self, page: PageId, _tier: TierId, ctx: &mut Ctx) {
        self.d.new_page(page, ctx.page_addr(page));
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, write: bool, ctx: &mut Ctx) -> super::Served {
        // the engine serves this access from the page's tier as it was before this hook
        let tier = ctx.mem.tier(page);
        if let Some(p) = self.pending {
            if ctx.now.ns >= p.due_ns {
                // the delay has ended: the PageFind runs before this access
                self.pending = None;
                self.run_find(ctx, p).expect("hyplacer: the PageFind's moves fit the tiers");
            }
        }
        self.d.access(page, write);
        if let Some(bw) = self.bw.as_mut() {
            bw.access(tier, write);
        }
        super::Served::RESIDENT
    }

    /// One activation per control-loop run (a row of the time series); boundaries passed
    /// while a PageFind was pending or the program was stopped do not count.
    fn activity(&self) -> super::Activity {
        super::Activity::Ran { times: self.d.activations(), every: Period::Ns(self.d.cfg.interval_ns) }
    }

    fn period(&self) -> Option<Period> {
        Some(Period::Ns(self.d.cfg.interval_ns))
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        // a PageFind whose delay ended while no access came (the program was stopped)
        self.finish_pending(ctx)?;
        if self.pending.is_some() {
            self.d.note_boundary(true, false);
            return Ok(());
        }
        if ctx.now.accesses == self.last_accesses {
            // a boundary the clock passed while the program was stopped: nothing measured
            self.d.note_boundary(false, true);
            return Ok(());
        }
        self.d.note_boundary(false, false);
        self.last_accesses = ctx.now.accesses;

        let slow = ctx.mem.tiers() as TierId - 1;
        let sample = self.bw.as_mut().expect("init ran").sample(ctx.now.ns, ctx.mem);
        let write_mb = sample.write_mb_per_s(slow as usize);
        let read_ns = self.d.cfg.counters_read_ns;
        if read_ns > 0.0 {
            // not halting: PCMon and Control run beside the program (see the module docs)
            ctx.mem.charge(Charge { what: "bandwidth counter read (hyplacer)", ns: read_ns, halts: false, energy_j: 0.0 });
        }
        let costs = Costs::charged(&self.d.cfg, ctx);
        let a = self.d.activate(ctx.mem, &costs, ctx.now.ns, write_mb)?;
        if let Some(ns) = a.cleared_ns {
            let due_ns = ctx.now.ns + read_ns.max(0.0) + ns + self.d.cfg.delay_ns as f64;
            self.pending = Some(Pending { mode: a.mode, row: a.row, due_ns });
        }
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        self.d.report()
    }
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "interval",
        ty: ParamType::Period,
        unit: "simulated time (ns, us, ms, s)",
        default: "1s",
        source: "tierkit's choice: 004 §4.3-§4.4 activate the control loop on PCMon's periodic output without giving its period; pcm-memory's default refresh interval is 1 s",
        help: "time between control-loop activations (counters read, mode chosen)",
    },
    ParamSpec {
        name: "delay",
        ty: ParamType::Period,
        unit: "simulated time (ns, us, ms, s)",
        default: "50ms",
        source: "004 §5.1 (access bit clearance delay of 50 ms)",
        help: "window after DCPMM_CLEAR in which referenced DCPMM pages count as intensive; must be shorter than interval",
    },
    ParamSpec {
        name: "dram_target",
        ty: ParamType::Float { min: 1e-9, max: 1.0 },
        unit: "fraction of DRAM capacity",
        default: "0.95",
        source: "004 §5.1 (DRAM occupancy threshold of 95%)",
        help: "promotions fill DRAM up to it; DEMOTE brings DRAM back down to it; at or above it DRAM counts as full",
    },
    ParamSpec {
        name: "dram_limit",
        ty: ParamType::Float { min: 1e-9, max: 1.0 },
        unit: "fraction of DRAM capacity",
        default: "0.96",
        source: "tierkit's choice: 004 gives one threshold (95%); a band one point above it keeps first-touch growth from triggering a demotion every activation",
        help: "DEMOTE starts when DRAM usage is above it (>= dram_target)",
    },
    ParamSpec {
        name: "write_threshold_mb_per_s",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "MB/s of measured DCPMM write bandwidth (10^6 bytes per second)",
        default: "10",
        source: "004 §5.1 (DCPMM bandwidth threshold of 10 MB/s)",
        help: "DCPMM write throughput above which intensive pages are promoted (PROMOTE_INT) or switched (SWITCH); live (tierkit run), compared with an estimate from soft-dirty slow-tier pages (docs/real-linux.md)",
    },
    ParamSpec {
        name: "max_pages",
        ty: ParamType::Int { min: 1, max: u32::MAX as i64 },
        unit: "pages per activation",
        default: "131072",
        source: "004 §5.1 (at most 128K pages migrated at each activation)",
        help: "most pages moved per activation (an exchange moves two)",
    },
    ParamSpec {
        name: "walk_ns_per_pte",
        ty: ParamType::Float { min: 0.0, max: 1e6 },
        unit: "ns per PTE visited",
        default: "10",
        source: "tierkit's assumption (004 reports no walk cost): walk_page_range's per-PTE callback reads a PTE from a sequentially scanned page-table page and tests or clears two bits, a few tens of cycles at 004's 2.3 GHz",
        help: "time a page-table walk spends per PTE it visits (every page of the process, whatever its tier); ignored live (the kernel walks)",
    },
    ParamSpec {
        name: "counter_read_ns",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "ns per activation",
        default: "10000",
        source: "tierkit's assumption (004 reports no figure): Control opens, reads and parses PCMon's small output file, a few system calls; the same figure as memos' counter_read_ns",
        help: "time Control spends reading the bandwidth counters at each activation; recorded, not halting (Control and PCMon run beside the program, as for memos); ignored live",
    },
    ParamSpec {
        name: "os_costs",
        ty: ParamType::Choice { options: &["batch", "page"] },
        unit: "",
        default: "batch",
        source: "tierkit's choice: one move_pages call per activation (004 §4.4 migrates the selected page array at once), its kernel entry and TLB shootdown paid once; page: Linux 5.8's per-page flush",
        help: "batch: each activation's moves are one move_pages batch, charged one kernel entry (fault_ns) and one TLB shootdown, each page its per-page cost and copy; page: every page pays fault + shootdown; ignored live (nothing charged)",
    },
    ParamSpec {
        name: "placement",
        ty: ParamType::Choice { options: &["dram-first", "dcpmm"] },
        unit: "",
        default: "dram-first",
        source: "004 §4.1 (fill DRAM first; Linux local allocation, the ADM default of 004 §5.1); dcpmm: new pages in DCPMM, as Memos allocates (004 §5.2)",
        help: "where a new page goes: DRAM while it has a free frame (else DCPMM), or DCPMM; live, the kernel's first touch places pages (dcpmm is refused)",
    },
];

/// `hyplacer` from its parameters, as a value (the registry boxes the same).
pub fn hyplacer(p: &Params) -> Result<HyPlacer> {
    Ok(HyPlacer::new(config(p)?))
}

/// The parameters of `hyplacer` as values, checked (the simulator's policy and the live
/// daemon, `crate::live::decide`, are built from the same).
pub fn config(p: &Params) -> Result<Config> {
    let ns = |k: &str| p.time_ns(k);
    let cfg = Config {
        interval_ns: ns("interval")?,
        delay_ns: ns("delay")?,
        dram_target: p.float("dram_target"),
        dram_limit: p.float("dram_limit"),
        write_threshold_mb_per_s: p.float("write_threshold_mb_per_s"),
        max_pages: p.int("max_pages") as u64,
        walk_ns_per_pte: p.float("walk_ns_per_pte"),
        counters_read_ns: p.float("counter_read_ns"),
        os_costs: if p.text("os_costs") == "page" { OsCosts::Page } else { OsCosts::Batch },
        placement: if p.text("placement") == "dcpmm" { Placement::Dcpmm } else { Placement::DramFirst },
    };
    if cfg.delay_ns >= cfg.interval_ns {
        return Err(Error::config("hyplacer:delay", format!("{} ns is not shorter than the interval ({} ns)", cfg.delay_ns, cfg.interval_ns)));
    }
    if cfg.dram_limit < cfg.dram_target {
        return Err(Error::config("hyplacer:dram_limit", format!("{} is below dram_target ({})", cfg.dram_limit, cfg.dram_target)));
    }
    Ok(cfg)
}

pub static HYPLACER: PolicyInfo = PolicyInfo {
    name: "hyplacer",
    summary: "HyPlacer: fill DRAM first; every interval, from DRAM usage and DCPMM write bandwidth, promote pages found intensive by clear-then-delay of R/D bits, switch them with CLOCK-cold DRAM pages, or demote CLOCK-cold pages",
    source: "004 §4.1-§4.4 (HyPlacer), parameters 004 §5.1",
    deploy: super::Deploy::Daemon,
    params: PARAMS,
    build: |p: &Params| Ok(Built::from(hyplacer(p)?)),
};
