//! `history` and `oracle`: the periodic page schedulers of 003 §3.1 ("Page Scheduler").
//!
//! Every period the scheduler ranks the pages by their access counts — the period just ended
//! (`history`, a reactive scheduler) or the period about to start (`oracle`, which knows the
//! future and is an upper bound, not a realizable policy) — and brings the top-ranked pages
//! into the fast tier in place of least-recently-used ones.
//!
//! # Default rules (tierkit)
//!
//! * **Placement** at first touch, round-robin over the tiers with a free frame (NUMA
//!   interleaving, as the seed's initial allocation), via [`Interleave`].
//! * **Ranking.** Candidates are the placed pages with a non-zero count in the ranked period.
//!   Key, most important first:
//!   1. the count's class: with `bins=B > 0` the log2 class `min(B, ⌊log2 c⌋ + 1)` (1 | 2–3 |
//!      4–7 | …; `bins=1` ranks by "touched" only), with `bins=0` the raw count;
//!   2. the page's current tier, faster first: a page never displaces another of the same
//!      class, so equal heat causes no migration;
//!   3. `history`: the more recent last access first; `oracle`: the earlier first access in
//!      the coming period first. Both are unique per page, so the order is total.
//! * **Targets, tier by tier.** The first `capacity(0)` ranked pages are wanted in tier 0,
//!   the next `capacity(1)` in tier 1, and so on (the last tier takes the rest). For tier
//!   `t = 0, 1, …` each wanted page now in a slower tier is brought in: into a free frame if
//!   tier `t` has one (one migration), otherwise in place of the least-recently-used page of
//!   tier `t` that is *not* wanted in tier `t` or faster. The victim goes to the next tier
//!   down when that tier has room (a demotion plus a promotion), otherwise it swaps places
//!   with the incoming page.
//!
//! # `compat=cori-sim`
//!
//! Reproduces GTkernel/cori-sim at ca2ef92 (the simulator behind 003 §3.1) on two tiers, with
//! the `simple` timing model's cori-sim accounting ([`Compat::CoriSim`]):
//! * every page of the trace is placed before the first access (dense ids in order of first
//!   appearance): page `i` goes to the fast tier if `i` is even and the fast tier holds fewer
//!   than `l1 = capacity(0)` pages (`int(ratio · pages)`), otherwise to the slow tier; all
//!   pages go to the fast tier when it can hold them all (cori-sim's ratio 1);
//! * counts are binned as cori-sim bins them ([`cori_bin`]: steps of 20 against the page's
//!   largest count in any period of the run, found by a pass over the trace before the run,
//!   [`PageScheduler::scan_period_maxima`], which the engine runs first); bins are ignored;
//! * at each boundary the candidates (non-zero binned count), listed by page id, are ranked
//!   by numpy's `argsort(counts)[::-1]` as numpy's generic introsort orders them
//!   ([`numpy_argsort`]; not stable, so ties follow that algorithm);
//! * among the first `l1` ranked pages, those in the slow tier are promoted, in rank order,
//!   each swapping with the next fast page in LRU order (never-accessed pages first, by id,
//!   then by last access). Hot fast pages are *not* protected: cori-sim can evict a page it
//!   has just ranked hot. Two migrations per swap.
//!
//! `compat=cori-sim-raw` ranks raw counts instead, as an older cori-sim commit (cadd151) did;
//! it is not what cori-sim computes. Periods must be given in accesses; the platform must have
//! two tiers and 4 KiB pages.
//!
//! # Differences of the default from cori-sim, and why
//!
//! * pages are placed at first touch, not all before the run (a scheduler cannot place
//!   pages it has not seen);
//! * victims are never pages ranked hot for the same tier (cori-sim can swap out a page it
//!   has just ranked hot and bring it back next period);
//! * free fast frames are filled by one-way moves instead of being left empty;
//! * counts are binned and equal classes favour the page already in the faster tier, which
//!   avoids migrations that buy nothing;
//! * N tiers, tier by tier (cori-sim has two).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::basic::Interleave;
use super::learned::Predictions;
use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Compat, Ctx, Needs, Policy, PolicyInfo};
use crate::error::{Error, Result};
use crate::mechanics::{Charge, TierId, UNPLACED};
use crate::pagemap::{PageId, PageMap};
use crate::trace::{Batch, RecordSource, BATCH_RECORDS};
use crate::units::Period;
use serde_json::json;

/// Which period's counts rank the pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The period just ended (reactive).
    History,
    /// The period about to start (future knowledge).
    Oracle,
    /// Predicted classes for the selected pages, the period just ended for the rest
    /// (Kleio, 003 §3.2; see [`super::learned`]).
    Kleio,
    /// The same, with one model per group of pages (Kleoniki, 003 §4).
    Kleoniki,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::History => "history",
            Source::Oracle => "oracle",
            Source::Kleio => "kleio",
            Source::Kleoniki => "kleoniki",
        }
    }
}

/// Which cori-sim the `compat` parameter reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoriMode {
    /// tierkit's own rules.
    Off,
    /// `compat=cori-sim`: GTkernel/cori-sim at ca2ef92, counts binned in steps of
    /// [`CORI_BIN`] against each page's whole-run maximum ([`cori_bin`]).
    Binned,
    /// `compat=cori-sim-raw`: raw counts, as an older cori-sim commit (cadd151) ranked them.
    /// Not what cori-sim computes today.
    Raw,
}

