//! `mempod`: MemPod (Prodromou et al., HPCA 2017), evaluated as MemPod_no_AR in seed 001
//! §2.4 ([26] there).
//!
//! Memory is split into pods, each a cluster of fast and slow channels with its own
//! migration controller; pages only ever move between the frames of their own pod. Each pod
//! watches its accesses with a Majority Element Algorithm counter set ([`MisraGries`]) that,
//! over an epoch, tracks the pod's hottest pages. At the end of each epoch every pod brings
//! its tracked pages that sit in a slow tier into the fast tier, by hardware
//! ([`MoveBy::Hw`]: no fault, no shootdown, the copy alongside the program), and the counters
//! start again. MemPod keeps every page's new location in large remap tables, so there is no
//! address reconciliation and nothing is charged.
//!
//! tierkit's rules:
//! * **Pods.** Page `p` (its dense id, i.e. the order in which pages are first touched, the
//!   frame order of a first-touch allocator) belongs to pod `p mod pods`. Each tier's
//!   capacity is split evenly over the pods; the remainders go one frame at a time to pods
//!   0, 1, … continuing from tier to tier, so that every pod can hold its share of pages
//!   whenever the tiers together hold the footprint.
//! * **Placement** (001 §4.1) within the page's pod: 4 pages to the fast tier, then 4 to the
//!   next tier, while the pod has frames there (`initial=interleave`), or fill the pod's
//!   fast frames first (`initial=first-touch`).
//! * **Counting.** Every access is recorded by its pod's counter set of `mea_counters`
//!   counters.
//! * **Migration**, pod by pod at the end of an epoch: the tracked pages, by counter (highest
//!   first, then page id), that are not in the fast tier move into it: into a free fast
//!   frame of the pod if there is one, else swapped with a victim among the pod's fast
//!   pages. Victims are chosen by a clock hand over the pod's fast frames that persists
//!   across epochs: a tracked page is never a victim; a page accessed since the hand last
//!   passed (a referenced bit) is spared once and its bit cleared; the first other page is
//!   the victim. Then the counter set is cleared.
//! * No addresses are reconciled and no cost is charged: only the copies' traffic.

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

#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    /// epoch boundaries crossed, and those that closed an epoch with accesses
    boundaries: u64,
    epochs: u64,
    /// pages tracked by the counter sets at the epochs' ends, summed
    tracked: u64,
    /// tracked pages brought into the fast tier
    promoted: u64,
    into_free_frames: u64,
    swaps: u64,
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
    tiers: usize,
    mea: Vec<MisraGries>,
    /// frames of each pod in each tier, and pages of the pod in them
    frames: Vec<[u64; MAX_TIERS]>,
    used: Vec<[u64; MAX_TIERS]>,
    /// the pod's pages in the fast tier (its fast frames), for the clock hand
    fast: Vec<Vec<PageId>>,
    hand: Vec<usize>,
    /// index in `fast[pod]` of each page in the fast tier
    slot: Vec<u32>,
    /// accessed since the clock hand last passed
    referenced: Vec<u8>,
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
    pub fn new(pods: usize, counters: usize, epoch: Period, initial: Initial) -> MemPod {
        assert!(pods >= 1 && counters >= 1);
        MemPod {
            pods,
            counters,
            epoch,
            initial,
            tiers: 0,
            mea: (0..pods).map(|_| MisraGries::new(counters)).collect(),
            frames: vec![[0; MAX_TIERS]; pods],
            used: vec![[0; MAX_TIERS]; pods],
            fast: vec![Vec::new(); pods],
            hand: vec![0; pods],
            slot: Vec::new(),
            referenced: Vec::new(),
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

    /// The next victim among `pod`'s fast pages (see the module comment), or None if every
    /// one of them is tracked.
    fn victim(&mut self, pod: usize) -> Option<PageId> {
        let n = self.fast[pod].len();
        // one turn clears every referenced bit it passes, so a second turn finds any page
        // that is not tracked
        for _ in 0..2 * n {
            let i = self.hand[pod] % n;
            self.hand[pod] = (i + 1) % n;
            let v = self.fast[pod][i];
            if self.mea[pod].contains(v) {
                continue;
            }
            if self.referenced[v as usize] != 0 {
                self.referenced[v as usize] = 0;
                continue;
            }
            return Some(v);
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
            self.referenced.resize(n, 0);
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
        self.referenced[page as usize] = 1;
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
            hot.clear();
            hot.extend(self.mea[pod].entries().map(|(p, c)| (Reverse(c), p)));
            hot.sort_unstable();
            row.candidates += hot.len() as u64;
            for &(_, p) in &hot {
                let t = ctx.mem.tier(p);
                if t == 0 || t == UNPLACED {
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
                row.promoted += 1;
                self.promoted_per_pod[pod] += 1;
            }
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
        source: "MemPod (Prodromou et al., HPCA 2017; [26] in 001): 4 pods",
        help: "number of pods; page p belongs to pod p mod pods and only moves within it",
    },
    ParamSpec {
        name: "mea_counters",
        ty: ParamType::Int { min: 1, max: 1 << 20 },
        unit: "counters per pod",
        default: "64",
        source: "MemPod (HPCA 2017): a 64-entry Majority Element Algorithm counter set per pod",
        help: "Misra-Gries counters per pod; a page with more than 1/(k+1) of its pod's accesses in an epoch is always tracked",
    },
    ParamSpec {
        name: "epoch",
        ty: ParamType::Period,
        unit: "simulated time (or accesses, or N-insn)",
        default: "50us",
        source: "MemPod (HPCA 2017): migration every 50 µs",
        help: "length of an epoch: each pod migrates its tracked pages at its end",
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
    summary: "MemPod (MemPod_no_AR): pods of fast and slow frames; per pod a Majority Element Algorithm counter set tracks hot pages, swapped into the pod's fast frames by hardware at each epoch; no address reconciliation",
    source: "001 §2.4 (MemPod_no_AR) after Prodromou et al., HPCA 2017 ([26] in 001); placement 001 §4.1",
    deploy: super::Deploy::Hardware { why: "per-pod MEA counters and page swaps in the memory controller (MemPod, HPCA 2017)" },
    params: PARAMS,
    build: |p: &Params| {
        Ok(Built::from(MemPod::new(
            p.int("pods") as usize,
            p.int("mea_counters") as usize,
            p.period("epoch"),
            Initial::parse(p.text("initial")),
        )))
    },
};
