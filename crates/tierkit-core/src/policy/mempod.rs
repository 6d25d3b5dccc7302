//! `mempod`: MemPod (Prodromou, Meswani, Jayasena, Loh, Tullsen, "MemPod: A Clustered
//! Architecture for Efficient and Scalable Migration in Flat Address Space Multi-level
//! Memories", HPCA 2017), evaluated as MemPod_no_AR in seed 001 §2.4 ([26] there).
//!
//! What the paper says (section numbers of the HPCA 2017 paper):
//! * **Pods** (§V-A, Fig. 4): pods sit between the last-level cache and the memory
//!   controllers; each clusters some fast and some slow channels, tracks their requests and
//!   migrates pages only among its own channels; pods never talk to each other. One pod per
//!   slow channel is the suggested design point; the evaluated system has 8 HBM and 4 DDR4
//!   channels in 4 pods (1 GB HBM, 8 GB DDR4, 2 KB pages; Table II, §VI-B).
//! * **Activity tracking** (§III, Algorithm 1; §V-B): per pod a Majority Element Algorithm
//!   map of K entries ([`MisraGries`]); K is the number of hot pages sought per interval.
//!   §VI-C1 (Fig. 6) swept 16-512 counters and 25-500 µs intervals: 64 counters and 50 µs
//!   were best. Counters accumulate over the interval (§VI-C1); §III evaluates MEA one
//!   interval at a time.
//! * **Trigger and bound** (§V-B, §VI-C1): at each interval a pod migrates *up to K pages*
//!   into its fast memory, K the number of MEA counters ("the number of MEA counters
//!   dictates the highest possible number of migrations ... at each interval by each Pod");
//!   N pods make up to N × K migrations per interval, in parallel.
//! * **Datapath** (§V-B): a hot page already in fast memory is ignored. A hot slow page
//!   swaps with a fast page found by a pointer that starts at the pod's first fast location
//!   and walks forward to the first page that is not one of the hot (tracked) pages; the
//!   next migration continues from there.
//! * The paper moves every tracked page and states no minimum count. Its MEA runs at about
//!   5,500 requests per 50 µs over 4 pods (§III), so a page must outlast many decrement
//!   steps to keep a counter; a single program's LLC misses (a median 185 per 50 µs on
//!   sqlite3's trace) rarely fill 64 counters, and every page touched at all is "tracked".
//!
//! tierkit's rules (the paper's where it has one):
//! * **Pods.** Page `p` (its dense id, i.e. the order in which pages are first touched, the
//!   frame order of a first-touch allocator) belongs to pod `p mod pods`. Each tier's
//!   capacity is split evenly over the pods; the remainders go one frame at a time to pods
//!   0, 1, … continuing from tier to tier, so that every pod can hold its share of pages
//!   whenever the tiers together hold the footprint.
//! * **Placement** (001 §4.1) within the page's pod: 4 pages to the fast tier, then 4 to the
//!   next tier, while the pod has frames there (`initial=interleave`), or fill the pod's
//!   fast frames first (`initial=first-touch`).
//! * **Counting.** Every access is recorded by its pod's counter set of `mea_counters`
//!   counters, cleared at the end of each epoch. Counters are not narrowed to the paper's
//!   2 bits (§VI-C1, Fig. 7: 2 bits best at 50 µs, 8 bits as good as any wider): the floor
//!   below reads them as counts.
//! * **Activity floor** (tierkit's; the paper has none). With `n` accesses to the pod in the
//!   epoch, `k` counters and `d ≤ n / (k + 1)` decrement steps, a tracked page with counter
//!   `c` made between `c` and `c + d` of them (Misra and Gries 1982). It moves only if
//!   `c ≥ min_count` (default 2: a page counted once showed no reuse) and, with
//!   `floor=possible` (default), `(c + d)(k + 1) > n`: the counts do not rule out that it
//!   made more than `1 / (k + 1)` of the pod's accesses, the share above which Misra-Gries
//!   guarantees a counter. `floor=frequent` asks `c (k + 1) > n` (the counter alone proves
//!   that share); `floor=none` with `min_count=1` is the paper's rule.
//! * **Migration**, pod by pod at the end of an epoch: the tracked pages, by counter (highest
//!   first, then page id), that pass the floor and are not in the fast tier move into it:
//!   into a free fast frame of the pod if there is one, else swapped with the victim that the
//!   pod's pointer finds (§V-B; the pointer persists across epochs; every tracked page, above
//!   the floor or not, is passed over). At most `mea_counters` pages per pod per epoch, since
//!   that many are tracked. Then the counter set is cleared.
//! * Moves are the hardware engine's ([`MoveBy::Hw`]: no fault, no shootdown, the copy
//!   alongside the program). MemPod keeps every page's new location in remap tables, so no
//!   address is reconciled and nothing is charged: only the copies' traffic.

