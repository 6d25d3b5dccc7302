//! `memos`: the tiered page placement of Memos as seed 004 §5.1 re-implemented it on
//! HyPlacer's mechanisms (referenced/dirty bits read by page-table walks, per-tier bandwidth
//! counters, `move_pages`). Memos: L. Liu, M. Xie and H. Yang, "Memos: Revisiting Hybrid
//! Memory Management in Modern Operating System", arXiv:1703.07725, 2017; journal version
//! L. Liu, S. Yang, L. Peng and X. Li, "Hierarchical Hybrid Memory Management in OS for
//! Tiered Memory Systems", IEEE TPDS 30(10), 2019 ([30] in 004). Table 1 of 004 files it
//! under "fill DRAM first + bandwidth balance"; 004 §3.3 explains why a balance must move
//! only read-dominated pages to the slow tier.
//!
//! # Rules
//!
//! * **Placement** (004 §5.2: Memos "allocates new pages in DCPMM"): a new page goes to the
//!   slowest tier with a free frame; to DRAM only when every slower tier is full.
//! * **Observation.** The MMU sets a page's referenced bit on any access and its dirty bit
//!   on a store ([`RefBits`]); the memory controllers count each tier's read and write bytes
//!   ([`BandwidthCounters`]: demand lines and migration copies).
//! * **Classification** (004 §5.1): a cycle of `period` is cut into `classifications`
//!   rounds; at the end of each round a walk over every mapped page reads and clears both
//!   bits. At the end of the cycle a page is *hot* if it was referenced in at least half of
//!   the rounds (rounded up; with 004's single round: referenced in the cycle), *write-hot*
//!   if it was also dirty in at least half of them, *read-hot* if hot and not write-hot,
//!   and *cold* otherwise. The half-the-rounds rule is tierkit's choice (004 gives the
//!   number of rounds, not how they combine).
//! * **NVM write avoidance first**: write-hot pages outside DRAM move to DRAM — into free
//!   frames, else each in exchange for a DRAM victim: cold DRAM pages first, then read-hot
//!   ones (a read-dominated page may live in the slow tier; a write-hot one should not).
//! * **Bandwidth balance** (004 §3.3), from the counters of the cycle just ended: each
//!   tier's utilization is its throughput over its peak for that read/write mix —
//!   `R/read_bw + W/write_bw` for a tier whose reads and writes share the device
//!   (`shared_bandwidth`), `max(R/read_bw, W/write_bw)` for one with separate queues.
//!   With `u_d` for DRAM and `u_s` for the slow tier (the last tier):
//!   - `u_d > u_s + balance_margin`: read-hot DRAM pages move to the slow tier (never a
//!     write-hot page: 004 §3.3 "select only read-dominated active pages");
//!   - `u_s > u_d + balance_margin`: read-hot slow pages move to DRAM (into free frames,
//!     else in exchange for cold DRAM pages; never displacing a hot one).
//!
//!   How many: each hot page is assumed to carry an equal share of its tier's utilization
//!   (`u / hot pages there`), and a read-dominated page costs `k = read_bw(DRAM) /
//!   read_bw(slow)` times more of the slow tier's time than of DRAM's; the count that
//!   equalizes the two utilizations, rounded up, is moved (tierkit's estimate: bits say
//!   which pages are hot, not how hot).
//!
//!   `balance=off` leaves this step out (NVM write avoidance only): the form `tierkit run`
//!   uses, since no per-tier bandwidth counter is readable there (pcm-memory needs the
//!   uncore counters, which a VM does not expose; docs/real-linux.md).
//! * **Rate limit**: at most `max_pages` pages moved per cycle, every page moved counted
//!   (an exchange moves two).
//! * Candidates are taken in page order starting after the last page moved in the previous
//!   cycle, wrapping around, as HyPlacer's SelMo resumes its walk where it stopped (004
//!   §4.4), so that a cap does not starve the pages at the end of the address space.
//!
//! # Costs
//!
//! * Each round's walk: `pte_scan_ns` per mapped page, then a TLB flush (the platform's
//!   `tlb_shootdown_ns`) because it cleared bits (halting: the walk runs in the kernel).
//!   A round in which the program made no access (the clock passed the boundary while the
//!   program was stopped) is skipped: the MMU set no bits, and a walk there would only add
//!   stopped time.
//! * Reading the bandwidth counters: `counter_read_ns` per cycle, recorded but not halting,
//!   the rule hyplacer follows too: PCM runs as its own process and Control reads the file
//!   it writes (004 §4.3); pcm-memory reads the memory controllers' uncore counters through
//!   PCI configuration space on 004's Cascade Lake, with no interrupt to the program's core.
//! * Moves by the OS as one batch per cycle ([`MoveBy::OsBatch`]: per-page cost and copy),
//!   with one kernel entry (the platform's `fault_ns`) and one TLB shootdown per cycle that
//!   moves pages (as `move_pages` over the cycle's list does; see `epoch_os`).
//!
//! Left out, as in 004 §5.1: Memos' bank and channel balancing, its alternative migration
//! engines and its TLB-miss profiler.

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::Result;
use crate::mechanics::{Charge, MoveBy, TierId, UNPLACED};
use crate::pagemap::PageId;
use crate::platform::Tier;
use crate::tracking::bandwidth::{BandwidthCounters, BandwidthSample};
use crate::tracking::refbits::{RefBits, ScanCost, DIRTY, REFERENCED};
use crate::units::Period;

