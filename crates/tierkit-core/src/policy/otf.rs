//! `otf`, `otf-adaptive` and `otf-reverse`: the on-the-fly page migration of seed 001
//! (Adavally, Islam, Kavi, "Dynamically Adapting Page Migration Policies Based on
//! Applications Memory Access Behaviors", §2.1–2.5, §3, §5), with the migration controller
//! (MigC), its ReMap table and address reconciliation (AR).
//!
//! # Rules (all three policies)
//!
//! * **Placement** (001 §4.1): four pages to the fast tier, four to the next, round-robin
//!   while the fast tier has room ([`Interleave`] with weights 4/4); `initial=first-touch`
//!   fills the fast tier first.
//! * **Counting** (001 §2.1): every access increments its page's count; a page's count
//!   restarts at 0 whenever the controller moves it (forward, as a victim, or back).
//! * **Candidates.** A page outside the fast tier whose count reaches the hotness threshold
//!   becomes the controller's *pending candidate* if there is none, or if its count is higher
//!   than the pending one's. There is one pending candidate; the authors' model
//!   (`HMA_onfly_adaptive`, `hma_onfly_count_keeper`) keeps the same single "next hot page",
//!   the hottest page that reached the threshold while the controller could not start. A
//!   page holding a ReMap entry (migrated and not yet reconciled) or under reconciliation is
//!   never a candidate, as in the authors' `already_migrated` check; with `ar=none` the
//!   table is unbounded and such pages may move again.
//! * **Starting a migration.** The controller moves one page (or one pair) at a time. It
//!   starts the pending candidate right after the access that made it one (the next access,
//!   from the simulator's point of view: the access that crossed the threshold is served by
//!   the page's old tier, as MigC waits for issued reads before copying), or as soon as it is
//!   free again. It does not start while migrations are paused (adaptive), or while the
//!   ReMap table lacks the entries the move needs (one for a one-way move, two for a swap):
//!   the candidate then waits, and the wait is counted as a full-table stall. A swap that
//!   finds no victim because every fast page holds an entry (`no_victim`) frees entries on
//!   demand (001 §3.3: "on demand or when the ReMap table fills up"): it starts a
//!   reconciliation or a move back whatever the occupancy. Without this, a fast tier of
//!   fewer than `ar_start × remap / 2` pages (or `remap / 2` for reverse migration) was
//!   pinned by the table before the trigger was reached and migration stopped for good.
//! * **One-way or two-way** (001 §2.2): into a free fast frame if there is one, else swapped
//!   with the least-recently-used fast page that holds no ReMap entry and is not under
//!   reconciliation (LRU by fast-tier accesses; pages skipped for holding an entry are moved
//!   to the recent end, as the authors' LRU list does). The move is a hardware move
//!   ([`MoveBy::Hw`]): no fault, the copy runs alongside the program through both tiers'
//!   queues, and accesses to the page in flight are served from the controller's buffers
//!   (detailed model). The controller is busy until the timing model says its copies are
//!   done ([`Now::hw_idle_ns`](super::Now)).
//! * **ReMap table** (001 §2.1–2.3): one entry per moved page (a swap takes two, with the
//!   pair flag), allocated when the move starts. Every access pays a lookup of
//!   `remap_lookup_cycles` at the platform's CPU frequency ([`Served::delayed`]).
//! * **Address reconciliation** (`ar=os|hw`, 001 §2.3): when the table holds at least
//!   `ar_start × remap` entries (or a move is stalled for room or for a victim), the oldest entry whose move
//!   has completed is reconciled, with its pair partner if it has one; one reconciliation at
//!   a time, alongside migrations. Its entries are freed when it completes, at
//!   `start + pages × cost per page` in simulated time. `ar=os` charges, per page, the
//!   cache flush of its lines (`flush_us`, 4 µs, §2.3.1), the OS reverse mapping and page
//!   walk (`rmap_cycles` 4480 and `page_walk_cycles` 150, Table 3) and a TLB shootdown that
//!   grows with the core count (4/5/8/13 µs for 4/8/16/32 cores, §2.3.1; linear in log2 of
//!   the core count between those points, 4 µs below 4 cores, +5 µs per doubling above 32),
//!   and halts the program for that time. `ar=hw` charges, per page, the OS reverse mapping
//!   and page walk that §2.3.2 still needs, the TLB-directory invalidation
//!   (`tlb_dir_cycles` 300, Table 3) and one write-invalidate per line of the page
//!   (`inval_cycles_per_line` 2, the authors' model). The reverse mapping and page walk are
//!   OS functions (§2.3.2) and halt the program; only the invalidations run alongside it
//!   (§2.3.1: "without interrupting the core").
//!   `ar=none` is the unbounded table of OTF_no_AR: nothing is reconciled.
//! * **Windows.** Time is cut into threshold windows of `twindow` CPU cycles. As in the
//!   authors' model, a window closes at the first access at or after its end at which the
//!   controller is idle, and the next window starts then; a migration counts in the window
//!   in which it completes.
//! * **MBQ** (migration benefit quotient, 001 §2, §3.1), two ways ([`MbqMode`]):
//!   `mbq=window` (the default), the accesses, during the window, to pages that the
//!   controller promoted into the fast tier and that still hold their ReMap entry
//!   ("recently migrated"), divided by the number of such pages at the window's end (0 when
//!   there are none), the table being the controller's record of recent migrations; or
//!   `mbq=cumulative`, the authors' model's quantity: accesses since the run began to pages
//!   the controller moved into the fast tier, while there, divided by the pages migrated
//!   since the run began (`HMA_onfly_adaptive`: `src/Processor.h:307`,
//!   `src/Cache.cpp:996-1000`, `src/Processor.cpp:2291`; neither count is reset).
//!
//! # `otf-adaptive:algorithm=1|2|3` (001 §3, §5.2–5.4, Algorithms 1–3)
//!
//! The threshold is doubled or halved at the end of each threshold window by [`adapt`], and
//! migrations are paused or resumed at the end of each migration window (`migwindow`, 100 M
//! cycles, counted from the first migration) from the mean of the window MBQs in it. The
//! rules start once the first migration has started (the authors' `onfly_started`); before
//! that the windows are only recorded. While paused, the controller still starts `probe`
//! migrations per threshold window (tierkit's rule: otherwise no recently migrated page is
//! left to raise the MBQ, and a pause never ends). Where the prose and the listings
//! disagree, the prose is followed by default (`rule=prose`; on real programs the
//! listing's Algorithm 3 drove the threshold to its floor, docs/policies.md);
//! `rule=listing` follows the listings ([`Rule`]), with which the authors' model's
//! commented-out combined rule agrees:
//!
//! * Alg. 1: the prose pauses below an MBQ of 90; the listing uses `min_MBQ` 50 (and resumes
//!   at `max_MBQ` 70). Its `min_min_count` is read as `min_mig_count`.
//! * Alg. 2: the prose halves the threshold above an MBQ of 130, doubles it below 50 and
//!   halts after 25 low windows; the listing doubles when `MBQ ≤ max_MBQ` (70), else halves
//!   when `MBQ ≥ min_MBQ` (50), and pauses from the migration-window MBQ. Taken literally, an
//!   MBQ in (50, 70] at the maximum threshold falls through to the halving branch.
//! * Alg. 3 uses `max_mig_count`/`min_mig_count` without defining them; we take Algorithm 1's
//!   240/160, which are also the values of the authors' model's combined rule.
//!
//! Doubling and halving are clamped to the bounds (the listings' thresholds are powers of
//! two, where the clamp changes nothing). Migration counts are pages moved (a swap counts
//! two, as in the authors' `adaptive_mig_count`).
//!
//! # `otf-reverse` (001 §3.3, §5.5)
//!
//! No reconciliation: when a move needs more entries than the table has free, the controller
//! first moves back the migrated group (a one-way page, or a swapped pair) whose promoted
//! page had the fewest accesses over the previous and the current threshold window, among
//! those whose move completed at least `min_residency_cycles` (1 M) ago; ties go to the
//! oldest. A one-way page returns to the tier it came from (if that tier has a free frame),
//! a pair swaps back, each page to its own original tier; the entries are freed when the
//! move back completes. When no group qualifies, the migration waits. The threshold adapts
//! by Algorithm 2 (§5.5). The ranking is refreshed once per threshold window and whenever it
//! runs out, so a choice is O(log n) amortized on a table of n entries.
//!
//! # Differences from the authors' model (`shashankshashank44/HMA_onfly_adaptive`)
//!
//! * The model charges a fixed controller set-up (remap searches, a 150-cycle OS query that
//!   halts two cores) before each migration; here a migration costs its copy only.
//! * In the model, hardware AR halts the page's core during the reverse-mapping and PTE
//!   stages; so does `ar=hw` here (one program, so the program halts).
//! * The model's adaptive code counts MBQ cumulatively (`migrated_hbm_access /
//!   pages_migrated`); that is `mbq=cumulative`, and the default is the per-window MBQ of
//!   001 §3.2 over the ReMap table's pages.
//! * Its reverse migration (disabled in the published code) picks the least recently used
//!   table page; we follow §5.5 and pick the fewest accesses in the window.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::basic::Interleave;
use super::params::{ParamSpec, ParamType, Params, PolicySpec};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::{Error, Result};
use crate::mechanics::remap::{Controller, MoveKind, Oldest, RemapTable};
use crate::mechanics::{Charge, MoveBy, TierId};
use crate::pagemap::PageId;
use serde_json::json;

