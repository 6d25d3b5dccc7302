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
use super::{Access, AllocFn, Batch, EventKind, MarkerKind, Progress, RecordSource, TraceMeta, BATCH_RECORDS, FORMAT_VERSION};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"\x89TKT\r\n\x1a\n";
pub const TRAILER_MAGIC: &[u8; 8] = b"TKTEND\x00\x01";
const CHUNK_DATA: u8 = b'D';
const CHUNK_END: u8 = b'E';
const CHUNK_HEADER_LEN: u64 = 17;
/// Upper bound on a chunk's raw size accepted by readers (corruption guard).
const MAX_RAW_CHUNK: u32 = 256 << 20;
const MAX_HEADER: u32 = 16 << 20;

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
#[derive(Default)]
struct ChunkEncoder {
    n: u32,
    tags: Vec<u8>,
    addr: Vec<u8>,
    insn: Vec<u8>,
    ns: Vec<u8>,
    size: Vec<u8>,
    tid: Vec<u8>,
    pc: Vec<u8>,
    ev: Vec<u8>,
    prev_addr: u64,
    prev_insn: u64,
    prev_ns: u64,
    prev_size: u16,
    prev_tid: u32,
    prev_pc: u64,
}

impl ChunkEncoder {
    fn reset(&mut self) {
        self.n = 0;
        for v in [&mut self.tags, &mut self.addr, &mut self.insn, &mut self.ns, &mut self.size, &mut self.tid, &mut self.pc, &mut self.ev] {
            v.clear();
        }
        self.prev_addr = 0;
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
        varint::put(&mut self.addr, varint::zigzag(a.addr.wrapping_sub(self.prev_addr) as i64));
        self.prev_addr = a.addr;
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
            EventKind::Site { site, frames } => {
                varint::put(&mut self.ev, *site as u64);
                varint::put(&mut self.ev, frames.len() as u64);
                for f in frames {
                    put_str(&mut self.ev, f);
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
        let cols = [&self.tags, &self.addr, &self.insn, &self.ns, &self.size, &self.tid, &self.pc, &self.ev];
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

/// Writes a native trace. Records go to a temporary file beside the target, which is renamed
/// into place by [`TktWriter::finish`]; an interrupted write never leaves a half trace under
/// the user's name.
pub struct TktWriter {
    out: BufWriter<File>,
    path: PathBuf,
    tmp: PathBuf,
    meta: TraceMeta,
    enc: ChunkEncoder,
    summary: SummaryBuilder,
    offset: u64,
    compressor: zstd::bulk::Compressor<'static>,
    finished: bool,
}

impl TktWriter {
    /// Create `path`. Fails with [`Error::Exists`] if it exists and `force` is false.
    pub fn create(path: &Path, meta: &TraceMeta, force: bool) -> Result<TktWriter> {
        Self::create_with_level(path, meta, force, 3)
    }

    pub fn create_with_level(path: &Path, meta: &TraceMeta, force: bool, level: i32) -> Result<TktWriter> {
        if !meta.page_size.is_power_of_two() || meta.page_size < 64 {
            return Err(Error::config("page_size", format!("{} is not a power of two of at least 64", meta.page_size)));
        }
        if path.exists() && !force {
            return Err(Error::Exists { path: path.display().to_string() });
        }
        let mut tmp_name = path.file_name().map(|s| s.to_os_string()).unwrap_or_default();
        tmp_name.push(".partial");
        let tmp = path.with_file_name(tmp_name);
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut meta = meta.clone();
        meta.version = FORMAT_VERSION;
        let mut w = TktWriter {
            summary: SummaryBuilder::new(meta.page_size),
            out: BufWriter::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            tmp,
            meta,
            enc: ChunkEncoder::default(),
            offset: 0,
            compressor: zstd::bulk::Compressor::new(level).map_err(|e| Error::Invariant(format!("zstd: {e}")))?,
            finished: false,
        };
        w.enc.reset();
        w.write_header()?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| Error::io(&self.tmp, e))?;
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

    #[inline]
    pub fn write_access(&mut self, a: &Access) -> Result<()> {
        self.enc.access(&self.meta, a);
        self.summary.add_access(a.addr, a.write, a.insn, a.ns, a.tid);
        if self.enc.n as usize >= BATCH_RECORDS {
            self.flush_chunk()?;
        }
        Ok(())
    }

    pub fn write_event(&mut self, insn: u64, ns: u64, tid: u32, kind: &EventKind) -> Result<()> {
        self.enc.event(&self.meta, insn, ns, tid, kind);
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
        let summary = self.summary.finish();
        let end_offset = self.offset;
        let json = serde_json::to_vec(&summary).map_err(|e| Error::Invariant(e.to_string()))?;
        self.write_chunk(CHUNK_END, 0, &json)?;
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&end_offset.to_le_bytes());
        t[8..].copy_from_slice(TRAILER_MAGIC);
        self.put(&t)?;
        self.out.flush().map_err(|e| Error::io(&self.tmp, e))?;
        self.out.get_ref().sync_data().ok();
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        self.finished = true;
        Ok(summary)
    }
}

impl Drop for TktWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.tmp);
        }
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
        if major != FORMAT_VERSION.0 {
            return Err(Error::at_offset(
                &p,
                8,
                format!("trace format version {major}.{minor} is not supported (this tierkit reads {}.x)", FORMAT_VERSION.0),
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
        let meta: TraceMeta =
            serde_json::from_slice(&json).map_err(|e| Error::at_offset(&p, 16, format!("corrupt header: {e}")))?;
        if !meta.page_size.is_power_of_two() || meta.page_size < 64 {
            return Err(Error::at_offset(&p, 16, format!("corrupt header: page size {} is not a power of two", meta.page_size)));
        }
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
        if end < r.input.pos || end + CHUNK_HEADER_LEN > len - 16 {
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
        let raw = zstd::bulk::decompress(&comp, raw_len.min(MAX_RAW_CHUNK) as usize)
            .map_err(|e| Error::at_offset(&p, end, format!("corrupt end chunk: {e}")))?;
        let s: Summary = serde_json::from_slice(&raw).map_err(|e| Error::at_offset(&p, end, format!("corrupt end chunk: {e}")))?;
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
        let mut cols: [&[u8]; 8] = [&[]; 8];
        for col in cols.iter_mut() {
            let len = c.get().ok_or_else(|| bad("column length"))?;
            *col = c.bytes(len as usize).ok_or_else(|| bad("column extends past the chunk"))?;
        }
        if !c.is_done() {
            return Err(bad("trailing bytes after the last column"));
        }
        let [tags, addr, insn, ns, size, tid, pc, ev] = cols;
        if tags.len() != n as usize {
            return Err(bad("tag column length"));
        }
        let (mut ca, mut ci, mut cn, mut cs, mut ct, mut cp, mut ce) =
            (Cursor::new(addr), Cursor::new(insn), Cursor::new(ns), Cursor::new(size), Cursor::new(tid), Cursor::new(pc), Cursor::new(ev));
        let (ti, tn) = (self.meta.time_insn, self.meta.time_ns);
        // columns the chunk does not carry stay empty in the batch (all defaults)
        let (fill_ns, fill_size, fill_tid, fill_pc) = (tn, !size.is_empty(), !tid.is_empty(), !pc.is_empty());
        let (mut pa, mut pi, mut pn, mut psz, mut pt, mut ppc) = (0u64, 0u64, 0u64, INITIAL_SIZE, 0u32, 0u64);
        let naccess = tags.iter().filter(|&&t| t & KIND_MASK == K_ACCESS).count();
        batch.addr.reserve(naccess);
        batch.write.reserve(naccess);
        batch.insn.reserve(naccess);
        for &tag in tags {
            // the common record: a plain access (same size, thread, no pc)
            if tag & !F_WRITE == K_ACCESS {
                if ti {
                    pi = pi.wrapping_add(ci.get_i().ok_or_else(|| bad("instruction column"))? as u64);
                }
                if tn {
                    pn = pn.wrapping_add(cn.get_i().ok_or_else(|| bad("timestamp column"))? as u64);
                }
                pa = pa.wrapping_add(ca.get_i().ok_or_else(|| bad("address column"))? as u64);
                batch.addr.push(pa);
                batch.write.push(tag & F_WRITE != 0);
                batch.insn.push(pi);
                if fill_ns {
                    batch.ns.push(pn);
                }
                if fill_size {
                    batch.size.push(psz);
                }
                if fill_tid {
                    batch.tid.push(pt);
                }
                if fill_pc {
                    batch.pc.push(0);
                }
                continue;
            }
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
                pa = pa.wrapping_add(ca.get_i().ok_or_else(|| bad("address column"))? as u64);
                batch.addr.push(pa);
                batch.write.push(tag & F_WRITE != 0);
                batch.insn.push(pi);
                if fill_ns {
                    batch.ns.push(pn);
                }
                if fill_size {
                    batch.size.push(psz);
                }
                if fill_tid {
                    batch.tid.push(pt);
                }
                if fill_pc {
                    batch.pc.push(this_pc);
                }
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
                    EventKind::Site { site: u32::try_from(site).map_err(|_| bad("site id out of range"))?, frames }
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
            batch.push_event(pi, pn, pt, ev_kind);
        }
        if !(ca.is_done() && ci.is_done() && cn.is_done() && cs.is_done() && ct.is_done() && cp.is_done() && ce.is_done()) {
            return Err(bad("column lengths disagree with the tags"));
        }
        Ok(())
    }
}

fn parse_chunk_header(h: &[u8]) -> (u8, u32, u32, u32, u32) {
    let u = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
    (h[0], u(1), u(5), u(9), u(13))
}

impl RecordSource for TktReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
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
            let s: Summary =
                serde_json::from_slice(&self.raw).map_err(|e| Error::at_offset(&p, off, format!("corrupt end chunk: {e}")))?;
            let mut t = [0u8; 16];
            read_exact_at(&mut self.input, &mut t, &p, "trailer")?;
            if &t[8..] != TRAILER_MAGIC || u64::from_le_bytes(t[..8].try_into().unwrap()) != off {
                return Err(Error::at_offset(&p, off + CHUNK_HEADER_LEN + comp_len as u64, "corrupt trailer"));
            }
            let mut extra = [0u8; 1];
            if matches!(self.input.read(&mut extra), Ok(n) if n > 0) {
                return Err(Error::at_offset(&p, self.input.pos - 1, "unexpected bytes after the trailer"));
            }
            if s.records != self.records_seen {
                return Err(Error::at_offset(
                    &p,
                    off,
                    format!("corrupt trace: end chunk counts {} records, chunks held {}", s.records, self.records_seen),
                ));
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
        let site = EventKind::Site { site: 7, frames: vec!["main (a.c:3)".into(), "_start".into()] };
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
