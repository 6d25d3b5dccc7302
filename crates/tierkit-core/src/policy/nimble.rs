//! `nimble`: Nimble page management (Yan, Lustig, Nellans, Bhattacharjee, "Nimble Page
//! Management for Tiered Memory Systems", ASPLOS 2019), the *fill DRAM first* policy over
//! Linux's per-node active and inactive lists that seed 004 describes (§2.3, Table 1: hotness
//! only, LRU, OS) and evaluates (§5.1, "nimble", its open-source kernel patch with the paper's
//! default parameters; §5.2 blames its hotness-only page selection). Tier 0 is the fast tier;
//! every other tier is "slow" (Nimble manages one fast and one slow node).
//!
//! Rules, as Nimble's kernel patch (ysarch-lab/nimble_page_management_asplos_2019,
//! `mm/memory_manage.c`, the `mm_manage` system call) and its userspace launcher
//! (ysarch-lab/nimble_page_management_userspace, `end_to_end_launcher/`) carry them out:
//! * First touch: the fast tier while it has a free frame (Nimble caps the fast node with a
//!   per-node memory-cgroup limit, and allocations past it fall to the slow node), else the
//!   first slower tier with one. A new page joins its tier's LRU: on the *active* list by
//!   default, as anonymous pages did in the Linux 5.6 kernel the patch is built on
//!   (`lru_cache_add_active_or_unevictable`; since 5.9 they start inactive: `new_pages`).
//! * Accesses set the page's PTE accessed bit ([`Lru::touch`]); nothing else is observed, so
//!   reads and writes count alike (004 §5.2).
//! * Every `period` the launcher calls `mm_manage(slow → fast, managed_pages)`:
//!   1. list aging (the launcher's `--shrink_page_lists`, on in its `run_all.sh`): on each
//!      slow tier, then on the fast tier, half of the inactive list is scanned from its tail
//!      (pages referenced twice are activated, once get a second chance; unreferenced ones
//!      stay — nothing is reclaimed) and then half of the active list is aged from its tail
//!      onto the inactive list ([`Lru::shrink_inactive`], [`Lru::shrink_active`]);
//!   2. candidates: pages from the tail of the slow tiers' *active* lists, at most
//!      `min(managed_pages, capacity of the fast tier)` (the syscall clamps the request to the
//!      fast node's size). When that number is smaller than the fast tier's free frames, the
//!      inactive lists are taken too, inactive tail first (`ISOLATE_HOT_AND_COLD_PAGES`);
//!      with the launcher's default (no limit) this never happens;
//!   3. the first candidates go into the fast tier's free frames; each further one is
//!      *exchanged* with a page from the tail of the fast tier's *inactive* list (the coldest),
//!      Nimble's exchange page migration (the victim takes the candidate's frame in the slow
//!      tier); when the fast inactive list runs out, the remaining candidates are put back.
//!
//!   Demotion happens only through these exchanges: Nimble's kernel (5.6) has no
//!   demotion path in reclaim, so there is no kswapd-like watermark demotion here.
//!
//! Costs: every page looked at by the list aging `lru_scan_ns` (charged as the program
//! stopped: the syscall runs on another CPU in Nimble, tierkit has one clock, an upper bound
//! as for kswapd in [`super::os_tiering`]). Moves are one batch per period: Nimble migrates
//! and exchanges pages concurrently in batches inside one system call, so each page moves
//! with [`MoveBy::OsBatch`] (the platform's per-page cost and its copy; an exchange is two
//! pages) and the period pays one kernel entry (`syscall_ns`) and one TLB shootdown
//! (`tlb_flush_ns`) when it moved anything.
//!
//! Where tierkit differs: base pages only (Nimble's THP migration and its multi-threaded copy
//! are not modelled; the copy is the platform's); the exchange is used for base pages too (the
//! patch's `do_mm_manage` exchanges only huge pages and migrates the fast node's cold base
//! pages out before promoting, same end placement); the fast tier's free frames are all
//! usable (the patch keeps a page or two back when it puts back overflow candidates); pages
//! the aging leaves unreferenced stay at the inactive tail instead of rotating to the head.

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::Result;
use crate::mechanics::{Charge, MoveBy, TierId};
use crate::pagemap::PageId;
use crate::tracking::lru::Lru;
use crate::units::Period;