impl CoriMode {
    fn name(self) -> &'static str {
        match self {
            CoriMode::Off => "none",
            CoriMode::Binned => "cori-sim",
            CoriMode::Raw => "cori-sim-raw",
        }
    }
}

/// cori-sim's bin width, in accesses per period.
pub const CORI_BIN: u32 = 20;

/// A per-period count as cori-sim ranks it: `np.digitize` over `range(0, max, 20)`, where
/// `max` is the page's largest count in any period of the run. Counts are floored to a
/// multiple of 20, and to at most the last bin edge *below* `max` (a page whose maximum is
/// exactly 40 ranks that period as 20); under 20 the count is 0, i.e. not a candidate.
#[inline]
pub fn cori_bin(count: u32, page_max: u32) -> u32 {
    if page_max == 0 {
        return 0;
    }
    let top = (page_max - 1) / CORI_BIN * CORI_BIN;
    (count / CORI_BIN * CORI_BIN).min(top)
}

/// `numpy.argsort(values)` (ascending) as numpy's generic, non-SIMD introsort computes it
/// (npysort `aquicksort`: median-of-three quicksort, insertion sort for runs of up to 16,
/// heapsort past a depth of 2·⌊log2 n⌋). It is not stable, so the order of equal values is
/// that algorithm's, which is what cori-sim's ranking depends on. numpy builds that take an
/// x86-simd-sort path (AVX-512 since 1.25, AVX2 in 2.x) order ties differently.
pub fn numpy_argsort(v: &[u32]) -> Vec<usize> {
    const SMALL: usize = 15;
    let num = v.len();
    let mut a: Vec<usize> = (0..num).collect();
    if num < 2 {
        return a;
    }
    let msb = (usize::BITS - 1 - num.leading_zeros()) as i64;
    let mut cdepth = msb * 2;
    let mut stack: Vec<(usize, usize, i64)> = Vec::new();
    let (mut pl, mut pr) = (0usize, num - 1);
    loop {
        if cdepth < 0 {
            heap_argsort(v, &mut a[pl..=pr]);
        } else {
            while pr - pl > SMALL {
                let pm = pl + ((pr - pl) >> 1);
                if v[a[pm]] < v[a[pl]] {
                    a.swap(pm, pl);
                }
                if v[a[pr]] < v[a[pm]] {
                    a.swap(pr, pm);
                }
                if v[a[pm]] < v[a[pl]] {
                    a.swap(pm, pl);
                }
                let vp = v[a[pm]];
                let mut pi = pl;
                let mut pj = pr - 1;
                a.swap(pm, pj);
                loop {
                    pi += 1;
                    while v[a[pi]] < vp {
                        pi += 1;
                    }
                    pj -= 1;
                    while vp < v[a[pj]] {
                        pj -= 1;
                    }
                    if pi >= pj {
                        break;
                    }
                    a.swap(pi, pj);
                }
                a.swap(pi, pr - 1);
                cdepth -= 1;
                // the larger side waits on the stack
                if pi - pl < pr - pi {
                    stack.push((pi + 1, pr, cdepth));
                    pr = pi - 1;
                } else {
                    stack.push((pl, pi - 1, cdepth));
                    pl = pi + 1;
                }
            }
            for i in pl + 1..=pr {
                let vi = a[i];
                let x = v[vi];
                let mut j = i;
                while j > pl && x < v[a[j - 1]] {
                    a[j] = a[j - 1];
                    j -= 1;
                }
                a[j] = vi;
            }
        }
        match stack.pop() {
            Some((l, r, d)) => {
                pl = l;
                pr = r;
                cdepth = d;
            }
            None => break,
        }
    }
    a
}

/// numpy's `aheapsort` over one run (1-based heap indices, as numpy writes it).
fn heap_argsort(v: &[u32], a: &mut [usize]) {
    let n0 = a.len();
    let sift = |a: &mut [usize], mut i: usize, n: usize, tmp: usize| {
        let mut j = i << 1;
        while j <= n {
            if j < n && v[a[j - 1]] < v[a[j]] {
                j += 1;
            }
            if v[tmp] < v[a[j - 1]] {
                a[i - 1] = a[j - 1];
                i = j;
                j += j;
            } else {
                break;
            }
        }
        a[i - 1] = tmp;
    };
    let mut l = n0 >> 1;
    while l > 0 {
        let tmp = a[l - 1];
        sift(a, l, n0, tmp);
        l -= 1;
    }
    let mut n = n0;
    while n > 1 {
        let tmp = a[n - 1];
        a[n - 1] = a[0];
        n -= 1;
        sift(a, 1, n, tmp);
    }
}

/// The smallest count of a class (`count_class(class_count(c), b) == c` for `c <= b`).
#[inline]
pub fn class_count(class: u8) -> u32 {
    if class == 0 {
        0
    } else {
        1 << (class - 1).min(31)
    }
}

/// Class of a per-period count: log2 classes capped at `bins`, or the raw count (`bins=0`).
#[inline]
pub fn count_class(count: u32, bins: u32) -> u32 {
    if bins == 0 {
        count
    } else {
        (32 - count.leading_zeros()).min(bins)
    }
}

