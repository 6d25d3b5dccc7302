//! DAMON-style region-based access sampling: what Linux's Data Access MONitor lets a policy
//! observe, and what observing costs.
//!
//! The rules follow the kernel's documentation (Documentation/mm/damon/design.rst, "Access
//! Frequency Monitoring", "Region Based Sampling", "Adaptive Regions Adjustment", "Age
//! Tracking"; Documentation/admin-guide/mm/damon/usage.rst for the defaults) and the
//! behaviour of `mm/damon/core.c` (kdamond's main loop, region merging, splitting and the
//! reset of the aggregated counts) and `mm/damon/vaddr.c` (initial regions, sampling by the
//! page-table accessed bit). Nothing here is the kernel's code; the rules are restated.
//!
//! Model:
//! * The monitored space is the known pages in virtual-address order (`order`); a region is a
//!   contiguous range of that order (gaps between mappings disappear, as DAMON's vaddr
//!   operations drop the two big unmapped gaps of an address space). New pages join the
//!   region whose address range holds them (the first or last region grows for pages below
//!   or above every region), as DAMON's periodic operations update adjusts regions to the
//!   changed mappings; tierkit does this at most once per aggregation interval.
//! * Every page has an accessed bit, set by any access (O(1)); only DAMON clears it.
//! * Every sampling interval each region checks whether the page it sampled was accessed
//!   since it was picked (`nr_accesses += 1` if so), then picks a new random page in the
//!   region and clears that page's bit. One check costs `check_ns` (charged to the program).
//! * Every aggregation interval (`aggr_samples` sampling intervals), adjacent regions whose
//!   `nr_accesses` differ by at most a tenth of the largest `nr_accesses` merge, unless the
//!   merged region would exceed `total / min_nr_regions` pages; the merge is repeated with a
//!   doubling threshold while there are more than `max_nr_regions` regions. A merged region
//!   takes the size-weighted mean of both counts and ages. A region's age grows by one per
//!   aggregation and is reset when its count moved by more than the threshold. The caller
//!   (the schemes) reads the aggregated counts, then `end_aggregation` copies them to
//!   `last_nr_accesses`, zeroes them, and splits every region in two (three when the number
//!   of regions did not change since the last split and is below a third of the maximum) at
//!   random points (a tenth to nine tenths of the region), unless more than half of
//!   `max_nr_regions` exist.

use serde::Serialize;

use crate::mechanics::{Charge, Memory};
use crate::pagemap::PageId;
use crate::rng::SplitMix64;

/// DAMON's monitoring attributes, in the units the model uses.
#[derive(Clone, Copy, Debug)]
pub struct DamonAttrs {
    /// Sampling intervals per aggregation interval (`aggr_interval / sample_interval`): the
    /// largest `nr_accesses` a region can reach.
    pub aggr_samples: u32,
    /// Fewest regions the merging keeps (through its size limit), ≥ 1.
    pub min_nr_regions: u32,
    /// Most regions (merging and splitting keep the count at or below it), ≥ 3.
    pub max_nr_regions: u32,
    /// Cost of checking one sampled page's accessed bit and clearing the next one's, ns.
    pub check_ns: f64,
    /// Seed of the generator that picks sampled pages and split points.
    pub seed: u64,
}

/// One monitoring region: a contiguous range of the page order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First index into the page order.
    pub start: u32,
    /// One past the last index.
    pub end: u32,
    /// The page whose accessed bit the region reads at the next check.
    pub sampled: PageId,
    /// Checks of this aggregation interval that found the sampled page accessed.
    pub nr_accesses: u32,
    /// `nr_accesses` of the previous aggregation interval.
    pub last_nr_accesses: u32,
    /// Aggregation intervals the access frequency has stayed about the same.
    pub age: u32,
}

impl Region {
    pub fn pages(&self) -> u32 {
        self.end - self.start
    }
}

