//! `autonuma-tiering` and `tpp`: the tiering that Linux ships, NUMA balancing promoting slow
//! pages on hint faults and kswapd demoting fast pages from the tail of the inactive LRU list.
//! Tier 0 is the fast (top) tier; promotion goes into it, demotion to the next tier with room.
//!
//! Both observe only what the kernel does: hint faults from a periodic PTE scanner
//! ([`HintFaults`]) and referenced bits seen by LRU scans ([`Lru`]).
//!
//! Shared rules (Linux ≥ 6.1 unless said otherwise):
//! * First touch: the fast tier while its free frames exceed the low watermark (the
//!   allocator's fast path, `get_page_from_freelist` with `ALLOC_WMARK_LOW`), else the next
//!   tier with a free frame (the zonelist fallback, which wakes no reclaim on the fast node).
//!   A new page joins its node's inactive list.
//! * Watermarks of the fast tier (mm/page_alloc.c `__setup_per_zone_wmarks`):
//!   `min_free_kbytes = int_sqrt(16 × memory in kB)` clamped to [128, 262144]
//!   (`calculate_min_free_kbytes`), shared among nodes by size; `step = max(min / 4,
//!   capacity × watermark_scale_factor / 10000)`; low = min + step, high = low + step, promo =
//!   high + step (`WMARK_PROMO`, Linux 6.0). `autonuma-tiering` also takes a real node's
//!   watermarks as parameters (`wmark_{min,low,high,promo}_pages`): a kernel's min_free_kbytes
//!   is often raised (khugepaged's `set_recommended_min_free_kbytes` for THP), so the formula
//!   can be far off (docs/validation.md: 22-39 MiB on the testbed VM's node 0 against a few KiB).
//! * Other programs' pages on the fast tier (`fast_other_pages`, autonuma-tiering): inside its
//!   capacity, not free; kswapd demotes them before the program's pages (they are the oldest on
//!   the node's LRU) and counts them in `demoted` (as the kernel's pgdemote_kswapd does).
//! * A second, small zone of the fast node (`dma_zone_pages`, autonuma-tiering; absent by
//!   default): Linux checks every watermark per zone, and a node with a 16 MiB DMA zone beside
//!   its DMA32 zone (the testbed VM's node 0) passes a check as soon as either zone does. The
//!   main zone has the watermarks above; the small zone has its own (`dma_wmark_*_pages`) and
//!   `dma_protection_pages`, its `lowmem_reserve` against movable allocations, added to each of
//!   them (mm/page_alloc.c `zone_watermark_ok` with classzone ZONE_MOVABLE). Rules:
//!   allocations and promotions take the main zone while its free frames exceed its low
//!   watermark, else the small zone while its free frames exceed its low + protection (the
//!   zonelist walks from the highest zone down, `get_page_from_freelist`); a promotion is
//!   allowed if either zone has free > high + 1 (+ protection) (mm/migrate.c
//!   `migrate_balanced_pgdat`); kswapd stops, or is not run, once either zone has free > promo
//!   (+ protection) (mm/vmscan.c `pgdat_balanced`: any balanced zone up to the classzone
//!   balances the node), and its reclaim goal adds the small zone's `max(high, SWAP_CLUSTER_MAX)`
//!   (`kswapd_shrink_node`). tierkit records which zone each fast page is in; the node's LRU
//!   is one list, so kswapd's victims free frames in whichever zone they were; other programs'
//!   pages (`fast_other_pages`) are in the main zone.
//! * The scanner arms only slow-tier pages (tiering mode skips top-tier pages,
//!   `change_pte_range`), `scan_size_mb` per scan period, after `scan_delay_ms`.
//! * kswapd demotes from the tail of the fast tier's inactive list (mm/vmscan.c
//!   `balance_pgdat`): priorities 12 down to 1, each scanning `list size >> priority` pages of
//!   each list ([`Lru::reclaim_step`]), stopping once the free frames exceed its target
//!   watermark or `max(high, SWAP_CLUSTER_MAX)` pages were reclaimed (`kswapd_shrink_node`).
//!
//! `autonuma-tiering` (`kernel.numa_balancing=2`; Huang Ying's series, Linux 5.18–6.1;
//! kernel/sched/fair.c `should_numa_migrate_memory`, Documentation/admin-guide/sysctl/kernel.rst):
//! * A hint fault on a slow page: if the fast tier's free frames exceed promo +
//!   max(1 GiB, capacity / 16) (`pgdat_free_space_enough`), the page is promoted whatever its
//!   latency, and the adjusted threshold is reset. Otherwise the threshold is adjusted
//!   (`numa_promotion_adjust_threshold`, below); a page whose hint-fault latency is not under
//!   the threshold stays; else it counts as a promotion candidate (PGPROMOTE_CANDIDATE) and is
//!   promoted unless the candidates of the current 1 s window already reach the rate limit
//!   (`numa_promotion_rate_limit`: the window restarts when more than 1000 ms have passed).
//! * Threshold adjustment (Linux 6.0, "memory tiering: adjust hot threshold automatically"):
//!   once more than `scan_period_max_ms` have passed since the last adjustment, the candidates
//!   since then are compared with `rate_limit × scan_period_max / 1 s`: above 110 % the
//!   threshold drops by `2 × hot_threshold / 16` (not below one step), under 90 % it rises by a
//!   step (not above `2 × hot_threshold`).
//! * Promotion needs free frames above high + 1 (`migrate_balanced_pgdat`); when it fails, the
//!   fault wakes kswapd (`numamigrate_isolate_folio` in tiering mode), which demotes until the
//!   free frames exceed the promo watermark (`pgdat_balanced` uses `WMARK_PROMO` in tiering
//!   mode). Nothing else wakes kswapd: allocations fall back to the slow tier instead. Once
//!   it has balanced the node kswapd naps `kswapd_nap_ms` (HZ/10, `kswapd_try_to_sleep`); if
//!   the free frames are at or under promo at the nap's end (allocations took what it freed),
//!   it demotes again without a wake-up (`kswapd_rechecks`), else it sleeps until woken.
//! * kswapd's pace (`kswapd_pages_per_s`, autonuma-tiering; 0 by default = at once): kswapd is
//!   a thread on another CPU and frees frames at a finite pace while the program goes on. The
//!   model picks a run's victims and demotes them when it is woken, as before, but the frames
//!   they free become free at this pace: until then first touches and promotions cannot take
//!   them (kswapd's own balance check counts them), and a promotion refused meanwhile finds
//!   kswapd still at work and starts no run of its own (`kswapd_wakeups_busy`).
//!
//! `tpp` (Maruf et al., ASPLOS 2023, §5; the TPP patches on linux-mm, v1/v2 2021-22):
//! * Decoupled allocation and demotion: kswapd is woken whenever the fast tier's free frames
//!   fall below the demotion watermark `clamp(capacity × demote_scale_factor / 10000, 2 × high,
//!   capacity)` (patch "PATCH 3/5": default 200 = 2 %, vm.rst), checked at every allocation
//!   and tick, and demotes until they reach it; allocation keeps the low watermark.
//! * Active-LRU promotion ("PATCH 5/5"): a hint fault on a slow page not on the active list
//!   does not migrate it; the page is moved toward the active list. With `activate=fault`
//!   (the paper's §5.3 description, default) the fault activates it, so the next fault
//!   promotes it; with `activate=mark-accessed` (the patch's code) the fault calls
//!   `mark_page_accessed`, which needs the page PG_referenced first (two faults to activate).
//!   A fault on an active slow page promotes it if the fast tier's free frames exceed the
//!   `promote_watermark` (min by default: TPP lets promotion dip below the allocation
//!   watermarks; tierkit's reading of §5.3, not confirmed in the patch text found) — else it
//!   wakes kswapd and the page stays. TPP has no hot threshold and no rate limit.
//!
//! Costs: each PTE made PROT_NONE `pte_update_ns`, and one TLB flush per scan window that
//! changed PTEs (`tlb_flush_ns`); each hint fault `hint_fault_ns` (a minor fault); each page
//! looked at by an LRU scan `lru_scan_ns`. Promotions happen inside the hint fault, so they
//! move with [`MoveBy::OsBatch`] (per-page cost and copy; the fault is already charged) and
//! pay one TLB shootdown each; kswapd's demotions of one pass are one batch
//! ([`MoveBy::OsBatch`]) with one TLB shootdown (migrate_pages flushes once per batch,
//! Linux 6.4). kswapd runs on another CPU in Linux; tierkit has one clock, so its work is
//! charged as stopping the program (an upper bound on its effect).
//!
//! The scan period (`autonuma-tiering`, `scan_period_adapt`): it starts at `task_scan_start`
//! (the period divided by the RSS's scan windows) when the scan delay ends. A fault on a slow
//! page that is not promoted is not counted for the task (`task_numa_fault` returns early for
//! a non-top-tier node in tiering mode), but a promoted one is, for its new, top-tier node
//! (mm/memory.c `do_numa_page` passes `target_nid` once the migration succeeded). The first
//! such fault after the scanner completed a pass runs `task_numa_placement` and so
//! `update_task_scan_period`. A single-threaded task's promoted faults are private (a slow
//! page's cpupid field holds its scan time, so `last_cpupid` is the default value) and remote
//! (the page was on the slow node when it faulted: no `TNF_FAULT_LOCAL`), so `local + shared`
//! is 0 and the period doubles, up to `task_scan_max` (`scan_period_max_ms` over the RSS's
//! windows), with the next scan one new period from that fault. So a task that keeps being
//! promoted is scanned after 1, 2, 4, 8 ... s; one that stops being promoted keeps its period.
//! The testbed VM's kernel armed its PTEs at about 2.2, 5.0 and 9.4 s of a phases run
//! (docs/validation.md).
//!
//! Where tierkit differs: a task is one thread with no NUMA group, so shared faults and the
//! scan period's other rules (local or shared faults, failed migrations of top-tier pages)
//! never apply; hint-fault latency is in ns, not jiffies; a reclaim pass is one walk over one
//! lruvec (no priorities, no cgroups, no file pages).

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::Result;
use crate::mechanics::{Charge, MoveBy, TierId, UNPLACED};
use crate::pagemap::PageId;
use crate::tracking::hint_faults::HintFaults;
use crate::tracking::lru::{isqrt, Lru, SWAP_CLUSTER_MAX};