/// Sort key of a candidate, smallest first: class (highest first), current tier (fastest
/// first), tie-break.
type RankKey = (Reverse<u32>, TierId, u64);

/// A least-recently-used order of one tier's pages, ordered by (last access, page id), with
/// lazy deletion: an entry is current while its page is in the tier and its last access is
/// unchanged; last accesses only grow, so outdated entries are simply skipped.
///
/// Pages accessed in a period are appended at the next boundary as one *segment*, unsorted:
/// every entry of a segment is more recent than every entry of the segments before it (a
/// segment has a floor, the first access of its period, below which none of its entries
/// lie). A segment is sorted only when it reaches the front and a victim is needed, after
/// dropping its outdated entries (pages accessed again since), which for hot pages are most
/// of them. A page migrated in joins the newest segment when it was accessed in that
/// segment's period (history's promotions), else a side heap (oracle's promotions, demoted
/// victims). Per-period cost stays proportional to the pages touched, with mostly
/// sequential memory traffic.
#[derive(Default)]
struct LruHeap {
    segs: std::collections::VecDeque<Segment>,
    side: BinaryHeap<Reverse<(u64, PageId)>>,
    /// entries held, current or not
    len: usize,
}

/// An order is compacted when it holds this many entries per page of its tier. A compaction
/// looks up every entry's page (a cache miss each: the pages are scattered) and keeps the
/// current ones, about one per page of the tier, so it looks up `COMPACT_AT` entries to drop
/// `COMPACT_AT - 1`: 1.33 lookups per entry dropped at 4, where 2 made 2 (the current
/// entries, mostly of cold pages that stay in the tier, were looked up again at every
/// compaction), for at most 4 entries (64 bytes) per page of the tier (bench/README.md,
/// "history's scheduler"). Which entries are held changes no pop: each returns the oldest
/// current entry, and compaction drops only outdated ones.
const COMPACT_AT: usize = 4;

#[derive(Default)]
struct Segment {
    entries: Vec<(u64, PageId)>,
    /// no entry is older than this
    floor: u64,
    sorted: bool,
    pos: usize,
}

#[inline]
fn current(e: (u64, PageId), tier: TierId, ctx: &Ctx) -> bool {
    PageState::of(ctx).current(e, tier)
}

/// The two per-page arrays an LRU entry is checked against (a page's tier and its last
/// access), borrowed once for a whole pass rather than reached through the context at every
/// entry, and prefetched without touching the tracking's other arrays: only these two lines
/// are read, and the entries' pages are scattered, so each one is a cache miss.
#[derive(Clone, Copy)]
struct PageState<'a> {
    tier_of: &'a [TierId],
    last_access: &'a [u64],
}

impl<'a> PageState<'a> {
    #[inline(always)]
    fn of(ctx: &'a Ctx) -> PageState<'a> {
        PageState { tier_of: ctx.mem.tier_of(), last_access: &ctx.track.last_access }
    }

    #[inline(always)]
    fn prefetch(self, page: PageId) {
        crate::prefetch::read(self.tier_of.as_ptr().wrapping_add(page as usize));
        crate::prefetch::read(self.last_access.as_ptr().wrapping_add(page as usize));
    }

    /// Whether entry `e` of tier `tier`'s order is still current.
    #[inline(always)]
    fn current(self, e: (u64, PageId), tier: TierId) -> bool {
        self.tier_of[e.1 as usize] == tier && self.last_access[e.1 as usize] == e.0
    }
}

impl LruHeap {
    /// Append the pages accessed in the period just ended, whose last accesses are all at
    /// least `floor` (and newer than any entry held).
    fn push_segment(&mut self, entries: Vec<(u64, PageId)>, floor: u64) {
        self.len += entries.len();
        self.segs.push_back(Segment { entries, floor, sorted: false, pos: 0 });
    }

    /// Insert one page (migrated into the tier). Into the newest segment while it is still
    /// unsorted; else into the side heap. A pop takes the older of the first segment's front
    /// and the side heap's top, so either place gives the same pops. Appending to a segment
    /// already sorted made the next pop sort it again: with one segment (every page first
    /// seen in one period, as a daemon's first observation sees them) a swap of n pages
    /// sorted it n times (2 s for 20,000 swaps of 24,000 pages).
    fn push(&mut self, last: u64, page: PageId) {
        self.len += 1;
        match self.segs.back_mut() {
            Some(seg) if last >= seg.floor && !seg.sorted => seg.entries.push((last, page)),
            _ => self.side.push(Reverse((last, page))),
        }
    }

    /// The oldest entry of the segments that is still current, without removing it.
    fn front(&mut self, tier: TierId, ctx: &Ctx) -> Option<(u64, PageId)> {
        while let Some(seg) = self.segs.front_mut() {
            if !seg.sorted {
                let before = seg.entries.len();
                retain_current(&mut seg.entries, tier, ctx);
                seg.entries.sort_unstable();
                seg.sorted = true;
                self.len -= before - seg.entries.len();
            }
            let ps = PageState::of(ctx);
            while seg.pos < seg.entries.len() {
                if let Some(&(_, ahead)) = seg.entries.get(seg.pos + 8) {
                    ps.prefetch(ahead);
                }
                let e = seg.entries[seg.pos];
                if ps.current(e, tier) {
                    return Some(e);
                }
                seg.pos += 1;
                self.len -= 1;
            }
            self.len -= seg.entries.len() - seg.pos;
            self.segs.pop_front();
        }
        None
    }