/// What the monitor did (`stats.policy.damon`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DamonStats {
    /// Sampling intervals in which regions were checked.
    pub samples: u64,
    pub aggregations: u64,
    /// Sampled-page checks, and those that found the page accessed.
    pub checks: u64,
    pub checks_accessed: u64,
    /// Time charged for the checks, ns.
    pub check_ns: f64,
    pub merges: u64,
    pub splits: u64,
    /// Times the page order was rebuilt for new pages.
    pub rebuilds: u64,
    /// Fewest and most regions seen after an aggregation.
    pub min_regions_seen: u64,
    pub max_regions_seen: u64,
}

pub struct Damon {
    attrs: DamonAttrs,
    /// Accessed bit per page id (1 = accessed since DAMON last cleared it).
    accessed: Vec<u8>,
    /// With a TLB that keeps translations ([`Damon::keep_translations`]): per page id, 1 while
    /// its translation is cached. The MMU sets the accessed bit only when it walks the page
    /// table, i.e. on an access whose translation is not cached; clearing the bit (DAMON's,
    /// without a flush) leaves the translation cached.
    tlb: Option<Vec<u8>>,
    /// Known page ids in address order.
    order: Vec<PageId>,
    /// The same pages with their addresses, (address, page) ascending.
    keyed: Vec<(u64, PageId)>,
    regions: Vec<Region>,
    scratch: Vec<Region>,
    rng: SplitMix64,
    /// Sampling intervals checked so far, and the count at which the next aggregation ends.
    passed_samples: u64,
    next_aggr: u64,
    /// Number of regions at the last split.
    last_nr_regions: usize,
    /// Largest `nr_accesses` after the last check.
    max_nr_accesses: u32,
    pub stats: DamonStats,
}

impl Damon {
    pub fn new(attrs: DamonAttrs) -> Damon {
        assert!(attrs.aggr_samples >= 1 && attrs.min_nr_regions >= 1 && attrs.max_nr_regions >= 3);
        Damon {
            attrs,
            accessed: Vec::new(),
            tlb: None,
            order: Vec::new(),
            keyed: Vec::new(),
            regions: Vec::new(),
            scratch: Vec::new(),
            rng: SplitMix64::new(attrs.seed),
            passed_samples: 0,
            next_aggr: attrs.aggr_samples as u64,
            last_nr_regions: 0,
            max_nr_accesses: 0,
            stats: DamonStats { min_regions_seen: u64::MAX, ..Default::default() },
        }
    }

    pub fn attrs(&self) -> &DamonAttrs {
        &self.attrs
    }

    /// Make room for page ids below `n` (amortized; call it where pages first appear).
    pub fn grow(&mut self, n: usize) {
        if n > self.accessed.len() {
            let want = n.max(self.accessed.len() * 2).max(1024);
            self.accessed.resize(want, 0);
            if let Some(t) = &mut self.tlb {
                t.resize(want, 0);
            }
        }
    }

    /// Model a TLB that keeps every translation until it is flushed ([`Damon::flush_tlb`]):
    /// QEMU's software TLB under TCG (docs/validation.md). Without it (the default) every
    /// access sets the accessed bit, as on hardware whose TLB is small beside the working
    /// set.
    pub fn keep_translations(&mut self) {
        self.tlb = Some(vec![0; self.accessed.len()]);
    }

    /// A full TLB flush: the next access to any page walks the page table.
    pub fn flush_tlb(&mut self) {
        if let Some(t) = &mut self.tlb {
            t.fill(0);
        }
    }

    /// An access to `page` sets its accessed bit (the MMU's job: O(1), no cost to DAMON);
    /// with a TLB that keeps translations, only when the translation is not cached.
    /// The page must be below the size given to [`Damon::grow`].
    #[inline(always)]
    pub fn access(&mut self, page: PageId) {
        match &mut self.tlb {
            None => self.accessed[page as usize] = 1,
            Some(t) => {
                if t[page as usize] == 0 {
                    t[page as usize] = 1;
                    self.accessed[page as usize] = 1;
                }
            }
        }
    }

