//! Allocation-site profiles (000 §4.1, 002 §IV-C): one pass over a trace with allocation
//! events attributes every access to the live allocation that contains it, and so to the
//! allocation site (call stack) that created it.
//!
//! This module collects the raw facts only, per site as the trace defines it (all its
//! frames): accesses in total and per slice, allocations, peak live bytes. Python's
//! `tierkit.profile` groups the raw sites by call-path depth, finds phases and writes the
//! profile file (`docs/guidance.md`). Peak live bytes do not add up when sites merge (two
//! sites rarely peak at the same time), so the peaks of every depth's groups are tracked
//! here, alongside the raw sites.
//!
//! Slices: the trace's own slice and phase markers when it has them; otherwise fixed
//! lengths in instructions (or in accesses for a trace without instruction counts).

use crate::error::Result;
use crate::heap::Freed;
use crate::trace::opener::TraceOpener;
use crate::trace::{AllocFn, Batch, EventKind, MarkerKind, Projection};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// How the run is cut into slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceBy {
    /// The trace's slice and phase markers if it has any; otherwise `DEFAULT_SLICES` equal
    /// slices by instructions (or by accesses without instruction counts).
    Auto,
    /// A slice every this many instructions.
    Insn(u64),
    /// A slice every this many accesses.
    Accesses(u64),
}

/// Slices when the trace has no markers and no length is given.
pub const DEFAULT_SLICES: u64 = 64;

/// Site id of accesses outside every live allocation (stack, globals, the allocator's own
/// memory) in [`RawProfile::slice_counts`].
pub const NONHEAP: u32 = u32::MAX;

#[derive(Clone, Debug, Default, Serialize)]
pub struct RawSite {
    /// The site id of the trace.
    pub id: u32,
    /// The call stack, innermost frame first, for display.
    pub frames: Vec<String>,
    /// The frames' keys ([`crate::sitekey`]), one per physical frame; empty in
    /// traces recorded without them.
    pub keys: Vec<String>,
    pub allocs: u64,
    pub bytes_allocated: u64,
    /// Largest number of bytes of this site's allocations live at once.
    pub peak_bytes: u64,
    pub reads: u64,
    pub writes: u64,
}

