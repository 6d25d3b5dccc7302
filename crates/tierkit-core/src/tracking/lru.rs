//! Linux's per-node active and inactive LRU lists with referenced bits (second chance), the
//! page ages that reclaim, and so demotion, go by.
//!
//! Rules (mm/vmscan.c, mm/swap.c; for anonymous pages, the kind a traced heap holds):
//! * A new anonymous page enters the head of its node's *inactive* list: since Linux 5.9
//!   (Joonsoo Kim's "workingset protection for anonymous LRU" series, which replaced
//!   `lru_cache_add_active_or_unevictable` by `lru_cache_add_inactive_or_unevictable`); before
//!   it, anonymous pages started on the active list.
//! * Accesses set the PTE's accessed ("young") bit, which the MMU sets and software only sees
//!   when a list scan looks at it ([`Lru::touch`], O(1)).
//! * Scanning the inactive list from its tail (`shrink_inactive_list` →
//!   `folio_check_references`): the page flag PG_referenced is tested and cleared, the PTE bits
//!   are tested and cleared; a page with young PTEs is activated if it was already
//!   PG_referenced (seen referenced by an earlier scan, or marked accessed), otherwise it is
//!   marked PG_referenced and kept, back at the head of the inactive list (its second chance);
//!   a page with no young PTE is reclaimed — on a tiered machine, demoted.
//! * Aging the active list from its tail (`shrink_active_list`) clears the PTE bits and moves
//!   the page to the head of the inactive list. Only file-backed executable pages that were
//!   referenced get another trip around the active list; anonymous pages are deactivated
//!   whether referenced or not (the kernel's comment: anon pages are not evicted by use-once
//!   streaming, so their referenced bit is ignored here).
//! * The active list is aged only while the inactive list is too small
//!   (`inactive_is_low`): with `gb` the size of both lists in GiB, the ratio is
//!   `int_sqrt(10 * gb)` (1 below 1 GiB), and the inactive list is low when
//!   `inactive * ratio < active`.
//! * `mark_page_accessed` (software-visible accesses, e.g. TPP's hint-fault path): an inactive
//!   page not PG_referenced becomes PG_referenced; one already PG_referenced is activated.
//! * Reclaim scans in batches of `SWAP_CLUSTER_MAX` = 32 pages.
//!
//! The lists are intrusive doubly linked lists over flat arrays indexed by page id (O(1) per
//! move); a scan costs O(pages scanned). The caller charges the scan cost per page scanned.

use crate::mechanics::TierId;
use crate::pagemap::PageId;

const NIL: u32 = u32::MAX;
/// A page on no list.
const NO_LIST: u8 = u8::MAX;
/// `SWAP_CLUSTER_MAX` (include/linux/swap.h): pages per reclaim batch.
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// Counters of the LRU model.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct LruStats {
    /// pages looked at by inactive-list scans and by active-list aging
    pub inactive_scanned: u64,
    pub active_scanned: u64,
    /// pages activated (by a scan that found them referenced twice, or marked accessed)
    pub activated: u64,
    /// pages moved from the active to the inactive list by aging
    pub deactivated: u64,
    /// pages given a second chance (referenced once, kept on the inactive list)
    pub second_chances: u64,
    /// pages found unreferenced at the inactive tail (reclaim victims)
    pub victims: u64,
}

pub struct Lru {
    next: Vec<u32>,
    prev: Vec<u32>,
    /// `tier * 2 + active`, or `NO_LIST`
    list: Vec<u8>,
    /// PTE accessed bit (set by accesses, cleared by scans)
    young: Vec<bool>,
    /// PG_referenced
    referenced: Vec<bool>,
    head: Vec<u32>,
    tail: Vec<u32>,
    len: Vec<u64>,
    page_bytes: u64,
    pub stats: LruStats,
}

#[inline]
fn list_id(tier: TierId, active: bool) -> u8 {
    tier * 2 + active as u8
}

impl Lru {
    pub fn new(tiers: usize, page_bytes: u64) -> Lru {
        Lru {
            next: Vec::new(),
            prev: Vec::new(),
            list: Vec::new(),
            young: Vec::new(),
            referenced: Vec::new(),
            head: vec![NIL; tiers * 2],
            tail: vec![NIL; tiers * 2],
            len: vec![0; tiers * 2],
            page_bytes,
            stats: LruStats::default(),
        }
    }