/// Counters (`stats.policy.memos`).
#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// period boundaries, walks (rounds) done, and rounds skipped (no access since the last)
    boundaries: u64,
    walks: u64,
    skipped_rounds: u64,
    ptes_walked: u64,
    /// cycles closed (classified)
    cycles: u64,
    /// pages classified, summed over cycles
    write_hot: u64,
    read_hot: u64,
    cold: u64,
    /// write-hot pages brought into DRAM
    promoted_write_hot: u64,
    /// read-hot pages moved by the bandwidth balance, each way
    promoted_for_balance: u64,
    demoted_for_balance: u64,
    /// DRAM pages sent out in exchange for a page coming in (cold ones, read-hot ones)
    evicted_cold: u64,
    evicted_read_hot: u64,
    /// cycles whose moves were stopped by `max_pages`
    capped: u64,
    /// cycles whose moves were charged as one OS batch
    batches: u64,
}

/// One cycle of the time series.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    cycle: u64,
    time_ms: f64,
    migrations: u64,
    promoted: u64,
    hot_pages: u64,
    accesses: u64,
    fast_hits: u64,
    dram_util: f64,
    slow_util: f64,
    demoted_for_balance: u64,
}

const HOT: u8 = 1;
const WRITE: u8 = 2;

pub struct Memos {
    /// `balance=counters`: the bandwidth balance runs
    balance: bool,
    cycle: Period,
    rounds: u32,
    max_pages: u64,
    margin: f64,
    scan_pte_ns: f64,
    counter_read_ns: f64,
    flush_ns: f64,
    fault_ns: f64,
    bits: RefBits,
    bw: BandwidthCounters,
    /// rounds of the current cycle in which each page was referenced / dirty
    refs: Vec<u8>,
    dirt: Vec<u8>,
    round: u32,
    /// first page to consider in the next cycle
    cursor: usize,
    /// accesses since the last boundary, and in the current cycle (all, and DRAM's)
    since_boundary: u64,
    acc: u64,
    fast: u64,
    stats: Stats,
    rows: Vec<Row>,
    // scratch, kept between cycles
    write_slow: Vec<PageId>,
    read_slow: Vec<PageId>,
    read_dram: Vec<PageId>,
    cold_dram: Vec<PageId>,
}

/// What a cycle's moves may still do.
struct Batch {
    budget: u64,
    moved: u64,
    capped: bool,
    last: Option<PageId>,
}

impl Batch {
    fn take(&mut self, n: u64) -> bool {
        if self.budget < n {
            self.capped = true;
            return false;
        }
        self.budget -= n;
        self.moved += n;
        true
    }
}

