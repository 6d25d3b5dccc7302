//! NUMA hint faults from a periodic page-table scanner, as Linux's automatic NUMA balancing
//! produces them.
//!
//! How Linux does it (kernel/sched/fair.c `task_numa_work`, mm/mprotect.c `change_prot_numa`;
//! Documentation/admin-guide/sysctl/kernel.rst, `numa_balancing_scan_*`): every scan period a
//! task's address space is walked from where the last walk stopped, `numa_balancing_scan_size_mb`
//! (default 256 MB) at a time, in virtual-address order, and the present PTEs it covers are
//! made PROT_NONE; when the walk reaches the end of the address space the next one starts again
//! from its beginning. The next access to such a page takes a minor fault (the NUMA hint fault),
//! which restores the PTE, so a page faults at most once per arming. In memory-tiering mode
//! (`kernel.numa_balancing=2`, Linux 5.18+) top-tier pages are skipped by the walk and the scan
//! time is remembered per page, so that the fault can compute the *hint-fault latency*
//! (fault time − scan time, `numa_hint_fault_latency`): the shorter it is, the hotter the page.
//! A PTE that is already PROT_NONE is left alone (no new scan time, no TLB flush).
//!
//! How far one scan goes (`task_numa_work`): the walk advances in chunks of `scan_size`
//! (the chunk's end rounded up to a huge-page boundary and cut at the end of the VMA). A chunk
//! in which `change_prot_numa` changed at least one PTE uses up the scan's budget of
//! `scan_size`; a chunk that changed none (its pages are all on the top tier, already
//! PROT_NONE, or not present) costs only the second budget, `virtpages` = 8 × `scan_size` of
//! address space. So one scan stops after the first chunk that armed something, or after
//! 8 × `scan_size` of address space that armed nothing, or at the end of the address space
//! (the next scan starts again from its beginning). Without the second rule a tiering system
//! whose low addresses are on the top tier would arm nothing, scan after scan.
//!
//! The model: the pages the simulator knows are kept sorted by address (new pages are merged
//! in, [`super::merge_by_address`]); a cursor remembers the address where the next scan
//! starts. The address space is the known pages in address order, one page per known page:
//! addresses the trace never touched are treated as outside every VMA (a trace does not say
//! where VMAs begin and end, and the kernel skips the holes between VMAs for free), and the
//! chunks are not rounded to huge pages. A chunk is `scan_pages` known pages.
//! [`HintFaults::on_access`] is O(1): one load and one compare for a page that is not armed.
//!
//! Costs are the caller's to charge, from what [`ScanPass`] reports: one PTE update per page
//! armed, one visit per page passed over, and one TLB flush per scan that changed a PTE (the
//! kernel flushes the range it changed; only the scan's last chunk changed any); one hint
//! fault per fault reported by `on_access`.

use crate::pagemap::PageId;

/// A page not armed.
const NOT_ARMED: f64 = -1.0;

/// What one scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanPass {
    /// Known pages the scan covered (armed or passed over).
    pub scanned: u64,
    /// PTEs made PROT_NONE (pages armed by this scan).
    pub armed: u64,
    /// Chunks of `scan_pages` the scan walked (the last may be cut by the end of the space).
    pub chunks: u64,
    /// Whether the scan reached the end of the address space (the next starts at 0).
    pub wrapped: bool,
}

/// `task_numa_work`'s second budget: a scan walks at most this many times its scan size of
/// address space that changes no PTE (`virtpages = pages * 8`).
pub const VIRT_PAGES_FACTOR: u64 = 8;

/// Counters of the hint-fault model.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct HintStats {
    /// scans, and walks that reached the end of the address space
    pub scans: u64,
    pub passes: u64,
    /// PTEs made PROT_NONE
    pub ptes_armed: u64,
    /// hint faults taken
    pub faults: u64,
}

#[derive(Default)]
pub struct HintFaults {
    /// Scan time of each armed page, ns; `NOT_ARMED` otherwise.
    armed_at: Vec<f64>,
    /// Known pages, sorted by address.
    order: Vec<(u64, PageId)>,
    /// Address at which the next scan starts.
    cursor: u64,
    pub stats: HintStats,
}

impl HintFaults {
    pub fn new() -> HintFaults {
        HintFaults::default()
    }

