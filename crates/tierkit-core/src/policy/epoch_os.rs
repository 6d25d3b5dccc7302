//! `hma-epoch` and `fthp`: epoch-based hot-page migration by the operating system.
//!
//! Hardware counts every page's accesses over an epoch; at the epoch's end the program is
//! stopped and the OS moves the epoch's hot pages from the slow tiers into the fast tier, in
//! place of pages that were not hot, and updates the page tables and TLBs (address
//! reconciliation by the OS).
//!
//! * `hma-epoch` follows HMA_HS_OS_AR of seed 001 §2.4, the epoch scheme of Meswani et al.
//!   (HPCA 2015, [20] in 001) as the authors' Ramulator model implements it
//!   (shashankshashank44/HMA_onfly_adaptive, `src/hma.cpp`): a page is hot when its count in
//!   the epoch reaches `threshold`; hot pages are ranked by count (ties: first-touch order,
//!   which is the model's stable sort over its page table); the first `capacity(fast)` are the
//!   top hot pages; those not in the fast tier are brought in, in rank order, up to
//!   `limit_pages` per epoch, each into a free fast frame or swapped with the least recently
//!   used fast page that is not a top hot page (the model's LRU stack, in which top hot pages
//!   and pages just moved in are bumped to the top at the boundary). Placement: 001 §4.1.
//! * `fthp` is first-touch hot-page as seed 000 §6.4 evaluates it (after Meswani et al.):
//!   first touch fills the fast tier; at each epoch the pages accessed in it are ranked by
//!   count (ties: the page already in the faster tier, then page id); the first
//!   `capacity(fast)` are wanted in the fast tier and those outside it are brought in, each
//!   into a free fast frame or swapped with the coldest fast page not wanted (lowest count in
//!   the epoch, then least recently used, then page id). A fast page is never displaced by
//!   one of equal count.
//!
//! Costs (`os_costs`): `page` moves every page with [`MoveBy::Os`], paying the platform's
//! fault, TLB shootdown and per-page cost each (000 §5.1); `epoch` moves the epoch's pages as
//! one OS batch ([`MoveBy::OsBatch`]: per-page cost and copy only) and charges one kernel
//! entry (`fault_ns`) and one TLB shootdown (`tlb_shootdown_ns`) for the batch, the
//! amortization 001 §2.4 credits epoch-based reconciliation with. `hma-epoch` also pays
//! 001's own OS reconciliation figures by default (`ar_costs=001`): a 4 µs cache
//! flush per moved page and an IPI TLB shootdown for `cores` cores (8 µs on 16) in place of
//! the platform's shootdown (§2.3.1); `ar_costs=platform` charges the platform's figures
//! only. The authors' model charges
//! no time for its epoch migrations (the cost code of `hma_default_policy` is disabled) and
//! no time for scanning the counters, so neither policy charges a scan.
//!
//! Both record a per-epoch time series (epochs without accesses are skipped).

use std::cmp::Reverse;

use serde::Serialize;
use serde_json::json;

use super::basic::Interleave;
use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo};
use crate::error::{Error, Result};
use crate::mechanics::{Charge, MoveBy, TierId, UNPLACED};
use crate::pagemap::PageId;
use crate::units::Period;

/// Which epoch policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HMA_HS_OS_AR (001 §2.4, after Meswani et al.).
    Hma,
    /// First-touch hot-page (000 §6.4).
    Fthp,
}

/// How the OS's fixed migration costs are paid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsCosts {
    /// Every page pays fault + TLB shootdown + per-page cost.
    Page,
    /// One kernel entry and one TLB shootdown per epoch that moves pages; per-page cost and
    /// copy per page.
    Epoch,
}

/// Where a page goes on first touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Initial {
    /// 4 pages to the fast tier, then 4 to the next, while they have room (001 §4.1).
    Interleave,
    /// Fill the fast tier first.
    FirstTouch,
}

impl Initial {
    pub(crate) fn parse(s: &str) -> Initial {
        if s == "first-touch" {
            Initial::FirstTouch
        } else {
            Initial::Interleave
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Initial::Interleave => "interleave",
            Initial::FirstTouch => "first-touch",
        }
    }
}