impl Memos {
    pub fn new(cycle: Period, rounds: u32, max_pages: u64, margin: f64, scan_pte_ns: f64, counter_read_ns: f64) -> Memos {
        Memos {
            balance: true,
            cycle,
            rounds: rounds.max(1),
            max_pages,
            margin,
            scan_pte_ns,
            counter_read_ns,
            flush_ns: 0.0,
            fault_ns: 0.0,
            bits: RefBits::new(),
            bw: BandwidthCounters::new(2, 64),
            refs: Vec::new(),
            dirt: Vec::new(),
            round: 0,
            cursor: 0,
            since_boundary: 0,
            acc: 0,
            fast: 0,
            stats: Stats::default(),
            rows: Vec::new(),
            write_slow: Vec::new(),
            read_slow: Vec::new(),
            read_dram: Vec::new(),
            cold_dram: Vec::new(),
        }
    }

    /// Leave the bandwidth balance out (`balance=off`).
    pub fn without_balance(mut self) -> Memos {
        self.balance = false;
        self
    }

    /// The length of one classification round.
    fn round_period(&self) -> Period {
        let r = self.rounds as u64;
        match self.cycle {
            Period::Ns(n) => Period::Ns((n / r).max(1)),
            Period::Accesses(n) => Period::Accesses((n / r).max(1)),
            Period::Insn(n) => Period::Insn((n / r).max(1)),
        }
    }

    /// One walk over every mapped page: read and clear both bits.
    fn walk(&mut self, ctx: &mut Ctx) {
        let slots = ctx.mem.slots();
        if self.refs.len() < slots {
            self.refs.resize(slots, 0);
            self.dirt.resize(slots, 0);
        }
        let mut ptes = 0u64;
        for (p, &t) in ctx.mem.tier_of().iter().enumerate() {
            if t == UNPLACED {
                continue;
            }
            ptes += 1;
            let b = self.bits.test_and_clear(p as PageId);
            self.refs[p] += (b & REFERENCED != 0) as u8;
            self.dirt[p] += (b & DIRTY != 0) as u8;
        }
        self.stats.walks += 1;
        self.stats.ptes_walked += ptes;
        let cost = ScanCost { per_pte_ns: self.scan_pte_ns, flush_ns: self.flush_ns };
        ctx.mem.charge(Charge { what: "PTE walk (referenced/dirty bits)", ns: cost.walk_ns(ptes, true), halts: true, energy_j: 0.0 });
    }

