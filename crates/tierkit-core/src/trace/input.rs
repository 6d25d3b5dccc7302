//! Opening a trace by path: format detection, decompression, the optional cache filter.

use super::stream::{self, Compression};
use super::summary::{self, Summary};
use super::{champsim, drmemtrace, text, tkt, RecordSource};
use crate::cache::{CacheFilter, CacheSpec};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The trace formats tierkit reads. Names are part of the command-line contract
/// (`--format tkt|hex|ramulator|ramulator-nowb|hma4|lackey|dramsim3|dramsim3:tck_ps=N|ramulator2|perf|champsim|champsim-cloudsuite|drmemtrace`).
/// A format is written and read as its [`spec`](Format::spec) string, in results' recorded
/// configurations too, so that a replay reads the trace the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Format {
    /// tierkit's native binary format.
    Tkt,
    /// One hexadecimal address per line (Pin LLC-miss traces of the Cori/Kleio simulator).
    Hex,
    /// Ramulator CPU trace: `<bubble-count> <read-addr> [<writeback-addr>]`.
    Ramulator,
    /// The same files read without their writeback addresses: one read per line, as
    /// GTkernel/cori-sim's hex traces hold them. Never detected; named explicitly.
    RamulatorNoWb,
    /// The adaptive-migration Ramulator fork: `<bubble-count> <addr> <pc> <1=R|2=W>`.
    Hma4,
    /// Valgrind lackey `--trace-mem=yes` output.
    Lackey,
    /// DRAMsim3 trace: `<hex-addr> <READ|WRITE> <cycle>`, cycles dropped.
    Dramsim3,
    /// The same files with their cycles kept as time: `ns = floor(cycle * tck_ps / 1000)`.
    /// Never detected; named as `dramsim3:tck_ps=N`.
    Dramsim3Clock { tck_ps: u64 },
    /// Ramulator 2's `LoadStoreTrace` memory traces: `LD <addr>` / `ST <addr>`.
    Ramulator2,
    /// `perf script` output of `perf mem record` samples (a sampled trace).
    Perf,
    /// ChampSim trace: 64-byte `input_instr` records, plain, gzip or xz.
    Champsim,
    /// ChampSim's CloudSuite traces: 96-byte `cloudsuite_instr` records.
    ChampsimCloudsuite,
    /// DynamoRIO drmemtrace offline trace (after raw2trace): a thread file or a directory of them.
    Drmemtrace,
}

impl Format {
    /// Every format a name alone selects (`dramsim3:tck_ps=N` takes a value; see [`Format::parse`]).
    pub const ALL: [Format; 12] = [
        Format::Tkt,
        Format::Hex,
        Format::Ramulator,
        Format::RamulatorNoWb,
        Format::Hma4,
        Format::Lackey,
        Format::Dramsim3,
        Format::Ramulator2,
        Format::Perf,
        Format::Champsim,
        Format::ChampsimCloudsuite,
        Format::Drmemtrace,
    ];