// ---------------------------------------------------------------- adaptive rules (pure)

/// The adaptive technique (001 §3, §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Algorithm 1: threshold from the number of pages migrated in the window.
    MigrationCount,
    /// Algorithm 2: threshold from the MBQ.
    Mbq,
    /// Algorithm 3: both (the combined technique of §5.4).
    Combined,
}

impl Algorithm {
    pub fn from_number(n: i64) -> Option<Algorithm> {
        match n {
            1 => Some(Algorithm::MigrationCount),
            2 => Some(Algorithm::Mbq),
            3 => Some(Algorithm::Combined),
            _ => None,
        }
    }
    pub fn number(self) -> u8 {
        match self {
            Algorithm::MigrationCount => 1,
            Algorithm::Mbq => 2,
            Algorithm::Combined => 3,
        }
    }
}

/// The constants of Algorithms 1–3.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min_threshold: u32,
    pub max_threshold: u32,
    /// Pages migrated in a window at or below which (Alg. 1, 3) the threshold halves.
    pub min_mig_count: u64,
    /// Pages migrated in a window at or above which (Alg. 1, 3) the threshold doubles.
    pub max_mig_count: u64,
    /// MBQ at or below which migrations pause; Alg. 2 halves the threshold at or above it.
    pub min_mbq: f64,
    /// MBQ at or above which paused migrations resume; Alg. 2 doubles at or below it, Alg. 3
    /// halves only at or below it.
    pub max_mbq: f64,
    /// Alg. 3 doubles only when the MBQ is at or below this.
    pub upper_mbq: f64,
    /// Which of 001's two statements of Algorithms 2 and 3 is followed.
    pub rule: Rule,
    /// Alg. 2, prose rule: the MBQ above which the threshold halves (§3.2: 130).
    pub high_mbq: f64,
    /// Alg. 2, prose rule: migrations halt after more than this many consecutive windows
    /// with an MBQ below `min_mbq` (§3.2: 25).
    pub halt_windows: u32,
}

/// 001 states Algorithms 2 and 3 twice, and the two disagree: the listings, and the prose
/// (§3.2 for Algorithm 2; §5.4 and §7 for Algorithm 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The listings: Alg. 2 doubles at MBQ ≤ max_MBQ, else halves at
    /// MBQ ≥ min_MBQ, and pauses from the migration window's mean MBQ; Alg. 3 halves only
    /// when the MBQ is at most max_MBQ. The authors' model's combined rule halves at an MBQ
    /// below 70 as well.
    Listing,
    /// The prose (the default): Alg. 2 halves above `high_mbq` (130), doubles below `min_mbq` (50) and
    /// halts after more than `halt_windows` (25) consecutive low windows (§3.2); Alg. 3
    /// halves when few pages moved "and MBQ is high" (§7), high meaning above `upper_mbq`,
    /// the level at which §5.4 calls the MBQ high enough not to double.
    Prose,
}

impl Bounds {
    /// The values of the algorithm's listing in 001 (Alg. 3's undefined migration counts
    /// from Alg. 1).
    pub fn listing(alg: Algorithm) -> Bounds {
        Bounds {
            min_threshold: if alg == Algorithm::Combined { 32 } else { 64 },
            max_threshold: 256,
            min_mig_count: 160,
            max_mig_count: 240,
            min_mbq: 50.0,
            max_mbq: 70.0,
            upper_mbq: 100.0,
            rule: Rule::Listing,
            high_mbq: 130.0,
            halt_windows: 25,
        }
    }
}

/// The adaptive state: the hotness threshold and whether migrations are paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptState {
    pub threshold: u32,
    pub paused: bool,
    /// Consecutive windows with an MBQ below `min_mbq` (Alg. 2, prose rule).
    pub low_windows: u32,
}

impl AdaptState {
    pub fn new(threshold: u32, paused: bool) -> AdaptState {
        AdaptState { threshold, paused, low_windows: 0 }
    }
}

/// What one threshold window observed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowObs {
    /// Pages migrated in the window (a swap counts two).
    pub migrations: u64,
    /// The window's MBQ.
    pub mbq: f64,
    /// When the window also ends a migration window: the MBQ over that migration window.
    pub migwindow_mbq: Option<f64>,
}

/// One step of Algorithm 1, 2 or 3 (001 §3.1, §3.2, §5.4), at the end of a threshold window:
/// the new threshold, and, at the end of a migration window, whether migrations are paused.
pub fn adapt(alg: Algorithm, b: &Bounds, w: &WindowObs, s: AdaptState) -> AdaptState {
    let (m, q, t) = (w.migrations, w.mbq, s.threshold);
    let up = || t.saturating_mul(2).min(b.max_threshold);
    let down = || (t / 2).max(b.min_threshold);
    let prose = b.rule == Rule::Prose;
    if prose && alg == Algorithm::Mbq {
        // §3.2's prose: halve when high, double when low, halt after a run of low windows
        let threshold = if q > b.high_mbq && t > b.min_threshold {
            down()
        } else if q < b.min_mbq && t < b.max_threshold {
            up()
        } else {
            t
        };
        let mut low_windows = if q < b.min_mbq { s.low_windows.saturating_add(1) } else { 0 };
        let mut paused = s.paused || low_windows > b.halt_windows;
        // the prose names no resume level; §7 resumes "if the MBQ increases": the
        // listing's resume at the end of a migration window
        if s.paused && w.migwindow_mbq.is_some_and(|mq| mq >= b.max_mbq) {
            paused = false;
            low_windows = 0;
        }
        return AdaptState { threshold, paused, low_windows };
    }
    let threshold = match alg {
        Algorithm::MigrationCount => {
            if m >= b.max_mig_count && t < b.max_threshold {
                up()
            } else if m <= b.min_mig_count && t > b.min_threshold {
                down()
            } else {
                t
            }
        }
        Algorithm::Mbq => {
            if q <= b.max_mbq && t < b.max_threshold {
                up()
            } else if q >= b.min_mbq && t > b.min_threshold {
                down()
            } else {
                t
            }
        }
        Algorithm::Combined => {
            if m >= b.max_mig_count && t < b.max_threshold && q <= b.upper_mbq {
                up()
            } else if m <= b.min_mig_count && t > b.min_threshold && if prose { q > b.upper_mbq } else { q <= b.max_mbq } {
                down()
            } else {
                t
            }
        }
    };
    let mut paused = s.paused;
    if let Some(q) = w.migwindow_mbq {
        if q <= b.min_mbq {
            paused = true;
        } else if paused && q >= b.max_mbq {
            paused = false;
        }
    }
    AdaptState { threshold, paused, low_windows: 0 }
}

/// TLB shootdown time for `cores` cores, µs: 4, 5, 8 and 13 µs for 4, 8, 16 and 32 cores
/// (001 §2.3.1, from its reference [20]), linear in log2(cores) between those points, 4 µs
/// below 4 cores, and 5 µs more per doubling above 32.
pub fn tlb_shootdown_us(cores: u32) -> f64 {
    const PTS: [(f64, f64); 4] = [(2.0, 4.0), (3.0, 5.0), (4.0, 8.0), (5.0, 13.0)];
    let x = (cores.max(1) as f64).log2();
    if x <= PTS[0].0 {
        return PTS[0].1;
    }
    for w in PTS.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x <= x1 {
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
        }
    }
    let (x1, y1) = PTS[3];
    y1 + 5.0 * (x - x1)
}

// ---------------------------------------------------------------- configuration

/// Which quantity the adaptive rules read as the MBQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbqMode {
    /// The authors' model's: every access since the run began to a page that sits in the
    /// fast tier because the controller moved it there, divided by the pages migrated since
    /// the run began (a swap counts two). Neither count is ever reset, so while migrations
    /// are paused the quotient rises as long as the migrated pages are used: that is what
    /// lets a pause end.
    Cumulative,
    /// The window's accesses to promoted pages that still hold their ReMap entry, divided
    /// by the number of such pages at the window's end (the authors' "remap MBQ" taken per
    /// window, as 001 §3.2's prose reads); the migration window uses the mean of its
    /// threshold windows' values.
    Window,
}

impl MbqMode {
    fn name(self) -> &'static str {
        match self {
            MbqMode::Cumulative => "cumulative",
            MbqMode::Window => "window",
        }
    }
}

/// How ReMap entries are freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freeing {
    /// No reconciliation: an unbounded table (OTF_no_AR).
    NoAr,
    /// Address reconciliation by the OS (halts the program).
    OsAr,
    /// Address reconciliation by MigC (the OS reverse mapping and page walk halt the program;
    /// the invalidations run alongside it).
    HwAr,
    /// Reverse migration (`otf-reverse`).
    Reverse,
}

impl Freeing {
    fn name(self) -> &'static str {
        match self {
            Freeing::NoAr => "none",
            Freeing::OsAr => "os",
            Freeing::HwAr => "hw",
            Freeing::Reverse => "reverse migration",
        }
    }
}

/// Where new pages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Initial {
    /// 001 §4.1: 4 pages fast, 4 slow, round-robin while the fast tier has room.
    Interleave,
    FirstTouch,
}

