//! Layer 3: migration mechanics. Policies *request* placements, one-way moves and swaps;
//! this module carries them out, enforces capacities (a checked invariant, in release builds
//! too) and accounts every page and byte moved. The timing model charges the costs of the
//! operations recorded here.

pub mod remap;

use crate::error::{Error, Result};
use crate::pagemap::PageId;
use crate::platform::MAX_TIERS;
use serde::Serialize;

pub type TierId = u8;
/// The tier of a page not yet placed.
pub const UNPLACED: TierId = u8::MAX;
/// No tier: an access served without a tag probe before it (`policy::Served::probe`).
pub const NO_TIER: TierId = 255;

/// Who moves a page, which decides what the move costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MoveBy {
    /// The operating system: the program is stopped for the page fault, the TLB shootdown
    /// and the per-page cost of the platform, and for the copy itself when the platform says
    /// `copy_from_bandwidth` (as `move_pages` does).
    #[default]
    Os,
    /// The operating system, as one page of a batch it moves in a single visit (epoch-based
    /// migration, 001 §2.4): like `Os`, but the page pays only the platform's per-page cost
    /// and its copy. The batch's kernel entry and TLB shootdown are paid once, by the policy,
    /// as a [`Charge`].
    #[serde(rename = "os-batch")]
    OsBatch,
    /// A migration engine in hardware (a memory-side controller such as 001's MigC or
    /// MemPod): no fault or shootdown; the copy runs alongside the program through both tiers'
    /// queues, and an access to the page before its data is in the engine's buffer waits for
    /// it (`detailed` model). Address reconciliation, if any, is the policy's to charge.
    Hw,
}

/// One page moved from one tier to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MigrationOp {
    pub page: PageId,
    pub from: TierId,
    pub to: TierId,
    /// Part of a swap (two pages exchanging tiers).
    pub swap: bool,
    pub by: MoveBy,
}

/// A cost a policy incurs beyond moving pages (address reconciliation, scanning, a
/// controller's energy), charged to the timing model and the statistics.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Charge {
    /// What it pays for, a short name (`"address reconciliation"`); totals are kept per name.
    pub what: &'static str,
    /// Time, ns.
    pub ns: f64,
    /// Whether the program is stopped for that time (the OS runs in its place), or the work
    /// runs alongside it (hardware).
    pub halts: bool,
    /// Energy, J.
    pub energy_j: f64,
}

/// No page: an unused slot of [`Op::ChargeFor`]'s pages.
pub const NO_OWNER_PAGE: PageId = PageId::MAX;

/// An operation for the timing model, in the order the mechanics carried them out.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Op {
    Move(MigrationOp),
    Charge(Charge),
    /// A charge for work on up to two pages (a reconciled group's): on several cores, the
    /// halting time is split evenly among the pages and each share stops the core that owns
    /// its page (the core that first touched it), not the core whose access was being
    /// processed; on one core it is a plain [`Op::Charge`]. Unused slots hold
    /// [`NO_OWNER_PAGE`].
    ChargeFor {
        pages: [PageId; 2],
        charge: Charge,
    },
}

/// Totals of the charges of one kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChargeTotals {
    pub count: u64,
    pub ns: f64,
    /// The part of `ns` that stopped the program.
    pub halted_ns: f64,
    pub energy_j: f64,
}

/// Counters of the migration mechanics (the `migration` subtree of the statistics).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MigrationStats {
    /// Pages moved (a swap moves two).
    pub migrations: u64,
    pub migrated_bytes: u64,
    /// Moves to a faster tier (lower index).
    pub promotions: u64,
    /// Moves to a slower tier.
    pub demotions: u64,
    /// Swap operations (each counted in `migrations` twice).
    pub swaps: u64,
    /// `moves[from][to]`: pages moved between each pair of tiers.
    pub moves: Vec<Vec<u64>>,
    /// Pages moved by a hardware migration engine (the rest by the OS).
    pub by_hardware: u64,
    /// Costs charged by the policy, by name.
    pub charges: std::collections::BTreeMap<String, ChargeTotals>,
    /// Bytes leaving / arriving at each tier by migration.
    pub bytes_out: Vec<u64>,
    pub bytes_in: Vec<u64>,
}

