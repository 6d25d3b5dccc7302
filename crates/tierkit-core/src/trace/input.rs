//! Opening a trace by path: format detection, decompression, the optional cache filter.

use super::summary::{self, Summary};
use super::stream::{self, Compression};
use super::{champsim, drmemtrace, text, tkt, RecordSource};
use crate::cache::{CacheFilter, CacheSpec};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The trace formats tierkit reads. Names are part of the command-line contract
/// (`--format tkt|hex|ramulator|ramulator-nowb|hma4|lackey|dramsim3|champsim|champsim-cloudsuite|drmemtrace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// tierkit's native binary format.
    Tkt,
    /// One hexadecimal address per line (Pin LLC-miss traces of the Cori/Kleio simulator).
    Hex,
    /// Ramulator CPU trace: `<bubble-count> <read-addr> [<writeback-addr>]`.
    Ramulator,
    /// The same files read without their writeback addresses: one read per line, as
    /// GTkernel/cori-sim's hex traces hold them. Never detected; named explicitly.
    #[serde(rename = "ramulator-nowb")]
    RamulatorNoWb,
    /// The adaptive-migration Ramulator fork: `<bubble-count> <addr> <pc> <1=R|2=W>`.
    Hma4,
    /// Valgrind lackey `--trace-mem=yes` output.
    Lackey,
    /// DRAMsim3 trace: `<hex-addr> <READ|WRITE> <cycle>`.
    Dramsim3,
    /// ChampSim trace: 64-byte `input_instr` records, plain, gzip or xz.
    Champsim,
    /// ChampSim's CloudSuite traces: 96-byte `cloudsuite_instr` records.
    #[serde(rename = "champsim-cloudsuite")]
    ChampsimCloudsuite,
    /// DynamoRIO drmemtrace offline trace (after raw2trace): a thread file or a directory of them.
    Drmemtrace,
}

impl Format {
    pub const ALL: [Format; 10] = [
        Format::Tkt,
        Format::Hex,
        Format::Ramulator,
        Format::RamulatorNoWb,
        Format::Hma4,
        Format::Lackey,
        Format::Dramsim3,
        Format::Champsim,
        Format::ChampsimCloudsuite,
        Format::Drmemtrace,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Format::Tkt => "tkt",
            Format::Hex => "hex",
            Format::Ramulator => "ramulator",
            Format::RamulatorNoWb => "ramulator-nowb",
            Format::Hma4 => "hma4",
            Format::Lackey => "lackey",
            Format::Dramsim3 => "dramsim3",
            Format::Champsim => "champsim",
            Format::ChampsimCloudsuite => "champsim-cloudsuite",
            Format::Drmemtrace => "drmemtrace",
        }
    }

    /// A text format (one record per line)?
    pub fn is_text(&self) -> bool {
        matches!(self, Format::Hex | Format::Ramulator | Format::RamulatorNoWb | Format::Hma4 | Format::Lackey | Format::Dramsim3)
    }

    pub fn parse(key: &str, s: &str) -> Result<Format> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::config(key, format!("unknown trace format '{s}' (known: {})", Format::ALL.map(|f| f.name()).join(", ")))
            })
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
fn head(path: &Path) -> Result<(Vec<u8>, Compression, bool)> {
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
    let ask = |why: String| Error::trace(&shown, format!("cannot detect the trace format; say it with --format: {why} (formats: {})", Format::ALL.map(|f| f.name()).join("|")));
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