    /// Close a cycle: classify, then move.
    fn close_cycle(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.cycles += 1;
        let sample = self.bw.sample(ctx.now.ns, ctx.mem);
        if self.balance && self.counter_read_ns > 0.0 {
            ctx.mem.charge(Charge { what: "bandwidth counter read", ns: self.counter_read_ns, halts: false, energy_j: 0.0 });
        }
        let tiers = &ctx.platform.platform.tiers;
        let last = tiers.len() - 1;
        let u_d = utilization(&sample, &tiers[0], 0);
        let u_s = utilization(&sample, &tiers[last], last);
        let k = tiers[0].read_bw_gb_per_s / tiers[last].read_bw_gb_per_s;

        // classify, in page order from the cursor
        let need = self.rounds.div_ceil(2) as u8;
        self.write_slow.clear();
        self.read_slow.clear();
        self.read_dram.clear();
        self.cold_dram.clear();
        let slots = ctx.mem.slots().min(self.refs.len());
        let start = if self.cursor < slots { self.cursor } else { 0 };
        let (mut hot_dram, mut hot_slow) = (0u64, 0u64);
        for p in (start..slots).chain(0..start) {
            let t = ctx.mem.tier(p as PageId);
            if t == UNPLACED {
                continue;
            }
            let class = if self.refs[p] >= need { HOT | if self.dirt[p] >= need { WRITE } else { 0 } } else { 0 };
            self.refs[p] = 0;
            self.dirt[p] = 0;
            let page = p as PageId;
            match (t == 0, class) {
                (true, 0) => self.cold_dram.push(page),
                (true, HOT) => {
                    self.read_dram.push(page);
                    hot_dram += 1;
                }
                (true, _) => hot_dram += 1,
                (false, 0) => {}
                (false, HOT) => {
                    self.read_slow.push(page);
                    hot_slow += 1;
                }
                (false, _) => {
                    self.write_slow.push(page);
                    hot_slow += 1;
                }
            }
            match class {
                0 => self.stats.cold += 1,
                HOT => self.stats.read_hot += 1,
                _ => self.stats.write_hot += 1,
            }
        }

        let mut row = Row {
            cycle: self.stats.cycles - 1,
            time_ms: ctx.now.ns / 1e6,
            hot_pages: hot_dram + hot_slow,
            accesses: self.acc,
            fast_hits: self.fast,
            dram_util: u_d,
            slow_util: u_s,
            ..Default::default()
        };
        let mut b = Batch { budget: self.max_pages, moved: 0, capped: false, last: None };
        let (mut cold_next, mut read_next) = (0usize, 0usize);

        // 1. NVM write avoidance: write-hot pages into DRAM
        for i in 0..self.write_slow.len() {
            let p = self.write_slow[i];
            if !self.bring_in(p, true, &mut cold_next, &mut read_next, &mut b, ctx)? {
                break;
            }
            self.stats.promoted_write_hot += 1;
            row.promoted += 1;
        }

        // 2. bandwidth balance, read-hot pages only
        if self.balance && u_d > u_s + self.margin && hot_dram > 0 {
            let share = u_d / hot_dram as f64;
            let n = ((u_d - u_s) / (share * (1.0 + k))).ceil() as usize;
            let mut done = 0;
            for i in 0..self.read_dram.len() {
                if done >= n {
                    break;
                }
                let p = self.read_dram[i];
                if ctx.mem.tier(p) != 0 {
                    continue; // already sent out in exchange for a write-hot page
                }
                let Some(to) = slowest_free(ctx) else { break };
                if !b.take(1) {
                    break;
                }
                ctx.mem.migrate_by(p, to, MoveBy::OsBatch)?;
                b.last = Some(p);
                done += 1;
            }
            self.stats.demoted_for_balance += done as u64;
            row.demoted_for_balance = done as u64;
        } else if self.balance && u_s > u_d + self.margin && hot_slow > 0 {
            let share = u_s / hot_slow as f64;
            let n = ((u_s - u_d) / (share * (1.0 + 1.0 / k))).ceil() as usize;
            let mut done = 0;
            for i in 0..self.read_slow.len() {
                if done >= n {
                    break;
                }
                let p = self.read_slow[i];
                if !self.bring_in(p, false, &mut cold_next, &mut read_next, &mut b, ctx)? {
                    break;
                }
                done += 1;
            }
            self.stats.promoted_for_balance += done as u64;
            row.promoted += done as u64;
        }

        if b.capped {
            self.stats.capped += 1;
        }
        if let Some(p) = b.last {
            self.cursor = p as usize + 1;
        }
        if b.moved > 0 {
            // the batch's kernel entry and its one TLB shootdown, after the last page
            let m = &ctx.platform.platform.migration;
            ctx.mem.charge(Charge { what: "OS entry (memos batch)", ns: self.fault_ns, halts: true, energy_j: 0.0 });
            ctx.mem.charge(Charge { what: "TLB shootdown (memos batch)", ns: m.tlb_shootdown_ns, halts: true, energy_j: 0.0 });
            self.stats.batches += 1;
        }
        row.migrations = b.moved;
        self.rows.push(row);
        self.acc = 0;
        self.fast = 0;
        Ok(())
    }

    /// Bring `p` into DRAM: into a free frame, else in exchange for a cold DRAM page, else
    /// (`may_evict_read_hot`) a read-hot one. False when it cannot (no victim, or the cap).
    fn bring_in(&mut self, p: PageId, may_evict_read_hot: bool, cold_next: &mut usize, read_next: &mut usize, b: &mut Batch, ctx: &mut Ctx) -> Result<bool> {
        if ctx.mem.free(0) > 0 {
            if !b.take(1) {
                return Ok(false);
            }
            ctx.mem.migrate_by(p, 0, MoveBy::OsBatch)?;
            b.last = Some(p);
            return Ok(true);
        }
        let victim = loop {
            if let Some(&v) = self.cold_dram.get(*cold_next) {
                *cold_next += 1;
                if ctx.mem.tier(v) == 0 {
                    break Some((v, true));
                }
            } else if may_evict_read_hot {
                match self.read_dram.get(*read_next) {
                    Some(&v) => {
                        *read_next += 1;
                        if ctx.mem.tier(v) == 0 {
                            break Some((v, false));
                        }
                    }
                    None => break None,
                }
            } else {
                break None;
            }
        };
        let Some((v, cold)) = victim else { return Ok(false) };
        if !b.take(2) {
            return Ok(false);
        }
        ctx.mem.swap_by(p, v, MoveBy::OsBatch)?;
        b.last = Some(p);
        if cold {
            self.stats.evicted_cold += 1;
        } else {
            self.stats.evicted_read_hot += 1;
        }
        Ok(true)
    }

