//! DynamoRIO drmemtrace offline traces, in their final form (after raw2trace): one file per
//! thread, each a stream of `trace_entry_t` records. A thread's file is a zip archive of
//! components `chunk.0000`, `chunk.0001`, ... (`*.trace.zip`, today's default), or one gzip,
//! xz or plain stream (`*.trace.gz`, `*.trace`: older releases and builds without zip). The
//! files of one traced process are in `drmemtrace.APP.PID.dir/trace/`.
//!
//! A record is 12 bytes, packed, little-endian: `type` (u16, a `trace_type_t`), `size` (u16:
//! an access's size, an instruction's length, a marker's kind) and `addr` (u64: an address, a
//! pc, a thread or process id, a marker's value). docs/trace-format.md ("drmemtrace") lists the
//! types and what each becomes here; in short: loads and stores are accesses, instruction
//! records advance the instruction count (all threads together) and set the pc, timestamp
//! markers order the threads, and the rest is dropped and counted
//! ([`RecordSource::import_losses`]).
//!
//! Raw offline files (`raw/*.raw*`, before raw2trace) need the traced binaries to be decoded
//! and are refused with the command that converts them.

use super::stream::{self, Compression};
use super::{Access, Batch, Format, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::error::{Error, Result};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes per record (`trace_entry_t` of a 64-bit DynamoRIO build).
pub const ENTRY: usize = 12;

// trace_type_t values (DynamoRIO clients/drcachesim/common/trace_entry.h)
pub const TYPE_READ: u16 = 0;
pub const TYPE_WRITE: u16 = 1;
pub const TYPE_INSTR: u16 = 10;
pub const TYPE_INSTR_BUNDLE: u16 = 17;
pub const TYPE_THREAD: u16 = 22;
pub const TYPE_THREAD_EXIT: u16 = 23;
pub const TYPE_PID: u16 = 24;
pub const TYPE_HEADER: u16 = 25;
pub const TYPE_FOOTER: u16 = 26;
pub const TYPE_MARKER: u16 = 28;
pub const TYPE_ENCODING: u16 = 47;
/// The largest type value documented here (TRACE_TYPE_INSTR_UNTAKEN_JUMP).
pub const TYPE_LAST_KNOWN: u16 = 49;

// trace_marker_type_t values: a marker's kind is in its `size` field
pub const MARKER_TIMESTAMP: u16 = 2;
pub const MARKER_CPU_ID: u16 = 3;
pub const MARKER_FILETYPE: u16 = 9;
pub const MARKER_CACHE_LINE_SIZE: u16 = 10;
pub const MARKER_VERSION: u16 = 12;
pub const MARKER_PAGE_SIZE: u16 = 18;
pub const MARKER_CHUNK_INSTR_COUNT: u16 = 20;
pub const MARKER_CHUNK_FOOTER: u16 = 21;
pub const MARKER_RECORD_ORDINAL: u16 = 22;

/// Trace versions read (the header's `addr`): 2 (TRACE_ENTRY_VERSION_NO_KERNEL_PC) up to 6
/// (TRACE_ENTRY_VERSION_FREQUENT_TIMESTAMPS), and later ones, whose record layout has not
/// changed; a larger value is not a version.
pub const MIN_VERSION: u64 = 2;
pub const MAX_VERSION: u64 = 255;

/// `OFFLINE_FILE_TYPE_*` flags of the filetype marker that matter here.
const FILE_FILTERED: u64 = 0x01;
const FILE_DFILTERED: u64 = 0x100;
const FILE_IFILTERED: u64 = 0x80;

/// What to tell the owner of a raw offline trace.
pub const RAW_REFUSAL: &str = "a raw drmemtrace offline trace (before post-processing): run DynamoRIO's raw2trace on it first (drraw2trace -indir DIR/raw, or any drcachesim run with -indir DIR), then give tierkit DIR/trace";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ty: u16,
    pub size: u16,
    pub addr: u64,
}

