//! Which freed allocation last held an address (docs/guidance.md, "Accesses outside live
//! allocations").
//!
//! A post-cache trace holds the transfers main memory sees. A dirty line is written back when
//! the cache evicts it, which can be long after the program freed the block it belongs to: the
//! write still goes to the memory that block occupied. So an access outside every live
//! allocation is not, for that alone, an access to the stack or the globals. [`Freed`] keeps,
//! for each address, the freed block that last held it (until another freed block takes its
//! place), so that the profile and the arena layout can send such an access where the hardware
//! sends it: to the memory of the block that last held the line. Addresses no allocation of the
//! trace ever held are the program's other memory (stack, globals, mapped files, memory it
//! maps itself).

use std::collections::BTreeMap;

/// Disjoint address ranges `[start, end)` of freed blocks, each with a value (the block's site,
/// or where a layout put it). A newer range replaces the parts of older ones it covers.
#[derive(Clone, Debug, Default)]
pub struct Freed<T> {
    /// start -> (end, value)
    map: BTreeMap<u64, (u64, T)>,
}

impl<T: Copy> Freed<T> {
    pub fn new() -> Freed<T> {
        Freed { map: BTreeMap::new() }
    }

    /// The block `[start, end)` was freed: it now holds its addresses, in place of any older
    /// freed block (the parts of those outside it stay).
    pub fn insert(&mut self, start: u64, end: u64, value: T) {
        if end <= start {
            return;
        }
        // the ranges overlapping [start, end), from the last one starting before `end`
        while let Some((&s, &(e, v))) = self.map.range(..end).next_back() {
            if e <= start {
                break;
            }
            self.map.remove(&s);
            if e > end {
                self.map.insert(end, (e, v));
            }
            if s < start {
                self.map.insert(s, (start, v));
                break;
            }
        }
        self.map.insert(start, (end, value));
    }

    /// The freed block holding `addr`: its range and value.
    #[inline]
    pub fn get(&self, addr: u64) -> Option<(u64, u64, T)> {
        match self.map.range(..=addr).next_back() {
            Some((&s, &(e, v))) if addr < e => Some((s, e, v)),
            _ => None,
        }
    }

    /// The first freed range starting after `addr` and before `end`: for a post-cache line
    /// from `addr` that holds the start of a freed block.
    #[inline]
    pub fn starting_in(&self, addr: u64, end: u64) -> Option<(u64, u64, T)> {
        let start = addr.saturating_add(1);
        if end <= start {
            return None;
        }
        self.map.range(start..end).next().map(|(&s, &(e, v))| (s, e, v))
    }

    /// The end of the last freed range ending at or before `addr` (0 if none), and the start of
    /// the first one starting after it (`u64::MAX` if none): the gap around an address no freed
    /// block holds.
    pub fn gap_around(&self, addr: u64) -> (u64, u64) {
        let lo = self.map.range(..=addr).next_back().map(|(_, &(e, _))| e).unwrap_or(0);
        let hi = self.map.range(addr.saturating_add(1)..).next().map(|(&s, _)| s).unwrap_or(u64::MAX);
        (lo, hi)
    }

    /// Ranges held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_free_replaces_only_what_it_covers() {
        let mut f = Freed::new();
        f.insert(100, 200, 'a');
        f.insert(300, 400, 'b');
        assert_eq!(f.get(150), Some((100, 200, 'a')));
        assert_eq!(f.get(200), None);
        assert_eq!(f.gap_around(250), (200, 300));
        assert_eq!((f.starting_in(250, 300), f.starting_in(250, 301)), (None, Some((300, 400, 'b'))));
        // 'c' covers the end of 'a' and the start of 'b'
        f.insert(180, 320, 'c');
        assert_eq!(f.get(179), Some((100, 180, 'a')));
        assert_eq!(f.get(180), Some((180, 320, 'c')));
        assert_eq!(f.get(319), Some((180, 320, 'c')));
        assert_eq!(f.get(320), Some((320, 400, 'b')));
        assert_eq!(f.len(), 3);
        // 'd' inside 'c' splits it in three
        f.insert(200, 210, 'd');
        assert_eq!((f.get(199).unwrap().2, f.get(200).unwrap().2, f.get(210)), ('c', 'd', Some((210, 320, 'c'))));
        // 'e' covers everything
        f.insert(0, 1000, 'e');
        assert_eq!((f.len(), f.get(399)), (1, Some((0, 1000, 'e'))));
        assert_eq!(f.gap_around(5000), (1000, u64::MAX));
        f.insert(7, 7, 'x');
        assert_eq!(f.len(), 1, "an empty block holds nothing");
    }
}
