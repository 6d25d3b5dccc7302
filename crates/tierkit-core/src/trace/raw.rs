//! `tierkit trace record`: the raw stream of tierkit's Valgrind tool, and the driver that runs
//! a program under the tool and writes a native trace.
//!
//! The tool (`tracer/tk_main.c`, whose top comment specifies the stream byte by byte, as does
//! `docs/trace-format.md` section 19) writes records in execution order to a pipe. [`RawSource`]
//! decodes them into batches, in bounded memory whatever the program's length; [`record`]
//! spawns `valgrind`, feeds the batches to a [`TktWriter`], and waits for the program. The
//! program's standard streams are its own; its exit status comes back in the report.
//!
//! A stream that stops without its end record (the program was killed by SIGKILL), a
//! program killed by a signal, or an `execve` that replaced the program, all give a valid
//! trace of what ran, flagged with the reason in the summary's `incomplete` key.

use super::summary::Summary;
use super::tkt::TktWriter;
use super::{AllocFn, Batch, EventKind, MarkerKind, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::cache::{CacheSpec, LevelSpec, LevelStats};
use crate::error::{Error, Result};
use serde::Serialize;
use std::io::Read;

/// The stream's first bytes.
pub const RAW_MAGIC: &[u8; 8] = b"TKVGRAW\0";
/// The stream version the tool writes. Version 1 (site records without frame keys) is
/// still read.
pub const RAW_VERSION: u16 = 2;

const T_THREAD: u8 = 0x80;
const T_ALLOC: u8 = 0x81;
const T_FREE: u8 = 0x82;
const T_REALLOC: u8 = 0x83;
const T_SITE: u8 = 0x84;
const T_MARKER: u8 = 0x85;
const T_FORK: u8 = 0x86;
const T_EXEC: u8 = 0x87;
const T_END: u8 = 0x88;
const SIZE_LINE: u8 = 63;

/// What the tool says about itself and its configuration at the start of the stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RawHeader {
    pub version: u16,
    /// Accesses are filtered through the tool's cache (last-level misses and writebacks).
    pub post_cache: bool,
    /// Instructions per slice marker; 0 = no markers.
    pub slice_insn: u64,
    /// Frames per allocation site.
    pub context: u64,
    /// The cache levels, innermost first (named L1, L2, ... here; the tool knows no names).
    pub levels: Vec<LevelSpec>,
    /// The Valgrind version the tool was built against.
    pub valgrind_version: String,
    /// Process id of the traced program.
    pub pid: u64,
}

impl RawHeader {
    pub fn line_bytes(&self) -> u64 {
        self.levels.first().map(|l| l.line_bytes as u64).unwrap_or(64)
    }
}

/// The end record: totals the tool counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RawEnd {
    /// Guest instructions the program executed (all threads).
    pub instructions: u64,
    /// Loads and stores before the cache (a modify counts as one of each).
    pub raw_loads: u64,
    pub raw_stores: u64,
    /// Per cache level, innermost first (empty without a cache).
    pub cache: Vec<LevelStats>,
}

/// Reads bytes through a 1 MiB buffer; counts what it consumed.
struct ByteReader<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// stream offset of `buf[0]`
    base: u64,
    eof: bool,
}

/// Why a read stopped.
enum Stop {
    /// The input ended (cleanly, or in the middle of a record).
    Eof,
    Io(std::io::Error),
    /// A value the format does not allow.
    Bad(String),
}

type R2<T> = std::result::Result<T, Stop>;

impl<R: Read> ByteReader<R> {
    fn new(inner: R) -> Self {
        ByteReader { inner, buf: vec![0u8; 1 << 20].into_boxed_slice(), pos: 0, len: 0, base: 0, eof: false }
    }