    fn timeseries(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let ratio = if r.accesses > 0 { r.fast_hits as f64 / r.accesses as f64 } else { 0.0 };
                json!([r.cycle, r.time_ms, r.migrations, r.promoted, r.hot_pages, r.accesses, ratio, r.dram_util, r.slow_util, r.demoted_for_balance])
            })
            .collect();
        json!({
            "columns": ["cycle", "time_ms", "migrations", "promoted", "hot_pages", "accesses", "fast_hit_ratio", "dram_util", "slow_util", "demoted_for_balance"],
            "rows": rows,
        })
    }
}

/// A tier's utilization over a sample: its throughput over its peak for the sample's mix.
pub fn utilization(s: &BandwidthSample, tier: &Tier, t: usize) -> f64 {
    if s.interval_ns <= 0.0 {
        return 0.0;
    }
    // bytes over (GB/s × ns) = fraction of the interval the tier was busy
    let r = s.read_bytes[t] as f64 / (tier.read_bw_gb_per_s * s.interval_ns);
    let w = s.write_bytes[t] as f64 / (tier.write_bw_gb_per_s * s.interval_ns);
    if tier.shared_bandwidth {
        r + w
    } else {
        r.max(w)
    }
}

/// The slowest tier below DRAM with a free frame.
fn slowest_free(ctx: &Ctx) -> Option<TierId> {
    (1..ctx.mem.tiers()).rev().find(|&t| ctx.mem.free(t as TierId) > 0).map(|t| t as TierId)
}

