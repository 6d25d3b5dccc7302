//! `damon-tiering`: memory tiering by DAMON-based operation schemes (DAMOS), as Linux 6.11+
//! offers it with the `migrate_hot` and `migrate_cold` actions.
//!
//! Sources (rules restated, no code copied): Documentation/admin-guide/mm/damon/usage.rst
//! (schemes, access patterns, quotas, quota goals and their metrics), Documentation/mm/damon/
//! design.rst ("Operation Schemes": prioritization, quotas, aim-oriented feedback-driven
//! auto-tuning); `mm/damon/core.c` (`damos_adjust_quota`, `damos_set_effective_quota`,
//! `damon_feed_loop_next_input`, `damos_apply_scheme`) and `mm/damon/ops-common.c`
//! (`damon_hot_score`, `damon_cold_score`); the tiering setup of Honggyu Kim's (SK hynix)
//! "DAMON based tiered memory management for CXL memory" series (merged for 6.11) as the
//! kernel sample `samples/damon/mtier.c` and damo's tiering example configure it: a
//! promotion scheme on the slow node (`migrate_hot` to node 0, `nr_accesses >= 1` of 20,
//! any age, 200 MiB per 1 s quota, priority weights nr_accesses 100 / age 100, goal
//! `node_mem_used_bp` 99.7 % of node 0, filter: only young pages) and a demotion scheme on
//! the fast node (`migrate_cold` to node 1, `nr_accesses == 0`, 200 MiB per 1 s, goal
//! `node_mem_free_bp` 0.5 % of node 0, filter: young pages rejected); 5 ms sampling, 100 ms
//! aggregation, 10..1000 regions.
//!
//! What tierkit does:
//! * Monitoring: the [DAMON model](crate::tracking::damon) over the program's pages in
//!   virtual-address order (vaddr-style; the kernel setup monitors each node's physical
//!   range). A region that spans both tiers is acted on only for its pages on the scheme's
//!   source tier, and the quota is charged only for those pages (what a per-node scheme
//!   would see).
//! * Placement: first touch into the fastest tier with a free frame; with `wmark_low_pages`,
//!   into tier 0 only while more than that many of its frames are free (the page allocator's
//!   fast path takes a node only above its zone's low watermark and otherwise falls back to
//!   the next node without waking kswapd: a program's first touch leaves node 0 at its low
//!   watermark, measured in the testbed VM, docs/validation.md).
//! * Every `apply_aggrs` aggregation intervals (DAMOS apply interval; default 10, mtier.c's 1 s),
//!   `migrate_cold` runs first (fast-tier pages of regions with `nr_accesses == 0` and age
//!   at least `cold_min_age` go to the fastest slower tier with room), then `migrate_hot`
//!   (slow-tier pages of regions with `nr_accesses >= hot_min_accesses` go to tier 0 while it
//!   has more than `wmark_min_pages` free frames: DAMOS allocates the target page with
//!   `GFP_NOWAIT | __GFP_THISNODE`, which may go below the low watermark down to the min one,
//!   mm/damon/paddr.c `__damon_pa_migrate_folio_list`, mm/vmscan.c `alloc_migrate_folio`).
//! * Other programs' pages on tier 0 (`fast_other_pages`): inside its capacity, outside the
//!   trace, never accessed. The kernel's `migrate_cold` monitors node 0's physical range, so
//!   it demotes them too, first (they are older than any of the program's regions), within
//!   its quota, and counts them in its `sz_applied` (here: `moved_pages`). In the kernel setup they are two kdamonds running side by side;
//!   tierkit runs demotion first so that promotion can use the frames it frees.
//! * Quotas (`damos_adjust_quota`): each scheme may act on at most its effective quota of
//!   bytes per quota reset interval. Windows are timed on the sampling boundaries (period
//!   index × `sample`), so an apply interval equal to the reset interval opens a window at
//!   every application, as kdamond's (each sampling interval lasts at least `sample`). Candidate regions get a priority score (hot score for
//!   `migrate_hot`, 99 minus it for `migrate_cold`: the access frequency as a percentage of
//!   the maximum, and log2 of the age in seconds, negative for unaccessed regions, mixed by
//!   the weights); the scores are binned by bytes and the lowest score whose cumulated bytes
//!   (highest score down) reach the quota becomes the minimum: regions below it are
//!   skipped, the others are acted on in address order until the quota is spent. A region
//!   larger than what is left of the quota is acted on for its first pages only (the kernel
//!   splits the region there; tierkit leaves the region whole). Bytes are charged whether
//!   or not a page then moves (filtered out, no free frame), as the kernel charges the
//!   region's size. A region acted on has its age reset.
//! * Goals (`damos_set_effective_quota`, `damon_feed_loop_next_input`): at each reset, with a
//!   goal set, score = current / target × 10000 of the goal's metric (`node_mem_used_bp` or
//!   `node_mem_free_bp` of tier 0, from its used frames); the feedback input (bytes ×
//!   10000) becomes max(input, 10000) × (1 + (10000 − score) / 10000), never below 10000,
//!   and directly 10000 when score ≥ 20000; the effective quota is input / 10000 bytes,
//!   capped by the size quota. With no goal the effective quota is the size quota. So a
//!   scheme with a goal starts from 1 byte and grows geometrically while under its goal.
//! * Young filter (`young_filter`): promotion moves only pages whose accessed bit is set,
//!   demotion skips them; either way the bit is cleared (DAMOS `young` filter as the paddr
//!   operations apply it). Each page checked costs `check_ns`. `hot_young_filter=false`
//!   drops promotion's filter only: a kernel before 6.14 has no allow filters, so the setup
//!   tierkit run makes on 6.12 filters migrate_cold alone.
//! * Costs: DAMON's checks (`check_ns` per region per sampling interval, see the tracking
//!   model) and the filter checks are charged to the program (the kernel runs them in the
//!   kdamond thread; tierkit charges them as if the program paid, the conservative choice).
//!   Pages move with [`MoveBy::OsBatch`] (per-page cost and copy); an application that moves
//!   pages is charged one kernel entry (the platform's `fault_ns`) and one TLB shootdown per
//!   `batch_pages` pages moved: `migrate_pages()` unmaps a batch of folios and flushes the
//!   TLBs once for the batch (batched migration, Linux 6.3+, `NR_MAX_BATCHED_MIGRATION`).
//! * A sampling boundary that the clock passes while the program is stopped by this
//!   policy's own work is skipped (kdamond was busy migrating; the kernel does not make up
//!   missed samples either).
//!
//! Left out: the automatic tuning of the monitoring intervals (`intervals_goal`), the time
//! quota (`ms`), the DAMOS watermarks (a scheme switched on and off by a free-memory metric;
//! not the zones' watermarks above), the resume point of a quota window (`charge_addr_from`), and
//! filters other than `young`.