/// Everything an instance is configured with (parsed from the declared parameters).
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    pub threshold: u32,
    /// ReMap entries (ignored with [`Freeing::NoAr`]).
    pub remap: u64,
    pub freeing: Freeing,
    pub remap_lookup_cycles: f64,
    pub ar_start: f64,
    pub cores: u32,
    pub flush_us: f64,
    pub rmap_cycles: f64,
    pub page_walk_cycles: f64,
    pub tlb_dir_cycles: f64,
    pub inval_cycles_per_line: f64,
    pub mig_energy_nj: f64,
    pub lookup_energy_pj: f64,
    pub initial: Initial,
    pub twindow_cycles: u64,
    /// The adaptive technique, its constants and the migration window (cycles).
    pub adaptive: Option<(Algorithm, Bounds, u64)>,
    /// The MBQ the adaptive rules read.
    pub mbq: MbqMode,
    /// Migrations a paused controller still starts per threshold window, so that the MBQ
    /// has recently migrated pages to measure and a pause can end.
    pub probe: u32,
    pub min_residency_cycles: u64,
}

// ---------------------------------------------------------------- state

const NO_PAGE: PageId = PageId::MAX;
/// Columns of a time-series row.
const ROW: usize = 9;
/// The page holds a ReMap entry.
const ENTRY: u8 = 1;
/// The page was promoted into the fast tier and holds its entry: its accesses make the MBQ.
const PROMOTED: u8 = 2;
/// The page is being moved or reconciled.
const BUSY: u8 = 4;
/// The page is in the fast tier because the controller moved it there (kept after its entry
/// is reconciled; cleared when it leaves): its accesses make the cumulative MBQ, as the
/// authors' `migrated_location` does.
const MOVED_IN: u8 = 8;

/// Per-page state, one flat array indexed by page id.
/// 16 bytes, so that four pages share a cache line (the array is read on every access).
#[derive(Clone, Copy, Debug, Default)]
struct Pg {
    /// The LRU stamp (high 56 bits: the fast-tier access count at its latest fast-tier
    /// access or move in, updated only once it is `lru_slack` accesses old) and the flags
    /// (low 8 bits).
    lru_flags: u64,
    /// Accesses since the page last moved (or was placed).
    count: u32,
    /// Accesses while promoted, in the current window and in the previous one (saturating:
    /// they only rank pages for reverse migration).
    win: u16,
    prev: u16,
}

impl Pg {
    #[inline(always)]
    fn lru(&self) -> u64 {
        self.lru_flags >> 8
    }
    #[inline(always)]
    fn set_lru(&mut self, t: u64) {
        self.lru_flags = (t << 8) | (self.lru_flags & 0xff);
    }
    #[inline(always)]
    fn flags(&self) -> u8 {
        self.lru_flags as u8
    }
    #[inline(always)]
    fn add_flags(&mut self, f: u8) {
        self.lru_flags |= f as u64;
    }
    #[inline(always)]
    fn remove_flags(&mut self, f: u8) {
        self.lru_flags &= !(f as u64);
    }
}

/// The threshold window being observed.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    idx: u64,
    start_ns: f64,
    end_ns: f64,
    /// Accesses to promoted pages.
    hot_acc: u64,
    /// Pages whose migration completed in it.
    migrations: u64,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
struct Counters {
    /// Migrations into a free fast frame.
    migrations_one_way: u64,
    /// Swaps with a fast page.
    migrations_two_way: u64,
    /// Pages moved by forward migrations (one-way 1, swap 2), counted when they start.
    pages_migrated: u64,
    /// Groups moved back, and the pages they held (counted when they start).
    reverse_migrations: u64,
    reverse_pages: u64,
    /// Times no group qualified for reverse migration when one was needed.
    reverse_none_qualified: u64,
    /// Reconciliations (one per group) and the pages they reconciled.
    address_reconciliations: u64,
    reconciled_pages: u64,
    /// Times the table had no room for a pending migration, and the total wait, ns.
    full_table_stalls: u64,
    full_table_stall_ns: f64,
    /// Times no fast page could be swapped out (all hold entries or are busy).
    no_victim: u64,
    threshold_increases: u64,
    threshold_decreases: u64,
    pauses: u64,
    resumes: u64,
    /// Migrations started while paused, as probes (see `probe`).
    probes: u64,
    /// Most ReMap entries held at once.
    remap_peak: u64,
    /// ReMap lookups (one per access).
    remap_lookups: u64,
    windows: u64,
}

/// The on-the-fly migration controller (`otf`, `otf-adaptive`, `otf-reverse`).
pub struct Otf {
    cfg: Config,
    interleave: Interleave,
    pg: Vec<Pg>,
    threshold: u32,
    paused: bool,
    low_windows: u32,
    /// The controller (mechanics): its ReMap table, its move in flight, its reconciliation.
    mc: Controller,
    /// Promoted pages holding an entry (the MBQ's denominator).
    promoted: u64,
    pending: PageId,
    /// LRU of the fast tier: (stamp, page), stale entries skipped; pages entering the fast
    /// tier with an old stamp go to the side heap.
    lru_q: VecDeque<(u64, PageId)>,
    lru_side: BinaryHeap<Reverse<(u64, PageId)>>,
    lru_tick: u64,
    lru_limit: usize,
    /// A fast page accessed again within this many fast-tier accesses keeps its stamp (the
    /// order is exact to within capacity/64 fast-tier accesses; exact below 64 fast pages),
    /// which spares most pushes for hot pages.
    lru_slack: u64,
    /// Reverse-migration ranking: (key, seq, slot), best first, and the next to look at.
    rank: Vec<(u64, u64, u32)>,
    rank_pos: usize,
    rank_window: u64,
    /// The next time anything can change (a completion, a window end, a retry), ns.
    wake_ns: f64,
    /// A candidate could not start; wait for an event rather than retrying every access.
    blocked: bool,
    /// A migration waits for table room (also starts reconciliation).
    room_stall: bool,
    stall_since: Option<f64>,
    /// Reverse migration: when nothing qualified, the ranking is not rebuilt before this
    /// (the earliest time a skipped group becomes old enough), and the controller looks
    /// again then.
    rank_ready_ns: f64,
    back_wake_ns: f64,
    w: Window,
    /// Adaptive rules have begun (first migration started); migration-window bookkeeping.
    started: bool,
    mig_start_ns: f64,
    mig_mbq_sum: f64,
    mig_windows: u64,
    /// Migration windows closed (the pause and resume decisions taken).
    mig_decisions: u64,
    /// The cumulative MBQ's counts: accesses to pages moved into the fast tier while they
    /// are there, and pages migrated (a swap counts two), since the run began.
    cum_acc: u64,
    cum_pages: u64,
    /// When the pause in force (if any) began, ns.
    paused_since: Option<f64>,
    /// Probe migrations a paused controller may still start in the current threshold window.
    probes_left: u32,
    rows: Vec<[f64; ROW]>,
    // derived, ns
    lookup_ns: f64,
    twindow_ns: f64,
    migwindow_ns: f64,
    min_residency_ns: f64,
    ar_page_ns: f64,
    /// `ar=hw`: the part of `ar_page_ns` that runs in the OS and halts the program.
    ar_os_page_ns: f64,
    lookup_j: f64,
    last_ns: f64,
    n: Counters,
}

impl Otf {
    pub fn new(cfg: Config) -> Otf {
        // ar=none: the unbounded table of OTF_no_AR; only reconciliation reads the order
        let capacity = if cfg.freeing == Freeing::NoAr { None } else { Some(cfg.remap) };
        let table = RemapTable::new(capacity, matches!(cfg.freeing, Freeing::OsAr | Freeing::HwAr));
        Otf {
            interleave: Interleave::new(vec![4, 4]),
            pg: Vec::new(),
            threshold: cfg.threshold,
            paused: false,
            low_windows: 0,
            mc: Controller::new(table),
            promoted: 0,
            pending: NO_PAGE,
            lru_q: VecDeque::new(),
            lru_side: BinaryHeap::new(),
            lru_tick: 0,
            lru_limit: 1 << 16,
            lru_slack: 0,
            rank: Vec::new(),
            rank_pos: 0,
            rank_window: u64::MAX,
            wake_ns: 0.0,
            blocked: false,
            room_stall: false,
            stall_since: None,
            rank_ready_ns: f64::NEG_INFINITY,
            back_wake_ns: f64::INFINITY,
            w: Window::default(),
            started: false,
            mig_start_ns: 0.0,
            mig_mbq_sum: 0.0,
            mig_windows: 0,
            mig_decisions: 0,
            cum_acc: 0,
            cum_pages: 0,
            paused_since: None,
            probes_left: 0,
            rows: Vec::new(),
            lookup_ns: 0.0,
            twindow_ns: 0.0,
            migwindow_ns: 0.0,
            min_residency_ns: 0.0,
            ar_page_ns: 0.0,
            ar_os_page_ns: 0.0,
            lookup_j: cfg.lookup_energy_pj * 1e-12,
            last_ns: 0.0,
            n: Counters::default(),
            cfg,
        }
    }

    #[inline]
    fn bounded(&self) -> bool {
        self.mc.table.bounded()
    }

    /// May this page be moved (as a candidate or a victim)?
    #[inline]
    fn movable(&self, flags: u8) -> bool {
        let mask = if self.bounded() { BUSY | ENTRY } else { BUSY };
        flags & mask == 0
    }

    fn grow(&mut self, n: usize) {
        if self.pg.len() < n {
            let want = n.max(self.pg.len() * 2).max(1024);
            self.pg.resize(want, Pg::default());
        }
    }

    // ------------------------------------------------------------ LRU of the fast tier

