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
//! All state is per page in flat arrays; the per-access hook is O(1) without allocation, and
//! the hand only runs when a victim is needed.

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Ctx, Needs, Policy, PolicyInfo, Served};
use crate::engine::Runnable;
use crate::error::Result;
use crate::mechanics::{Charge, MoveBy, TierId};
use crate::pagemap::PageId;

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
}

pub struct ClockDwf {
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
        ClockDwf { hot_threshold, expiration, wp_fault_ns, scan_pte_ns, shootdown_ns: 0.0, pg: Vec::new(), ring: Vec::new(), hand: 0, stats: Stats::default() }
    }

    #[inline]
    fn grow(&mut self, page: PageId) {
        let p = page as usize;
        if self.pg.len() <= p {
            let n = (p + 1).max(self.pg.len() * 2).max(1024);
            self.pg.resize(n, PG0);
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

    /// Moves pages on write faults, with no periodic work.
    fn activity(&self) -> super::Activity {
        super::Activity::OnAccess
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let m = &ctx.platform.platform.migration;
        if self.wp_fault_ns < 0.0 {
            self.wp_fault_ns = m.fault_ns;
        }
        self.shootdown_ns = m.tlb_shootdown_ns;
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.grow(page);
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
        self.write_to_slow(page, ctx)
    }

    fn report(&self) -> serde_json::Value {
        json!({
            "name": "clock-dwf",
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
    ClockDwf::new(p.int("hot_threshold") as u32, p.int("expiration") as u8, p.float("wp_fault_ns"), p.float("pte_scan_ns"))
}

pub static CLOCK_DWF: PolicyInfo = PolicyInfo {
    name: "clock-dwf",
    summary: "partitioned placement (CLOCK-DWF): written pages in DRAM, read pages in the slow tier; a write to a slow page faults and moves it to DRAM; DRAM victims by a clock over dirty bits and write frequency",
    source: "seed 004 §2.3, §3.1 ([27]: Lee, Bahn, Noh, 'CLOCK-DWF', IEEE Trans. Computers 63(9), 2014)",
    deploy: super::Deploy::NotLive { why: "needs a fault on the first write to each slow page (userfaultfd write-protection could give it); tierkit has no live version" },
    params: PARAMS,
    build: |p: &Params| Ok(Box::new(clock_dwf(p)) as Box<dyn Runnable>),
};