/// Counters (`stats.policy.counters`).
#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// `mm_manage` calls that ran (boundaries with accesses since the last one)
    calls: u64,
    /// calls that moved pages (one batch each)
    batches: u64,
    /// pages looked at by the list aging
    lru_scanned: u64,
    /// candidates taken from the slow tiers' active and inactive lists
    hot_candidates: u64,
    cold_candidates: u64,
    /// calls that took inactive pages too (the cap was under the free frames)
    hot_and_cold_calls: u64,
    /// candidates moved into free fast frames, exchanged with fast inactive pages, and put
    /// back for want of either
    into_free_frames: u64,
    exchanges: u64,
    put_back: u64,
}

/// One row of the per-call time series.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    time_ms: f64,
    candidates: u64,
    into_free: u64,
    exchanged: u64,
    slow_active: u64,
    fast_inactive: u64,
    fast_free: u64,
}

pub struct Nimble {
    period: Period,
    /// 0 = no limit (the launcher's ULONG_MAX)
    managed_pages: u64,
    shrink_lists: bool,
    new_active: bool,
    syscall_ns: f64,
    tlb_flush_ns: f64,
    lru_scan_ns: f64,
    lru: Lru,
    last_accesses: Option<u64>,
    cand: Vec<PageId>,
    victims: Vec<PageId>,
    scratch: Vec<PageId>,
    stats: Stats,
    rows: Vec<Row>,
}

impl Nimble {
    fn grow(&mut self, n: usize) {
        self.lru.grow(n);
    }

    fn join_lru(&mut self, page: PageId, tier: TierId) {
        self.grow(page as usize + 1);
        self.lru.add(page, tier);
        if self.new_active {
            self.lru.activate(page);
        }
    }

    /// `shrink_lists`: half of each list of `tier` from its tail, inactive first.
    fn age(&mut self, tier: TierId) -> u64 {
        self.scratch.clear();
        let n = self.lru.inactive_len(tier) / 2;
        let mut scanned = self.lru.shrink_inactive(tier, n, &mut self.scratch);
        let n = self.lru.active_len(tier) / 2;
        scanned += self.lru.shrink_active(tier, n);
        scanned
    }

    /// Up to `max` pages more from the tail of one list into `out`.
    fn take_tail(&self, tier: TierId, active: bool, max: usize, out: &mut Vec<PageId>) {
        let mut p = self.lru.first(tier, active, false);
        while out.len() < max {
            let Some(q) = p else { break };
            out.push(q);
            p = self.lru.following(q, false);
        }
    }
}

