//! The arena layout of a guided run (docs/guidance.md, "Guided runs"): where an
//! arena allocator would have put each allocation, so that the simulated guided run and the
//! real runtime (one jemalloc arena per guidance arena, extents `mbind`-ed to the arena's
//! node: 002 §IV-B) agree on which pages each site owns.
//!
//! The trace's addresses come from the recording allocator, which packs every site into one
//! heap and hands a freed block to whichever site asks next: a hot site can inherit a cold
//! site's page, and two sites of different arenas can share one page. [`LayoutSource`] wraps
//! the trace and rewrites it: each allocation of a site classed to range `r` (an arena, or the
//! unmatched allocations) gets an address in `r`'s own range, and every access inside a live
//! allocation is moved by the same offset, before the engine translates addresses to pages.
//! An access to memory a freed block last held (a dirty line the cache writes back after the
//! free, most often) goes with that block, to where the layout had put it ([`crate::heap`]):
//! that is where the hardware writes it. Only accesses to addresses no allocation of the trace
//! ever held (stack, globals, mapped files, memory the program maps itself) keep their address.
//!
//! ## The address space
//! Range `r` is `[LAYOUT_BASE + r * RANGE_BYTES, LAYOUT_BASE + (r + 1) * RANGE_BYTES)`: 16 TiB
//! each from 2^60, so ranges are disjoint, page-aligned for any page size up to 16 TiB, and
//! far above any user-space address of x86-64 or AArch64 (below 2^57 with 5-level paging). A
//! trace address that falls in the ranges anyway is an error naming `guided:layout`.
//!
//! ## The allocator model ([`Heap`], one per range; deterministic, no randomness)
//! What it models of jemalloc 5 (with 4 KiB pages):
//! - size classes: 8, then multiples of 16 up to 128, then four classes per doubling (160,
//!   192, 224, 256, 320, ...); classes up to 14 KiB are *small*, larger ones *large*;
//! - small regions live in slabs: a slab is the smallest run of whole pages that holds a whole
//!   number of regions of its class (the least common multiple of the page and the class); a
//!   new region takes the lowest free region of the lowest-addressed slab with room;
//! - large allocations are page-aligned extents of their class's size;
//! - extents (slabs and large blocks) come from the range's pages first fit, lowest address
//!   first, from freed extents (coalesced with free neighbours) before fresh pages; an empty
//!   slab goes back to the free extents, so its pages can serve any class *of the same arena*,
//!   unless it is the slab its bin allocates from next (jemalloc's `slabcur` stays);
//! - `realloc` stays in place when the block stays in its arena and its class is unchanged, or
//!   when a large block shrinks, or grows into free pages right after it; otherwise it moves to
//!   its new site's arena (the runtime serves the new block from the realloc site's arena).
//!
//! What it does not model: thread caches (tcache) and per-thread arenas, decay and purging
//! (freed pages stay where first touch put them, as dirty pages do), retained virtual memory,
//! alignments other than the class's own (`memalign` is served as `malloc` of its size),
//! huge-page-sized extents and jemalloc's own metadata. Only the page a byte lands on matters
//! to the simulator, so the model is kept as simple as that allows.
//!
//! ## A cache line across two allocations
//! A post-cache trace holds line addresses: one access stands for a whole line, which may hold
//! the end of one allocation and the start of another. The access is moved by the allocation
//! holding the line's first byte. When no live allocation holds it (a line starting in the
//! allocator's header before a block), the first allocation starting inside the line moves it,
//! to that allocation's first byte: its bytes are what the program read. Raw (pre-cache) traces
//! hold the accessed byte itself and are moved only by the allocation holding it.

use crate::error::{Error, Result};
use crate::heap::Freed;
use crate::trace::{Batch, EventKind, Progress, Projection, RecordSource, TraceMeta};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// Start of the first range.
pub const LAYOUT_BASE: u64 = 1 << 60;
/// Bytes of each range.
pub const RANGE_BYTES: u64 = 1 << 44;
/// The model's page (jemalloc's `LG_PAGE` = 12 on x86-64), whatever the run's page size.
pub const MODEL_PAGE_BYTES: u64 = 4096;
/// The largest small class (jemalloc's `SC_SMALL_MAXCLASS` with 4 KiB pages).
pub const SMALL_MAX_BYTES: u64 = 14336;
/// At most this many ranges (arenas and unmatched), so the ranges end below 2^61.
pub const MAX_RANGES: u32 = 1 << 16;

/// The range an address lies in, if it lies in one of the `n` ranges.
#[inline]
pub fn range_of(addr: u64, n: u32) -> Option<u32> {
    let r = addr.checked_sub(LAYOUT_BASE)? / RANGE_BYTES;
    (r < n as u64).then_some(r as u32)
}