    /// The format's name; `dramsim3:tck_ps=N` is named `dramsim3` (its source format), and
    /// [`Format::spec`] says it in full.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Tkt => "tkt",
            Format::Hex => "hex",
            Format::Ramulator => "ramulator",
            Format::RamulatorNoWb => "ramulator-nowb",
            Format::Hma4 => "hma4",
            Format::Lackey => "lackey",
            Format::Dramsim3 | Format::Dramsim3Clock { .. } => "dramsim3",
            Format::Ramulator2 => "ramulator2",
            Format::Perf => "perf",
            Format::Champsim => "champsim",
            Format::ChampsimCloudsuite => "champsim-cloudsuite",
            Format::Drmemtrace => "drmemtrace",
        }
    }

    /// What `--format` takes to select this format: the name, with its value for
    /// `dramsim3:tck_ps=N`. [`Format::parse`] reads it back.
    pub fn spec(&self) -> String {
        match self {
            Format::Dramsim3Clock { tck_ps } => format!("dramsim3:tck_ps={tck_ps}"),
            f => f.name().to_string(),
        }
    }

    /// The names `--format` knows, for messages.
    pub fn known() -> String {
        let mut names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        names.insert(names.iter().position(|n| *n == "dramsim3").map_or(names.len(), |i| i + 1), "dramsim3:tck_ps=N");
        names.join("|")
    }

    /// A text format (one record per line)?
    pub fn is_text(&self) -> bool {
        matches!(
            self,
            Format::Hex
                | Format::Ramulator
                | Format::RamulatorNoWb
                | Format::Hma4
                | Format::Lackey
                | Format::Dramsim3
                | Format::Dramsim3Clock { .. }
                | Format::Ramulator2
                | Format::Perf
        )
    }

    pub fn parse(key: &str, s: &str) -> Result<Format> {
        let t = s.trim();
        if let Some((name, arg)) = t.split_once(':') {
            if name.trim().eq_ignore_ascii_case("dramsim3") {
                let arg = arg.trim();
                let value = arg.get(..7).filter(|k| k.eq_ignore_ascii_case("tck_ps=")).and_then(|_| arg.get(7..)).map(str::trim);
                return match value.and_then(|v| if v.bytes().all(|b| b.is_ascii_digit()) { v.parse::<u64>().ok() } else { None }) {
                    Some(tck_ps) if tck_ps > 0 => Ok(Format::Dramsim3Clock { tck_ps }),
                    _ => Err(Error::config(
                        key,
                        format!("'{s}': give the memory-clock period in whole picoseconds, at least 1: dramsim3:tck_ps=N (e.g. 625 for DDR4-3200)"),
                    )),
                };
            }
        }
        Format::ALL.iter().copied().find(|f| f.name().eq_ignore_ascii_case(t)).ok_or_else(|| {
            let dym = crate::error::did_you_mean(t, Format::ALL.iter().map(|f| f.name()));
            Error::config(key, format!("unknown trace format '{s}'{dym}; known: {}", Format::known().replace('|', ", ")))
        })
    }
}

impl From<Format> for String {
    fn from(f: Format) -> String {
        f.spec()
    }
}

impl TryFrom<String> for Format {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Format, String> {
        Format::parse("format", &s).map_err(|e| e.to_string())
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spec())
    }
}

/// Bytes sniffed from the start of a file to detect its format.
const SNIFF_BYTES: usize = 64 * 1024;
/// Size of the sniffed head; a head this long may end in a cut line.
pub const SNIFF_LIMIT_HINT: usize = SNIFF_BYTES;

/// Is the file gzip-compressed?
pub fn is_gzip(head: &[u8]) -> bool {
    head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b
}

/// The first bytes of a file, decompressed (gzip or xz), and whether they are all of it.
pub(crate) fn head(path: &Path) -> Result<(Vec<u8>, Compression, bool)> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut raw = vec![0u8; SNIFF_BYTES];
    let n = stream::read_full(&mut f, &mut raw).map_err(|e| Error::io(path, e))?;
    raw.truncate(n);
    let c = Compression::of(&raw);
    if c == Compression::None {
        return Ok((raw, c, n < SNIFF_BYTES));
    }
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut d = stream::decoder(std::io::BufReader::new(f), c);
    // one byte more than sniffed tells whether the head is the whole content
    let mut out = vec![0u8; SNIFF_BYTES + 1];
    let n = stream::read_full(&mut d, &mut out).map_err(|e| stream::read_error(&path.display().to_string(), c, 0, e))?;
    out.truncate(n.min(SNIFF_BYTES));
    Ok((out, c, n <= SNIFF_BYTES))
}

/// Does the head hold binary data rather than text: a NUL byte, or bytes that are not UTF-8
/// (apart from a character cut at the head's end)?
pub fn looks_binary(head: &[u8]) -> bool {
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some() || head.len() < SNIFF_BYTES,
    }
}

