//! `clock-dwf`: CLOCK with Dirty bits and Write Frequency, the *partitioned* policy of seed
//! 004 §2.3/§3.1 ([27] there): S. Lee, H. Bahn and S. H. Noh, "CLOCK-DWF: A
//! Write-History-Aware Page Replacement Algorithm for Hybrid PCM and DRAM Memory
//! Architectures", IEEE Trans. Computers 63(9), 2014. Written pages belong in DRAM, pages
//! only read belong in the slow (PCM/DCPMM) tier; a write to a slow page moves it to DRAM.
//!
//! # Rules
//!
//! * **First touch.** A page first written goes to DRAM, a page first read to the slow tier
//!   (tier 1 and below: the first tier below DRAM with a free frame); the engine tells
//!   [`Policy::place`] whether the first access is a store ([`Ctx::first_write`]). A write
//!   into a full DRAM first demotes the replacement's victim (below) to the slow tier, by the
//!   OS, with a TLB shootdown for the victim's changed mapping. When the slow tier is full, a
//!   read goes to DRAM (counted in the report).
//! * **Write to a slow page.** Slow-tier pages are mapped write-protected, so the first
//!   store to one traps (`wp_fault_ns`, default the platform's `fault_ns`, charged, halting)
//!   and the kernel moves the page to DRAM before the store completes ([`Served::by`] DRAM).
//!   The MMU then sets its dirty bit (the store lands in DRAM); its write frequency restarts
//!   at 0. Reads of slow pages change nothing (the paper's first observation: write history
//!   alone predicts future writes better than read and write history together).
//! * **Write to a DRAM page.** The MMU sets the page's dirty bit: O(1), nothing charged.
//! * **DRAM replacement** (only when a page must enter a full DRAM). A clock hand walks the
//!   DRAM pages in frame order. At each page:
//!   - dirty bit set: clear it, add 1 to the page's write frequency, reset its clean-pass
//!     count to 0, move on (the page was written since the hand last passed);
//!   - dirty bit clear, write frequency above `hot_threshold` and fewer than `expiration`
//!     clean passes since its last write: count one more clean pass and move on (a page with
//!     a write history keeps it for `expiration` sweeps before it fades);
//!   - otherwise the page is the victim: it goes to the slow tier (swapped with the page
//!     coming in when that page came from there, else moved to the first slow tier with room)
//!     and the incoming page takes its frame, just behind the hand.
//!
//!   A page that is only read in DRAM (a page placed there because the slow tier was full,
//!   or whose writes stopped) has a write frequency that never grows once its history
//!   expires, so it is the first victim the hand meets. The rule (dirty bit, frequency,
//!   expiration) is the paper's as described in its abstract and as two public
//!   re-implementations read it; the exact form of the decay (a clean-pass count reset by a
//!   write, rather than a decrement of the frequency) and both defaults are **tierkit's
//!   choice**: the paper's own values could not be confirmed.
//! * **Slow tier.** The paper runs plain CLOCK over PCM, with referenced bits, to choose
//!   pages that leave memory for storage. tierkit's tiers hold the whole footprint and
//!   nothing leaves the last tier, so that clock has no decision to make and is not
//!   simulated (no cost is charged for it either).
//!
//! # Costs
//!
//! * A write-protection fault on a slow page: `wp_fault_ns` (halting).
//! * The DRAM clock: `pte_scan_ns` per page the hand visits (reading and clearing one PTE's
//!   dirty bit), charged once per replacement.
//! * Moves: by the OS inside the fault ([`MoveBy::OsBatch`]: per-page cost and copy), with
//!   one TLB shootdown (the platform's `tlb_shootdown_ns`) per fault that changed an existing
//!   mapping — the promoted page's and the victim's; the same flush makes the cleared dirty
//!   bits visible to the MMU again. The fault itself is the batch's kernel entry, so no
//!   further entry is charged.
//!
//! # Detecting writes to slow pages: `detect`
//!
//! * `fault` (the paper's): the write-protection fault above, at the store.
//! * `interval`: what a user-space daemon can do without userfaultfd (`tierkit run`,
//!   docs/real-linux.md): no slow page is write-protected; every `interval` the slow pages'
//!   dirty bits are read (soft-dirty bits live, `pte_scan_ns` per slow page) and each slow
//!   page written since the last look is brought into DRAM as the fault would have done it,
//!   in address order, the clock choosing the victims; the moves are one OS batch (one kernel
//!   entry, the platform's `fault_ns`, and one TLB shootdown). First touches go where the
//!   kernel puts them (DRAM while it has a free frame, then the slow tier), since a daemon
//!   does not see whether a first touch is a load or a store; read-only pages in DRAM are the
//!   clock's first victims. The store that wrote a slow page completed there, so a page
//!   brought in starts clean, with no write history.
//!
//! All state is per page in flat arrays; the per-access hook is O(1) without allocation, and
//! the hand only runs when a victim is needed.

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::Result;
use crate::mechanics::{Charge, MoveBy, TierId};
use crate::pagemap::PageId;
use crate::units::Period;