use std::cmp::Reverse;

use serde::Serialize;
use serde_json::json;

use super::epoch_os::{timeseries_json, EpochRow, Initial};
use super::mea::MisraGries;
use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::Result;
use crate::mechanics::{MoveBy, TierId, UNPLACED};
use crate::pagemap::PageId;
use crate::platform::MAX_TIERS;
use crate::units::Period;

/// Placement weights of `initial=interleave` (001 §4.1): 4 fast, 4 next tier, 0 below.
const WEIGHTS: [u64; 2] = [4, 4];

/// Which tracked pages may move (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Floor {
    /// `(c + d)(k + 1) > n`: not ruled out as holding more than `1/(k+1)` of the accesses.
    Possible,
    /// `c (k + 1) > n`: proven to hold more than `1/(k+1)` of the accesses.
    Frequent,
    /// every tracked page (MemPod §V-B).
    None,
}

impl Floor {
    pub fn parse(s: &str) -> Floor {
        match s {
            "frequent" => Floor::Frequent,
            "none" => Floor::None,
            _ => Floor::Possible,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Floor::Possible => "possible",
            Floor::Frequent => "frequent",
            Floor::None => "none",
        }
    }
}

/// The activity floor: may a tracked page with counter `c` move, after an epoch of `n`
/// accesses to its pod counted by `k` counters with `d` decrement steps? (See the module
/// comment; the bounds `c ≤ true ≤ c + d` and `d ≤ n / (k + 1)` are Misra and Gries'.)
pub fn above_floor(floor: Floor, min_count: u32, c: u32, d: u64, n: u64, k: usize) -> bool {
    let share = |count: u64| count.saturating_mul(k as u64 + 1) > n;
    c >= min_count
        && match floor {
            Floor::Possible => share(c as u64 + d),
            Floor::Frequent => share(c as u64),
            Floor::None => true,
        }
}

#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// epoch boundaries crossed, and those that closed an epoch with accesses
    boundaries: u64,
    epochs: u64,
    /// pages tracked by the counter sets at the epochs' ends, summed
    tracked: u64,
    /// tracked pages outside the fast tier left there because their counter was below the
    /// activity floor
    below_floor: u64,
    /// tracked pages brought into the fast tier
    promoted: u64,
    into_free_frames: u64,
    swaps: u64,
    /// the most pages one pod promoted in one epoch (at most `mea_counters`, MemPod §V-B)
    most_promoted_by_a_pod: u64,
    /// tracked slow pages left where they were because every fast page of their pod was
    /// tracked too
    no_victim: u64,
    /// pages placed outside their pod's frames because the pod was full (cannot happen when
    /// the tiers hold the footprint)
    placed_outside_pod: u64,
}

pub struct MemPod {
    pods: usize,
    counters: usize,
    epoch: Period,
    initial: Initial,
    min_count: u32,
    floor: Floor,
    tiers: usize,
    mea: Vec<MisraGries>,
    /// frames of each pod in each tier, and pages of the pod in them
    frames: Vec<[u64; MAX_TIERS]>,
    used: Vec<[u64; MAX_TIERS]>,
    /// the pod's pages in the fast tier, in the order of its fast frames
    fast: Vec<Vec<PageId>>,
    /// per pod, the victim pointer over `fast[pod]` (MemPod §V-B)
    hand: Vec<usize>,
    /// index in `fast[pod]` of each page in the fast tier
    slot: Vec<u32>,
    /// per pod, the interleave turn: (tier, pages left in its turn)
    turn: Vec<(usize, u64)>,
    /// the current epoch's accesses, and those served by the fast tier
    ep_accesses: u64,
    ep_fast: u64,
    promoted_per_pod: Vec<u64>,
    stats: Stats,
    rows: Vec<EpochRow>,
    scratch: Vec<(Reverse<u32>, PageId)>,
}