use serde::Serialize;
use serde_json::json;

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::{Error, Result};
use crate::mechanics::{Charge, MoveBy, TierId, UNPLACED};
use crate::pagemap::PageId;
use crate::tracking::damon::{Damon, DamonAttrs, DamonStats};
use crate::units::Period;

/// The feedback loop's goal score and smallest input (`damon_feed_loop_next_input`).
const GOAL_SCORE: u64 = 10_000;
const MIN_INPUT: u64 = 10_000;
/// Highest priority score of a region (`DAMOS_MAX_SCORE`), and the subscore and age scales
/// of `damon_hot_score` (`DAMON_MAX_SUBSCORE`, `DAMON_MAX_AGE_IN_LOG`).
const MAX_SCORE: u64 = 99;
const MAX_SUBSCORE: u64 = 100;
const MAX_AGE_IN_LOG: i64 = 32;

/// The next input of DAMOS's proportional feedback loop: grow `last` by the relative
/// shortfall of `score` from 10000, or shrink it by the relative excess; 10000 at least, and
/// 10000 outright when the score is twice the goal or more.
pub fn feed_loop_next_input(last: u64, score: u64) -> u64 {
    if score == GOAL_SCORE {
        return last;
    }
    if score >= 2 * GOAL_SCORE {
        return MIN_INPUT;
    }
    let diff = score.abs_diff(GOAL_SCORE) as u128;
    let comp = (last as u128 * diff / GOAL_SCORE as u128).min(u64::MAX as u128) as u64;
    if score > GOAL_SCORE {
        last.saturating_sub(comp).max(MIN_INPUT)
    } else {
        last.saturating_add(comp)
    }
}

/// A region's hotness in [0, 99]: its access frequency (percent of the maximum) and the log2
/// of its age in seconds (negated when the region was not accessed), each scaled to
/// [0, 100], mixed by the weights (`damon_hot_score`).
pub fn hot_score(nr_accesses: u32, age: u32, max_nr_accesses: u32, aggr_ns: u64, w_nr: u64, w_age: u64) -> u64 {
    let freq = nr_accesses as u64 * MAX_SUBSCORE / max_nr_accesses.max(1) as u64;
    let mut age_s = (age as u128 * aggr_ns as u128 / 1_000_000_000) as u64;
    let mut age_log: i64 = 0;
    while age_log < MAX_AGE_IN_LOG && age_s > 0 {
        age_log += 1;
        age_s >>= 1;
    }
    if freq == 0 {
        age_log = -age_log;
    }
    let age_sub = (age_log + MAX_AGE_IN_LOG) as u64 * MAX_SUBSCORE / MAX_AGE_IN_LOG as u64 / 2;
    let mixed = w_nr * freq + w_age * age_sub;
    let hot = mixed.checked_div(w_nr + w_age).unwrap_or(mixed);
    hot * MAX_SCORE / MAX_SUBSCORE
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// `migrate_hot`: slow-tier pages to tier 0.
    Hot,
    /// `migrate_cold`: tier-0 pages to a slower tier.
    Cold,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    /// `node_mem_used_bp` of tier 0.
    UsedBp,
    /// `node_mem_free_bp` of tier 0.
    FreeBp,
}

/// What one scheme did (`stats.policy.schemes.*`).
#[derive(Clone, Debug, Default, Serialize)]
struct SchemeStats {
    /// applications (aggregation intervals at which the scheme ran)
    applies: u64,
    /// quota windows started, and windows that ended with the quota used up
    windows: u64,
    quota_exceeds: u64,
    /// regions matching the access pattern with pages on the source tier
    candidate_regions: u64,
    /// regions skipped for a priority score under the minimum
    below_min_score: u64,
    /// regions acted on, and the bytes charged to the quota for them
    applied_regions: u64,
    charged_bytes: u64,
    /// pages moved (other programs' included); pages left by the young filter; pages left
    /// for want of a free frame
    moved_pages: u64,
    /// of `moved_pages`: other programs' pages (`fast_other_pages`)
    moved_other_pages: u64,
    filtered_young: u64,
    no_room: u64,
    /// effective quota at the last reset, bytes (u64::MAX: no limit)
    last_esz_bytes: u64,
}