/// Per-page state (4 bytes); meaningful while the page is in DRAM.
#[derive(Clone, Copy, Debug)]
struct Pg {
    /// Sweeps of the hand that found the dirty bit set since the page entered DRAM.
    freq: u16,
    /// Sweeps that found it clean since its last write.
    idle: u8,
    /// The MMU's dirty bit, as the hand last left it.
    dirty: bool,
}

const PG0: Pg = Pg { freq: 0, idle: 0, dirty: false };

/// Counters (`stats.policy.clock_dwf`).
#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// first touches placed in the slow tier / in DRAM because the slow tier was full
    placed_slow: u64,
    placed_dram_slow_full: u64,
    /// first touches by a store, placed in DRAM (into a free frame or a victim's)
    placed_dram_write: u64,
    /// detect=interval: first touches placed in a free DRAM frame (the kernel's first touch)
    placed_dram_free: u64,
    /// write-protection faults on slow pages, each promoting its page
    write_faults: u64,
    /// pages brought into DRAM by write faults
    promoted: u64,
    /// DRAM victims sent to the slow tier
    demoted: u64,
    /// replacements (hand runs), pages the hand visited, and why it passed pages by
    replacements: u64,
    hand_steps: u64,
    passed_dirty: u64,
    passed_history: u64,
    /// detect=interval: looks at the slow pages' dirty bits (those that found a written
    /// page), slow pages looked at, and written slow pages found
    interval_looks: u64,
    interval_batches: u64,
    interval_scanned: u64,
    interval_written: u64,
}

pub struct ClockDwf {
    /// detect=interval: the interval (`None`: write-protection faults)
    interval: Option<Period>,
    /// detect=interval: slow pages written since the last look
    written: Vec<bool>,
    pending: Vec<PageId>,
    /// detect=interval: the kernel entry of a batch (the platform's fault_ns)
    entry_ns: f64,
    hot_threshold: u32,
    expiration: u8,
    /// `< 0`: the platform's fault_ns (resolved in `init`)
    wp_fault_ns: f64,
    scan_pte_ns: f64,
    shootdown_ns: f64,
    pg: Vec<Pg>,
    /// The DRAM clock: pages in frame order.
    ring: Vec<PageId>,
    hand: usize,
    stats: Stats,
}

impl ClockDwf {
    pub fn new(hot_threshold: u32, expiration: u8, wp_fault_ns: f64, scan_pte_ns: f64) -> ClockDwf {
        ClockDwf {
            interval: None,
            written: Vec::new(),
            pending: Vec::new(),
            entry_ns: 0.0,
            hot_threshold,
            expiration,
            wp_fault_ns,
            scan_pte_ns,
            shootdown_ns: 0.0,
            pg: Vec::new(),
            ring: Vec::new(),
            hand: 0,
            stats: Stats::default(),
        }
    }

    /// Detect writes to slow pages by looking at their dirty bits every `every` instead of
    /// by write-protection faults (`detect=interval`).
    pub fn with_interval(mut self, every: Period) -> ClockDwf {
        self.interval = Some(every);
        self
    }

    #[inline]
    fn grow(&mut self, page: PageId) {
        let p = page as usize;
        if self.pg.len() <= p {
            let n = (p + 1).max(self.pg.len() * 2).max(1024);
            self.pg.resize(n, PG0);
            if self.interval.is_some() {
                self.written.resize(n, false);
            }
        }
    }

