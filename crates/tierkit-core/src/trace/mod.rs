//! Layer 1: traces. Records in, records out; nothing here knows about tiers.
//!
//! Every reader (the native `.tkt` format and each text importer) is a [`RecordSource`] that
//! fills a [`Batch`]: a structure of arrays holding up to a few tens of thousands of memory
//! accesses, plus the non-access records (allocations, frees, site definitions, markers) as
//! [`Event`]s that remember which access they precede. The simulator's hot loop walks the
//! arrays; events are rare and handled between accesses.

pub mod champsim;
pub mod clocks;
pub mod convert;
pub mod drmemtrace;
pub mod export;
pub mod input;
pub mod mix;
pub mod opener;
pub mod raw;
pub mod repeat;
pub mod stream;
pub mod summary;
pub mod synth;
pub mod text;
pub mod threaded;
pub mod tkt;
pub mod varint;

pub use input::{Format, TraceInput};
pub use summary::{Summary, SummaryBuilder};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the native format this build writes (major, minor). Readers accept any minor
/// version of their major version; this one also reads major version 1, whose site records
/// have no frame keys (docs/trace-format.md section 11).
pub const FORMAT_VERSION: (u16, u16) = (2, 0);

/// Size of an access whose size a trace does not state (one cache line).
pub const DEFAULT_ACCESS_SIZE: u16 = 64;

/// Default number of accesses a batch holds (also the native format's records per chunk).
pub const BATCH_RECORDS: usize = 1 << 16;

/// How an allocation was made (the allocator entry point the program called).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum AllocFn {
    Malloc = 0,
    Calloc = 1,
    Realloc = 2,
    Memalign = 3,
    New = 4,
    NewArray = 5,
    Mmap = 6,
    Other = 7,
}

impl AllocFn {
    pub fn from_u8(v: u8) -> Option<AllocFn> {
        use AllocFn::*;
        Some(match v {
            0 => Malloc,
            1 => Calloc,
            2 => Realloc,
            3 => Memalign,
            4 => New,
            5 => NewArray,
            6 => Mmap,
            7 => Other,
            _ => return None,
        })
    }
}

/// What a marker delimits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum MarkerKind {
    /// A fixed-length slice of execution (e.g. every K instructions).
    Slice = 0,
    /// A program phase boundary.
    Phase = 1,
    /// A user annotation.
    User = 2,
}

impl MarkerKind {
    pub fn from_u8(v: u8) -> Option<MarkerKind> {
        match v {
            0 => Some(MarkerKind::Slice),
            1 => Some(MarkerKind::Phase),
            2 => Some(MarkerKind::User),
            _ => None,
        }
    }
}

/// A non-access record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    Alloc {
        addr: u64,
        size: u64,
        site: u32,
        func: AllocFn,
    },
    Free {
        addr: u64,
    },
    Realloc {
        old_addr: u64,
        addr: u64,
        size: u64,
        site: u32,
    },
    /// Defines allocation site `site` as a call stack, innermost frame first, each frame a
    /// symbolized string such as `compute_forces (md.c:120)` (for display). `keys`, when
    /// the recorder knew them, are the frames' keys (`build-id:HEX+0xOFFSET`, one per
    /// frame, `frames` then holding one display string per physical frame; see
    /// [`crate::sitekey`]); empty for traces recorded before keys existed or imported.
    Site {
        site: u32,
        frames: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
    },
    Marker {
        marker: MarkerKind,
        id: u64,
        label: String,
    },
}

/// A non-access record with its position in the access stream and its time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Index (within the batch) of the access this event precedes; equal to the batch's
    /// access count for events after the last access.
    pub at: u32,
    pub insn: u64,
    pub ns: u64,
    pub tid: u32,
    pub kind: EventKind,
}

/// One memory access, as a row (convenient for writers and tests; the hot path uses [`Batch`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub addr: u64,
    pub write: bool,
    /// Instructions the program has executed when the access is issued (cumulative).
    pub insn: u64,
    /// Nanoseconds since the start of the trace, when the trace carries them.
    pub ns: u64,
    pub size: u16,
    pub tid: u32,
    /// Program counter of the instruction, 0 when unknown.
    pub pc: u64,
}