    /// Make room for page ids below `n`.
    pub fn grow(&mut self, n: usize) {
        if self.armed_at.len() < n {
            let want = n.max(self.armed_at.len() * 2).max(1024);
            self.armed_at.resize(want, NOT_ARMED);
        }
    }

    /// One scan from the cursor over the `pages` known pages (dense ids `0..pages`) in
    /// address order, by chunks of `scan_pages`: it stops after the first chunk that armed a
    /// page, after [`VIRT_PAGES_FACTOR`] chunks that armed none, or at the end of the address
    /// space. `addr_of` gives a page's address; pages for which `want` is false (top-tier
    /// pages in tiering mode) are passed over, as are pages already armed.
    pub fn scan(&mut self, pages: usize, addr_of: impl Fn(PageId) -> u64, scan_pages: u64, now_ns: f64, mut want: impl FnMut(PageId) -> bool) -> ScanPass {
        self.grow(pages);
        if self.order.len() < pages {
            // ids are dense and handed out in first-access order: the new ones are the last
            let new = (self.order.len()..pages).map(|p| (addr_of(p as PageId), p as PageId)).collect();
            super::merge_by_address(&mut self.order, new);
        }
        self.stats.scans += 1;
        let mut pass = ScanPass::default();
        if self.order.is_empty() {
            return pass;
        }
        let chunk = scan_pages.max(1);
        let mut virt_left = chunk.saturating_mul(VIRT_PAGES_FACTOR);
        let mut start = self.order.partition_point(|&(a, _)| a < self.cursor);
        loop {
            let end = (start as u64).saturating_add(chunk).min(self.order.len() as u64) as usize;
            let mut armed = 0;
            for &(_, p) in &self.order[start..end] {
                let slot = &mut self.armed_at[p as usize];
                if *slot == NOT_ARMED && want(p) {
                    *slot = now_ns;
                    armed += 1;
                }
            }
            let len = (end - start) as u64;
            pass.scanned += len;
            pass.armed += armed;
            pass.chunks += 1;
            start = end;
            if end == self.order.len() {
                pass.wrapped = true;
                break;
            }
            // a chunk that changed a PTE spends the whole scan size; any chunk spends virtpages
            virt_left = virt_left.saturating_sub(len);
            if armed > 0 || virt_left == 0 {
                break;
            }
        }
        if pass.wrapped {
            self.cursor = 0;
            self.stats.passes += 1;
        } else {
            self.cursor = self.order[start].0;
        }
        self.stats.ptes_armed += pass.armed;
        pass
    }

    /// An access to `page` at `now_ns`: the hint-fault latency (ns since the page was armed)
    /// if it takes a hint fault, which disarms it.
    #[inline(always)]
    pub fn on_access(&mut self, page: PageId, now_ns: f64) -> Option<f64> {
        let slot = self.armed_at.get_mut(page as usize)?;
        if *slot == NOT_ARMED {
            return None;
        }
        let at = *slot;
        *slot = NOT_ARMED;
        self.stats.faults += 1;
        Some(now_ns - at)
    }

    /// Forget an arming (the page moved: migration installs a fresh PTE).
    #[inline]
    pub fn disarm(&mut self, page: PageId) {
        if let Some(s) = self.armed_at.get_mut(page as usize) {
            *s = NOT_ARMED;
        }
    }

    pub fn is_armed(&self, page: PageId) -> bool {
        self.armed_at.get(page as usize).is_some_and(|&t| t != NOT_ARMED)
    }

