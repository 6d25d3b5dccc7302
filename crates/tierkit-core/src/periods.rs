//! Per-period, per-page access counts and page reuse distances: what Cori, Kleio and
//! Kleoniki (003) learn from, and what the trace heat map draws.
//!
//! One pass over a trace's (post-cache) accesses, numbering pages exactly as the engine does
//! (dense ids in order of first access, [`PageMap`]), so a page id here is the page id a
//! simulation of the same trace sees, and period `i` here is the engine's period `i` for a
//! period of `n` accesses (accesses `[i·n, (i+1)·n)`). In a trace-driven simulation the
//! counts do not depend on placement, so counts taken here are what a scheduler would
//! observe at run time.

use crate::error::{Error, Result};
use crate::pagemap::{PageId, PageMap};
use crate::trace::opener::TraceOpener;
use crate::trace::{Batch, Projection};

/// Sparse pages × periods counts, in period order and, within a period, in order of each
/// page's first access in it (the engine's `touched` order).
#[derive(Debug, Default)]
pub struct PeriodCounts {
    /// Period length in accesses.
    pub period: u64,
    /// Number of periods (the last may be partial).
    pub periods: u64,
    pub accesses: u64,
    /// First byte of each page, by page id.
    pub page_addr: Vec<u64>,
    pub page_size: u64,
    /// One entry per (period, page accessed in it).
    pub period_of: Vec<u32>,
    pub page: Vec<PageId>,
    pub count: Vec<u32>,
    pub writes: Vec<u32>,
    /// Digest of the trace (the reader's), to tie derived files to it.
    pub digest: String,
}

/// Reuse distances (in accesses between two consecutive accesses to the same page), binned
/// in buckets of `bucket` accesses: `reuses[b]` counts the distances in `[b·bucket,
/// (b+1)·bucket)`. `multi_repeats[b]` and `multi_pages[b]` sum, over the pages with more
/// than one reuse in bucket `b`, those reuses and those pages: the per-page average that
/// GTkernel/cori-sim's reuse collector histograms (003 §3.3.2).
#[derive(Debug, Default, serde::Serialize)]
pub struct ReuseHistogram {
    pub bucket: u64,
    pub accesses: u64,
    pub pages: u64,
    pub reuses: Vec<u64>,
    pub multi_repeats: Vec<u64>,
    pub multi_pages: Vec<u64>,
}

/// Walk the trace's accesses with page ids: `f(index, page, write)`.
fn walk(
    trace: &dyn TraceOpener,
    mut f: impl FnMut(u64, PageId, bool),
    mut progress: impl FnMut(u64, Option<u64>) -> bool,
) -> Result<(PageMap, u64, u64, String)> {
    let mut src = trace.open()?;
    let page_size = src.meta().page_size;
    src.set_projection(Projection { insn: false, ns: false, addr: true });
    let mut pm = PageMap::new(page_size);
    let mut k = 0u64;
    let mut batch = Batch::default();
    while src.next_batch(&mut batch)? {
        for i in 0..batch.len() {
            let p = pm.id(batch.addr[i]);
            f(k, p, batch.write[i]);
            k += 1;
        }
        let pr = src.progress();
        if !progress(pr.bytes_read, pr.bytes_total) {
            return Err(Error::Interrupted);
        }
    }
    Ok((pm, page_size, k, src.digest().unwrap_or_default()))
}