    #[inline(always)]
    pub fn prefetch(&self, page: PageId) {
        crate::prefetch::read(self.accessed.as_ptr().wrapping_add(page as usize));
    }

    /// Whether the page was accessed since its bit was last cleared.
    pub fn young(&self, page: PageId) -> bool {
        self.accessed.get(page as usize).is_some_and(|&b| b != 0)
    }

    /// Clear the page's accessed bit.
    pub fn mkold(&mut self, page: PageId) {
        if let Some(b) = self.accessed.get_mut(page as usize) {
            *b = 0;
        }
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Regions, mutable (schemes reset the age of a region they acted on).
    pub fn regions_mut(&mut self) -> &mut [Region] {
        &mut self.regions
    }

    /// The page at index `i` of the address order.
    pub fn page_at(&self, i: u32) -> PageId {
        self.order[i as usize]
    }

    /// The pages of a region, in address order.
    pub fn pages_of(&self, r: &Region) -> &[PageId] {
        &self.order[r.start as usize..r.end as usize]
    }

    /// Pages monitored.
    pub fn monitored(&self) -> usize {
        self.order.len()
    }

    /// One sampling interval ended: check every region's sampled page (charging the checks to
    /// the program through `mem`). Returns true when an aggregation interval ended too: the
    /// regions are merged and hold the interval's aggregated `nr_accesses` and ages, and the
    /// caller must call [`Damon::end_aggregation`] after reading them. Otherwise the next
    /// pages to sample are picked. `pages` is the number of known page ids, `addr` their
    /// addresses; monitoring starts at the first interval with pages.
    pub fn sample(&mut self, mem: &mut Memory, pages: usize, addr: impl Fn(PageId) -> u64) -> bool {
        if self.regions.is_empty() {
            if pages == 0 {
                return false;
            }
            self.build(pages, &addr);
            self.prepare();
            return false;
        }
        let mut max = 0;
        let mut hits = 0;
        for r in &mut self.regions {
            if self.accessed[r.sampled as usize] != 0 {
                r.nr_accesses += 1;
                hits += 1;
            }
            max = max.max(r.nr_accesses);
        }
        let n = self.regions.len() as u64;
        let ns = n as f64 * self.attrs.check_ns;
        if ns > 0.0 {
            mem.charge(Charge { what: "DAMON access sampling", ns, halts: true, energy_j: 0.0 });
        }
        self.stats.samples += 1;
        self.stats.checks += n;
        self.stats.checks_accessed += hits;
        self.stats.check_ns += ns;
        self.max_nr_accesses = max;
        self.passed_samples += 1;
        if self.passed_samples >= self.next_aggr {
            let sz_limit = (self.order.len() as u64 / self.attrs.min_nr_regions as u64).max(1);
            self.merge(max / 10, sz_limit);
            self.stats.aggregations += 1;
            true
        } else {
            self.prepare();
            false
        }
    }

    /// Close the aggregation interval [`Damon::sample`] reported: reset the counts, split
    /// the regions, take in pages that appeared, and pick the next pages to sample.
    pub fn end_aggregation(&mut self, pages: usize, addr: impl Fn(PageId) -> u64) {
        self.next_aggr = self.passed_samples + self.attrs.aggr_samples as u64;
        for r in &mut self.regions {
            r.last_nr_accesses = r.nr_accesses;
            r.nr_accesses = 0;
        }
        self.split();
        let n = self.regions.len() as u64;
        self.stats.min_regions_seen = self.stats.min_regions_seen.min(n);
        self.stats.max_regions_seen = self.stats.max_regions_seen.max(n);
        if pages > self.order.len() {
            self.absorb(pages, &addr);
        }
        self.prepare();
    }

    /// The first regions: the pages in address order, split evenly into `min_nr_regions`
    /// (fewer if there are fewer pages), as vaddr's initial regions are.
    fn build(&mut self, pages: usize, addr: &impl Fn(PageId) -> u64) {
        self.grow(pages);
        self.keyed = (0..pages as PageId).map(|p| (addr(p), p)).collect();
        self.keyed.sort_unstable();
        self.order = self.keyed.iter().map(|&(_, p)| p).collect();
        let n = pages as u64;
        let k = (self.attrs.min_nr_regions as u64).min(n);
        self.regions = (0..k)
            .map(|i| Region { start: (i * n / k) as u32, end: ((i + 1) * n / k) as u32, sampled: 0, nr_accesses: 0, last_nr_accesses: 0, age: 0 })
            .collect();
        self.stats.rebuilds += 1;
    }

    /// Add the page ids from `order.len()` to `pages` to the order, and move region bounds so
    /// that each region keeps its address range (its first page's address onwards).
    fn absorb(&mut self, pages: usize, addr: &impl Fn(PageId) -> u64) {
        self.grow(pages);
        let starts: Vec<u64> = self.regions.iter().map(|r| self.keyed[r.start as usize].0).collect();
        let old = self.order.len() as PageId;
        super::merge_by_address(&mut self.keyed, (old..pages as PageId).map(|p| (addr(p), p)).collect());
        self.order.clear();
        self.order.extend(self.keyed.iter().map(|&(_, p)| p));
        let n = self.order.len() as u32;
        let keyed = &self.keyed;
        for (i, &a) in starts.iter().enumerate() {
            let s = if i == 0 { 0 } else { keyed.partition_point(|&(x, _)| x < a) as u32 };
            self.regions[i].start = s;
            if i > 0 {
                self.regions[i - 1].end = s;
            }
        }
        if let Some(last) = self.regions.last_mut() {
            last.end = n;
        }
        self.stats.rebuilds += 1;
    }

    /// Pick every region's next sampled page at random in the region and clear its bit.
    fn prepare(&mut self) {
        for r in &mut self.regions {
            let i = r.start + self.rng.below((r.end - r.start) as u64) as u32;
            let p = self.order[i as usize];
            r.sampled = p;
            self.accessed[p as usize] = 0;
        }
    }

    /// Merge adjacent regions with similar counts (see the module comment).
    fn merge(&mut self, threshold: u32, sz_limit: u64) {
        let max_thres = self.attrs.aggr_samples;
        let mut thres = threshold;
        loop {
            self.merge_pass(thres, sz_limit);
            if self.regions.len() > self.attrs.max_nr_regions as usize && thres / 2 < max_thres {
                thres = (thres * 2).max(1);
            } else {
                break;
            }
        }
    }

    fn merge_pass(&mut self, thres: u32, sz_limit: u64) {
        self.scratch.clear();
        for mut r in self.regions.drain(..) {
            if r.nr_accesses.abs_diff(r.last_nr_accesses) > thres {
                r.age = 0;
            } else {
                r.age += 1;
            }
            if let Some(prev) = self.scratch.last_mut() {
                let (sl, sr) = (prev.pages() as u64, r.pages() as u64);
                if prev.end == r.start && prev.nr_accesses.abs_diff(r.nr_accesses) <= thres && sl + sr <= sz_limit {
                    prev.nr_accesses = ((prev.nr_accesses as u64 * sl + r.nr_accesses as u64 * sr) / (sl + sr)) as u32;
                    prev.age = ((prev.age as u64 * sl + r.age as u64 * sr) / (sl + sr)) as u32;
                    prev.end = r.end;
                    self.stats.merges += 1;
                    continue;
                }
            }
            self.scratch.push(r);
        }
        std::mem::swap(&mut self.regions, &mut self.scratch);
    }

    /// Split regions at random points (see the module comment).
    fn split(&mut self) {
        let nr = self.regions.len();
        let max = self.attrs.max_nr_regions as usize;
        if nr > max / 2 {
            return;
        }
        let nr_subs = if self.last_nr_regions == nr && nr < max / 3 { 3 } else { 2 };
        self.scratch.clear();
        for r in self.regions.drain(..) {
            // split the left part repeatedly; the pieces cut off come after it, right to left
            let mut left = r;
            let mut tail: [Option<Region>; 2] = [None, None];
            let mut sz = r.pages();
            for slot in tail.iter_mut().take(nr_subs - 1) {
                if sz <= 2 {
                    break;
                }
                let sub = ((1 + self.rng.below(9)) * sz as u64 / 10) as u32;
                if sub == 0 || sub >= sz {
                    continue;
                }
                let cut = left.start + sub;
                *slot = Some(Region { start: cut, end: left.end, ..left });
                left.end = cut;
                sz = sub;
                self.stats.splits += 1;
            }
            self.scratch.push(left);
            self.scratch.extend(tail.iter().rev().flatten());
        }
        std::mem::swap(&mut self.regions, &mut self.scratch);
        self.last_nr_regions = nr;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(aggr_samples: u32, min: u32, max: u32, seed: u64) -> DamonAttrs {
        DamonAttrs { aggr_samples, min_nr_regions: min, max_nr_regions: max, check_ns: 100.0, seed }
    }

    fn mem() -> Memory {
        Memory::new(&[1 << 20, 1 << 20], 4096)
    }

    /// Pages 0..n at addresses in reverse id order (so the order is not the id order).
    fn addr(n: usize) -> impl Fn(PageId) -> u64 {
        move |p| (n as u64 - p as u64) << 12
    }

    /// Run `aggs` aggregation intervals over `n` pages; before each sampling interval,
    /// `touch(interval, &mut damon)` makes the accesses. Calls `seen` with the regions at
    /// each aggregation (before the reset).
    fn drive(d: &mut Damon, n: usize, aggs: u32, mut touch: impl FnMut(u64, &mut Damon), mut seen: impl FnMut(&Damon)) {
        let mut m = mem();
        d.grow(n);
        assert!(!d.sample(&mut m, n, addr(n)), "the first interval builds the regions");
        let mut i = 0u64;
        let mut done = 0;
        while done < aggs {
            touch(i, d);
            i += 1;
            if d.sample(&mut m, n, addr(n)) {
                seen(d);
                d.end_aggregation(n, addr(n));
                done += 1;
            }
        }
    }

    /// design.rst, "Access Frequency Monitoring": a region whose every page is accessed in
    /// every sampling interval counts one access per check, so its `nr_accesses` at the end
    /// of an aggregation is the number of samples per aggregation (20 = 100 ms / 5 ms).
    #[test]
    fn fully_accessed_region_counts_every_sample() {
        let n = 200;
        let mut d = Damon::new(attrs(20, 10, 1000, 1));
        drive(
            &mut d,
            n,
            5,
            |_, d| (0..n as PageId).for_each(|p| d.access(p)),
            |d| {
                assert!(d.regions().iter().all(|r| r.nr_accesses == 20), "{:?}", d.regions());
            },
        );
        assert_eq!(d.stats.samples, 100);
        assert_eq!(d.stats.checks, d.stats.checks_accessed);
        // pages are covered exactly once, in address order
        let r = d.regions();
        assert_eq!((r[0].start, r.last().unwrap().end), (0, n as u32));
        assert!(r.windows(2).all(|w| w[0].end == w[1].start && w[0].start < w[0].end));
        assert_eq!(d.order[0], n as PageId - 1, "highest id has the lowest address");
    }

    /// A TLB that keeps translations (QEMU's under TCG): DAMON clears a sampled page's
    /// accessed bit without a flush, so a page touched in every interval sets it again only
    /// after the TLB is flushed. With a flush every 5 intervals, each region's check finds an
    /// access about once per 5 samples (4 of 20 per aggregation), where every sample finds
    /// one without the model; with no flush, none after the first interval does.
    #[test]
    fn a_kept_tlb_hides_accesses_until_it_is_flushed() {
        let n = 200;
        for flush_every in [0u64, 5] {
            let mut d = Damon::new(attrs(20, 10, 1000, 1));
            d.grow(n);
            d.keep_translations();
            let mut counts = Vec::new();
            drive(
                &mut d,
                n,
                5,
                |i, d| {
                    if flush_every > 0 && i % flush_every == 0 {
                        d.flush_tlb();
                    }
                    (0..n as PageId).for_each(|p| d.access(p))
                },
                |d| counts.extend(d.regions().iter().map(|r| r.nr_accesses)),
            );
            let max = *counts.iter().max().unwrap();
            if flush_every == 0 {
                assert!(max <= 1, "{counts:?}");
            } else {
                assert!(counts.iter().all(|&c| (3..=5).contains(&c)), "{counts:?}");
            }
        }
    }

    /// design.rst, "Region Based Sampling": one sampled page stands for its region, so in a
    /// region where a fraction p of the pages is accessed per interval (independently), a
    /// check finds an access with probability p and `nr_accesses` averages p × 20.
    #[test]
    fn sampled_frequency_converges_to_the_access_fraction() {
        let n = 1000;
        for &p in &[0.25, 0.5, 0.8] {
            let mut d = Damon::new(attrs(20, 10, 1000, 7));
            let mut rng = SplitMix64::new(99);
            let (mut sum, mut pages) = (0f64, 0f64);
            drive(
                &mut d,
                n,
                200,
                |_, d| {
                    for pg in 0..n as PageId {
                        if rng.unit() < p {
                            d.access(pg);
                        }
                    }
                },
                |d| {
                    for r in d.regions() {
                        sum += r.nr_accesses as f64 * r.pages() as f64;
                        pages += r.pages() as f64;
                    }
                },
            );
            let mean = sum / pages;
            assert!((mean - p * 20.0).abs() < 0.05 * 20.0, "p = {p}: mean nr_accesses {mean}, expected {}", p * 20.0);
        }
    }

    /// design.rst, "Adaptive Regions Adjustment": with the hot half of the address space
    /// accessed every interval and the cold half never, merging and splitting leave regions
    /// that do not straddle the boundary (or straddle it by little): nearly every page is in
    /// a region whose count says what the page is.
    #[test]
    fn regions_adapt_to_a_hot_cold_boundary() {
        let n = 1000usize;
        let mut d = Damon::new(attrs(20, 10, 1000, 3));
        // pages 0..500 have the highest addresses (see `addr`): hot = the upper half
        let mut wrong = 0f64;
        drive(
            &mut d,
            n,
            30,
            |_, d| (0..500).for_each(|p| d.access(p)),
            |d| {
                wrong = 0.0;
                for r in d.regions() {
                    let hot = r.nr_accesses * 2 >= 20;
                    wrong += d.pages_of(r).iter().filter(|&&p| (p < 500) != hot).count() as f64;
                }
            },
        );
        assert!(wrong / (n as f64) < 0.05, "{wrong} pages misclassified at the last aggregation");
        assert!(d.regions().len() <= 1000);
    }

    /// core.c's merge rule: adjacent regions whose counts differ by at most the threshold
    /// (a tenth of the largest count) merge into their size-weighted mean, up to the size
    /// limit; ages follow the same weights after each region's own age update.
    /// Regions (pages, nr_accesses, last, age): A(2,10,10,4) B(6,11,11,0) C(2,20,0,3) D(4,1,1,8).
    /// thres = 20 / 10 = 2; limit 8 pages. Ages after update: A 5, B 1, C 0 (|20-0| > 2), D 9.
    /// A+B (|10-11| ≤ 2, 8 pages): nr (10·2 + 11·6)/8 = 86/8 = 10, age (5·2 + 1·6)/8 = 2.
    /// C does not join (|10-20| > 2); D does not join C (|20-1| > 2).
    #[test]
    fn merge_joins_close_counts_within_the_size_limit() {
        let mut d = Damon::new(attrs(20, 2, 1000, 1));
        d.grow(14);
        d.order = (0..14).collect();
        let reg = |s, e, nr, last, age| Region { start: s, end: e, sampled: s, nr_accesses: nr, last_nr_accesses: last, age };
        d.regions = vec![reg(0, 2, 10, 10, 4), reg(2, 8, 11, 11, 0), reg(8, 10, 20, 0, 3), reg(10, 14, 1, 1, 8)];
        d.merge(20 / 10, 8);
        assert_eq!(d.regions, vec![reg(0, 8, 10, 10, 2), reg(8, 10, 20, 0, 0), reg(10, 14, 1, 1, 9)]);
        // the same with a limit of 7 pages: A+B would be 8, so nothing merges
        d.regions = vec![reg(0, 2, 10, 10, 4), reg(2, 8, 11, 11, 0)];
        d.merge(2, 7);
        assert_eq!(d.regions.len(), 2);
    }

    /// core.c's split rule: regions split only while there are at most max/2 of them, so the
    /// count never exceeds max_nr_regions, and merging never goes below min_nr_regions while
    /// the pages allow it (size limit total/min). Random accesses keep counts apart.
    #[test]
    fn split_and_merge_respect_the_region_limits() {
        let n = 500;
        let mut d = Damon::new(attrs(20, 10, 24, 5));
        let mut rng = SplitMix64::new(5);
        let mut most = 0;
        let mut fewest = usize::MAX;
        drive(
            &mut d,
            n,
            100,
            |_, d| {
                for p in 0..n as PageId {
                    if rng.unit() < 0.5 {
                        d.access(p);
                    }
                }
            },
            |d| {
                most = most.max(d.regions().len());
                fewest = fewest.min(d.regions().len());
            },
        );
        assert!(most <= 24, "{most} regions");
        assert!(d.stats.max_regions_seen <= 24);
        assert!(fewest >= 10, "{fewest} regions");
        assert!(d.stats.splits > 0 && d.stats.merges > 0);
    }

    /// Same seed, same regions, bit for bit; another seed, other split points.
    #[test]
    fn deterministic_with_a_seed() {
        let n = 300;
        let run = |seed: u64| {
            let mut d = Damon::new(attrs(10, 10, 100, seed));
            let mut out = Vec::new();
            drive(
                &mut d,
                n,
                20,
                |i, d| (0..n as PageId).filter(|p| (p + i as PageId).is_multiple_of(3)).for_each(|p| d.access(p)),
                |d| {
                    out.push(d.regions().to_vec());
                },
            );
            out
        };
        assert_eq!(run(11), run(11));
        assert_ne!(run(11), run(12));
    }

    /// New pages join the region whose address range holds them.
    #[test]
    fn new_pages_join_regions_by_address() {
        let mut d = Damon::new(attrs(2, 2, 100, 1));
        let mut m = mem();
        let a = |p: PageId| [10u64, 20, 30, 40, 15, 35, 5, 50][p as usize] << 12;
        d.grow(4);
        d.sample(&mut m, 4, a); // regions [10,20] [30,40]
        assert_eq!(d.regions().iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(), vec![(0, 2), (2, 4)]);
        d.sample(&mut m, 4, a);
        assert!(d.sample(&mut m, 4, a));
        d.end_aggregation(8, a);
        // order by address: 6(5) 0(10) 4(15) 1(20) 2(30) 5(35) 3(40) 7(50)
        assert_eq!(d.order, vec![6, 0, 4, 1, 2, 5, 3, 7]);
        let pages: Vec<Vec<PageId>> = d.regions().iter().map(|r| d.pages_of(r).to_vec()).collect();
        assert_eq!(pages.concat(), d.order);
        assert!(pages.iter().any(|p| p.contains(&4) && p.contains(&0)), "15 joins the region from 10: {pages:?}");
        assert!(pages.iter().any(|p| p.contains(&5) && p.contains(&2)), "35 joins the region from 30: {pages:?}");
    }
}