impl Entry {
    pub fn parse(b: &[u8]) -> Entry {
        Entry { ty: u16::from_le_bytes([b[0], b[1]]), size: u16::from_le_bytes([b[2], b[3]]), addr: u64::from_le_bytes(b[4..12].try_into().unwrap()) }
    }
    /// The 12 bytes of this record.
    pub fn bytes(&self) -> [u8; ENTRY] {
        let mut b = [0u8; ENTRY];
        b[..2].copy_from_slice(&self.ty.to_le_bytes());
        b[2..4].copy_from_slice(&self.size.to_le_bytes());
        b[4..].copy_from_slice(&self.addr.to_le_bytes());
        b
    }
    fn is_instr(&self) -> bool {
        // TRACE_TYPE_INSTR .. INSTR_RETURN, INSTR_NO_FETCH, INSTR_MAYBE_FETCH, INSTR_SYSENTER,
        // INSTR_TAKEN_JUMP, INSTR_UNTAKEN_JUMP
        matches!(self.ty, 10..=16 | 29..=31 | 48 | 49)
    }
    fn is_prefetch(&self) -> bool {
        // TRACE_TYPE_PREFETCH .. PREFETCH_INSTR, HARDWARE_PREFETCH, PREFETCH_*_L*_NT ..
        matches!(self.ty, 2..=9 | 27 | 32..=46)
    }
}

/// Is this the start of a final drmemtrace thread file? `Ok(false)`: no; `Err`: a drmemtrace
/// file tierkit does not read (a raw offline file, a 32-bit build's 8-byte records), saying
/// what to do. The rule: the first record is a header (type 25, size 0) whose version is
/// from 2 to 255, and the next records, as many as `head` holds up to 8, have known types.
pub fn sniff(head: &[u8]) -> std::result::Result<bool, String> {
    if is_raw(head) {
        return Err(RAW_REFUSAL.into());
    }
    if head.len() < ENTRY {
        return Ok(false);
    }
    let h = Entry::parse(head);
    if h.ty != TYPE_HEADER || h.size != 0 {
        return Ok(false);
    }
    let known = |e: &Entry| e.ty <= TYPE_LAST_KNOWN && e.ty != TYPE_HEADER;
    let wide_ok = (MIN_VERSION..=MAX_VERSION).contains(&h.addr) && head[ENTRY..].chunks_exact(ENTRY).take(8).map(Entry::parse).all(|e| known(&e));
    if wide_ok {
        return Ok(true);
    }
    // a 32-bit build writes 8-byte records: a header whose 4-byte version is followed by a
    // version marker or a thread record
    let v32 = u32::from_le_bytes(head[4..8].try_into().unwrap()) as u64;
    let next32 = Entry { ty: u16::from_le_bytes([head[8], head[9]]), size: u16::from_le_bytes([head[10], head[11]]), addr: 0 };
    if (MIN_VERSION..=MAX_VERSION).contains(&v32) && ((next32.ty == TYPE_MARKER && next32.size == MARKER_VERSION) || next32.ty == TYPE_THREAD) {
        return Err("a drmemtrace trace of a 32-bit DynamoRIO build (8-byte records): tierkit reads those of 64-bit builds (12-byte records)".into());
    }
    Ok(false)
}

/// Does `head` start like a raw offline file: an `offline_entry_t` header (type EXTENDED in
/// the top 3 bits, extension HEADER or HEADER_DEPRECATED, a version from 2 to 64)?
pub fn is_raw(head: &[u8]) -> bool {
    if head.len() < 8 {
        return false;
    }
    let v = u64::from_le_bytes(head[..8].try_into().unwrap());
    if v >> 61 != 6 {
        return false;
    }
    let ext = (v >> 56) & 0x1f;
    let value_b = (v >> 48) & 0xff;
    let value_a = v & ((1 << 48) - 1);
    match ext {
        // OFFLINE_EXT_TYPE_HEADER: valueA the file type flags, valueB the version
        4 => (2..=64).contains(&value_b) && value_a < (1 << 20),
        // OFFLINE_EXT_TYPE_HEADER_DEPRECATED: valueA the version, valueB the file type
        0 => (2..=64).contains(&value_a),
        _ => false,
    }
}