    #[inline]
    fn lru_touch(&mut self, page: PageId) {
        self.lru_tick += 1;
        self.pg[page as usize].set_lru(self.lru_tick);
        self.lru_q.push_back((self.lru_tick, page));
    }

    /// Drop outdated LRU entries (the page was accessed again, or left the fast tier). The
    /// pages are scattered, so their state is prefetched a few entries ahead.
    fn lru_compact(&mut self, ctx: &Ctx) {
        let pg = &self.pg;
        let current = |(ts, p): (u64, PageId)| pg[p as usize].lru() == ts && ctx.mem.tier(p) == 0;
        let v = self.lru_q.make_contiguous();
        let mut keep = 0;
        for i in 0..v.len() {
            if let Some(&(_, ahead)) = v.get(i + 16) {
                crate::prefetch::read(pg.as_ptr().wrapping_add(ahead as usize));
                ctx.mem.prefetch(ahead);
            }
            if current(v[i]) {
                v[keep] = v[i];
                keep += 1;
            }
        }
        self.lru_q.truncate(keep);
        let mut side = std::mem::take(&mut self.lru_side).into_vec();
        side.retain(|r| current(r.0));
        self.lru_side = BinaryHeap::from(side);
        self.lru_limit = 4 * (self.lru_q.len() + self.lru_side.len()) + (1 << 16);
    }

    /// The least-recently-used fast page that may be swapped out, removed from the order.
    /// Pages that may not (they hold an entry or are busy) are moved to the recent end.
    fn pick_victim(&mut self, ctx: &Ctx) -> Option<PageId> {
        let mut bumps = 0u64;
        let max_bumps = ctx.mem.used(0) + 1;
        loop {
            let q = self.lru_q.front().copied();
            let s = self.lru_side.peek().map(|r| r.0);
            let (ts, p) = match (q, s) {
                (None, None) => return None,
                (Some(a), Some(b)) if b < a => {
                    self.lru_side.pop();
                    b
                }
                (None, Some(b)) => {
                    self.lru_side.pop();
                    b
                }
                (Some(a), _) => {
                    self.lru_q.pop_front();
                    a
                }
            };
            let st = self.pg[p as usize];
            if st.lru() != ts || ctx.mem.tier(p) != 0 {
                continue; // outdated
            }
            if self.movable(st.flags()) {
                return Some(p);
            }
            self.lru_touch(p);
            bumps += 1;
            if bumps > max_bumps {
                return None;
            }
        }
    }

    // ------------------------------------------------------------ candidates

    /// A page outside the fast tier reached the threshold.
    #[inline]
    fn offer(&mut self, page: PageId, now: f64) {
        let st = self.pg[page as usize];
        if !self.movable(st.flags()) {
            return;
        }
        if self.pending != page && self.pending != NO_PAGE && st.count <= self.pg[self.pending as usize].count {
            return;
        }
        self.pending = page;
        if !self.mc.moving() && !self.blocked {
            self.wake_ns = self.wake_ns.min(now);
        }
    }

    // ------------------------------------------------------------ the table

    /// Free a group's entries and clear its pages' table state.
    fn drop_group(&mut self, slot: u32) {
        let g = self.mc.table.remove(slot);
        for p in [g.hot, g.cold] {
            if p != NO_PAGE {
                let st = &mut self.pg[p as usize];
                if st.flags() & PROMOTED != 0 {
                    self.promoted -= 1;
                }
                st.remove_flags(ENTRY | PROMOTED | BUSY);
            }
        }
    }

    fn note_stall(&mut self, now: f64) {
        if self.stall_since.is_none() {
            self.stall_since = Some(now);
            self.n.full_table_stalls += 1;
        }
    }

    fn end_stall(&mut self, now: f64) {
        if let Some(s) = self.stall_since.take() {
            self.n.full_table_stall_ns += now - s;
        }
    }

    // ------------------------------------------------------------ the controller

    /// Start the pending candidate if everything allows it.
    fn try_start(&mut self, ctx: &mut Ctx, now: f64) {
        let p = self.pending;
        if p == NO_PAGE || self.mc.moving() {
            return;
        }
        let st = self.pg[p as usize];
        let from = ctx.mem.tier(p);
        if from == 0 || !self.movable(st.flags()) || st.count < self.threshold {
            self.pending = NO_PAGE; // moved, taken, or below a raised threshold
            return;
        }
        // paused: only the window's probes may start (see `probe`)
        let probe = self.paused;
        if probe && self.probes_left == 0 {
            self.blocked = true;
            return;
        }
        let one_way = ctx.mem.free(0) > 0;
        let need = if one_way { 1 } else { 2 };
        if !self.mc.table.has_room(need) {
            self.room_stall = true;
            if self.cfg.freeing == Freeing::Reverse && self.start_back(ctx, now) {
                return;
            }
            self.note_stall(now);
            self.blocked = true;
            return;
        }
        let victim = if one_way {
            NO_PAGE
        } else {
            match self.pick_victim(ctx) {
                Some(v) => v,
                None => {
                    // Every fast page holds an entry (or is busy): the table pins the whole
                    // fast tier, which only freeing entries can undo. Free them on demand
                    // (001 §3.3), whatever the occupancy: reconcile (`maybe_start_ar` runs
                    // next in `service`) or move a group back.
                    self.n.no_victim += 1;
                    self.room_stall = true;
                    if self.cfg.freeing == Freeing::Reverse && self.start_back(ctx, now) {
                        return;
                    }
                    self.blocked = true;
                    return;
                }
            }
        };
        self.room_stall = false;
        self.end_stall(now);
        if one_way {
            ctx.mem.migrate_by(p, 0, MoveBy::Hw).expect("otf: one-way move into a free fast frame");
            self.n.migrations_one_way += 1;
        } else {
            ctx.mem.swap_by(p, victim, MoveBy::Hw).expect("otf: swap with a fast page");
            self.n.migrations_two_way += 1;
        }
        let slot = if self.bounded() {
            self.mc.table.insert(p, victim, from)
        } else {
            for q in [p, victim] {
                if q != NO_PAGE && self.pg[q as usize].flags() & ENTRY == 0 {
                    self.mc.table.hold(1);
                }
            }
            u32::MAX
        };
        self.n.remap_peak = self.n.remap_peak.max(self.mc.table.entries());
        for q in [p, victim] {
            if q != NO_PAGE {
                let st = &mut self.pg[q as usize];
                if st.flags() & PROMOTED != 0 {
                    self.promoted -= 1; // a promoted page swapped out (unbounded table only)
                }
                st.remove_flags(PROMOTED | MOVED_IN);
                st.add_flags(ENTRY | BUSY);
                st.count = 0;
            }
        }
        self.lru_touch(p);
        if probe {
            self.probes_left -= 1;
            self.n.probes += 1;
        }
        self.n.pages_migrated += need;
        self.charge_moves(ctx, need);
        self.pending = NO_PAGE;
        self.mc.start_move(MoveKind::Forward, p, victim, slot, now);
        if !self.started {
            self.started = true;
            self.mig_start_ns = now;
        }
    }

    fn charge_moves(&mut self, ctx: &mut Ctx, pages: u64) {
        if self.cfg.mig_energy_nj > 0.0 {
            ctx.mem.charge(Charge { what: "migration controller", ns: 0.0, halts: false, energy_j: self.cfg.mig_energy_nj * 1e-9 * pages as f64 });
        }
    }

    /// Move back the best group for reverse migration; false if none qualifies.
    fn start_back(&mut self, ctx: &mut Ctx, now: f64) -> bool {
        let Some(slot) = self.pick_back(ctx, now) else {
            self.n.reverse_none_qualified += 1;
            self.back_wake_ns = self.rank_ready_ns;
            return false;
        };
        let g = self.mc.table.group(slot);
        if g.cold == NO_PAGE {
            ctx.mem.migrate_by(g.hot, g.from, MoveBy::Hw).expect("otf-reverse: one-way move back");
        } else {
            ctx.mem.swap_by(g.hot, g.cold, MoveBy::Hw).expect("otf-reverse: pair swapped back");
        }
        self.mc.table.set_done(slot, f64::INFINITY);
        for q in [g.hot, g.cold] {
            if q != NO_PAGE {
                let st = &mut self.pg[q as usize];
                if st.flags() & PROMOTED != 0 {
                    self.promoted -= 1;
                }
                st.remove_flags(PROMOTED | MOVED_IN);
                st.add_flags(BUSY);
                st.count = 0;
            }
        }
        if g.cold != NO_PAGE {
            // back in the fast tier without an access: it keeps its old LRU stamp
            self.lru_side.push(Reverse((self.pg[g.cold as usize].lru(), g.cold)));
        }
        self.charge_moves(ctx, g.pages());
        self.n.reverse_migrations += 1;
        self.n.reverse_pages += g.pages();
        self.rank_ready_ns = f64::NEG_INFINITY;
        self.mc.start_move(MoveKind::Back, g.hot, g.cold, slot, now);
        true
    }

