//! Text trace importers. Each format is a [`LineParser`]; [`TextSource`] does the rest for all
//! of them: plain or gzip input, line numbers for error messages, batching, progress and the
//! digest of the file's bytes.

use super::{Access, Batch, Format, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Parses one line of a text format into records.
pub trait LineParser: Send {
    /// Parse one line (without its line terminator; never empty, never a `#` comment) and
    /// push the records it holds into `out`. An `Err` names what is wrong; the caller adds the
    /// file and line number.
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String>;
    /// The header of the traces this format produces (time bases, pc presence...).
    fn meta(&self) -> TraceMeta;
}

/// Counts and hashes the raw file bytes under any decompressor.
struct Tap<R> {
    inner: R,
    pos: Arc<AtomicU64>,
    hasher: Arc<Mutex<blake3::Hasher>>,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.lock().unwrap().update(&buf[..n]);
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A text trace being read.
pub struct TextSource<P: LineParser> {
    reader: Box<dyn BufRead + Send>,
    parser: P,
    meta: TraceMeta,
    path: String,
    line_no: u64,
    buf: Vec<u8>,
    pos: Arc<AtomicU64>,
    hasher: Arc<Mutex<blake3::Hasher>>,
    total: u64,
    done: bool,
}

impl<P: LineParser> TextSource<P> {
    pub fn open(path: &Path, parser: P, source_format: Format) -> Result<TextSource<P>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let total = file.metadata().map(|m| m.len()).unwrap_or(0);
        let pos = Arc::new(AtomicU64::new(0));
        let hasher = Arc::new(Mutex::new(blake3::Hasher::new()));
        let mut tap = BufReader::with_capacity(1 << 20, Tap { inner: file, pos: pos.clone(), hasher: hasher.clone() });
        let gz = super::input::is_gzip(tap.fill_buf().map_err(|e| Error::io(path, e))?);
        let reader: Box<dyn BufRead + Send> = if gz {
            Box::new(BufReader::with_capacity(1 << 20, flate2::bufread::MultiGzDecoder::new(tap)))
        } else {
            Box::new(tap)
        };
        let mut meta = parser.meta();
        meta.provenance.tool = format!("import:{}", source_format.name());
        meta.provenance.tool_version = env!("CARGO_PKG_VERSION").to_string();
        meta.provenance.source_format = Some(source_format.name().to_string());
        meta.provenance.source_file = path.file_name().map(|s| s.to_string_lossy().into_owned());
        Ok(TextSource { reader, parser, meta, path: path.display().to_string(), line_no: 0, buf: Vec::new(), pos, hasher, total, done: false })
    }
}

impl<P: LineParser> RecordSource for TextSource<P> {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        batch.clear();
        if self.done {
            return Ok(false);
        }
        while batch.records() < BATCH_RECORDS {
            self.buf.clear();
            let n = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| {
                // a decompression error surfaces here: name the line we were about to read
                Error::at_line(&self.path, self.line_no + 1, format!("cannot read: {e}"))
            })?;
            if n == 0 {
                self.done = true;
                break;
            }
            self.line_no += 1;
            let line = std::str::from_utf8(&self.buf)
                .map_err(|_| Error::at_line(&self.path, self.line_no, "not valid UTF-8 text"))?
                .trim_end_matches(['\n', '\r']);
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            self.parser.parse(line, batch).map_err(|msg| Error::at_line(&self.path, self.line_no, msg))?;
        }
        Ok(!batch.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.pos.load(Ordering::Relaxed), bytes_total: Some(self.total) }
    }

    fn digest(&self) -> Option<String> {
        Some(self.hasher.lock().unwrap().clone().finalize().to_hex().to_string())
    }

    fn name(&self) -> &str {
        &self.path
    }
}

/// Open a text trace of a known format.
pub fn open(path: &Path, format: Format) -> Result<Box<dyn RecordSource>> {
    Ok(match format {
        Format::Hex => Box::new(TextSource::open(path, HexParser::default(), format)?),
        Format::Tkt => unreachable!("the native format is not a text format"),
        other => return Err(Error::config("--format", format!("the {other} importer is not available in this build"))),
    })
}

/// Guess a text format from the first bytes of a file (decompressed). Returns why not when
/// no single format fits.
pub fn sniff(head: &[u8]) -> std::result::Result<Format, String> {
    let text = String::from_utf8_lossy(head);
    let mut lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    if head.len() >= super::input::SNIFF_LIMIT_HINT && !lines.is_empty() {
        lines.pop(); // the last line may be cut
    }
    if lines.is_empty() {
        return Err("the file holds no records".into());
    }
    let sample = &lines[..lines.len().min(200)];
    let mut fits = Vec::new();
    if sample.iter().all(|l| HexParser::default().parse(l, &mut Batch::default()).is_ok()) {
        fits.push(Format::Hex);
    }
    match fits.as_slice() {
        [one] => Ok(*one),
        [] => Err("no known format matches its first lines".into()),
        many => Err(format!("it could be any of {}", many.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "))),
    }
}

fn parse_hex(tok: &str) -> std::result::Result<u64, String> {
    let h = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")).unwrap_or(tok);
    if h.is_empty() || h.len() > 16 {
        return Err(format!("'{tok}' is not a hexadecimal address"));
    }
    u64::from_str_radix(h, 16).map_err(|_| format!("'{tok}' is not a hexadecimal address"))
}

/// One hexadecimal address per line, optionally followed by `R` or `W` (reads when absent).
/// Pin LLC-miss traces as read by the Cori/Kleio simulator.
#[derive(Default)]
pub struct HexParser;

impl LineParser for HexParser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        let mut it = line.split_whitespace();
        let addr = parse_hex(it.next().ok_or("empty line")?)?;
        let write = match it.next() {
            None => false,
            Some("R") | Some("r") => false,
            Some("W") | Some("w") => true,
            Some(t) => return Err(format!("expected R or W after the address, found '{t}'")),
        };
        if let Some(t) = it.next() {
            return Err(format!("unexpected field '{t}' (format: <hex-address> [R|W])"));
        }
        out.push(&Access { addr, write, size: 64, ..Default::default() });
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        TraceMeta { post_cache: true, ..Default::default() }
    }
}