struct Scheme {
    action: Action,
    min_nr: u32,
    max_nr: u32,
    min_age: u32,
    enabled: bool,
    /// size quota, bytes per window (0: none)
    sz: u64,
    reset_ns: f64,
    goal: Option<(Metric, u64)>,
    w_nr: u64,
    w_age: u64,
    /// the DAMOS `young` filter applies to this scheme
    young: bool,
    // quota state
    esz: u64,
    esz_bp: u64,
    charged: u64,
    charged_from_ns: f64,
    started: bool,
    stats: SchemeStats,
}

impl Scheme {
    fn name(&self) -> &'static str {
        match self.action {
            Action::Hot => "migrate_hot",
            Action::Cold => "migrate_cold",
        }
    }

    fn limited(&self) -> bool {
        self.esz != u64::MAX
    }

    /// Start a new quota window if the last one is over, and set its effective quota.
    fn adjust_quota(&mut self, now_ns: f64, used: u64, capacity: u64) {
        if self.started && now_ns < self.charged_from_ns + self.reset_ns {
            return;
        }
        if self.started && self.limited() && self.charged >= self.esz {
            self.stats.quota_exceeds += 1;
        }
        self.started = true;
        self.charged_from_ns = now_ns;
        self.charged = 0;
        self.stats.windows += 1;
        let size_quota = if self.sz == 0 { u64::MAX } else { self.sz };
        self.esz = match self.goal {
            None => size_quota,
            Some((metric, target_bp)) => {
                let cap = capacity.max(1) as u128;
                let current_bp = match metric {
                    Metric::UsedBp => used as u128 * 10_000 / cap,
                    Metric::FreeBp => (capacity - used) as u128 * 10_000 / cap,
                };
                let score = (current_bp * 10_000 / target_bp.max(1) as u128).min(u64::MAX as u128) as u64;
                self.esz_bp = feed_loop_next_input(self.esz_bp.max(MIN_INPUT), score);
                (self.esz_bp / 10_000).min(size_quota)
            }
        };
        self.stats.last_esz_bytes = self.esz;
    }

    fn matches(&self, nr: u32, age: u32) -> bool {
        nr >= self.min_nr && nr <= self.max_nr && age >= self.min_age
    }

    fn source(&self, tier: TierId) -> bool {
        match self.action {
            Action::Hot => tier != 0 && tier != UNPLACED,
            Action::Cold => tier == 0,
        }
    }
}

/// One row of the time series: one application of the schemes.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    aggregation: u64,
    time_ms: f64,
    regions: u64,
    fast_used_pages: u64,
    hot_esz: u64,
    hot_charged: u64,
    promoted: u64,
    cold_esz: u64,
    cold_charged: u64,
    demoted: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// sampling boundaries, and those skipped because the program was stopped past them
    boundaries: u64,
    skipped_intervals: u64,
    /// applications of the schemes, and those that moved pages (one OS batch each)
    applies: u64,
    batches: u64,
    tlb_shootdowns: u64,
    /// young-filter page checks and their charged time, ns
    filter_checks: u64,
    filter_ns: f64,
}

pub struct DamonTiering {
    damon: Damon,
    sample_ns: u64,
    aggr_ns: u64,
    apply_aggrs: u64,
    young_filter: bool,
    batch_pages: u64,
    check_ns: f64,
    /// With `tlb=kept`: also flush every this many ns (0: only after migrations), and when next.
    tlb_flush_ns: u64,
    next_flush_ns: f64,
    tlb_kept: bool,
    /// tier 0's floors: first touch only above `fill_floor` free frames, promotion only above
    /// `promote_floor` (the zone's low and min watermarks; 0: every frame)
    fill_floor: u64,
    promote_floor: u64,
    /// other programs' pages still on tier 0 (`fast_other_pages`): inside its capacity,
    /// outside the trace, never accessed
    other_fast: u64,
    schemes: [Scheme; 2],
    aggregations: u64,
    last_ns: f64,
    stats: Stats,
    rows: Vec<Row>,
    /// scratch: (region index, score, source pages) of the candidates of a scheme
    cands: Vec<(u32, u64, u64)>,
    hist: Vec<u64>,
}