/// One row of an epoch policy's time series: what happened at the end of one epoch.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EpochRow {
    /// index of the epoch (0 = the first)
    pub epoch: u64,
    /// simulated time at its end, ms
    pub time_ms: f64,
    /// pages moved at its end (a swap moves two)
    pub migrations: u64,
    /// pages brought into the fast tier at its end
    pub promoted: u64,
    /// pages considered (hot pages, pages touched, pages tracked)
    pub candidates: u64,
    /// accesses in the epoch, and those served by the fast tier
    pub accesses: u64,
    pub fast_hits: u64,
}

/// `"timeseries": {"columns": [...], "rows": [...]}` of an epoch policy.
pub(crate) fn timeseries_json(candidates: &str, rows: &[EpochRow]) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let ratio = if r.accesses > 0 { r.fast_hits as f64 / r.accesses as f64 } else { 0.0 };
            json!([r.epoch, r.time_ms, r.migrations, r.promoted, r.candidates, r.accesses, ratio])
        })
        .collect();
    json!({
        "columns": ["epoch", "time_ms", "migrations", "promoted", candidates, "accesses", "fast_hit_ratio"],
        "rows": rows,
    })
}

/// Counters of an epoch policy (`stats.policy.epochs`).
#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// epoch boundaries crossed, and those that closed an epoch with accesses
    boundaries: u64,
    epochs: u64,
    /// hot pages (`hma-epoch`) or pages touched (`fthp`), summed over epochs
    candidates: u64,
    /// pages brought into the fast tier
    promoted: u64,
    into_free_frames: u64,
    swaps: u64,
    /// top hot pages left in a slow tier by `limit_pages`
    over_limit: u64,
    /// epochs whose moves were charged as one OS batch
    batches: u64,
}

/// Rank of a candidate, smallest first: count (highest first), tier (`fthp`: faster first;
/// `hma-epoch`: not used), page id.
type RankKey = (Reverse<u32>, TierId, PageId);
/// Order of victims, smallest first.
type VictimKey = (u64, u64, PageId);

/// 001's own figures for OS address reconciliation (§2.3.1), charged by `hma-epoch` on top of
/// the platform's per-page OS cost and kernel entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OsReconcile {
    /// `flush_cache_page()` of each moved page, halting: 4 µs (CLFLUSH of a page's lines).
    pub flush_ns: f64,
    /// One TLB shootdown by IPI, halting (4/5/8/13 µs on 4/8/16/32 cores).
    pub shootdown_ns: f64,
}

pub struct EpochOs {
    kind: Kind,
    /// `Some`: 001's reconciliation costs (`hma-epoch:ar_costs=001`); `None`: the platform's.
    reconcile: Option<OsReconcile>,
    epoch: Period,
    threshold: u32,
    limit: u64,
    costs: OsCosts,
    initial: Initial,
    interleave: Interleave,
    stats: Stats,
    rows: Vec<EpochRow>,
    // scratch, kept between epochs
    ranked: Vec<(RankKey, PageId)>,
    promote: Vec<PageId>,
    victims: Vec<(VictimKey, PageId)>,
    /// pages among this epoch's top (wanted in the fast tier)
    top: Vec<bool>,
    /// `hma-epoch`: the access index at which a page was last bumped to the top of the LRU
    /// stack by a boundary (top hot pages and pages moved in), as in the authors' model
    bumped: Vec<u64>,
}

impl EpochOs {
    pub fn new(kind: Kind, epoch: Period, threshold: u32, limit: u64, costs: OsCosts, initial: Initial) -> EpochOs {
        EpochOs {
            kind,
            reconcile: None,
            epoch,
            threshold,
            limit,
            costs,
            initial,
            interleave: Interleave::new(vec![4, 4]),
            stats: Stats::default(),
            rows: Vec::new(),
            ranked: Vec::new(),
            promote: Vec::new(),
            victims: Vec::new(),
            top: Vec::new(),
            bumped: Vec::new(),
        }
    }

    /// Charge 001's OS reconciliation costs instead of the platform's shootdown.
    pub fn with_reconcile(mut self, r: Option<OsReconcile>) -> EpochOs {
        self.reconcile = r;
        self
    }

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Hma => "hma-epoch",
            Kind::Fthp => "fthp",
        }
    }
}