/// kernel/sched/fair.c `MAX_SCAN_WINDOW`: the scanner covers at most this many MB of address
/// space per second (`task_scan_min`'s floor).
pub const MAX_SCAN_WINDOW_MB: u64 = 2560;

/// Watermarks of the fast tier, pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
    pub promo: u64,
    /// TPP's demotion watermark (0 for autonuma-tiering)
    pub demote: u64,
}

impl Watermarks {
    /// The kernel's watermarks for a fast tier of `fast` pages in a memory of `total` pages of
    /// `page_bytes`; `min_free_kbytes < 0` = the kernel's formula.
    pub fn compute(fast: u64, total: u64, page_bytes: u64, min_free_kbytes: i64, wsf: u64, demote_sf: u64) -> Watermarks {
        let total_kb = total.saturating_mul(page_bytes) / 1024;
        let min_free_kb = if min_free_kbytes < 0 { isqrt(total_kb.saturating_mul(16)).clamp(128, 262_144) } else { min_free_kbytes as u64 };
        let pages_min = min_free_kb * 1024 / page_bytes;
        let min = if total > 0 { ((pages_min as u128 * fast as u128) / total as u128) as u64 } else { 0 };
        let step = (min / 4).max(((fast as u128 * wsf as u128) / 10_000) as u64);
        let low = min + step;
        let high = low + step;
        let promo = high + step;
        let demote = if demote_sf > 0 { (((fast as u128 * demote_sf as u128) / 10_000) as u64).max(2 * high).min(fast) } else { 0 };
        Watermarks { min, low, high, promo, demote }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Autonuma,
    Tpp,
}

/// Counters (`stats.policy.counters`).
#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    scans: u64,
    ptes_armed: u64,
    /// PTEs the scans covered (armed or passed over)
    ptes_scanned: u64,
    hint_faults: u64,
    /// hint faults on pages already in the fast tier (armed, then promoted or moved)
    faults_on_fast: u64,
    promoted: u64,
    /// autonuma-tiering: faults with latency under the threshold (PGPROMOTE_CANDIDATE), those
    /// over it, those stopped by the rate limit, and those promoted because the fast tier had
    /// plenty of free memory
    candidates: u64,
    over_threshold: u64,
    rate_limited: u64,
    promoted_free_space: u64,
    threshold_adjustments: u64,
    /// autonuma-tiering: scan-period doublings (`update_task_scan_period` after a pass)
    scan_period_doublings: u64,
    /// tpp: faults that activated an inactive slow page instead of promoting it
    activations: u64,
    /// promotions refused for want of free frames (kswapd woken)
    promote_no_room: u64,
    kswapd_runs: u64,
    /// wake-ups that found kswapd still freeing its last run's frames (`kswapd_pages_per_s`)
    kswapd_wakeups_busy: u64,
    /// kswapd runs started by its own recheck at the end of its nap, not by a wake-up
    kswapd_rechecks: u64,
    demoted: u64,
    /// kswapd runs that ended with the small zone (`dma_zone_pages`) balanced and the main
    /// zone not (`pgdat_balanced` stopped them early)
    kswapd_small_zone_stops: u64,
    /// of `promoted`: pages whose frame is in the small zone
    promoted_small_zone: u64,
    /// of `demoted`: pages of other programs (`fast_other_pages`)
    demoted_other: u64,
    lru_scanned: u64,
}

/// One row of the per-scan time series.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    time_ms: f64,
    armed: u64,
    faults: u64,
    promoted: u64,
    demoted: u64,
    threshold_ms: f64,
    fast_free: u64,
}

pub struct NumaTiering {
    mode: Mode,
    /// `numa_balancing_scan_period_min`: time to scan the whole RSS, ns
    scan_period_min_ns: f64,
    scan_delay_ns: f64,
    /// the kernel's one-second window of its per-second limits, ns
    rate_window_ns: f64,
    scan_size_mb: u64,
    hot_threshold_ms: f64,
    rate_limit_mbps: u64,
    scan_period_max_ms: f64,
    /// `update_task_scan_period` runs (autonuma-tiering, `scan_period_adapt`)
    adapt_period: bool,
    /// the scanner's completed passes when the period was last updated (`p->numa_scan_seq`)
    placement_seq: u64,
    watermark_scale_factor: u64,
    min_free_kbytes: i64,
    demote_scale_factor: u64,
    tpp_activate_on_fault: bool,
    tpp_promote_above_min: bool,
    hint_fault_ns: f64,
    pte_update_ns: f64,
    pte_scan_ns: f64,
    tlb_flush_ns: f64,
    lru_scan_ns: f64,
    kswapd_backoff_ns: f64,
    /// `kswapd_try_to_sleep`'s short nap after balancing, ns (HZ/10)
    kswapd_nap_ns: f64,
    /// explicit watermarks (min, low, high, promo), pages; all -1 = the kernel's formula
    wm_given: [i64; 4],
    /// the fast node's small second zone (autonuma-tiering), pages; 0 = none
    dma_pages: u64,
    /// its watermarks (low, high, promo), pages, each with its protection added
    dma_low: u64,
    dma_high: u64,
    dma_promo: u64,
    /// `dma_wmark_*_pages` and `dma_protection_pages` as given, for the checks in init
    dma_given: [u64; 4],
    /// per page: whether its fast-tier frame is in the small zone
    in_dma: Vec<bool>,
    /// frames of the small zone in use
    dma_used: u64,
    // state
    /// pages of other programs on the fast tier (inside its capacity, outside the trace):
    /// the oldest on its LRU, so kswapd demotes them first
    other_fast: u64,
    /// end of kswapd's nap after it balanced the node (0 = asleep until woken)
    kswapd_recheck_ns: f64,
    /// kswapd's pace, frames per ns (0 = at once)
    kswapd_pages_per_ns: f64,
    /// frames kswapd demoted the pages of but has not freed yet, at `held_since_ns`: main
    /// zone, small zone (freed in that order)
    held_main: u64,
    held_dma: u64,
    held_since_ns: f64,
    /// the time of the access or allocation being handled, ns
    now_ns: f64,
    scan_pages: u64,
    /// the task's scan period (`task_scan_start` at the end of the scan delay), ns; 0 before
    scan_period_ns: f64,
    /// `mm->numa_next_scan`, ns
    next_scan_ns: f64,
    rate_limit_pages: u64,
    wm: Watermarks,
    hint: HintFaults,
    lru: Lru,
    /// PGPROMOTE_CANDIDATE
    nr_cand: u64,
    rl_start_ms: f64,
    rl_nr_cand: u64,
    th_start_ms: f64,
    th_nr_cand: u64,
    /// adjusted threshold, ms (0 = the sysctl's)
    threshold_ms: f64,
    victims: Vec<PageId>,
    kswapd_failures: u32,
    kswapd_retry_ns: f64,
    stats: Stats,
    rows: Vec<Row>,
    row: Row,
}