    /// Make room for page ids below `n`.
    pub fn grow(&mut self, n: usize) {
        if self.list.len() < n {
            let want = n.max(self.list.len() * 2).max(1024);
            self.next.resize(want, NIL);
            self.prev.resize(want, NIL);
            self.list.resize(want, NO_LIST);
            self.young.resize(want, false);
            self.referenced.resize(want, false);
        }
    }

    fn unlink(&mut self, p: PageId) {
        let i = p as usize;
        let l = self.list[i];
        if l == NO_LIST {
            return;
        }
        let (n, pv) = (self.next[i], self.prev[i]);
        if pv == NIL {
            self.head[l as usize] = n;
        } else {
            self.next[pv as usize] = n;
        }
        if n == NIL {
            self.tail[l as usize] = pv;
        } else {
            self.prev[n as usize] = pv;
        }
        self.len[l as usize] -= 1;
        self.list[i] = NO_LIST;
        self.next[i] = NIL;
        self.prev[i] = NIL;
    }

    fn push_head(&mut self, p: PageId, l: u8) {
        let i = p as usize;
        let h = self.head[l as usize];
        self.next[i] = h;
        self.prev[i] = NIL;
        if h == NIL {
            self.tail[l as usize] = p;
        } else {
            self.prev[h as usize] = p;
        }
        self.head[l as usize] = p;
        self.list[i] = l;
        self.len[l as usize] += 1;
    }

    /// A new page in `tier`: the head of its inactive list. An access made it, so its PTE is
    /// young.
    pub fn add(&mut self, page: PageId, tier: TierId) {
        self.unlink(page);
        self.young[page as usize] = true;
        self.referenced[page as usize] = false;
        self.push_head(page, list_id(tier, false));
    }

    /// A page that left the lists: unmapped, or moved by someone the lists do not see
    /// (`add` puts it back). Its bits go with it.
    pub fn remove(&mut self, page: PageId) {
        if (page as usize) < self.list.len() {
            self.unlink(page);
            self.young[page as usize] = false;
            self.referenced[page as usize] = false;
        }
    }

    /// An access (the MMU sets the accessed bit).
    #[inline(always)]
    pub fn touch(&mut self, page: PageId) {
        self.young[page as usize] = true;
    }

    pub fn is_active(&self, page: PageId) -> bool {
        let l = self.list[page as usize];
        l != NO_LIST && l & 1 == 1
    }

    pub fn is_referenced(&self, page: PageId) -> bool {
        self.referenced[page as usize]
    }

    /// The page's tier as the lists know it.
    pub fn tier(&self, page: PageId) -> Option<TierId> {
        let l = self.list[page as usize];
        (l != NO_LIST).then_some(l / 2)
    }

    /// Move a page to the head of its tier's active list.
    pub fn activate(&mut self, page: PageId) {
        let Some(t) = self.tier(page) else { return };
        if !self.is_active(page) {
            self.stats.activated += 1;
        }
        self.unlink(page);
        self.push_head(page, list_id(t, true));
    }

    /// `mark_page_accessed`: an inactive page not yet PG_referenced becomes so; one already
    /// PG_referenced is activated (and the flag cleared, as the kernel does). Returns whether
    /// the page is active afterwards.
    pub fn mark_accessed(&mut self, page: PageId) -> bool {
        let i = page as usize;
        if self.is_active(page) {
            self.referenced[i] = true;
            return true;
        }
        if !self.referenced[i] {
            self.referenced[i] = true;
            false
        } else {
            self.activate(page);
            self.referenced[i] = false;
            true
        }
    }

    /// The page migrated to `tier`: it joins the head of the same kind of list there (the
    /// kernel copies PG_active and PG_referenced to the new page).
    pub fn move_to(&mut self, page: PageId, tier: TierId) {
        let active = self.is_active(page);
        self.unlink(page);
        self.push_head(page, list_id(tier, active));
    }

