//! Layer 4: access tracking — what a policy is allowed to observe. This module holds the
//! exact per-page observations of the simulator (per-period access counts, reads and writes,
//! recency), kept only when a policy asks for them ([`Needs`](crate::policy::Needs)), so
//! policies that need nothing cost nothing. The submodules model what real machines offer,
//! each with its cost for the policy to charge (`docs/tracking.md`): referenced/dirty bits
//! ([`refbits`]), per-tier bandwidth counters ([`bandwidth`]), NUMA hint faults
//! ([`hint_faults`]), Linux's active/inactive LRU lists ([`lru`]) and DAMON's sampled
//! regions ([`damon`]).

pub mod bandwidth;
pub mod damon;
pub mod hint_faults;
pub mod lru;
pub mod refbits;

use crate::pagemap::PageId;

/// Merge `new` (pairs of address and page, any order) into `order`, a list kept sorted by
/// (address, page): only the new pages are sorted, then one linear merge, so that keeping
/// the known pages in address order costs O(new log new + known) per update, not a full
/// sort. Models that walk or sample pages by virtual address use it as new pages appear.
pub(crate) fn merge_by_address(order: &mut Vec<(u64, PageId)>, mut new: Vec<(u64, PageId)>) {
    if new.is_empty() {
        return;
    }
    new.sort_unstable();
    if order.last().is_none_or(|l| *l <= new[0]) {
        order.extend_from_slice(&new);
        return;
    }
    // from the back, in place: no second array (this runs on lists of millions of pages)
    let (mut i, mut j) = (order.len(), new.len());
    order.resize(i + j, (0, 0));
    let mut k = order.len();
    while j > 0 {
        k -= 1;
        if i > 0 && order[i - 1] > new[j - 1] {
            order[k] = order[i - 1];
            i -= 1;
        } else {
            order[k] = new[j - 1];
            j -= 1;
        }
    }
}

#[derive(Default)]
pub struct Tracking {
    counts: bool,
    rw: bool,
    recency: bool,
    /// Accesses to each page in the current period.
    pub count: Vec<u32>,
    /// Accesses to each page in the last completed period.
    pub prev_count: Vec<u32>,
    /// Writes in the current / last period (only with `rw`).
    pub writes: Vec<u32>,
    pub prev_writes: Vec<u32>,
    /// Pages accessed in the current period, in order of their first access in it.
    pub touched: Vec<PageId>,
    /// Pages accessed in the last completed period.
    pub prev_touched: Vec<PageId>,
    /// 1 + index of the last access to each page (0: never accessed).
    pub last_access: Vec<u64>,
}

impl Tracking {
    pub fn new(counts: bool, rw: bool, recency: bool) -> Tracking {
        Tracking { counts: counts || rw, rw, recency, ..Default::default() }
    }

    #[inline]
    pub fn grow(&mut self, n: usize) {
        if self.counts && self.count.len() < n {
            let want = n.max(self.count.len() * 2).max(1024);
            self.count.resize(want, 0);
            self.prev_count.resize(want, 0);
            if self.rw {
                self.writes.resize(want, 0);
                self.prev_writes.resize(want, 0);
            }
        }
        if self.recency && self.last_access.len() < n {
            let want = n.max(self.last_access.len() * 2).max(1024);
            self.last_access.resize(want, 0);
        }
    }

    #[inline(always)]
    pub fn prefetch(&self, page: PageId) {
        if self.counts {
            crate::prefetch::read(self.count.as_ptr().wrapping_add(page as usize));
        }
        if self.recency {
            crate::prefetch::read(self.last_access.as_ptr().wrapping_add(page as usize));
        }
    }

    /// Record access number `index` (0-based) to `page`.
    #[inline(always)]
    pub fn record(&mut self, page: PageId, write: bool, index: u64) {
        let p = page as usize;
        if self.counts {
            let c = &mut self.count[p];
            if *c == 0 {
                self.touched.push(page);
            }
            *c = c.saturating_add(1);
            if self.rw && write {
                self.writes[p] = self.writes[p].saturating_add(1);
            }
        }
        if self.recency {
            self.last_access[p] = index + 1;
        }
    }

    /// Close the current period: its counts become the previous period's. Costs O(pages
    /// touched in the two periods), not O(pages).
    pub fn end_period(&mut self) {
        if !self.counts {
            return;
        }
        for &p in &self.prev_touched {
            self.prev_count[p as usize] = 0;
            if self.rw {
                self.prev_writes[p as usize] = 0;
            }
        }
        std::mem::swap(&mut self.count, &mut self.prev_count);
        std::mem::swap(&mut self.writes, &mut self.prev_writes);
        std::mem::swap(&mut self.touched, &mut self.prev_touched);
        self.touched.clear();
    }

    pub fn heap_bytes(&self) -> usize {
        (self.count.capacity() + self.prev_count.capacity() + self.writes.capacity() + self.prev_writes.capacity()) * 4
            + (self.touched.capacity() + self.prev_touched.capacity()) * 4
            + self.last_access.capacity() * 8
    }
}

/// Per-page access counts of the *next* period, for policies with future knowledge (oracle).
#[derive(Default)]
pub struct FutureCounts {
    pub count: Vec<u32>,
    /// Pages accessed in the next period, in order of first access.
    pub touched: Vec<PageId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_by_address_keeps_the_order_and_sorts_only_the_new() {
        let mut o = vec![(10, 0), (30, 1)];
        merge_by_address(&mut o, vec![(40, 3), (20, 2), (5, 4)]);
        assert_eq!(o, vec![(5, 4), (10, 0), (20, 2), (30, 1), (40, 3)]);
        merge_by_address(&mut o, vec![(50, 5)]);
        assert_eq!(o.last(), Some(&(50, 5)));
    }
    #[test]
    fn periods_rotate_counts() {
        let mut t = Tracking::new(true, true, true);
        t.grow(4);
        t.record(2, false, 0);
        t.record(2, true, 1);
        t.record(0, false, 2);
        assert_eq!(t.touched, vec![2, 0]);
        t.end_period();
        assert_eq!((t.prev_count[2], t.prev_writes[2], t.prev_count[0]), (2, 1, 1));
        assert_eq!(t.count[2], 0);
        t.record(1, false, 3);
        t.end_period();
        assert_eq!((t.prev_count[2], t.prev_count[1]), (0, 1));
        assert_eq!(t.prev_touched, vec![1]);
        assert_eq!(t.last_access[2], 2);
        assert_eq!(t.last_access[3], 0);
    }
}