    /// A page entering DRAM into a free frame joins the ring at the end.
    fn join(&mut self, page: PageId) {
        self.pg[page as usize] = PG0;
        self.ring.push(page);
    }

    /// Run the hand until it finds a victim; returns the victim's slot. The ring is not
    /// empty (DRAM is full and holds at least one frame).
    fn find_victim(&mut self, ctx: &mut Ctx) -> usize {
        let n = self.ring.len();
        let mut steps = 0u64;
        let slot = loop {
            let s = self.hand;
            self.hand = if s + 1 == n { 0 } else { s + 1 };
            steps += 1;
            let st = &mut self.pg[self.ring[s] as usize];
            if st.dirty {
                st.dirty = false;
                st.freq = st.freq.saturating_add(1);
                st.idle = 0;
                self.stats.passed_dirty += 1;
            } else if st.freq as u32 > self.hot_threshold && st.idle < self.expiration {
                st.idle += 1;
                self.stats.passed_history += 1;
            } else {
                break s;
            }
        };
        self.stats.replacements += 1;
        self.stats.hand_steps += steps;
        if self.scan_pte_ns > 0.0 {
            ctx.mem.charge(Charge { what: "DRAM clock scan", ns: steps as f64 * self.scan_pte_ns, halts: true, energy_j: 0.0 });
        }
        slot
    }

    /// Bring `page` (not in DRAM) into DRAM, demoting the clock's victim when DRAM is full.
    fn bring_in(&mut self, page: PageId, ctx: &mut Ctx) -> Result<()> {
        if ctx.mem.free(0) > 0 {
            ctx.mem.migrate_by(page, 0, MoveBy::OsBatch)?;
            self.join(page);
        } else {
            let slot = self.find_victim(ctx);
            let victim = self.ring[slot];
            // the victim takes the incoming page's frame in its slow tier
            ctx.mem.swap_by(page, victim, MoveBy::OsBatch)?;
            self.pg[victim as usize] = PG0;
            self.ring[slot] = page;
            self.pg[page as usize] = PG0;
            self.stats.demoted += 1;
        }
        self.stats.promoted += 1;
        Ok(())
    }
}

impl Policy for ClockDwf {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// Moves pages on write faults, with no periodic work; or (detect=interval) once per
    /// interval that found a written slow page.
    fn activity(&self) -> super::Activity {
        match self.interval {
            None => super::Activity::OnAccess,
            Some(every) => super::Activity::Ran { times: self.stats.interval_looks, every },
        }
    }

    fn period(&self) -> Option<Period> {
        self.interval
    }

    /// detect=interval: the slow pages written since the last look come into DRAM, in
    /// address order, as their write faults would have brought them.
    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        if self.interval.is_none() {
            return Ok(());
        }
        let slow: u64 = (1..ctx.mem.tiers()).map(|t| ctx.mem.used(t as TierId)).sum();
        self.stats.interval_scanned += slow;
        if self.scan_pte_ns > 0.0 && slow > 0 {
            ctx.mem.charge(Charge { what: "slow-tier dirty-bit scan", ns: slow as f64 * self.scan_pte_ns, halts: true, energy_j: 0.0 });
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(|&p| ctx.page_addr(p));
        self.stats.interval_looks += 1;
        let mut moved = 0u64;
        for &page in &pending {
            self.written[page as usize] = false;
            if ctx.mem.tier(page) == 0 || ctx.mem.tier(page) == crate::mechanics::UNPLACED || ctx.mem.capacity(0) == 0 {
                continue;
            }
            self.stats.interval_written += 1;
            self.bring_in(page, ctx)?;
            moved += 1;
        }
        pending.clear();
        self.pending = pending;
        if moved > 0 {
            self.stats.interval_batches += 1;
            ctx.mem.charge(Charge { what: "OS entry (clock-dwf batch)", ns: self.entry_ns, halts: true, energy_j: 0.0 });
            if self.shootdown_ns > 0.0 {
                ctx.mem.charge(Charge { what: "TLB shootdown (clock-dwf batch)", ns: self.shootdown_ns, halts: true, energy_j: 0.0 });
            }
        }
        Ok(())
    }