impl DamonTiering {
    pub fn from_params(p: &Params) -> Result<DamonTiering> {
        let sample_ns = p.time_ns("sample")?;
        let aggr_ns = p.time_ns("aggr")?;
        if aggr_ns < sample_ns {
            return Err(Error::config("damon-tiering:aggr", "the aggregation interval must not be shorter than the sampling interval"));
        }
        let reset_ns = p.time_ns("quota_reset")? as f64;
        let aggr_samples = ((aggr_ns as f64 / sample_ns as f64).round() as u64).clamp(1, u32::MAX as u64) as u32;
        let min_nr_regions = p.int("min_nr_regions") as u32;
        let max_nr_regions = p.int("max_nr_regions") as u32;
        if max_nr_regions < min_nr_regions {
            return Err(Error::config("damon-tiering:max_nr_regions", "must be at least min_nr_regions"));
        }
        let check_ns = p.float("check_ns");
        let mut damon = Damon::new(DamonAttrs { aggr_samples, min_nr_regions, max_nr_regions, check_ns, seed: p.int("seed") as u64 });
        let tlb_kept = p.text("tlb") == "kept";
        if tlb_kept {
            damon.keep_translations();
        }
        let tlb_flush_ns = (p.float("tlb_flush_interval_ms") * 1e6).round() as u64;
        let fill_floor = p.int("wmark_low_pages") as u64;
        let promote_floor = p.int("wmark_min_pages") as u64;
        if promote_floor > fill_floor {
            return Err(Error::config("damon-tiering:wmark_min_pages", format!("must not exceed wmark_low_pages ({promote_floor} > {fill_floor})")));
        }
        let which = p.text("schemes");
        let goal = |key: &str, m: Metric| {
            let v = p.int(key) as u64;
            (v > 0).then_some((m, v))
        };
        let young_filter = p.bool("young_filter");
        let scheme = |action, min_nr, max_nr, min_age, enabled, sz, goal, young| Scheme {
            action,
            min_nr,
            max_nr,
            min_age,
            enabled,
            sz,
            reset_ns,
            goal,
            w_nr: p.int("weight_nr_accesses") as u64,
            w_age: p.int("weight_age") as u64,
            young,
            esz: 0,
            esz_bp: 0,
            charged: 0,
            charged_from_ns: 0.0,
            started: false,
            stats: SchemeStats::default(),
        };
        let hot = scheme(
            Action::Hot,
            p.int("hot_min_accesses") as u32,
            u32::MAX,
            0,
            which != "demote",
            p.bytes("hot_quota"),
            goal("hot_goal_used_bp", Metric::UsedBp),
            young_filter && p.bool("hot_young_filter"),
        );
        let cold = scheme(
            Action::Cold,
            0,
            0,
            p.int("cold_min_age") as u32,
            which != "promote",
            p.bytes("cold_quota"),
            goal("cold_goal_free_bp", Metric::FreeBp),
            young_filter,
        );
        Ok(DamonTiering {
            damon,
            sample_ns,
            aggr_ns,
            apply_aggrs: p.int("apply_aggrs") as u64,
            young_filter,
            batch_pages: p.int("batch_pages") as u64,
            check_ns,
            tlb_flush_ns,
            next_flush_ns: tlb_flush_ns as f64,
            tlb_kept,
            fill_floor,
            promote_floor,
            other_fast: p.int("fast_other_pages") as u64,
            schemes: [cold, hot],
            aggregations: 0,
            last_ns: -1.0,
            stats: Stats::default(),
            rows: Vec::new(),
            cands: Vec::new(),
            hist: vec![0; MAX_SCORE as usize + 1],
        })
    }