impl Policy for EpochOs {
    fn needs(&self) -> Needs {
        Needs { counts: true, recency: true, ..Default::default() }
    }

    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        match self.initial {
            Initial::Interleave => self.interleave.next(ctx),
            Initial::FirstTouch => ctx.mem.first_free_from(0).unwrap_or(0),
        }
    }

    /// One activation per epoch with accesses to rank.
    fn activity(&self) -> super::Activity {
        super::Activity::Ran { times: self.stats.epochs, every: self.epoch }
    }

    fn period(&self) -> Option<Period> {
        Some(self.epoch)
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.boundaries += 1;
        let track = ctx.track;
        if track.prev_touched.is_empty() {
            // a boundary the clock passed while the program was stopped: nothing to rank
            return Ok(());
        }
        self.stats.epochs += 1;
        let now = ctx.now.accesses;
        let mut row = EpochRow { epoch: ctx.now.period - 1, time_ms: ctx.now.ns / 1e6, ..Default::default() };

        // candidates, ranked
        self.ranked.clear();
        for &p in &track.prev_touched {
            let c = track.prev_count[p as usize];
            let t = ctx.mem.tier(p);
            row.accesses += c as u64;
            if t == 0 {
                row.fast_hits += c as u64;
            }
            if t == UNPLACED {
                continue;
            }
            match self.kind {
                Kind::Hma if c >= self.threshold => self.ranked.push(((Reverse(c), 0, p), p)),
                Kind::Hma => {}
                Kind::Fthp => self.ranked.push(((Reverse(c), t, p), p)),
            }
        }
        self.ranked.sort_unstable();
        row.candidates = self.ranked.len() as u64;
        self.stats.candidates += row.candidates;

        // the top: as many as the fast tier holds; those outside it are promoted
        let slots = ctx.mem.slots();
        if self.top.len() < slots {
            self.top.resize(slots, false);
            if self.kind == Kind::Hma {
                self.bumped.resize(slots, 0);
            }
        }
        let n_top = (self.ranked.len() as u64).min(ctx.mem.capacity(0)) as usize;
        self.promote.clear();
        for &(_, p) in &self.ranked[..n_top] {
            self.top[p as usize] = true;
            if self.kind == Kind::Hma {
                self.bumped[p as usize] = now;
            }
            if ctx.mem.tier(p) != 0 {
                if self.limit > 0 && self.promote.len() as u64 >= self.limit {
                    self.stats.over_limit += 1;
                } else {
                    self.promote.push(p);
                }
            }
        }

        // victims: the first promotions take free frames, the rest need a fast page each
        let need = (self.promote.len() as u64).saturating_sub(ctx.mem.free(0)) as usize;
        self.victims.clear();
        if need > 0 {
            for (p, &t) in ctx.mem.tier_of().iter().enumerate().take(slots) {
                if t != 0 || self.top[p] {
                    continue;
                }
                let last = track.last_access[p];
                let key = match self.kind {
                    Kind::Hma => (0, last.max(self.bumped[p]), p as PageId),
                    Kind::Fthp => (track.prev_count[p] as u64, last, p as PageId),
                };
                self.victims.push((key, p as PageId));
            }
            if self.victims.len() > need {
                self.victims.select_nth_unstable(need - 1);
                self.victims.truncate(need);
            }
            self.victims.sort_unstable();
        }

        // With 001's costs every page moves as part of an OS visit (per-page cost and copy)
        // and the entry and shootdown are charged here, so that the shootdown is 001's.
        let by = match (self.costs, self.reconcile) {
            (OsCosts::Page, None) => MoveBy::Os,
            _ => MoveBy::OsBatch,
        };
        let batch = self.costs == OsCosts::Epoch && !self.promote.is_empty();
        let m = &ctx.platform.platform.migration;
        let (fault_ns, shootdown_ns) = (m.fault_ns, self.reconcile.map_or(m.tlb_shootdown_ns, |r| r.shootdown_ns));
        if batch {
            // the OS is entered once for the whole batch ...
            ctx.mem.charge(Charge { what: "OS entry (epoch batch)", ns: fault_ns, halts: true, energy_j: 0.0 });
        }
        let per_page = self.costs == OsCosts::Page && self.reconcile.is_some();
        let mut next_victim = 0;
        for &p in &self.promote {
            let moved = if ctx.mem.free(0) > 0 {
                ctx.mem.migrate_by(p, 0, by)?;
                self.stats.into_free_frames += 1;
                1
            } else {
                let Some(&(_, v)) = self.victims.get(next_victim) else { break };
                next_victim += 1;
                ctx.mem.swap_by(p, v, by)?;
                self.stats.swaps += 1;
                2
            };
            row.migrations += moved;
            row.promoted += 1;
            if per_page {
                let n = moved as f64;
                ctx.mem.charge(Charge { what: "OS entry (per page)", ns: n * fault_ns, halts: true, energy_j: 0.0 });
                ctx.mem.charge(Charge { what: "TLB shootdown (per page)", ns: n * shootdown_ns, halts: true, energy_j: 0.0 });
            }
        }
        self.stats.promoted += row.promoted;
        if let (Some(r), true) = (self.reconcile, row.migrations > 0) {
            // every moved page's cache lines are flushed: no batching saves this (001 §2.3.1)
            ctx.mem.charge(Charge { what: "cache flush (OS reconciliation)", ns: row.migrations as f64 * r.flush_ns, halts: true, energy_j: 0.0 });
        }
        if batch {
            // ... and shoots down the TLBs once, after the last page
            ctx.mem.charge(Charge { what: "TLB shootdown (epoch batch)", ns: shootdown_ns, halts: true, energy_j: 0.0 });
            self.stats.batches += 1;
        }
        for &(_, p) in &self.ranked[..n_top] {
            self.top[p as usize] = false;
        }
        self.rows.push(row);
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        let mut r = json!({
            "name": self.name(),
            "epoch": self.epoch.describe(),
            "os_costs": match self.costs { OsCosts::Page => "page", OsCosts::Epoch => "epoch" },
            "initial": self.initial.name(),
            "epochs": self.stats,
            "timeseries": timeseries_json(if self.kind == Kind::Hma { "hot_pages" } else { "candidates" }, &self.rows),
        });
        if self.kind == Kind::Hma {
            r["threshold"] = json!(self.threshold);
            r["limit_pages"] = json!(self.limit);
            r["ar_costs"] = json!(if self.reconcile.is_some() { "001" } else { "platform" });
            if let Some(c) = self.reconcile {
                r["flush_ns_per_page"] = json!(c.flush_ns);
                r["tlb_shootdown_ns"] = json!(c.shootdown_ns);
            }
        }
        r
    }
}