/// Where every page lives, and the capacity of every tier.
pub struct Memory {
    tier_of: Vec<TierId>,
    used: Vec<u64>,
    capacity: Vec<u64>,
    page_bytes: u64,
    /// Operations carried out since the timing model last took them.
    pub ops: Vec<Op>,
    /// `moves[from][to]`: pages moved; every other counter is derived from it at the end,
    /// so a move costs one increment.
    moves: [[u64; MAX_TIERS]; MAX_TIERS],
    swaps: u64,
    by_hardware: u64,
    charges: std::collections::BTreeMap<&'static str, ChargeTotals>,
    placed: u64,
}

impl Memory {
    pub fn new(capacity_pages: &[u64], page_bytes: u64) -> Memory {
        let n = capacity_pages.len();
        assert!((2..=MAX_TIERS).contains(&n));
        Memory {
            tier_of: Vec::new(),
            used: vec![0; n],
            capacity: capacity_pages.to_vec(),
            page_bytes,
            ops: Vec::new(),
            moves: [[0; MAX_TIERS]; MAX_TIERS],
            swaps: 0,
            by_hardware: 0,
            charges: Default::default(),
            placed: 0,
        }
    }

    /// Make room for page ids below `n`.
    #[inline]
    pub fn grow(&mut self, n: usize) {
        if n > self.tier_of.len() {
            let want = n.max(self.tier_of.len() * 2).max(1024);
            self.tier_of.resize(want, UNPLACED);
        }
    }

    #[inline(always)]
    pub fn tier(&self, page: PageId) -> TierId {
        self.tier_of[page as usize]
    }

    #[inline(always)]
    pub fn prefetch(&self, page: PageId) {
        crate::prefetch::read(self.tier_of.as_ptr().wrapping_add(page as usize));
    }

    pub fn tiers(&self) -> usize {
        self.capacity.len()
    }
    pub fn used(&self, tier: TierId) -> u64 {
        self.used[tier as usize]
    }
    pub fn capacity(&self, tier: TierId) -> u64 {
        self.capacity[tier as usize]
    }
    /// Free frames (pages) in a tier.
    #[inline]
    pub fn free(&self, tier: TierId) -> u64 {
        self.capacity[tier as usize] - self.used[tier as usize]
    }
    pub fn page_bytes(&self) -> u64 {
        self.page_bytes
    }
    /// Pages placed so far.
    pub fn placed(&self) -> u64 {
        self.placed
    }
    /// Highest page id + 1 that has a slot (placed or not).
    pub fn slots(&self) -> usize {
        self.tier_of.len()
    }
    pub fn tier_of(&self) -> &[TierId] {
        &self.tier_of
    }

    /// The fastest tier with a free frame at or after `from`, if any.
    pub fn first_free_from(&self, from: TierId) -> Option<TierId> {
        (from as usize..self.capacity.len()).find(|&t| self.used[t] < self.capacity[t]).map(|t| t as TierId)
    }

    /// Place a page on first touch.
    #[inline]
    pub fn place(&mut self, page: PageId, tier: TierId) -> Result<()> {
        let t = tier as usize;
        if t >= self.capacity.len() {
            return Err(Error::Invariant(format!("placement of page {page} in tier {tier}, which does not exist")));
        }
        if self.tier_of[page as usize] != UNPLACED {
            return Err(Error::Invariant(format!("page {page} placed twice")));
        }
        if self.used[t] >= self.capacity[t] {
            return Err(Error::Invariant(format!("placement of page {page} in tier {tier}, which is full ({} pages)", self.capacity[t])));
        }
        self.used[t] += 1;
        self.placed += 1;
        self.tier_of[page as usize] = tier;
        Ok(())
    }