    /// Apply scheme `si` once; returns the pages it moved. `entered` says whether this
    /// application already paid its kernel entry.
    fn apply_scheme(&mut self, si: usize, ctx: &mut Ctx, entered: &mut bool) -> Result<u64> {
        let page_bytes = ctx.mem.page_bytes();
        let s = &mut self.schemes[si];
        s.stats.applies += 1;
        // the quota clock is the sampling boundary's own time (whole sampling intervals, as
        // kdamond counts them), not the hook's, which runs a varying bit after the boundary:
        // with apply == reset interval (mtier.c) every application then opens a window
        let boundary_ns = ctx.now.period as f64 * self.sample_ns as f64;
        s.adjust_quota(boundary_ns, ctx.mem.used(0) + self.other_fast, ctx.mem.capacity(0));
        // candidates: regions matching the pattern, with pages on the source tier
        self.cands.clear();
        self.hist.iter_mut().for_each(|h| *h = 0);
        let max_nr = self.damon.attrs().aggr_samples;
        for (i, r) in self.damon.regions().iter().enumerate() {
            if !s.matches(r.nr_accesses, r.age) {
                continue;
            }
            let n_src = self.damon.pages_of(r).iter().filter(|&&p| s.source(ctx.mem.tier(p))).count() as u64;
            if n_src == 0 {
                continue;
            }
            // the score's age is in seconds of the unscaled run (--time-scale)
            let aggr_ns = if ctx.time_scale == 1.0 { self.aggr_ns } else { (self.aggr_ns as f64 * ctx.time_scale).round() as u64 };
            let hot = hot_score(r.nr_accesses, r.age, max_nr, aggr_ns, s.w_nr, s.w_age);
            let score = match s.action {
                Action::Hot => hot,
                Action::Cold => MAX_SCORE - hot,
            };
            self.hist[score as usize] += n_src * page_bytes;
            self.cands.push((i as u32, score, n_src));
        }
        s.stats.candidate_regions += self.cands.len() as u64;
        // the minimum score: the highest scores whose bytes fill the quota
        let mut min_score = 0;
        if s.limited() {
            let mut cum = 0u64;
            for sc in (0..=MAX_SCORE as usize).rev() {
                cum += self.hist[sc];
                min_score = sc as u64;
                if cum >= s.esz {
                    break;
                }
            }
        }
        let fault_ns = ctx.platform.platform.migration.fault_ns;
        let mut moved = 0u64;
        let mut checks = 0u64;
        if s.action == Action::Cold && self.other_fast > 0 && ctx.mem.first_free_from(1).is_some() {
            // other programs' pages were never touched by the program and are older than
            // any of its regions: the highest cold score, acted on first within the quota
            let left = if s.limited() { s.esz.saturating_sub(s.charged) / page_bytes } else { u64::MAX };
            let n = self.other_fast.min(left);
            if n > 0 {
                if !*entered {
                    ctx.mem.charge(Charge { what: "DAMOS migration entry", ns: fault_ns, halts: true, energy_j: 0.0 });
                    *entered = true;
                }
                self.other_fast -= n;
                moved += n;
                s.charged += n * page_bytes;
                s.stats.charged_bytes += n * page_bytes;
                s.stats.moved_pages += n;
                s.stats.moved_other_pages += n;
            }
        }
        for &(ri, score, n_src) in &self.cands {
            if s.limited() && s.charged >= s.esz {
                break;
            }
            if score < min_score {
                s.stats.below_min_score += 1;
                continue;
            }
            let take = if s.limited() { n_src.min((s.esz - s.charged) / page_bytes) } else { n_src };
            if take == 0 {
                break;
            }
            let r = self.damon.regions()[ri as usize];
            let moved_before = moved;
            let mut taken = 0u64;
            for i in r.start..r.end {
                if taken == take {
                    break;
                }
                let p = self.damon.page_at(i);
                if !s.source(ctx.mem.tier(p)) {
                    continue;
                }
                taken += 1;
                if s.young {
                    checks += 1;
                    let young = self.damon.young(p);
                    self.damon.mkold(p);
                    let keep = match s.action {
                        Action::Hot => !young,
                        Action::Cold => young,
                    };
                    if keep {
                        s.stats.filtered_young += 1;
                        continue;
                    }
                }
                let dest = match s.action {
                    Action::Hot => (ctx.mem.free(0).saturating_sub(self.other_fast) > self.promote_floor).then_some(0),
                    Action::Cold => ctx.mem.first_free_from(1),
                };
                let Some(dest) = dest else {
                    s.stats.no_room += 1;
                    continue;
                };
                if !*entered {
                    // the batch enters the kernel's migration path once ...
                    ctx.mem.charge(Charge { what: "DAMOS migration entry", ns: fault_ns, halts: true, energy_j: 0.0 });
                    *entered = true;
                }
                ctx.mem.migrate_by(p, dest, MoveBy::OsBatch)?;
                moved += 1;
            }
            s.charged += taken * page_bytes;
            s.stats.charged_bytes += taken * page_bytes;
            s.stats.applied_regions += 1;
            s.stats.moved_pages += moved - moved_before;
            self.damon.regions_mut()[ri as usize].age = 0;
        }
        if checks > 0 {
            let ns = checks as f64 * self.check_ns;
            if ns > 0.0 {
                ctx.mem.charge(Charge { what: "DAMOS young filter", ns, halts: true, energy_j: 0.0 });
            }
            self.stats.filter_checks += checks;
            self.stats.filter_ns += ns;
        }
        Ok(moved)
    }

    fn apply(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.applies += 1;
        let mut entered = false;
        let mut moved = [0u64; 2];
        for (si, m) in moved.iter_mut().enumerate() {
            if self.schemes[si].enabled {
                *m = self.apply_scheme(si, ctx, &mut entered)?;
            }
        }
        let total = moved[0] + moved[1];
        if total > 0 {
            // ... and shoots down the TLBs once per batch of unmapped pages
            let n = total.div_ceil(self.batch_pages);
            let ns = ctx.platform.platform.migration.tlb_shootdown_ns;
            for _ in 0..n {
                ctx.mem.charge(Charge { what: "DAMOS TLB shootdown", ns, halts: true, energy_j: 0.0 });
            }
            self.stats.batches += 1;
            self.stats.tlb_shootdowns += n;
            // x86 flushes the whole TLB of the CPUs running the program after a batch of
            // unmapped pages (arch_tlbbatch_flush)
            self.damon.flush_tlb();
        }
        let [cold, hot] = &self.schemes;
        self.rows.push(Row {
            aggregation: self.aggregations - 1,
            time_ms: ctx.now.ns / 1e6,
            regions: self.damon.regions().len() as u64,
            fast_used_pages: ctx.mem.used(0),
            hot_esz: hot.esz,
            hot_charged: hot.charged,
            promoted: moved[1],
            cold_esz: cold.esz,
            cold_charged: cold.charged,
            demoted: moved[0],
        });
        Ok(())
    }
}