/// Does a file name say raw offline data?
fn raw_name(name: &str) -> bool {
    [".raw", ".raw.gz", ".raw.lz4", ".raw.zip", ".raw.zst"].iter().any(|s| name.ends_with(s))
}

/// The thread files of a drmemtrace directory: `DIR/trace/*` if `DIR/trace` exists, else
/// `DIR/*`, the files named `*.trace.zip`, `*.trace.gz`, `*.trace.xz` or `*.trace`, by name.
pub fn thread_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let d = if dir.join("trace").is_dir() { dir.join("trace") } else { dir.to_path_buf() };
    let shown = d.display().to_string();
    let rd = std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))?;
    let mut files = Vec::new();
    let (mut raw, mut lz4, mut windows) = (false, false, false);
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(&d, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        let p = ent.path();
        if p.is_dir() {
            windows |= name.starts_with("window.");
            raw |= name == "raw";
            continue;
        }
        if [".trace.zip", ".trace.gz", ".trace.xz", ".trace"].iter().any(|s| name.ends_with(s)) {
            files.push(p);
        } else {
            lz4 |= name.ends_with(".trace.lz4");
            raw |= raw_name(&name);
        }
    }
    if files.is_empty() {
        let why = if lz4 {
            "its thread files are lz4-compressed (*.trace.lz4), which tierkit does not read: post-process the trace with zip output (raw2trace's default)"
                .to_string()
        } else if windows {
            "it holds the windows of a multi-window trace: give one window's directory (window.NNNN)".to_string()
        } else if raw {
            RAW_REFUSAL.to_string()
        } else {
            "no drmemtrace thread files (*.trace.zip, *.trace.gz, *.trace) in it".to_string()
        };
        return Err(Error::trace(&shown, why));
    }
    files.sort();
    Ok(files)
}

/// One component of a zip archive, where its data is.
#[derive(Clone, Debug)]
struct ZipChunk {
    name: String,
    data_start: u64,
    compressed: u64,
    size: u64,
    crc: u32,
    deflated: bool,
}

/// The chunks of a thread's zip archive, in order of their numbers.
fn zip_chunks(path: &Path) -> Result<Vec<ZipChunk>> {
    let shown = path.display().to_string();
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut z = zip::ZipArchive::new(BufReader::new(f)).map_err(|e| Error::trace(&shown, format!("not a readable zip archive: {e}")))?;
    let mut chunks = Vec::new();
    for i in 0..z.len() {
        let e = z.by_index_raw(i).map_err(|e| Error::trace(&shown, format!("zip entry {i}: {e}")))?;
        if e.is_dir() {
            continue;
        }
        let name = e.name().to_string();
        let number = name.strip_prefix("chunk.").filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())).and_then(|d| d.parse::<u64>().ok());
        let Some(number) = number else {
            return Err(Error::trace(&shown, format!("unexpected entry '{name}' in a drmemtrace archive (its entries are chunk.NNNN)")));
        };
        let deflated = match e.compression() {
            zip::CompressionMethod::Stored => false,
            zip::CompressionMethod::Deflated => true,
            m => return Err(Error::trace(&shown, format!("{name} is compressed with {m}; tierkit reads stored and deflated chunks"))),
        };
        if e.encrypted() {
            return Err(Error::trace(&shown, format!("{name} is encrypted")));
        }
        let data_start = e.data_start();
        chunks.push((number, ZipChunk { name, data_start, compressed: e.compressed_size(), size: e.size(), crc: e.crc32(), deflated }));
    }
    if chunks.is_empty() {
        return Err(Error::trace(&shown, "a zip archive without chunk.NNNN entries: not a drmemtrace thread file"));
    }
    chunks.sort_by_key(|c| c.0);
    Ok(chunks.into_iter().map(|c| c.1).collect())
}