    /// Forget a placed page: not a move, nothing accounted. The simulator never calls it; the
    /// live daemon's mirror of a program's placement does, for a page the program unmapped or
    /// one the kernel put elsewhere than the mirror says (`crate::live`).
    pub fn unplace(&mut self, page: PageId) -> Result<()> {
        let t = self.tier_of.get(page as usize).copied().unwrap_or(UNPLACED);
        if t == UNPLACED {
            return Err(Error::Invariant(format!("unplacing page {page}, which is not placed")));
        }
        self.tier_of[page as usize] = UNPLACED;
        self.used[t as usize] -= 1;
        self.placed -= 1;
        Ok(())
    }

    #[inline]
    fn account(&mut self, page: PageId, from: TierId, to: TierId, swap: bool, by: MoveBy) {
        self.moves[from as usize][to as usize] += 1;
        self.by_hardware += (by == MoveBy::Hw) as u64;
        self.ops.push(Op::Move(MigrationOp { page, from, to, swap, by }));
    }

    /// Charge a cost beyond page moves (see [`Charge`]).
    pub fn charge(&mut self, c: Charge) {
        let t = self.charges.entry(c.what).or_default();
        t.count += 1;
        t.ns += c.ns;
        if c.halts {
            t.halted_ns += c.ns;
        }
        t.energy_j += c.energy_j;
        self.ops.push(Op::Charge(c));
    }

    /// Charge a cost of work on `pages` (one or two; see [`Op::ChargeFor`]): accounted as one
    /// charge, like [`Memory::charge`]; on several cores its halting time stops the pages'
    /// owners.
    pub fn charge_for(&mut self, pages: &[PageId], c: Charge) {
        assert!((1..=2).contains(&pages.len()), "a charge for one or two pages");
        self.charge(c);
        if let Some(Op::Charge(c)) = self.ops.pop() {
            let mut ps = [NO_OWNER_PAGE; 2];
            ps[..pages.len()].copy_from_slice(pages);
            self.ops.push(Op::ChargeFor { pages: ps, charge: c });
        }
    }

    /// Energy of every charge so far, J.
    pub fn charged_energy_j(&self) -> f64 {
        self.charges.values().map(|t| t.energy_j).sum()
    }

    /// Pages moved from tier `from` to tier `to` so far.
    #[inline]
    pub fn moves_between(&self, from: usize, to: usize) -> u64 {
        self.moves[from][to]
    }

    /// Pages moved so far.
    pub fn migrations(&self) -> u64 {
        self.moves.iter().flatten().sum()
    }

    /// The migration counters (the `migration` subtree of the statistics).
    pub fn stats(&self) -> MigrationStats {
        let n = self.capacity.len();
        let moves: Vec<Vec<u64>> = (0..n).map(|f| self.moves[f][..n].to_vec()).collect();
        let migrations = self.migrations();
        let promotions = (0..n).flat_map(|f| (0..f).map(move |t| (f, t))).map(|(f, t)| moves[f][t]).sum();
        MigrationStats {
            migrations,
            migrated_bytes: migrations * self.page_bytes,
            promotions,
            demotions: migrations - promotions,
            swaps: self.swaps,
            by_hardware: self.by_hardware,
            charges: self.charges.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            bytes_out: (0..n).map(|f| moves[f].iter().sum::<u64>() * self.page_bytes).collect(),
            bytes_in: (0..n).map(|t| moves.iter().map(|r| r[t]).sum::<u64>() * self.page_bytes).collect(),
            moves,
        }
    }

    /// Move a page to another tier with a free frame (the OS moves it).
    pub fn migrate(&mut self, page: PageId, to: TierId) -> Result<()> {
        self.migrate_by(page, to, MoveBy::Os)
    }

    /// Exchange the tiers of two pages in different tiers (the OS moves them).
    pub fn swap(&mut self, a: PageId, b: PageId) -> Result<()> {
        self.swap_by(a, b, MoveBy::Os)
    }

