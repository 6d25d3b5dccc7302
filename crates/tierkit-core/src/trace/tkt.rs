//! The native trace format (`.tkt`): binary, chunked, zstd-compressed, streamable in bounded
//! memory. The byte-level specification is `docs/trace-format.md`; this file implements it.
//!
//! Layout: magic, version, JSON header (with CRC), then chunks. A data chunk holds up to
//! [`BATCH_RECORDS`](super::BATCH_RECORDS) records, column by column, delta- and
//! varint-encoded, then compressed as one zstd frame; each chunk carries its record count, raw
//! and compressed sizes and the CRC-32 of its compressed bytes. The last chunk is the end
//! chunk (the trace's [`Summary`] as JSON), followed by a 16-byte trailer giving the end
//! chunk's offset, so that `trace info` reads a few hundred bytes whatever the trace's size
//! and a truncated trace is recognised as such.

use super::summary::{Summary, SummaryBuilder};
use super::varint::{self, Cursor};
use super::{Access, AllocFn, Batch, Event, EventKind, MarkerKind, Progress, Projection, RecordSource, TraceMeta, BATCH_RECORDS, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::outfile::PartialFile;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"\x89TKT\r\n\x1a\n";
pub const TRAILER_MAGIC: &[u8; 8] = b"TKTEND\x00\x01";
const CHUNK_DATA: u8 = b'D';
const CHUNK_END: u8 = b'E';
const CHUNK_HEADER_LEN: u64 = 17;
/// Upper bound on a chunk's raw size accepted by readers (corruption guard).
const MAX_RAW_CHUNK: u32 = 256 << 20;
const MAX_HEADER: u32 = 16 << 20;
/// Largest page size a header may give: 1 GiB (the largest huge page of common hardware).
pub const MAX_PAGE_SIZE: u64 = 1 << 30;

/// Check the header fields that size or scale what consumers compute, so that an absurd value
/// is an error naming the field and its limits instead of wrapped counters later on.
pub fn check_meta(meta: &TraceMeta) -> std::result::Result<(), String> {
    if !meta.page_size.is_power_of_two() || !(64..=MAX_PAGE_SIZE).contains(&meta.page_size) {
        return Err(format!("page_size {} must be a power of two from 64 to {MAX_PAGE_SIZE} bytes", meta.page_size));
    }
    // sizes are u16 downstream (one transfer of a post-cache access)
    if !meta.line_size.is_power_of_two() || meta.line_size > meta.page_size.min(32768) {
        return Err(format!("line_size {} must be a power of two, at most 32768 and the page size ({})", meta.line_size, meta.page_size));
    }
    Ok(())
}

/// Parse a JSON object (the header or the summary); any other JSON value is refused, since
/// serde would otherwise read an array positionally as the struct's fields.
fn parse_object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> std::result::Result<T, String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if !v.is_object() {
        return Err(format!("expected a JSON object, found {}", json_kind(&v)));
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

// tag byte
const KIND_MASK: u8 = 0x07;
const K_ACCESS: u8 = 0;
const K_ALLOC: u8 = 1;
const K_FREE: u8 = 2;
const K_REALLOC: u8 = 3;
const K_SITE: u8 = 4;
const K_MARKER: u8 = 5;
const F_WRITE: u8 = 0x08;
const F_SIZE: u8 = 0x10;
const F_TID: u8 = 0x20;
const F_PC: u8 = 0x40;
const F_RESERVED: u8 = 0x80;
const INITIAL_SIZE: u16 = super::DEFAULT_ACCESS_SIZE;

/// Encodes the records of one chunk, column by column.
///
/// Addresses are split into a page dictionary (the chunk's distinct pages, in order of first
/// appearance) plus, per access, a fixed-width index into it and the offset within the page.
/// Fixed widths decode without branching, and readers can hand the dictionary to the engine,
/// which then translates each distinct page once per chunk instead of every access.
#[derive(Default)]
struct ChunkEncoder {
    n: u32,
    tags: Vec<u8>,
    /// page number -> index in `pages`
    page_index: rustc_hash::FxHashMap<u64, u32>,
    pages: Vec<u64>,
    /// the last access's page and its index (consecutive accesses mostly share a page)
    last_page: Option<(u64, u32)>,
    idx: Vec<u32>,
    offs: Vec<u32>,
    insn: Vec<u8>,
    ns: Vec<u8>,
    size: Vec<u8>,
    tid: Vec<u8>,
    pc: Vec<u8>,
    ev: Vec<u8>,
    page_shift: u32,
    prev_insn: u64,
    prev_ns: u64,
    prev_size: u16,
    prev_tid: u32,
    prev_pc: u64,
}

impl ChunkEncoder {
    fn reset(&mut self) {
        self.n = 0;
        for v in [&mut self.tags, &mut self.insn, &mut self.ns, &mut self.size, &mut self.tid, &mut self.pc, &mut self.ev] {
            v.clear();
        }
        self.page_index.clear();
        self.pages.clear();
        self.last_page = None;
        self.idx.clear();
        self.offs.clear();
        self.prev_insn = 0;
        self.prev_ns = 0;
        self.prev_size = INITIAL_SIZE;
        self.prev_tid = 0;
        self.prev_pc = 0;
    }

    #[inline]
    fn time(&mut self, meta: &TraceMeta, insn: u64, ns: u64) {
        if meta.time_insn {
            varint::put(&mut self.insn, varint::zigzag(insn.wrapping_sub(self.prev_insn) as i64));
            self.prev_insn = insn;
        }
        if meta.time_ns {
            varint::put(&mut self.ns, varint::zigzag(ns.wrapping_sub(self.prev_ns) as i64));
            self.prev_ns = ns;
        }
    }

    #[inline]
    fn tid_flag(&mut self, tid: u32) -> u8 {
        if tid != self.prev_tid {
            varint::put(&mut self.tid, tid as u64);
            self.prev_tid = tid;
            F_TID
        } else {
            0
        }
    }

    #[inline]
    fn access(&mut self, meta: &TraceMeta, a: &Access) {
        let mut tag = K_ACCESS;
        if a.write {
            tag |= F_WRITE;
        }
        if a.size != self.prev_size {
            tag |= F_SIZE;
            varint::put(&mut self.size, a.size as u64);
            self.prev_size = a.size;
        }
        tag |= self.tid_flag(a.tid);
        if meta.has_pc && a.pc != 0 {
            tag |= F_PC;
            varint::put(&mut self.pc, varint::zigzag(a.pc.wrapping_sub(self.prev_pc) as i64));
            self.prev_pc = a.pc;
        }
        let page = a.addr >> self.page_shift;
        let i = match self.last_page {
            Some((p, i)) if p == page => i,
            _ => {
                let next = self.pages.len() as u32;
                let i = *self.page_index.entry(page).or_insert(next);
                if i == next {
                    self.pages.push(page);
                }
                self.last_page = Some((page, i));
                i
            }
        };
        self.idx.push(i);
        self.offs.push((a.addr & ((1u64 << self.page_shift) - 1)) as u32);
        self.time(meta, a.insn, a.ns);
        self.tags.push(tag);
        self.n += 1;
    }

    fn event(&mut self, meta: &TraceMeta, insn: u64, ns: u64, tid: u32, kind: &EventKind) {
        let put_str = |ev: &mut Vec<u8>, s: &str| {
            varint::put(ev, s.len() as u64);
            ev.extend_from_slice(s.as_bytes());
        };
        let k = match kind {
            EventKind::Alloc { addr, size, site, func } => {
                varint::put(&mut self.ev, *addr);
                varint::put(&mut self.ev, *size);
                varint::put(&mut self.ev, *site as u64);
                self.ev.push(*func as u8);
                K_ALLOC
            }
            EventKind::Free { addr } => {
                varint::put(&mut self.ev, *addr);
                K_FREE
            }
            EventKind::Realloc { old_addr, addr, size, site } => {
                varint::put(&mut self.ev, *old_addr);
                varint::put(&mut self.ev, *addr);
                varint::put(&mut self.ev, *size);
                varint::put(&mut self.ev, *site as u64);
                K_REALLOC
            }
            EventKind::Site { site, frames, keys } => {
                varint::put(&mut self.ev, *site as u64);
                varint::put(&mut self.ev, frames.len() as u64);
                for f in frames {
                    put_str(&mut self.ev, f);
                }
                // version 2: the frame keys, none or one per frame
                varint::put(&mut self.ev, keys.len() as u64);
                for k in keys {
                    put_str(&mut self.ev, k);
                }
                K_SITE
            }
            EventKind::Marker { marker, id, label } => {
                self.ev.push(*marker as u8);
                varint::put(&mut self.ev, *id);
                put_str(&mut self.ev, label);
                K_MARKER
            }
        };
        let tag = k | self.tid_flag(tid);
        self.time(meta, insn, ns);
        self.tags.push(tag);
        self.n += 1;
    }

    fn payload(&self) -> Vec<u8> {
        let mut pages = Vec::with_capacity(self.pages.len() * 3);
        let mut prev = 0u64;
        for &p in &self.pages {
            varint::put(&mut pages, varint::zigzag(p.wrapping_sub(prev) as i64));
            prev = p;
        }
        let iw = index_width(self.pages.len());
        let mut idx = Vec::with_capacity(self.idx.len() * iw);
        for &i in &self.idx {
            idx.extend_from_slice(&i.to_le_bytes()[..iw]);
        }
        // offsets are stored in units of their common granularity (one line for post-cache
        // traces), so most fit in one byte
        let mut offs = Vec::new();
        if !self.offs.is_empty() {
            let g = self.offs.iter().fold(0u32, |a, &o| a | o).trailing_zeros().min(self.page_shift);
            let ow = offset_width(self.page_shift - g);
            offs.reserve(1 + self.offs.len() * ow);
            offs.push(g as u8);
            for &o in &self.offs {
                offs.extend_from_slice(&(o >> g).to_le_bytes()[..ow]);
            }
        }
        let cols = [&self.tags, &pages, &idx, &offs, &self.insn, &self.ns, &self.size, &self.tid, &self.pc, &self.ev];
        let total: usize = cols.iter().map(|c| c.len() + 10).sum::<usize>() + 10;
        let mut out = Vec::with_capacity(total);
        varint::put(&mut out, self.n as u64);
        for c in cols {
            varint::put(&mut out, c.len() as u64);
            out.extend_from_slice(c);
        }
        out
    }
}

/// Bytes per page index for a dictionary of `n` pages.
fn index_width(n: usize) -> usize {
    if n <= 1 << 8 {
        1
    } else if n <= 1 << 16 {
        2
    } else {
        4
    }
}

/// Bytes per in-page offset when a page holds `1 << bits` offset units.
fn offset_width(bits: u32) -> usize {
    if bits <= 8 {
        1
    } else if bits <= 16 {
        2
    } else {
        4
    }
}

/// Number of columns of a data chunk.
const COLUMNS: usize = 10;

/// Writes a native trace. Records go to a temporary file beside the target, which is renamed
/// into place by [`TktWriter::finish`]; an interrupted write never leaves a half trace under
/// the user's name ([`PartialFile`]).
pub struct TktWriter {
    out: BufWriter<File>,
    dest: PartialFile,
    meta: TraceMeta,
    enc: ChunkEncoder,
    summary: SummaryBuilder,
    offset: u64,
    compressor: zstd::bulk::Compressor<'static>,
    incomplete: Option<String>,
    import_losses: std::collections::BTreeMap<String, u64>,
}

impl TktWriter {
    /// Create `path`. Fails with [`Error::Exists`] if it exists and `force` is false.
    pub fn create(path: &Path, meta: &TraceMeta, force: bool) -> Result<TktWriter> {
        Self::create_with_level(path, meta, force, 3)
    }

    pub fn create_with_level(path: &Path, meta: &TraceMeta, force: bool, level: i32) -> Result<TktWriter> {
        check_meta(meta).map_err(|m| Error::config("trace header", m))?;
        let (dest, file) = PartialFile::create(path, force)?;
        let mut meta = meta.clone();
        meta.version = FORMAT_VERSION;
        let mut w = TktWriter {
            summary: SummaryBuilder::new(meta.page_size),
            out: BufWriter::with_capacity(1 << 20, file),
            dest,
            meta,
            enc: ChunkEncoder::default(),
            offset: 0,
            compressor: zstd::bulk::Compressor::new(level).map_err(|e| Error::Invariant(format!("zstd: {e}")))?,
            incomplete: None,
            import_losses: Default::default(),
        };
        w.enc.reset();
        w.enc.page_shift = w.meta.page_size.trailing_zeros();
        w.write_header()?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| self.dest.err(e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn write_header(&mut self) -> Result<()> {
        let json = serde_json::to_vec(&self.meta).map_err(|e| Error::Invariant(e.to_string()))?;
        let mut h = Vec::with_capacity(json.len() + 20);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&FORMAT_VERSION.0.to_le_bytes());
        h.extend_from_slice(&FORMAT_VERSION.1.to_le_bytes());
        h.extend_from_slice(&(json.len() as u32).to_le_bytes());
        h.extend_from_slice(&json);
        h.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        self.put(&h)
    }

    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// Flag the trace as stopping short of the program's end, saying why; stored in the
    /// summary's `incomplete` key. The records written are still a valid trace of what ran.
    pub fn set_incomplete(&mut self, reason: impl Into<String>) {
        self.incomplete = Some(reason.into());
    }

    /// Record what the import that produced these records left out (the source's
    /// [`RecordSource::import_losses`](super::RecordSource::import_losses)); stored in the
    /// summary's `import_losses` key.
    pub fn set_import_losses(&mut self, losses: std::collections::BTreeMap<String, u64>) {
        self.import_losses = losses;
    }

    /// The times a reader gets back: a time base the header does not declare is not stored,
    /// so the summary must not count it either (its durations would describe no record).
    #[inline]
    fn stored_times(&self, insn: u64, ns: u64) -> (u64, u64) {
        (if self.meta.time_insn { insn } else { 0 }, if self.meta.time_ns { ns } else { 0 })
    }

    #[inline]
    pub fn write_access(&mut self, a: &Access) -> Result<()> {
        self.enc.access(&self.meta, a);
        let (insn, ns) = self.stored_times(a.insn, a.ns);
        self.summary.add_access(a.addr, a.write, insn, ns, a.tid);
        if self.enc.n as usize >= BATCH_RECORDS {
            self.flush_chunk()?;
        }
        Ok(())
    }

    pub fn write_event(&mut self, insn: u64, ns: u64, tid: u32, kind: &EventKind) -> Result<()> {
        self.enc.event(&self.meta, insn, ns, tid, kind);
        let (insn, ns) = self.stored_times(insn, ns);
        self.summary.add_event(insn, ns, tid, kind);
        if self.enc.n as usize >= BATCH_RECORDS {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Write a batch, events at their positions.
    pub fn write_batch(&mut self, b: &Batch) -> Result<()> {
        let mut e = 0;
        for i in 0..b.len() {
            while e < b.events.len() && (b.events[e].at as usize) <= i {
                let ev = &b.events[e];
                self.write_event(ev.insn, ev.ns, ev.tid, &ev.kind)?;
                e += 1;
            }
            self.write_access(&b.access(i))?;
        }
        for ev in &b.events[e..] {
            self.write_event(ev.insn, ev.ns, ev.tid, &ev.kind)?;
        }
        Ok(())
    }

    fn write_chunk(&mut self, kind: u8, n: u32, raw: &[u8]) -> Result<()> {
        let comp = self.compressor.compress(raw).map_err(|e| Error::Invariant(format!("zstd: {e}")))?;
        let mut h = [0u8; CHUNK_HEADER_LEN as usize];
        h[0] = kind;
        h[1..5].copy_from_slice(&n.to_le_bytes());
        h[5..9].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        h[9..13].copy_from_slice(&(comp.len() as u32).to_le_bytes());
        h[13..17].copy_from_slice(&crc32fast::hash(&comp).to_le_bytes());
        self.put(&h)?;
        self.put(&comp)
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.enc.n == 0 {
            return Ok(());
        }
        let raw = self.enc.payload();
        let n = self.enc.n;
        self.write_chunk(CHUNK_DATA, n, &raw)?;
        self.enc.reset();
        Ok(())
    }

    /// Flush the last chunk, write the end chunk and trailer, and move the file into place.
    pub fn finish(mut self) -> Result<Summary> {
        self.flush_chunk()?;
        let mut summary = self.summary.finish();
        summary.incomplete = self.incomplete.take();
        summary.import_losses = std::mem::take(&mut self.import_losses);
        let end_offset = self.offset;
        let json = serde_json::to_vec(&summary).map_err(|e| Error::Invariant(e.to_string()))?;
        self.write_chunk(CHUNK_END, 0, &json)?;
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&end_offset.to_le_bytes());
        t[8..].copy_from_slice(TRAILER_MAGIC);
        self.put(&t)?;
        self.out.flush().map_err(|e| self.dest.err(e))?;
        self.dest.commit(self.out.get_ref())?;
        Ok(summary)
    }
}

/// A reader that hashes and counts the bytes it passes on.
struct HashingReader<R> {
    inner: R,
    hasher: blake3::Hasher,
    pos: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

/// Reads a native trace chunk by chunk.
pub struct TktReader {
    input: HashingReader<BufReader<File>>,
    path: String,
    meta: TraceMeta,
    total: u64,
    summary: Option<Summary>,
    done: bool,
    comp: Vec<u8>,
    raw: Vec<u8>,
    dctx: zstd::bulk::Decompressor<'static>,
    records_seen: u64,
    seen: Seen,
    projection: Projection,
    /// The file's major version: site records carry frame keys from version 2 on.
    major: u16,
}

/// What the data chunks held, to check the end chunk's summary against.
#[derive(Default)]
struct Seen {
    accesses: u64,
    writes: u64,
    /// bounds on the distinct pages: the largest chunk dictionary, the sum of them all
    pages_min: u64,
    pages_max: u64,
}

/// Checks of a summary against itself (what [`TktReader::read_summary`] can check without
/// reading the records); an absent key counts as its documented default, 0.
fn check_summary(s: &Summary) -> std::result::Result<(), String> {
    if s.reads.checked_add(s.writes) != Some(s.accesses) {
        return Err(format!(
            "summary keys 'reads' ({}) and 'writes' ({}) do not add up to 'accesses' ({}); absent keys count as 0",
            s.reads, s.writes, s.accesses
        ));
    }
    if s.accesses > s.records {
        return Err(format!("summary key 'accesses' ({}) exceeds 'records' ({}); absent keys count as 0", s.accesses, s.records));
    }
    if s.pages > s.accesses || (s.pages == 0) != (s.accesses == 0) {
        return Err(format!("summary key 'pages' ({}) is impossible for {} accesses; absent keys count as 0", s.pages, s.accesses));
    }
    Ok(())
}

fn read_exact_at<R: Read>(r: &mut HashingReader<R>, buf: &mut [u8], path: &str, what: &str) -> Result<()> {
    let start = r.pos;
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(Error::at_offset(
                    path,
                    start + got as u64,
                    format!("truncated trace: file ends inside the {what} ({} of {} bytes present)", got, buf.len()),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(())
}

/// Is this the start of a native trace?
pub fn sniff(head: &[u8]) -> bool {
    head.len() >= 8 && &head[..8] == MAGIC
}

impl TktReader {
    pub fn open(path: &Path) -> Result<TktReader> {
        let p = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let total = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut input = HashingReader { inner: BufReader::with_capacity(1 << 20, file), hasher: blake3::Hasher::new(), pos: 0 };
        let mut fixed = [0u8; 16];
        read_exact_at(&mut input, &mut fixed, &p, "file header")?;
        if &fixed[..8] != MAGIC {
            return Err(Error::at_offset(&p, 0, "not a tierkit trace (bad magic number)"));
        }
        let major = u16::from_le_bytes([fixed[8], fixed[9]]);
        let minor = u16::from_le_bytes([fixed[10], fixed[11]]);
        if major != FORMAT_VERSION.0 && major != 1 {
            return Err(Error::at_offset(
                &p,
                8,
                format!("trace format version {major}.{minor} is not supported (this tierkit reads 1.x and {}.x)", FORMAT_VERSION.0),
            ));
        }
        let hlen = u32::from_le_bytes([fixed[12], fixed[13], fixed[14], fixed[15]]);
        if hlen > MAX_HEADER {
            return Err(Error::at_offset(&p, 12, format!("corrupt header length {hlen}")));
        }
        let mut json = vec![0u8; hlen as usize];
        read_exact_at(&mut input, &mut json, &p, "file header")?;
        let mut crc = [0u8; 4];
        read_exact_at(&mut input, &mut crc, &p, "file header")?;
        if crc32fast::hash(&json) != u32::from_le_bytes(crc) {
            return Err(Error::at_offset(&p, 16, "corrupt header (checksum mismatch)"));
        }
        let meta: TraceMeta = parse_object(&json).map_err(|e| Error::at_offset(&p, 16, format!("corrupt header: {e}")))?;
        check_meta(&meta).map_err(|e| Error::at_offset(&p, 16, format!("corrupt header: {e}")))?;
        Ok(TktReader {
            input,
            path: p,
            meta,
            total,
            summary: None,
            done: false,
            comp: Vec::new(),
            raw: Vec::new(),
            dctx: zstd::bulk::Decompressor::new().map_err(|e| Error::Invariant(format!("zstd: {e}")))?,
            records_seen: 0,
            seen: Seen::default(),
            projection: Projection::default(),
            major,
        })
    }

    /// The summary from the end chunk, read without decoding the records (seeks to the
    /// trailer). Verifies the trailer and end chunk; a truncated file is an error.
    pub fn read_summary(path: &Path) -> Result<(TraceMeta, Summary)> {
        let r = TktReader::open(path)?;
        let p = r.path.clone();
        let meta = r.meta.clone();
        let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = r.total;
        if len < r.input.pos + 16 {
            return Err(Error::at_offset(&p, len, "truncated trace: no end chunk and trailer"));
        }
        let mut t = [0u8; 16];
        f.seek(SeekFrom::Start(len - 16)).map_err(|e| Error::io(path, e))?;
        f.read_exact(&mut t).map_err(|e| Error::io(path, e))?;
        if &t[8..] != TRAILER_MAGIC {
            return Err(Error::at_offset(&p, len, "truncated or corrupt trace: no trailer at the end of the file (was the write interrupted?)"));
        }
        let end = u64::from_le_bytes(t[..8].try_into().unwrap());
        if end < r.input.pos || end.saturating_add(CHUNK_HEADER_LEN) > len - 16 {
            return Err(Error::at_offset(&p, len - 16, format!("corrupt trailer: end chunk offset {end} is out of range")));
        }
        f.seek(SeekFrom::Start(end)).map_err(|e| Error::io(path, e))?;
        let mut h = [0u8; CHUNK_HEADER_LEN as usize];
        f.read_exact(&mut h).map_err(|e| Error::io(path, e))?;
        let (kind, _n, raw_len, comp_len, crc) = parse_chunk_header(&h);
        if kind != CHUNK_END || end + CHUNK_HEADER_LEN + comp_len as u64 + 16 != len {
            return Err(Error::at_offset(&p, end, "corrupt trace: the trailer does not point at the end chunk"));
        }
        let mut comp = vec![0u8; comp_len as usize];
        f.read_exact(&mut comp).map_err(|e| Error::io(path, e))?;
        if crc32fast::hash(&comp) != crc {
            return Err(Error::at_offset(&p, end, "corrupt end chunk (checksum mismatch)"));
        }
        let raw =
            zstd::bulk::decompress(&comp, raw_len.min(MAX_RAW_CHUNK) as usize).map_err(|e| Error::at_offset(&p, end, format!("corrupt end chunk: {e}")))?;
        let s: Summary = parse_object(&raw).map_err(|e| Error::at_offset(&p, end, format!("corrupt end chunk: {e}")))?;
        check_summary(&s).map_err(|e| Error::at_offset(&p, end, format!("corrupt end chunk: {e}")))?;
        Ok((meta, s))
    }

    /// The summary, once the end chunk has been read (after the last batch).
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    fn decode(&mut self, n: u32, chunk_offset: u64, batch: &mut Batch) -> Result<()> {
        let p = &self.path;
        let bad = |what: &str| Error::at_offset(p, chunk_offset, format!("corrupt data chunk: {what}"));
        let mut c = Cursor::new(&self.raw);
        let count = c.get().ok_or_else(|| bad("record count"))?;
        if count != n as u64 {
            return Err(bad("record count disagrees with the chunk header"));
        }
        let mut cols: [&[u8]; COLUMNS] = [&[]; COLUMNS];
        for col in cols.iter_mut() {
            let len = c.get().ok_or_else(|| bad("column length"))?;
            *col = c.bytes(len as usize).ok_or_else(|| bad("column extends past the chunk"))?;
        }
        if !c.is_done() {
            return Err(bad("trailing bytes after the last column"));
        }
        let [tags, pages, idx, offs, insn, ns, size, tid, pc, ev] = cols;
        if tags.len() != n as usize {
            return Err(bad("tag column length"));
        }
        // one pass for both counts (the summary is checked against the writes)
        let (mut naccess, mut nwrite) = (0usize, 0usize);
        for &t in tags {
            naccess += (t & KIND_MASK == K_ACCESS) as usize;
            nwrite += (t & (KIND_MASK | F_WRITE) == (K_ACCESS | F_WRITE)) as usize;
        }

        // addresses: the page dictionary, then fixed-width indices and offsets, in bulk
        let shift = self.meta.page_size.trailing_zeros();
        let mut cpg = Cursor::new(pages);
        let mut prev = 0u64;
        while !cpg.is_done() {
            prev = prev.wrapping_add(cpg.get_i().ok_or_else(|| bad("page dictionary"))? as u64);
            batch.dict_pages.push(prev);
        }
        let npages = batch.dict_pages.len();
        let (g, offs) = match offs.split_first() {
            Some((&g, rest)) if (g as u32) <= shift => (g as u32, rest),
            Some(_) => return Err(bad("offset granularity larger than the page")),
            None if naccess == 0 => (0, offs),
            None => return Err(bad("offset column is empty")),
        };
        let (iw, ow) = (index_width(npages), offset_width(shift - g));
        if idx.len() != naccess * iw || offs.len() != naccess * ow {
            return Err(bad("page index or offset column length"));
        }
        batch.dict_shift = shift;
        batch.dict_idx.reserve(naccess);
        match iw {
            1 => batch.dict_idx.extend(idx.iter().map(|&b| b as u32)),
            2 => batch.dict_idx.extend(idx.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u32)),
            _ => batch.dict_idx.extend(idx.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        }
        if batch.dict_idx.iter().any(|&i| i as usize >= npages) {
            return Err(bad("page index past the end of the page dictionary"));
        }
        self.seen.accesses += naccess as u64;
        self.seen.writes += nwrite as u64;
        self.seen.pages_min = self.seen.pages_min.max(npages as u64);
        self.seen.pages_max += npages as u64;
        if !self.projection.addr {
            // the consumer works from the dictionary alone; the offsets are still checked, so
            // that what is accepted does not depend on what is decoded
            let units = self.meta.page_size >> g;
            let max_unit = match ow {
                1 => offs.iter().copied().max().map(u64::from),
                2 => offs.chunks_exact(2).map(|o| u16::from_le_bytes([o[0], o[1]]) as u64).max(),
                _ => offs.chunks_exact(4).map(|o| u32::from_le_bytes([o[0], o[1], o[2], o[3]]) as u64).max(),
            };
            if max_unit.is_some_and(|m| m >= units) {
                return Err(bad("in-page offset larger than the page"));
            }
            return self.decode_rest(tags, insn, ns, size, tid, pc, ev, naccess, &bad, batch);
        }
        batch.addr.reserve(naccess);
        let dict = &batch.dict_pages;
        let base = batch.dict_idx.iter().map(|&i| dict[i as usize] << shift);
        let units = self.meta.page_size >> g;
        let mut max_unit = 0u64;
        match ow {
            1 => batch.addr.extend(base.zip(offs).map(|(b, &o)| {
                max_unit = max_unit.max(o as u64);
                b | ((o as u64) << g)
            })),
            2 => batch.addr.extend(base.zip(offs.chunks_exact(2)).map(|(b, o)| {
                let o = u16::from_le_bytes([o[0], o[1]]) as u64;
                max_unit = max_unit.max(o);
                b | (o << g)
            })),
            _ => batch.addr.extend(base.zip(offs.chunks_exact(4)).map(|(b, o)| {
                let o = u32::from_le_bytes([o[0], o[1], o[2], o[3]]) as u64;
                max_unit = max_unit.max(o);
                b | (o << g)
            })),
        }
        if naccess > 0 && max_unit >= units {
            return Err(bad("in-page offset larger than the page"));
        }
        self.decode_rest(tags, insn, ns, size, tid, pc, ev, naccess, &bad, batch)
    }

    /// Everything but the addresses: write flags, times, sizes, threads, pcs and events.
    #[allow(clippy::too_many_arguments)]
    fn decode_rest(
        &self,
        tags: &[u8],
        insn: &[u8],
        ns: &[u8],
        size: &[u8],
        tid: &[u8],
        pc: &[u8],
        ev: &[u8],
        naccess: usize,
        bad: &dyn Fn(&str) -> Error,
        batch: &mut Batch,
    ) -> Result<()> {
        let ti = self.meta.time_insn && self.projection.insn;
        let tn = self.meta.time_ns && self.projection.ns;
        let time_ok = (self.meta.time_insn || insn.is_empty()) && (self.meta.time_ns || ns.is_empty());
        if !time_ok {
            return Err(bad("time column present although the header has no such time base"));
        }
        // time columns the consumer did not ask for are checked without being decoded
        if self.meta.time_insn && !ti && !varint::check_column(insn, tags.len()) {
            return Err(bad("instruction column"));
        }
        if self.meta.time_ns && !tn && !varint::check_column(ns, tags.len()) {
            return Err(bad("timestamp column"));
        }

        // the common chunk: only plain accesses (no events, one size and thread, no pcs):
        // each remaining column in one tight pass
        if size.is_empty() && tid.is_empty() && pc.is_empty() && ev.is_empty() && tags.iter().all(|&t| t & !F_WRITE == K_ACCESS) {
            batch.write.extend(tags.iter().map(|&t| t & F_WRITE != 0));
            if ti && !prefix_sums(insn, tags.len(), &mut batch.insn) {
                return Err(bad("instruction column"));
            }
            if tn && !prefix_sums(ns, tags.len(), &mut batch.ns) {
                return Err(bad("timestamp column"));
            }
            return Ok(());
        }

        // everything else, record by record
        let (mut ci, mut cn, mut cs, mut ct, mut cp, mut ce) =
            (Cursor::new(insn), Cursor::new(ns), Cursor::new(size), Cursor::new(tid), Cursor::new(pc), Cursor::new(ev));
        // columns the reader was not asked for, or the chunk does not carry, stay empty
        let (fill_size, fill_tid, fill_pc) = (!size.is_empty(), !tid.is_empty(), !pc.is_empty());
        let (mut pi, mut pn, mut psz, mut pt, mut ppc) = (0u64, 0u64, INITIAL_SIZE, 0u32, 0u64);
        // fill local vectors, which the compiler keeps in registers, and hand them back after
        let (mut write, mut insn_v, mut ns_v, mut size_v, mut tid_v, mut pc_v, mut events) = (
            std::mem::take(&mut batch.write),
            std::mem::take(&mut batch.insn),
            std::mem::take(&mut batch.ns),
            std::mem::take(&mut batch.size),
            std::mem::take(&mut batch.tid),
            std::mem::take(&mut batch.pc),
            std::mem::take(&mut batch.events),
        );
        write.reserve(naccess);
        if ti {
            insn_v.reserve(naccess);
        }
        let mut a = 0u32; // accesses so far
        for &tag in tags {
            if tag & F_RESERVED != 0 {
                return Err(bad("reserved tag bit set"));
            }
            if tag & F_TID != 0 {
                let v = ct.get().ok_or_else(|| bad("thread id column"))?;
                pt = u32::try_from(v).map_err(|_| bad("thread id out of range"))?;
            }
            if ti {
                pi = pi.wrapping_add(ci.get_i().ok_or_else(|| bad("instruction column"))? as u64);
            }
            if tn {
                pn = pn.wrapping_add(cn.get_i().ok_or_else(|| bad("timestamp column"))? as u64);
            }
            let kind = tag & KIND_MASK;
            if kind == K_ACCESS {
                if tag & F_SIZE != 0 {
                    let v = cs.get().ok_or_else(|| bad("size column"))?;
                    psz = u16::try_from(v).map_err(|_| bad("access size out of range"))?;
                }
                let mut this_pc = 0;
                if tag & F_PC != 0 {
                    ppc = ppc.wrapping_add(cp.get_i().ok_or_else(|| bad("pc column"))? as u64);
                    this_pc = ppc;
                }
                if ti {
                    insn_v.push(pi);
                }
                if tn {
                    ns_v.push(pn);
                }
                write.push(tag & F_WRITE != 0);
                if fill_size {
                    size_v.push(psz);
                }
                if fill_tid {
                    tid_v.push(pt);
                }
                if fill_pc {
                    pc_v.push(this_pc);
                }
                a += 1;
                continue;
            }
            let ev_kind = match kind {
                K_ALLOC => {
                    let addr = ce.get().ok_or_else(|| bad("alloc record"))?;
                    let size = ce.get().ok_or_else(|| bad("alloc record"))?;
                    let site = ce.get().ok_or_else(|| bad("alloc record"))?;
                    let func = ce.byte().and_then(AllocFn::from_u8).ok_or_else(|| bad("alloc function"))?;
                    EventKind::Alloc { addr, size, site: u32::try_from(site).map_err(|_| bad("site id out of range"))?, func }
                }
                K_FREE => EventKind::Free { addr: ce.get().ok_or_else(|| bad("free record"))? },
                K_REALLOC => {
                    let old_addr = ce.get().ok_or_else(|| bad("realloc record"))?;
                    let addr = ce.get().ok_or_else(|| bad("realloc record"))?;
                    let size = ce.get().ok_or_else(|| bad("realloc record"))?;
                    let site = ce.get().ok_or_else(|| bad("realloc record"))?;
                    EventKind::Realloc { old_addr, addr, size, site: u32::try_from(site).map_err(|_| bad("site id out of range"))? }
                }
                K_SITE => {
                    let site = ce.get().ok_or_else(|| bad("site record"))?;
                    let nf = ce.get().ok_or_else(|| bad("site record"))?;
                    if nf > 4096 {
                        return Err(bad("site record with an absurd frame count"));
                    }
                    let mut frames = Vec::with_capacity(nf as usize);
                    for _ in 0..nf {
                        let len = ce.get().ok_or_else(|| bad("site frame"))?;
                        let b = ce.bytes(len as usize).ok_or_else(|| bad("site frame"))?;
                        frames.push(String::from_utf8(b.to_vec()).map_err(|_| bad("site frame is not UTF-8"))?);
                    }
                    let mut keys = Vec::new();
                    if self.major >= 2 {
                        let nk = ce.get().ok_or_else(|| bad("site record"))?;
                        if nk != 0 && nk != nf {
                            return Err(bad("site record with a key count other than 0 or its frame count"));
                        }
                        for _ in 0..nk {
                            let len = ce.get().ok_or_else(|| bad("site key"))?;
                            let b = ce.bytes(len as usize).ok_or_else(|| bad("site key"))?;
                            keys.push(String::from_utf8(b.to_vec()).map_err(|_| bad("site key is not UTF-8"))?);
                        }
                    }
                    EventKind::Site { site: u32::try_from(site).map_err(|_| bad("site id out of range"))?, frames, keys }
                }
                K_MARKER => {
                    let marker = ce.byte().and_then(MarkerKind::from_u8).ok_or_else(|| bad("marker kind"))?;
                    let id = ce.get().ok_or_else(|| bad("marker record"))?;
                    let len = ce.get().ok_or_else(|| bad("marker label"))?;
                    let b = ce.bytes(len as usize).ok_or_else(|| bad("marker label"))?;
                    EventKind::Marker { marker, id, label: String::from_utf8(b.to_vec()).map_err(|_| bad("marker label is not UTF-8"))? }
                }
                _ => return Err(bad(&format!("unknown record kind {kind}"))),
            };
            events.push(Event { at: a, insn: pi, ns: pn, tid: pt, kind: ev_kind });
        }
        batch.write = write;
        batch.insn = insn_v;
        batch.ns = ns_v;
        batch.size = size_v;
        batch.tid = tid_v;
        batch.pc = pc_v;
        batch.events = events;
        let time_done = (!ti || ci.is_done()) && (!tn || cn.is_done());
        if !(time_done && cs.is_done() && ct.is_done() && cp.is_done() && ce.is_done()) {
            return Err(bad("column lengths disagree with the tags"));
        }
        Ok(())
    }
}

/// Decode `n` zig-zag varint differences from `col` into running sums appended to `out`;
/// false if the column is too short or has bytes left over.
fn prefix_sums(col: &[u8], n: usize, out: &mut Vec<u64>) -> bool {
    let mut c = Cursor::new(col);
    let mut v = 0u64;
    out.reserve(n);
    for _ in 0..n {
        match c.get_i() {
            Some(d) => {
                v = v.wrapping_add(d as u64);
                out.push(v);
            }
            None => return false,
        }
    }
    c.is_done()
}

fn parse_chunk_header(h: &[u8]) -> (u8, u32, u32, u32, u32) {
    let u = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
    (h[0], u(1), u(5), u(9), u(13))
}

impl RecordSource for TktReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn set_projection(&mut self, p: Projection) {
        self.projection = p;
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        batch.clear();
        if self.done {
            return Ok(false);
        }
        let p = self.path.clone();
        let off = self.input.pos;
        let mut h = [0u8; CHUNK_HEADER_LEN as usize];
        // distinguish a clean end-of-file without end chunk from a torn chunk header
        let mut first = [0u8; 1];
        match self.input.read(&mut first) {
            Ok(0) => {
                return Err(Error::at_offset(
                    &p,
                    off,
                    format!("truncated trace: file ends after {} records without its end chunk (was the write interrupted?)", self.records_seen),
                ))
            }
            Ok(_) => h[0] = first[0],
            Err(e) => return Err(Error::io(&p, e)),
        }
        read_exact_at(&mut self.input, &mut h[1..], &p, "chunk header")?;
        let (kind, n, raw_len, comp_len, crc) = parse_chunk_header(&h);
        if kind != CHUNK_DATA && kind != CHUNK_END {
            return Err(Error::at_offset(&p, off, format!("corrupt trace: unknown chunk kind 0x{kind:02x}")));
        }
        if raw_len > MAX_RAW_CHUNK || comp_len > MAX_RAW_CHUNK {
            return Err(Error::at_offset(&p, off, format!("corrupt chunk header: sizes {raw_len}/{comp_len}")));
        }
        // checked before the buffer is allocated and zeroed: a few bytes of header must not
        // cost up to 256 MiB (found by fuzzing)
        let left = self.total.saturating_sub(self.input.pos);
        if self.total > 0 && comp_len as u64 > left {
            return Err(Error::at_offset(
                &p,
                off,
                format!("truncated trace: the chunk holds {comp_len} bytes, the file ends {left} bytes after its header (was the write interrupted?)"),
            ));
        }
        self.comp.resize(comp_len as usize, 0);
        let mut comp = std::mem::take(&mut self.comp);
        read_exact_at(&mut self.input, &mut comp, &p, "chunk")?;
        if crc32fast::hash(&comp) != crc {
            self.comp = comp;
            return Err(Error::at_offset(&p, off, "corrupt chunk (checksum mismatch)"));
        }
        self.raw.clear();
        self.raw.reserve(raw_len as usize);
        let res = self.dctx.decompress_to_buffer(&comp, &mut self.raw);
        self.comp = comp;
        match res {
            Ok(got) if got == raw_len as usize => {}
            Ok(got) => return Err(Error::at_offset(&p, off, format!("corrupt chunk: {got} bytes after decompression, header says {raw_len}"))),
            Err(e) => return Err(Error::at_offset(&p, off, format!("corrupt chunk: {e}"))),
        }
        if kind == CHUNK_END {
            let s: Summary = parse_object(&self.raw).map_err(|e| Error::at_offset(&p, off, format!("corrupt end chunk: {e}")))?;
            let mut t = [0u8; 16];
            read_exact_at(&mut self.input, &mut t, &p, "trailer")?;
            if &t[8..] != TRAILER_MAGIC || u64::from_le_bytes(t[..8].try_into().unwrap()) != off {
                return Err(Error::at_offset(&p, off + CHUNK_HEADER_LEN + comp_len as u64, "corrupt trailer"));
            }
            let mut extra = [0u8; 1];
            if matches!(self.input.read(&mut extra), Ok(n) if n > 0) {
                return Err(Error::at_offset(&p, self.input.pos - 1, "unexpected bytes after the trailer"));
            }
            // the summary must describe the records: consumers size and check runs by it
            let seen = &self.seen;
            let disagree = |key: &str, said: u64, held: String| {
                Error::at_offset(&p, off, format!("corrupt end chunk: summary key '{key}' is {said} (0 when absent), the data chunks hold {held}"))
            };
            for (key, said, held) in [
                ("accesses", s.accesses, seen.accesses),
                ("writes", s.writes, seen.writes),
                ("reads", s.reads, seen.accesses - seen.writes),
                ("records", s.records, self.records_seen),
            ] {
                if said != held {
                    return Err(disagree(key, said, held.to_string()));
                }
            }
            // distinct pages: at least the largest chunk dictionary, at most their sum
            if s.pages < seen.pages_min || s.pages > seen.pages_max {
                return Err(disagree("pages", s.pages, format!("between {} and {} distinct pages", seen.pages_min, seen.pages_max)));
            }
            self.summary = Some(s);
            self.done = true;
            return Ok(false);
        }
        self.decode(n, off, batch)?;
        self.records_seen += n as u64;
        Ok(true)
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.input.pos, bytes_total: Some(self.total) }
    }

    fn digest(&self) -> Option<String> {
        Some(self.input.hasher.clone().finalize().to_hex().to_string())
    }

    fn name(&self) -> &str {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{read_all, Event};

    fn sample_meta() -> TraceMeta {
        TraceMeta { time_insn: true, time_ns: true, has_pc: true, ..Default::default() }
    }

    fn write_sample(path: &Path, n: usize) -> (Vec<Access>, Vec<Event>) {
        let meta = sample_meta();
        let mut w = TktWriter::create(path, &meta, false).unwrap();
        let mut accs = Vec::new();
        let mut evs = Vec::new();
        let site = EventKind::Site {
            site: 7,
            frames: vec!["main (a.c:3)".into(), "_start".into()],
            keys: vec!["build-id:4f1c+0x11d7".into(), "file:a.out+0x1040".into()],
        };
        w.write_event(0, 0, 0, &site).unwrap();
        evs.push(Event { at: 0, insn: 0, ns: 0, tid: 0, kind: site });
        for i in 0..n as u64 {
            let a = Access {
                addr: 0x7fff_0000_0000 + (i * 4160) % (1 << 24),
                write: i % 3 == 0,
                insn: i * 10,
                ns: i * 7,
                size: if i % 5 == 0 { 8 } else { 64 },
                tid: (i % 4 == 0) as u32,
                pc: if i % 2 == 0 { 0x400000 + i } else { 0 },
            };
            w.write_access(&a).unwrap();
            accs.push(a);
            if i == 1000 {
                let k = EventKind::Marker { marker: MarkerKind::Slice, id: 1, label: "slice 1".into() };
                w.write_event(a.insn, a.ns, 0, &k).unwrap();
                evs.push(Event { at: 0, insn: a.insn, ns: a.ns, tid: 0, kind: k });
            }
        }
        w.finish().unwrap();
        (accs, evs)
    }

    #[test]
    fn round_trip_records_and_summary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tkt");
        let n = BATCH_RECORDS * 2 + 17;
        let (accs, evs) = write_sample(&p, n);
        let mut r = TktReader::open(&p).unwrap();
        assert_eq!(r.meta(), &{
            let mut m = sample_meta();
            m.version = FORMAT_VERSION;
            m
        });
        let batches = read_all(&mut r).unwrap();
        let got: Vec<Access> = batches.iter().flat_map(|b| (0..b.len()).map(move |i| b.access(i))).collect();
        assert_eq!(got, accs);
        let got_ev: Vec<EventKind> = batches.iter().flat_map(|b| b.events.iter().map(|e| e.kind.clone())).collect();
        assert_eq!(got_ev, evs.iter().map(|e| e.kind.clone()).collect::<Vec<_>>());
        let s = r.summary().unwrap().clone();
        assert_eq!(s.accesses, n as u64);
        assert_eq!(s.records, n as u64 + 2);
        assert_eq!(s.allocation_sites, 1);
        let (_, s2) = TktReader::read_summary(&p).unwrap();
        assert_eq!(s, s2);
        assert_eq!(r.digest().unwrap(), blake3::hash(&std::fs::read(&p).unwrap()).to_hex().to_string());
    }

    #[test]
    fn a_trailer_pointing_past_the_end_is_an_error_not_an_overflow() {
        // found by the fuzzer (2026-11-27): an end-chunk offset near 2^64 overflowed the check
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tkt");
        write_sample(&p, 10);
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 16..n - 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let e = TktReader::read_summary(&p).unwrap_err().to_string();
        assert!(e.contains("end chunk offset") && e.contains("out of range"), "{e}");
    }

    #[test]
    fn incomplete_reason_round_trips_and_is_absent_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cut.tkt");
        let mut w = TktWriter::create(&p, &sample_meta(), false).unwrap();
        w.write_access(&Access { addr: 64, size: 64, ..Default::default() }).unwrap();
        w.set_incomplete("the program was killed by SIGKILL (signal 9)");
        assert_eq!(w.finish().unwrap().incomplete.as_deref(), Some("the program was killed by SIGKILL (signal 9)"));
        let (_, s) = TktReader::read_summary(&p).unwrap();
        assert_eq!(s.incomplete.as_deref(), Some("the program was killed by SIGKILL (signal 9)"));
        assert_eq!(read_all(&mut TktReader::open(&p).unwrap()).unwrap().len(), 1);
        // complete traces carry no key; summaries without it (older traces) or with keys this
        // version does not know still parse
        assert!(!serde_json::to_string(&Summary::default()).unwrap().contains("incomplete"));
        let s: Summary = serde_json::from_str(r#"{"records": 3, "some_future_key": [1]}"#).unwrap();
        assert_eq!((s.records, s.incomplete), (3, None));
    }

    #[test]
    fn import_losses_round_trip_and_are_absent_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("imported.tkt");
        let mut w = TktWriter::create(&p, &sample_meta(), false).unwrap();
        w.write_access(&Access { addr: 64, size: 64, ..Default::default() }).unwrap();
        let losses = std::collections::BTreeMap::from([("prefetches".to_string(), 3), ("markers".to_string(), 1)]);
        w.set_import_losses(losses.clone());
        assert_eq!(w.finish().unwrap().import_losses, losses);
        let (_, s) = TktReader::read_summary(&p).unwrap();
        assert_eq!(s.import_losses, losses);
        // a trace read to its end agrees with its end chunk (the losses are not checked)
        let mut r = TktReader::open(&p).unwrap();
        assert_eq!(read_all(&mut r).unwrap().len(), 1);
        assert_eq!(r.summary().unwrap().import_losses, losses);
        // nothing left out: no key; older summaries without it parse
        assert!(!serde_json::to_string(&Summary::default()).unwrap().contains("import_losses"));
        let s: Summary = serde_json::from_str(r#"{"records": 3}"#).unwrap();
        assert!(s.import_losses.is_empty());
        // sources drop nothing unless they say so
        let src = crate::trace::VecSource::from_accesses(vec![Access::default()]);
        assert!(src.import_losses().is_empty());
    }

    #[test]
    fn refuses_to_overwrite_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tkt");
        std::fs::write(&p, b"precious").unwrap();
        let e = TktWriter::create(&p, &TraceMeta::default(), false).err().unwrap();
        assert!(matches!(e, Error::Exists { .. }));
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        TktWriter::create(&p, &TraceMeta::default(), true).unwrap().finish().unwrap();
        assert!(TktReader::read_summary(&p).is_ok());
    }

    #[test]
    fn truncation_anywhere_is_an_error_with_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tkt");
        write_sample(&p, 5000);
        let full = std::fs::read(&p).unwrap();
        let q = dir.path().join("cut.tkt");
        for cut in [0, 5, 17, full.len() / 3, full.len() / 2, full.len() - 17, full.len() - 1] {
            std::fs::write(&q, &full[..cut]).unwrap();
            let res = TktReader::open(&q).and_then(|mut r| read_all(&mut r).map(|_| ()));
            let e = res.expect_err(&format!("cut at {cut} must fail"));
            let msg = e.to_string();
            assert!(msg.contains("cut.tkt") && msg.contains("offset"), "cut {cut}: {msg}");
            assert!(TktReader::read_summary(&q).is_err());
        }
    }

    #[test]
    fn corruption_anywhere_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tkt");
        write_sample(&p, 3000);
        let full = std::fs::read(&p).unwrap();
        let q = dir.path().join("bad.tkt");
        // flip one bit at a spread of positions; every read must fail cleanly or (if the bit
        // was in a place no check covers) still return exactly the original records
        let mut orig_r = TktReader::open(&p).unwrap();
        let orig: Vec<_> = read_all(&mut orig_r).unwrap().iter().map(|b| b.addr.clone()).collect();
        for pos in (0..full.len()).step_by(full.len() / 97 + 1) {
            let mut bad = full.clone();
            bad[pos] ^= 0x10;
            std::fs::write(&q, &bad).unwrap();
            match TktReader::open(&q).and_then(|mut r| read_all(&mut r)) {
                Err(e) => assert!(e.to_string().contains("bad.tkt"), "{e}"),
                Ok(b) => assert_eq!(b.iter().map(|b| b.addr.clone()).collect::<Vec<_>>(), orig, "undetected corruption at {pos}"),
            }
        }
    }
}