    /// The least recently used current page of `tier`, removed from the order.
    fn pop(&mut self, tier: TierId, ctx: &Ctx) -> Option<(u64, PageId)> {
        loop {
            let f = self.front(tier, ctx);
            let s = self.side.peek().map(|r| r.0);
            let take_side = match (f, s) {
                (None, None) => return None,
                (Some(a), Some(b)) => b < a,
                (None, Some(_)) => true,
                (Some(_), None) => false,
            };
            self.len -= 1;
            let e = if take_side {
                self.side.pop().unwrap().0
            } else {
                self.segs.front_mut().unwrap().pos += 1;
                f.unwrap()
            };
            if current(e, tier, ctx) {
                return Some(e);
            }
        }
    }

    /// Drop outdated entries once the entries held reach [`COMPACT_AT`] times the tier's
    /// pages. Segments keep their order (and sortedness): filtering preserves both.
    fn compact(&mut self, tier: TierId, ctx: &Ctx) {
        if self.len <= COMPACT_AT * ctx.mem.used(tier) as usize + 1024 {
            return;
        }
        let mut len = 0;
        for seg in self.segs.iter_mut() {
            seg.entries.drain(..seg.pos);
            seg.pos = 0;
            retain_current(&mut seg.entries, tier, ctx);
            len += seg.entries.len();
        }
        self.segs.retain(|s| !s.entries.is_empty());
        let mut side: Vec<_> = std::mem::take(&mut self.side).into_vec();
        side.retain(|r| current(r.0, tier, ctx));
        len += side.len();
        self.side = BinaryHeap::from(side);
        self.len = len;
    }
}

/// Keep the entries still current, in order, prefetching the page state of those ahead (the
/// pages are scattered, so the lookups are cache misses worth overlapping).
fn retain_current(entries: &mut Vec<(u64, PageId)>, tier: TierId, ctx: &Ctx) {
    let ps = PageState::of(ctx);
    let mut keep = 0;
    for i in 0..entries.len() {
        if let Some(&(_, ahead)) = entries.get(i + 16) {
            ps.prefetch(ahead);
        }
        let e = entries[i];
        if ps.current(e, tier) {
            entries[keep] = e;
            keep += 1;
        }
    }
    entries.truncate(keep);
}

#[derive(Clone, Debug, Default, serde::Serialize)]
struct Stats {
    /// Period boundaries at which the scheduler ran.
    boundaries: u64,
    /// Candidates ranked, summed over boundaries.
    candidates: u64,
    /// Pages brought into a faster tier by the scheduler.
    promoted: u64,
    /// Of those, moved into a free frame (no victim).
    into_free_frames: u64,
    /// Swaps of a promoted page with a victim.
    swaps: u64,
    /// Victims moved one way to the next tier down (then the promoted page took their frame).
    demoted_to_free_frames: u64,
    /// compat=cori-sim: victims that were among the pages ranked hot at that boundary.
    hot_evictions: u64,
}

/// The `history` / `oracle` page scheduler.
pub struct PageScheduler {
    source: Source,
    period: Period,
    bins: u32,
    compat: CoriMode,
    /// compat=cori-sim: each page's largest count in any one period of the whole run (the
    /// top of its bins), from a pass over the trace before the run
    period_max: Vec<u32>,
    place: Interleave,
    /// LRU order of every tier that can give up a page (all but the last).
    lru: Vec<LruHeap>,
    /// Scratch: ranked candidates.
    ranked: Vec<(RankKey, PageId)>,
    /// Scratch: 1 + the tier a page is wanted in at this boundary, 0 if none.
    want: Vec<u8>,
    /// Scratch: entries set aside while looking for a victim.
    skipped: Vec<(u64, PageId)>,
    /// Scratch (compat): promotions and victims of one boundary.
    promote: Vec<PageId>,
    victims: Vec<PageId>,
    /// access index at which the current period started, and the one before
    period_start: u64,
    period_start_prev: u64,
    /// Kleio / Kleoniki: the models' predictions
    pred: Option<Predictions>,
    /// Kleio / Kleoniki: inference time charged per model at each boundary, ns (0: none)
    infer_ns: f64,
    /// Boundaries at which inference was charged.
    infer_boundaries: u64,
    stats: Stats,
}

impl PageScheduler {
    /// `compat`: follow GTkernel/cori-sim ([`CoriMode::Binned`]); see [`Self::with_compat`].
    pub fn new(source: Source, period: Period, bins: u32, compat: bool) -> PageScheduler {
        PageScheduler {
            source,
            period,
            bins,
            compat: if compat { CoriMode::Binned } else { CoriMode::Off },
            period_max: Vec::new(),
            place: Interleave::new(Vec::new()),
            lru: Vec::new(),
            ranked: Vec::new(),
            want: Vec::new(),
            skipped: Vec::new(),
            promote: Vec::new(),
            victims: Vec::new(),
            period_start: 0,
            period_start_prev: 0,
            pred: None,
            infer_ns: 0.0,
            infer_boundaries: 0,
            stats: Stats::default(),
        }
    }

    /// Choose the cori-sim reproduction (or none).
    pub fn with_compat(mut self, mode: CoriMode) -> PageScheduler {
        self.compat = mode;
        self
    }