    /// The group to move back: fewest accesses to its promoted page over the previous and
    /// current window, resident at least `min_residency_cycles`. The ranking is a snapshot,
    /// rebuilt once per window and whenever it runs out (but not again before a group it
    /// skipped as too young is old enough), so a choice costs O(log n) amortized.
    fn pick_back(&mut self, ctx: &Ctx, now: f64) -> Option<u32> {
        let fresh = self.rank_window == self.w.idx;
        if fresh && self.rank_pos < self.rank.len() {
            if let (Some(slot), _) = self.scan_rank(ctx, now) {
                return Some(slot);
            }
        }
        if fresh && now < self.rank_ready_ns {
            return None;
        }
        self.rank.clear();
        for (slot, g) in self.mc.table.slots() {
            if g.live && g.done_ns.is_finite() {
                let s = self.pg[g.hot as usize];
                self.rank.push((s.prev as u64 + s.win as u64, g.seq, slot));
            }
        }
        self.rank.sort_unstable();
        self.rank_pos = 0;
        self.rank_window = self.w.idx;
        let (pick, earliest) = self.scan_rank(ctx, now);
        if pick.is_none() {
            self.rank_ready_ns = earliest;
        }
        pick
    }

    /// The next qualifying group of the ranking, and (when none) the earliest time one of
    /// the groups passed over becomes old enough.
    fn scan_rank(&mut self, ctx: &Ctx, now: f64) -> (Option<u32>, f64) {
        let mut earliest = f64::INFINITY;
        while self.rank_pos < self.rank.len() {
            let (_, seq, slot) = self.rank[self.rank_pos];
            self.rank_pos += 1;
            let g = self.mc.table.group(slot);
            if !g.live || g.seq != seq || !g.done_ns.is_finite() {
                continue;
            }
            let ready = g.done_ns + self.min_residency_ns;
            if ready > now {
                earliest = earliest.min(ready);
                continue;
            }
            if g.cold == NO_PAGE && ctx.mem.free(g.from) == 0 {
                continue;
            }
            return (Some(slot), earliest);
        }
        (None, earliest)
    }

    /// The current move's copy is done.
    fn complete(&mut self, done: f64) {
        let inf = self.mc.finish_move().expect("a move in flight");
        match inf.kind {
            MoveKind::Forward => {
                for q in [inf.hot, inf.cold] {
                    if q != NO_PAGE {
                        self.pg[q as usize].remove_flags(BUSY);
                    }
                }
                let h = &mut self.pg[inf.hot as usize];
                h.add_flags(PROMOTED | MOVED_IN);
                h.win = 0;
                h.prev = 0;
                self.promoted += 1;
                if inf.slot != u32::MAX {
                    self.mc.table.set_done(inf.slot, done);
                }
                let pages = 1 + (inf.cold != NO_PAGE) as u64;
                self.w.migrations += pages;
                self.cum_pages += pages;
            }
            MoveKind::Back => self.drop_group(inf.slot),
        }
    }

    // ------------------------------------------------------------ reconciliation

    fn maybe_start_ar(&mut self, ctx: &mut Ctx, now: f64) {
        let halts = match self.cfg.freeing {
            Freeing::OsAr => true,
            Freeing::HwAr => false,
            _ => return,
        };
        if self.mc.reconciling().is_some() || !(self.mc.table.entries() as f64 >= self.cfg.ar_start * self.mc.table.capacity() as f64 || self.room_stall) {
            return;
        }
        // the oldest group, once its move is done (while it is still being moved: wait for it)
        let Oldest::Done(slot) = self.mc.table.oldest_done() else { return };
        let g = self.mc.table.group(slot);
        for q in [g.hot, g.cold] {
            if q != NO_PAGE {
                self.pg[q as usize].add_flags(BUSY);
            }
        }
        let pages = g.pages() as f64;
        let ns = self.ar_page_ns * pages;
        // the halting part stops each page's owner for its share (the authors' model:
        // mig_cores[ar_page_N_core_id]), on several cores
        let owned = [g.hot, g.cold];
        let g_pages = &owned[..if g.cold == NO_PAGE { 1 } else { 2 }];
        if halts {
            ctx.mem.charge_for(g_pages, Charge { what: "address reconciliation", ns, halts: true, energy_j: 0.0 });
        } else {
            // MigC's path still calls the OS for the reverse mapping and the PTE update
            // (001 §2.3.2, Table 3), which stop the program; only the invalidations run
            // without interrupting the cores (§2.3.1).
            let os_ns = self.ar_os_page_ns * pages;
            ctx.mem.charge_for(g_pages, Charge { what: "address reconciliation", ns: os_ns, halts: true, energy_j: 0.0 });
            ctx.mem.charge(Charge { what: "address reconciliation (MigC invalidations)", ns: ns - os_ns, halts: false, energy_j: 0.0 });
        }
        self.mc.start_reconciling(slot, now + ns);
    }

    fn complete_ar(&mut self) {
        let ar = self.mc.finish_reconciling().expect("a reconciliation in progress");
        let pages = self.mc.table.group(ar.slot).pages();
        self.drop_group(ar.slot);
        self.n.address_reconciliations += 1;
        self.n.reconciled_pages += pages;
    }

    // ------------------------------------------------------------ windows

    /// The window's MBQ (see [`MbqMode::Window`]).
    fn window_mbq(&self) -> f64 {
        if self.promoted > 0 {
            self.w.hot_acc as f64 / self.promoted as f64
        } else {
            0.0
        }
    }

    /// The MBQ since the run began (see [`MbqMode::Cumulative`]).
    fn cumulative_mbq(&self) -> f64 {
        if self.cum_pages > 0 {
            self.cum_acc as f64 / self.cum_pages as f64
        } else {
            0.0
        }
    }

    /// The MBQ the adaptive rules read.
    fn mbq(&self) -> f64 {
        match self.cfg.mbq {
            MbqMode::Cumulative => self.cumulative_mbq(),
            MbqMode::Window => self.window_mbq(),
        }
    }

    fn row(&self, at_ns: f64) -> [f64; ROW] {
        [
            self.w.idx as f64,
            at_ns / 1e6,
            self.mbq(),
            self.w.migrations as f64,
            self.threshold as f64,
            self.paused as u8 as f64,
            self.mc.table.entries() as f64,
            self.window_mbq(),
            self.cumulative_mbq(),
        ]
    }

    fn close_window(&mut self, now: f64) {
        let mbq = self.mbq();
        self.rows.push(self.row(now));
        self.n.windows += 1;
        self.probes_left = self.cfg.probe;
        if let (Some((alg, b, _)), true) = (self.cfg.adaptive, self.started) {
            self.mig_mbq_sum += mbq;
            self.mig_windows += 1;
            let migwindow_mbq = if now - self.mig_start_ns >= self.migwindow_ns {
                // the window MBQ's mean over the migration window; the cumulative MBQ as it
                // stands (the authors' model reads its running quotient there)
                let m = match self.cfg.mbq {
                    MbqMode::Window => self.mig_mbq_sum / self.mig_windows as f64,
                    MbqMode::Cumulative => mbq,
                };
                self.mig_decisions += 1;
                self.mig_mbq_sum = 0.0;
                self.mig_windows = 0;
                self.mig_start_ns = now;
                Some(m)
            } else {
                None
            };
            let obs = WindowObs { migrations: self.w.migrations, mbq, migwindow_mbq };
            let s = adapt(alg, &b, &obs, AdaptState { threshold: self.threshold, paused: self.paused, low_windows: self.low_windows });
            self.low_windows = s.low_windows;
            self.n.threshold_increases += (s.threshold > self.threshold) as u64;
            self.n.threshold_decreases += (s.threshold < self.threshold) as u64;
            self.n.pauses += (s.paused && !self.paused) as u64;
            self.n.resumes += (!s.paused && self.paused) as u64;
            if s.paused && !self.paused {
                self.paused_since = Some(now);
            } else if !s.paused {
                self.paused_since = None;
            }
            self.threshold = s.threshold;
            self.paused = s.paused;
        }
        if self.cfg.freeing == Freeing::Reverse {
            for g in self.mc.table.live() {
                let s = &mut self.pg[g.hot as usize];
                s.prev = s.win;
                s.win = 0;
            }
        }
        self.w = Window { idx: self.w.idx + 1, start_ns: now, end_ns: now + self.twindow_ns, hot_acc: 0, migrations: 0 };
    }

    // ------------------------------------------------------------ events

    /// Everything that happens off the per-access path: completions, windows,
    /// reconciliation, starting moves. Runs only when `wake_ns` is reached.
    #[cold]
    fn service(&mut self, ctx: &mut Ctx) {
        let now = ctx.now.ns;
        self.blocked = false;
        self.back_wake_ns = f64::INFINITY;
        if let Some(done) = self.mc.move_done_ns(ctx.now.hw_idle_ns) {
            if now >= done {
                self.complete(done);
            }
        }
        if self.mc.reconciling().is_some_and(|a| now >= a.done_ns) {
            self.complete_ar();
        }
        if now >= self.w.end_ns && !self.mc.moving() {
            self.close_window(now);
        }
        self.try_start(ctx, now);
        self.maybe_start_ar(ctx, now);
        let mut wake = match self.mc.in_flight() {
            Some(i) if i.done_ns.is_nan() => now,
            Some(i) => i.done_ns,
            None => self.w.end_ns,
        };
        if let Some(a) = self.mc.reconciling() {
            wake = wake.min(a.done_ns);
        }
        if self.blocked && !self.mc.moving() {
            wake = wake.min(self.back_wake_ns);
        }
        self.wake_ns = wake;
    }
}