impl MemPod {
    /// MemPod with the default activity floor (`min_count=2`, `floor=possible`).
    pub fn new(pods: usize, counters: usize, epoch: Period, initial: Initial) -> MemPod {
        MemPod::with_floor(pods, counters, epoch, initial, 2, Floor::Possible)
    }

    pub fn with_floor(pods: usize, counters: usize, epoch: Period, initial: Initial, min_count: u32, floor: Floor) -> MemPod {
        assert!(pods >= 1 && counters >= 1 && min_count >= 1);
        MemPod {
            pods,
            counters,
            epoch,
            initial,
            min_count,
            floor,
            tiers: 0,
            mea: (0..pods).map(|_| MisraGries::new(counters)).collect(),
            frames: vec![[0; MAX_TIERS]; pods],
            used: vec![[0; MAX_TIERS]; pods],
            fast: vec![Vec::new(); pods],
            hand: vec![0; pods],
            slot: Vec::new(),
            turn: vec![(0, WEIGHTS[0]); pods],
            ep_accesses: 0,
            ep_fast: 0,
            promoted_per_pod: vec![0; pods],
            stats: Stats::default(),
            rows: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The pod of a page.
    #[inline(always)]
    pub fn pod_of(&self, page: PageId) -> usize {
        page as usize % self.pods
    }

    /// Split each tier's capacity over the pods (see the module comment).
    fn split_frames(&mut self, capacity: &[u64]) {
        let n = self.pods as u64;
        let mut next = 0usize;
        for (t, &c) in capacity.iter().enumerate() {
            if c == u64::MAX {
                for f in &mut self.frames {
                    f[t] = u64::MAX;
                }
                continue;
            }
            for f in &mut self.frames {
                f[t] = c / n;
            }
            for _ in 0..c % n {
                self.frames[next][t] += 1;
                next = (next + 1) % self.pods;
            }
        }
    }

    fn has_frame(&self, pod: usize, t: usize) -> bool {
        self.used[pod][t] < self.frames[pod][t]
    }

    /// A tier with a free frame of `pod`, by the placement rule.
    fn pick(&mut self, pod: usize) -> Option<usize> {
        let n = self.tiers;
        if self.initial == Initial::Interleave {
            let weight = |t: usize| WEIGHTS.get(t).copied().unwrap_or(0);
            let (mut t, mut left) = self.turn[pod];
            for _ in 0..=2 * n {
                if left > 0 && weight(t) > 0 && self.has_frame(pod, t) {
                    self.turn[pod] = (t, left - 1);
                    return Some(t);
                }
                t = (t + 1) % n;
                left = weight(t);
            }
            self.turn[pod] = (t, left);
        }
        (0..n).find(|&t| self.has_frame(pod, t))
    }

    /// The next victim among `pod`'s fast pages (MemPod §V-B): from where the pointer last
    /// stopped, the first page that holds no MEA counter; None if every one of them does.
    fn victim(&mut self, pod: usize) -> Option<PageId> {
        let n = self.fast[pod].len();
        for _ in 0..n {
            let i = self.hand[pod] % n;
            self.hand[pod] = (i + 1) % n;
            let v = self.fast[pod][i];
            if !self.mea[pod].contains(v) {
                return Some(v);
            }
        }
        None
    }
}

impl Policy for MemPod {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.tiers = ctx.mem.tiers();
        let caps: Vec<u64> = (0..self.tiers).map(|t| ctx.mem.capacity(t as TierId)).collect();
        self.split_frames(&caps);
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        let p = page as usize;
        if self.slot.len() <= p {
            let n = (p + 1).max(self.slot.len() * 2).max(1024);
            self.slot.resize(n, u32::MAX);
        }
        let pod = self.pod_of(page);
        let t = match self.pick(pod) {
            Some(t) => t,
            None => {
                self.stats.placed_outside_pod += 1;
                ctx.mem.first_free_from(0).unwrap_or(0) as usize
            }
        };
        self.used[pod][t] += 1;
        if t == 0 {
            self.slot[p] = self.fast[pod].len() as u32;
            self.fast[pod].push(page);
        }
        t as TierId
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, _addr: u64, _write: bool, ctx: &mut Ctx) -> Served {
        let pod = self.pod_of(page);
        self.mea[pod].record(page);
        self.ep_accesses += 1;
        self.ep_fast += (ctx.mem.tier(page) == 0) as u64;
        Served::RESIDENT
    }

    /// One activation per epoch with accesses.
    fn activity(&self) -> super::Activity {
        super::Activity::Ran { times: self.stats.epochs, every: self.epoch }
    }

    fn period(&self) -> Option<Period> {
        Some(self.epoch)
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        self.stats.boundaries += 1;
        if self.ep_accesses == 0 {
            return Ok(());
        }
        self.stats.epochs += 1;
        let mut row =
            EpochRow { epoch: ctx.now.period - 1, time_ms: ctx.now.ns / 1e6, accesses: self.ep_accesses, fast_hits: self.ep_fast, ..Default::default() };
        let mut hot = std::mem::take(&mut self.scratch);
        for pod in 0..self.pods {
            let (n, d) = (self.mea[pod].seen(), self.mea[pod].decrements());
            hot.clear();
            hot.extend(self.mea[pod].entries().map(|(p, c)| (Reverse(c), p)));
            hot.sort_unstable();
            row.candidates += hot.len() as u64;
            let mut promoted = 0u64;
            for &(Reverse(c), p) in &hot {
                let t = ctx.mem.tier(p);
                if t == 0 || t == UNPLACED {
                    continue;
                }
                if !above_floor(self.floor, self.min_count, c, d, n, self.counters) {
                    self.stats.below_floor += 1;
                    continue;
                }
                if self.has_frame(pod, 0) && ctx.mem.free(0) > 0 {
                    ctx.mem.migrate_by(p, 0, MoveBy::Hw)?;
                    self.used[pod][t as usize] -= 1;
                    self.used[pod][0] += 1;
                    self.slot[p as usize] = self.fast[pod].len() as u32;
                    self.fast[pod].push(p);
                    row.migrations += 1;
                    self.stats.into_free_frames += 1;
                } else {
                    let Some(v) = self.victim(pod) else {
                        self.stats.no_victim += 1;
                        continue;
                    };
                    ctx.mem.swap_by(p, v, MoveBy::Hw)?;
                    // the hot page takes the victim's frame
                    let s = self.slot[v as usize];
                    self.fast[pod][s as usize] = p;
                    self.slot[p as usize] = s;
                    self.slot[v as usize] = u32::MAX;
                    row.migrations += 2;
                    self.stats.swaps += 1;
                }
                promoted += 1;
            }
            // MemPod §V-B: up to K pages per pod per interval (only K are tracked)
            debug_assert!(promoted <= self.counters as u64);
            self.stats.most_promoted_by_a_pod = self.stats.most_promoted_by_a_pod.max(promoted);
            self.promoted_per_pod[pod] += promoted;
            row.promoted += promoted;
            self.mea[pod].clear();
        }
        self.scratch = hot;
        self.stats.tracked += row.candidates;
        self.stats.promoted += row.promoted;
        self.ep_accesses = 0;
        self.ep_fast = 0;
        self.rows.push(row);
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        let frames = |f: &[u64; MAX_TIERS]| f[..self.tiers].iter().map(|&c| if c == u64::MAX { json!(null) } else { json!(c) }).collect::<Vec<_>>();
        let pods: Vec<serde_json::Value> = (0..self.pods)
            .map(|k| json!({ "pod": k, "frames": frames(&self.frames[k]), "pages": &self.used[k][..self.tiers], "promoted": self.promoted_per_pod[k] }))
            .collect();
        json!({
            "name": "mempod",
            "pods": self.pods,
            "mea_counters": self.counters,
            "epoch": self.epoch.describe(),
            "initial": self.initial.name(),
            "min_count": self.min_count,
            "floor": self.floor.name(),
            "mempod": self.stats,
            "per_pod": pods,
            "timeseries": timeseries_json("tracked", &self.rows),
        })
    }
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "pods",
        ty: ParamType::Int { min: 1, max: 1024 },
        unit: "pods",
        default: "4",
        source: "MemPod (Prodromou et al., HPCA 2017; [26] in 001) §V-A: one pod per slow-memory channel; the evaluated system (8 HBM + 4 DDR4 channels) has 4 pods",
        help: "number of pods; page p belongs to pod p mod pods and only moves within it",
    },
    ParamSpec {
        name: "mea_counters",
        ty: ParamType::Int { min: 1, max: 1 << 20 },
        unit: "counters per pod",
        default: "64",
        source: "MemPod (HPCA 2017) §V-B and §VI-C1, Fig. 6: 64 MEA counters per pod, the best of 16-512 (at 50 µs)",
        help: "Misra-Gries counters per pod, and so the most pages a pod moves per epoch; a page with more than 1/(k+1) of its pod's accesses in an epoch is always tracked",
    },
    ParamSpec {
        name: "epoch",
        ty: ParamType::Period,
        unit: "simulated time (or accesses, or N-insn)",
        default: "50us",
        source: "MemPod (HPCA 2017) §V-B and §VI-C1, Fig. 6: 50 µs intervals, the best of 25-500 µs (at 64 counters)",
        help: "length of an epoch: each pod migrates its tracked pages at its end and clears its counters",
    },
    ParamSpec {
        name: "min_count",
        ty: ParamType::Int { min: 1, max: 1 << 30 },
        unit: "accesses in the epoch",
        default: "2",
        source: "tierkit: a page counted once in an epoch showed no reuse; MemPod (HPCA 2017) §V-B moves every tracked page (1)",
        help: "a tracked page moves only if its MEA counter is at least this (the counter never exceeds the page's accesses in the epoch)",
    },
    ParamSpec {
        name: "floor",
        ty: ParamType::Choice { options: &["possible", "frequent", "none"] },
        unit: "",
        default: "possible",
        source: "tierkit, from Misra and Gries (1982): with n pod accesses, k counters and d decrement steps a counter c means c ≤ true count ≤ c + d, and a page above n/(k+1) is always tracked; MemPod (HPCA 2017) §V-B has no floor (none)",
        help: "which tracked pages may move: possible ((c+d)(k+1) > n: not ruled out as above 1/(k+1) of the pod's accesses), frequent (c(k+1) > n: proven above it) or none",
    },
    ParamSpec {
        name: "initial",
        ty: ParamType::Choice { options: &["interleave", "first-touch"] },
        unit: "",
        default: "interleave",
        source: "001 §4.1 (4 pages to the fast tier, then 4 to the slow one), within each pod",
        help: "placement on first touch, within the page's pod: interleave (4/4) or first-touch",
    },
];

pub static MEMPOD: PolicyInfo = PolicyInfo {
    name: "mempod",
    summary: "MemPod (MemPod_no_AR): pods of fast and slow frames; per pod a Majority Element Algorithm counter set tracks hot pages, and at each epoch up to that many pages above an activity floor are swapped into the pod's fast frames by hardware; no address reconciliation",
    source: "001 §2.4 (MemPod_no_AR) after Prodromou et al., HPCA 2017 ([26] in 001) §III, §V; placement 001 §4.1; activity floor tierkit's, after Misra and Gries 1982",
    deploy: super::Deploy::Hardware { why: "per-pod MEA counters and page swaps in the memory controller (MemPod, HPCA 2017)" },
    params: PARAMS,
    build: |p: &Params| {
        Ok(Built::from(MemPod::with_floor(
            p.int("pods") as usize,
            p.int("mea_counters") as usize,
            p.period("epoch"),
            Initial::parse(p.text("initial")),
            p.int("min_count") as u32,
            Floor::parse(p.text("floor")),
        )))
    },
};
