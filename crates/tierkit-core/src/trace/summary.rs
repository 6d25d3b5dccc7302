//! What `tierkit trace info` reports. The native writer computes it while writing and stores
//! it in the trace's end chunk; for other formats it is computed by one pass over the records.

use super::{Batch, EventKind, RecordSource};
use rustc_hash::FxHashSet as HashSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// All records: accesses plus allocation, free, realloc, site and marker records.
    pub records: u64,
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    /// Distinct pages touched by accesses (of the trace's page size).
    pub pages: u64,
    /// `pages * page_size`.
    pub footprint_bytes: u64,
    pub page_size: u64,
    /// Instructions from the first to the last record (0 without instruction counts).
    pub duration_insn: u64,
    /// Nanoseconds from the first to the last record (0 without timestamps).
    pub duration_ns: u64,
    /// Distinct allocation sites defined in the site table.
    pub allocation_sites: u64,
    pub allocs: u64,
    pub frees: u64,
    pub reallocs: u64,
    pub markers: u64,
    pub threads: u64,
    /// Why the trace stops short of the program's end (e.g. the program was killed by a
    /// signal), when it does; set by the writer ([`TktWriter::set_incomplete`]). Absent in
    /// complete traces and in traces written before this key existed.
    ///
    /// [`TktWriter::set_incomplete`]: super::tkt::TktWriter::set_incomplete
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Records of the source trace that its importer left out, by kind
    /// ([`RecordSource::import_losses`]): for a scan, the source's; in a native trace, those of
    /// the import that made it. Absent when nothing was left out.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub import_losses: BTreeMap<String, u64>,
}

/// Accumulates a [`Summary`] batch by batch.
pub struct SummaryBuilder {
    s: Summary,
    page_shift: u32,
    pages: HashSet<u64>,
    threads: HashSet<u32>,
    sites: HashSet<u32>,
    /// the page and thread of the last access, already in the sets (most accesses repeat them)
    last_page: Option<u64>,
    last_tid: Option<u32>,
    first_insn: Option<u64>,
    last_insn: u64,
    first_ns: Option<u64>,
    last_ns: u64,
}

impl SummaryBuilder {
    pub fn new(page_size: u64) -> SummaryBuilder {
        assert!(page_size.is_power_of_two());
        SummaryBuilder {
            s: Summary { page_size, ..Default::default() },
            page_shift: page_size.trailing_zeros(),
            pages: HashSet::default(),
            threads: HashSet::default(),
            sites: HashSet::default(),
            last_page: None,
            last_tid: None,
            first_insn: None,
            last_insn: 0,
            first_ns: None,
            last_ns: 0,
        }
    }

    #[inline]
    fn time(&mut self, insn: u64, ns: u64) {
        if self.first_insn.is_none() {
            self.first_insn = Some(insn);
            self.first_ns = Some(ns);
        }
        self.last_insn = self.last_insn.max(insn);
        self.last_ns = self.last_ns.max(ns);
    }

    pub fn add_access(&mut self, addr: u64, write: bool, insn: u64, ns: u64, tid: u32) {
        self.s.records += 1;
        self.s.accesses += 1;
        if write {
            self.s.writes += 1;
        } else {
            self.s.reads += 1;
        }
        let page = addr >> self.page_shift;
        if self.last_page != Some(page) {
            self.pages.insert(page);
            self.last_page = Some(page);
        }
        if self.last_tid != Some(tid) {
            self.threads.insert(tid);
            self.last_tid = Some(tid);
        }
        self.time(insn, ns);
    }

    pub fn add_event(&mut self, insn: u64, ns: u64, tid: u32, kind: &EventKind) {
        self.s.records += 1;
        self.threads.insert(tid);
        self.time(insn, ns);
        match kind {
            EventKind::Alloc { .. } => self.s.allocs += 1,
            EventKind::Free { .. } => self.s.frees += 1,
            EventKind::Realloc { .. } => self.s.reallocs += 1,
            EventKind::Site { site, .. } => {
                self.sites.insert(*site);
            }
            EventKind::Marker { .. } => self.s.markers += 1,
        }
    }

    /// Add a batch's records in program order (an event before the access it precedes):
    /// `duration_*` start at the first record, whichever kind it is.
    pub fn add_batch(&mut self, b: &Batch) {
        let mut e = 0;
        for i in 0..b.len() {
            while let Some(ev) = b.events.get(e).filter(|ev| ev.at as usize <= i) {
                self.add_event(ev.insn, ev.ns, ev.tid, &ev.kind);
                e += 1;
            }
            self.add_access(b.addr[i], b.write[i], b.insn_at(i), b.ns_at(i), b.tid_at(i));
        }
        for ev in &b.events[e..] {
            self.add_event(ev.insn, ev.ns, ev.tid, &ev.kind);
        }
    }

    pub fn finish(&self) -> Summary {
        let mut s = self.s.clone();
        s.pages = self.pages.len() as u64;
        s.footprint_bytes = s.pages * s.page_size;
        s.threads = self.threads.len() as u64;
        s.allocation_sites = self.sites.len() as u64;
        s.duration_insn = self.first_insn.map(|f| self.last_insn - f).unwrap_or(0);
        s.duration_ns = self.first_ns.map(|f| self.last_ns - f).unwrap_or(0);
        s
    }
}

/// Read a whole source and summarize it.
pub fn scan(src: &mut dyn RecordSource) -> crate::Result<Summary> {
    let mut b = SummaryBuilder::new(src.meta().page_size);
    let mut batch = Batch::with_capacity(super::BATCH_RECORDS);
    while src.next_batch(&mut batch)? {
        b.add_batch(&batch);
    }
    let mut s = b.finish();
    s.import_losses = src.import_losses();
    Ok(s)
}