    pub fn inactive_len(&self, tier: TierId) -> u64 {
        self.len[list_id(tier, false) as usize]
    }
    pub fn active_len(&self, tier: TierId) -> u64 {
        self.len[list_id(tier, true) as usize]
    }

    /// The pages of one list, head (most recently added) first.
    pub fn list_pages(&self, tier: TierId, active: bool) -> Vec<PageId> {
        let mut v = Vec::new();
        let mut p = self.head[list_id(tier, active) as usize];
        while p != NIL {
            v.push(p);
            p = self.next[p as usize];
        }
        v
    }

    /// The page at the head (`from_head`) or tail of a list, and the next one from there.
    pub fn first(&self, tier: TierId, active: bool, from_head: bool) -> Option<PageId> {
        let l = list_id(tier, active) as usize;
        let p = if from_head { self.head[l] } else { self.tail[l] };
        (p != NIL).then_some(p)
    }
    pub fn following(&self, page: PageId, from_head: bool) -> Option<PageId> {
        let p = if from_head { self.next[page as usize] } else { self.prev[page as usize] };
        (p != NIL).then_some(p)
    }

    /// `inactive_is_low`: the inactive list is too small for the active one.
    pub fn inactive_is_low(&self, tier: TierId) -> bool {
        let (inactive, active) = (self.inactive_len(tier), self.active_len(tier));
        let gb = ((inactive + active) * self.page_bytes) >> 30;
        let ratio = if gb > 0 { isqrt(10 * gb) } else { 1 };
        inactive * ratio < active
    }

    /// Age up to `nr` pages from the tail of `tier`'s active list onto its inactive list.
    /// Returns the pages scanned.
    pub fn shrink_active(&mut self, tier: TierId, nr: u64) -> u64 {
        let l = list_id(tier, true) as usize;
        let mut scanned = 0;
        while scanned < nr {
            let p = self.tail[l];
            if p == NIL {
                break;
            }
            scanned += 1;
            self.young[p as usize] = false;
            self.unlink(p);
            self.push_head(p, list_id(tier, false));
            self.stats.deactivated += 1;
        }
        self.stats.active_scanned += scanned;
        scanned
    }

    /// Scan up to `nr` pages from the tail of `tier`'s inactive list; unreferenced pages are
    /// appended to `victims` (they stay on the list until the caller moves them). Returns the
    /// pages scanned.
    pub fn shrink_inactive(&mut self, tier: TierId, nr: u64, victims: &mut Vec<PageId>) -> u64 {
        let l = list_id(tier, false) as usize;
        let n = nr.min(self.len[l]);
        let mut p = self.tail[l];
        let mut scanned = 0;
        while scanned < n && p != NIL {
            let before = self.prev[p as usize];
            scanned += 1;
            let i = p as usize;
            let was_referenced = std::mem::replace(&mut self.referenced[i], false);
            if std::mem::replace(&mut self.young[i], false) {
                self.referenced[i] = true;
                if was_referenced {
                    self.activate(p);
                } else {
                    self.unlink(p);
                    self.push_head(p, l as u8);
                    self.stats.second_chances += 1;
                }
            } else {
                victims.push(p);
                self.stats.victims += 1;
            }
            p = before;
        }
        self.stats.inactive_scanned += scanned;
        scanned
    }

    /// One reclaim step of `shrink_lruvec` at `priority` (12 = `DEF_PRIORITY` down to 1):
    /// each list is scanned `size >> priority` pages from its tail, the active list only while
    /// the inactive one is low. Unreferenced inactive pages go to `victims`. Returns the pages
    /// scanned.
    pub fn reclaim_step(&mut self, tier: TierId, priority: u32, victims: &mut Vec<PageId>) -> u64 {
        let mut scanned = 0;
        if self.inactive_is_low(tier) {
            scanned += self.shrink_active(tier, self.active_len(tier) >> priority);
        }
        scanned + self.shrink_inactive(tier, self.inactive_len(tier) >> priority, victims)
    }

    pub fn heap_bytes(&self) -> usize {
        self.list.capacity() * 11
    }
}

