//! NUMA hint faults from a periodic page-table scanner, as Linux's automatic NUMA balancing
//! produces them.
//!
//! How Linux does it (kernel/sched/fair.c `task_numa_work`, mm/mprotect.c `change_prot_numa`;
//! Documentation/admin-guide/sysctl/kernel.rst, `numa_balancing_scan_*`): every scan period a
//! task's address space is walked from where the last walk stopped, `numa_balancing_scan_size_mb`
//! (default 256 MB) at a time, in virtual-address order, and the present PTEs of that window are
//! made PROT_NONE; when the walk reaches the end of the address space the next one starts again
//! from its beginning. The next access to such a page takes a minor fault (the NUMA hint fault),
//! which restores the PTE, so a page faults at most once per arming. In memory-tiering mode
//! (`kernel.numa_balancing=2`, Linux 5.18+) top-tier pages are skipped by the walk and the scan
//! time is remembered per page, so that the fault can compute the *hint-fault latency*
//! (fault time − scan time, `numa_hint_fault_latency`): the shorter it is, the hotter the page.
//! A PTE that is already PROT_NONE is left alone (no new scan time, no TLB flush).
//!
//! The model: the pages the simulator knows are kept sorted by address (rebuilt only when new
//! pages have appeared since the last scan, O(n log n), small next to a scan period of
//! milliseconds to seconds); a cursor remembers the address where the next window starts. The
//! window is `scan_pages` known pages, armed or not (the kernel's window is a range of the
//! address space, and skipped top-tier pages use it up as well). [`HintFaults::on_access`] is
//! O(1): one load and one compare for a page that is not armed.
//!
//! Costs are the caller's to charge, from what [`ScanPass`] reports: one PTE update per page
//! armed, and one TLB flush per window that changed a PTE (the kernel flushes the range it
//! changed); one hint fault per fault reported by `on_access`.

use crate::pagemap::PageId;

/// A page not armed.
const NOT_ARMED: f64 = -1.0;

/// What one scan window did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanPass {
    /// Known pages the window covered (armed or skipped).
    pub scanned: u64,
    /// PTEs made PROT_NONE (pages armed by this window).
    pub armed: u64,
    /// Whether the window reached the end of the address space (the next starts at 0).
    pub wrapped: bool,
}

/// Counters of the hint-fault model.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct HintStats {
    /// scan windows, and walks that reached the end of the address space
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
    /// Address at which the next window starts.
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

    /// Arm the next window: the next `scan_pages` of the `pages` known pages (dense ids
    /// `0..pages`) in address order, from the cursor. `addr_of` gives a page's address; pages
    /// for which `want` is false (top-tier pages in tiering mode) are passed over but use up
    /// the window.
    pub fn scan(
        &mut self,
        pages: usize,
        addr_of: impl Fn(PageId) -> u64,
        scan_pages: u64,
        now_ns: f64,
        mut want: impl FnMut(PageId) -> bool,
    ) -> ScanPass {
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
        let start = self.order.partition_point(|&(a, _)| a < self.cursor);
        let end = (start as u64 + scan_pages.max(1)).min(self.order.len() as u64) as usize;
        for &(_, p) in &self.order[start..end] {
            pass.scanned += 1;
            let slot = &mut self.armed_at[p as usize];
            if *slot == NOT_ARMED && want(p) {
                *slot = now_ns;
                pass.armed += 1;
            }
        }
        if end == self.order.len() {
            self.cursor = 0;
            pass.wrapped = true;
            self.stats.passes += 1;
        } else {
            self.cursor = self.order[end].0;
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
        assert_eq!(pass, ScanPass { scanned: 3, armed: 3, wrapped: true });
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
    fn windows_walk_in_address_order_and_start_over_at_the_end() {
        let mut h = HintFaults::new();
        // ids in first-touch order, addresses not: address order is 2, 0, 3, 1
        let addrs = [0x2000, 0x9000, 0x1000, 0x5000];
        let a = scan(&mut h, &addrs, 2, 0.0);
        assert_eq!((a.armed, a.wrapped), (2, false));
        assert!(h.is_armed(2) && h.is_armed(0) && !h.is_armed(3) && !h.is_armed(1));
        let b = scan(&mut h, &addrs, 2, 1.0);
        assert_eq!((b.armed, b.wrapped), (2, true));
        assert!(h.is_armed(3) && h.is_armed(1));
        // the third window starts again at the lowest address; 2 and 0 are still armed, so
        // nothing changes (no PTE update) and their scan time stays
        let c = scan(&mut h, &addrs, 2, 2.0);
        assert_eq!((c.scanned, c.armed), (2, 0));
        assert_eq!(h.on_access(0, 5.0), Some(5.0));
        // a page that appears later takes its place in address order: the window after
        // 0x5000 and 0x9000 starts over at 0x1000 and covers 0x1000 and 0x1800
        let addrs5 = [0x2000, 0x9000, 0x1000, 0x5000, 0x1800];
        let d = h.scan(5, |p| addrs5[p as usize], 2, 3.0, |_| true);
        assert!(d.wrapped && !h.is_armed(4));
        let e = h.scan(5, |p| addrs5[p as usize], 2, 4.0, |_| true);
        assert_eq!((e.armed, e.wrapped), (1, false));
        assert!(h.is_armed(4));
        assert_eq!(h.stats.passes, 2);
    }
}