/// Per-period counts of every page, for a period of `period` accesses.
pub fn period_counts(trace: &dyn TraceOpener, period: u64, progress: impl FnMut(u64, Option<u64>) -> bool) -> Result<PeriodCounts> {
    if period == 0 {
        return Err(Error::config("--period", "the period must be at least one access"));
    }
    let mut out = PeriodCounts { period, ..Default::default() };
    // current period's counts, indexed by page, and its pages in order of first access
    let mut count: Vec<u32> = Vec::new();
    let mut writes: Vec<u32> = Vec::new();
    let mut touched: Vec<PageId> = Vec::new();
    let mut cur: u64 = 0;
    let flush = |out: &mut PeriodCounts, cur: u64, count: &mut Vec<u32>, writes: &mut Vec<u32>, touched: &mut Vec<PageId>| {
        for &p in touched.iter() {
            out.period_of.push(cur as u32);
            out.page.push(p);
            out.count.push(count[p as usize]);
            out.writes.push(writes[p as usize]);
            count[p as usize] = 0;
            writes[p as usize] = 0;
        }
        touched.clear();
    };
    let (pm, page_size, n, digest) = walk(
        trace,
        |k, p, w| {
            let i = k / period;
            if i != cur {
                flush(&mut out, cur, &mut count, &mut writes, &mut touched);
                cur = i;
            }
            let pi = p as usize;
            if pi >= count.len() {
                count.resize((pi + 1).max(count.len() * 2), 0);
                writes.resize(count.len(), 0);
            }
            if count[pi] == 0 {
                touched.push(p);
            }
            count[pi] += 1;
            writes[pi] += w as u32;
        },
        progress,
    )?;
    flush(&mut out, cur, &mut count, &mut writes, &mut touched);
    if n.div_ceil(period) > u32::MAX as u64 {
        return Err(Error::config("--period", format!("{n} accesses make more than 2^32 periods of {period}: give a longer period")));
    }
    out.periods = n.div_ceil(period);
    out.accesses = n;
    out.page_size = page_size;
    out.page_addr = (0..pm.len() as PageId).map(|p| pm.page_addr(p)).collect();
    out.digest = digest;
    Ok(out)
}