impl NumaTiering {
    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Autonuma => "autonuma-tiering",
            Mode::Tpp => "tpp",
        }
    }

    /// The threshold in force, ms.
    pub fn threshold_ms(&self) -> f64 {
        if self.threshold_ms > 0.0 {
            self.threshold_ms
        } else {
            self.hot_threshold_ms
        }
    }

    fn grow(&mut self, n: usize) {
        self.lru.grow(n);
        self.hint.grow(n);
        if self.dma_pages > 0 && self.in_dma.len() < n {
            self.in_dma.resize(n, false);
        }
    }

    /// Free frames of the small zone (0 without one).
    fn free_dma(&self) -> u64 {
        self.dma_pages.saturating_sub(self.dma_used)
    }

    /// Free frames of the main zone: the fast tier's less the small zone's.
    fn free_main(&self, mem: &crate::mechanics::Memory) -> u64 {
        self.free_fast(mem).saturating_sub(self.free_dma())
    }

    /// Frames kswapd has demoted the pages of but not freed yet (`kswapd_pages_per_s`), main
    /// zone and small zone, at the time being handled.
    fn held(&self) -> (u64, u64) {
        if self.held_main + self.held_dma == 0 {
            return (0, 0);
        }
        let freed = ((self.now_ns - self.held_since_ns).max(0.0) * self.kswapd_pages_per_ns).floor();
        let freed = if freed >= u64::MAX as f64 { u64::MAX } else { freed as u64 };
        (self.held_main.saturating_sub(freed), self.held_dma.saturating_sub(freed.saturating_sub(self.held_main)))
    }

    /// Free frames of the main zone that allocations and promotions can take.
    fn usable_main(&self, mem: &crate::mechanics::Memory) -> u64 {
        self.free_main(mem).saturating_sub(self.held().0)
    }

    /// Free frames of the small zone that allocations and promotions can take.
    fn usable_dma(&self) -> u64 {
        self.free_dma().saturating_sub(self.held().1)
    }

    /// `pgdat_balanced`: the main zone's free frames exceed `mark`, or the small zone's exceed
    /// its promo (+ protection; at least its high + 1, as for the main zone's target).
    fn balanced(&self, mark: u64, mem: &crate::mechanics::Memory) -> bool {
        self.free_main(mem) > mark || (self.dma_pages > 0 && self.free_dma() > self.dma_promo.max(self.dma_high + 1))
    }

    /// A page just put on the fast tier: which zone's frame it took. The main zone while its
    /// free frames (before this page) exceed its low watermark, else the small zone while its
    /// exceed low + protection (`get_page_from_freelist`), else whichever has a frame.
    fn take_fast_frame(&mut self, page: PageId, main_free_before: u64) -> bool {
        if self.dma_pages == 0 {
            return false;
        }
        let dma = if main_free_before > self.wm.low { false } else { self.usable_dma() > self.dma_low || main_free_before == 0 };
        if dma && self.free_dma() > 0 {
            self.in_dma[page as usize] = true;
            self.dma_used += 1;
            return true;
        }
        false
    }

    /// A page leaving the fast tier: its frame is free again. Whether it was in the small zone.
    fn leave_fast(&mut self, page: PageId) -> bool {
        if self.dma_pages > 0 && self.in_dma[page as usize] {
            self.in_dma[page as usize] = false;
            self.dma_used -= 1;
            return true;
        }
        false
    }

    /// The fast tier's free frames: its capacity less the program's pages and the other
    /// programs' pages still there (what the kernel's NR_FREE_PAGES counts).
    fn free_fast(&self, mem: &crate::mechanics::Memory) -> u64 {
        mem.free(0).saturating_sub(self.other_fast)
    }

    /// kswapd on the fast tier: demote from the inactive tail until the free frames exceed
    /// `mark`.
    fn kswapd(&mut self, mark: u64, ctx: &mut Ctx) -> Result<()> {
        // after MAX_RECLAIM_RETRIES (16) runs that freed nothing kswapd is not woken again
        // until `kswapd_backoff_ms` (10 s) have passed (TPP patch 4/5 kswapd_try_to_sleep; mm/vmscan.c)
        if self.kswapd_failures >= 16 {
            if ctx.now.ns < self.kswapd_retry_ns {
                return Ok(());
            }
            self.kswapd_failures = 0;
        }
        let paced = self.kswapd_pages_per_ns > 0.0;
        if paced {
            let (m, d) = self.held();
            if m + d > 0 && self.balanced(mark, ctx.mem) {
                // still freeing its last run's frames, which will balance the node
                self.stats.kswapd_wakeups_busy += 1;
                return Ok(());
            }
            (self.held_main, self.held_dma, self.held_since_ns) = (m, d, self.now_ns);
        }
        self.stats.kswapd_runs += 1;
        let before = self.stats.demoted;
        let mut nr_to_reclaim = self.wm.high.max(SWAP_CLUSTER_MAX);
        if self.dma_pages > 0 {
            // kswapd_shrink_node sums max(high, SWAP_CLUSTER_MAX) over the eligible zones
            nr_to_reclaim += self.dma_high.max(SWAP_CLUSTER_MAX);
        }
        // balance_pgdat: priorities DEF_PRIORITY (12) down to 1, each scanning lists >>
        // priority, until the node is balanced or nr_to_reclaim pages were reclaimed; kswapd
        // runs it again while the node is not balanced (tierkit: at most twice per wake-up)
        'sweeps: for _ in 0..2 {
            let mut reclaimed = 0;
            for prio in (1..=12u32).rev() {
                if self.balanced(mark, ctx.mem) || reclaimed >= nr_to_reclaim {
                    break 'sweeps;
                }
                if self.other_fast > 0 {
                    // the other programs' pages are older than any of the program's: they
                    // leave first, one SWAP_CLUSTER_MAX batch (or what the mark needs) at a time
                    let need = (mark + 1).saturating_sub(self.free_main(ctx.mem));
                    let n = self.other_fast.min(need.max(SWAP_CLUSTER_MAX));
                    self.other_fast -= n;
                    if paced {
                        self.held_main += n;
                    }
                    ctx.mem.charge(Charge { what: "TLB shootdown (kswapd demotion batch)", ns: self.tlb_flush_ns, halts: true, energy_j: 0.0 });
                    reclaimed += n;
                    self.stats.demoted += n;
                    self.stats.demoted_other += n;
                    self.row.demoted += n;
                    continue;
                }
                self.victims.clear();
                let scanned = self.lru.reclaim_step(0, prio, &mut self.victims);
                self.stats.lru_scanned += scanned;
                if scanned > 0 && self.lru_scan_ns > 0.0 {
                    ctx.mem.charge(Charge { what: "LRU scan (kswapd)", ns: scanned as f64 * self.lru_scan_ns, halts: true, energy_j: 0.0 });
                }
                let mut moved = 0;
                for i in 0..self.victims.len() {
                    let v = self.victims[i];
                    let Some(to) = ctx.mem.first_free_from(1) else { break };
                    ctx.mem.migrate_by(v, to, MoveBy::OsBatch)?;
                    let small = self.leave_fast(v);
                    if paced {
                        if small {
                            self.held_dma += 1;
                        } else {
                            self.held_main += 1;
                        }
                    }
                    self.lru.move_to(v, to);
                    self.hint.disarm(v);
                    moved += 1;
                }
                if moved > 0 {
                    ctx.mem.charge(Charge { what: "TLB shootdown (kswapd demotion batch)", ns: self.tlb_flush_ns, halts: true, energy_j: 0.0 });
                }
                reclaimed += moved;
                self.stats.demoted += moved;
                self.row.demoted += moved;
            }
        }
        if self.dma_pages > 0 && self.free_main(ctx.mem) <= mark && self.balanced(mark, ctx.mem) {
            self.stats.kswapd_small_zone_stops += 1;
        }
        if self.stats.demoted == before && !self.balanced(mark, ctx.mem) {
            self.kswapd_failures += 1;
            self.kswapd_retry_ns = ctx.now.ns + self.kswapd_backoff_ns;
        } else {
            self.kswapd_failures = 0;
        }
        // kswapd_try_to_sleep: a balanced node gets a short nap (HZ/10); if the node is
        // unbalanced again at its end, kswapd reclaims again without being woken
        if self.mode == Mode::Autonuma && self.balanced(mark, ctx.mem) {
            self.kswapd_recheck_ns = ctx.now.ns + self.kswapd_nap_ns;
        }
        Ok(())
    }

    /// The watermarks given as parameters: none, or all four in order.
    fn given_watermarks(&self) -> Result<Option<[u64; 4]>> {
        let g = self.wm_given;
        if g.iter().all(|&x| x < 0) {
            return Ok(None);
        }
        if let Some(i) = g.iter().position(|&x| x < 0) {
            return Err(crate::error::Error::config(
                format!("autonuma-tiering:{}", WMARK_NAMES[i]),
                "give all four watermarks (wmark_min_pages, wmark_low_pages, wmark_high_pages, wmark_promo_pages) or none",
            ));
        }
        for i in 1..4 {
            if g[i] < g[i - 1] {
                return Err(crate::error::Error::config(
                    format!("autonuma-tiering:{}", WMARK_NAMES[i]),
                    format!("{} is under {} = {} (the kernel's watermarks rise: min ≤ low ≤ high ≤ promo)", g[i], WMARK_NAMES[i - 1], g[i - 1]),
                ));
            }
        }
        Ok(Some([g[0] as u64, g[1] as u64, g[2] as u64, g[3] as u64]))
    }

    /// At the end of kswapd's nap (autonuma-tiering): reclaim again if the node is no longer
    /// balanced (free frames at or under promo), else sleep until woken.
    fn kswapd_nap_over(&mut self, ctx: &mut Ctx) {
        if self.kswapd_recheck_ns > 0.0 && ctx.now.ns >= self.kswapd_recheck_ns {
            self.kswapd_recheck_ns = 0.0;
            if !self.balanced(self.wm.promo, ctx.mem) {
                self.stats.kswapd_rechecks += 1;
                let _ = self.kswapd(self.wm.promo, ctx);
            }
        }
    }

    /// `numa_promotion_adjust_threshold`.
    fn adjust_threshold(&mut self, now_ms: f64, time_scale: f64) {
        if now_ms - self.th_start_ms <= self.scan_period_max_ms {
            return;
        }
        self.th_start_ms = now_ms;
        let ref_th = self.hot_threshold_ms;
        // the limit per rate window (see rate_limited) over the scan_period_max interval
        let ref_cand = self.rate_limit_pages as f64 / time_scale * self.scan_period_max_ms * 1e6 / self.rate_window_ns;
        let diff = (self.nr_cand - self.th_nr_cand) as f64;
        let unit = ref_th * 2.0 / 16.0;
        let mut th = self.threshold_ms();
        if diff > ref_cand * 1.1 {
            th = (th - unit).max(unit);
        } else if diff < ref_cand * 0.9 {
            th = (th + unit).min(ref_th * 2.0);
        }
        self.th_nr_cand = self.nr_cand;
        self.threshold_ms = th;
        self.stats.threshold_adjustments += 1;
    }

    /// `numa_promotion_rate_limit`: count one candidate; whether the window's candidates reach
    /// the limit. The kernel's window is one second (`rate_window_ms`), and the limit is
    /// `promote_rate_limit_mib_per_s` per window: under `--time-scale K` the window lasts 1/K s and
    /// the limit (a rate, which time scaling multiplied by K) allows the same pages per window.
    fn rate_limited(&mut self, now_ms: f64, time_scale: f64) -> bool {
        self.nr_cand += 1;
        if now_ms - self.rl_start_ms > self.rate_window_ns / 1e6 {
            self.rl_start_ms = now_ms;
            self.rl_nr_cand = self.nr_cand;
        }
        let limit = (self.rate_limit_pages as f64 / time_scale).round() as u64;
        self.nr_cand - self.rl_nr_cand >= limit
    }

    /// Promote a faulting slow page if the fast tier has room above `mark`; else wake kswapd.
    fn try_promote(&mut self, page: PageId, mark: u64, ctx: &mut Ctx) -> Result<bool> {
        // migrate_balanced_pgdat: either zone above its high + 1 (+ protection)
        let main_free = self.usable_main(ctx.mem);
        if main_free > mark + 1 || (self.dma_pages > 0 && self.usable_dma() > self.dma_high + 1) {
            // no TLB flush: the PTE is still PROT_NONE while the page migrates (do_numa_page
            // restores it only if the migration fails), and a PROT_NONE entry cannot be in a
            // TLB (the scan flushed it), so unmapping it flushes nothing (x86 pte_accessible)
            ctx.mem.migrate_by(page, 0, MoveBy::OsBatch)?;
            if self.take_fast_frame(page, main_free) {
                self.stats.promoted_small_zone += 1;
            }
            self.lru.move_to(page, 0);
            self.stats.promoted += 1;
            self.row.promoted += 1;
            if self.adapt_period {
                self.update_scan_period(ctx);
            }
            return Ok(true);
        }
        self.stats.promote_no_room += 1;
        // kswapd frees up to the promotion watermark, and at least what a promotion needs
        // (on a node of a few hundred pages the watermarks' steps round down to 0)
        let target = match self.mode {
            Mode::Autonuma => self.wm.promo,
            Mode::Tpp => self.wm.demote,
        }
        .max(mark + 1);
        self.kswapd(target, ctx)?;
        Ok(false)
    }

    /// How many scans ran, and the interval they are meant to run at, ns (the scan period in
    /// force, or the scan delay before the first scan): the policy's activations
    /// (docs/policies.md, "Activations and warnings"). The scans start from accesses, not from engine periods (the policy declares no
    /// period), so the engine cannot count them itself.
    pub fn scan_activity(&self) -> (u64, f64) {
        let every = if self.scan_period_ns > 0.0 { self.scan_period_ns } else { self.scan_delay_ns.max(self.task_scan_min_ns(0)) };
        (self.stats.scans, every)
    }

    /// `task_scan_min` for a resident set of `rss` pages, ns: scanning the whole RSS one
    /// `scan_size` at a time takes `scan_period_ms`, but the scanner never covers more than
    /// MAX_SCAN_WINDOW (2560 MB) of address space per `rate_window_ms` (the floor).
    pub fn task_scan_min_ns(&self, rss: u64) -> f64 {
        let windows = if self.scan_size_mb < MAX_SCAN_WINDOW_MB { MAX_SCAN_WINDOW_MB / self.scan_size_mb } else { 1 };
        let floor = self.rate_window_ns / windows as f64;
        (self.scan_period_min_ns / self.nr_scan_windows(rss) as f64).max(floor)
    }

    /// `task_nr_scan_windows`: the RSS's windows of `scan_size` (an empty RSS counts as one).
    fn nr_scan_windows(&self, rss: u64) -> u64 {
        rss.max(1).div_ceil(self.scan_pages.max(1))
    }

    /// `task_scan_max` for a resident set of `rss` pages, ns: `scan_period_max_ms` over the
    /// RSS's scan windows, not under `task_scan_min`.
    pub fn task_scan_max_ns(&self, rss: u64) -> f64 {
        (self.scan_period_max_ms * 1e6 / self.nr_scan_windows(rss) as f64).max(self.task_scan_min_ns(rss))
    }

    /// A fault just promoted a page, so the kernel counts it for the task (for its new,
    /// top-tier node): the first such fault after the scanner completed a pass runs
    /// `task_numa_placement`, whose `update_task_scan_period` doubles the period of a task
    /// whose counted faults are all private and remote (`local + shared == 0`), up to
    /// `task_scan_max`, and puts the next scan one new period away.
    fn update_scan_period(&mut self, ctx: &Ctx) {
        let seq = self.hint.stats.passes;
        if seq == self.placement_seq || self.scan_period_ns == 0.0 {
            return;
        }
        self.placement_seq = seq;
        self.scan_period_ns = (self.scan_period_ns * 2.0).min(self.task_scan_max_ns(ctx.pages as u64));
        self.next_scan_ns = ctx.now.ns + self.scan_period_ns;
        self.stats.scan_period_doublings += 1;
    }

    /// One `task_numa_work`: arm the next part of the address space.
    fn scan(&mut self, ctx: &mut Ctx) {
        let now = ctx.now.ns;
        if self.scan_period_ns == 0.0 {
            // task_tick_numa sets the period once the task has run for the scan delay
            // (task_scan_start = task_scan_min for a task in no NUMA group), from the RSS at
            // that time; in tiering mode task_numa_fault ignores faults on slow-tier pages
            // and top-tier pages are not scanned, so update_task_scan_period never runs and
            // the period stays
            self.scan_period_ns = self.task_scan_min_ns(ctx.pages as u64);
        }
        self.next_scan_ns = now + self.scan_period_ns;
        self.grow(ctx.pages);
        let pagemap = ctx.pagemap;
        let mem = &*ctx.mem;
        let pass = self.hint.scan(
            ctx.pages,
            |p| pagemap.page_addr(p),
            self.scan_pages,
            now,
            |p| {
                let t = mem.tier(p);
                t != 0 && t != UNPLACED
            },
        );
        self.stats.scans += 1;
        self.stats.ptes_armed += pass.armed;
        self.stats.ptes_scanned += pass.scanned;
        let passed = pass.scanned - pass.armed;
        if passed > 0 && self.pte_scan_ns > 0.0 {
            ctx.mem.charge(Charge { what: "NUMA scan (PTEs passed over)", ns: passed as f64 * self.pte_scan_ns, halts: true, energy_j: 0.0 });
        }
        if pass.armed > 0 {
            if self.pte_update_ns > 0.0 {
                ctx.mem.charge(Charge { what: "NUMA scan (PTE updates)", ns: pass.armed as f64 * self.pte_update_ns, halts: true, energy_j: 0.0 });
            }
            if self.tlb_flush_ns > 0.0 {
                ctx.mem.charge(Charge { what: "NUMA scan (TLB flush)", ns: self.tlb_flush_ns, halts: true, energy_j: 0.0 });
            }
        }
        self.row.time_ms = now / 1e6;
        self.row.armed = pass.armed;
        self.row.threshold_ms = self.threshold_ms();
        self.row.fast_free = self.free_fast(ctx.mem);
        self.rows.push(self.row);
        self.row = Row::default();
    }

    /// A hint fault on `page` with latency `lat_ns`: promote or not. Returns whether it moved.
    fn on_hint_fault(&mut self, page: PageId, lat_ns: f64, ctx: &mut Ctx) -> Result<bool> {
        self.stats.hint_faults += 1;
        self.row.faults += 1;
        if self.hint_fault_ns > 0.0 {
            ctx.mem.charge(Charge { what: "NUMA hint fault", ns: self.hint_fault_ns, halts: true, energy_j: 0.0 });
        }
        if ctx.mem.tier(page) == 0 {
            self.stats.faults_on_fast += 1;
            return Ok(false);
        }
        let now_ms = ctx.now.ns / 1e6;
        match self.mode {
            Mode::Autonuma => {
                let fast = ctx.mem.capacity(0);
                let enough = self.wm.promo + (fast / 16).max((1u64 << 30) / ctx.mem.page_bytes());
                // pgdat_free_space_enough: either zone (the small one with its protection)
                let dma_enough = self.dma_pages > 0 && self.usable_dma() > self.dma_promo + (enough - self.wm.promo);
                if self.usable_main(ctx.mem) > enough || dma_enough {
                    self.threshold_ms = 0.0;
                    let moved = self.try_promote(page, self.wm.high, ctx)?;
                    self.stats.promoted_free_space += moved as u64;
                    return Ok(moved);
                }
                self.adjust_threshold(now_ms, ctx.time_scale);
                if lat_ns / 1e6 >= self.threshold_ms() {
                    self.stats.over_threshold += 1;
                    return Ok(false);
                }
                self.stats.candidates += 1;
                if self.rate_limited(now_ms, ctx.time_scale) {
                    self.stats.rate_limited += 1;
                    return Ok(false);
                }
                self.try_promote(page, self.wm.high, ctx)
            }
            Mode::Tpp => {
                if !self.lru.is_active(page) {
                    self.stats.activations += 1;
                    if self.tpp_activate_on_fault {
                        self.lru.activate(page);
                    } else {
                        self.lru.mark_accessed(page);
                    }
                    return Ok(false);
                }
                let mark = if self.tpp_promote_above_min { self.wm.min } else { self.wm.high };
                self.try_promote(page, mark, ctx)
            }
        }
    }
}

