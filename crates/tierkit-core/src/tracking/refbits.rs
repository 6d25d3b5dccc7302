//! Referenced and dirty bits of page-table entries, as real machines offer them: the MMU
//! sets a page's referenced bit on any access and its dirty bit on a store; software (a page
//! table walk: Linux's `walk_page_range`, HyPlacer's SelMo, CLOCK scans) reads and clears
//! them. A policy learns nothing about a page between two looks: not how many accesses it
//! had, nor when. After clearing, only later accesses set the bits again.
//!
//! Cost ([`ScanCost`]): every PTE a walk visits costs `per_pte_ns`; a walk that cleared bits
//! ends with a TLB flush (`flush_ns`), without which the MMU, holding the translation with
//! the bit already set, would not set it again. Both stop the program when charged as
//! halting (the walk runs in the kernel on the program's behalf; the flush interrupts every
//! core running it).

use crate::pagemap::PageId;

pub const REFERENCED: u8 = 1;
pub const DIRTY: u8 = 2;

#[derive(Clone, Debug, Default)]
pub struct RefBits {
    bits: Vec<u8>,
}

impl RefBits {
    pub fn new() -> RefBits {
        RefBits::default()
    }

    /// Make room for page ids below `n` (new pages start with both bits clear).
    #[inline]
    pub fn grow(&mut self, n: usize) {
        if n > self.bits.len() {
            let want = n.max(self.bits.len() * 2).max(1024);
            self.bits.resize(want, 0);
        }
    }

    /// What the MMU does on an access.
    #[inline(always)]
    pub fn access(&mut self, page: PageId, write: bool) {
        self.bits[page as usize] |= REFERENCED | ((write as u8) << 1);
    }

    /// Both bits (`REFERENCED | DIRTY`) of a page.
    #[inline]
    pub fn get(&self, page: PageId) -> u8 {
        self.bits.get(page as usize).copied().unwrap_or(0)
    }

    #[inline]
    pub fn referenced(&self, page: PageId) -> bool {
        self.get(page) & REFERENCED != 0
    }

    #[inline]
    pub fn dirty(&self, page: PageId) -> bool {
        self.get(page) & DIRTY != 0
    }

    #[inline]
    pub fn clear(&mut self, page: PageId) {
        if let Some(b) = self.bits.get_mut(page as usize) {
            *b = 0;
        }
    }

    /// Read a page's bits and clear them (one PTE visited by a clearing walk).
    #[inline]
    pub fn test_and_clear(&mut self, page: PageId) -> u8 {
        match self.bits.get_mut(page as usize) {
            Some(b) => std::mem::take(b),
            None => 0,
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.bits.capacity()
    }
}

/// What a page-table walk costs the program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScanCost {
    /// Per PTE visited, ns.
    pub per_pte_ns: f64,
    /// TLB flush after a walk that cleared bits, ns.
    pub flush_ns: f64,
}

impl ScanCost {
    /// Time of a walk over `ptes` entries, with a flush if it cleared bits, ns.
    pub fn walk_ns(&self, ptes: u64, cleared: bool) -> f64 {
        ptes as f64 * self.per_pte_ns + if cleared { self.flush_ns } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cleared bits are set only by later accesses; a store sets both bits, a load only the
    /// referenced one (004 §4.4: "If one such page is referenced thereafter, the MMU sets its
    /// PTE's reference bit; and also its modified bit, in the event of a store").
    #[test]
    fn cleared_bits_are_set_only_by_later_accesses() {
        let mut b = RefBits::new();
        b.grow(4);
        b.access(0, false);
        b.access(1, true);
        b.access(1, false);
        assert_eq!((b.get(0), b.get(1), b.get(2)), (REFERENCED, REFERENCED | DIRTY, 0));
        assert_eq!(b.test_and_clear(1), REFERENCED | DIRTY);
        assert_eq!(b.get(1), 0, "cleared");
        b.clear(0);
        assert!(!b.referenced(0) && !b.dirty(0));
        b.access(0, false);
        assert!(b.referenced(0) && !b.dirty(0), "a later load sets referenced only");
        assert!(!b.referenced(1), "no access since the clear: still clear");
        assert_eq!(b.get(1_000_000), 0, "a page beyond the array has never been seen");
    }

    #[test]
    fn a_walk_costs_its_ptes_and_one_flush_when_it_cleared() {
        let c = ScanCost { per_pte_ns: 2.0, flush_ns: 3000.0 };
        assert_eq!(c.walk_ns(100, false), 200.0);
        assert_eq!(c.walk_ns(100, true), 3200.0);
    }
}