impl Policy for Memos {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let m = &ctx.platform.platform.migration;
        self.flush_ns = m.tlb_shootdown_ns;
        self.fault_ns = m.fault_ns;
        self.bw = BandwidthCounters::new(ctx.mem.tiers(), ctx.line_bytes);
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.bits.grow(page as usize + 1);
        slowest_free(ctx).unwrap_or(0)
    }

    fn adopt(&mut self, page: PageId, _tier: TierId, _ctx: &mut Ctx) {
        self.bits.grow(page as usize + 1);
    }

    fn forget(&mut self, page: PageId, _ctx: &mut Ctx) {
        let p = page as usize;
        self.bits.grow(p + 1);
        self.bits.test_and_clear(page);
        if p < self.refs.len() {
            self.refs[p] = 0;
            self.dirt[p] = 0;
        }
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        self.bits.access(page, write);
        let t = ctx.mem.tier(page);
        self.bw.access(t, write);
        self.since_boundary += 1;
        self.acc += 1;
        self.fast += (t == 0) as u64;
        Served::RESIDENT
    }

    /// One activation per closed cycle (classification and moves); the walks between are
    /// its rounds.
    fn activity(&self) -> super::Activity {
        super::Activity::Ran { times: self.stats.cycles, every: self.cycle }
    }

    fn period(&self) -> Option<Period> {
        Some(self.round_period())
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.boundaries += 1;
        if self.since_boundary == 0 {
            self.stats.skipped_rounds += 1;
            return Ok(());
        }
        self.since_boundary = 0;
        self.walk(ctx);
        self.round += 1;
        if self.round < self.rounds {
            return Ok(());
        }
        self.round = 0;
        self.close_cycle(ctx)
    }

    fn report(&self) -> serde_json::Value {
        json!({
            "name": "memos",
            "period": self.cycle.describe(),
            "classifications": self.rounds,
            "max_pages": self.max_pages,
            "balance": if self.balance { "counters" } else { "off" },
            "balance_margin": self.margin,
            "pte_scan_ns": self.scan_pte_ns,
            "counter_read_ns": self.counter_read_ns,
            "memos": self.stats,
            "timeseries": self.timeseries(),
        })
    }
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "period",
        ty: ParamType::Period,
        unit: "simulated time (or accesses, or N-insn)",
        default: "40s",
        source: "Memos' original period, 40 s (004 §5.1); 004 ran it at 4 s (period=4s)",
        help: "length of a cycle: pages are classified over it and moved at its end",
    },
    ParamSpec {
        name: "classifications",
        ty: ParamType::Int { min: 1, max: 255 },
        unit: "walks per cycle",
        default: "1",
        source: "004 §5.1 (one classification per period, to fit 4 s); Memos' own count is not stated in 004",
        help: "rounds per cycle; each ends with a walk that reads and clears the referenced/dirty bits; a page is hot when referenced in at least half of them",
    },
    ParamSpec {
        name: "max_pages",
        ty: ParamType::Int { min: 1, max: u32::MAX as i64 },
        unit: "pages moved per cycle",
        default: "10000",
        source: "Memos' original limit, 10,000 pages per cycle (004 §5.1), kept with its original 40 s period; 004 ran 100,000 with 4 s (max_pages=100000)",
        help: "most pages moved in one cycle, each page moved counted (an exchange moves two)",
    },
    ParamSpec {
        name: "balance",
        ty: ParamType::Choice { options: &["counters", "off"] },
        unit: "",
        default: "counters",
        source: "counters: 004 §3.3, §5.1 (per-tier throughput from the memory controllers, pcm-memory); off: no bandwidth balance, the form `tierkit run` uses where no counter is readable",
        help: "the bandwidth balance of read-hot pages, from per-tier bandwidth counters, or off (NVM write avoidance only)",
    },
    ParamSpec {
        name: "balance_margin",
        ty: ParamType::Float { min: 0.0, max: 1.0 },
        unit: "utilization (fraction of peak)",
        default: "0.1",
        source: "tierkit's choice: a dead band of 10% of peak keeps measurement noise from moving pages back and forth",
        help: "the bandwidth balance acts only when one tier's utilization exceeds the other's by more than this",
    },
    ParamSpec {
        name: "pte_scan_ns",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "ns per mapped page",
        default: "10",
        source: "tierkit's choice: reading and clearing one PTE in a sequential walk; a 64-byte line holds 8 PTEs, about an eighth of a DRAM access (≈100 ns on dram-dcpmm) each, plus the callback",
        help: "cost of each page-table entry a classification walk visits (the TLB flush after it is the platform's tlb_shootdown_ns)",
    },
    ParamSpec {
        name: "counter_read_ns",
        ty: ParamType::Float { min: 0.0, max: 1e12 },
        unit: "ns per cycle",
        default: "10000",
        source: "tierkit's choice: one read of the throughput file PCM writes (004 §4.3): open, read and parse a small file, a few system calls; the same figure as hyplacer's counter_read_ns; it runs beside the program",
        help: "cost of reading the per-tier bandwidth counters once per cycle (does not stop the program)",
    },
];

/// `memos` from its parameters, as a value (the registry boxes the same).
pub fn memos(p: &Params) -> Memos {
    let m = Memos::new(
        p.period("period"),
        p.int("classifications") as u32,
        p.int("max_pages") as u64,
        p.float("balance_margin"),
        p.float("pte_scan_ns"),
        p.float("counter_read_ns"),
    );
    match p.text("balance") {
        "off" => m.without_balance(),
        _ => m,
    }
}

pub static MEMOS: PolicyInfo = PolicyInfo {
    name: "memos",
    summary: "Memos as 004 ran it: new pages in the slow tier; each cycle, pages classified from referenced/dirty bits; write-hot pages to DRAM, then read-hot pages balanced between the tiers by their bandwidth utilization",
    source: "seed 004 §3.3, §5.1 ([30]: Liu et al., 'Hierarchical Hybrid Memory Management in OS for Tiered Memory Systems', IEEE TPDS 2019; Memos, arXiv:1703.07725)",
    deploy: super::Deploy::Daemon,
    params: PARAMS,
    build: |p: &Params| Ok(Built::from(memos(p))),
};