    /// compat=cori-sim bins counts against each page's whole-run maximum, which
    /// [`PageScheduler::scan_period_maxima`] must find before the run starts.
    pub fn needs_period_maxima(&self) -> bool {
        self.compat == CoriMode::Binned
    }

    /// compat=cori-sim's pass over the trace: each page's largest per-period count, pages
    /// numbered in order of first access as the engine numbers them.
    pub fn scan_period_maxima(&mut self, mut src: Box<dyn RecordSource>) -> Result<()> {
        let Period::Accesses(len) = self.period else {
            return Err(Error::Invariant("compat=cori-sim without a period in accesses".into()));
        };
        let mut pm = PageMap::new(src.meta().page_size);
        let mut b = Batch::with_capacity(BATCH_RECORDS);
        // per page: count in the period it was last accessed in, and that period + 1
        let (mut count, mut seen, mut max): (Vec<u32>, Vec<u64>, Vec<u32>) = (Vec::new(), Vec::new(), Vec::new());
        let mut k: u64 = 0;
        while src.next_batch(&mut b)? {
            for &a in &b.addr {
                let p = pm.id(a) as usize;
                if p >= count.len() {
                    count.resize(p + 1, 0);
                    seen.resize(p + 1, 0);
                    max.resize(p + 1, 0);
                }
                let e = k / len + 1;
                if seen[p] != e {
                    max[p] = max[p].max(count[p]);
                    count[p] = 0;
                    seen[p] = e;
                }
                count[p] += 1;
                k += 1;
            }
        }
        for p in 0..count.len() {
            max[p] = max[p].max(count[p]);
        }
        self.period_max = max;
        Ok(())
    }

    /// A Kleio / Kleoniki scheduler: predictions replace the last period's counts for the
    /// pages they cover.
    pub fn with_predictions(mut self, pred: Predictions) -> PageScheduler {
        self.pred = Some(pred);
        self
    }

    /// Charge `models × infer_ns` ns of halting inference at each boundary from the
    /// predictions' `infer_from_period` on (0: no charge; see [`super::learned`]).
    pub fn with_inference(mut self, infer_ns: f64) -> PageScheduler {
        self.infer_ns = infer_ns;
        self
    }

    /// The inference time of one boundary, ns.
    fn infer_per_boundary_ns(&self) -> f64 {
        self.pred.as_ref().map_or(0.0, |p| p.models as f64 * self.infer_ns)
    }

    /// The models run at the boundary before the scheduler decides (003 §3.2): the program
    /// waits for them. `ctx.now.period` is the period about to be scheduled, the index the
    /// predictions' rows use.
    fn charge_inference(&mut self, ctx: &mut Ctx) {
        let Some(pr) = &self.pred else { return };
        let ns = self.infer_per_boundary_ns();
        if ns > 0.0 && ctx.now.period >= pr.infer_from_period {
            ctx.mem.charge(Charge { what: "inference", ns, halts: true, energy_j: 0.0 });
            self.infer_boundaries += 1;
        }
    }

    fn key(&self, param: &str) -> String {
        format!("{}:{param}", self.source.name())
    }

    /// Make the LRU orders current: pages accessed in the period just ended go to the
    /// most-recent end of their tier's order.
    fn refresh_lru(&mut self, ctx: &Ctx) {
        // last_access is 1 + the access index: the ended period's accesses are all above this
        let floor = self.period_start + 1;
        self.period_start_prev = self.period_start;
        self.period_start = ctx.now.accesses;
        let last = self.lru.len();
        let mut segs: Vec<Vec<(u64, PageId)>> = vec![Vec::new(); last];
        let touched = &ctx.track.prev_touched;
        let ps = PageState::of(ctx);
        for (i, &p) in touched.iter().enumerate() {
            if let Some(&ahead) = touched.get(i + 16) {
                ps.prefetch(ahead);
            }
            let t = ps.tier_of[p as usize];
            if (t as usize) < last {
                segs[t as usize].push((ps.last_access[p as usize], p));
            }
        }
        for (h, seg) in self.lru.iter_mut().zip(segs) {
            h.push_segment(seg, floor);
        }
    }

    /// The pages to rank and their counts in the ranked period.
    fn for_each_candidate(&self, ctx: &Ctx, mut f: impl FnMut(usize, PageId, u32)) -> Result<()> {
        match self.source {
            Source::History => {
                let touched = &ctx.track.prev_touched;
                for (i, &p) in touched.iter().enumerate() {
                    if let Some(&ahead) = touched.get(i + 16) {
                        crate::prefetch::read(ctx.track.prev_count.as_ptr().wrapping_add(ahead as usize));
                    }
                    f(i, p, ctx.track.prev_count[p as usize]);
                }
            }
            Source::Oracle => {
                let fut = ctx.future.ok_or_else(|| Error::Invariant("oracle: the engine gave no future counts".into()))?;
                for (i, &p) in fut.touched.iter().enumerate() {
                    f(i, p, fut.count[p as usize]);
                }
            }
            Source::Kleio | Source::Kleoniki => {
                let pr = self.pred.as_ref().ok_or_else(|| Error::Invariant("kleio: no predictions".into()))?;
                let period = ctx.now.period;
                let touched = &ctx.track.prev_touched;
                for (i, &p) in touched.iter().enumerate() {
                    if pr.class(p, period).is_none() {
                        f(i, p, ctx.track.prev_count[p as usize]);
                    }
                }
                // the predicted pages, as the count of their predicted class
                for (j, &p) in pr.pages().iter().enumerate() {
                    if let Some(c) = pr.class(p, period) {
                        f(touched.len() + j, p, class_count(c));
                    }
                }
            }
        }
        Ok(())
    }