/// A batch of records in structure-of-arrays form.
///
/// `write` always holds one entry per access, and so does `addr` unless the batch carries a
/// page dictionary and the consumer said it does not read addresses ([`Projection::addr`];
/// [`Batch::len`] counts accesses either way). The columns `insn`, `ns`, `size`,
/// `tid` and `pc` are either one entry per access or empty, meaning every access has the
/// default (instruction 0, 0 ns, 64 bytes, thread 0, pc unknown): readers leave out what the
/// trace does not carry, or what a [`Projection`] said is not needed. Read them through
/// [`Batch::insn_at`] and friends.
///
/// A reader may also give the batch's *page dictionary*: `dict_pages` holds the distinct
/// page numbers (`addr >> dict_shift`) of the batch's accesses in order of first appearance
/// and `dict_idx[i]` the index of access `i`'s page in it. `dict_shift == 0` means none.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub addr: Vec<u64>,
    pub write: Vec<bool>,
    pub insn: Vec<u64>,
    pub ns: Vec<u64>,
    pub size: Vec<u16>,
    pub tid: Vec<u32>,
    pub pc: Vec<u64>,
    pub events: Vec<Event>,
    pub dict_shift: u32,
    pub dict_pages: Vec<u64>,
    pub dict_idx: Vec<u32>,
    /// Prefetch hints, no part of the stream: addresses a source expects among the next
    /// batches' accesses, whose per-page state (`soon`) or translation (`later`) the engine
    /// may load into the cache ahead (a mix hands out a core's access at a time, too few
    /// for the engine to look ahead within the batch).
    pub soon: Vec<u64>,
    pub later: Vec<u64>,
}

impl Batch {
    pub fn with_capacity(n: usize) -> Batch {
        Batch {
            addr: Vec::with_capacity(n),
            write: Vec::with_capacity(n),
            insn: Vec::with_capacity(n),
            ns: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            tid: Vec::with_capacity(n),
            pc: Vec::with_capacity(n),
            events: Vec::new(),
            dict_shift: 0,
            dict_pages: Vec::new(),
            dict_idx: Vec::new(),
            soon: Vec::new(),
            later: Vec::new(),
        }
    }
    pub fn clear(&mut self) {
        self.addr.clear();
        self.write.clear();
        self.insn.clear();
        self.ns.clear();
        self.size.clear();
        self.tid.clear();
        self.pc.clear();
        self.events.clear();
        self.dict_shift = 0;
        self.dict_pages.clear();
        self.dict_idx.clear();
        self.soon.clear();
        self.later.clear();
    }
    /// Number of accesses (events not counted).
    #[inline]
    pub fn len(&self) -> usize {
        self.write.len()
    }
    pub fn is_empty(&self) -> bool {
        self.write.is_empty() && self.events.is_empty()
    }
    /// Number of records, accesses and events together.
    pub fn records(&self) -> usize {
        self.write.len() + self.events.len()
    }
    #[inline]
    pub fn push(&mut self, a: &Access) {
        self.addr.push(a.addr);
        self.write.push(a.write);
        self.insn.push(a.insn);
        self.ns.push(a.ns);
        self.size.push(a.size);
        self.tid.push(a.tid);
        self.pc.push(a.pc);
    }
    pub fn push_event(&mut self, insn: u64, ns: u64, tid: u32, kind: EventKind) {
        let at = self.write.len() as u32;
        self.events.push(Event { at, insn, ns, tid, kind });
    }
    pub fn access(&self, i: usize) -> Access {
        Access {
            addr: self.addr[i],
            write: self.write[i],
            insn: self.insn_at(i),
            ns: self.ns_at(i),
            size: self.size_at(i),
            tid: self.tid_at(i),
            pc: self.pc_at(i),
        }
    }
    #[inline]
    pub fn insn_at(&self, i: usize) -> u64 {
        self.insn.get(i).copied().unwrap_or(0)
    }
    #[inline]
    pub fn ns_at(&self, i: usize) -> u64 {
        self.ns.get(i).copied().unwrap_or(0)
    }
    #[inline]
    pub fn size_at(&self, i: usize) -> u16 {
        self.size.get(i).copied().unwrap_or(DEFAULT_ACCESS_SIZE)
    }
    #[inline]
    pub fn tid_at(&self, i: usize) -> u32 {
        self.tid.get(i).copied().unwrap_or(0)
    }
    #[inline]
    pub fn pc_at(&self, i: usize) -> u64 {
        self.pc.get(i).copied().unwrap_or(0)
    }
}

/// Where a trace came from and how it was made; stored in the native header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    /// The traced program (path or name), when known.
    pub program: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// The tool that captured or produced the records (e.g. `tierkit-valgrind`,
    /// `import:ramulator`, `tierkit trace synth`).
    pub tool: String,
    pub tool_version: String,
    /// For imported traces: the source format and file name.
    pub source_format: Option<String>,
    pub source_file: Option<String>,
}

/// The header of a trace: everything a reader needs to interpret its records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceMeta {
    pub version: (u16, u16),
    /// Page size the trace was captured for, in bytes (4096 unless stated).
    pub page_size: u64,
    /// Cache-line size in bytes: the size of one memory transfer of a post-cache access.
    pub line_size: u64,
    /// Accesses carry a cumulative instruction count.
    pub time_insn: bool,
    /// Accesses carry a timestamp in ns.
    pub time_ns: bool,
    /// Accesses carry program counters.
    pub has_pc: bool,
    /// Accesses are last-level-cache misses and dirty writebacks (true), or the raw
    /// load/store stream of the program (false).
    pub post_cache: bool,
    /// The cache-filter configuration that produced a post-cache stream, if tierkit's.
    pub cache_filter: Option<String>,
    pub provenance: Provenance,
    /// Free-form key/value notes.
    pub notes: BTreeMap<String, String>,
}