impl Policy for Nimble {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.lru = Lru::new(ctx.mem.tiers(), ctx.mem.page_bytes());
        let m = &ctx.platform.platform.migration;
        if self.syscall_ns < 0.0 {
            self.syscall_ns = m.fault_ns;
        }
        if self.tlb_flush_ns < 0.0 {
            self.tlb_flush_ns = m.tlb_shootdown_ns;
        }
        self.grow(ctx.pages);
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        let t = if ctx.mem.free(0) > 0 { 0 } else { ctx.mem.first_free_from(1).or_else(|| ctx.mem.first_free_from(0)).unwrap_or(0) };
        self.join_lru(page, t);
        t
    }

    fn adopt(&mut self, page: PageId, tier: TierId, _ctx: &mut Ctx) {
        self.join_lru(page, tier);
    }

    fn forget(&mut self, page: PageId, _ctx: &mut Ctx) {
        self.lru.remove(page);
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, _write: bool, _ctx: &mut Ctx) -> Served {
        self.lru.touch(page);
        Served::RESIDENT
    }

    /// One activation per mm_manage call (a boundary passed while the program was stopped
    /// makes none).
    fn activity(&self) -> super::Activity {
        super::Activity::Ran { times: self.stats.calls, every: self.period }
    }

    fn period(&self) -> Option<Period> {
        Some(self.period)
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        // a boundary the clock passed while the program was stopped: the launcher's alarm
        // would have fired during the previous call; nothing new to look at
        if self.last_accesses == Some(ctx.now.accesses) {
            return Ok(());
        }
        self.last_accesses = Some(ctx.now.accesses);
        self.grow(ctx.pages);
        self.stats.calls += 1;
        let tiers = ctx.mem.tiers() as TierId;

        // 1. list aging: the slow tiers, then the fast one
        if self.shrink_lists {
            let mut scanned = 0;
            for t in (1..tiers).chain(0..1) {
                scanned += self.age(t);
            }
            self.stats.lru_scanned += scanned;
            if scanned > 0 && self.lru_scan_ns > 0.0 {
                ctx.mem.charge(Charge { what: "LRU scan (Nimble list aging)", ns: scanned as f64 * self.lru_scan_ns, halts: true, energy_j: 0.0 });
            }
        }

        // 2. candidates from the slow tiers' tails
        let fast_cap = ctx.mem.capacity(0);
        let free = ctx.mem.free(0);
        let cap = if self.managed_pages == 0 { fast_cap } else { self.managed_pages.min(fast_cap) };
        let hot_and_cold = self.managed_pages != 0 && cap < free;
        let max = cap.min(usize::MAX as u64) as usize;
        let mut cand = std::mem::take(&mut self.cand);
        cand.clear();
        for t in 1..tiers {
            if hot_and_cold {
                let before = cand.len();
                self.take_tail(t, false, max, &mut cand);
                self.stats.cold_candidates += (cand.len() - before) as u64;
            }
            let before = cand.len();
            self.take_tail(t, true, max, &mut cand);
            self.stats.hot_candidates += (cand.len() - before) as u64;
        }
        self.stats.hot_and_cold_calls += hot_and_cold as u64;

        // 3. free frames first, then exchanges with the fast inactive tail
        let need = (cand.len() as u64).saturating_sub(free) as usize;
        self.victims.clear();
        if need > 0 {
            let mut v = std::mem::take(&mut self.victims);
            self.take_tail(0, false, need, &mut v);
            self.victims = v;
        }
        let mut row = Row { time_ms: ctx.now.ns / 1e6, candidates: cand.len() as u64, ..Default::default() };
        let moving = cand.len().min(free as usize + self.victims.len());
        if moving > 0 {
            ctx.mem.charge(Charge { what: "OS entry (Nimble mm_manage batch)", ns: self.syscall_ns, halts: true, energy_j: 0.0 });
        }
        let mut next_victim = 0;
        for &p in &cand[..moving] {
            let from = ctx.mem.tier(p);
            if ctx.mem.free(0) > 0 {
                ctx.mem.migrate_by(p, 0, MoveBy::OsBatch)?;
                row.into_free += 1;
            } else {
                let v = self.victims[next_victim];
                next_victim += 1;
                ctx.mem.swap_by(p, v, MoveBy::OsBatch)?;
                self.lru.move_to(v, from);
                row.exchanged += 1;
            }
            self.lru.move_to(p, 0);
        }
        if moving > 0 {
            ctx.mem.charge(Charge { what: "TLB shootdown (Nimble mm_manage batch)", ns: self.tlb_flush_ns, halts: true, energy_j: 0.0 });
            self.stats.batches += 1;
        }
        self.stats.into_free_frames += row.into_free;
        self.stats.exchanges += row.exchanged;
        self.stats.put_back += (cand.len() - moving) as u64;
        row.slow_active = (1..tiers).map(|t| self.lru.active_len(t)).sum();
        row.fast_inactive = self.lru.inactive_len(0);
        row.fast_free = ctx.mem.free(0);
        self.rows.push(row);
        self.cand = cand;
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> =
            self.rows.iter().map(|r| json!([r.time_ms, r.candidates, r.into_free, r.exchanged, r.slow_active, r.fast_inactive, r.fast_free])).collect();
        json!({
            "name": "nimble",
            "period": self.period.describe(),
            "managed_pages": self.managed_pages,
            "shrink_lists": self.shrink_lists,
            "new_pages": if self.new_active { "active" } else { "inactive" },
            "counters": self.stats,
            "lru": self.lru.stats,
            "timeseries": {
                "columns": ["time_ms", "candidates", "into_free_frames", "exchanges", "slow_active_pages", "fast_inactive_pages", "fast_free_pages"],
                "rows": rows,
            },
        })
    }
}