/// Counts the bytes read from a file into a counter shared by all of a trace's files.
struct Counted<R> {
    inner: R,
    pos: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Where a thread file's records come from.
enum Container {
    /// A zip archive's chunks, read one after the other.
    Zip(Vec<ZipChunk>),
    /// One stream, plain or compressed.
    Stream(Compression),
}

/// Reads a thread file's records, in order, across its chunks.
struct EntryReader {
    path: PathBuf,
    shown: String,
    container: Container,
    /// Index of the next zip chunk to open.
    next_part: usize,
    cur: Option<Box<dyn Read + Send>>,
    /// Name of the chunk being read (zip), for messages.
    part_name: String,
    /// Decompressed bytes of the current part before `buf[lo]`.
    part_off: u64,
    /// Offset in the part of the record last read (what messages point at).
    rec_off: u64,
    part_crc: crc32fast::Hasher,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// BLAKE3 of the decompressed records read (the file's part of the digest).
    hasher: blake3::Hasher,
    pos: Arc<AtomicU64>,
    /// Bytes of the file that progress counts (the chunks' compressed data, or the file).
    total: u64,
    ended: bool,
}

const READ_BYTES: usize = ENTRY * 2730; // ~32 KiB of whole records

impl EntryReader {
    fn open(path: &Path, pos: Arc<AtomicU64>) -> Result<EntryReader> {
        let shown = path.display().to_string();
        let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut magic = [0u8; 6];
        let n = stream::read_full(&mut f, &mut magic).map_err(|e| Error::io(path, e))?;
        let (container, total) = if magic[..n].starts_with(b"PK\x03\x04") || magic[..n].starts_with(b"PK\x05\x06") {
            let chunks = zip_chunks(path)?;
            let total = chunks.iter().map(|c| c.compressed).sum();
            (Container::Zip(chunks), total)
        } else {
            let total = f.metadata().map(|m| m.len()).unwrap_or(0);
            (Container::Stream(Compression::of(&magic[..n])), total)
        };
        Ok(EntryReader {
            path: path.to_path_buf(),
            shown,
            container,
            next_part: 0,
            cur: None,
            part_name: String::new(),
            part_off: 0,
            rec_off: 0,
            part_crc: crc32fast::Hasher::new(),
            buf: vec![0; READ_BYTES],
            lo: 0,
            hi: 0,
            hasher: blake3::Hasher::new(),
            pos,
            total,
            ended: false,
        })
    }

    /// Where the next record is, for messages: "chunk.0003: record 7 (byte 72)".
    fn at(&self) -> (u64, String) {
        let off = self.rec_off;
        let rec = off / ENTRY as u64 + 1;
        match &self.container {
            Container::Zip(_) => (off, format!("{}, record {rec}", self.part_name)),
            Container::Stream(c) => (off, format!("record {rec}{}", c.offset_note())),
        }
    }

    fn err(&self, msg: impl std::fmt::Display) -> Error {
        let (off, at) = self.at();
        Error::at_offset(&self.shown, off, format!("{at}: {msg}"))
    }

    /// Open the next part; false when there is none.
    fn open_part(&mut self) -> Result<bool> {
        match &self.container {
            Container::Stream(c) => {
                if self.next_part > 0 {
                    return Ok(false);
                }
                let f = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
                let r = Counted { inner: f, pos: self.pos.clone() };
                self.cur = Some(stream::decoder(BufReader::with_capacity(1 << 16, r), *c));
            }
            Container::Zip(chunks) => {
                let Some(c) = chunks.get(self.next_part) else { return Ok(false) };
                let mut f = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
                f.seek(SeekFrom::Start(c.data_start)).map_err(|e| Error::io(&self.path, e))?;
                let r = BufReader::with_capacity(1 << 16, Counted { inner: f.take(c.compressed), pos: self.pos.clone() });
                self.cur = Some(if c.deflated { Box::new(flate2::bufread::DeflateDecoder::new(r)) } else { Box::new(r) });
                self.part_name = c.name.clone();
            }
        }
        self.next_part += 1;
        self.part_off = 0;
        self.rec_off = 0;
        self.part_crc = crc32fast::Hasher::new();
        Ok(true)
    }

