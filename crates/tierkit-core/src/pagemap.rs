//! Address-to-page translation: the only lookup on the hot path.
//!
//! Pages get dense ids (0, 1, 2, ...) in the order they are first seen, so every per-page
//! array elsewhere is a flat `Vec` indexed by id. Translation goes through a two-level table:
//! a hash map from 2 MiB-aligned regions (512 pages of 4 KiB) to blocks of 512 ids, with the
//! last region used cached, so streaming and clustered accesses skip the hash entirely.

use rustc_hash::FxHashMap;

pub type PageId = u32;
pub const NO_PAGE: PageId = u32::MAX;
const REGION_BITS: u32 = 9;
const REGION_PAGES: usize = 1 << REGION_BITS;

pub struct PageMap {
    page_shift: u32,
    regions: FxHashMap<u64, u32>,
    blocks: Vec<PageId>,
    /// page number (address >> page_shift) of each id
    pages: Vec<u64>,
    last_region: u64,
    last_block: usize,
    /// Several cores: each core's last region (their accesses interleave, each with locality
    /// of its own), swapped in by [`PageMap::use_cursor`].
    cursors: Vec<(u64, usize)>,
    cursor: usize,
}

impl PageMap {
    pub fn new(page_size: u64) -> PageMap {
        assert!(page_size.is_power_of_two());
        PageMap {
            page_shift: page_size.trailing_zeros(),
            regions: FxHashMap::default(),
            blocks: Vec::new(),
            pages: Vec::new(),
            last_region: u64::MAX,
            last_block: 0,
            cursors: Vec::new(),
            cursor: 0,
        }
    }

    #[inline]
    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }

    /// Number of pages seen so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Translate for core `c` from now on: its own last region cached.
    #[inline]
    pub fn use_cursor(&mut self, c: usize) {
        if c != self.cursor {
            let n = c.max(self.cursor) + 1;
            if self.cursors.len() < n {
                self.cursors.resize(n, (u64::MAX, 0));
            }
            self.cursors[self.cursor] = (self.last_region, self.last_block);
            (self.last_region, self.last_block) = self.cursors[c];
            self.cursor = c;
        }
    }

    /// The id of the page holding `addr`, assigning the next id if the page is new.
    #[inline(always)]
    pub fn id(&mut self, addr: u64) -> PageId {
        let pn = addr >> self.page_shift;
        let region = pn >> REGION_BITS;
        if region != self.last_region {
            self.switch_region(region);
        }
        let slot = self.last_block + (pn as usize & (REGION_PAGES - 1));
        let id = self.blocks[slot];
        if id != NO_PAGE {
            return id;
        }
        self.assign(slot, pn)
    }

    #[cold]
    fn assign(&mut self, slot: usize, pn: u64) -> PageId {
        let id = self.pages.len() as PageId;
        assert!(id != NO_PAGE, "more than 2^32-1 distinct pages");
        self.blocks[slot] = id;
        self.pages.push(pn);
        id
    }

    #[inline(never)]
    fn switch_region(&mut self, region: u64) {
        let next = self.blocks.len() / REGION_PAGES;
        let b = *self.regions.entry(region).or_insert(next as u32) as usize;
        if b == next {
            self.blocks.resize(self.blocks.len() + REGION_PAGES, NO_PAGE);
        }
        self.last_region = region;
        self.last_block = b * REGION_PAGES;
    }

    /// Hint the memory system that `addr` will be translated soon (loads its slot into the
    /// cache). Does nothing for a region not seen yet.
    #[inline(always)]
    pub fn prefetch(&self, addr: u64) {
        let pn = addr >> self.page_shift;
        let region = pn >> REGION_BITS;
        let block = if region == self.last_region {
            self.last_block
        } else {
            match self.regions.get(&region) {
                Some(&b) => b as usize * REGION_PAGES,
                None => return,
            }
        };
        crate::prefetch::read(self.blocks.as_ptr().wrapping_add(block + (pn as usize & (REGION_PAGES - 1))));
    }

    /// The id of `addr`'s page if it has been seen; for prefetching ahead, so the last region
    /// first.
    #[inline(always)]
    pub fn peek(&self, addr: u64) -> Option<PageId> {
        let pn = addr >> self.page_shift;
        let region = pn >> REGION_BITS;
        let block = if region == self.last_region { self.last_block } else { *self.regions.get(&region)? as usize * REGION_PAGES };
        let id = self.blocks[block + (pn as usize & (REGION_PAGES - 1))];
        (id != NO_PAGE).then_some(id)
    }

    /// The id of `addr`'s page if it has been seen.
    pub fn get(&self, addr: u64) -> Option<PageId> {
        let pn = addr >> self.page_shift;
        let b = *self.regions.get(&(pn >> REGION_BITS))? as usize;
        let id = self.blocks[b * REGION_PAGES + (pn as usize & (REGION_PAGES - 1))];
        (id != NO_PAGE).then_some(id)
    }

    /// Virtual address of the start of page `id`.
    pub fn page_addr(&self, id: PageId) -> u64 {
        self.pages[id as usize] << self.page_shift
    }

    /// Bytes of memory this map uses.
    pub fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * 4 + self.pages.capacity() * 8 + self.regions.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn cursors_translate_alike() {
        // two cores alternating between far-apart regions: each keeps its own region cached,
        // and the ids are those of one cursor
        let mut a = PageMap::new(4096);
        let mut b = PageMap::new(4096);
        for i in 0..2000u64 {
            let addr = if i % 2 == 0 { 0x1000 * (i % 700) } else { (1 << 52) | (0x1000 * (i % 900)) };
            a.use_cursor((i % 2) as usize);
            assert_eq!(a.peek(addr).is_some(), b.get(addr).is_some());
            assert_eq!(a.id(addr), b.id(addr));
            assert_eq!(a.peek(addr), b.get(addr));
        }
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn ids_are_dense_in_first_seen_order() {
        let mut m = PageMap::new(4096);
        assert_eq!(m.id(0x1000), 0);
        assert_eq!(m.id(0x7fff_0000_0000), 1);
        assert_eq!(m.id(0x1fff), 0);
        assert_eq!(m.id(0x2000), 2);
        assert_eq!(m.id(0x7fff_0000_0fff), 1);
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(0x2abc), Some(2));
        assert_eq!(m.get(0x9000), None);
        assert_eq!(m.page_addr(1), 0x7fff_0000_0000);
    }
}