fn os_costs(key: &str, s: &str) -> Result<OsCosts> {
    match s {
        "page" => Ok(OsCosts::Page),
        "epoch" => Ok(OsCosts::Epoch),
        _ => Err(Error::config(key, format!("'{s}' is not page or epoch"))),
    }
}

const OS_COSTS_HELP: &str = "epoch: the moves of an epoch are one OS batch, charged one kernel entry (the platform's fault_ns) and one TLB shootdown, each page its per_page_ns and copy; page: every page pays fault + shootdown + per-page cost";

const HMA_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "epoch",
        ty: ParamType::Period,
        unit: "simulated time (or accesses, or N-insn)",
        default: "10ms",
        source: "the authors' model (shashankshashank44/HMA_onfly_adaptive, configs/HMA-config.cfg: epoch_length = 10000 µs); 001 §2.1 (epochs, e.g. 10 ms)",
        help: "length of an epoch: pages are counted over it and hot pages move at its end",
    },
    ParamSpec {
        name: "threshold",
        ty: ParamType::Int { min: 1, max: u32::MAX as i64 },
        unit: "accesses per epoch",
        default: "64",
        source: "the authors' model (configs/HMA-config.cfg: hma_hotness_thold = 64; src/hma.cpp marks a page hot when its epoch count reaches it)",
        help: "a page is hot in an epoch once it has this many accesses in it",
    },
    ParamSpec {
        name: "limit_pages",
        ty: ParamType::Int { min: 0, max: u32::MAX as i64 },
        unit: "pages per epoch",
        default: "0",
        source: "the authors' model (page_transfer_limit, src/hma.cpp); 0 = no limit but the fast tier's capacity (tierkit: the shipped config's 0 would stop epoch migration)",
        help: "most hot pages brought into the fast tier per epoch; 0 = as many as the fast tier holds",
    },
    ParamSpec {
        name: "os_costs",
        ty: ParamType::Choice { options: &["epoch", "page"] },
        unit: "",
        default: "epoch",
        source: "001 §2.4 (epoch-based OS reconciliation of all pages moved at an epoch amortizes its cost)",
        help: OS_COSTS_HELP,
    },
    ParamSpec {
        name: "initial",
        ty: ParamType::Choice { options: &["interleave", "first-touch"] },
        unit: "",
        default: "interleave",
        source: "001 §4.1 (4 pages to the fast tier, then 4 to the slow one, while the fast tier has room)",
        help: "placement on first touch: interleave (4/4) or first-touch (fill the fast tier first)",
    },
    ParamSpec {
        name: "ar_costs",
        ty: ParamType::Choice { options: &["001", "platform"] },
        unit: "",
        default: "001",
        source: "001 §2.3.1 (OS reconciliation: flush_cache_page() 4 µs per page, TLB shootdown by IPI 4/5/8/13 µs on 4/8/16/32 cores, both halting) and Table 3 (reverse mapping and page walk: the hbm-pcm platform's per-page OS cost)",
        help: "001: each moved page also pays flush_us and the shootdown is 001's for `cores` cores; platform: the platform's migration costs only (what earlier versions charged)",
    },
    ParamSpec {
        name: "flush_us",
        ty: ParamType::Float { min: 0.0, max: 1e9 },
        unit: "us per page",
        default: "4",
        source: "001 §2.3.1 (CLFLUSH of a page's lines, 4 µs measured at 2.26 GHz)",
        help: "ar_costs=001: cache flush of every moved page (halts the program)",
    },
    ParamSpec {
        name: "cores",
        ty: ParamType::Int { min: 1, max: 1 << 16 },
        unit: "cores",
        default: "16",
        source: "001 §4.1 (16 cores), §2.3.1 (shootdown 4/5/8/13 µs for 4/8/16/32 cores)",
        help: "ar_costs=001: sets the TLB shootdown (8 µs on 16 cores), once per epoch batch or once per page with os_costs=page",
    },
];