/// The sites of one call-path depth: raw sites whose first `depth + 1` frames agree (their
/// frame keys when every site has keys, else their display frames).
#[derive(Clone, Debug, Serialize)]
pub struct DepthGroups {
    pub depth: usize,
    pub groups: Vec<Group>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Group {
    /// Display frames (the first member's, cut to the depth).
    pub frames: Vec<String>,
    /// The group's key: its first `depth + 1` frame keys (empty without keys).
    pub keys: Vec<String>,
    pub peak_bytes: u64,
    /// Ids of the raw sites in the group.
    pub sites: Vec<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Slices {
    /// `markers`, `insn` or `accesses`.
    pub source: &'static str,
    /// Slice length in instructions or accesses; for markers, the tracer's `slice_insn` note
    /// (instructions per slice marker), 0 if unknown.
    pub length: u64,
    pub count: usize,
    /// Instruction count at the start of each slice.
    pub start_insn: Vec<u64>,
    /// Accesses before the start of each slice.
    pub start_access: Vec<u64>,
    /// Label of the last phase marker at the start of each slice (`None` before any).
    pub phase_label: Vec<Option<String>>,
    /// Allocation calls before the start of each slice: alloc events other than `mmap`, and
    /// reallocs, as the preloaded allocator counts its calls (its phase markers,
    /// docs/guidance.md "Phase markers").
    pub start_allocs: Vec<u64>,
    /// Instruction count of the first and of the last allocation call in each slice (`None`:
    /// none in the slice, or no instruction counts).
    pub first_alloc_insn: Vec<Option<u64>>,
    pub last_alloc_insn: Vec<Option<u64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RawProfile {
    pub digest: Option<String>,
    pub program: Option<String>,
    pub args: Vec<String>,
    pub page_size: u64,
    pub line_size: u64,
    pub post_cache: bool,
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    /// Instruction count of the last record (0 without instruction counts).
    pub insn: u64,
    /// Allocation calls of the whole run (see [`Slices::start_allocs`]).
    pub alloc_calls: u64,
    pub heap_reads: u64,
    pub heap_writes: u64,
    pub nonheap_reads: u64,
    pub nonheap_writes: u64,
    /// Of the heap accesses, those to memory a freed block last held (dirty lines written
    /// back after the free; [`crate::heap`]), attributed to that block's site.
    pub freed_accesses: u64,
    /// Of the heap accesses, post-cache lines whose first byte is in no live allocation but
    /// which hold the start of one (the arena layout's rule): attributed to that allocation.
    pub lines_by_next_allocation: u64,
    /// Largest number of heap bytes live at once (the dynamic footprint of 000 §3.1).
    pub peak_live_bytes: u64,
    pub sites: Vec<RawSite>,
    /// Sites are grouped by frame keys (every site has them); false: by display frames.
    pub keyed: bool,
    pub depths: Vec<DepthGroups>,
    pub slices: Slices,
    /// `(slice, site, reads, writes)` for every site with accesses in a slice; site
    /// [`NONHEAP`] for accesses outside allocations.
    pub slice_counts: Vec<(u32, u32, u64, u64)>,
    /// Frees of addresses with no live allocation (allocations before tracing started).
    pub unmatched_frees: u64,
    /// Allocations that overlapped a live one (the older one is dropped).
    pub overlapping_allocs: u64,
}

struct Live {
    end: u64,
    site: u32,
}

struct Collector {
    live: BTreeMap<u64, Live>,
    /// Freed blocks' ranges with their sites.
    freed: Freed<u32>,
    /// Bytes of one access of a post-cache trace (0 for a raw trace).
    line_bytes: u64,
    freed_accesses: u64,
    lines_by_next: u64,
    sites: Vec<RawSite>,
    site_live: Vec<u64>,
    heap_live: u64,
    peak_live: u64,
    // per-slice counts, dense by site index (NONHEAP at the end, see `slot`)
    cur: Vec<[u64; 2]>,
    cur_touched: Vec<u32>,
    nonheap_cur: [u64; 2],
    slice_counts: Vec<(u32, u32, u64, u64)>,
    slice: u32,
    unmatched_frees: u64,
    overlapping: u64,
    // alloc/free log for the depth peaks: (site, +bytes or -bytes)
    log: Vec<(u32, i64)>,
    // last hit
    hit_start: u64,
    hit_end: u64,
    hit_site: u32,
}

impl Collector {
    fn site_mut(&mut self, id: u32) -> usize {
        let i = id as usize;
        if i >= self.sites.len() {
            let n = i + 1;
            let old = self.sites.len();
            self.sites.resize_with(n, RawSite::default);
            self.site_live.resize(n, 0);
            self.cur.resize(n, [0, 0]);
            for (j, s) in self.sites.iter_mut().enumerate().skip(old) {
                s.id = j as u32;
            }
        }
        i
    }

    fn alloc(&mut self, addr: u64, size: u64, site: u32) {
        let i = self.site_mut(site);
        let s = &mut self.sites[i];
        s.allocs += 1;
        s.bytes_allocated += size;
        if size == 0 {
            return;
        }
        let end = addr.saturating_add(size);
        // an allocation over a live one means the trace missed a free: drop the old one
        while let Some((&a, l)) = self.live.range(..end).next_back() {
            if l.end <= addr {
                break;
            }
            self.overlapping += 1;
            self.free(a);
        }
        self.live.insert(addr, Live { end, site });
        self.site_live[i] += size;
        self.sites[i].peak_bytes = self.sites[i].peak_bytes.max(self.site_live[i]);
        self.heap_live += size;
        self.peak_live = self.peak_live.max(self.heap_live);
        self.log.push((site, size as i64));
    }

    fn free(&mut self, addr: u64) {
        match self.live.remove(&addr) {
            Some(l) => {
                self.freed.insert(addr, l.end, l.site);
                let size = l.end - addr;
                self.site_live[l.site as usize] -= size;
                self.heap_live -= size;
                self.log.push((l.site, -(size as i64)));
                if self.hit_start == addr {
                    self.hit_end = 0;
                }
            }
            None => {
                if addr != 0 {
                    self.unmatched_frees += 1;
                }
            }
        }
    }

    /// The site an access belongs to, by the rule the arena layout moves accesses by
    /// (`policy::arena_layout`): the live allocation holding the address; for a post-cache
    /// line whose first byte no live allocation holds, the allocation starting inside the
    /// line; else the freed block that last held the address, or for a line, the freed block
    /// starting inside it; else none (non-heap).
    #[inline]
    fn site_of(&mut self, addr: u64) -> u32 {
        if addr >= self.hit_start && addr < self.hit_end {
            return self.hit_site;
        }
        if let Some((&a, l)) = self.live.range(..=addr).next_back() {
            if addr < l.end {
                self.hit_start = a;
                self.hit_end = l.end;
                self.hit_site = l.site;
                return l.site;
            }
        }
        self.site_outside_live(addr)
    }

    #[inline(never)]
    fn site_outside_live(&mut self, addr: u64) -> u32 {
        if self.line_bytes > 0 {
            if let Some((&s, l)) = self.live.range(addr.saturating_add(1)..).next() {
                if s < addr.saturating_add(self.line_bytes) && l.end > s {
                    self.lines_by_next += 1;
                    return l.site;
                }
            }
        }
        let freed =
            self.freed.get(addr).or_else(|| if self.line_bytes > 0 { self.freed.starting_in(addr, addr.saturating_add(self.line_bytes)) } else { None });
        match freed {
            Some((_, _, site)) => {
                self.freed_accesses += 1;
                site
            }
            None => NONHEAP,
        }
    }

    #[inline]
    fn access(&mut self, addr: u64, write: bool) {
        let site = self.site_of(addr);
        if site == NONHEAP {
            self.nonheap_cur[write as usize] += 1;
            return;
        }
        let c = &mut self.cur[site as usize];
        if c[0] == 0 && c[1] == 0 {
            self.cur_touched.push(site);
        }
        c[write as usize] += 1;
    }

    fn end_slice(&mut self) {
        self.cur_touched.sort_unstable();
        for &s in &self.cur_touched {
            let c = std::mem::take(&mut self.cur[s as usize]);
            let site = &mut self.sites[s as usize];
            site.reads += c[0];
            site.writes += c[1];
            self.slice_counts.push((self.slice, s, c[0], c[1]));
        }
        self.cur_touched.clear();
        let nh = std::mem::take(&mut self.nonheap_cur);
        if nh != [0, 0] {
            self.slice_counts.push((self.slice, NONHEAP, nh[0], nh[1]));
        }
        self.slice += 1;
    }
}

/// Profile a trace by allocation site. `progress` is called after every batch with the
/// bytes read and the total; returning false stops the run.
pub fn profile(trace: &dyn TraceOpener, slice_by: SliceBy, mut progress: impl FnMut(u64, Option<u64>) -> bool) -> Result<RawProfile> {
    let summary = trace.summary()?;
    let mut src = trace.open()?;
    let meta = src.meta().clone();
    let slice_by = match slice_by {
        SliceBy::Auto if summary.markers > 0 => None,
        SliceBy::Auto if meta.time_insn && summary.duration_insn > 0 => Some(SliceBy::Insn(summary.duration_insn.div_ceil(DEFAULT_SLICES).max(1))),
        SliceBy::Auto => Some(SliceBy::Accesses(summary.accesses.div_ceil(DEFAULT_SLICES).max(1))),
        SliceBy::Insn(_) if !meta.time_insn => {
            return Err(crate::Error::config("--slice", format!("{} has no instruction counts: give the slice length in accesses", trace.describe())));
        }
        other => Some(other),
    };
    src.set_projection(Projection { insn: true, ns: false, addr: true });

    let mut c = Collector {
        live: BTreeMap::new(),
        freed: Freed::new(),
        line_bytes: if meta.post_cache { meta.line_size.max(1) } else { 0 },
        freed_accesses: 0,
        lines_by_next: 0,
        sites: Vec::new(),
        site_live: Vec::new(),
        heap_live: 0,
        peak_live: 0,
        cur: Vec::new(),
        cur_touched: Vec::new(),
        nonheap_cur: [0, 0],
        slice_counts: Vec::new(),
        slice: 0,
        unmatched_frees: 0,
        overlapping: 0,
        log: Vec::new(),
        hit_start: 0,
        hit_end: 0,
        hit_site: NONHEAP,
    };
    let mut slices = Slices {
        source: match slice_by {
            None => "markers",
            Some(SliceBy::Insn(_)) => "insn",
            _ => "accesses",
        },
        // the tracer's markers come every `slice_insn` instructions (its notes say how many)
        length: match slice_by {
            Some(SliceBy::Insn(n)) | Some(SliceBy::Accesses(n)) => n,
            _ => meta.notes.get("slice_insn").and_then(|v| v.parse().ok()).unwrap_or(0),
        },
        count: 0,
        start_insn: vec![0],
        start_access: vec![0],
        phase_label: vec![None],
        start_allocs: vec![0],
        first_alloc_insn: vec![None],
        last_alloc_insn: vec![None],
    };
    let mut alloc_calls: u64 = 0;
    let mut phase: Option<String> = None;
    let (mut next_insn, mut next_acc) = match slice_by {
        Some(SliceBy::Insn(n)) => (n, u64::MAX),
        Some(SliceBy::Accesses(n)) => (u64::MAX, n),
        _ => (u64::MAX, u64::MAX),
    };
    let mut k: u64 = 0;
    let (mut reads, mut writes) = (0u64, 0u64);
    let mut last_insn = 0u64;
    let mut batch = Batch::default();
    // a new slice starts at a marker or a length boundary; an empty slice (two markers with
    // no access between them) is kept, so slice k is always the k-th marker's
    let new_slice = |c: &mut Collector, slices: &mut Slices, insn: u64, k: u64, phase: &Option<String>, na: u64| {
        c.end_slice();
        slices.start_insn.push(insn);
        slices.start_access.push(k);
        slices.phase_label.push(phase.clone());
        slices.start_allocs.push(na);
        slices.first_alloc_insn.push(None);
        slices.last_alloc_insn.push(None);
    };
    // an allocation call at instruction `insn` (in the slice open now)
    let alloc_call = |slices: &mut Slices, n: &mut u64, insn: u64| {
        *n += 1;
        if meta.time_insn {
            let f = slices.first_alloc_insn.last_mut().expect("a slice is open");
            f.get_or_insert(insn);
            *slices.last_alloc_insn.last_mut().expect("a slice is open") = Some(insn);
        }
    };
    while src.next_batch(&mut batch)? {
        let n = batch.len();
        let has_insn = !batch.insn.is_empty();
        let mut ev = 0;
        let nev = batch.events.len();
        for i in 0..=n {
            while ev < nev && batch.events[ev].at as usize <= i {
                let e = &batch.events[ev];
                ev += 1;
                match &e.kind {
                    EventKind::Site { site, frames, keys } => {
                        let j = c.site_mut(*site);
                        c.sites[j].frames = frames.clone();
                        c.sites[j].keys = keys.clone();
                    }
                    EventKind::Alloc { addr, size, site, func } => {
                        c.alloc(*addr, *size, *site);
                        if *func != AllocFn::Mmap {
                            alloc_call(&mut slices, &mut alloc_calls, e.insn);
                        }
                    }
                    EventKind::Free { addr } => c.free(*addr),
                    EventKind::Realloc { old_addr, addr, size, site } => {
                        c.free(*old_addr);
                        c.alloc(*addr, *size, *site);
                        alloc_call(&mut slices, &mut alloc_calls, e.insn);
                    }
                    EventKind::Marker { marker, label, .. } if slice_by.is_none() => match marker {
                        MarkerKind::Slice => new_slice(&mut c, &mut slices, e.insn, k, &phase, alloc_calls),
                        MarkerKind::Phase => {
                            phase = Some(label.clone());
                            new_slice(&mut c, &mut slices, e.insn, k, &phase, alloc_calls);
                        }
                        MarkerKind::User => {}
                    },
                    EventKind::Marker { .. } => {}
                }
            }
            if i == n {
                break;
            }
            let insn = if has_insn { batch.insn[i] } else { 0 };
            while insn >= next_insn {
                new_slice(&mut c, &mut slices, next_insn, k, &phase, alloc_calls);
                next_insn += slices.length;
            }
            if k == next_acc {
                new_slice(&mut c, &mut slices, insn, k, &phase, alloc_calls);
                next_acc += slices.length;
            }
            let w = batch.write[i];
            c.access(batch.addr[i], w);
            if w {
                writes += 1;
            } else {
                reads += 1;
            }
            last_insn = insn;
            k += 1;
        }
        let p = src.progress();
        if !progress(p.bytes_read, p.bytes_total) {
            return Err(crate::Error::Interrupted);
        }
    }
    c.end_slice();
    slices.count = slices.start_insn.len();
    let digest = src.digest();

    // every depth's groups and their peaks, replayed from the allocation log; sites with
    // frame keys group by them (the display frames of two stacks may agree, say in a
    // stripped program, where their return addresses do not), others by display frames
    let keyed = !c.sites.is_empty() && c.sites.iter().all(|s| !s.keys.is_empty() && s.keys.len() == s.frames.len());
    fn by(s: &RawSite, keyed: bool) -> &[String] {
        if keyed {
            &s.keys
        } else {
            &s.frames
        }
    }
    let max_frames = c.sites.iter().map(|s| by(s, keyed).len()).max().unwrap_or(0).max(1);
    let mut depths = Vec::new();
    for d in 0..max_frames {
        let mut index: HashMap<&[String], usize> = HashMap::new();
        let mut groups: Vec<Group> = Vec::new();
        let mut group_of = vec![0usize; c.sites.len()];
        for s in &c.sites {
            let key = &by(s, keyed)[..by(s, keyed).len().min(d + 1)];
            let g = *index.entry(key).or_insert_with(|| {
                let frames = s.frames[..s.frames.len().min(d + 1)].to_vec();
                let keys = if keyed { key.to_vec() } else { Vec::new() };
                groups.push(Group { frames, keys, peak_bytes: 0, sites: Vec::new() });
                groups.len() - 1
            });
            groups[g].sites.push(s.id);
            group_of[s.id as usize] = g;
        }
        let mut live = vec![0i64; groups.len()];
        for &(s, delta) in &c.log {
            let g = group_of[s as usize];
            live[g] += delta;
            groups[g].peak_bytes = groups[g].peak_bytes.max(live[g].max(0) as u64);
        }
        depths.push(DepthGroups { depth: d, groups });
    }
    let (mut hr, mut hw, mut nr, mut nw) = (0, 0, 0, 0);
    for &(_, s, r, w) in &c.slice_counts {
        if s == NONHEAP {
            nr += r;
            nw += w;
        } else {
            hr += r;
            hw += w;
        }
    }
    Ok(RawProfile {
        digest,
        program: meta.provenance.program.clone(),
        args: meta.provenance.args.clone(),
        page_size: meta.page_size,
        line_size: meta.line_size,
        post_cache: meta.post_cache,
        accesses: k,
        reads,
        writes,
        insn: last_insn,
        alloc_calls,
        heap_reads: hr,
        heap_writes: hw,
        nonheap_reads: nr,
        nonheap_writes: nw,
        freed_accesses: c.freed_accesses,
        lines_by_next_allocation: c.lines_by_next,
        peak_live_bytes: c.peak_live,
        sites: c.sites,
        keyed,
        depths,
        slices,
        slice_counts: c.slice_counts,
        unmatched_frees: c.unmatched_frees,
        overlapping_allocs: c.overlapping,
    })
}