impl Policy for NumaTiering {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let pb = ctx.mem.page_bytes();
        let fast = ctx.mem.capacity(0);
        let total: u64 = (0..ctx.mem.tiers()).map(|t| ctx.mem.capacity(t as TierId)).fold(0u64, |a, c| a.saturating_add(c));
        self.wm = match self.given_watermarks()? {
            Some([min, low, high, promo]) => Watermarks { min, low, high, promo, demote: 0 },
            None => Watermarks::compute(
                fast,
                total,
                pb,
                self.min_free_kbytes,
                self.watermark_scale_factor,
                if self.mode == Mode::Tpp { self.demote_scale_factor } else { 0 },
            ),
        };
        if self.dma_pages > 0 {
            let [low, high, promo, prot] = self.dma_given;
            for (i, (a, b)) in [(low, high), (high, promo)].into_iter().enumerate() {
                if b < a {
                    return Err(crate::error::Error::config(
                        format!("autonuma-tiering:{}", DMA_NAMES[i + 1]),
                        format!("{b} is under {} = {a} (the kernel's watermarks rise: low ≤ high ≤ promo)", DMA_NAMES[i]),
                    ));
                }
            }
            if self.dma_pages.saturating_add(self.other_fast) > fast {
                return Err(crate::error::Error::config(
                    "autonuma-tiering:dma_zone_pages",
                    format!("{} pages and fast_other_pages {} do not fit in the fast tier ({fast} pages)", self.dma_pages, self.other_fast),
                ));
            }
            // zone_watermark_ok with classzone ZONE_MOVABLE: each mark plus lowmem_reserve
            (self.dma_low, self.dma_high, self.dma_promo) = (low + prot, high + prot, promo + prot);
        }
        if self.other_fast > fast {
            return Err(crate::error::Error::config(
                "autonuma-tiering:fast_other_pages",
                format!("{} pages do not fit in the fast tier ({fast} pages)", self.other_fast),
            ));
        }
        self.scan_pages = (self.scan_size_mb << 20) / pb;
        self.rate_limit_pages = (self.rate_limit_mbps << 20) / pb;
        self.lru = Lru::new(ctx.mem.tiers(), pb);
        let m = &ctx.platform.platform.migration;
        if self.hint_fault_ns < 0.0 {
            self.hint_fault_ns = m.fault_ns;
        }
        if self.tlb_flush_ns < 0.0 {
            self.tlb_flush_ns = m.tlb_shootdown_ns;
        }
        self.grow(ctx.pages);
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.grow(page as usize + 1);
        self.now_ns = ctx.now.ns;
        self.kswapd_nap_over(ctx);
        let main_free = self.usable_main(ctx.mem);
        let fits = main_free > self.wm.low || (self.dma_pages > 0 && self.usable_dma() > self.dma_low);
        let t = if fits { 0 } else { ctx.mem.first_free_from(1).or_else(|| ctx.mem.first_free_from(0)).unwrap_or(0) };
        if t == 0 {
            self.take_fast_frame(page, main_free);
        }
        self.lru.add(page, t);
        t
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, _write: bool, ctx: &mut Ctx) -> Served {
        self.lru.touch(page);
        self.now_ns = ctx.now.ns;
        self.kswapd_nap_over(ctx);
        if self.mode == Mode::Tpp && ctx.mem.free(0) < self.wm.demote {
            // TPP wakes kswapd at every allocation and tick below the demotion watermark
            let _ = self.kswapd(self.wm.demote.saturating_sub(1), ctx);
        }
        // task_numa_work runs when the task returns to user space at or after numa_next_scan
        // (after the allocation that may have woken kswapd): before this access
        if ctx.now.ns >= self.next_scan_ns && ctx.pages > 0 {
            self.scan(ctx);
        }
        if let Some(lat) = self.hint.on_access(page, ctx.now.ns) {
            if let Ok(true) = self.on_hint_fault(page, lat, ctx) {
                return Served::by(0);
            }
        }
        Served::RESIDENT
    }

    /// One activation per NUMA scan (none before scan_delay); scans start from accesses.
    fn activity(&self) -> super::Activity {
        let (times, every) = self.scan_activity();
        super::Activity::Ran { times, every: crate::units::Period::Ns(every as u64) }
    }

    fn report(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> =
            self.rows.iter().map(|r| json!([r.time_ms, r.armed, r.faults, r.promoted, r.demoted, r.threshold_ms, r.fast_free])).collect();
        let mut v = json!({
            "name": self.name(),
            "scan_period_min_ms": self.scan_period_min_ns / 1e6,
            "scan_delay_ms": self.scan_delay_ns / 1e6,
            "scan_period_ms": self.scan_period_ns / 1e6,
            "scan_pages": self.scan_pages,
            "hot_threshold_ms": self.hot_threshold_ms,
            "threshold_ms": self.threshold_ms(),
            "rate_limit_pages_per_s": self.rate_limit_pages,
            "watermarks": self.wm,
            "counters": self.stats,
            "hint_faults": self.hint.stats,
            "lru": self.lru.stats,
            "timeseries": {
                "columns": ["time_ms", "ptes_armed", "hint_faults", "promoted", "demoted", "threshold_ms", "fast_free_pages"],
                "rows": rows,
            },
        });
        if self.dma_pages > 0 {
            // the small zone's watermarks with its protection added, and its free frames at the end
            v["small_zone"] = json!({"pages": self.dma_pages, "free": self.free_dma(), "low": self.dma_low, "high": self.dma_high, "promo": self.dma_promo});
        }
        v
    }
}