/// Detect the format of a trace file or directory. Fails with an error that asks for
/// `--format` when the content is ambiguous or unrecognised.
///
/// In order: a directory is a drmemtrace trace (its thread files); a zip archive is a
/// drmemtrace thread file; then, on the decompressed head: the native magic number; a
/// drmemtrace header record (or the refusal of a raw drmemtrace file); binary data (a NUL byte
/// or not UTF-8) must be ChampSim records of exactly one layout (`champsim::plausible`), and is
/// never tried as text; text must fit exactly one text format (`text::sniff`).
pub fn detect(path: &Path) -> Result<Format> {
    let shown = path.display().to_string();
    // "--format" first: a long reason is cut in its middle (error.rs), the start stays
    // (the formats are listed by --format's help: with them, the reason would be cut)
    let ask = |why: String| Error::trace(&shown, format!("cannot detect the trace format; say it with --format: {why}"));
    if path.is_dir() {
        drmemtrace::thread_files(path)?;
        return Ok(Format::Drmemtrace);
    }
    let (h, compression, complete) = head(path)?;
    if compression == Compression::None && (h.starts_with(b"PK\x03\x04") || h.starts_with(b"PK\x05\x06")) {
        return match drmemtrace::sniff_file(path) {
            Ok(true) => Ok(Format::Drmemtrace),
            Ok(false) => Err(ask("a zip archive, but not a drmemtrace thread file".into())),
            Err(why) => Err(Error::trace(&shown, why)),
        };
    }
    if tkt::sniff(&h) {
        return Ok(Format::Tkt);
    }
    match drmemtrace::sniff(&h) {
        Ok(true) => return Ok(Format::Drmemtrace),
        Ok(false) => {}
        Err(why) => return Err(Error::trace(&shown, why)),
    }
    if looks_binary(&h) {
        return champsim::sniff(&h, complete).map_err(|why| ask(format!("binary data of no known format: {why}")));
    }
    let f = text::sniff(&h).map_err(ask)?;
    if compression == Compression::Xz {
        return Err(Error::trace(&shown, format!("an xz-compressed {f} trace: text traces are read plain or gzip-compressed (xz -dc FILE | gzip > FILE.gz)")));
    }
    Ok(f)
}

/// A trace as the user named it: path, optional format, optional cache filter. It can be
/// opened several times (a policy with future knowledge reads ahead with a second reader).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceInput {
    pub path: PathBuf,
    pub format: Option<Format>,
    pub cache: Option<CacheSpec>,
}

impl TraceInput {
    pub fn new(path: impl Into<PathBuf>) -> TraceInput {
        TraceInput { path: path.into(), format: None, cache: None }
    }

    pub fn with_format(mut self, f: Option<Format>) -> TraceInput {
        self.format = f;
        self
    }

    pub fn with_cache(mut self, c: Option<CacheSpec>) -> TraceInput {
        self.cache = c;
        self
    }

    /// A trace as the front ends name it: a path and the `--format` and `--cache` option
    /// strings as given (each absent when not given), parsed here so that the command line,
    /// run specs and the Python extension read them the same way.
    pub fn from_options(path: &Path, format: Option<&str>, cache: Option<&str>) -> Result<TraceInput> {
        let fmt = format.map(|f| Format::parse("--format", f)).transpose()?;
        let cache = match cache {
            Some(c) => CacheSpec::parse("--cache", c)?,
            None => None,
        };
        Ok(TraceInput::new(path).with_format(fmt).with_cache(cache))
    }

    /// The format, detected if not given.
    pub fn resolved_format(&self) -> Result<Format> {
        if !self.path.exists() {
            return Err(Error::trace(&self.display(), "no such file"));
        }
        if self.path.is_dir() && !matches!(self.format, None | Some(Format::Drmemtrace)) {
            return Err(Error::trace(&self.display(), "is a directory, not a trace"));
        }
        match self.format {
            Some(f) => Ok(f),
            None => detect(&self.path),
        }
    }

    /// Open a fresh reader over the trace.
    pub fn open(&self) -> Result<Box<dyn RecordSource>> {
        let fmt = self.resolved_format()?;
        let src: Box<dyn RecordSource> = match fmt {
            Format::Tkt => Box::new(tkt::TktReader::open(&self.path)?),
            Format::Champsim | Format::ChampsimCloudsuite => Box::new(champsim::ChampsimSource::open(&self.path, fmt)?),
            Format::Drmemtrace => Box::new(drmemtrace::DrmemtraceSource::open(&self.path)?),
            other => text::open(&self.path, other)?,
        };
        Ok(match &self.cache {
            Some(spec) => Box::new(CacheFilter::new(src, spec)?),
            None => src,
        })
    }

    /// The trace's summary: from the end chunk of a native trace without a cache filter
    /// (instant), otherwise by one pass over the records.
    pub fn summary(&self) -> Result<Summary> {
        if self.cache.is_none() && self.resolved_format()? == Format::Tkt {
            return Ok(tkt::TktReader::read_summary(&self.path)?.1);
        }
        let mut src = self.open()?;
        summary::scan(src.as_mut())
    }

    pub fn display(&self) -> String {
        self.path.display().to_string()
    }
}