impl Default for TraceMeta {
    fn default() -> Self {
        TraceMeta {
            version: FORMAT_VERSION,
            page_size: 4096,
            line_size: 64,
            time_insn: false,
            time_ns: false,
            has_pc: false,
            post_cache: true,
            cache_filter: None,
            provenance: Provenance::default(),
            notes: BTreeMap::new(),
        }
    }
}

/// Called after every batch with (bytes or records done, total if known); returning false
/// stops the work with [`Error::Interrupted`](crate::Error::Interrupted).
pub type ProgressFn<'a> = dyn FnMut(u64, Option<u64>) -> bool + 'a;

/// Progress of a source through its input, for progress bars.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub bytes_read: u64,
    pub bytes_total: Option<u64>,
}

/// Which optional columns a consumer will read. Readers may skip decoding the others and
/// leave them empty in the batches they fill. Everything is wanted unless said otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Projection {
    pub insn: bool,
    pub ns: bool,
    /// When false, a reader that fills the page dictionary may leave `addr` empty (the
    /// consumer works from `dict_pages`/`dict_idx`). Readers without a dictionary always fill
    /// `addr`.
    pub addr: bool,
}

impl Default for Projection {
    fn default() -> Self {
        Projection { insn: true, ns: true, addr: true }
    }
}

/// Anything that yields records: the native reader, text importers, the cache filter,
/// synthetic generators.
pub trait RecordSource: Send {
    fn meta(&self) -> &TraceMeta;
    /// Say which optional columns will be read (a hint; sources may ignore it).
    fn set_projection(&mut self, _p: Projection) {}
    /// Clear `batch` and fill it with the next records. Returns `false` (and an empty batch)
    /// at the end of the trace.
    fn next_batch(&mut self, batch: &mut Batch) -> crate::Result<bool>;
    fn progress(&self) -> Progress {
        Progress::default()
    }
    /// BLAKE3 digest (hex) of the input bytes consumed so far; complete once the source is
    /// exhausted. `None` for sources without input bytes (synthetic generators).
    fn digest(&self) -> Option<String> {
        None
    }
    /// Records of the input that the source read but could not express as tierkit records,
    /// counted by kind (e.g. a drmemtrace trace's `instruction_fetches`): what an importer of
    /// a richer format leaves out, never silently (docs/trace-format.md, per format). Complete
    /// once the source is exhausted; empty for sources that drop nothing.
    fn import_losses(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
    /// The name of the input, for messages.
    fn name(&self) -> &str;
}

/// Drain a source into a vector of batches (tests and small traces only).
pub fn read_all(src: &mut dyn RecordSource) -> crate::Result<Vec<Batch>> {
    let mut out = Vec::new();
    loop {
        let mut b = Batch::with_capacity(BATCH_RECORDS);
        if !src.next_batch(&mut b)? {
            break;
        }
        out.push(b);
    }
    Ok(out)
}

/// A vector of rows as a source (tests, Python-built traces).
pub struct VecSource {
    meta: TraceMeta,
    accesses: Vec<Access>,
    events: Vec<(usize, Event)>,
    pos: usize,
    ev_pos: usize,
    name: String,
}

impl VecSource {
    /// `events` pairs an event with the index of the access it precedes (in `accesses`).
    pub fn new(meta: TraceMeta, accesses: Vec<Access>, events: Vec<(usize, Event)>) -> VecSource {
        VecSource { meta, accesses, events, pos: 0, ev_pos: 0, name: "<memory>".into() }
    }
    pub fn from_accesses(accesses: Vec<Access>) -> VecSource {
        VecSource::new(TraceMeta::default(), accesses, Vec::new())
    }
}

impl RecordSource for VecSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn next_batch(&mut self, batch: &mut Batch) -> crate::Result<bool> {
        batch.clear();
        let end = (self.pos + BATCH_RECORDS).min(self.accesses.len());
        for i in self.pos..end {
            while self.ev_pos < self.events.len() && self.events[self.ev_pos].0 <= i {
                let e = self.events[self.ev_pos].1.clone();
                batch.push_event(e.insn, e.ns, e.tid, e.kind);
                self.ev_pos += 1;
            }
            batch.push(&self.accesses[i]);
        }
        self.pos = end;
        if self.pos >= self.accesses.len() {
            while self.ev_pos < self.events.len() {
                let e = self.events[self.ev_pos].1.clone();
                batch.push_event(e.insn, e.ns, e.tid, e.kind);
                self.ev_pos += 1;
            }
        }
        Ok(!batch.is_empty())
    }
    fn name(&self) -> &str {
        &self.name
    }
}