/// The usable size jemalloc gives a request of `size` bytes (its size class).
pub fn size_class(size: u64) -> u64 {
    if size <= 8 {
        return 8;
    }
    if size <= 128 {
        return size.div_ceil(16) * 16;
    }
    // four classes per doubling: round up to a quarter of the power of two below
    let lg = 63 - (size - 1).leading_zeros() as u64;
    let delta = 1u64 << (lg - 2);
    size.div_ceil(delta).saturating_mul(delta)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Pages of a slab of small class `class_bytes`: the least common multiple of the page and
/// the class, in pages.
pub fn slab_pages(class_bytes: u64) -> u64 {
    class_bytes / gcd(class_bytes, MODEL_PAGE_BYTES)
}

#[derive(Clone, Debug)]
struct Slab {
    /// Bit i set: region i free.
    free: Vec<u64>,
    nfree: u32,
    nregs: u32,
}

#[derive(Clone, Debug, Default)]
struct Bin {
    /// Slabs by start address.
    slabs: BTreeMap<u64, Slab>,
    /// Start addresses of slabs with a free region.
    nonfull: BTreeSet<u64>,
}

/// The allocator of one range.
#[derive(Clone, Debug)]
pub struct Heap {
    base: u64,
    /// Pages handed out from the start of the range (freed ones included).
    top_pages: u64,
    /// The highest `top_pages` reached.
    peak_pages: u64,
    /// Free extents below `top_pages`: first page -> pages (coalesced).
    free: BTreeMap<u64, u64>,
    /// Small bins by class size.
    bins: BTreeMap<u64, Bin>,
}

impl Heap {
    pub fn new(range: u32) -> Heap {
        Heap { base: LAYOUT_BASE + range as u64 * RANGE_BYTES, top_pages: 0, peak_pages: 0, free: BTreeMap::new(), bins: BTreeMap::new() }
    }

    /// Pages of the range in use, free extents below the top included (its virtual footprint).
    pub fn reserved_pages(&self) -> u64 {
        self.top_pages
    }

    /// The most pages the range ever had in use.
    pub fn reserved_pages_peak(&self) -> u64 {
        self.peak_pages
    }

    /// First fit, lowest address: `n` pages, returned as an address.
    fn take_pages(&mut self, n: u64) -> Result<u64> {
        let fit = self.free.iter().find(|&(_, &len)| len >= n).map(|(&s, &len)| (s, len));
        let first = match fit {
            Some((s, len)) => {
                self.free.remove(&s);
                if len > n {
                    self.free.insert(s + n, len - n);
                }
                s
            }
            None => {
                // (a free extent never ends at the top: freeing there lowers the top)
                let s = self.top_pages;
                if (s + n).saturating_mul(MODEL_PAGE_BYTES) > RANGE_BYTES {
                    return Err(Error::config(
                        "guided:layout",
                        format!(
                            "an arena's range of {} bytes is full: the trace allocates more than the arena layout can hold; run with guided:layout=trace",
                            RANGE_BYTES
                        ),
                    ));
                }
                self.top_pages = s + n;
                self.peak_pages = self.peak_pages.max(self.top_pages);
                s
            }
        };
        Ok(self.base + first * MODEL_PAGE_BYTES)
    }

    /// Give back `n` pages at `addr`, coalescing with free neighbours (and the top).
    fn give_pages(&mut self, addr: u64, n: u64) {
        let mut s = (addr - self.base) / MODEL_PAGE_BYTES;
        let mut len = n;
        if let Some((&ps, &pl)) = self.free.range(..s).next_back() {
            if ps + pl == s {
                self.free.remove(&ps);
                s = ps;
                len += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(s + len)) {
            self.free.remove(&(s + len));
            len += nl;
        }
        if s + len == self.top_pages {
            self.top_pages = s;
        } else {
            self.free.insert(s, len);
        }
    }

    /// Whether `n` pages from page address `addr` are free (below the top) or past the top.
    fn pages_free_at(&self, addr: u64, n: u64) -> bool {
        let s = (addr - self.base) / MODEL_PAGE_BYTES;
        if s == self.top_pages {
            return (s + n).saturating_mul(MODEL_PAGE_BYTES) <= RANGE_BYTES;
        }
        match self.free.get(&s) {
            Some(&len) if len >= n => true,
            // free up to the top, the rest past it
            Some(&len) => s + len == self.top_pages,
            None => false,
        }
    }

    /// Take `n` pages at `addr`, known free by [`Heap::pages_free_at`].
    fn claim_pages_at(&mut self, addr: u64, n: u64) {
        let s = (addr - self.base) / MODEL_PAGE_BYTES;
        if let Some(len) = self.free.remove(&s) {
            if len > n {
                self.free.insert(s + n, len - n);
                return;
            }
            // the extent was shorter: it ended at the top
        }
        self.top_pages = self.top_pages.max(s + n);
        self.peak_pages = self.peak_pages.max(self.top_pages);
    }

    /// Serve a request of `size` bytes: its address and usable size.
    pub fn alloc(&mut self, size: u64) -> Result<(u64, u64)> {
        let class = size_class(size);
        if class > SMALL_MAX_BYTES {
            let pages = class.div_ceil(MODEL_PAGE_BYTES);
            return Ok((self.take_pages(pages)?, class));
        }
        let bin = self.bins.entry(class).or_default();
        let start = match bin.nonfull.iter().next() {
            Some(&s) => s,
            None => {
                let pages = slab_pages(class);
                let nregs = (pages * MODEL_PAGE_BYTES / class) as u32;
                let mut free = vec![u64::MAX; (nregs as usize).div_ceil(64)];
                if !nregs.is_multiple_of(64) {
                    *free.last_mut().unwrap() = (1u64 << (nregs % 64)) - 1;
                }
                let s = self.take_pages(pages)?;
                let bin = self.bins.get_mut(&class).unwrap();
                bin.slabs.insert(s, Slab { free, nfree: nregs, nregs });
                bin.nonfull.insert(s);
                s
            }
        };
        let bin = self.bins.get_mut(&class).unwrap();
        let slab = bin.slabs.get_mut(&start).unwrap();
        let (w, word) = slab.free.iter().enumerate().find(|(_, &x)| x != 0).map(|(w, &x)| (w, x)).expect("a nonfull slab has a free region");
        let bit = word.trailing_zeros() as usize;
        slab.free[w] &= !(1u64 << bit);
        slab.nfree -= 1;
        if slab.nfree == 0 {
            bin.nonfull.remove(&start);
        }
        Ok((start + (w * 64 + bit) as u64 * class, class))
    }

    /// Free the block at `addr` of usable size `class`.
    pub fn free(&mut self, addr: u64, class: u64) {
        if class > SMALL_MAX_BYTES {
            self.give_pages(addr, class.div_ceil(MODEL_PAGE_BYTES));
            return;
        }
        let Some(bin) = self.bins.get_mut(&class) else { return };
        let Some((&start, slab)) = bin.slabs.range_mut(..=addr).next_back() else { return };
        let i = ((addr - start) / class) as usize;
        slab.free[i / 64] |= 1u64 << (i % 64);
        slab.nfree += 1;
        let empty = slab.nfree == slab.nregs;
        if slab.nfree == 1 {
            // it was full
            bin.nonfull.insert(start);
        }
        // an empty slab's pages go back to the arena, for any class, unless it is the slab
        // the bin allocates from next (jemalloc keeps its current slab, `slabcur`)
        if empty && bin.nonfull.first() != Some(&start) {
            bin.slabs.remove(&start);
            bin.nonfull.remove(&start);
            self.give_pages(start, slab_pages(class));
        }
    }

    /// Resize the block at `addr` (usable size `class`) in place, if the model allows it:
    /// the new usable size, or `None` when the block must move.
    pub fn resize_in_place(&mut self, addr: u64, class: u64, size: u64) -> Option<u64> {
        let new = size_class(size);
        if new == class {
            return Some(new);
        }
        if class <= SMALL_MAX_BYTES || new <= SMALL_MAX_BYTES {
            return None;
        }
        let (old_pages, new_pages) = (class.div_ceil(MODEL_PAGE_BYTES), new.div_ceil(MODEL_PAGE_BYTES));
        if new_pages < old_pages {
            self.give_pages(addr + new_pages * MODEL_PAGE_BYTES, old_pages - new_pages);
            return Some(new);
        }
        let end = addr + old_pages * MODEL_PAGE_BYTES;
        if self.pages_free_at(end, new_pages - old_pages) {
            self.claim_pages_at(end, new_pages - old_pages);
            return Some(new);
        }
        None
    }
}

/// A remembered translation: traced addresses in `[start, start + len)` move by `delta`
/// (0 for a gap between allocations), to a live block or (`freed`) a freed one.
#[derive(Clone, Copy, Debug, Default)]
struct Hit {
    start: u64,
    len: u64,
    delta: u64,
    freed: bool,
}

/// Entries of the page cache: traced 4 KiB pages that lie wholly in one live block (or one
/// gap), with their move. Direct-mapped; every allocation event invalidates it all.
const PAGE_CACHE_ENTRIES: usize = 4096;

#[derive(Clone, Copy, Debug, Default)]
struct CachedPage {
    page: u64,
    delta: u64,
    generation: u64,
    freed: bool,
}

/// One live allocation: its traced bytes and where the layout put them.
#[derive(Clone, Copy, Debug)]
struct Block {
    orig_end: u64,
    new_start: u64,
    range: u32,
    /// usable size (size class)
    class: u64,
}

/// What the layout did, for the guided run's statistics (`stats.policy.layout_model`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LayoutStats {
    /// Accesses inside a live allocation, moved to the allocation's new address.
    pub accesses_moved: u64,
    /// Accesses to addresses no allocation ever held (stack, globals, mapped files), left where
    /// the trace had them.
    pub accesses_kept: u64,
    /// Accesses outside every live allocation, to memory a freed block last held (dirty lines
    /// written back after the free): moved with that block.
    pub accesses_to_freed_blocks: u64,
    /// Post-cache lines whose first byte is in no live allocation but which hold the start of
    /// one: moved by that allocation.
    pub lines_moved_by_next_allocation: u64,
    pub allocations: u64,
    pub reallocs_in_place: u64,
    pub reallocs_moved: u64,
    /// Reallocations that moved the block to another range (arena).
    pub reallocs_to_another_arena: u64,
    /// Allocations at an address the trace still had live (a free the trace did not record):
    /// the older block is taken as freed.
    pub allocations_over_live_blocks: u64,
    /// Frees of addresses the trace never allocated (allocated before recording began).
    pub frees_unknown: u64,
    /// The most pages each range had in use (virtual; arenas, then unmatched).
    pub reserved_pages_peak_by_range: Vec<u64>,
}

/// The allocator model over all ranges, with the translation of traced addresses.
pub struct ArenaLayout {
    heaps: Vec<Heap>,
    /// Live blocks by traced start address.
    live: BTreeMap<u64, Block>,
    /// Freed blocks by traced range, with their move (layout address minus traced address).
    freed: Freed<u64>,
    /// The last two translations, most recent first (a loop over two arrays alternates
    /// between them). Cleared by every allocation event.
    hits: [Hit; 2],
    /// Pages translated before, for accesses that alternate between more than two blocks.
    pages: Vec<CachedPage>,
    /// Entries of `pages` from another generation are stale.
    generation: u64,
    /// Bytes of one access of a post-cache trace (0 for a raw trace).
    line_bytes: u64,
    pub stats: LayoutStats,
}

impl ArenaLayout {
    /// A layout of `n_ranges` ranges; `line_bytes` is the trace's line size when it holds line
    /// addresses (post-cache), 0 otherwise.
    pub fn new(n_ranges: u32, line_bytes: u64) -> Result<ArenaLayout> {
        if n_ranges == 0 || n_ranges > MAX_RANGES {
            return Err(Error::config("guided:layout", format!("{n_ranges} ranges (arenas and unmatched): the arena layout holds 1 to {MAX_RANGES}")));
        }
        Ok(ArenaLayout {
            heaps: (0..n_ranges).map(Heap::new).collect(),
            live: BTreeMap::new(),
            freed: Freed::new(),
            hits: [Hit::default(); 2],
            pages: vec![CachedPage::default(); PAGE_CACHE_ENTRIES],
            generation: 1,
            line_bytes,
            stats: LayoutStats::default(),
        })
    }

    /// Forget the remembered translations that cover any of `[lo, hi)`: those an allocation
    /// event changed (the others still hold).
    fn forget(&mut self, lo: u64, hi: u64) {
        self.generation += 1;
        for h in &mut self.hits {
            if h.start < hi && lo < h.start.saturating_add(h.len) {
                *h = Hit::default();
            }
        }
    }

    fn remember(&mut self, h: Hit) {
        self.hits = [h, self.hits[0]];
    }

    /// Take out live blocks overlapping `[addr, addr + size)` (at least the byte at `addr`),
    /// and forget the translations the new block changes.
    fn drop_overlapping(&mut self, addr: u64, size: u64) {
        let end = addr.saturating_add(size.max(1));
        // the block starting last before the end, while it reaches into the new one
        while let Some((&s, b)) = self.live.range(..end).next_back() {
            if s < addr && b.orig_end <= addr {
                break;
            }
            self.stats.allocations_over_live_blocks += 1;
            let b = self.live.remove(&s).unwrap();
            self.heaps[b.range as usize].free(b.new_start, b.class);
            self.freed.insert(s, b.orig_end, b.new_start.wrapping_sub(s));
            self.forget(s, b.orig_end);
        }
        // the gap the block lands in, lines reaching into it included
        self.forget(addr.saturating_sub(self.line_bytes), end);
    }

    /// A new allocation of `size` bytes that the trace put at `addr`, for range `range`:
    /// its address in the layout.
    pub fn alloc(&mut self, addr: u64, size: u64, range: u32) -> Result<u64> {
        self.stats.allocations += 1;
        self.drop_overlapping(addr, size);
        let (new_start, class) = self.heaps[range as usize].alloc(size)?;
        self.live.insert(addr, Block { orig_end: addr.saturating_add(size), new_start, range, class });
        Ok(new_start)
    }

    /// A free of the block the trace had at `addr`: its address in the layout, if it was live.
    pub fn free(&mut self, addr: u64) -> Option<u64> {
        match self.live.remove(&addr) {
            Some(b) => {
                self.heaps[b.range as usize].free(b.new_start, b.class);
                self.freed.insert(addr, b.orig_end, b.new_start.wrapping_sub(addr));
                self.forget(addr, b.orig_end);
                Some(b.new_start)
            }
            None => {
                self.stats.frees_unknown += 1;
                None
            }
        }
    }

    /// `realloc` of the block at traced `old` to traced `addr`, `size` bytes, by a site of
    /// range `range`: the old block's address in the layout (if it was live) and the new one.
    pub fn realloc(&mut self, old: u64, addr: u64, size: u64, range: u32) -> Result<(Option<u64>, u64)> {
        let Some(b) = self.live.remove(&old) else {
            // a block from before the recording: an allocation like any other
            self.stats.frees_unknown += u64::from(old != 0);
            return Ok((None, self.alloc(addr, size, range)?));
        };
        self.stats.allocations += 1;
        // the old block's bytes, where the new block does not cover them, were last held by it
        self.freed.insert(old, b.orig_end, b.new_start.wrapping_sub(old));
        self.forget(old, b.orig_end);
        let in_place = if b.range == range { self.heaps[range as usize].resize_in_place(b.new_start, b.class, size) } else { None };
        let (new_start, class) = match in_place {
            Some(class) => {
                self.stats.reallocs_in_place += 1;
                (b.new_start, class)
            }
            None => {
                // the new block is served before the old one is freed, as realloc copies
                self.stats.reallocs_moved += 1;
                self.stats.reallocs_to_another_arena += u64::from(b.range != range);
                let n = self.heaps[range as usize].alloc(size)?;
                self.heaps[b.range as usize].free(b.new_start, b.class);
                n
            }
        };
        self.drop_overlapping(addr, size);
        self.live.insert(addr, Block { orig_end: addr.saturating_add(size), new_start, range, class });
        Ok((Some(b.new_start), new_start))
    }

    /// The layout's address for a traced access at `addr`.
    #[inline(always)]
    pub fn translate(&mut self, addr: u64) -> Result<u64> {
        let mut one = [addr];
        self.translate_run(&mut one)?;
        Ok(one[0])
    }

    /// Translate a run of accesses with no allocation event among them, in place.
    #[inline]
    pub fn translate_run(&mut self, addrs: &mut [u64]) -> Result<()> {
        let mut h = self.hits[0];
        // accesses served by `h` are counted when it changes, not one by one
        let mut run = 0usize;
        for (i, slot) in addrs.iter_mut().enumerate() {
            let a = *slot;
            if a.wrapping_sub(h.start) >= h.len {
                self.count_run(h, i - run);
                let o = self.hits[1];
                if a.wrapping_sub(o.start) < o.len {
                    self.hits = [o, h];
                    h = o;
                    run = i;
                } else if let Some((d, freed)) = self.cached_page(a) {
                    *slot = a.wrapping_add(d);
                    self.count_one(d, freed);
                    run = i + 1;
                    continue;
                } else {
                    // counts its own access
                    *slot = self.translate_slow(a)?;
                    h = self.hits[0];
                    run = i + 1;
                    continue;
                }
            }
            *slot = a.wrapping_add(h.delta);
        }
        self.count_run(h, addrs.len() - run);
        Ok(())
    }

    #[inline(always)]
    fn cached_page(&self, a: u64) -> Option<(u64, bool)> {
        let pg = a >> 12;
        let e = &self.pages[pg as usize & (PAGE_CACHE_ENTRIES - 1)];
        (e.page == pg && e.generation == self.generation).then_some((e.delta, e.freed))
    }

    /// Remember the move of the 4 KiB page holding `a` if `h` covers all of it, and `h` itself.
    fn remember_and_cache(&mut self, a: u64, h: Hit) {
        self.remember(h);
        let pg = a >> 12;
        if h.start <= pg << 12 && (pg + 1) << 12 <= h.start.saturating_add(h.len) {
            self.pages[pg as usize & (PAGE_CACHE_ENTRIES - 1)] = CachedPage { page: pg, delta: h.delta, generation: self.generation, freed: h.freed };
        }
    }

    #[inline(always)]
    fn count_run(&mut self, h: Hit, n: usize) {
        if h.freed {
            self.stats.accesses_to_freed_blocks += n as u64;
        } else if h.delta != 0 {
            self.stats.accesses_moved += n as u64;
        } else {
            self.stats.accesses_kept += n as u64;
        }
    }

    #[inline(always)]
    fn count_one(&mut self, delta: u64, freed: bool) {
        self.count_run(Hit { delta, freed, ..Hit::default() }, 1);
    }

    #[inline(never)]
    fn translate_slow(&mut self, addr: u64) -> Result<u64> {
        let prev = self.live.range(..=addr).next_back().map(|(&s, &b)| (s, b));
        if let Some((s, b)) = prev {
            if addr < b.orig_end {
                self.stats.accesses_moved += 1;
                let delta = b.new_start.wrapping_sub(s);
                self.remember_and_cache(addr, Hit { start: s, len: b.orig_end - s, delta, freed: false });
                return Ok(addr.wrapping_add(delta));
            }
        }
        if addr >= LAYOUT_BASE {
            return Err(Error::config(
                "guided:layout",
                format!("the trace's address {addr:#x} lies where the arena layout puts the arenas (from {LAYOUT_BASE:#x}); run with guided:layout=trace"),
            ));
        }
        let next = self.live.range(addr.saturating_add(1)..).next().map(|(&s, &b)| (s, b));
        if let Some((s, b)) = next {
            if self.line_bytes > 0 && s < addr.saturating_add(self.line_bytes) && b.orig_end > s {
                // a line that starts before the block and holds its first bytes
                self.stats.accesses_moved += 1;
                self.stats.lines_moved_by_next_allocation += 1;
                return Ok(b.new_start);
            }
        }
        // a gap between live allocations (short of lines reaching the next one)
        let lo = prev.map(|(_, b)| b.orig_end).unwrap_or(0);
        let hi = next.map(|(s, _)| s.saturating_sub(self.line_bytes.saturating_sub(1))).unwrap_or(LAYOUT_BASE).min(LAYOUT_BASE);
        if let Some((fs, fe, delta)) = self.freed.get(addr) {
            // memory a freed block last held: with that block (short of lines reaching the
            // next live one)
            self.stats.accesses_to_freed_blocks += 1;
            let (lo, hi) = (lo.max(fs), hi.min(fe));
            if lo <= addr && addr < hi {
                self.remember_and_cache(addr, Hit { start: lo, len: hi - lo, delta, freed: true });
            }
            return Ok(addr.wrapping_add(delta));
        }
        if self.line_bytes > 0 {
            if let Some((fs, _, delta)) = self.freed.starting_in(addr, addr.saturating_add(self.line_bytes)) {
                // a line that starts before a freed block and holds its first bytes
                self.stats.accesses_to_freed_blocks += 1;
                return Ok(fs.wrapping_add(delta));
            }
        }
        // memory no allocation ever held: kept (short of lines reaching a freed block)
        let (flo, fhi) = self.freed.gap_around(addr);
        let (lo, hi) = (lo.max(flo), hi.min(fhi.saturating_sub(self.line_bytes.saturating_sub(1))));
        self.stats.accesses_kept += 1;
        if lo <= addr && addr < hi {
            self.remember_and_cache(addr, Hit { start: lo, len: hi - lo, delta: 0, freed: false });
        }
        Ok(addr)
    }

    /// The statistics so far, with each range's reserved pages.
    pub fn finish_stats(&mut self) -> LayoutStats {
        let mut s = self.stats.clone();
        s.reserved_pages_peak_by_range = self.heaps.iter().map(|h| h.reserved_pages_peak()).collect();
        s
    }
}

/// The class of a site record (`Some((site, range))`), or `None` for other records. Given by
/// the guided policy, which owns the classification rule.
pub type SiteRange = Arc<dyn Fn(&EventKind) -> Result<Option<(u32, u32)>> + Send + Sync>;

/// A trace with its allocations laid out by [`ArenaLayout`] (see the module's documentation).
/// Addresses of accesses and of allocation, free and realloc records are rewritten, and the
/// batch's page dictionary is rebuilt for the new addresses.
pub struct LayoutSource {
    inner: Box<dyn RecordSource>,
    layout: ArenaLayout,
    site_range: SiteRange,
    /// Range of each site id (sites without a site record are unmatched).
    ranges: Vec<u32>,
    unmatched: u32,
    out: Arc<Mutex<Option<LayoutStats>>>,
    /// The run's page shift, for the page dictionary the source rebuilds (0: none).
    dict_shift: u32,
    dict_map: FxHashMap<u64, u32>,
    /// The trace's own page dictionary of the batch, and per entry of it a new page `q` and
    /// the new indices of `q` and `q + 1` (the accesses of one traced page land on one or two
    /// neighbouring new pages).
    orig_idx: Vec<u32>,
    hint: Vec<(u64, u32, u32)>,
}

impl LayoutSource {
    /// Lay out `inner` over `n_ranges` ranges, the last one the unmatched allocations'. The
    /// statistics go to `out` when the trace ends.
    pub fn new(inner: Box<dyn RecordSource>, n_ranges: u32, site_range: SiteRange, out: Arc<Mutex<Option<LayoutStats>>>) -> Result<LayoutSource> {
        let meta = inner.meta();
        let line = if meta.post_cache { meta.line_size.max(1) } else { 0 };
        let dict_shift = if meta.page_size.is_power_of_two() { meta.page_size.trailing_zeros() } else { 0 };
        Ok(LayoutSource {
            layout: ArenaLayout::new(n_ranges, line)?,
            inner,
            site_range,
            ranges: Vec::new(),
            unmatched: n_ranges - 1,
            out,
            dict_shift,
            dict_map: FxHashMap::default(),
            orig_idx: Vec::new(),
            hint: Vec::new(),
        })
    }

    fn range(&self, site: u32) -> u32 {
        self.ranges.get(site as usize).copied().unwrap_or(self.unmatched)
    }

    fn event(&mut self, kind: &mut EventKind) -> Result<()> {
        match kind {
            EventKind::Alloc { addr, size, site, .. } => {
                let r = self.range(*site);
                *addr = self.layout.alloc(*addr, *size, r)?;
            }
            EventKind::Free { addr } => {
                if let Some(a) = self.layout.free(*addr) {
                    *addr = a;
                }
            }
            EventKind::Realloc { old_addr, addr, size, site } => {
                let r = self.range(*site);
                let (old, new) = self.layout.realloc(*old_addr, *addr, *size, r)?;
                if let Some(o) = old {
                    *old_addr = o;
                }
                *addr = new;
            }
            other => {
                if let Some((site, r)) = (self.site_range)(other)? {
                    let s = site as usize;
                    if self.ranges.len() <= s {
                        self.ranges.resize(s + 1, self.unmatched);
                    }
                    self.ranges[s] = r.min(self.unmatched);
                }
            }
        }
        Ok(())
    }
}

impl LayoutSource {
    /// The page dictionary of the rewritten addresses (distinct pages in order of first
    /// appearance), so that the engine translates each page of a batch once, as it does for
    /// a native trace; built here, on the reading thread.
    fn rebuild_dictionary(&mut self, batch: &mut Batch, orig_pages: usize) {
        batch.dict_pages.clear();
        batch.dict_idx.clear();
        batch.dict_shift = self.dict_shift;
        if self.dict_shift == 0 {
            return;
        }
        self.dict_map.clear();
        let shift = self.dict_shift;
        let pages = &mut batch.dict_pages;
        let map = &mut self.dict_map;
        let mut lookup = |pg: u64| {
            *map.entry(pg).or_insert_with(|| {
                pages.push(pg);
                (pages.len() - 1) as u32
            })
        };
        batch.dict_idx.reserve(batch.addr.len());
        if orig_pages > 0 {
            self.hint.clear();
            self.hint.resize(orig_pages, (u64::MAX, 0, u32::MAX));
            for (&a, &j) in batch.addr.iter().zip(&self.orig_idx) {
                let pg = a >> shift;
                let h = &mut self.hint[j as usize];
                let k = if pg == h.0 {
                    h.1
                } else if pg == h.0.wrapping_add(1) {
                    if h.2 == u32::MAX {
                        h.2 = lookup(pg);
                    }
                    h.2
                } else {
                    *h = (pg, lookup(pg), u32::MAX);
                    h.1
                };
                batch.dict_idx.push(k);
            }
        } else {
            let (mut last_pg, mut last_j) = (u64::MAX, 0u32);
            for &a in &batch.addr {
                let pg = a >> shift;
                if pg != last_pg {
                    (last_pg, last_j) = (pg, lookup(pg));
                }
                batch.dict_idx.push(last_j);
            }
        }
    }
}

impl RecordSource for LayoutSource {
    fn meta(&self) -> &TraceMeta {
        self.inner.meta()
    }

    fn set_projection(&mut self, p: Projection) {
        // the layout reads every address
        self.inner.set_projection(Projection { addr: true, ..p });
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        if !self.inner.next_batch(batch)? {
            *self.out.lock().unwrap() = Some(self.layout.finish_stats());
            return Ok(false);
        }
        let n = batch.len();
        if batch.addr.len() != n {
            return Err(Error::Invariant(format!("{}: a batch without addresses reached the arena layout", self.inner.name())));
        }
        // the trace's dictionary, a hint for the new one
        std::mem::swap(&mut self.orig_idx, &mut batch.dict_idx);
        let orig_pages = if batch.dict_shift > 0 && self.orig_idx.len() == n { batch.dict_pages.len() } else { 0 };
        let mut events = std::mem::take(&mut batch.events);
        // the accesses between two events at once
        let mut i = 0;
        for e in events.iter_mut() {
            let at = (e.at as usize).min(n);
            self.layout.translate_run(&mut batch.addr[i..at])?;
            i = at;
            self.event(&mut e.kind)?;
        }
        self.layout.translate_run(&mut batch.addr[i..])?;
        batch.events = events;
        self.rebuild_dictionary(batch, orig_pages);
        Ok(true)
    }

    fn progress(&self) -> Progress {
        self.inner.progress()
    }

    fn digest(&self) -> Option<String> {
        self.inner.digest()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_jemallocs() {
        // jemalloc 5 with 4 KiB pages: 8, multiples of 16 to 128, then four per doubling
        let got: Vec<u64> = [0, 1, 8, 9, 17, 128, 129, 161, 257, 1025, 4097, 14336, 14337, 16385, 20481].iter().map(|&s| size_class(s)).collect();
        assert_eq!(got, [8, 8, 8, 16, 32, 128, 160, 192, 320, 1280, 5120, 14336, 16384, 20480, 24576]);
        assert_eq!(slab_pages(48), 3, "lcm(4096, 48) = 12288");
        assert_eq!(slab_pages(14336), 7);
        assert_eq!(slab_pages(64), 1);
    }

    #[test]
    fn small_regions_fill_the_lowest_slab_and_reuse_freed_regions() {
        let mut h = Heap::new(0);
        let (a, c) = h.alloc(40).unwrap();
        let (b, _) = h.alloc(48).unwrap();
        assert_eq!((a, c, b), (LAYOUT_BASE, 48, LAYOUT_BASE + 48));
        h.free(a, 48);
        assert_eq!(h.alloc(33).unwrap().0, a, "the lowest free region of the slab");
        // another class: its own slab after the first one's 3 pages
        assert_eq!(h.alloc(100).unwrap().0, LAYOUT_BASE + 3 * MODEL_PAGE_BYTES);
    }

    #[test]
    fn large_blocks_are_page_aligned_first_fit_and_coalesce() {
        let mut h = Heap::new(2);
        let base = LAYOUT_BASE + 2 * RANGE_BYTES;
        let (a, ca) = h.alloc(5 * MODEL_PAGE_BYTES).unwrap(); // class 20 KiB: 5 pages
        let (b, cb) = h.alloc(16385).unwrap(); // class 20 KiB
        let (c, _) = h.alloc(64 << 10).unwrap(); // 16 pages
        assert_eq!((a, b, c), (base, base + 5 * MODEL_PAGE_BYTES, base + 10 * MODEL_PAGE_BYTES));
        assert_eq!(range_of(b, 3), Some(2));
        h.free(a, ca);
        h.free(b, cb);
        // the two freed neighbours coalesce into 10 pages: a 40 KiB block fits at the bottom
        assert_eq!(h.alloc(40 << 10).unwrap().0, base);
        assert_eq!(h.reserved_pages(), 26);
        // freeing the top block lowers the top
        h.free(c, 64 << 10);
        assert_eq!(h.reserved_pages(), 10);
        assert_eq!(h.reserved_pages_peak(), 26);
    }

    #[test]
    fn an_empty_slab_returns_its_pages_to_its_arena_unless_it_is_the_current_one() {
        let mut h = Heap::new(0);
        let (a, c) = h.alloc(4096).unwrap(); // one region per one-page slab
        let (b, _) = h.alloc(4096).unwrap();
        h.free(a, c);
        assert_eq!(h.reserved_pages(), 2, "the slab the bin allocates from next stays");
        h.free(b, c);
        assert_eq!(h.reserved_pages(), 1, "another empty slab goes back");
        let (l, _) = h.alloc(20 << 10).unwrap();
        assert_eq!(l, b, "a large block reuses its page");
        assert_eq!(h.alloc(4000).unwrap().0, a, "the kept slab serves the next region");
    }

    #[test]
    fn large_blocks_grow_and_shrink_in_place() {
        let mut h = Heap::new(0);
        let (a, c) = h.alloc(16 << 10).unwrap();
        assert_eq!(h.resize_in_place(a, c, 32 << 10), Some(32 << 10), "the top is free");
        let (b, _) = h.alloc(16 << 10).unwrap();
        assert_eq!(b, a + (32 << 10));
        assert_eq!(h.resize_in_place(a, 32 << 10, 64 << 10), None, "b is in the way");
        assert_eq!(h.resize_in_place(a, 32 << 10, 16 << 10), Some(16 << 10));
        assert_eq!(h.alloc(16 << 10).unwrap().0, a + (16 << 10), "the shrunk tail is free");
        assert_eq!(h.resize_in_place(a, 16 << 10, 100), None, "large to small moves");
    }

    #[test]
    fn freed_addresses_are_reused_within_an_arena_only() {
        // the traced allocator handed site B the block site A freed; the layout
        // gives B a block of B's arena instead
        let mut l = ArenaLayout::new(3, 64).unwrap();
        let a = l.alloc(0x10000, 8192, 1).unwrap();
        assert_eq!(l.translate(0x10000 + 100).unwrap(), a + 100);
        assert_eq!(l.free(0x10000), Some(a));
        assert_eq!(l.translate(0x10000 + 100).unwrap(), a + 100, "freed: with the block that held it");
        let b = l.alloc(0x10000, 8192, 0).unwrap();
        assert_eq!(range_of(b, 3), Some(0));
        assert_eq!(l.translate(0x10000 + 100).unwrap(), b + 100);
        let a2 = l.alloc(0x40000, 8192, 1).unwrap();
        assert_eq!(a2, a, "arena 1 reuses its own freed block");
        assert_eq!(l.stats.allocations, 3);
    }

    #[test]
    fn a_line_goes_with_the_allocation_holding_its_first_byte() {
        let mut l = ArenaLayout::new(2, 64).unwrap();
        let a = l.alloc(0x1010, 0x20, 0).unwrap(); // [0x1010, 0x1030)
        let b = l.alloc(0x1030, 0x100, 1).unwrap(); // [0x1030, 0x1130)
                                                    // line 0x1000: first byte in no block, holds a's start: by a, at its first byte
        assert_eq!(l.translate(0x1000).unwrap(), a);
        assert_eq!(l.stats.lines_moved_by_next_allocation, 1);
        // line 0x1020 holds the end of a and the start of b: by a (its first byte)
        assert_eq!(l.translate(0x1020).unwrap(), a + 0x10);
        assert_eq!(l.translate(0x1040).unwrap(), b + 0x10);
        // a raw trace is moved only by the block holding the byte
        let mut r = ArenaLayout::new(2, 0).unwrap();
        r.alloc(0x1010, 0x20, 0).unwrap();
        assert_eq!(r.translate(0x1000).unwrap(), 0x1000);
    }

    #[test]
    fn realloc_moves_between_arenas_and_stays_in_place_within_one() {
        let mut l = ArenaLayout::new(3, 64).unwrap();
        let a = l.alloc(0x10000, 100, 0).unwrap();
        let (old, b) = l.realloc(0x10000, 0x10000, 110, 0).unwrap();
        assert_eq!((old, b), (Some(a), a), "same class, same arena: in place");
        let (old, c) = l.realloc(0x10000, 0x20000, 110, 1).unwrap();
        assert_eq!(old, Some(a));
        assert_eq!(range_of(c, 3), Some(1));
        assert_eq!(l.translate(0x20000 + 5).unwrap(), c + 5);
        assert_eq!(l.translate(0x10000 + 5).unwrap(), a + 5, "the old block's memory, where it was");
        assert_eq!((l.stats.reallocs_in_place, l.stats.reallocs_to_another_arena), (1, 1));
    }

    #[test]
    fn a_writeback_after_the_free_goes_where_the_block_was_and_never_held_memory_stays() {
        // a dirty line of a freed block is written back after the free: to the block's memory
        // in the layout, not to a page of its own at the traced address (docs/guidance.md)
        let mut l = ArenaLayout::new(2, 64).unwrap();
        let a = l.alloc(0x10000, 0x2000, 0).unwrap();
        l.free(0x10000);
        // the freed block's pages: no page of its own
        assert_eq!(l.translate(0x10000 + 0x1040).unwrap(), a + 0x1040);
        assert_eq!(l.translate(0x10000 + 0x1080).unwrap(), a + 0x1080, "remembered");
        assert_eq!(l.stats.accesses_to_freed_blocks, 2);
        // the stack or a global: no allocation ever held it
        assert_eq!(l.translate(0x7000).unwrap(), 0x7000);
        assert_eq!(l.translate(0x13000).unwrap(), 0x13000, "past the freed block");
        assert_eq!(l.stats.accesses_kept, 2);
        // the traced allocator gives part of the range to a block of arena 1: that part is its
        // block's, the rest still the freed one's
        let b = l.alloc(0x11000, 0x100, 1).unwrap();
        assert_eq!(l.translate(0x11010).unwrap(), b + 0x10);
        assert_eq!(l.translate(0x10040).unwrap(), a + 0x40);
        l.free(0x11000);
        assert_eq!(l.translate(0x11010).unwrap(), b + 0x10, "the newest freed block holds it");
        assert_eq!(l.translate(0x11200).unwrap(), a + 0x1200);
        assert_eq!(l.stats.accesses_moved, 1);
        assert_eq!(l.stats.accesses_to_freed_blocks, 5);
        // a line that starts in the allocator's header before a freed block holds the block's
        // first bytes: with the block, as for a live one
        let c = l.alloc(0x20010, 0x30, 0).unwrap();
        l.free(0x20010);
        assert_eq!(l.translate(0x20000).unwrap(), c);
        assert_eq!(l.translate(0x1ffc0).unwrap(), 0x1ffc0, "the line before it holds none of it");
        assert_eq!((l.stats.accesses_to_freed_blocks, l.stats.accesses_kept), (6, 3));
    }

    #[test]
    fn gaps_are_remembered_and_addresses_in_the_ranges_refused() {
        let mut l = ArenaLayout::new(1, 64).unwrap();
        l.alloc(0x100000, 4096, 0).unwrap();
        assert_eq!(l.translate(0x1000).unwrap(), 0x1000);
        assert_eq!((l.hits[0].start, l.hits[0].delta), (0, 0), "the gap below the block is remembered");
        assert_eq!(l.translate(0x2000).unwrap(), 0x2000);
        assert_eq!(l.stats.accesses_kept, 2);
        // the gap stops short of lines that reach the next block
        assert_eq!(l.hits[0].start + l.hits[0].len, 0x100000 - 63);
        let e = l.translate(LAYOUT_BASE + 5).unwrap_err().to_string();
        assert!(e.contains("guided:layout") && e.contains("layout=trace"), "{e}");
    }

    /// One batch, with the trace's page dictionary when `dict`.
    struct OneBatch(Option<Batch>, TraceMeta);

    impl RecordSource for OneBatch {
        fn meta(&self) -> &TraceMeta {
            &self.1
        }
        fn next_batch(&mut self, b: &mut Batch) -> Result<bool> {
            match self.0.take() {
                Some(x) => {
                    *b = x;
                    Ok(true)
                }
                None => Ok(false),
            }
        }
        fn name(&self) -> &str {
            "one"
        }
    }

    #[test]
    fn the_rebuilt_page_dictionary_matches_the_new_addresses() {
        // the engine translates each dictionary page once: it must hold each new page once,
        // in order of first appearance, with or without the trace's own dictionary as a hint
        let addrs: Vec<u64> = vec![0x10000, 0x10fc0, 0x11000, 0x9000, 0x10040, 0x11fc0, 0x9040, 0x12000];
        let mut b = Batch::with_capacity(16);
        b.push_event(0, 0, 0, EventKind::Alloc { addr: 0x10010, size: 0x2000, site: 0, func: crate::trace::AllocFn::Malloc });
        for &a in &addrs {
            b.push(&crate::trace::Access { addr: a, size: 64, ..Default::default() });
        }
        for with_dict in [false, true] {
            let mut batch = b.clone();
            if with_dict {
                let mut pages: Vec<u64> = Vec::new();
                for &a in &addrs {
                    let pg = a >> 12;
                    let j = pages.iter().position(|&p| p == pg).unwrap_or_else(|| {
                        pages.push(pg);
                        pages.len() - 1
                    });
                    batch.dict_idx.push(j as u32);
                }
                (batch.dict_pages, batch.dict_shift) = (pages, 12);
            }
            let site: SiteRange = Arc::new(|_: &EventKind| Ok(None));
            let out = Arc::new(Mutex::new(None));
            let mut src = LayoutSource::new(Box::new(OneBatch(Some(batch), TraceMeta::default())), 2, site, out.clone()).unwrap();
            let mut got = Batch::default();
            assert!(src.next_batch(&mut got).unwrap());
            assert_eq!(got.dict_shift, 12);
            let mut seen = Vec::new();
            for (i, &a) in got.addr.iter().enumerate() {
                let pg = a >> 12;
                assert_eq!(got.dict_pages[got.dict_idx[i] as usize], pg, "access {i}");
                if !seen.contains(&pg) {
                    seen.push(pg);
                }
            }
            assert_eq!(got.dict_pages, seen, "distinct pages in order of first appearance");
            // the block (unmatched: range 1) moved, its first line by the next-allocation rule
            assert_eq!(range_of(got.addr[0], 2), Some(1));
            assert_eq!(got.addr[3], 0x9000);
            assert!(!src.next_batch(&mut got).unwrap());
            assert_eq!(out.lock().unwrap().as_ref().unwrap().accesses_kept, 2);
        }
    }

    #[test]
    fn accesses_alternating_over_many_blocks_translate_as_one_by_one() {
        // the page cache serves pages lying wholly in one block; an event invalidates it
        let mut l = ArenaLayout::new(3, 64).unwrap();
        let starts: Vec<u64> = (0..4u64).map(|k| 0x100000 + k * 0x10000).collect();
        let new: Vec<u64> = starts.iter().enumerate().map(|(k, &s)| l.alloc(s, 3 * 4096, (k % 2) as u32).unwrap()).collect();
        for round in 0..3u64 {
            for (k, &s) in starts.iter().enumerate() {
                let off = 4096 + round * 64;
                assert_eq!(l.translate(s + off).unwrap(), new[k] + off);
            }
        }
        l.free(starts[0]);
        let moved = l.alloc(starts[0], 3 * 4096, 2).unwrap();
        assert_eq!(range_of(moved, 3), Some(2));
        assert_eq!(l.translate(starts[0] + 4096).unwrap(), moved + 4096, "not the cached page of the freed block");
        assert_eq!(l.stats.accesses_moved, 13);
    }

    #[test]
    fn a_missed_free_does_not_leave_two_blocks_on_one_address() {
        let mut l = ArenaLayout::new(2, 0).unwrap();
        l.alloc(0x1000, 64, 0).unwrap();
        let b = l.alloc(0x1000, 64, 1).unwrap();
        assert_eq!(l.stats.allocations_over_live_blocks, 1);
        assert_eq!(l.translate(0x1008).unwrap(), b + 8);
    }
}