    fn ensure_want(&mut self, n: usize) {
        if self.want.len() < n {
            self.want.resize(n.max(self.want.len() * 2), 0);
        }
    }

    // ---------------------------------------------------------------- default rules

    fn period_default(&mut self, ctx: &mut Ctx) -> Result<()> {
        let n_tiers = ctx.mem.tiers();
        let bins = self.bins;
        let source = self.source;
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        {
            let c: &Ctx = ctx;
            self.for_each_candidate(c, |i, p, count| {
                if (p as usize) >= c.mem.slots() || count == 0 {
                    return;
                }
                let t = c.mem.tier(p);
                if t == UNPLACED {
                    return; // first touched in the coming period: placed then
                }
                let tie = if source != Source::Oracle { u64::MAX - c.track.last_access[p as usize] } else { i as u64 };
                ranked.push(((Reverse(count_class(count, bins)), t, tie), p));
            })?;
        }
        self.stats.candidates += ranked.len() as u64;
        // On two tiers, when every candidate fits in the fast tier, all are wanted there and
        // the order in which they are brought in changes nothing: skip the sort.
        if n_tiers > 2 || ranked.len() as u64 > ctx.mem.capacity(0) {
            ranked.sort_unstable();
        }

        // wanted tier of each ranked page: the first capacity(0) in tier 0, and so on
        self.ensure_want(ctx.mem.slots());
        let mut tier = 0usize;
        let mut room = ctx.mem.capacity(0);
        for &(_, p) in &ranked {
            while room == 0 && tier + 1 < n_tiers - 1 {
                tier += 1;
                room = ctx.mem.capacity(tier as TierId);
            }
            if room == 0 {
                break;
            }
            room -= 1;
            self.want[p as usize] = tier as u8 + 1;
        }

        for t in 0..n_tiers - 1 {
            let t = t as TierId;
            for &(_, p) in &ranked {
                if self.want[p as usize] != t + 1 || ctx.mem.tier(p) <= t {
                    continue;
                }
                if !self.bring_in(p, t, ctx)? {
                    break;
                }
            }
            for (last, p) in self.skipped.drain(..) {
                self.lru[t as usize].push(last, p);
            }
        }

        for &(_, p) in &ranked {
            self.want[p as usize] = 0;
        }
        self.ranked = ranked;
        Ok(())
    }

    /// Bring page `p` into tier `t`; false if no frame can be had.
    fn bring_in(&mut self, p: PageId, t: TierId, ctx: &mut Ctx) -> Result<bool> {
        let last_tier = (ctx.mem.tiers() - 1) as TierId;
        let la = |ctx: &Ctx, q: PageId| ctx.track.last_access[q as usize];
        if ctx.mem.free(t) > 0 {
            ctx.mem.migrate(p, t)?;
            self.lru[t as usize].push(la(ctx, p), p);
            self.stats.promoted += 1;
            self.stats.into_free_frames += 1;
            return Ok(true);
        }
        // least recently used page of tier t not wanted in t or faster; history only ranks
        // pages accessed in the period just ended, so an older page cannot be wanted
        let history = self.source == Source::History;
        let victim = loop {
            match self.lru[t as usize].pop(t, ctx) {
                None => break None,
                Some((last, v)) if history && last <= self.period_start_prev => break Some(v),
                Some((last, v)) => {
                    let w = self.want[v as usize];
                    if w != 0 && w <= t + 1 {
                        self.skipped.push((last, v));
                    } else {
                        break Some(v);
                    }
                }
            }
        };
        let Some(v) = victim else { return Ok(false) };
        let from = ctx.mem.tier(p);
        let below = t + 1;
        if from != below && ctx.mem.free(below) > 0 {
            ctx.mem.migrate(v, below)?;
            ctx.mem.migrate(p, t)?;
            if below < last_tier {
                self.lru[below as usize].push(la(ctx, v), v);
            }
            self.stats.demoted_to_free_frames += 1;
        } else {
            ctx.mem.swap(p, v)?;
            if from < last_tier {
                self.lru[from as usize].push(la(ctx, v), v);
            }
            self.stats.swaps += 1;
        }
        self.lru[t as usize].push(la(ctx, p), p);
        self.stats.promoted += 1;
        Ok(true)
    }

    // ---------------------------------------------------------------- compat=cori-sim