    /// The current part has ended: check it against the archive's directory.
    fn close_part(&mut self) -> Result<()> {
        if let Container::Zip(chunks) = &self.container {
            let c = &chunks[self.next_part - 1];
            let crc = std::mem::replace(&mut self.part_crc, crc32fast::Hasher::new()).finalize();
            self.rec_off = self.part_off;
            if self.part_off != c.size {
                return Err(self.err(format!("the chunk holds {} bytes, the archive's directory says {}", self.part_off, c.size)));
            }
            if crc != c.crc {
                return Err(self.err("corrupt chunk (CRC-32 mismatch)"));
            }
        }
        self.cur = None;
        Ok(())
    }

    /// The next record, `None` at the end of the file.
    fn next(&mut self) -> Result<Option<Entry>> {
        loop {
            if self.hi - self.lo >= ENTRY {
                let e = Entry::parse(&self.buf[self.lo..self.lo + ENTRY]);
                self.rec_off = self.part_off;
                self.lo += ENTRY;
                self.part_off += ENTRY as u64;
                return Ok(Some(e));
            }
            if self.ended {
                return Ok(None);
            }
            if self.cur.is_none() && !self.open_part()? {
                self.ended = true;
                return Ok(None);
            }
            // refill: keep the start of a record, read after it
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
            let r = self.cur.as_mut().unwrap();
            let got = loop {
                match r.read(&mut self.buf[self.hi..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let what = match &self.container {
                            Container::Zip(_) => "corrupt chunk data",
                            Container::Stream(Compression::Gzip) => "corrupt gzip data",
                            Container::Stream(Compression::Xz) => "corrupt xz data",
                            Container::Stream(Compression::None) => return Err(Error::io(&self.path, e)),
                        };
                        return Err(self.err(format!("{what}: {e}")));
                    }
                }
            };
            if got == 0 {
                // the part has ended
                if self.hi > 0 {
                    self.rec_off = self.part_off;
                    return Err(self.err(format!("truncated: the data ends inside a record ({} of its {ENTRY} bytes present)", self.hi)));
                }
                self.close_part()?;
                continue;
            }
            let new = &self.buf[self.hi..self.hi + got];
            self.part_crc.update(new);
            self.hasher.update(new);
            self.hi += got;
        }
    }
}

/// One thread's file being read.
struct Thread {
    r: EntryReader,
    name: String,
    version: u64,
    filetype: u64,
    os_tid: Option<u64>,
    /// Timestamp of the segment the thread is in (0 before its first timestamp marker).
    seg_ts: u64,
    /// A record read ahead and not yet processed.
    pending: Option<Entry>,
    pc: u64,
    finished: bool,
}

impl Thread {
    /// Open a thread file and read its header and leading metadata, up to its first
    /// timestamp or first other record.
    fn open(path: &Path, pos: Arc<AtomicU64>, line: &mut Option<u64>, page: &mut Option<u64>) -> Result<Thread> {
        let mut r = EntryReader::open(path, pos)?;
        let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let first = r.next()?;
        let h = match first {
            Some(h) if h.ty == TYPE_HEADER && h.size == 0 => h,
            Some(h) if h.ty == TYPE_HEADER => return Err(Error::at_offset(&r.shown, 0, format!("header record of size {} (expected 0)", h.size))),
            _ => {
                // say why: raw data, or anything else
                let mut head = [0u8; 8];
                if let Some(h) = first {
                    head[..8].copy_from_slice(&h.bytes()[..8]);
                }
                let why = if is_raw(&head) {
                    RAW_REFUSAL.to_string()
                } else {
                    "not a drmemtrace trace: it does not begin with a header record (type 25)".to_string()
                };
                return Err(Error::at_offset(&r.shown, 0, why));
            }
        };
        if !(MIN_VERSION..=MAX_VERSION).contains(&h.addr) {
            return Err(Error::at_offset(&r.shown, 0, format!("trace version {} is not one tierkit reads ({MIN_VERSION} and later)", h.addr)));
        }
        let mut t = Thread { r, name, version: h.addr, filetype: 0, os_tid: None, seg_ts: 0, pending: None, pc: 0, finished: false };
        loop {
            let Some(e) = t.r.next()? else {
                return Err(t.r.err("the thread's records end without a footer record (type 26): truncated?"));
            };
            match (e.ty, e.size) {
                (TYPE_MARKER, MARKER_TIMESTAMP) => {
                    t.seg_ts = e.addr;
                    break;
                }
                (TYPE_MARKER, MARKER_FILETYPE) => t.filetype = e.addr,
                (TYPE_MARKER, MARKER_CACHE_LINE_SIZE) => {
                    line.get_or_insert(e.addr);
                }
                (TYPE_MARKER, MARKER_PAGE_SIZE) => {
                    page.get_or_insert(e.addr);
                }
                (TYPE_MARKER, MARKER_VERSION | MARKER_CHUNK_INSTR_COUNT | MARKER_RECORD_ORDINAL) => {}
                (TYPE_THREAD, _) if t.os_tid.is_none() => t.os_tid = Some(e.addr),
                (TYPE_PID, _) => {}
                _ => {
                    t.pending = Some(e);
                    break;
                }
            }
        }
        Ok(t)
    }
}

/// What the records of a trace became that are not accesses.
#[derive(Clone, Debug, Default)]
struct Losses {
    instruction_fetches: u64,
    prefetches: u64,
    flushes: u64,
    encodings: u64,
    markers: u64,
    unknown_records: u64,
}

/// A drmemtrace trace being read: its threads' records interleaved by their timestamps.
pub struct DrmemtraceSource {
    threads: Vec<Thread>,
    meta: TraceMeta,
    name: String,
    /// Instructions of all threads so far.
    insn: u64,
    /// The thread being read, until its next timestamp.
    current: Option<usize>,
    /// Its tierkit thread id.
    current_tid: u32,
    tids: HashMap<u64, u32>,
    losses: Losses,
    pos: Arc<AtomicU64>,
    total: u64,
    done: bool,
}

impl DrmemtraceSource {
    /// Open a trace: a thread file, or a directory of them (`drmemtrace.*.dir` or its `trace/`).
    pub fn open(path: &Path) -> Result<DrmemtraceSource> {
        let files = if path.is_dir() { thread_files(path)? } else { vec![path.to_path_buf()] };
        let pos = Arc::new(AtomicU64::new(0));
        let (mut line, mut page) = (None, None);
        let mut threads = Vec::with_capacity(files.len());
        for f in &files {
            threads.push(Thread::open(f, pos.clone(), &mut line, &mut page)?);
        }
        // tierkit's thread ids in the order the threads start: by first timestamp, then name
        threads.sort_by(|a, b| (a.seg_ts, &a.name).cmp(&(b.seg_ts, &b.name)));
        let total = threads.iter().map(|t| t.r.total).sum();
        let timestamps = threads.iter().any(|t| t.seg_ts != 0);

        let mut meta = TraceMeta { time_insn: true, has_pc: true, post_cache: false, ..Default::default() };
        if let Some(p) = page.filter(|p| p.is_power_of_two() && (4096..=super::tkt::MAX_PAGE_SIZE).contains(p)) {
            meta.page_size = p;
        }
        if let Some(l) = line.filter(|l| l.is_power_of_two() && *l <= meta.page_size.min(32768)) {
            meta.line_size = l;
        }
        meta.provenance.tool = "import:drmemtrace".into();
        meta.provenance.tool_version = env!("CARGO_PKG_VERSION").to_string();
        meta.provenance.source_format = Some(Format::Drmemtrace.name().to_string());
        meta.provenance.source_file = path.file_name().map(|s| s.to_string_lossy().into_owned());
        let n = &mut meta.notes;
        n.insert("address_space".into(), "virtual".into());
        let mut versions: Vec<u64> = threads.iter().map(|t| t.version).collect();
        versions.sort_unstable();
        versions.dedup();
        n.insert("drmemtrace.version".into(), versions.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
        let ft = threads.iter().fold(0, |a, t| a | t.filetype);
        n.insert("drmemtrace.filetype".into(), format!("{ft:#x}"));
        if ft & (FILE_FILTERED | FILE_DFILTERED) != 0 {
            n.insert(
                "drmemtrace.filtered".into(),
                "data addresses were filtered online by the tracer's L0 cache: the trace holds its misses, not every load and store".into(),
            );
        } else if ft & FILE_IFILTERED != 0 {
            n.insert(
                "drmemtrace.filtered".into(),
                "instruction addresses were filtered online: instruction counts are those of the filtered instructions".into(),
            );
        }
        n.insert("drmemtrace.threads".into(), threads.len().to_string());
        n.insert("drmemtrace.os_tids".into(), threads.iter().map(|t| t.os_tid.map_or("?".to_string(), |x| x.to_string())).collect::<Vec<_>>().join(","));
        n.insert(
            "drmemtrace.interleaving".into(),
            if timestamps { "by the threads' timestamp markers" } else { "thread by thread (no timestamp markers)" }.into(),
        );
        Ok(DrmemtraceSource {
            threads,
            meta,
            name: path.display().to_string(),
            insn: 0,
            current: None,
            current_tid: 0,
            tids: HashMap::default(),
            losses: Losses::default(),
            pos,
            total,
            done: false,
        })
    }

    /// tierkit's id of an OS thread id: in order of first appearance, from 0.
    fn tid(&mut self, os: u64) -> u32 {
        let next = self.tids.len() as u32;
        *self.tids.entry(os).or_insert(next)
    }

    /// The thread to read next: the one whose current segment has the smallest timestamp
    /// (the first in tierkit's order on a tie).
    fn pick(&self) -> Option<usize> {
        self.threads.iter().enumerate().filter(|(_, t)| !t.finished).min_by_key(|(i, t)| (t.seg_ts, *i)).map(|(i, _)| i)
    }

    /// Process one record of thread `t`; false when the thread's segment ends (a timestamp or
    /// its footer).
    fn process(&mut self, t: usize, e: Entry, out: &mut Batch) -> Result<bool> {
        let l = &mut self.losses;
        match e.ty {
            TYPE_READ | TYPE_WRITE => {
                let pc = self.threads[t].pc;
                out.push(&Access { addr: e.addr, write: e.ty == TYPE_WRITE, insn: self.insn, size: e.size, tid: self.current_tid, pc, ns: 0 });
            }
            _ if e.is_instr() => {
                self.insn = self.insn.checked_add(1).ok_or_else(|| self.threads[t].r.err("the instruction count overflows 64 bits"))?;
                self.threads[t].pc = e.addr;
                l.instruction_fetches += 1;
            }
            TYPE_INSTR_BUNDLE => {
                self.insn = self.insn.checked_add(e.size as u64).ok_or_else(|| self.threads[t].r.err("the instruction count overflows 64 bits"))?;
                l.instruction_fetches += e.size as u64;
            }
            _ if e.is_prefetch() => l.prefetches += 1,
            18..=21 => l.flushes += 1,
            TYPE_ENCODING => l.encodings += 1,
            TYPE_THREAD => {
                // a file holding several threads (online traces saved to a file) switches here
                self.current_tid = self.tid(e.addr);
            }
            TYPE_THREAD_EXIT | TYPE_PID => {}
            TYPE_HEADER => return Err(self.threads[t].r.err("a second header record")),
            TYPE_FOOTER => {
                let th = &mut self.threads[t];
                if let Some(more) = th.r.next()? {
                    return Err(th.r.err(format!("a record (type {}) after the footer", more.ty)));
                }
                th.finished = true;
                return Ok(false);
            }
            TYPE_MARKER => match e.size {
                MARKER_TIMESTAMP => {
                    self.threads[t].seg_ts = e.addr;
                    return Ok(false);
                }
                MARKER_VERSION
                | MARKER_FILETYPE
                | MARKER_CACHE_LINE_SIZE
                | MARKER_PAGE_SIZE
                | MARKER_CHUNK_INSTR_COUNT
                | MARKER_CHUNK_FOOTER
                | MARKER_RECORD_ORDINAL => {}
                _ => l.markers += 1,
            },
            _ => l.unknown_records += 1,
        }
        Ok(true)
    }
}

impl RecordSource for DrmemtraceSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        batch.clear();
        while !self.done && batch.len() < BATCH_RECORDS {
            let t = match self.current {
                Some(t) => t,
                None => match self.pick() {
                    Some(t) => {
                        self.current = Some(t);
                        let key = self.threads[t].os_tid.unwrap_or(u64::MAX - t as u64);
                        self.current_tid = self.tid(key);
                        t
                    }
                    None => {
                        self.done = true;
                        break;
                    }
                },
            };
            let e = match self.threads[t].pending.take() {
                Some(e) => e,
                None => match self.threads[t].r.next()? {
                    Some(e) => e,
                    None => return Err(self.threads[t].r.err("the thread's records end without a footer record (type 26): truncated?")),
                },
            };
            if !self.process(t, e, batch)? {
                self.current = None;
            }
        }
        Ok(!batch.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.pos.load(Ordering::Relaxed), bytes_total: Some(self.total) }
    }