impl Policy for DamonTiering {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let fast = ctx.mem.capacity(0);
        if self.other_fast > fast {
            return Err(Error::config("damon-tiering:fast_other_pages", format!("{} pages do not fit in the fast tier ({fast} pages)", self.other_fast)));
        }
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.damon.grow(ctx.pages.max(page as usize + 1));
        let from = if ctx.mem.free(0).saturating_sub(self.other_fast) > self.fill_floor { 0 } else { 1 };
        ctx.mem.first_free_from(from).or_else(|| ctx.mem.first_free_from(0)).unwrap_or(0)
    }

    fn adopt(&mut self, page: PageId, _tier: TierId, ctx: &mut Ctx) {
        self.damon.grow(ctx.pages.max(page as usize + 1));
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, _write: bool, _ctx: &mut Ctx) -> Served {
        self.damon.access(page);
        Served::RESIDENT
    }

    #[inline(always)]
    fn prefetch(&self, page: PageId) {
        self.damon.prefetch(page);
    }

    /// One activation per application of the schemes (every apply_aggrs aggregation
    /// intervals), not per sampling interval.
    fn activity(&self) -> super::Activity {
        super::Activity::Ran { times: self.stats.applies, every: Period::Ns(self.aggr_ns.saturating_mul(self.apply_aggrs)) }
    }

    fn period(&self) -> Option<Period> {
        Some(Period::Ns(self.sample_ns))
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.boundaries += 1;
        if ctx.now.ns == self.last_ns {
            // a boundary the clock passed while the program was stopped (by this policy's
            // own checks or migrations): kdamond was busy, no sample is taken
            self.stats.skipped_intervals += 1;
            return Ok(());
        }
        self.last_ns = ctx.now.ns;
        if self.tlb_kept && self.tlb_flush_ns > 0 && ctx.now.ns >= self.next_flush_ns {
            self.damon.flush_tlb();
            while self.next_flush_ns <= ctx.now.ns {
                self.next_flush_ns += self.tlb_flush_ns as f64;
            }
        }
        let pm = ctx.pagemap;
        let pages = ctx.pages;
        if self.damon.sample(ctx.mem, pages, |p| pm.page_addr(p)) {
            self.aggregations += 1;
            if self.aggregations.is_multiple_of(self.apply_aggrs) {
                self.apply(ctx)?;
            }
            self.damon.end_aggregation(pages, |p| pm.page_addr(p));
        }
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                json!([r.aggregation, r.time_ms, r.regions, r.fast_used_pages, r.hot_esz, r.hot_charged, r.promoted, r.cold_esz, r.cold_charged, r.demoted])
            })
            .collect();
        let scheme = |s: &Scheme| {
            json!({
                "action": s.name(),
                "enabled": s.enabled,
                "min_nr_accesses": s.min_nr,
                "max_nr_accesses": s.max_nr,
                "min_age": s.min_age,
                "quota_bytes": s.sz,
                "young_filter": s.young,
                "goal": s.goal.map(|(m, v)| json!({"metric": match m { Metric::UsedBp => "node_mem_used_bp", Metric::FreeBp => "node_mem_free_bp" }, "target_bp": v})),
                "stats": s.stats,
            })
        };
        let d: &DamonStats = &self.damon.stats;
        json!({
            "name": "damon-tiering",
            "sample_ns": self.sample_ns,
            "aggr_ns": self.aggr_ns,
            "apply_aggrs": self.apply_aggrs,
            "young_filter": self.young_filter,
            "tlb": if self.tlb_kept { "kept" } else { "none" },
            "wmark_low_pages": self.fill_floor,
            "wmark_min_pages": self.promote_floor,
            "fast_other_pages_left": self.other_fast,
            "damon": d,
            "regions_at_end": self.damon.regions().len(),
            "monitored_pages": self.damon.monitored(),
            "aggregations": self.aggregations,
            "activity": self.stats,
            "schemes": { "promote": scheme(&self.schemes[1]), "demote": scheme(&self.schemes[0]) },
            "timeseries": {
                "columns": ["aggregation", "time_ms", "regions", "fast_used_pages", "hot_esz_bytes", "hot_charged_bytes", "promoted", "cold_esz_bytes", "cold_charged_bytes", "demoted"],
                "rows": rows,
            },
        })
    }
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "sample",
        ty: ParamType::Period,
        unit: "simulated time",
        default: "5ms",
        source: "DAMON's default sampling interval (usage.rst, monitoring_attrs/intervals/sample_us = 5000); samples/damon/mtier.c",
        help: "sampling interval: every region checks its sampled page once per interval",
    },
    ParamSpec {
        name: "aggr",
        ty: ParamType::Period,
        unit: "simulated time",
        default: "100ms",
        source: "DAMON's default aggregation interval (usage.rst, intervals/aggr_us = 100000); samples/damon/mtier.c",
        help: "aggregation interval: regions are merged, handed to the schemes, reset and split once per interval",
    },
    ParamSpec {
        name: "min_nr_regions",
        ty: ParamType::Int { min: 1, max: 1 << 20 },
        unit: "regions",
        default: "10",
        source: "DAMON's default (usage.rst, nr_regions/min = 10); samples/damon/mtier.c",
        help: "fewest regions: merging never makes a region larger than the pages / this",
    },
    ParamSpec {
        name: "max_nr_regions",
        ty: ParamType::Int { min: 3, max: 1 << 20 },
        unit: "regions",
        default: "1000",
        source: "DAMON's default (usage.rst, nr_regions/max = 1000); samples/damon/mtier.c",
        help: "most regions (bounds the sampling cost per interval)",
    },
    ParamSpec {
        name: "check_ns",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "ns per sampled page",
        default: "500",
        source: "tierkit's assumption: testing one page's accessed bit and clearing the next sampled page's are two page-table walks with a lock, a few DRAM misses each (~100 ns per miss); no published per-check figure was found",
        help: "cost of one region's access check per sampling interval, and of one young-filter page check, charged to the program",
    },
    ParamSpec {
        name: "seed",
        ty: ParamType::Int { min: 0, max: i64::MAX },
        unit: "",
        default: "1",
        source: "tierkit's choice (any seed; runs are reproducible for a given seed)",
        help: "seed of the sampled-page and split-point generator",
    },
    ParamSpec {
        name: "schemes",
        ty: ParamType::Choice { options: &["both", "promote", "demote"] },
        unit: "",
        default: "both",
        source: "samples/damon/mtier.c and damo's tiering example run both schemes",
        help: "which schemes run: both, only migrate_hot (promote) or only migrate_cold (demote)",
    },
    ParamSpec {
        name: "hot_min_accesses",
        ty: ParamType::Int { min: 0, max: u32::MAX as i64 },
        unit: "sampled accesses per aggregation interval",
        default: "1",
        source: "samples/damon/mtier.c (min_nr_accesses = 1 for migrate_hot); damo's example: --damos_access_rate 5% max (1 of 20 samples)",
        help: "migrate_hot acts on regions with at least this nr_accesses (any age)",
    },
    ParamSpec {
        name: "cold_min_age",
        ty: ParamType::Int { min: 0, max: u32::MAX as i64 },
        unit: "aggregation intervals",
        default: "0",
        source: "samples/damon/mtier.c and damo's example (min_age 0; the young filter and the free-memory goal hold demotion back); SK hynix's hmsdk used 30 s (300 at 100 ms)",
        help: "migrate_cold acts on regions with nr_accesses == 0 for at least this many aggregation intervals",
    },
    ParamSpec {
        name: "hot_quota",
        ty: ParamType::Bytes,
        unit: "bytes per quota reset interval",
        default: "200M",
        source: "samples/damon/mtier.c (quota sz = 200 MiB per 1 s); damo's example --damos_quota_space 200MB",
        help: "size quota of migrate_hot; 0 = no size limit",
    },
    ParamSpec {
        name: "cold_quota",
        ty: ParamType::Bytes,
        unit: "bytes per quota reset interval",
        default: "200M",
        source: "samples/damon/mtier.c (quota sz = 200 MiB per 1 s)",
        help: "size quota of migrate_cold; 0 = no size limit",
    },
    ParamSpec {
        name: "quota_reset",
        ty: ParamType::Period,
        unit: "simulated time",
        default: "1s",
        source: "samples/damon/mtier.c (quota reset_interval = 1000 ms)",
        help: "quota window: charges restart and goals are re-evaluated once per window",
    },
    ParamSpec {
        name: "hot_goal_used_bp",
        ty: ParamType::Int { min: 0, max: 10_000 },
        unit: "basis points of tier 0",
        default: "9970",
        source: "samples/damon/mtier.c (node0_mem_used_bp = 9970, goal node_mem_used_bp of node 0 for migrate_hot)",
        help: "node_mem_used_bp goal of migrate_hot's quota auto-tuning; 0 = no goal (fixed quota)",
    },
    ParamSpec {
        name: "cold_goal_free_bp",
        ty: ParamType::Int { min: 0, max: 10_000 },
        unit: "basis points of tier 0",
        default: "50",
        source: "samples/damon/mtier.c (node0_mem_free_bp = 50, goal node_mem_free_bp of node 0 for migrate_cold)",
        help: "node_mem_free_bp goal of migrate_cold's quota auto-tuning; 0 = no goal (fixed quota)",
    },
    ParamSpec {
        name: "weight_nr_accesses",
        ty: ParamType::Int { min: 0, max: 1_000_000 },
        unit: "",
        default: "100",
        source: "samples/damon/mtier.c (weight_nr_accesses = 100)",
        help: "weight of the access frequency in a region's priority score",
    },
    ParamSpec {
        name: "weight_age",
        ty: ParamType::Int { min: 0, max: 1_000_000 },
        unit: "",
        default: "100",
        source: "samples/damon/mtier.c (weight_age = 100)",
        help: "weight of the age in a region's priority score",
    },
    ParamSpec {
        name: "young_filter",
        ty: ParamType::Bool,
        unit: "",
        default: "true",
        source: "samples/damon/mtier.c (young filter: allow for migrate_hot, reject for migrate_cold)",
        help: "promote only pages accessed since their bit was cleared, never demote them",
    },
    ParamSpec {
        name: "hot_young_filter",
        ty: ParamType::Bool,
        unit: "",
        default: "true",
        source: "samples/damon/mtier.c gives migrate_hot a young filter that allows (allow filters: Linux 6.14+); before 6.14 a filter could only reject, and tierkit run's damon-tiering on 6.12 sets none on migrate_hot (its report's damon_tiering[].effective.filters)",
        help: "with young_filter, migrate_hot too moves only young pages; false: every page of a hot slow region is promoted (migrate_cold keeps its filter)",
    },
    ParamSpec {
        name: "apply_aggrs",
        ty: ParamType::Int { min: 1, max: 1 << 30 },
        unit: "aggregation intervals",
        default: "10",
        source: "samples/damon/mtier.c: both schemes' apply interval is 1 s (damon_new_scheme's apply_interval_us = 1000000), 10 of its 100 ms aggregation intervals; 1 = DAMOS's own default (apply_interval_us = 0 means every aggregation interval, usage.rst)",
        help: "the schemes run once every this many aggregation intervals (a count, so it follows aggr when that is changed or time-scaled)",
    },
    ParamSpec {
        name: "tlb",
        ty: ParamType::Choice { options: &["none", "kept"] },
        unit: "",
        default: "none",
        source: "x86: the MMU sets a page's accessed bit on a page-table walk, and DAMON clears it without a TLB flush (ops-common.c damon_ptep_mkold); QEMU's TCG keeps translations in a software TLB of up to millions of entries until the guest flushes (docs/validation.md)",
        help: "none: every access sets the accessed bit (hardware whose TLB is small beside the working set); kept: only an access whose translation is not cached does, and translations stay cached until a flush (each batch of migrations, and every tlb_flush_interval_ms)",
    },
    ParamSpec {
        name: "tlb_flush_interval_ms",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "ms of simulated time",
        default: "0",
        source: "tierkit (context switches to other programs flush the TLB of a CPU)",
        help: "with tlb=kept: a full TLB flush this often besides the migrations' (0: none)",
    },
    ParamSpec {
        name: "wmark_low_pages",
        ty: ParamType::Int { min: 0, max: 1 << 40 },
        unit: "pages",
        default: "0",
        source: "mm/page_alloc.c: get_page_from_freelist checks each zone against its low watermark (ALLOC_WMARK_LOW) and falls back along the zonelist to the next node; /proc/zoneinfo 'low' (the testbed VM's node 0: about 7,200 pages with THP's raised min_free_kbytes, DMA32's plus what the DMA zone keeps)",
        help: "first touch takes a tier-0 frame only while more than this many are free (the zone's low watermark); 0: every frame",
    },
    ParamSpec {
        name: "wmark_min_pages",
        ty: ParamType::Int { min: 0, max: 1 << 40 },
        unit: "pages",
        default: "0",
        source: "mm/damon/paddr.c __damon_pa_migrate_folio_list allocates with GFP_NOWAIT | __GFP_THISNODE (mm/vmscan.c alloc_migrate_folio): past the low watermark the slow path wakes kswapd and takes frames down to the min watermark; /proc/zoneinfo 'min'",
        help: "migrate_hot takes a tier-0 frame only while more than this many are free (the zone's min watermark; at most wmark_low_pages); 0: every frame",
    },
    ParamSpec {
        name: "fast_other_pages",
        ty: ParamType::Int { min: 0, max: 1 << 40 },
        unit: "pages",
        default: "0",
        source: "tierkit's model of a shared node, as autonuma-tiering's: the kernel's migrate_cold scheme monitors node 0's physical range, so it demotes other programs' cold pages too and counts them in its sz_applied (in the testbed VM the rootfs in tmpfs, about 7,500 pages in a fresh VM's first run)",
        help: "pages of tier 0's capacity held by other programs at the start, never accessed: migrate_cold demotes them first within its quota (counted in its moved_pages and moved_other_pages)",
    },
    ParamSpec {
        name: "batch_pages",
        ty: ParamType::Int { min: 1, max: 1 << 30 },
        unit: "pages",
        default: "512",
        source: "mm/migrate.c: NR_MAX_BATCHED_MIGRATION (HPAGE_PMD_NR = 512 with 4 KiB pages), batched unmap and TLB flush since Linux 6.3",
        help: "pages per TLB shootdown when an application moves pages",
    },
];