    fn init_cori(&mut self, ctx: &mut Ctx) -> Result<()> {
        let key = self.key("compat");
        if ctx.mem.tiers() != 2 {
            return Err(Error::config(
                key,
                format!("cori-sim models two tiers; platform {} has {} (use compat=none)", ctx.platform.platform.name, ctx.mem.tiers()),
            ));
        }
        if ctx.mem.page_bytes() != 4096 {
            return Err(Error::config(key, format!("cori-sim uses 4 KiB pages; this trace has {}-byte pages", ctx.mem.page_bytes())));
        }
        let n = ctx.pages as u64;
        let l1 = ctx.mem.capacity(0).min(n);
        let all_fast = l1 >= n;
        let fast_pages = if all_fast { n } else { l1.min(n.div_ceil(2)) };
        if ctx.mem.capacity(1) < n - fast_pages {
            return Err(Error::config(
                key,
                format!("cori-sim's initial placement puts {} pages in the slow tier, which holds {}", n - fast_pages, ctx.mem.capacity(1)),
            ));
        }
        let mut fast = Vec::new();
        for i in 0..n {
            let t = if all_fast || (i % 2 == 0 && (fast.len() as u64) < l1) { 0 } else { 1 };
            ctx.mem.place(i as PageId, t)?;
            if t == 0 {
                fast.push((0, i as PageId)); // never accessed: LRU order by page id
            }
        }
        self.lru[0].push_segment(fast, 0);
        Ok(())
    }

    fn period_cori(&mut self, ctx: &mut Ctx) -> Result<()> {
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        let binned = self.compat == CoriMode::Binned;
        let period_max = &self.period_max;
        self.for_each_candidate(ctx, |_, p, count| {
            let c = if binned { cori_bin(count, period_max.get(p as usize).copied().unwrap_or(count)) } else { count };
            if c != 0 {
                ranked.push(((Reverse(c), 0, p as u64), p));
            }
        })?;
        self.stats.candidates += ranked.len() as u64;
        let l1 = ctx.mem.capacity(0).min(ctx.pages as u64) as usize;
        // the order only matters where the l1 cut splits the candidates: every promotion
        // swaps with one of the first victims in LRU order, whatever the pairing
        if ranked.len() > l1 {
            // cori-sim lists candidates by page id and takes numpy's argsort(counts)[::-1]
            ranked.sort_unstable_by_key(|e| e.1);
            let counts: Vec<u32> = ranked.iter().map(|e| (e.0).0 .0).collect();
            let order = numpy_argsort(&counts);
            let top: Vec<_> = order.iter().rev().take(l1).map(|&i| ranked[i]).collect();
            ranked.clear();
            ranked.extend(top);
        }

        self.ensure_want(ctx.mem.slots());
        self.promote.clear();
        for &(_, p) in &ranked {
            self.want[p as usize] = 1; // ranked hot
            if ctx.mem.tier(p) == 1 {
                self.promote.push(p);
            }
        }
        // victims: fast pages in LRU order, hot or not, chosen before any move
        self.victims.clear();
        while self.victims.len() < self.promote.len() {
            let Some((_, v)) = self.lru[0].pop(0, ctx) else { break };
            if self.want[v as usize] == 2 {
                continue; // a duplicate entry of a page already chosen
            }
            if self.want[v as usize] == 1 {
                self.stats.hot_evictions += 1;
            }
            self.want[v as usize] = 2;
            self.victims.push(v);
        }
        for i in 0..self.promote.len() {
            let p = self.promote[i];
            match self.victims.get(i) {
                Some(&v) => {
                    ctx.mem.swap(p, v)?;
                    self.stats.swaps += 1;
                }
                // cannot happen: the fast tier holds at least as many pages as the slow
                // tier, or exactly l1 (see the module comment); move one way if it does
                None if ctx.mem.free(0) > 0 => {
                    ctx.mem.migrate(p, 0)?;
                    self.stats.into_free_frames += 1;
                }
                None => break,
            }
            self.stats.promoted += 1;
        }
        for &p in &self.promote {
            if ctx.mem.tier(p) == 0 {
                self.lru[0].push(ctx.track.last_access[p as usize], p);
            }
        }
        for &(_, p) in &ranked {
            self.want[p as usize] = 0;
        }
        for &v in &self.victims {
            self.want[v as usize] = 0;
        }
        self.ranked = ranked;
        Ok(())
    }
}

impl Policy for PageScheduler {
    fn made_for_trace(&self) -> Option<(&str, &str)> {
        self.pred.as_ref().and_then(|p| p.made_for.as_ref()).map(|(f, d)| (f.as_str(), d.as_str()))
    }

    fn needs(&self) -> Needs {
        Needs { counts: true, recency: true, future: self.source == Source::Oracle, all_pages_upfront: self.compat != CoriMode::Off, ..Default::default() }
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        if let Some(pr) = &self.pred {
            pr.check_pages(ctx.platform.footprint_pages, &self.key("predictions"))?;
        }
        self.lru = (0..ctx.mem.tiers() - 1).map(|_| LruHeap::default()).collect();
        if self.compat != CoriMode::Off {
            self.init_cori(ctx)?;
        }
        Ok(())
    }

    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        self.place.next(ctx)
    }

    fn period(&self) -> Option<Period> {
        Some(self.period)
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.boundaries += 1;
        self.charge_inference(ctx);
        self.refresh_lru(ctx);
        if self.compat != CoriMode::Off {
            self.period_cori(ctx)?;
        } else {
            self.period_default(ctx)?;
        }
        for (t, h) in self.lru.iter_mut().enumerate() {
            h.compact(t as TierId, ctx);
        }
        Ok(())
    }

    fn compat(&self) -> Compat {
        // both variants keep cori-sim's accounting
        if self.compat != CoriMode::Off {
            Compat::CoriSim
        } else {
            Compat::None
        }
    }