    /// BLAKE3 over each thread file's name and the BLAKE3 of its decompressed records, the
    /// files in order of name: the same for the same records however they are compressed.
    fn digest(&self) -> Option<String> {
        let mut order: Vec<&Thread> = self.threads.iter().collect();
        order.sort_by(|a, b| a.name.cmp(&b.name));
        let mut h = blake3::Hasher::new();
        for t in order {
            h.update(t.name.as_bytes());
            h.update(&[0]);
            h.update(t.r.hasher.clone().finalize().as_bytes());
        }
        Some(h.finalize().to_hex().to_string())
    }

    fn import_losses(&self) -> BTreeMap<String, u64> {
        let l = &self.losses;
        [
            ("instruction_fetches", l.instruction_fetches),
            ("prefetches", l.prefetches),
            ("flushes", l.flushes),
            ("encodings", l.encodings),
            ("markers", l.markers),
            ("unknown_records", l.unknown_records),
        ]
        .into_iter()
        .filter(|&(_, v)| v > 0)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Is the file at `path` (not a directory) a drmemtrace thread file? Reads its first records
/// (from a zip archive's first chunk); `Err` as for [`sniff`].
pub fn sniff_file(path: &Path) -> std::result::Result<bool, String> {
    // an archive that is not one of chunks (or is unreadable) is not a drmemtrace file;
    // `--format drmemtrace` says what is wrong with it
    let Ok(mut r) = EntryReader::open(path, Arc::new(AtomicU64::new(0))) else { return Ok(false) };
    let mut head = Vec::new();
    for _ in 0..9 {
        match r.next() {
            Ok(Some(e)) => head.extend_from_slice(&e.bytes()),
            Ok(None) => break,
            Err(_) => break,
        }
    }
    if head.len() < ENTRY {
        // an archive whose first chunk is empty or unreadable
        return Ok(false);
    }
    sniff(&head)
}