/// Page reuse distances of a trace, in buckets of `bucket` accesses.
pub fn reuse_histogram(trace: &dyn TraceOpener, bucket: u64, progress: impl FnMut(u64, Option<u64>) -> bool) -> Result<ReuseHistogram> {
    if bucket == 0 {
        return Err(Error::config("--bucket", "the reuse bucket must be at least one access"));
    }
    // 1 + index of each page's last access
    let mut last: Vec<u64> = Vec::new();
    let mut reuses: Vec<u64> = Vec::new();
    // (page, bucket) of every reuse past the first bucket; the first bucket's per-page
    // counts are kept directly (most reuses fall there)
    let mut keys: Vec<(PageId, u32)> = Vec::new();
    let mut first: Vec<u32> = Vec::new();
    let mut too_long = false;
    let (pm, _, n, _) = walk(
        trace,
        |k, p, _| {
            let pi = p as usize;
            if pi >= last.len() {
                last.resize((pi + 1).max(last.len() * 2), 0);
                first.resize(last.len(), 0);
            }
            if last[pi] != 0 {
                let b = (k + 1 - last[pi]) / bucket;
                if b as usize >= reuses.len() {
                    reuses.resize(b as usize + 1, 0);
                }
                reuses[b as usize] += 1;
                if b == 0 {
                    first[pi] += 1;
                } else if b <= u32::MAX as u64 {
                    keys.push((p, b as u32));
                } else {
                    too_long = true;
                }
            }
            last[pi] = k + 1;
        },
        progress,
    )?;
    if too_long {
        return Err(Error::config("--bucket", format!("reuse distances exceed 2^32 buckets of {bucket} accesses: give a larger bucket")));
    }
    let nb = reuses.len();
    let mut multi_repeats = vec![0u64; nb];
    let mut multi_pages = vec![0u64; nb];
    for &c in &first {
        if c > 1 {
            multi_repeats[0] += c as u64;
            multi_pages[0] += 1;
        }
    }
    keys.sort_unstable();
    let mut i = 0;
    while i < keys.len() {
        let mut j = i + 1;
        while j < keys.len() && keys[j] == keys[i] {
            j += 1;
        }
        let c = (j - i) as u64;
        if c > 1 {
            let b = keys[i].1 as usize;
            multi_repeats[b] += c;
            multi_pages[b] += 1;
        }
        i = j;
    }
    Ok(ReuseHistogram { bucket, accesses: n, pages: pm.len() as u64, reuses, multi_repeats, multi_pages })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::synth::{SynthKind, SynthSpec};
    use crate::trace::{Access, TraceMeta, VecSource};

    /// A trace given as a list of pages (4 KiB apart); writes on odd pages.
    #[derive(Clone)]
    struct Pages(Vec<u64>);
    impl TraceOpener for Pages {
        fn open(&self) -> Result<Box<dyn crate::trace::RecordSource>> {
            let acc = self
                .0
                .iter()
                .enumerate()
                .map(|(i, &p)| Access { addr: 0x10_0000 + p * 4096, write: p % 2 == 1, insn: i as u64, ..Default::default() })
                .collect();
            Ok(Box::new(VecSource::new(TraceMeta::default(), acc, Vec::new())))
        }
        fn summary(&self) -> Result<crate::trace::Summary> {
            let mut b = crate::trace::SummaryBuilder::new(4096);
            let mut s = self.open()?;
            let mut batch = Batch::default();
            while s.next_batch(&mut batch)? {
                b.add_batch(&batch);
            }
            Ok(b.finish())
        }
        fn describe(&self) -> String {
            "pages".into()
        }
        fn format_name(&self) -> String {
            "test".into()
        }
        fn shared(&self) -> std::sync::Arc<dyn TraceOpener + Send> {
            std::sync::Arc::new(self.clone())
        }
    }

    fn pages(v: &[u64]) -> Pages {
        Pages(v.to_vec())
    }

    #[test]
    fn counts_follow_engine_periods_and_first_touch_ids() {
        // pages 7, 3, 7 | 3, 9, 3 | 9  with a period of 3 accesses
        let t = pages(&[7, 3, 7, 3, 9, 3, 9]);
        let c = period_counts(&t, 3, |_, _| true).unwrap();
        assert_eq!(c.periods, 3);
        assert_eq!(c.accesses, 7);
        // ids by first access: 7 -> 0, 3 -> 1, 9 -> 2
        assert_eq!(c.page_addr, vec![0x10_0000 + 7 * 4096, 0x10_0000 + 3 * 4096, 0x10_0000 + 9 * 4096]);
        assert_eq!(c.period_of, vec![0, 0, 1, 1, 2]);
        assert_eq!(c.page, vec![0, 1, 1, 2, 2]);
        assert_eq!(c.count, vec![2, 1, 2, 1, 1]);
        assert_eq!(c.writes, vec![2, 1, 2, 1, 1]);
    }

    #[test]
    fn reuse_distances_are_binned_per_page() {
        // page 0 every 4 accesses, page 1 every 2 (pages 2, 3 fill the gaps once)
        let t = pages(&[0, 1, 2, 1, 0, 1, 3, 1, 0]);
        let h = reuse_histogram(&t, 2, |_, _| true).unwrap();
        // page 1: distances 2, 2, 2 -> bucket 1; page 0: 4, 4 -> bucket 2
        assert_eq!(h.reuses, vec![0, 3, 2]);
        assert_eq!(h.multi_repeats, vec![0, 3, 2]);
        assert_eq!(h.multi_pages, vec![0, 1, 1]);
        assert_eq!(h.pages, 4);
        let h1 = reuse_histogram(&t, 100, |_, _| true).unwrap();
        assert_eq!(h1.reuses, vec![5]);
        assert_eq!((h1.multi_repeats[0], h1.multi_pages[0]), (5, 2));
    }

    #[test]
    fn counts_match_the_engine_on_a_synthetic_trace() {
        let spec = SynthSpec { kind: SynthKind::Zipf, theta: 0.9, pages: 500, accesses: 20_000, seed: 3, ..Default::default() };
        let c = period_counts(&spec, 1000, |_, _| true).unwrap();
        assert_eq!(c.periods, 20);
        assert_eq!(c.count.iter().map(|&x| x as u64).sum::<u64>(), 20_000);
        assert!(period_counts(&spec, 0, |_, _| true).is_err());
    }
}