    fn forget(&mut self, page: PageId, _ctx: &mut Ctx) {
        let p = page as usize;
        if p >= self.pg.len() {
            return;
        }
        if let Some(slot) = self.ring.iter().position(|&q| q == page) {
            self.ring.remove(slot);
            if self.hand > slot {
                self.hand -= 1;
            }
            if self.hand >= self.ring.len() {
                self.hand = 0;
            }
        }
        self.pg[p] = PG0;
        if self.interval.is_some() && self.written[p] {
            self.written[p] = false;
            self.pending.retain(|&q| q != page);
        }
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let m = &ctx.platform.platform.migration;
        if self.wp_fault_ns < 0.0 {
            self.wp_fault_ns = m.fault_ns;
        }
        self.shootdown_ns = m.tlb_shootdown_ns;
        self.entry_ns = m.fault_ns;
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.grow(page);
        if self.interval.is_some() {
            // the kernel's first touch: a daemon does not see loads from stores
            return match ctx.mem.free(0) > 0 {
                true => {
                    self.join(page);
                    self.stats.placed_dram_free += 1;
                    0
                }
                false => {
                    self.stats.placed_slow += 1;
                    ctx.mem.first_free_from(1).unwrap_or(0)
                }
            };
        }
        if ctx.first_write && ctx.mem.capacity(0) > 0 {
            if ctx.mem.free(0) == 0 {
                let Some(to) = ctx.mem.first_free_from(1) else { return 0 };
                let slot = self.find_victim(ctx);
                let victim = self.ring[slot];
                // DRAM holds the footprint's pages and the slow tier has a frame: cannot fail
                ctx.mem.migrate_by(victim, to, MoveBy::OsBatch).expect("clock-dwf: demoting a DRAM victim");
                self.pg[victim as usize] = PG0;
                self.ring[slot] = page;
                self.stats.demoted += 1;
                if self.shootdown_ns > 0.0 {
                    ctx.mem.charge(Charge { what: "TLB shootdown (write fault)", ns: self.shootdown_ns, halts: true, energy_j: 0.0 });
                }
            } else {
                self.join(page);
            }
            self.stats.placed_dram_write += 1;
            return 0;
        }
        match ctx.mem.first_free_from(1) {
            Some(t) => {
                self.stats.placed_slow += 1;
                t
            }
            None => {
                // the slow tiers are full: DRAM has a free frame (the tiers hold the footprint)
                self.stats.placed_dram_slow_full += 1;
                self.join(page);
                0
            }
        }
    }

    fn adopt(&mut self, page: PageId, tier: TierId, _ctx: &mut Ctx) {
        self.grow(page);
        if tier == 0 {
            self.join(page);
        }
    }

    #[inline(always)]
    fn prefetch(&self, page: PageId) {
        crate::prefetch::read(self.pg.as_ptr().wrapping_add(page as usize));
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        if !write {
            return Served::RESIDENT;
        }
        if ctx.mem.tier(page) == 0 {
            self.pg[page as usize].dirty = true;
            return Served::RESIDENT;
        }
        if self.interval.is_some() {
            // the store completes in the slow tier and sets the page's dirty bit there
            if !self.written[page as usize] {
                self.written[page as usize] = true;
                self.pending.push(page);
            }
            return Served::RESIDENT;
        }
        self.write_to_slow(page, ctx)
    }

    fn report(&self) -> serde_json::Value {
        json!({
            "name": "clock-dwf",
            "detect": match self.interval { None => "fault".to_string(), Some(p) => format!("interval ({})", p.describe()) },
            "hot_threshold": self.hot_threshold,
            "expiration": self.expiration,
            "wp_fault_ns": self.wp_fault_ns,
            "pte_scan_ns": self.scan_pte_ns,
            "clock_dwf": self.stats,
            "dram_pages": self.ring.len(),
        })
    }
}