    /// Move a page to another tier with a free frame.
    pub fn migrate_by(&mut self, page: PageId, to: TierId, by: MoveBy) -> Result<()> {
        let from = self.tier_of.get(page as usize).copied().unwrap_or(UNPLACED);
        if from == UNPLACED {
            return Err(Error::Invariant(format!("migration of page {page}, which is not placed")));
        }
        if to as usize >= self.capacity.len() || to == from {
            return Err(Error::Invariant(format!("migration of page {page} from tier {from} to tier {to}")));
        }
        if self.used[to as usize] >= self.capacity[to as usize] {
            return Err(Error::Invariant(format!("migration of page {page} into full tier {to}")));
        }
        self.used[from as usize] -= 1;
        self.used[to as usize] += 1;
        self.tier_of[page as usize] = to;
        self.account(page, from, to, false, by);
        Ok(())
    }

    /// Exchange the tiers of two pages in different tiers (capacity unchanged).
    pub fn swap_by(&mut self, a: PageId, b: PageId, by: MoveBy) -> Result<()> {
        let ta = self.tier_of.get(a as usize).copied().unwrap_or(UNPLACED);
        let tb = self.tier_of.get(b as usize).copied().unwrap_or(UNPLACED);
        if ta == UNPLACED || tb == UNPLACED || ta == tb {
            return Err(Error::Invariant(format!("swap of pages {a} (tier {ta}) and {b} (tier {tb})")));
        }
        self.tier_of[a as usize] = tb;
        self.tier_of[b as usize] = ta;
        self.swaps += 1;
        self.account(a, ta, tb, true, by);
        self.account(b, tb, ta, true, by);
        Ok(())
    }

    /// Verify the bookkeeping from scratch: per-tier usage matches the page map, no tier is
    /// over capacity, every migrated byte left one tier and arrived at another.
    pub fn check_invariants(&self) -> Result<()> {
        let mut count = vec![0u64; self.capacity.len()];
        for &t in &self.tier_of {
            if t != UNPLACED {
                count[t as usize] += 1;
            }
        }
        if count != self.used {
            return Err(Error::Invariant(format!("tier usage {:?} disagrees with the page map {:?}", self.used, count)));
        }
        for (t, (&u, &c)) in self.used.iter().zip(&self.capacity).enumerate() {
            if u > c {
                return Err(Error::Invariant(format!("tier {t} holds {u} pages, over its capacity of {c}")));
            }
        }
        if count.iter().sum::<u64>() != self.placed {
            return Err(Error::Invariant("placed page count disagrees with the page map".into()));
        }
        let n = self.capacity.len();
        if self.moves.iter().enumerate().any(|(f, r)| r.iter().enumerate().any(|(t, &m)| m > 0 && (f >= n || t >= n || f == t))) {
            return Err(Error::Invariant("a move recorded between tiers that do not exist, or within one tier".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_enforced_and_moves_accounted() {
        let mut m = Memory::new(&[2, 10], 4096);
        m.grow(5);
        m.place(0, 0).unwrap();
        m.place(1, 0).unwrap();
        assert!(m.place(2, 0).is_err(), "tier 0 is full");
        m.place(2, 1).unwrap();
        assert!(m.migrate(2, 0).is_err(), "no free frame in tier 0");
        m.swap(0, 2).unwrap();
        assert_eq!((m.tier(0), m.tier(2)), (1, 0));
        m.migrate(1, 1).unwrap();
        m.migrate(0, 0).unwrap();
        let s = m.stats();
        assert_eq!(s.migrations, 4);
        assert_eq!(s.migrated_bytes, 4 * 4096);
        assert_eq!(s.promotions, 2);
        assert_eq!(s.swaps, 1);
        assert_eq!(s.moves, vec![vec![0, 2], vec![2, 0]]);
        assert_eq!((s.bytes_out.clone(), s.bytes_in.clone()), (vec![2 * 4096, 2 * 4096], vec![2 * 4096, 2 * 4096]));
        assert_eq!(m.ops.len(), 4);
        m.check_invariants().unwrap();
        assert!(m.place(0, 1).is_err(), "placed twice");
    }
}