// ---------------------------------------------------------------------------- parameters

const SCAN_PERIOD: ParamSpec = ParamSpec {
    name: "scan_period_ms",
    ty: ParamType::Float { min: 1e-6, max: 1e9 },
    unit: "ms of simulated time",
    default: "1000",
    source: "sysctl kernel.numa_balancing_scan_period_min_ms default 1000 (Documentation/admin-guide/sysctl/kernel.rst); kernel/sched/fair.c task_scan_min divides it by the RSS's scan windows, not less than the MAX_SCAN_WINDOW floor (see rate_window_ms); autonuma-tiering then doubles it after each pass that led to a promotion (scan_period_adapt)",
    help: "time to scan the whole resident set: the scan period is this / ceil(RSS / scan_size) at the end of the scan delay, and at least rate_window_ms × scan_size_mb / 2560",
};
const RATE_WINDOW: ParamSpec = ParamSpec {
    name: "rate_window_ms",
    ty: ParamType::Float { min: 1e-6, max: 1e9 },
    unit: "ms of simulated time",
    default: "1000",
    source: "the kernel's one-second window: kernel/sched/fair.c task_scan_min (at most MAX_SCAN_WINDOW = 2560 MB scanned per second) and numa_promotion_rate_limit (candidates counted per 1 s window); a parameter so that a time scale divides it with the other periods",
    help: "window of the per-second limits: at most 2560 MiB of address space scanned, and (autonuma-tiering) at most promote_rate_limit_mib_per_s of promotion candidates, per window",
};
const SCAN_DELAY: ParamSpec = ParamSpec {
    name: "scan_delay_ms",
    ty: ParamType::Float { min: 0.0, max: 1e9 },
    unit: "ms of simulated time",
    default: "1000",
    source: "sysctl kernel.numa_balancing_scan_delay_ms default 1000",
    help: "no scan before this time",
};
const SCAN_SIZE: ParamSpec = ParamSpec {
    name: "scan_size_mb",
    ty: ParamType::Int { min: 1, max: 1 << 30 },
    unit: "MiB per scan window",
    default: "256",
    source: "sysctl kernel.numa_balancing_scan_size_mb default 256; kernel/sched/fair.c task_numa_work: a scan ends after the first chunk of this size that changed a PTE, or after 8 × this size (virtpages) that changed none",
    help: "chunk of address space (pages of this many MiB) a scan arms; chunks that arm nothing (top-tier pages) cost only the scan's 8 × budget",
};
const WSF: ParamSpec = ParamSpec {
    name: "watermark_scale_factor",
    ty: ParamType::Int { min: 1, max: 3000 },
    unit: "1/10000 of the fast tier",
    default: "10",
    source: "sysctl vm.watermark_scale_factor default 10 = 0.1 % (Documentation/admin-guide/sysctl/vm.rst; mm/page_alloc.c __setup_per_zone_wmarks)",
    help: "distance between the min, low, high and promo watermarks",
};
const MIN_FREE: ParamSpec = ParamSpec {
    name: "min_free_kbytes",
    ty: ParamType::Int { min: -1, max: 1 << 40 },
    unit: "KiB",
    default: "-1",
    source: "-1 = the kernel's formula int_sqrt(16 × memory in kB) clamped to [128, 262144] (mm/page_alloc.c calculate_min_free_kbytes) over the simulated tiers; its share for the fast tier is the min watermark",
    help: "the min watermark of the whole memory, shared among tiers by size",
};
const HINT_FAULT: ParamSpec = ParamSpec {
    name: "hint_fault_ns",
    ty: ParamType::Float { min: -1.0, max: 1e9 },
    unit: "ns per hint fault",
    default: "-1",
    source:
        "-1 = the platform's migration.fault_ns (dram-dcpmm: 5 µs, seed 000 §5.1); a minor fault that migrates nothing costs less, so this is an upper bound",
    help: "time the program loses per NUMA hint fault",
};
const PTE: ParamSpec = ParamSpec {
    name: "pte_update_ns",
    ty: ParamType::Float { min: 0.0, max: 1e9 },
    unit: "ns per PTE",
    default: "50",
    source: "tierkit's choice: one PTE read-modify-write under the page-table lock, a few cache misses; no published per-PTE figure was found",
    help: "cost of making one PTE PROT_NONE",
};
const PTE_SCAN: ParamSpec = ParamSpec {
    name: "pte_scan_ns",
    ty: ParamType::Float { min: 0.0, max: 1e9 },
    unit: "ns per PTE",
    default: "10",
    source: "tierkit's choice, as hyplacer's walk_ns_per_pte: change_pte_range reads the PTE in a sequential walk and tests it (already PROT_NONE, or its page's node is top tier) without writing; no published per-PTE figure was found",
    help: "cost of each PTE a scan covers but leaves (a top-tier page, or one already armed)",
};
const TLB: ParamSpec = ParamSpec {
    name: "tlb_flush_ns",
    ty: ParamType::Float { min: -1.0, max: 1e9 },
    unit: "ns per flush",
    default: "-1",
    source: "-1 = the platform's migration.tlb_shootdown_ns (dram-dcpmm: 3 µs, seed 000 §5.1)",
    help: "one TLB flush: per scan that changed PTEs and per kswapd demotion batch (a hint-fault promotion needs none: the PTE is PROT_NONE)",
};
pub(crate) const LRU_SCAN: ParamSpec = ParamSpec {
    name: "lru_scan_ns",
    ty: ParamType::Float { min: 0.0, max: 1e9 },
    unit: "ns per page scanned",
    default: "100",
    source: "tierkit's choice: an rmap walk and a PTE test-and-clear per page (a few cache misses); no published figure was found",
    help: "cost of looking at one page in an LRU scan",
};