impl Policy for Otf {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// otf-adaptive adapts, and otf-reverse ranks groups to move back, at the end of each
    /// threshold window: one activation per window. Plain otf moves pages as they become hot
    /// and has no periodic work.
    fn activity(&self) -> super::Activity {
        if self.cfg.adaptive.is_some() || self.cfg.freeing == Freeing::Reverse {
            super::Activity::Ran { times: self.n.windows, every: crate::units::Period::Ns(self.twindow_ns.round() as u64) }
        } else {
            super::Activity::OnAccess
        }
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let ghz = ctx.platform.platform.cpu.freq_ghz;
        let cyc = |c: f64| c / ghz;
        self.lookup_ns = cyc(self.cfg.remap_lookup_cycles);
        self.twindow_ns = cyc(self.cfg.twindow_cycles as f64);
        self.migwindow_ns = self.cfg.adaptive.map(|a| cyc(a.2 as f64)).unwrap_or(f64::INFINITY);
        self.min_residency_ns = cyc(self.cfg.min_residency_cycles as f64);
        let lines = (ctx.mem.page_bytes() / ctx.line_bytes.max(1)) as f64;
        let c = &self.cfg;
        self.ar_page_ns = match c.freeing {
            // the shootdown curve is code, not a parameter: scaled here (--time-scale)
            Freeing::OsAr => c.flush_us * 1e3 + cyc(c.rmap_cycles + c.page_walk_cycles) + tlb_shootdown_us(c.cores) * 1e3 / ctx.time_scale,
            Freeing::HwAr => cyc(c.rmap_cycles + c.page_walk_cycles + c.tlb_dir_cycles + lines * c.inval_cycles_per_line),
            _ => 0.0,
        };
        self.ar_os_page_ns = match c.freeing {
            Freeing::HwAr => cyc(c.rmap_cycles + c.page_walk_cycles),
            _ => 0.0,
        };
        self.w = Window { idx: 0, start_ns: 0.0, end_ns: self.twindow_ns, hot_acc: 0, migrations: 0 };
        self.wake_ns = self.twindow_ns;
        self.lru_slack = ctx.mem.capacity(0).min(1 << 40) / 64;
        self.grow(ctx.pages);
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        self.grow(page as usize + 1);
        match self.cfg.initial {
            Initial::Interleave => self.interleave.next(ctx),
            Initial::FirstTouch => ctx.mem.first_free_from(0).unwrap_or(0),
        }
    }

    fn adopt(&mut self, page: PageId, _tier: TierId, _ctx: &mut Ctx) {
        self.grow(page as usize + 1);
    }

    #[inline(always)]
    fn prefetch(&self, page: PageId) {
        crate::prefetch::read(self.pg.as_ptr().wrapping_add(page as usize));
    }

    #[inline]
    fn on_access(&mut self, page: PageId, _addr: u64, _write: bool, ctx: &mut Ctx) -> Served {
        let now = ctx.now.ns;
        if now >= self.wake_ns {
            self.service(ctx);
        }
        self.last_ns = now;
        let tier = ctx.mem.tier(page);
        let st = &mut self.pg[page as usize];
        let c = st.count.saturating_add(1);
        st.count = c;
        if tier == 0 {
            let f = st.flags();
            if f & (PROMOTED | MOVED_IN) != 0 {
                if f & PROMOTED != 0 {
                    st.win = st.win.saturating_add(1);
                    self.w.hot_acc += 1;
                }
                self.cum_acc += (f & MOVED_IN != 0) as u64;
            }
            self.lru_tick += 1;
            if st.lru() + self.lru_slack < self.lru_tick {
                st.set_lru(self.lru_tick);
                self.lru_q.push_back((self.lru_tick, page));
                if self.lru_q.len() > self.lru_limit {
                    self.lru_compact(ctx);
                }
            }
        } else if c >= self.threshold {
            self.offer(page, now);
        }
        self.n.remap_lookups += 1;
        if self.lookup_j > 0.0 {
            ctx.mem.charge(Charge { what: "remap lookup", ns: 0.0, halts: false, energy_j: self.lookup_j });
        }
        Served::delayed(self.lookup_ns)
    }

    /// What the run cannot show: too few migration windows for the pause and resume rules
    /// to act, a pause that never ended, a ReMap table that pinned the whole fast tier.
    fn input_warnings(&self, _digest: Option<&str>, ran: &super::RunExtent) -> Vec<String> {
        let mut w = Vec::new();
        let name = self.cfg.name;
        let ms = |ns: f64| format!("{:.3} ms", ns / 1e6);
        if self.cfg.adaptive.is_some() && self.migwindow_ns.is_finite() {
            let fits = ran.runtime_ns / self.migwindow_ns;
            if fits < 3.0 {
                w.push(format!(
                    "{name}: its migration window ({}, migwindow) fits {fits:.2} times in the run's {} of simulated time, so migrations were paused or resumed from {} decision{} only: too few to show how it adapts; see --repeat / --time-scale",
                    ms(self.migwindow_ns),
                    ms(ran.runtime_ns),
                    self.mig_decisions,
                    if self.mig_decisions == 1 { "" } else { "s" },
                ));
            }
        }
        if let (true, Some(since)) = (self.paused, self.paused_since) {
            let rest = (ran.runtime_ns - since).max(0.0);
            w.push(format!(
                "{name}: paused migrations at {} and never resumed them ({} pause{}, {} resume{}): no page moved in the last {} ({:.0}% of the run); the MBQ at the end was {:.1} ({} MBQ) against a resume level of {}",
                ms(since),
                self.n.pauses,
                if self.n.pauses == 1 { "" } else { "s" },
                self.n.resumes,
                if self.n.resumes == 1 { "" } else { "s" },
                ms(rest),
                100.0 * rest / ran.runtime_ns.max(1e-9),
                self.mbq(),
                self.cfg.mbq.name(),
                self.cfg.adaptive.map(|a| a.1.max_mbq).unwrap_or(f64::NAN),
            ));
        }
        if self.n.no_victim > 0 {
            let pages = self.n.pages_migrated + self.n.reverse_pages;
            w.push(format!(
                "{name}: {} time{} every fast page held a ReMap entry (a table of {} entries against a smaller fast tier), and entries were freed on demand to go on; such a run tends to thrash ({pages} pages moved, {} reconciled, {} moved back): compare its fast-tier hit ratio with first-touch's",
                self.n.no_victim,
                if self.n.no_victim == 1 { "" } else { "s" },
                self.mc.table.capacity(),
                self.n.reconciled_pages,
                self.n.reverse_pages,
            ));
        }
        w
    }

    fn report(&self) -> serde_json::Value {
        let mut n = self.n.clone();
        if let Some(s) = self.stall_since {
            n.full_table_stall_ns += self.last_ns - s;
        }
        let mut rows: Vec<Vec<f64>> = self.rows.iter().map(|r| r.to_vec()).collect();
        if self.last_ns > self.w.start_ns || rows.is_empty() {
            rows.push(self.row(self.last_ns).to_vec()); // the window under way at the end
        }
        let c = &self.cfg;
        json!({
            "name": c.name,
            "algorithm": c.adaptive.map(|a| a.0.number()),
            "rule": c.adaptive.map(|a| if a.1.rule == Rule::Prose { "prose" } else { "listing" }),
            "mbq_mode": c.adaptive.map(|_| c.mbq.name()),
            "mbq_cumulative": self.cumulative_mbq(),
            "migration_window_decisions": c.adaptive.map(|_| self.mig_decisions),
            "address_reconciliation": c.freeing.name(),
            "remap_entries": if self.bounded() { Some(self.mc.table.capacity()) } else { None },
            "initial_threshold": c.threshold,
            "threshold": self.threshold,
            "paused": self.paused,
            "remap_held": self.mc.table.entries(),
            "ar_ns_per_page": self.ar_page_ns,
            "ar_halted_ns_per_page": if c.freeing == Freeing::HwAr { self.ar_os_page_ns } else { self.ar_page_ns },
            "remap_lookup_ns": self.lookup_ns,
            "counters": n,
            "timeseries": {
                "columns": ["window", "time_ms", "mbq", "migrations", "threshold", "paused", "remap_occupancy", "mbq_window", "mbq_cumulative"],
                "rows": rows,
            },
        })
    }
}

// ---------------------------------------------------------------- declarations

const fn int(name: &'static str, min: i64, max: i64, unit: &'static str, default: &'static str, source: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { name, ty: ParamType::Int { min, max }, unit, default, source, help }
}
const fn float(name: &'static str, unit: &'static str, default: &'static str, source: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { name, ty: ParamType::Float { min: 0.0, max: 1e12 }, unit, default, source, help }
}

const THRESHOLD: ParamSpec = int(
    "threshold",
    1,
    1 << 30,
    "accesses",
    "128",
    "001 §2.4 (128; 32, 64 and 128 studied)",
    "a page outside the fast tier is migrated when its access count reaches this (the starting threshold of the adaptive policies)",
);
const REMAP: ParamSpec = int(
    "remap",
    2,
    1 << 32,
    "entries",
    "1024",
    "001 §2.1, §4.1 (1024-entry table); §5.5 also studies 16384 and 65536",
    "ReMap table entries: one per moved page, two per swap",
);
const LOOKUP: ParamSpec = ParamSpec {
    name: "remap_lookup_cycles",
    ty: ParamType::Text,
    unit: "CPU cycles per access",
    default: "auto",
    source: "001 Table 3 and §4.1 (10 cycles for the 1024-entry table; 'in some experiments we tested with larger ReMap tables and adjusted access times appropriately'); auto scales 10 cycles by CACTI 7's access time of a fully associative table of that many 20-byte entries (docs/remap-latency.md): 13, 16, 16, 21, 28 and 35 cycles for 2 K to 64 K entries",
    help: "ReMap lookup after the last-level cache, on every access, at the platform's CPU frequency: a whole number of cycles, or auto (from the table size; 10 for the unbounded table of ar=none, 001's idealised OTF_no_AR)",
};
const AR_START: ParamSpec = ParamSpec {
    name: "ar_start",
    ty: ParamType::Float { min: 0.0, max: 1.0 },
    unit: "ratio of the table",
    default: "0.5",
    source: "001 §2.1, §2.4 (reconcile once the table is 50% full)",
    help: "reconcile while the table holds at least this fraction of its entries",
};
const CORES: ParamSpec =
    int("cores", 1, 1 << 16, "cores", "16", "001 §4.1 (16 cores)", "sets the TLB shootdown of ar=os: 4/5/8/13 µs for 4/8/16/32 cores (§2.3.1)");