const FTHP_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "epoch",
        ty: ParamType::Period,
        unit: "simulated time (or accesses, or N-insn)",
        default: "100ms",
        source: "000 §6.4 (FTHP evaluated with 100 ms and 1 s epochs; the smaller is the default, 000's comparison uses 1 s)",
        help: "length of an epoch: pages are counted over it and the hottest move at its end",
    },
    ParamSpec {
        name: "os_costs",
        ty: ParamType::Choice { options: &["page", "epoch"] },
        unit: "",
        default: "page",
        source: "000 §5.1 (page fault 5 µs and TLB shootdown 3 µs per migrated page, from Meswani et al.)",
        help: OS_COSTS_HELP,
    },
];

pub static HMA_EPOCH: PolicyInfo = PolicyInfo {
    name: "hma-epoch",
    summary: "epoch-based hot-page migration with OS reconciliation (HMA_HS_OS_AR): each epoch, the slow pages with at least `threshold` accesses swap with LRU fast pages; one OS batch per epoch",
    source: "001 §2.4 (HMA_HS_OS_AR, after Meswani et al. [20]) and the authors' model shashankshashank44/HMA_onfly_adaptive src/hma.cpp; placement 001 §4.1",
    deploy: super::Deploy::Hardware { why: "hardware counts every access of every page per epoch (001 §2.4); Linux exposes no such counts" },
    params: HMA_PARAMS,
    build: |p: &Params| Ok(Built::from(hma(p)?)),
};

/// `hma-epoch` from its parameters, as a value (the registry boxes the same).
pub fn hma(p: &Params) -> Result<EpochOs> {
    let costs = os_costs("hma-epoch:os_costs", p.text("os_costs"))?;
    let reconcile = (p.text("ar_costs") == "001")
        .then(|| OsReconcile { flush_ns: p.float("flush_us") * 1e3, shootdown_ns: super::otf::tlb_shootdown_us(p.int("cores") as u32) * 1e3 });
    Ok(EpochOs::new(Kind::Hma, p.period("epoch"), p.int("threshold") as u32, p.int("limit_pages") as u64, costs, Initial::parse(p.text("initial")))
        .with_reconcile(reconcile))
}

/// `fthp` from its parameters, as a value.
pub fn fthp(p: &Params) -> Result<EpochOs> {
    let costs = os_costs("fthp:os_costs", p.text("os_costs"))?;
    Ok(EpochOs::new(Kind::Fthp, p.period("epoch"), 1, 0, costs, Initial::FirstTouch))
}

pub static FTHP: PolicyInfo = PolicyInfo {
    name: "fthp",
    summary:
        "first-touch hot-page: first touch fills the fast tier; at each epoch the epoch's hottest slow pages replace the coldest fast pages, moved by the OS",
    source: "000 §6.4 (FTHP, after Meswani et al.), costs 000 §5.1",
    deploy: super::Deploy::Hardware { why: "hardware counts every access of every page per epoch (000 §6.4); Linux exposes no such counts" },
    params: FTHP_PARAMS,
    build: |p: &Params| Ok(Built::from(fthp(p)?)),
};