const KSWAPD_BACKOFF: ParamSpec = ParamSpec {
    name: "kswapd_backoff_ms",
    ty: ParamType::Float { min: 0.0, max: 1e9 },
    unit: "ms of simulated time",
    default: "10000",
    source:
        "TPP patch 4/5 (kswapd_try_to_sleep) and mm/vmscan.c: after MAX_RECLAIM_RETRIES (16) kswapd runs that reclaim nothing, kswapd is not woken for 10 s",
    help: "how long kswapd stays asleep after 16 runs in a row that demoted nothing",
};

const WMARK_NAMES: [&str; 4] = ["wmark_min_pages", "wmark_low_pages", "wmark_high_pages", "wmark_promo_pages"];
const WMARK_SOURCE: &str = "-1 = from min_free_kbytes and watermark_scale_factor (the kernel's formula); give all four to use a real node's watermarks, e.g. its largest zone's min/low/high/promo in /proc/zoneinfo (tierkit validate adds the free pages the allocator leaves in the node's other zones, their low watermark plus lowmem protection)";

const WMARK_MIN: ParamSpec = ParamSpec {
    name: "wmark_min_pages",
    ty: ParamType::Int { min: -1, max: 1 << 40 },
    unit: "pages",
    default: "-1",
    source: WMARK_SOURCE,
    help: "the fast tier's min watermark (with the three below: explicit watermarks)",
};
const WMARK_LOW: ParamSpec = ParamSpec {
    name: "wmark_low_pages",
    ty: ParamType::Int { min: -1, max: 1 << 40 },
    unit: "pages",
    default: "-1",
    source: WMARK_SOURCE,
    help: "the fast tier's low watermark: first touch goes to the fast tier while its free frames exceed it",
};
const WMARK_HIGH: ParamSpec = ParamSpec {
    name: "wmark_high_pages",
    ty: ParamType::Int { min: -1, max: 1 << 40 },
    unit: "pages",
    default: "-1",
    source: WMARK_SOURCE,
    help: "the fast tier's high watermark: a promotion needs free frames above it + 1 (migrate_balanced_pgdat)",
};
const WMARK_PROMO: ParamSpec = ParamSpec {
    name: "wmark_promo_pages",
    ty: ParamType::Int { min: -1, max: 1 << 40 },
    unit: "pages",
    default: "-1",
    source: WMARK_SOURCE,
    help: "the fast tier's promo watermark: kswapd demotes until the free frames exceed it (pgdat_balanced in tiering mode)",
};
const FAST_OTHER: ParamSpec = ParamSpec {
    name: "fast_other_pages",
    ty: ParamType::Int { min: 0, max: 1 << 40 },
    unit: "pages",
    default: "0",
    source: "tierkit's model of a shared node: memory of other programs on the fast node that kswapd can demote (on a real node, its LRU pages when the program starts: Active/Inactive anon and file in /sys/devices/system/node/nodeN/meminfo); they are older than the program's pages, so tierkit demotes them first",
    help: "pages of the fast tier's capacity held by other programs at the start; kswapd demotes them before the program's (counted in demoted and demoted_other)",
};
const KSWAPD_NAP: ParamSpec = ParamSpec {
    name: "kswapd_nap_ms",
    ty: ParamType::Float { min: 0.0, max: 1e9 },
    unit: "ms of simulated time",
    default: "100",
    source: "mm/vmscan.c kswapd_try_to_sleep: once the node is balanced kswapd sleeps HZ/10 first, and if the node is unbalanced at its end (allocations took the frames it freed) it reclaims again without a wake-up",
    help: "after kswapd balanced the fast tier, when it looks again: free frames at or under promo then make it demote again",
};