const FLUSH: ParamSpec =
    float("flush_us", "us per page", "4", "001 §2.3.1 (CLFLUSH of a page's lines, measured)", "ar=os: cache flush of a reconciled page (halts the program)");
const RMAP: ParamSpec = int(
    "rmap_cycles",
    0,
    1 << 30,
    "CPU cycles per page",
    "4480",
    "001 Table 3 (OS reverse mapping, ftrace), §2.3.2",
    "both ar modes: the OS reverse mapping that finds a page's virtual addresses",
);
const WALK: ParamSpec = int("page_walk_cycles", 0, 1 << 30, "CPU cycles per page", "150", "001 Table 3", "both ar modes: page walk to update the PTE");
const TLB_DIR: ParamSpec = int(
    "tlb_dir_cycles",
    0,
    1 << 30,
    "CPU cycles per page",
    "300",
    "001 Table 3 (light-weight TLB invalidation through the shared TLB directory)",
    "ar=hw: TLB invalidation",
);
const INVAL: ParamSpec = int(
    "inval_cycles_per_line",
    0,
    1 << 20,
    "CPU cycles per line",
    "2",
    "authors' model, HMA_onfly_adaptive src/Processor.h (64 cycles of write-invalidates for a 2 KB page's 32 lines)",
    "ar=hw: write-invalidate of each line of a reconciled page",
);
const MIG_E: ParamSpec = float(
    "mig_energy_nj",
    "nJ per page moved",
    "0",
    "none: 001 §4.1 used CACTI but reports no figure, nor does the authors' model",
    "energy of the migration controller per page it moves (copy traffic is charged by the platform)",
);
const LOOKUP_E: ParamSpec = float(
    "lookup_energy_pj",
    "pJ per lookup",
    "0",
    "none: 001 §4.1 used CACTI but reports no figure, nor does the authors' model",
    "energy of one ReMap lookup (a non-zero value charges every access)",
);
const INITIAL: ParamSpec = ParamSpec {
    name: "initial",
    ty: ParamType::Choice { options: &["interleave", "first-touch"] },
    unit: "",
    default: "interleave",
    source: "001 §4.1 (4 pages fast, then 4 slow, round-robin while the fast tier has room)",
    help: "placement of new pages: interleave (4/4) or first-touch (fast tier first)",
};
const TWINDOW: ParamSpec = int(
    "twindow",
    1,
    1 << 50,
    "CPU cycles",
    "4M",
    "001 §3.1 and Algorithms 1-3 (twindow = 4 M cycles)",
    "threshold window: MBQ and migrations are counted per window (the time series' rows)",
);
const MIGWINDOW: ParamSpec =
    int("migwindow", 1, 1 << 50, "CPU cycles", "100M", "001 Algorithms 1-3 (migwindow = 100 M cycles)", "migration window: pause or resume from its mean MBQ");
const MIN_MBQ: ParamSpec = float("min_mbq", "accesses per page", "50", "001 Algorithms 1-3 (min_MBQ)", "pause at or below; Algorithm 2 halves at or above");
const MAX_MBQ: ParamSpec = float(
    "max_mbq",
    "accesses per page",
    "70",
    "001 Algorithms 1-3 (max_MBQ)",
    "resume at or above; Algorithm 2 doubles at or below; Algorithm 3 halves only at or below",
);
const UPPER_MBQ: ParamSpec = float("upper_mbq", "accesses per page", "100", "001 Algorithm 3 (upper_MBQ)", "Algorithm 3 doubles only at or below");
const MIN_MIG: ParamSpec = int(
    "min_mig_count",
    0,
    1 << 40,
    "pages per window",
    "160",
    "001 Algorithm 1 and §3.1 (Algorithm 3 uses it undefined; the authors' model uses 160)",
    "Algorithms 1 and 3 halve at or below",
);
const MAX_MIG: ParamSpec = int(
    "max_mig_count",
    0,
    1 << 40,
    "pages per window",
    "240",
    "001 Algorithm 1 and §3.1 (Algorithm 3 uses it undefined; the authors' model uses 240)",
    "Algorithms 1 and 3 double at or above",
);
const MIN_T: ParamSpec = int(
    "min_threshold",
    0,
    1 << 30,
    "accesses",
    "0",
    "001 Algorithms 1-2: 64, Algorithm 3: 32 (0 = the algorithm's listing)",
    "lowest threshold; 0 takes the listing's",
);
const MAX_T: ParamSpec = int("max_threshold", 1, 1 << 30, "accesses", "256", "001 Algorithms 1-3 (max_threshold = 256)", "highest threshold");
const RULE: ParamSpec = ParamSpec {
    name: "rule",
    ty: ParamType::Choice { options: &["listing", "prose"] },
    unit: "",
    default: "prose",
    source: "001 §3.2 (Algorithm 2's prose) and §5.4/§7 (Algorithm 3's prose: halve 'when the number of pages migrated is low and MBQ is high') vs Algorithms 2-3 (listing; the authors' model's commented-out combined rule agrees); prose by default: on real traces the listing's halving at a low MBQ drove the threshold to its floor (docs/experiments.md)",
    help: "which statement of Algorithms 2 and 3 to follow: listing (Alg. 3 halves only at MBQ <= max_mbq) or prose (Alg. 2 halves above high_mbq, doubles below min_mbq, halts after halt_windows low windows; Alg. 3 halves only at MBQ > upper_mbq)",
};
const MBQ: ParamSpec = ParamSpec {
    name: "mbq",
    ty: ParamType::Choice { options: &["cumulative", "window"] },
    unit: "",
    default: "window",
    source: "authors' model, HMA_onfly_adaptive: src/Processor.h:307 (migrated_hbm_access, 'whole benchmark'), src/Cache.cpp:996-1000 (counted on every access to a migrated page in HBM, never reset), src/Processor.cpp:2291 and 2303-2357 (migrated_hbm_access / pages_migrated read by the pause, resume and threshold rules); 001 §3.1-3.2 ('average number of accesses to pages recently migrated')",
    help: "the MBQ the rules read: cumulative (accesses since the start to pages the controller moved into the fast tier, while there, per page migrated since the start; rises during a pause, so a pause can end) or window (the window's accesses to promoted pages holding a ReMap entry, per such page)",
};
const PROBE: ParamSpec = int(
    "probe",
    0,
    1 << 20,
    "migrations per threshold window",
    "1",
    "tierkit's rule: 001 §3.1 resumes when the MBQ reaches max_MBQ and §7 'if the MBQ increases', but a paused controller migrates nothing, so no recently migrated page is left to raise it; 0 is the listings' pause",
    "while paused, still migrate this many candidates per threshold window (the hottest waiting page), so that the MBQ measures what migrating would bring now and a pause can end",
);
const HIGH_MBQ: ParamSpec =
    float("high_mbq", "accesses per page", "130", "001 §3.2 (prose: halve when the MBQ is greater than 130)", "rule=prose, Algorithm 2: halve above");
const HALT_WINDOWS: ParamSpec = int(
    "halt_windows",
    0,
    1 << 30,
    "windows",
    "25",
    "001 §3.2 (prose: halt when the MBQ is low for more than 25 consecutive windows)",
    "rule=prose, Algorithm 2: pause after more than this many consecutive windows with MBQ below min_mbq",
);
const RESIDENCY: ParamSpec = int(
    "min_residency_cycles",
    0,
    1 << 50,
    "CPU cycles",
    "1M",
    "001 §5.5 (one million cycles)",
    "a migrated page stays at least this long before it can be moved back",
);

const AR: ParamSpec = ParamSpec {
    name: "ar",
    ty: ParamType::Choice { options: &["none", "os", "hw"] },
    unit: "",
    default: "hw",
    source: "001 §2.3-2.4 (OTF_no_AR, OTF_OS_AR, OTF_HW_AR); §5.2-5.4 adapt OTF_HW_AR",
    help: "address reconciliation: none (unbounded table, OTF_no_AR), os (halts the program), hw (MigC: the OS reverse mapping and page walk halt the program, the invalidations do not)",
};
const ALGORITHM: ParamSpec =
    int("algorithm", 1, 3, "", "3", "001 §3.1 (1: migration count), §3.2 (2: MBQ), §5.4 (3: combined, the paper's best)", "which adaptive technique");

fn int_p(p: &Params, k: &str) -> u64 {
    p.int(k) as u64
}