// ---------------------------------------------------------------------------- parameters

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "period",
        ty: ParamType::Period,
        unit: "simulated time (or accesses, or N-insn)",
        default: "5s",
        source: "Nimble's userspace launcher scripts (end_to_end_launcher/run_all.sh and run_bench.sh: STATS_PERIOD=5, passed as --dumpstats_period, the interval of the SIGALRM that calls mm_manage; the launcher's own fallback is 1 s)",
        help: "time between two mm_manage calls (list aging, then promotion/exchange)",
    },
    ParamSpec {
        name: "managed_pages",
        ty: ParamType::Int { min: 0, max: 1 << 40 },
        unit: "pages per call",
        default: "0",
        source: "Nimble's launcher (--managed_pages, default ULONG_MAX, not set by run_bench.sh): 0 = no limit but the fast tier's size, to which mm_manage clamps it (mm/memory_manage.c)",
        help: "most slow pages promoted per period; below the fast tier's free frames, inactive slow pages are taken too",
    },
    ParamSpec {
        name: "shrink_lists",
        ty: ParamType::Bool,
        unit: "",
        default: "true",
        source: "Nimble's launcher (--shrink_page_lists, SHRINK_PAGE_LISTS=yes in run_all.sh): each call first ages half of every list of both nodes (mm/memory_manage.c shrink_lists)",
        help: "age the active/inactive lists at each call (otherwise nothing in tierkit ages them)",
    },
    ParamSpec {
        name: "new_pages",
        ty: ParamType::Choice { options: &["active", "inactive"] },
        unit: "",
        default: "active",
        source: "Linux 5.6 (Nimble's kernel): new anonymous pages join the active list (lru_cache_add_active_or_unevictable); inactive = Linux >= 5.9",
        help: "LRU list a page joins on first touch",
    },
    ParamSpec {
        name: "syscall_ns",
        ty: ParamType::Float { min: -1.0, max: 1e12 },
        unit: "ns per call that moves pages",
        default: "-1",
        source: "-1 = the platform's migration.fault_ns (dram-dcpmm: 5 µs, seed 000 §5.1), the kernel entry epoch_os charges for an OS batch",
        help: "kernel entry of one mm_manage batch",
    },
    ParamSpec {
        name: "tlb_flush_ns",
        ty: ParamType::Float { min: -1.0, max: 1e12 },
        unit: "ns per call that moves pages",
        default: "-1",
        source: "-1 = the platform's migration.tlb_shootdown_ns (dram-dcpmm: 3 µs, seed 000 §5.1); one shootdown per batch",
        help: "TLB shootdown of one mm_manage batch",
    },
    // the same LRU model and figure as autonuma-tiering and tpp
    super::os_tiering::LRU_SCAN,
];

/// `nimble` from its parameters, as a value (the registry boxes the same).
pub fn nimble(p: &Params) -> Nimble {
    Nimble {
        period: p.period("period"),
        managed_pages: p.int("managed_pages") as u64,
        shrink_lists: p.bool("shrink_lists"),
        new_active: p.text("new_pages") == "active",
        syscall_ns: p.float("syscall_ns"),
        tlb_flush_ns: p.float("tlb_flush_ns"),
        lru_scan_ns: p.float("lru_scan_ns"),
        lru: Lru::new(2, 4096),
        last_accesses: None,
        cand: Vec::new(),
        victims: Vec::new(),
        scratch: Vec::new(),
        stats: Stats::default(),
        rows: Vec::new(),
    }
}

pub static NIMBLE: PolicyInfo = PolicyInfo {
    name: "nimble",
    summary: "Nimble: first touch fills DRAM; every period the slow tier's active-LRU pages move into free DRAM frames or are exchanged with DRAM's inactive-tail pages (hotness only), one OS batch per period",
    source: "Yan et al., 'Nimble Page Management for Tiered Memory Systems', ASPLOS 2019, and its kernel patch (mm/memory_manage.c) and launcher; as seed 004 §2.3, §5.1 describes and evaluates it",
    deploy: super::Deploy::Daemon,
    params: PARAMS,
    build: |p: &Params| Ok(Built::from(nimble(p))),
};