    /// Bytes consumed so far.
    fn consumed(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Read more; false at the end of the input.
    #[cold]
    fn fill(&mut self) -> R2<bool> {
        if self.eof {
            return Ok(false);
        }
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        loop {
            match self.inner.read(&mut self.buf[self.len..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.len += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
    }

    /// True if no byte is left (reads more if needed).
    fn at_end(&mut self) -> R2<bool> {
        Ok(self.pos == self.len && !self.fill()?)
    }

    #[inline]
    fn u8(&mut self) -> R2<u8> {
        if self.pos == self.len && !self.fill()? {
            return Err(Stop::Eof);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn varint(&mut self) -> R2<u64> {
        // fast path: a whole varint is buffered, so no per-byte refill checks
        if let Some(w) = self.buf[..self.len].get(self.pos..self.pos + 10) {
            let mut v = 0u64;
            for (k, &b) in w.iter().enumerate() {
                v |= ((b & 0x7f) as u64) << (7 * k);
                if b < 0x80 {
                    if k == 9 && b > 1 {
                        break;
                    }
                    self.pos += k + 1;
                    return Ok(v);
                }
            }
            return Err(Stop::Bad("varint longer than 10 bytes or above 64 bits".into()));
        }
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(Stop::Bad("varint longer than 10 bytes or above 64 bits".into()));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(Stop::Bad("varint longer than 10 bytes or above 64 bits".into()));
            }
        }
    }

    fn string(&mut self) -> R2<String> {
        let n = self.varint()?;
        if n > 1 << 20 {
            return Err(Stop::Bad(format!("string of {n} bytes")));
        }
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(self.u8()?);
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// A [`RecordSource`] over the tool's raw stream.
pub struct RawSource<R: Read + Send> {
    input: ByteReader<R>,
    header: RawHeader,
    meta: TraceMeta,
    name: String,
    prev_addr: u64,
    time: u64,
    tid: u32,
    line_size: u16,
    /// Set when the stream is over (end record, end of input or a decoding failure).
    done: bool,
    end: Option<RawEnd>,
    /// Why the stream stopped early, if it did.
    cut: Option<String>,
    forks: u64,
    exec_pending: bool,
    /// Stream offset of the record being decoded.
    record_start: u64,
    /// Object identities of the sites' frames, by path.
    objects: crate::sitekey::ObjectIds,
}

impl<R: Read + Send> RawSource<R> {
    /// Read the stream's header. An input that ends before a whole header is an error naming
    /// `name`.
    pub fn new(input: R, name: &str) -> Result<RawSource<R>> {
        let mut r = ByteReader::new(input);
        let header = Self::read_header(&mut r).map_err(|s| match s {
            Stop::Eof => Error::trace(name, "the stream ends before its header (the tool did not start)"),
            Stop::Io(e) => Error::io(name, e),
            Stop::Bad(m) => Error::at_offset(name, r.consumed(), m),
        })?;
        let mut meta = TraceMeta { time_insn: true, post_cache: header.post_cache, ..Default::default() };
        meta.line_size = header.line_bytes();
        if header.post_cache {
            meta.cache_filter = Some(CacheSpec { levels: header.levels.clone() }.describe());
        }
        meta.provenance.tool = "tierkit-valgrind".into();
        meta.provenance.tool_version = env!("CARGO_PKG_VERSION").into();
        meta.notes.insert("valgrind_version".into(), header.valgrind_version.clone());
        meta.notes.insert("context_frames".into(), header.context.to_string());
        meta.notes.insert("slice_insn".into(), header.slice_insn.to_string());
        let line_size = header.line_bytes() as u16;
        Ok(RawSource {
            input: r,
            header,
            meta,
            name: name.to_string(),
            prev_addr: 0,
            time: 0,
            tid: 0,
            line_size,
            done: false,
            end: None,
            cut: None,
            forks: 0,
            exec_pending: false,
            record_start: 0,
            objects: Default::default(),
        })
    }

    fn read_header(r: &mut ByteReader<R>) -> R2<RawHeader> {
        let mut magic = [0u8; 8];
        for b in magic.iter_mut() {
            *b = r.u8()?;
        }
        if &magic != RAW_MAGIC {
            return Err(Stop::Bad("not a tierkit-valgrind stream (bad magic)".into()));
        }
        let version = u16::from_le_bytes([r.u8()?, r.u8()?]);
        if version != RAW_VERSION && version != 1 {
            return Err(Stop::Bad(format!("stream version {version}; this tierkit reads versions 1 and {RAW_VERSION} (rebuild the tracer: make build)")));
        }
        let flags = u16::from_le_bytes([r.u8()?, r.u8()?]);
        let slice_insn = r.varint()?;
        let context = r.varint()?;
        let n = r.varint()?;
        if n > 8 {
            return Err(Stop::Bad(format!("{n} cache levels")));
        }
        let mut levels = Vec::new();
        for i in 0..n {
            let size_bytes = r.varint()?;
            let ways = r.varint()?;
            let line = r.varint()?;
            if ways == 0 || ways > u32::MAX as u64 || line == 0 || !line.is_power_of_two() || line > u16::MAX as u64 {
                return Err(Stop::Bad("impossible cache geometry".into()));
            }
            levels.push(LevelSpec { name: format!("L{}", i + 1), size_bytes, ways: ways as u32, line_bytes: line as u32 });
        }
        let valgrind_version = r.string()?;
        let pid = r.varint()?;
        Ok(RawHeader { version, post_cache: flags & 1 != 0, slice_insn, context, levels, valgrind_version, pid })
    }

    pub fn header(&self) -> &RawHeader {
        &self.header
    }

    /// The header the native trace will carry (provenance and notes may be added).
    pub fn meta_mut(&mut self) -> &mut TraceMeta {
        &mut self.meta
    }

    /// The end record, once read.
    pub fn end(&self) -> Option<&RawEnd> {
        self.end.as_ref()
    }

    /// Why the stream stopped without its end record, once it has.
    pub fn cut_short(&self) -> Option<&str> {
        self.cut.as_deref()
    }

    /// The instruction count of the last timed record read.
    pub fn time(&self) -> u64 {
        self.time
    }

    /// How many times the program forked (children are not traced).
    pub fn forks(&self) -> u64 {
        self.forks
    }

    /// The last record before the stream stopped was an `execve`.
    pub fn ended_in_exec(&self) -> bool {
        self.exec_pending && self.end.is_none()
    }

    fn stop(&mut self, s: Stop) {
        self.done = true;
        let at = self.input.consumed();
        self.cut = Some(match s {
            Stop::Eof if at == self.record_start => "the tool's stream stopped without its end record".to_string(),
            Stop::Eof => format!("the tool's stream stopped in the middle of a record (byte {at})"),
            Stop::Io(e) => format!("reading the tool's stream failed at byte {at}: {e}"),
            Stop::Bad(m) => format!("the tool's stream is corrupt at byte {at}: {m}"),
        });
    }

    #[inline]
    fn time_delta(&mut self) -> R2<u64> {
        let d = self.input.varint()?;
        self.time = self.time.checked_add(d).ok_or_else(|| Stop::Bad("instruction count overflows".into()))?;
        Ok(self.time)
    }

    /// Decode records into `b` until it is full or the stream is over.
    fn fill_batch(&mut self, b: &mut Batch) -> R2<()> {
        let limit = BATCH_RECORDS;
        while b.records() < limit {
            self.record_start = self.input.consumed();
            if self.input.at_end()? {
                return Err(Stop::Eof);
            }
            let tag = self.input.u8()?;
            if tag < 0x80 {
                let size = match tag & 0x3f {
                    0 => {
                        let s = self.input.varint()?;
                        u16::try_from(s).map_err(|_| Stop::Bad(format!("access size {s}")))?
                    }
                    SIZE_LINE => self.line_size,
                    s => s as u16,
                };
                let d = self.input.varint()?;
                let addr = self.prev_addr.wrapping_add(super::varint::unzigzag(d) as u64);
                self.prev_addr = addr;
                let insn = self.time_delta()?;
                b.addr.push(addr);
                b.write.push(tag & 0x40 != 0);
                b.insn.push(insn);
                b.size.push(size);
                b.tid.push(self.tid);
                self.exec_pending = false;
                continue;
            }
            let kind = match tag {
                T_THREAD => {
                    let t = self.input.varint()?;
                    self.tid = u32::try_from(t).map_err(|_| Stop::Bad(format!("thread id {t}")))?;
                    continue;
                }
                T_FORK => {
                    self.forks += 1;
                    continue;
                }
                T_EXEC => {
                    self.time_delta()?;
                    self.exec_pending = true;
                    continue;
                }
                T_END => {
                    let instructions = self.time_delta()?;
                    let raw_loads = self.input.varint()?;
                    let raw_stores = self.input.varint()?;
                    let n = self.input.varint()?;
                    let mut cache = Vec::new();
                    for i in 0..n.min(8) {
                        let name = self.header.levels.get(i as usize).map(|l| l.name.clone()).unwrap_or_default();
                        let (accesses, hits, misses, writebacks) = (self.input.varint()?, self.input.varint()?, self.input.varint()?, self.input.varint()?);
                        cache.push(LevelStats { name, accesses, hits, misses, writebacks });
                    }
                    self.end = Some(RawEnd { instructions, raw_loads, raw_stores, cache });
                    self.exec_pending = false;
                    self.done = true;
                    return Ok(());
                }
                T_ALLOC => {
                    self.time_delta()?;
                    let addr = self.input.varint()?;
                    let size = self.input.varint()?;
                    let site = self.site_id()?;
                    let f = self.input.u8()?;
                    let func = AllocFn::from_u8(f).ok_or_else(|| Stop::Bad(format!("allocation function {f}")))?;
                    EventKind::Alloc { addr, size, site, func }
                }
                T_FREE => {
                    self.time_delta()?;
                    EventKind::Free { addr: self.input.varint()? }
                }
                T_REALLOC => {
                    self.time_delta()?;
                    let old_addr = self.input.varint()?;
                    let addr = self.input.varint()?;
                    let size = self.input.varint()?;
                    let site = self.site_id()?;
                    EventKind::Realloc { old_addr, addr, size, site }
                }
                T_SITE => {
                    self.time_delta()?;
                    let site = self.site_id()?;
                    let n = self.input.varint()?;
                    if n > 4096 {
                        return Err(Stop::Bad(format!("site with {n} frames")));
                    }
                    let mut frames = Vec::with_capacity(n as usize);
                    let mut keys = Vec::new();
                    for _ in 0..n {
                        frames.push(self.input.string()?);
                        if self.header.version >= 2 {
                            // the object's identity (its build-id) is read from its file
                            // here, once per path: the tool cannot read it
                            let path = self.input.string()?;
                            let offset = self.input.varint()?;
                            keys.push(crate::sitekey::frame_key(self.objects.id(&path), offset));
                        }
                    }
                    EventKind::Site { site, frames, keys }
                }
                T_MARKER => {
                    self.time_delta()?;
                    let k = self.input.u8()?;
                    let marker = MarkerKind::from_u8(k).ok_or_else(|| Stop::Bad(format!("marker kind {k}")))?;
                    let id = self.input.varint()?;
                    let label = match marker {
                        MarkerKind::Slice => format!("slice {id}"),
                        MarkerKind::User => format!("user {id}"),
                        _ => String::new(),
                    };
                    EventKind::Marker { marker, id, label }
                }
                t => return Err(Stop::Bad(format!("unknown record tag 0x{t:02x}"))),
            };
            self.exec_pending = false;
            b.push_event(self.time, 0, self.tid, kind);
        }
        Ok(())
    }

    fn site_id(&mut self) -> R2<u32> {
        let s = self.input.varint()?;
        u32::try_from(s).map_err(|_| Stop::Bad(format!("site id {s}")))
    }
}

impl<R: Read + Send> RecordSource for RawSource<R> {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// Never fails: a stream that stops early or goes wrong ends the records, and
    /// [`RawSource::cut_short`] says why.
    fn next_batch(&mut self, b: &mut Batch) -> Result<bool> {
        b.clear();
        if self.done {
            return Ok(false);
        }
        if let Err(s) = self.fill_batch(b) {
            self.stop(s);
        }
        Ok(!b.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.input.consumed(), bytes_total: None }
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// The header a recorded trace carries.
pub fn record_meta(cache: Option<&CacheSpec>, valgrind_version: &str, context: u32, slice_insn: u64) -> TraceMeta {
    let mut meta = TraceMeta { time_insn: true, post_cache: cache.is_some(), ..Default::default() };
    if let Some(c) = cache {
        meta.line_size = c.line_bytes() as u64;
        meta.cache_filter = Some(c.describe());
    }
    meta.provenance.tool = "tierkit-valgrind".into();
    meta.provenance.tool_version = env!("CARGO_PKG_VERSION").into();
    meta.notes.insert("valgrind_version".into(), valgrind_version.into());
    meta.notes.insert("context_frames".into(), context.to_string());
    meta.notes.insert("slice_insn".into(), slice_insn.to_string());
    meta
}

/// What `tierkit trace record` runs and where the trace goes.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The program, a path or a name looked up on PATH.
    pub program: String,
    pub args: Vec<String>,
    pub out: std::path::PathBuf,
    /// The in-band cache hierarchy; `None` records raw loads and stores.
    pub cache: Option<CacheSpec>,
    /// Frames per allocation site, 1 to 64.
    pub context: u32,
    /// A slice marker every this many instructions; 0 for none.
    pub slice_insn: u64,
    pub force: bool,
    /// The Valgrind library directory holding the tool (`tierkit-PLATFORM`), its preload and
    /// the core's files (`make build` makes `tracer/build/lib`).
    pub tool_dir: std::path::PathBuf,
    /// The `valgrind` launcher; looked up on PATH when `None`.
    pub valgrind: Option<std::path::PathBuf>,
    /// After SIGTERM, SIGINT or SIGHUP sent to the recorder has been passed on to the
    /// program, how long it may take to end before it is killed (SIGKILL).
    pub kill_after: std::time::Duration,
}

/// The default of [`RecordOptions::kill_after`]: a program that keeps the default action
/// ends at once, one that cleans up gets this long.
pub const KILL_AFTER_DEFAULT: std::time::Duration = std::time::Duration::from_secs(2);

/// What happened: where the trace is, how the program ended, what the tool counted.
#[derive(Clone, Debug, Serialize)]
pub struct RecordReport {
    pub path: String,
    /// The status a shell reports: the program's exit code, or 128 + the signal that killed it.
    pub status: i32,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub signal_name: Option<String>,
    /// Why the trace stops short of the program's end, if it does (also in the summary).
    pub incomplete: Option<String>,
    /// The signal sent to the recorder (not by the terminal) and passed on to the program,
    /// if one was: the recording was interrupted.
    pub interrupted_by: Option<String>,
    /// The program did not end within `kill_after` of that signal and was killed (SIGKILL).
    pub killed_after_grace: bool,
    /// Times the program forked; the children are not traced.
    pub forks: u64,
    /// Guest instructions executed (0 if the stream was cut short).
    pub instructions: u64,
    pub raw_loads: u64,
    pub raw_stores: u64,
    /// The in-band cache's counts per level, innermost first.
    pub cache: Vec<LevelStats>,
    pub valgrind_version: String,
    /// Bytes of raw stream the tool wrote.
    pub stream_bytes: u64,
    /// What Valgrind itself said (its log, without the `==PID==` prefixes), except the
    /// report of a fatal signal, which `incomplete` sums up with the place it happened.
    pub valgrind_messages: Vec<String>,
    pub summary: Summary,
}

/// Valgrind's log, split into its messages: paragraphs of lines without the `==PID== `
/// prefix. Returns the messages and, if the program died of a signal, the innermost frame
/// Valgrind gave for it (`main (crash.c:14)`); that paragraph is left out of the messages.
pub fn parse_valgrind_log(text: &str) -> (Vec<String>, Option<String>) {
    let mut paragraphs: Vec<Vec<String>> = vec![Vec::new()];
    for line in text.lines() {
        let body = match line.strip_prefix("==").and_then(|l| l.split_once("== ")) {
            Some((pid, rest)) if pid.bytes().all(|b| b.is_ascii_digit()) => rest,
            _ => line.strip_prefix("==").and_then(|l| l.strip_suffix("==")).filter(|p| p.bytes().all(|b| b.is_ascii_digit())).map(|_| "").unwrap_or(line),
        };
        if body.trim().is_empty() {
            paragraphs.push(Vec::new());
        } else {
            paragraphs.last_mut().unwrap().push(body.to_string());
        }
    }
    let mut messages = Vec::new();
    let mut place = None;
    for p in paragraphs.into_iter().filter(|p| !p.is_empty()) {
        if p[0].starts_with("Process terminating with default action of signal") {
            place = p.iter().find_map(|l| {
                let l = l.trim_start();
                let rest = l.strip_prefix("at ")?;
                Some(rest.split_once(": ").map(|(_, f)| f).unwrap_or(rest).to_string())
            });
        } else {
            messages.extend(p);
        }
    }
    (messages, place)
}

/// Valgrind's name for this platform (the tool's file is `tierkit-PLATFORM`).
pub fn valgrind_platform() -> Result<&'static str> {
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        Ok("amd64-linux")
    } else if cfg!(all(target_arch = "aarch64", target_os = "linux")) {
        Ok("arm64-linux")
    } else {
        Err(Error::config("trace record", "recording needs Linux on x86-64 or arm64"))
    }
}

/// `name` as found on PATH (an executable file), or a path as given if it contains a `/`.
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if name.contains('/') {
        let p = std::path::PathBuf::from(name);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| executable(p))
}

/// The conventional name of a signal.
pub fn signal_name(sig: i32) -> String {
    let n = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    n.to_string()
}

/// The version `valgrind --version` prints (`3.19.0`).
fn valgrind_version(valgrind: &std::path::Path) -> Result<String> {
    let out = std::process::Command::new(valgrind)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::config("valgrind", format!("{} cannot be run: {e}", valgrind.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.trim();
    if !out.status.success() || v.is_empty() {
        return Err(Error::config("valgrind", format!("'{} --version' failed", valgrind.display())));
    }
    Ok(v.strip_prefix("valgrind-").unwrap_or(v).to_string())
}

/// Run `opts.program` under tierkit's Valgrind tool and write its trace to `opts.out`.
///
/// The program's standard input, output and error are the caller's; nothing else is written
/// to them. Errors (no valgrind, the tool not built, the output exists, the program not
/// found, the tool not starting) are returned before or instead of a trace; once the
/// program has started, its end, whatever it is, gives a trace and a report.
#[cfg(unix)]
pub fn record(opts: &RecordOptions) -> Result<RecordReport> {
    record_with_progress(opts, &mut |_| {})
}

/// [`record`], calling `progress` with the number of records written so far (accesses and
/// events) every 200 ms or so while the program runs, and once at its end: the trace file itself
/// grows only by whole compressed chunks, long after the first records come.
pub fn record_with_progress(opts: &RecordOptions, progress: &mut dyn FnMut(u64)) -> Result<RecordReport> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    let valgrind = match &opts.valgrind {
        Some(p) => p.clone(),
        None => find_program("valgrind").ok_or_else(|| {
            Error::config("valgrind", "not found on PATH; 'tierkit trace record' runs programs under Valgrind (install it, e.g. apt-get install valgrind)")
        })?,
    };
    let platform = valgrind_platform()?;
    let tool = opts.tool_dir.join(format!("tierkit-{platform}"));
    if !tool.is_file() {
        return Err(Error::config(
            "tracer",
            format!(
                "the tierkit Valgrind tool is not built: {} is missing (run 'make build', or set TIERKIT_TRACER_DIR to the directory that holds it)",
                tool.display()
            ),
        ));
    }
    if !opts.tool_dir.join(format!("vgpreload_core-{platform}.so")).exists() {
        return Err(Error::config(
            "tracer",
            format!("{} lacks Valgrind's core files (vgpreload_core-{platform}.so and the rest); 'make build' links them there", opts.tool_dir.display()),
        ));
    }
    if !(1..=64).contains(&opts.context) {
        return Err(Error::config("--context", format!("{} frames: give 1 to 64", opts.context)));
    }
    if find_program(&opts.program).is_none() {
        return Err(Error::config("program", format!("'{}' not found, or not an executable file", opts.program)));
    }
    let version = valgrind_version(&valgrind)?;

    let mut meta = record_meta(opts.cache.as_ref(), &version, opts.context, opts.slice_insn);
    meta.provenance.program = Some(opts.program.clone());
    meta.provenance.args = opts.args.clone();
    // created before the program runs, so that an existing file or a bad directory stops us
    let mut writer = TktWriter::create(&opts.out, &meta, opts.force)?;

    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors, which we own from here on
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io("pipe", std::io::Error::last_os_error()));
    }
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let wfd = write_end.as_raw_fd();
    let cache_arg = match &opts.cache {
        None => "none".to_string(),
        Some(c) => c.levels.iter().map(|l| format!("{}:{}:{}", l.size_bytes, l.ways, l.line_bytes)).collect::<Vec<_>>().join(","),
    };
    // Valgrind's own messages go to a log, not into the program's stderr; they come back in
    // the report. The log has no name once open, so nothing is left behind even if we are
    // killed outright.
    let log_path = std::env::temp_dir().join(format!(
        "tierkit-record-{}-{}.log",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    let log = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let _ = std::fs::remove_file(&log_path);
    let lfd = log.as_raw_fd();
    let mut cmd = std::process::Command::new(&valgrind);
    cmd.env("VALGRIND_LIB", &opts.tool_dir)
        .args(["--tool=tierkit", "-q", "--command-line-only=yes", "--trace-children=no", "--child-silent-after-fork=yes", "--read-inline-info=yes"])
        .arg(format!("--log-fd={lfd}"))
        .arg(format!("--tk-fd={wfd}"))
        .arg(format!("--tk-cache={cache_arg}"))
        .arg(format!("--tk-context={}", opts.context))
        .arg(format!("--tk-slice={}", opts.slice_insn))
        .arg(&opts.program)
        .args(&opts.args);
    // signals sent to us from here on are passed on to the program (see `forward`)
    let fwd = forward::Forwarding::start();
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls between fork and exec
    unsafe {
        cmd.pre_exec(move || {
            // the write end and the log are the descriptors Valgrind inherits on purpose
            for fd in [wfd, lfd] {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // a program started from a shell gets the default SIGPIPE; Python ignores it
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // should the recorder die unannounced (SIGKILL), its program is asked to end
            // too rather than run on untraced; the signal survives the exec of Valgrind
            #[cfg(target_os = "linux")]
            {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
                if libc::getppid() != parent {
                    libc::raise(libc::SIGTERM);
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = parent;
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| Error::config("valgrind", format!("{} cannot be run: {e}", valgrind.display())))?;
    drop(write_end);
    let pid = child.id() as libc::pid_t;
    fwd.set_pid(pid);
    let watchdog = Watchdog::start(fwd, pid, opts.kill_after);

    // the watchdog stops signalling the pid before it is reaped (and may be reused)
    let wait = |child: &mut std::process::Child| {
        watchdog.before_reap();
        child.wait().map_err(|e| Error::io(&valgrind, e))
    };
    let read_log = || {
        use std::io::Seek;
        let mut bytes = Vec::new();
        let mut f = &log;
        if f.seek(std::io::SeekFrom::Start(0)).is_ok() {
            let _ = f.read_to_end(&mut bytes);
        }
        parse_valgrind_log(&String::from_utf8_lossy(&bytes))
    };
    let interrupted_by = |sig: i32| format!("recording interrupted: tierkit got {} (signal {sig}) and passed it on to the program", signal_name(sig));
    let mut src = match RawSource::new(std::fs::File::from(read_end), "tierkit tool stream") {
        Ok(s) => s,
        Err(e) => {
            let status = wait(&mut child)?;
            let (messages, _) = read_log();
            if let Some(sig) = watchdog.signal() {
                // stopped on request before the tool wrote anything: an empty trace that says so
                let why = format!("{} before the tool had started; nothing was recorded", interrupted_by(sig));
                writer.set_incomplete(why.clone());
                let summary = writer.finish()?;
                return Ok(RecordReport {
                    path: opts.out.display().to_string(),
                    status: 128 + sig,
                    exit_code: status.code(),
                    signal: status.signal(),
                    signal_name: status.signal().map(signal_name),
                    incomplete: Some(why),
                    interrupted_by: Some(signal_name(sig)),
                    killed_after_grace: watchdog.killed(),
                    forks: 0,
                    instructions: 0,
                    raw_loads: 0,
                    raw_stores: 0,
                    cache: Vec::new(),
                    valgrind_version: version,
                    stream_bytes: 0,
                    valgrind_messages: messages,
                    summary,
                });
            }
            let how = match (status.code(), status.signal()) {
                (Some(c), _) => format!("exit status {c}"),
                (_, Some(s)) => signal_name(s),
                _ => "unknown status".into(),
            };
            let said = if messages.is_empty() { e.to_string() } else { messages.join(" / ") };
            return Err(Error::config("valgrind", format!("the tierkit tool did not start ({how}): {said}")));
        }
    };
    let mut batch = Batch::with_capacity(BATCH_RECORDS);
    let mut write_error = None;
    let (mut written, mut said) = (0u64, std::time::Instant::now());
    // on a write error keep draining the pipe, so that the program runs to its end unharmed
    while src.next_batch(&mut batch)? {
        if write_error.is_none() {
            if let Err(e) = writer.write_batch(&batch) {
                write_error = Some(e);
            }
            written += (batch.len() + batch.events.len()) as u64;
            if said.elapsed() >= std::time::Duration::from_millis(200) {
                progress(written);
                said = std::time::Instant::now();
            }
        }
    }
    progress(written);
    let status = wait(&mut child)?;
    if let Some(e) = write_error {
        return Err(e);
    }

    let (exit_code, signal) = (status.code(), status.signal());
    let (valgrind_messages, place) = read_log();
    let ended = if let Some(s) = signal {
        let at = place.map(|p| format!(" at {p}")).unwrap_or_default();
        Some(format!("the program was killed by {} (signal {s}){at}", signal_name(s)))
    } else if src.ended_in_exec() {
        Some("the program replaced itself with another (execve); what ran after is not traced".to_string())
    } else {
        src.cut_short().map(|c| c.to_string())
    };
    let (killed, asked) = (watchdog.killed(), watchdog.signal());
    // a recording stopped on request is flagged even if the program handled the signal and
    // exited cleanly: it did not run to its own end
    let incomplete = match asked {
        Some(sig) if killed => {
            Some(format!("{}, which did not end within {} s: tierkit killed it (SIGKILL)", interrupted_by(sig), opts.kill_after.as_secs_f64()))
        }
        Some(sig) => Some(match ended {
            Some(how) => format!("{}; {how}", interrupted_by(sig)),
            None => format!("{}; the program then exited with status {}", interrupted_by(sig), exit_code.unwrap_or(0)),
        }),
        None => ended,
    };
    if let Some(r) = &incomplete {
        writer.set_incomplete(r.clone());
    }
    let summary = writer.finish()?;
    let end = src.end().cloned().unwrap_or_default();
    Ok(RecordReport {
        path: opts.out.display().to_string(),
        // the program's status, passed on; if we had to kill it, that of the signal we got
        status: match asked {
            Some(sig) if killed => 128 + sig,
            _ => exit_code.unwrap_or_else(|| 128 + signal.unwrap_or(0)),
        },
        exit_code,
        signal,
        signal_name: signal.map(signal_name),
        incomplete,
        interrupted_by: asked.map(signal_name),
        killed_after_grace: killed,
        forks: src.forks(),
        instructions: if src.end().is_some() { end.instructions } else { src.time() },
        raw_loads: end.raw_loads,
        raw_stores: end.raw_stores,
        cache: end.cache,
        valgrind_version: version,
        stream_bytes: src.progress().bytes_read,
        valgrind_messages,
        summary,
    })
}

/// Kills the recorded program (SIGKILL) once `kill_after` has passed since a signal was
/// passed on to it and it has not ended; stops when the program is about to be reaped or the
/// recording is abandoned. The signal handler cannot wake a thread, so the watchdog looks
/// every 20 ms (nothing else runs on it).
#[cfg(unix)]
struct Watchdog {
    shared: std::sync::Arc<WatchdogShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(unix)]
struct WatchdogShared {
    fwd: forward::Forwarding,
    pid: libc::pid_t,
    /// (the program is being reaped or abandoned, the watchdog killed it)
    state: std::sync::Mutex<(bool, bool)>,
    wake: std::sync::Condvar,
}

#[cfg(unix)]
impl Watchdog {
    fn start(fwd: forward::Forwarding, pid: libc::pid_t, kill_after: std::time::Duration) -> Watchdog {
        let shared = std::sync::Arc::new(WatchdogShared { fwd, pid, state: std::sync::Mutex::new((false, false)), wake: std::sync::Condvar::new() });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tierkit-record-watchdog".into())
            .spawn(move || {
                let mut asked_at = None;
                let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
                while !st.0 {
                    if sh.fwd.signal().is_some() {
                        let t = *asked_at.get_or_insert_with(std::time::Instant::now);
                        if t.elapsed() >= kill_after {
                            // SAFETY: the pid is not reaped while we hold the lock
                            unsafe { libc::kill(sh.pid, libc::SIGKILL) };
                            st.1 = true;
                            break;
                        }
                    }
                    st = sh.wake.wait_timeout(st, std::time::Duration::from_millis(20)).unwrap_or_else(|e| e.into_inner()).0;
                }
            })
            .ok();
        Watchdog { shared, thread }
    }

    /// Wait until the program has ended without reaping it, then stop signalling its pid.
    fn before_reap(&self) {
        // SAFETY: waitid with WNOWAIT only looks; the Child reaps afterwards
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            while libc::waitid(libc::P_PID, self.shared.pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) != 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {}
        }
        self.stop();
        self.shared.fwd.clear_pid();
    }

    fn stop(&self) {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).0 = true;
        self.shared.wake.notify_all();
    }

    /// The signal passed on to the program, if any.
    fn signal(&self) -> Option<i32> {
        self.shared.fwd.signal()
    }

    /// The watchdog killed the program.
    fn killed(&self) -> bool {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

#[cfg(unix)]
impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
        self.shared.fwd.clear_pid();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Signals sent to the recorder while it records: passed on to the recorded program (the
/// Valgrind process), so that `kill` of `tierkit trace record` (a supervisor's SIGTERM, a
/// timeout) stops the program at once and the trace is still finished; see [`record`].
///
/// A process-wide handler for SIGTERM, SIGINT and SIGHUP is installed while at least one
/// recording runs (and the previous handlers put back after the last). Each recording holds
/// a slot: the program's pid and the first signal passed on to it. The handler does only
/// async-signal-safe work: atomics and `kill`.
#[cfg(target_os = "linux")]
mod forward {
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::SeqCst};
    use std::sync::Mutex;

    pub const SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];
    const SLOTS: usize = 32;

    static USED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
    /// The recorded program's pid; 0 before it starts and once it has been waited for (a pid
    /// that may have been reused is never signalled).
    static PID: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
    /// The first signal passed on (0: none yet).
    static GOT: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
    /// Recordings running, and the handlers to put back after the last.
    static INSTALLED: Mutex<(usize, Vec<(i32, libc::sigaction)>)> = Mutex::new((0, Vec::new()));

    extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // Sent by the terminal to the whole foreground process group (Ctrl-C; the hang-up
        // that follows the session leader's exit): the program got its own copy, and how it
        // handles it is its own affair (as without tierkit). SI_KERNEL marks those; kill(2)
        // and sigqueue(3) give SI_USER/SI_QUEUE. A terminal's own hang-up goes to the session
        // leader alone: if that is us, the program has not got it.
        if !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL {
            let leader = unsafe { libc::getsid(0) == libc::getpid() };
            if !(sig == libc::SIGHUP && leader) {
                return;
            }
        }
        // SAFETY: errno is thread-local; kill may change it under the interrupted code
        let errno = unsafe { *libc::__errno_location() };
        for i in 0..SLOTS {
            if !USED[i].load(SeqCst) {
                continue;
            }
            // the first signal is passed on as it is; a second one means "now": SIGKILL
            let first = GOT[i].compare_exchange(0, sig, SeqCst, SeqCst).is_ok();
            let pid = PID[i].load(SeqCst);
            if pid > 0 {
                unsafe { libc::kill(pid, if first { sig } else { libc::SIGKILL }) };
            }
        }
        unsafe { *libc::__errno_location() = errno };
    }

    /// One recording's hold on the forwarding: released (and the handlers put back after the
    /// last recording) on drop.
    pub struct Forwarding {
        slot: Option<usize>,
    }

    impl Forwarding {
        /// Install the handlers (if no recording has) and take a slot. With every slot taken
        /// (32 recordings at once in one process) this recording's program gets no signals
        /// passed on.
        pub fn start() -> Forwarding {
            let mut inst = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
            let slot = (0..SLOTS).find(|&i| USED[i].compare_exchange(false, true, SeqCst, SeqCst).is_ok());
            let Some(i) = slot else { return Forwarding { slot: None } };
            PID[i].store(0, SeqCst);
            GOT[i].store(0, SeqCst);
            if inst.0 == 0 {
                inst.1.clear();
                for sig in SIGNALS {
                    // SAFETY: a zeroed sigaction is a valid value to fill; the handler is
                    // async-signal-safe
                    unsafe {
                        let mut act: libc::sigaction = std::mem::zeroed();
                        act.sa_sigaction = on_signal as *const () as usize;
                        act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                        libc::sigemptyset(&mut act.sa_mask);
                        let mut old: libc::sigaction = std::mem::zeroed();
                        if libc::sigaction(sig, &act, &mut old) == 0 {
                            inst.1.push((sig, old));
                        }
                    }
                }
            }
            inst.0 += 1;
            Forwarding { slot: Some(i) }
        }

        /// The program has started: signals go to `pid` from now on, and one that came
        /// before goes to it now.
        pub fn set_pid(&self, pid: i32) {
            let Some(i) = self.slot else { return };
            PID[i].store(pid, SeqCst);
            let got = GOT[i].load(SeqCst);
            if got != 0 {
                unsafe { libc::kill(pid, got) };
            }
        }

        /// The program is about to be waited for (reaped): no signal goes to its pid after this.
        pub fn clear_pid(&self) {
            if let Some(i) = self.slot {
                PID[i].store(0, SeqCst);
            }
        }

        /// The first signal passed on, if any.
        pub fn signal(&self) -> Option<i32> {
            self.slot.map(|i| GOT[i].load(SeqCst)).filter(|&s| s != 0)
        }
    }

    impl Drop for Forwarding {
        fn drop(&mut self) {
            let Some(i) = self.slot else { return };
            let mut inst = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
            PID[i].store(0, SeqCst);
            USED[i].store(false, SeqCst);
            inst.0 -= 1;
            if inst.0 == 0 {
                for (sig, old) in inst.1.drain(..) {
                    unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
                }
            }
        }
    }
}

/// Elsewhere recording stops before the program starts (see [`valgrind_platform`]).
#[cfg(all(unix, not(target_os = "linux")))]
mod forward {
    pub struct Forwarding;
    impl Forwarding {
        pub fn start() -> Forwarding {
            Forwarding
        }
        pub fn set_pid(&self, _: i32) {}
        pub fn clear_pid(&self) {}
        pub fn signal(&self) -> Option<i32> {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::read_all;

    /// The worked example of docs/trace-format.md section 19, byte for byte, in stream
    /// version 1 (still read: its site has no frame keys).
    const EXAMPLE_V1: &str = "54 4b 56 47 52 41 57 00 01 00 01 00 e8 07 04 01 80 80 02 08 40 06 33 2e 31 39 2e 30 d2 09 \
        84 f4 03 00 01 0c 6d 61 69 6e 20 28 61 2e 63 3a 35 29 \
        81 00 80 20 80 02 00 00 \
        3f 80 40 03 \
        80 01 \
        7f 80 01 02 \
        85 ef 03 00 01 \
        82 01 80 20 \
        88 c7 01 bc 05 ac 02 01 e8 07 de 07 0a 02";

    /// The same in version 2 (docs/trace-format.md section 19.3): the site's one frame is at
    /// offset 0x1149 of `/x/a.out` (a path that does not exist here, so its key names the file).
    const EXAMPLE: &str = "54 4b 56 47 52 41 57 00 02 00 01 00 e8 07 04 01 80 80 02 08 40 06 33 2e 31 39 2e 30 d2 09 \
        84 f4 03 00 01 0c 6d 61 69 6e 20 28 61 2e 63 3a 35 29 08 2f 78 2f 61 2e 6f 75 74 c9 22 \
        81 00 80 20 80 02 00 00 \
        3f 80 40 03 \
        80 01 \
        7f 80 01 02 \
        85 ef 03 00 01 \
        82 01 80 20 \
        88 c7 01 bc 05 ac 02 01 e8 07 de 07 0a 02";

    fn bytes(hex: &str) -> Vec<u8> {
        hex.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
    }

    #[test]
    fn decodes_the_worked_example_in_the_spec() {
        // version 2 gives each frame its object path and offset, made into a key
        let mut src = RawSource::new(std::io::Cursor::new(bytes(EXAMPLE)), "example").unwrap();
        assert_eq!(src.header().version, 2);
        let b = &read_all(&mut src).unwrap()[0];
        assert_eq!(b.events[0].kind, EventKind::Site { site: 0, frames: vec!["main (a.c:5)".into()], keys: vec!["file:a.out+0x1149".into()] });
        assert_eq!(b.events.len(), 4);
        assert_eq!(src.end().unwrap().instructions, 1200);
    }

    #[test]
    fn decodes_the_version_1_example() {
        let mut src = RawSource::new(std::io::Cursor::new(bytes(EXAMPLE_V1)), "example").unwrap();
        let h = src.header().clone();
        assert!(h.post_cache);
        assert_eq!((h.slice_insn, h.context, h.pid, h.valgrind_version.as_str()), (1000, 4, 1234, "3.19.0"));
        assert_eq!(h.levels, vec![LevelSpec { name: "L1".into(), size_bytes: 32768, ways: 8, line_bytes: 64 }]);
        assert_eq!(src.meta().cache_filter.as_deref(), Some("L1:32K:8:64"));
        let batches = read_all(&mut src).unwrap();
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        let acc: Vec<_> = (0..b.len()).map(|i| b.access(i)).collect();
        assert_eq!(acc.len(), 2);
        assert_eq!((acc[0].addr, acc[0].write, acc[0].insn, acc[0].size, acc[0].tid), (0x1000, false, 503, 64, 0));
        assert_eq!((acc[1].addr, acc[1].write, acc[1].insn, acc[1].size, acc[1].tid), (0x1040, true, 505, 64, 1));
        let ev: Vec<_> = b.events.iter().map(|e| (e.at, e.insn, e.tid, e.kind.clone())).collect();
        assert_eq!(
            ev,
            vec![
                (0, 500, 0, EventKind::Site { site: 0, frames: vec!["main (a.c:5)".into()], keys: vec![] }),
                (0, 500, 0, EventKind::Alloc { addr: 0x1000, size: 256, site: 0, func: AllocFn::Malloc }),
                (2, 1000, 1, EventKind::Marker { marker: MarkerKind::Slice, id: 1, label: "slice 1".into() }),
                (2, 1001, 1, EventKind::Free { addr: 0x1000 }),
            ]
        );
        let end = src.end().unwrap();
        assert_eq!((end.instructions, end.raw_loads, end.raw_stores), (1200, 700, 300));
        assert_eq!(end.cache, vec![LevelStats { name: "L1".into(), accesses: 1000, hits: 990, misses: 10, writebacks: 2 }]);
        assert!(src.cut_short().is_none());
        assert!(!src.ended_in_exec());
    }

    #[test]
    fn a_stream_cut_anywhere_gives_its_whole_records_and_says_so() {
        let full = bytes(EXAMPLE);
        let header_len = 30;
        for cut in header_len..full.len() {
            let mut src = RawSource::new(std::io::Cursor::new(full[..cut].to_vec()), "cut").unwrap();
            let batches = read_all(&mut src).unwrap();
            let n: usize = batches.iter().map(|b| b.records()).sum();
            assert!(n <= 6, "cut at {cut}");
            let why = src.cut_short().unwrap_or_else(|| panic!("cut at {cut} not noticed"));
            assert!(why.contains("without its end record") || why.contains("middle of a record"), "{why}");
            assert!(src.end().is_none());
        }
        // inside the header: an error, not a trace
        for cut in 0..header_len {
            let e = RawSource::new(std::io::Cursor::new(full[..cut].to_vec()), "cut").err().unwrap();
            assert!(e.to_string().contains("before its header"), "{e}");
        }
    }

    #[test]
    fn corruption_stops_the_records_with_a_reason() {
        let mut b = bytes(EXAMPLE);
        b[30] = 0x99; // the SITE tag becomes an unknown one
        let mut src = RawSource::new(std::io::Cursor::new(b), "bad").unwrap();
        assert!(read_all(&mut src).unwrap().is_empty());
        assert!(src.cut_short().unwrap().contains("unknown record tag 0x99"));
        let mut b = bytes(EXAMPLE);
        b[0] = b'X';
        assert!(RawSource::new(std::io::Cursor::new(b), "bad").err().unwrap().to_string().contains("bad magic"));
        let mut b = bytes(EXAMPLE);
        b[8] = 3;
        assert!(RawSource::new(std::io::Cursor::new(b), "bad").err().unwrap().to_string().contains("version 3"));
    }

    #[test]
    fn exec_and_fork_records() {
        let mut b = bytes(EXAMPLE);
        let end = b.len() - 14;
        b.truncate(end);
        b.extend([0x86, 0x87, 0x05]); // FORK, then EXEC and nothing more
        let mut src = RawSource::new(std::io::Cursor::new(b), "exec").unwrap();
        read_all(&mut src).unwrap();
        assert_eq!(src.forks(), 1);
        assert!(src.ended_in_exec());
        assert_eq!(src.time(), 1006);
    }

    #[test]
    fn long_streams_decode_in_batches() {
        let mut b = bytes(EXAMPLE);
        let end = b.len() - 14;
        b.truncate(end);
        let n = BATCH_RECORDS * 2 + 5;
        for _ in 0..n {
            b.extend([0x08, 0x10, 0x01]); // 8-byte read, 8 bytes further on, one instruction later
        }
        b.extend(bytes("88 00 00 00 00"));
        let mut src = RawSource::new(std::io::Cursor::new(b), "long").unwrap();
        let batches = read_all(&mut src).unwrap();
        assert!(batches.len() >= 3 && batches.iter().all(|b| b.records() <= BATCH_RECORDS));
        let last = batches.last().unwrap();
        assert_eq!(last.access(last.len() - 1).addr, 0x1040 + 8 * n as u64);
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), n + 2);
        assert!(src.end().is_some());
    }

    #[test]
    fn valgrind_log_messages_and_crash_place() {
        let log = "==42== \n==42== Process terminating with default action of signal 11 (SIGSEGV)\n==42==  Access not within mapped region at address 0x0\n==42==    at 0x1091A2: main (crash.c:14)\n==42==  If you believe this happened as a result of a stack\n==42== \n==42== Warning: something else\n";
        let (messages, place) = parse_valgrind_log(log);
        assert_eq!(place.as_deref(), Some("main (crash.c:14)"));
        assert_eq!(messages, vec!["Warning: something else".to_string()]);
        assert_eq!(parse_valgrind_log(""), (vec![], None));
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(40), "signal 40");
    }
}