pub static DAMON_TIERING: PolicyInfo = PolicyInfo {
    name: "damon-tiering",
    summary: "DAMOS memory tiering (Linux 6.11+): DAMON region sampling; migrate_hot promotes accessed slow regions and migrate_cold demotes unaccessed fast regions, within byte quotas auto-tuned towards DRAM used/free goals",
    source: "Linux mm/damon (core.c, ops-common.c), Documentation/admin-guide/mm/damon/usage.rst and mm/damon/design.rst; samples/damon/mtier.c (Honggyu Kim et al., SK hynix, DAMON-based tiered memory management)",
    deploy: super::Deploy::Kernel,
    params: PARAMS,
    build: |p: &Params| Ok(Built::from(DamonTiering::from_params(p)?)),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// core.c's feedback loop: proportional growth under the goal, shrink above it, floor
    /// 10000, reset to the floor at twice the goal.
    #[test]
    fn feedback_loop_follows_the_kernel_rule() {
        assert_eq!(feed_loop_next_input(10_000, 0), 20_000, "score 0: doubles");
        assert_eq!(feed_loop_next_input(40_000, 5_000), 60_000, "half the goal: +50 %");
        assert_eq!(feed_loop_next_input(40_000, 10_000), 40_000, "at the goal: unchanged");
        assert_eq!(feed_loop_next_input(40_000, 15_000), 20_000, "1.5x the goal: -50 %");
        assert_eq!(feed_loop_next_input(12_000, 19_000), 10_000, "never below the floor");
        assert_eq!(feed_loop_next_input(1 << 40, 20_000), 10_000, "2x the goal: the floor");
    }

    /// ops-common.c's hot score: a region accessed in every sample with weights 100/100 and
    /// age 0 s: freq 100, age subscore (0 + 32) · 100 / 32 / 2 = 50, hot = 75 · 99 / 100 = 74.
    /// Unaccessed, 4 s old (log 3, negated): freq 0, age (−3 + 32) · 100 / 64 = 45, hot =
    /// 22 · 99 / 100 = 21; its cold score 99 − 21 = 78.
    #[test]
    fn hot_score_matches_hand_figures() {
        assert_eq!(hot_score(20, 0, 20, 100_000_000, 100, 100), 74);
        assert_eq!(hot_score(0, 40, 20, 100_000_000, 100, 100), 21);
        assert_eq!(hot_score(10, 0, 20, 100_000_000, 100, 0), 49);
    }
}