/// The parameters shared by the three policies.
fn common(p: &Params, name: &'static str, freeing: Freeing, adaptive: Option<(Algorithm, Bounds, u64)>) -> Result<Config> {
    let has = |k: &str| p.values.contains_key(k);
    let f = |k: &str, d: f64| if has(k) { p.float(k) } else { d };
    let c = |k: &str, d: u64| if has(k) { int_p(p, k) } else { d };
    if let Some((_, b, _)) = adaptive {
        if b.min_threshold > b.max_threshold {
            return Err(Error::config(format!("{name}:min_threshold"), format!("{} is above max_threshold {}", b.min_threshold, b.max_threshold)));
        }
        if b.min_mbq > b.max_mbq {
            return Err(Error::config(format!("{name}:min_mbq"), format!("{} is above max_mbq {}", b.min_mbq, b.max_mbq)));
        }
    }
    Ok(Config {
        name,
        threshold: p.int("threshold") as u32,
        remap: int_p(p, "remap"),
        freeing,
        remap_lookup_cycles: lookup_cycles(p, freeing)?,
        ar_start: f("ar_start", 0.5),
        cores: c("cores", 16) as u32,
        flush_us: f("flush_us", 4.0),
        rmap_cycles: c("rmap_cycles", 4480) as f64,
        page_walk_cycles: c("page_walk_cycles", 150) as f64,
        tlb_dir_cycles: c("tlb_dir_cycles", 300) as f64,
        inval_cycles_per_line: c("inval_cycles_per_line", 2) as f64,
        mig_energy_nj: p.float("mig_energy_nj"),
        lookup_energy_pj: p.float("lookup_energy_pj"),
        initial: if p.text("initial") == "first-touch" { Initial::FirstTouch } else { Initial::Interleave },
        twindow_cycles: int_p(p, "twindow"),
        adaptive,
        mbq: if has("mbq") && p.text("mbq") == "cumulative" { MbqMode::Cumulative } else { MbqMode::Window },
        probe: c("probe", 1) as u32,
        min_residency_cycles: c("min_residency_cycles", 1_000_000),
    })
}

/// `remap_lookup_cycles`: a number of cycles, or `auto`, from the table's size
/// ([`remap_lookup_cycles`](crate::mechanics::remap::remap_lookup_cycles)).
fn lookup_cycles(p: &Params, freeing: Freeing) -> Result<f64> {
    let v = p.text("remap_lookup_cycles").trim();
    if v == "auto" {
        // the unbounded table of OTF_no_AR is 001's idealisation: the 1024-entry figure
        let entries = if freeing == Freeing::NoAr { 1024 } else { int_p(p, "remap") };
        return Ok(crate::mechanics::remap::remap_lookup_cycles(entries) as f64);
    }
    match v.parse::<u32>() {
        Ok(c) if c <= 1 << 20 => Ok(c as f64),
        _ => Err(Error::config(format!("{}:remap_lookup_cycles", p.policy), format!("'{v}' is neither auto nor a whole number of cycles (0 to 1048576)"))),
    }
}

fn freeing(p: &Params) -> Freeing {
    match p.text("ar") {
        "none" => Freeing::NoAr,
        "os" => Freeing::OsAr,
        _ => Freeing::HwAr,
    }
}

/// The adaptive constants as given (0 for `min_threshold` takes the listing's; parameters a
/// policy does not declare take the listing's).
fn bounds(p: &Params, alg: Algorithm) -> Bounds {
    let l = Bounds::listing(alg);
    let int_or = |k: &str, d: u64| if p.values.contains_key(k) { int_p(p, k) } else { d };
    let min_t = p.int("min_threshold") as u32;
    Bounds {
        min_threshold: if min_t == 0 { l.min_threshold } else { min_t },
        max_threshold: p.int("max_threshold") as u32,
        min_mig_count: int_or("min_mig_count", l.min_mig_count),
        max_mig_count: int_or("max_mig_count", l.max_mig_count),
        min_mbq: p.float("min_mbq"),
        max_mbq: p.float("max_mbq"),
        upper_mbq: if p.values.contains_key("upper_mbq") { p.float("upper_mbq") } else { l.upper_mbq },
        rule: if p.values.contains_key("rule") && p.text("rule") == "listing" { Rule::Listing } else { Rule::Prose },
        high_mbq: if p.values.contains_key("high_mbq") { p.float("high_mbq") } else { l.high_mbq },
        halt_windows: int_or("halt_windows", l.halt_windows as u64) as u32,
    }
}

/// The configuration of `otf`, `otf-adaptive` or `otf-reverse` from its parsed parameters.
pub fn config(name: &str, p: &Params) -> Result<Config> {
    match name {
        "otf" => common(p, "otf", freeing(p), None),
        "otf-adaptive" => {
            let alg = Algorithm::from_number(p.int("algorithm")).expect("declared range 1-3");
            common(p, "otf-adaptive", freeing(p), Some((alg, bounds(p, alg), int_p(p, "migwindow"))))
        }
        "otf-reverse" => common(p, "otf-reverse", Freeing::Reverse, Some((Algorithm::Mbq, bounds(p, Algorithm::Mbq), int_p(p, "migwindow")))),
        _ => Err(Error::config("--policy", format!("'{name}' is not an on-the-fly policy"))),
    }
}

/// An on-the-fly policy from its spec (`otf-adaptive:algorithm=2`), as a value (for tests and
/// the Rust API; the registry builds the same).
pub fn from_spec(spec: &str) -> Result<Otf> {
    from_policy_spec(&PolicySpec::parse(spec)?)
}

/// [`from_spec`] for a parsed spec.
pub fn from_policy_spec(s: &PolicySpec) -> Result<Otf> {
    let info = [&OTF, &OTF_ADAPTIVE, &OTF_REVERSE]
        .into_iter()
        .find(|i| i.name == s.name)
        .ok_or_else(|| Error::config("--policy", format!("'{}' is not an on-the-fly policy (otf, otf-adaptive, otf-reverse)", s.name)))?;
    Ok(Otf::new(config(info.name, &Params::parse(info.name, info.params, s)?)?))
}

pub static OTF: PolicyInfo = PolicyInfo {
    name: "otf",
    summary: "on-the-fly migration: a page is migrated by the hardware controller as soon as its count reaches the threshold, into a free fast frame or swapped with the LRU fast page; ReMap table with OS, hardware or no address reconciliation",
    source: "001 §2.1-2.4 (OTF_HW_AR, OTF_OS_AR, OTF_no_AR)",
    deploy: super::Deploy::Hardware { why: "a memory controller counts every access and migrates pages behind the OS, with a ReMap table (001 §2)" },
    params: &[THRESHOLD, AR, REMAP, AR_START, LOOKUP, CORES, FLUSH, RMAP, WALK, TLB_DIR, INVAL, TWINDOW, INITIAL, MIG_E, LOOKUP_E],
    build: |p| Ok(Built::from(Otf::new(config("otf", p)?))),
};

pub static OTF_ADAPTIVE: PolicyInfo = PolicyInfo {
    name: "otf-adaptive",
    summary: "otf with the hotness threshold doubled or halved every window from the migration count (algorithm=1), the MBQ (2) or both (3), and migrations paused while the MBQ is low",
    source: "001 §3.1-3.2, §5.2-5.4 (Algorithms 1-3, OTF_HW_AR_adaptive_N)",
    deploy: super::Deploy::Hardware { why: "a memory controller counts every access and migrates pages behind the OS, with a ReMap table (001 §2)" },
    params: &[
        ALGORITHM, RULE, MBQ, PROBE, THRESHOLD, MIN_T, MAX_T, MIN_MIG, MAX_MIG, MIN_MBQ, MAX_MBQ, UPPER_MBQ, HIGH_MBQ, HALT_WINDOWS, TWINDOW, MIGWINDOW, AR, REMAP, AR_START, LOOKUP, CORES, FLUSH, RMAP, WALK,
        TLB_DIR, INVAL, INITIAL, MIG_E, LOOKUP_E,
    ],
    build: |p| Ok(Built::from(Otf::new(config("otf-adaptive", p)?))),
};

pub static OTF_REVERSE: PolicyInfo = PolicyInfo {
    name: "otf-reverse",
    summary: "otf without address reconciliation: when the ReMap table is full, the migrated page (or swapped pair) with the fewest accesses in the window goes back to its original frame; MBQ-adaptive threshold (Algorithm 2)",
    source: "001 §3.3, §5.5 (OTF_RM_adaptive)",
    deploy: super::Deploy::Hardware { why: "a memory controller counts every access and migrates pages behind the OS, with a ReMap table (001 §2)" },
    params: &[REMAP, RESIDENCY, MBQ, PROBE, THRESHOLD, MIN_T, MAX_T, MIN_MBQ, MAX_MBQ, RULE, HIGH_MBQ, HALT_WINDOWS, TWINDOW, MIGWINDOW, LOOKUP, INITIAL, MIG_E, LOOKUP_E],
    build: |p| Ok(Built::from(Otf::new(config("otf-reverse", p)?))),
};

#[cfg(test)]
mod tests {
    use super::tlb_shootdown_us;

    #[test]
    fn shootdown_grows_with_cores() {
        // 001 §2.3.1: up to 4, 5, 8 and 13 µs for 4, 8, 16 and 32 cores
        assert_eq!([4, 8, 16, 32].map(tlb_shootdown_us), [4.0, 5.0, 8.0, 13.0]);
        assert_eq!(tlb_shootdown_us(1), 4.0);
        assert_eq!(tlb_shootdown_us(64), 18.0);
        assert!((tlb_shootdown_us(12) - (5.0 + 3.0 * (12f64.log2() - 3.0))).abs() < 1e-12);
    }
}
