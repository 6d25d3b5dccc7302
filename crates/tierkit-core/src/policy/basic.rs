//! Static placement policies: pages stay where their first access puts them.
//! `all-fast` and `all-slow` are the single-tier references (capacities ignored), `first-touch`
//! fills the fastest tier first, `interleave` spreads pages round-robin by weight.

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo};
use crate::error::{Error, Result};
use crate::mechanics::TierId;
use crate::pagemap::PageId;

/// Every page in the fastest tier, whatever its capacity: the upper reference.
pub struct AllFast;

impl Policy for AllFast {
    fn needs(&self) -> Needs {
        Needs { unlimited_capacity: true, ..Default::default() }
    }
    fn place(&mut self, _page: PageId, _ctx: &mut Ctx) -> TierId {
        0
    }
}

pub static ALL_FAST: PolicyInfo = PolicyInfo {
    name: "all-fast",
    summary: "every page in the fastest tier, capacity ignored (upper reference)",
    source: "single-tier reference, as the all-fast bound of 003 §3.1",
    deploy: super::Deploy::Memory,
    params: &[],
    build: |_| Ok(Built::from(AllFast)),
};

/// Every page in the slowest tier: the lower reference and the usual normalizer.
pub struct AllSlow;

impl Policy for AllSlow {
    fn needs(&self) -> Needs {
        Needs { unlimited_capacity: true, ..Default::default() }
    }
    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        (ctx.mem.tiers() - 1) as TierId
    }
}

pub static ALL_SLOW: PolicyInfo = PolicyInfo {
    name: "all-slow",
    summary: "every page in the slowest tier, capacity ignored (lower reference)",
    source: "single-tier reference",
    deploy: super::Deploy::Memory,
    params: &[],
    build: |_| Ok(Built::from(AllSlow)),
};

/// Fill the fastest tier first, then the next, on first touch; never migrate.
pub struct FirstTouch;

impl Policy for FirstTouch {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    #[inline]
    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        ctx.mem.first_free_from(0).unwrap_or(0)
    }
}

pub static FIRST_TOUCH: PolicyInfo = PolicyInfo {
    name: "first-touch",
    summary: "fill the fastest tier first on first touch, then the next tier; no migration",
    source: "first-touch baseline of 000 §5",
    deploy: super::Deploy::Memory,
    params: &[],
    build: |_| Ok(Built::from(FirstTouch)),
};

/// Round-robin placement by weight: `weights[0]` pages to tier 0, then `weights[1]` to
/// tier 1, and so on, skipping full tiers. Reusable as the initial placement of other
/// policies.
#[derive(Clone, Debug)]
pub struct Interleave {
    weights: Vec<u64>,
    tier: usize,
    left: u64,
}

impl Interleave {
    pub fn new(weights: Vec<u64>) -> Interleave {
        let left = weights.first().copied().unwrap_or(1);
        Interleave { weights, tier: 0, left }
    }

    /// Parse `a/b/c` or `a,b,c` weights; a missing tier weighs 0, an empty list is 1 each.
    pub fn parse_weights(key: &str, s: &str) -> Result<Vec<u64>> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(Vec::new());
        }
        s.split(['/', ' ', ':']).map(|w| w.trim().parse::<u64>().map_err(|_| Error::config(key, format!("'{s}' is not a list of weights like 4/4")))).collect()
    }

    /// The next tier in turn that has a free frame.
    pub fn next(&mut self, ctx: &Ctx) -> TierId {
        let n = ctx.mem.tiers();
        if self.weights.len() != n {
            // empty: 1 per tier; shorter than the tier list: the rest weigh 0
            let fill = if self.weights.is_empty() { 1 } else { 0 };
            self.weights.resize(n, fill);
            self.left = self.weights[self.tier % n];
        }
        let weights = &self.weights;
        if weights.iter().all(|&w| w == 0) {
            return ctx.mem.first_free_from(0).unwrap_or(0);
        }
        // at most one full turn over the tiers, skipping full ones and zero weights
        for _ in 0..=2 * n {
            let t = self.tier % n;
            let w = weights.get(t).copied().unwrap_or(0);
            if self.left == 0 || w == 0 || ctx.mem.free(t as TierId) == 0 {
                self.tier = (t + 1) % n;
                self.left = weights.get(self.tier).copied().unwrap_or(0);
                continue;
            }
            self.left -= 1;
            return t as TierId;
        }
        ctx.mem.first_free_from(0).unwrap_or(0)
    }
}

impl Policy for Interleave {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        self.next(ctx)
    }
}

pub static INTERLEAVE: PolicyInfo = PolicyInfo {
    name: "interleave",
    summary: "round-robin placement by weight over the tiers with room; no migration",
    source: "NUMA interleaving; weights=4/4 is the 4-fast/4-slow allocation of 001 §4.1",
    deploy: super::Deploy::Memory,
    params: &[ParamSpec {
        name: "weights",
        ty: ParamType::Text,
        unit: "pages per turn, per tier",
        default: "",
        source: "tierkit (empty = 1 per tier); 001 §4.1 uses 4/4",
        help: "pages placed in each tier per round, fastest tier first, separated by '/' (e.g. 4/4)",
    }],
    build: |p: &Params| {
        let w = Interleave::parse_weights("interleave:weights", p.text("weights"))?;
        if !w.is_empty() && w.iter().all(|&x| x == 0) {
            return Err(Error::config("interleave:weights", "at least one weight must be positive"));
        }
        Ok(Built::from(Interleave::new(w)))
    },
};