const KSWAPD_PACE: ParamSpec = ParamSpec {
    name: "kswapd_pages_per_s",
    ty: ParamType::Float { min: 0.0, max: 1e15 },
    unit: "pages/s",
    default: "0",
    source: "tierkit's model of kswapd as a thread: Linux's kswapd demotes on its own CPU at a finite pace while the program goes on faulting (docs/validation.md: in the testbed VM its pgdemote_kswapd rose by up to 11,000-12,000 pages per VM second); 0 = it frees its whole run at the instant it is woken, as before",
    help: "pace at which the frames of kswapd's demoted pages become free: until then first touches and promotions cannot take them, and a refused promotion finds kswapd busy (kswapd_wakeups_busy) instead of starting a run; 0 = at once",
};

const DMA_NAMES: [&str; 4] = ["dma_wmark_low_pages", "dma_wmark_high_pages", "dma_wmark_promo_pages", "dma_protection_pages"];
const DMA_SOURCE: &str = "a real node's small zone in /proc/zoneinfo (the testbed VM's node 0: DMA, low 220 / high 264 / promo 308, protection 487); mm/page_alloc.c zone_watermark_ok adds the zone's lowmem_reserve for the allocation's classzone (ZONE_MOVABLE for user pages and promotions) to each mark";
const DMA_ZONE: ParamSpec = ParamSpec {
    name: "dma_zone_pages",
    ty: ParamType::Int { min: 0, max: 1 << 40 },
    unit: "pages",
    default: "0",
    source: "Linux checks watermarks per zone: a node with a small DMA zone beside DMA32 is balanced for kswapd once either zone is (mm/vmscan.c pgdat_balanced) and takes a promotion if either zone has room (mm/migrate.c migrate_balanced_pgdat); tierkit validate passes node 0's DMA zone's free pages at the program's start; 0 = one zone (no second zone)",
    help: "frames of the fast tier (inside its capacity) in a second, small zone with its own watermarks (dma_wmark_*): allocations and promotions take it only when the main zone is at or under its low watermark; kswapd stops once either zone is above its promo watermark; a promotion needs either zone above high + 1",
};
const DMA_LOW: ParamSpec = ParamSpec {
    name: "dma_wmark_low_pages",
    ty: ParamType::Int { min: 0, max: 1 << 40 },
    unit: "pages",
    default: "0",
    source: DMA_SOURCE,
    help: "the small zone's low watermark: allocations and promotions take its frames while its free frames exceed this + dma_protection_pages (get_page_from_freelist)",
};
const DMA_HIGH: ParamSpec = ParamSpec {
    name: "dma_wmark_high_pages",
    ty: ParamType::Int { min: 0, max: 1 << 40 },
    unit: "pages",
    default: "0",
    source: DMA_SOURCE,
    help: "the small zone's high watermark: a promotion is allowed if its free frames exceed this + 1 + dma_protection_pages (migrate_balanced_pgdat)",
};
const DMA_PROMO: ParamSpec = ParamSpec {
    name: "dma_wmark_promo_pages",
    ty: ParamType::Int { min: 0, max: 1 << 40 },
    unit: "pages",
    default: "0",
    source: DMA_SOURCE,
    help: "the small zone's promo watermark: kswapd stops once its free frames exceed this + dma_protection_pages, whatever the main zone's (pgdat_balanced)",
};
const DMA_PROT: ParamSpec = ParamSpec {
    name: "dma_protection_pages",
    ty: ParamType::Int { min: 0, max: 1 << 40 },
    unit: "pages",
    default: "0",
    source: "/proc/zoneinfo 'protection:' of the small zone at index ZONE_MOVABLE (lowmem_reserve, mm/page_alloc.c setup_per_zone_lowmem_reserve: the larger zones' managed pages / lowmem_reserve_ratio, 256 for DMA)",
    help: "the small zone's lowmem reserve against movable allocations, added to each of its watermarks",
};

const AUTONUMA_PARAMS: &[ParamSpec] = &[
    SCAN_PERIOD,
    SCAN_DELAY,
    SCAN_SIZE,
    RATE_WINDOW,
    ParamSpec {
        name: "hot_threshold_ms",
        ty: ParamType::Float { min: 1e-9, max: 1e9 },
        unit: "ms",
        default: "1000",
        source: "sysctl kernel.numa_balancing_hot_threshold_ms default 1000 (kernel/sched/fair.c sysctl_numa_balancing_hot_threshold = MSEC_PER_SEC)",
        help: "a slow page whose hint-fault latency is under this is a promotion candidate",
    },
    ParamSpec {
        name: "promote_rate_limit_mib_per_s",
        ty: ParamType::Int { min: 1, max: 1 << 40 },
        unit: "MiB/s",
        default: "65536",
        source: "sysctl kernel.numa_balancing_promote_rate_limit_MBps default 65536 (Documentation/admin-guide/sysctl/kernel.rst)",
        help: "most promotion candidates per second (and the target of the threshold adjustment)",
    },
    ParamSpec {
        name: "scan_period_max_ms",
        ty: ParamType::Float { min: 1e-6, max: 1e9 },
        unit: "ms",
        default: "60000",
        source: "sysctl kernel.numa_balancing_scan_period_max_ms default 60000: numa_promotion_adjust_threshold's statistics interval, and (over the RSS's scan windows) the longest scan period (kernel/sched/fair.c task_scan_max)",
        help: "interval between two threshold adjustments; the scan period grows no longer than this / ceil(RSS / scan_size)",
    },
    ParamSpec {
        name: "scan_period_adapt",
        ty: ParamType::Bool,
        unit: "",
        default: "true",
        source: "kernel/sched/fair.c update_task_scan_period, run by task_numa_placement from task_numa_fault: in tiering mode only promoted faults are counted (mm/memory.c do_numa_page passes the target node after a successful migration; task_numa_fault returns early for a slow node), and a single task's are private and remote, so local + shared = 0 and the period doubles (docs/validation.md: the testbed VM's kernel scanned a phases run at about 2.2, 5.0 and 9.4 s)",
        help: "after each completed pass of the scanner, the first promotion doubles the scan period (up to scan_period_max_ms over the RSS's windows) and puts the next scan one period later; false = the period stays at its start value",
    },
    WSF,
    MIN_FREE,
    HINT_FAULT,
    PTE,
    PTE_SCAN,
    TLB,
    LRU_SCAN,
    KSWAPD_BACKOFF,
    WMARK_MIN,
    WMARK_LOW,
    WMARK_HIGH,
    WMARK_PROMO,
    FAST_OTHER,
    KSWAPD_NAP,
    KSWAPD_PACE,
    DMA_ZONE,
    DMA_LOW,
    DMA_HIGH,
    DMA_PROMO,
    DMA_PROT,
];