    fn report(&self) -> serde_json::Value {
        json!({
            "name": self.source.name(),
            "future_knowledge": self.source == Source::Oracle || self.pred.as_ref().is_some_and(|p| p.future_knowledge),
            "period": self.period.describe(),
            "bins": if self.compat == CoriMode::Off { self.bins } else { 0 },
            "bin_step": if self.compat == CoriMode::Binned { Some(CORI_BIN) } else { None },
            "compat": self.compat.name(),
            "scheduler": self.stats,
            "predictions": self.pred.as_ref().map(|p| p.report()),
            "inference": self.pred.as_ref().map(|p| {
                let per = self.infer_per_boundary_ns();
                json!({
                    "infer_ns": self.infer_ns,
                    "models": p.models,
                    "from_period": p.infer_from_period,
                    "boundaries_charged": self.infer_boundaries,
                    "ns_per_boundary": per,
                    "total_ns": per * self.infer_boundaries as f64,
                })
            }),
        })
    }
}

pub(crate) const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "period",
        ty: ParamType::Period,
        unit: "accesses (or N-insn, or a time such as 10ms)",
        default: "1000",
        source: "003 §3.1 (a period is a fixed number of memory requests, e.g. 1,000)",
        help: "how often the scheduler runs; compat=cori-sim needs it in accesses. history live (tierkit run): a time, the default meaning 100ms (docs/real-linux.md)",
    },
    ParamSpec {
        name: "bins",
        ty: ParamType::Int { min: 0, max: 32 },
        unit: "log2 count classes",
        default: "16",
        source: "tierkit (003 §3.1 gives no binning; cori-sim bins in steps of 20)",
        help: "rank by log2 class of the period's count, capped at this many classes (1 = touched or not); 0 = raw counts. Ignored with compat=cori-sim and cori-sim-raw",
    },
    ParamSpec {
        name: "compat",
        ty: ParamType::Choice { options: &["none", "cori-sim", "cori-sim-raw"] },
        unit: "",
        default: "none",
        source: "GTkernel/cori-sim (ca2ef92), the simulator of 003 §3.1",
        help: "cori-sim: reproduce that simulator (counts binned in steps of 20, numpy's argsort for ties, its placement, swaps and, with --timing simple, its accounting) exactly; cori-sim-raw: the same but ranking raw counts, as an older cori-sim commit did (NOT cori-sim)",
    },
];

fn build(source: Source, p: &Params) -> Result<Built> {
    let period = p.period("period");
    let mode = match p.text("compat") {
        "cori-sim" => CoriMode::Binned,
        "cori-sim-raw" => CoriMode::Raw,
        _ => CoriMode::Off,
    };
    if mode != CoriMode::Off && !matches!(period, Period::Accesses(_)) {
        return Err(Error::config(
            format!("{}:period", source.name()),
            format!(
                "compat={} counts periods in memory accesses; give period as a number of accesses (e.g. period=1000), not {}",
                mode.name(),
                period.describe()
            ),
        ));
    }
    let s = PageScheduler::new(source, period, p.int("bins") as u32, false).with_compat(mode);
    Ok(Built::from(s))
}

pub static HISTORY: PolicyInfo = PolicyInfo {
    name: "history",
    summary: "periodic page scheduler: each period, move the last period's hottest pages into the fast tier in place of LRU pages (compat=cori-sim: GTkernel/cori-sim exactly)",
    source: "003 §3.1 (Page Scheduler, history/reactive)",
    deploy: super::Deploy::Daemon,
    params: PARAMS,
    build: |p| build(Source::History, p),
};

pub static ORACLE: PolicyInfo = PolicyInfo {
    name: "oracle",
    summary: "FUTURE KNOWLEDGE (upper bound, not realizable): like history, but ranks pages by their counts in the coming period",
    source: "003 §3.1 (Page Scheduler, oracle/predictive)",
    deploy: super::Deploy::FutureKnowledge,
    params: PARAMS,
    build: |p| build(Source::Oracle, p),
};

#[cfg(test)]
mod tests {
    use super::{cori_bin, count_class};

    #[test]
    fn cori_sim_bins() {
        // GTkernel/cori-sim (ca2ef92): np.digitize(count, range(0, page_max, 20)), bin edge kept
        assert_eq!([0, 1, 19, 20, 39].map(|c| cori_bin(c, 20)), [0, 0, 0, 0, 0]);
        assert_eq!([19, 20, 39, 40].map(|c| cori_bin(c, 40)), [0, 20, 20, 20]);
        assert_eq!([40, 41, 59, 60, 61].map(|c| cori_bin(c, 61)), [40, 40, 40, 60, 60]);
        assert_eq!(cori_bin(5, 0), 0);
    }

    #[test]
    fn log2_classes_and_raw_counts() {
        // 003 §3.1 ranks by per-period counts; tierkit bins them in log2 classes
        assert_eq!([0, 1, 2, 3, 4, 7, 8].map(|c| count_class(c, 16)), [0, 1, 2, 2, 3, 3, 4]);
        assert_eq!(count_class(1 << 20, 16), 16);
        assert_eq!([1, 5, 900].map(|c| count_class(c, 1)), [1, 1, 1]);
        assert_eq!(count_class(900, 0), 900);
    }
}