    pub fn heap_bytes(&self) -> usize {
        self.armed_at.capacity() * 8 + self.order.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pages 0..n at addresses given by `addrs`
    fn scan(h: &mut HintFaults, addrs: &[u64], window: u64, now: f64) -> ScanPass {
        h.scan(addrs.len(), |p| addrs[p as usize], window, now, |_| true)
    }

    #[test]
    fn a_page_touched_after_a_scan_faults_exactly_once_with_the_time_since_the_scan() {
        let mut h = HintFaults::new();
        let addrs = [0x1000, 0x2000, 0x3000];
        let pass = scan(&mut h, &addrs, 256, 1000.0);
        assert_eq!(pass, ScanPass { scanned: 3, armed: 3, chunks: 1, wrapped: true });
        assert_eq!(h.on_access(1, 1750.0), Some(750.0));
        assert_eq!(h.on_access(1, 1800.0), None, "the fault restored the PTE");
        assert_eq!(h.on_access(1, 5000.0), None);
        assert_eq!(h.stats.faults, 1);
        // re-armed by the next scan, it faults again, latency from the new scan
        scan(&mut h, &addrs, 256, 2000.0);
        assert_eq!(h.on_access(1, 2010.0), Some(10.0));
    }

    #[test]
    fn a_page_never_armed_never_faults() {
        let mut h = HintFaults::new();
        let addrs = [0x1000, 0x2000];
        // page 0 is skipped (a top-tier page in tiering mode)
        let pass = h.scan(2, |p| addrs[p as usize], 256, 0.0, |p| p != 0);
        assert_eq!((pass.scanned, pass.armed), (2, 1));
        assert_eq!(h.on_access(0, 10.0), None);
        assert_eq!(h.on_access(7, 10.0), None, "a page beyond the arrays");
        assert_eq!(h.on_access(1, 10.0), Some(10.0));
        assert_eq!(h.stats.faults, 1);
    }

    #[test]
    fn scans_walk_in_address_order_and_start_over_at_the_end() {
        let mut h = HintFaults::new();
        // ids in first-touch order, addresses not: address order is 2, 0, 3, 1
        let addrs = [0x2000, 0x9000, 0x1000, 0x5000];
        let a = scan(&mut h, &addrs, 2, 0.0);
        assert_eq!((a.armed, a.chunks, a.wrapped), (2, 1, false), "the first chunk armed: the scan stops");
        assert!(h.is_armed(2) && h.is_armed(0) && !h.is_armed(3) && !h.is_armed(1));
        let b = scan(&mut h, &addrs, 2, 1.0);
        assert_eq!((b.armed, b.wrapped), (2, true));
        assert!(h.is_armed(3) && h.is_armed(1));
        // the third scan starts again at the lowest address; every page is still armed, so no
        // chunk changes a PTE: it walks on (virtpages) to the end, and the scan times stay
        let c = scan(&mut h, &addrs, 2, 2.0);
        assert_eq!((c.scanned, c.armed, c.chunks, c.wrapped), (4, 0, 2, true));
        assert_eq!(h.on_access(0, 5.0), Some(5.0));
        // a page that appears later takes its place in address order: 0x1800 comes right
        // after 0x1000 (still armed), in the first chunk, which arms it and ends the scan
        let addrs5 = [0x2000, 0x9000, 0x1000, 0x5000, 0x1800];
        let d = h.scan(5, |p| addrs5[p as usize], 2, 3.0, |_| true);
        assert_eq!((d.scanned, d.armed, d.wrapped), (2, 1, false));
        assert!(h.is_armed(4));
        assert_eq!(h.stats.passes, 2);
    }

    /// kernel/sched/fair.c task_numa_work: chunks that change no PTE cost only the virtpages
    /// budget (8 × the scan size), so a scan crosses up to 8 chunks of top-tier pages to reach
    /// pages it can arm; a chunk that arms ends the scan.
    #[test]
    fn chunks_that_arm_nothing_spend_only_the_virtpages_budget() {
        let mut h = HintFaults::new();
        // 100 pages in address order; 0..=49 are "top tier" (never wanted)
        let addrs: Vec<u64> = (0..100u64).map(|p| p << 12).collect();
        let want = |p: PageId| p >= 50;
        // chunks of 4: 12 chunks (48 pages) of top tier would need 12 > 8 chunks: the first
        // scan stops after 8 chunks, 32 pages, having armed nothing
        let a = h.scan(100, |p| addrs[p as usize], 4, 0.0, want);
        assert_eq!((a.scanned, a.armed, a.chunks, a.wrapped), (32, 0, 8, false));
        // the second goes on from page 32: 32..=47 (4 chunks) arm nothing, 48..=51 arms 50
        // and 51, and the scan stops there
        let b = h.scan(100, |p| addrs[p as usize], 4, 1.0, want);
        assert_eq!((b.scanned, b.armed, b.chunks, b.wrapped), (20, 2, 5, false));
        assert!(h.is_armed(50) && h.is_armed(51) && !h.is_armed(52));
        // with 8 × 4 = 32 pages of budget and a chunk of 64, one chunk covers everything the
        // first scan may see, and it arms: 0..=63 covered, 50..=63 armed
        let mut h = HintFaults::new();
        let c = h.scan(100, |p| addrs[p as usize], 64, 0.0, want);
        assert_eq!((c.scanned, c.armed, c.chunks), (64, 14, 1));
    }
}