impl ClockDwf {
    /// A store to a page outside DRAM: the write-protection fault moves it to DRAM before the
    /// store completes.
    #[cold]
    fn write_to_slow(&mut self, page: PageId, ctx: &mut Ctx) -> Served {
        if ctx.mem.capacity(0) == 0 {
            return Served::RESIDENT;
        }
        self.stats.write_faults += 1;
        ctx.mem.charge(Charge { what: "write-protection fault", ns: self.wp_fault_ns, halts: true, energy_j: 0.0 });
        // DRAM has a frame (free or a victim's) and the page is placed: a failure is a bug
        self.bring_in(page, ctx).expect("clock-dwf: moving a page into DRAM");
        if self.shootdown_ns > 0.0 {
            ctx.mem.charge(Charge { what: "TLB shootdown (write fault)", ns: self.shootdown_ns, halts: true, energy_j: 0.0 });
        }
        // the store completes in DRAM and sets the dirty bit there
        self.pg[page as usize].dirty = true;
        Served::by(0)
    }
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "detect",
        ty: ParamType::Choice { options: &["fault", "interval"] },
        unit: "",
        default: "fault",
        source: "fault: CLOCK-DWF (Lee, Bahn, Noh, IEEE TC 2014) moves a slow page at its first write, by a write-protection fault; interval: what a daemon can do from dirty bits (soft-dirty, Linux Documentation/admin-guide/mm/soft-dirty.rst), the form `tierkit run` uses",
        help: "how writes to slow pages are detected: a fault at the store, or a look at the dirty bits every `interval` (first touches then go where the kernel puts them)",
    },
    ParamSpec {
        name: "interval",
        ty: ParamType::Period,
        unit: "simulated time",
        default: "100ms",
        source: "tierkit's choice: DAMON's default aggregation interval (100 ms, Linux Documentation/admin-guide/mm/damon/usage.rst), the window the live side observes in",
        help: "detect=interval: how often the slow pages' dirty bits are read",
    },
    ParamSpec {
        name: "hot_threshold",
        ty: ParamType::Int { min: 0, max: u16::MAX as i64 },
        unit: "sweeps that found the page dirty",
        default: "0",
        source: "tierkit's choice: CLOCK-DWF (Lee, Bahn, Noh, IEEE TC 2014) spares clean DRAM pages with a high write frequency, but its threshold could not be confirmed; 0 lets any page seen dirty once keep its history for `expiration` sweeps",
        help: "a clean DRAM page is passed by while its write frequency is above this and its history has not expired",
    },
    ParamSpec {
        name: "expiration",
        ty: ParamType::Int { min: 0, max: u8::MAX as i64 },
        unit: "clean sweeps",
        default: "8",
        source: "tierkit's choice: the paper's expiration of write history could not be confirmed; 8 clean sweeps, the value one public re-implementation uses",
        help: "how many sweeps of the hand a page with write history survives without a new write; 0 = plain dirty-bit CLOCK",
    },
    ParamSpec {
        name: "wp_fault_ns",
        ty: ParamType::Float { min: -1.0, max: 1e12 },
        unit: "ns",
        default: "-1",
        source: "the platform's migration.fault_ns (dram-dcpmm: 5 µs, seed 000 §5.1); a write to a write-protected slow page is a page fault",
        help: "cost of the write-protection fault that detects a write to a slow page; -1 = the platform's fault_ns",
    },
    ParamSpec {
        name: "pte_scan_ns",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "ns per page visited",
        default: "10",
        source: "tierkit's choice: reading and clearing one PTE's dirty bit; a 64-byte line holds 8 PTEs, so a sequential walk costs about an eighth of a DRAM access (≈100 ns on dram-dcpmm) per PTE, plus the loop",
        help: "cost of each page the DRAM clock hand visits",
    },
];

/// `clock-dwf` from its parameters, as a value (the registry boxes the same).
pub fn clock_dwf(p: &Params) -> ClockDwf {
    let c = ClockDwf::new(p.int("hot_threshold") as u32, p.int("expiration") as u8, p.float("wp_fault_ns"), p.float("pte_scan_ns"));
    match p.text("detect") {
        "interval" => c.with_interval(p.period("interval")),
        _ => c,
    }
}

pub static CLOCK_DWF: PolicyInfo = PolicyInfo {
    name: "clock-dwf",
    summary: "partitioned placement (CLOCK-DWF): written pages in DRAM, read pages in the slow tier; a write to a slow page faults and moves it to DRAM; DRAM victims by a clock over dirty bits and write frequency",
    source: "seed 004 §2.3, §3.1 ([27]: Lee, Bahn, Noh, 'CLOCK-DWF', IEEE Trans. Computers 63(9), 2014)",
    deploy: super::Deploy::Daemon,
    params: PARAMS,
    build: |p: &Params| Ok(Built::from(clock_dwf(p))),
};