const TPP_PARAMS: &[ParamSpec] = &[
    SCAN_PERIOD,
    SCAN_DELAY,
    SCAN_SIZE,
    RATE_WINDOW,
    ParamSpec {
        name: "demote_scale_factor",
        ty: ParamType::Int { min: 1, max: 10000 },
        unit: "1/10000 of the fast tier",
        default: "200",
        source: "TPP patch 3/5 (vm.demote_scale_factor, default 200 = 2 %); TPP paper §5.2",
        help: "kswapd keeps this much of the fast tier free (at least twice the high watermark)",
    },
    ParamSpec {
        name: "activate",
        ty: ParamType::Choice { options: &["fault", "mark-accessed"] },
        unit: "",
        default: "fault",
        source:
            "TPP paper §5.3 (a fault on an inactive page moves it to the active list; the next promotes); mark-accessed = the patch's mark_page_accessed call",
        help: "what a hint fault does to an inactive slow page: activate it, or mark it accessed",
    },
    ParamSpec {
        name: "promote_watermark",
        ty: ParamType::Choice { options: &["min", "high"] },
        unit: "",
        default: "min",
        source: "tierkit's reading of TPP §5.3 (promotion is not held to the allocation watermarks); high = the kernel's migrate_balanced_pgdat",
        help: "free frames a promotion needs above this watermark",
    },
    WSF,
    MIN_FREE,
    HINT_FAULT,
    PTE,
    PTE_SCAN,
    TLB,
    LRU_SCAN,
    KSWAPD_BACKOFF,
];

fn build(mode: Mode, p: &Params) -> NumaTiering {
    let is_auto = mode == Mode::Autonuma;
    NumaTiering {
        mode,
        scan_period_min_ns: p.float("scan_period_ms") * 1e6,
        scan_delay_ns: p.float("scan_delay_ms") * 1e6,
        rate_window_ns: p.float("rate_window_ms") * 1e6,
        scan_size_mb: p.int("scan_size_mb") as u64,
        hot_threshold_ms: if is_auto { p.float("hot_threshold_ms") } else { 0.0 },
        rate_limit_mbps: if is_auto { p.int("promote_rate_limit_mib_per_s") as u64 } else { u64::MAX >> 21 },
        scan_period_max_ms: if is_auto { p.float("scan_period_max_ms") } else { 60000.0 },
        adapt_period: is_auto && p.bool("scan_period_adapt"),
        placement_seq: 0,
        watermark_scale_factor: p.int("watermark_scale_factor") as u64,
        min_free_kbytes: p.int("min_free_kbytes"),
        demote_scale_factor: if is_auto { 0 } else { p.int("demote_scale_factor") as u64 },
        tpp_activate_on_fault: is_auto || p.text("activate") == "fault",
        tpp_promote_above_min: !is_auto && p.text("promote_watermark") == "min",
        hint_fault_ns: p.float("hint_fault_ns"),
        pte_update_ns: p.float("pte_update_ns"),
        pte_scan_ns: p.float("pte_scan_ns"),
        tlb_flush_ns: p.float("tlb_flush_ns"),
        lru_scan_ns: p.float("lru_scan_ns"),
        kswapd_backoff_ns: p.float("kswapd_backoff_ms") * 1e6,
        kswapd_nap_ns: if is_auto { p.float("kswapd_nap_ms") * 1e6 } else { 0.0 },
        wm_given: if is_auto { WMARK_NAMES.map(|n| p.int(n)) } else { [-1; 4] },
        dma_pages: if is_auto { p.int("dma_zone_pages") as u64 } else { 0 },
        dma_low: 0,
        dma_high: 0,
        dma_promo: 0,
        dma_given: if is_auto { DMA_NAMES.map(|n| p.int(n) as u64) } else { [0; 4] },
        in_dma: Vec::new(),
        dma_used: 0,
        other_fast: if is_auto { p.int("fast_other_pages") as u64 } else { 0 },
        kswapd_recheck_ns: 0.0,
        kswapd_pages_per_ns: if is_auto { p.float("kswapd_pages_per_s") / 1e9 } else { 0.0 },
        held_main: 0,
        held_dma: 0,
        held_since_ns: 0.0,
        now_ns: 0.0,
        scan_pages: 0,
        scan_period_ns: 0.0,
        next_scan_ns: p.float("scan_delay_ms") * 1e6,
        rate_limit_pages: 0,
        wm: Watermarks::default(),
        hint: HintFaults::new(),
        lru: Lru::new(2, 4096),
        nr_cand: 0,
        rl_start_ms: 0.0,
        rl_nr_cand: 0,
        th_start_ms: 0.0,
        th_nr_cand: 0,
        threshold_ms: 0.0,
        victims: Vec::new(),
        kswapd_failures: 0,
        kswapd_retry_ns: 0.0,
        stats: Stats::default(),
        rows: Vec::new(),
        row: Row::default(),
    }
}

/// `autonuma-tiering` from its parameters, as a value.
pub fn autonuma(p: &Params) -> NumaTiering {
    build(Mode::Autonuma, p)
}

/// `tpp` from its parameters, as a value.
pub fn tpp(p: &Params) -> NumaTiering {
    build(Mode::Tpp, p)
}

pub static AUTONUMA_TIERING: PolicyInfo = PolicyInfo {
    name: "autonuma-tiering",
    summary: "Linux NUMA balancing in memory-tiering mode: slow pages whose hint-fault latency is under a self-adjusting threshold are promoted (rate-limited); kswapd demotes the fast tier's inactive LRU tail",
    source: "Linux 5.18-6.1 kernel.numa_balancing=2 (Huang Ying; kernel/sched/fair.c should_numa_migrate_memory, numa_promotion_adjust_threshold; mm/vmscan.c); evaluated as Intel's tiering-0.4 autonuma in seed 004 §5.1",
    deploy: super::Deploy::Kernel,
    params: AUTONUMA_PARAMS,
    build: |p: &Params| Ok(Built::from(autonuma(p))),
};

pub static TPP: PolicyInfo = PolicyInfo {
    name: "tpp",
    summary: "TPP: hint faults promote slow pages only once they are on the active LRU list; kswapd proactively demotes to keep demote_scale_factor of the fast tier free",
    source: "Maruf et al., 'TPP: Transparent Page Placement for CXL-Enabled Tiered-Memory', ASPLOS 2023, §5, and its linux-mm patches",
    deploy: super::Deploy::NotLive { why: "Linux ships TPP's promotion path as autonuma-tiering; its proactive demotion watermark is not in mainline" },
    params: TPP_PARAMS,
    build: |p: &Params| Ok(Built::from(tpp(p))),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn autonuma_with(spec: &str) -> NumaTiering {
        let spec = crate::policy::PolicySpec::parse(spec).unwrap();
        autonuma(&Params::parse("autonuma-tiering", AUTONUMA_PARAMS, &spec).unwrap())
    }

    /// kernel/sched/fair.c task_scan_min with 4 KiB pages: 256 MiB = 65,536 pages a window.
    #[test]
    fn task_scan_min_divides_the_period_by_the_rss_windows_down_to_the_floor() {
        let mut a = autonuma_with("autonuma-tiering");
        a.scan_pages = 65_536;
        // an empty or small RSS is one window: the period itself
        assert_eq!(a.task_scan_min_ns(0), 1e9);
        assert_eq!(a.task_scan_min_ns(65_536), 1e9);
        // 4 windows (1 GiB + 1 page rounds up to 5): 250 ms, 200 ms
        assert_eq!(a.task_scan_min_ns(4 * 65_536), 250e6);
        assert_eq!(a.task_scan_min_ns(4 * 65_536 + 1), 200e6);
        // 100 windows: 10 ms, under the floor of 1000 ms / (2560 / 256) = 100 ms
        assert_eq!(a.task_scan_min_ns(100 * 65_536), 100e6);
        // before the first scan the activity's interval is the delay
        assert_eq!(a.scan_activity(), (0, 1e9));
        let b = autonuma_with("autonuma-tiering:scan_delay_ms=5,rate_window_ms=10");
        assert_eq!(b.scan_activity(), (0, 1e9), "the period (1 s here) when longer than the delay");
    }

    #[test]
    fn watermarks_of_the_dram_dcpmm_socket() {
        // 32 GiB DRAM + 256 GiB DCPMM in 4 KiB pages: memory 301,989,888 kB,
        // min_free_kbytes = int_sqrt(16 × that) = 69,511 (under the 262,144 cap);
        // pages_min = 17,377; DRAM's share (1/9) = 1,930; step = max(482, 8,388,608 × 10 / 10000
        // = 8,388) = 8,388
        let fast = 8_388_608;
        let w = Watermarks::compute(fast, 9 * fast, 4096, -1, 10, 200);
        assert_eq!(isqrt(301_989_888 * 16), 69_511);
        assert_eq!((w.min, w.low, w.high, w.promo), (1_930, 10_318, 18_706, 27_094));
        // TPP: 2 % of DRAM = 167,772 pages, more than twice high
        assert_eq!(w.demote, 167_772);
    }
}