/// The kernel's `int_sqrt`: the integer square root, rounded down (its memory-management
/// formulas use it: the inactive ratio here, `min_free_kbytes` in `policy::os_tiering`).
pub(crate) fn isqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lru(pages: &[PageId]) -> Lru {
        let mut l = Lru::new(2, 4096);
        l.grow(16);
        for &p in pages {
            l.add(p, 0);
        }
        l
    }

    #[test]
    fn new_pages_enter_the_inactive_head_and_victims_come_from_the_tail() {
        let mut l = lru(&[0, 1, 2, 3]);
        assert_eq!(l.list_pages(0, false), vec![3, 2, 1, 0]);
        assert_eq!((l.inactive_len(0), l.active_len(0)), (4, 0));
        // their first-touch PTE bits: the first scan gives every page its second chance
        let mut v = Vec::new();
        assert_eq!(l.shrink_inactive(0, 4, &mut v), 4);
        assert!(v.is_empty());
        assert_eq!(l.stats.second_chances, 4);
        assert_eq!(l.list_pages(0, false), vec![3, 2, 1, 0], "rotated in tail order: 0 1 2 3 each to the head");
        // page 2 is accessed again: referenced twice, it is activated; the rest are victims
        l.touch(2);
        l.shrink_inactive(0, 4, &mut v);
        assert_eq!(v, vec![0, 1, 3]);
        assert!(l.is_active(2));
        assert_eq!(l.stats.activated, 1);
    }

    #[test]
    fn active_aging_deactivates_referenced_anon_pages_too_and_clears_their_bits() {
        let mut l = lru(&[0, 1]);
        l.activate(0);
        l.activate(1);
        l.touch(0);
        assert!(l.inactive_is_low(0));
        assert_eq!(l.shrink_active(0, 1), 1);
        // the tail of the active list (0, activated first) moved, referenced or not
        assert_eq!(l.list_pages(0, false), vec![0]);
        assert_eq!(l.list_pages(0, true), vec![1]);
        // its PTE bit was cleared by the aging: the next inactive scan finds it a victim
        let mut v = Vec::new();
        l.shrink_inactive(0, 8, &mut v);
        assert_eq!(v, vec![0]);
    }

    #[test]
    fn mark_accessed_needs_two_calls_to_activate() {
        let mut l = lru(&[5]);
        assert!(!l.mark_accessed(5));
        assert!(l.is_referenced(5) && !l.is_active(5));
        assert!(l.mark_accessed(5));
        assert!(l.is_active(5));
    }

    #[test]
    fn inactive_ratio_follows_the_size_of_the_lists() {
        assert_eq!((isqrt(10), isqrt(80), isqrt(99), isqrt(100)), (3, 8, 9, 10));
        // below 1 GiB the ratio is 1: low when inactive < active
        let mut l = lru(&[0, 1, 2]);
        l.activate(0);
        assert!(!l.inactive_is_low(0));
        l.activate(1);
        assert!(l.inactive_is_low(0));
        // 4 GiB of 1 GiB pages: ratio int_sqrt(40) = 6; 1 inactive * 6 < 3 active is false
        let mut big = Lru::new(2, 1 << 30);
        big.grow(8);
        for p in 0..4 {
            big.add(p, 0);
        }
        for p in 0..3 {
            big.activate(p);
        }
        assert!(!big.inactive_is_low(0));
    }

    #[test]
    fn reclaim_ages_the_active_list_when_the_inactive_one_is_low_and_moves_keep_the_kind() {
        let mut l = lru(&[0, 1, 2, 3]);
        for p in 0..4 {
            l.activate(p);
        }
        let mut v = Vec::new();
        // priority 3: 4 >> 3 = 0 pages per list: nothing
        assert_eq!(l.reclaim_step(0, 3, &mut v), 0);
        // priority 1: all active, inactive low: aging moves 4 >> 1 = 2 pages (0 and 1, the
        // tail), their bits cleared; then 2 >> 1 = 1 inactive page is scanned: 0, unreferenced
        assert_eq!(l.reclaim_step(0, 1, &mut v), 3);
        assert_eq!(v, vec![0]);
        l.move_to(0, 1);
        assert_eq!((l.tier(0), l.is_active(0)), (Some(1), false));
        l.activate(3);
        l.move_to(3, 1);
        assert_eq!((l.tier(3), l.is_active(3)), (Some(1), true));
    }
}
