//! Text trace importers. Each format is a [`LineParser`]; [`TextSource`] does the rest for all
//! of them: plain or gzip input, line numbers for error messages, batching, progress and the
//! digest of the file's bytes.
//!
//! Formats (syntax and meaning in `docs/trace-format.md`): `hex` (one address per line),
//! `ramulator` (Ramulator CPU traces), `hma4` (the adaptive-migration Ramulator fork),
//! `lackey` (Valgrind lackey `--trace-mem=yes`) and `dramsim3`. Parsers never panic on input:
//! every number is parsed with overflow checks and every bad line is an error that says what
//! was expected.

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
        Format::Hex => Box::new(TextSource::open(path, HexParser, format)?),
        Format::Ramulator => Box::new(TextSource::open(path, RamulatorParser::default(), format)?),
        Format::RamulatorNoWb => Box::new(TextSource::open(path, RamulatorParser::without_writebacks(), format)?),
        Format::Hma4 => Box::new(TextSource::open(path, Hma4Parser::default(), format)?),
        Format::Lackey => Box::new(TextSource::open(path, LackeyParser::default(), format)?),
        Format::Dramsim3 => Box::new(TextSource::open(path, Dramsim3Parser::default(), format)?),
        Format::Tkt => return Err(Error::config("--format", "the native format (tkt) is not a text format")),
        Format::Champsim | Format::ChampsimCloudsuite | Format::Drmemtrace => return Err(Error::config("--format", format!("{format} is a binary format, not a text format"))),
    })
}

/// Open a DRAMsim3 trace whose cycles are converted to nanoseconds with a memory-clock period
/// of `tck_ps` picoseconds (e.g. 625 for DDR4-3200). Without a period, [`open`] drops the cycles.
pub fn open_dramsim3(path: &Path, tck_ps: u64) -> Result<Box<dyn RecordSource>> {
    let parser = Dramsim3Parser::with_clock(tck_ps).map_err(|msg| Error::config("tck_ps", msg))?;
    Ok(Box::new(TextSource::open(path, parser, Format::Dramsim3)?))
}

/// A fresh parser for a text format (`None` for the native format).
pub fn parser_for(format: Format) -> Option<Box<dyn LineParser>> {
    Some(match format {
        Format::Hex => Box::new(HexParser),
        Format::Ramulator => Box::new(RamulatorParser::default()),
        Format::RamulatorNoWb => Box::new(RamulatorParser::without_writebacks()),
        Format::Hma4 => Box::new(Hma4Parser::default()),
        Format::Lackey => Box::new(LackeyParser::default()),
        Format::Dramsim3 => Box::new(Dramsim3Parser::default()),
        Format::Tkt | Format::Champsim | Format::ChampsimCloudsuite | Format::Drmemtrace => return None,
    })
}

/// Lines of the sniffed head that sniffing looks at.
const SNIFF_LINES: usize = 200;

/// Guess a text format from the first bytes of a file (decompressed). Returns why not when
/// no single format fits.
///
/// A format fits when its parser accepts every one of the first non-blank, non-comment lines
/// and they hold at least one access (a lackey head of banner lines alone fits nothing). The
/// five syntaxes are disjoint (one hex token and an optional R/W; 2-3 numbers; 4 numbers ending
/// in 1 or 2; lackey's `I`/`L`/`S`/`M` lines; an address, an operation word and a cycle), so a
/// well-formed file fits one; should a future format overlap, the error lists every candidate.
pub fn sniff(head: &[u8]) -> std::result::Result<Format, String> {
    let text = String::from_utf8_lossy(head);
    // (line number, text) of the lines a parser would see
    let mut lines: Vec<(usize, &str)> =
        text.lines().map(str::trim).enumerate().filter(|(_, l)| !l.is_empty() && !l.starts_with('#')).map(|(i, l)| (i + 1, l)).collect();
    if head.len() >= super::input::SNIFF_LIMIT_HINT && !lines.is_empty() {
        lines.pop(); // the last line may be cut
    }
    if lines.is_empty() {
        return Err("the file holds no records".into());
    }
    let sample = &lines[..lines.len().min(SNIFF_LINES)];
    // ramulator-nowb reads the same files as ramulator: only ever chosen by name
    let candidates = Format::ALL.iter().filter(|&&f| f != Format::RamulatorNoWb).filter_map(|&f| parser_for(f).map(|p| (f, p))).collect();
    sniff_among(sample, candidates)
}

/// The one candidate whose parser accepts every sample line and finds an access in them.
fn sniff_among(sample: &[(usize, &str)], candidates: Vec<(Format, Box<dyn LineParser>)>) -> std::result::Result<Format, String> {
    let mut fits = Vec::new();
    let mut why_not = Vec::new();
    for (format, mut parser) in candidates {
        let mut batch = Batch::default();
        let mut failure = None;
        for &(line_no, l) in sample {
            if let Err(msg) = parser.parse(l, &mut batch) {
                failure = Some(format!("{format}: line {line_no}: {msg}"));
                break;
            }
        }
        match failure {
            None if !batch.addr.is_empty() => fits.push(format),
            None => why_not.push(format!("{format}: no accesses in the first lines")),
            Some(f) => why_not.push(f),
        }
    }
    match fits.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("no known format matches its first lines ({})", why_not.join("; "))),
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

/// An unsigned decimal number (no sign, digits only), for counts.
fn parse_dec(tok: &str, what: &str) -> std::result::Result<u64, String> {
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a decimal {what}, found '{tok}'"));
    }
    tok.parse::<u64>().map_err(|_| format!("the {what} '{tok}' does not fit in 64 bits"))
}

/// A number that is decimal unless written with `0x`, as Ramulator-style readers take
/// addresses. `reject_leading_zero`: Ramulator parses addresses with C's base 0, which reads
/// `0123` as octal; rather than guess, such a token is an error.
fn parse_dec_or_hex(tok: &str, what: &str, reject_leading_zero: bool) -> std::result::Result<u64, String> {
    if tok.starts_with("0x") || tok.starts_with("0X") {
        return parse_hex(tok).map_err(|_| format!("expected a {what} (decimal, or hexadecimal with 0x), found '{tok}'"));
    }
    if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
        if reject_leading_zero && tok.len() > 1 && tok.starts_with('0') {
            return Err(format!(
                "the {what} '{tok}' has a leading zero, which Ramulator reads as octal; write it without the zero (decimal) or with 0x (hexadecimal)"
            ));
        }
        return tok.parse::<u64>().map_err(|_| format!("the {what} '{tok}' does not fit in 64 bits"));
    }
    let hint = if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_hexdigit()) { " (hexadecimal needs a 0x prefix)" } else { "" };
    Err(format!("expected a {what} (decimal, or hexadecimal with 0x), found '{tok}'{hint}"))
}

/// Split a line into at most `N` whitespace-separated fields; `Err` carries the first extra
/// field.
fn fields<const N: usize>(line: &str) -> std::result::Result<([&str; N], usize), &str> {
    let mut out = [""; N];
    let mut n = 0;
    for tok in line.split_whitespace() {
        if n == N {
            return Err(tok);
        }
        out[n] = tok;
        n += 1;
    }
    Ok((out, n))
}

/// `insn + bubble + 1`, the cumulative count after a request preceded by `bubble` non-memory
/// instructions; an overflow is an input error, not a wrap.
fn advance(insn: u64, bubble: u64) -> std::result::Result<u64, String> {
    insn.checked_add(bubble)
        .and_then(|v| v.checked_add(1))
        .ok_or_else(|| format!("the instruction count overflows 64 bits (bubble count {bubble})"))
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

const RAMULATOR_SYNTAX: &str = "<bubble-count> <read-address> [<writeback-address>]";

/// Ramulator CPU traces (filtered, i.e. last-level-cache misses):
/// `<bubble-count> <read-addr> [<writeback-addr>]`. The bubble count is decimal; addresses are
/// decimal or `0x` hexadecimal. Each line is one more memory instruction after `bubble`
/// non-memory ones: a read, then (if present) the write of the evicted dirty line, both at the
/// line's cumulative instruction count.
///
/// [`RamulatorParser::without_writebacks`] (format `ramulator-nowb`) checks the writeback
/// field the same way but emits only the read: the stream GTkernel/cori-sim simulates, whose
/// hex traces hold one LLC-miss address per line and no writebacks.
#[derive(Default)]
pub struct RamulatorParser {
    insn: u64,
    drop_writebacks: bool,
}

impl RamulatorParser {
    pub fn without_writebacks() -> RamulatorParser {
        RamulatorParser { insn: 0, drop_writebacks: true }
    }
}

impl LineParser for RamulatorParser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        let (f, n) = fields::<3>(line).map_err(|extra| format!("unexpected fourth field '{extra}' (format: {RAMULATOR_SYNTAX})"))?;
        if n < 2 {
            return Err(format!("expected {RAMULATOR_SYNTAX}, found {n} field(s)"));
        }
        let bubble = parse_dec(f[0], "bubble count")?;
        let read = parse_dec_or_hex(f[1], "read address", true)?;
        let wb = if n == 3 {
            if matches!(f[2], "R" | "W") {
                return Err(format!(
                    "expected a writeback address as the third field, found '{}' (Ramulator's unfiltered <bubble-count> <address> <R|W> traces are not supported)",
                    f[2]
                ));
            }
            Some(parse_dec_or_hex(f[2], "writeback address", true)?)
        } else {
            None
        };
        let insn = advance(self.insn, bubble)?;
        self.insn = insn;
        out.push(&Access { addr: read, write: false, insn, size: 64, ..Default::default() });
        if let Some(addr) = wb.filter(|_| !self.drop_writebacks) {
            out.push(&Access { addr, write: true, insn, size: 64, ..Default::default() });
        }
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        TraceMeta { time_insn: true, post_cache: true, ..Default::default() }
    }
}

const HMA4_SYNTAX: &str = "<bubble-count> <address> <pc> <1|2>";

/// The adaptive-migration Ramulator fork's Pin traces: `<bubble-count> <address> <pc> <type>`,
/// type 1 a read and 2 a write. The fork reads every field as decimal (its source notes that
/// some traces carry hexadecimal addresses; those must be written with `0x` here). Addresses
/// are virtual, and the fork feeds them through its L1 and L3 cache models, so the stream is
/// raw (pre-cache). Every line, read or write, is one memory instruction.
#[derive(Default)]
pub struct Hma4Parser {
    insn: u64,
}

impl LineParser for Hma4Parser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        let (f, n) = fields::<4>(line).map_err(|extra| format!("unexpected fifth field '{extra}' (format: {HMA4_SYNTAX})"))?;
        if n < 4 {
            return Err(format!("expected {HMA4_SYNTAX}, found {n} field(s)"));
        }
        let bubble = parse_dec(f[0], "bubble count")?;
        let addr = parse_dec_or_hex(f[1], "address", false)?;
        let pc = parse_dec_or_hex(f[2], "pc", false)?;
        let write = match f[3] {
            "1" => false,
            "2" => true,
            t => return Err(format!("expected 1 (read) or 2 (write) as the access type, found '{t}'")),
        };
        let insn = advance(self.insn, bubble)?;
        self.insn = insn;
        out.push(&Access { addr, write, insn, size: 64, pc, ..Default::default() });
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        let mut m = TraceMeta { time_insn: true, has_pc: true, post_cache: false, ..Default::default() };
        m.notes.insert("address_space".into(), "virtual".into());
        m
    }
}

/// Is this a Valgrind message line (`==PID== ...` or `--PID-- ...`)?
fn is_valgrind_banner(line: &str) -> bool {
    let t = line.trim_start();
    for mark in ["==", "--"] {
        if let Some(rest) = t.strip_prefix(mark) {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && rest[digits..].starts_with(mark) {
                return true;
            }
        }
    }
    false
}

const LACKEY_SYNTAX: &str = "I|L|S|M <hex-address>,<size>";

/// Valgrind lackey `--trace-mem=yes` output: `I  <addr>,<size>` per instruction executed,
/// ` L`, ` S` and ` M` (load, store, modify) per data access of that instruction, hexadecimal
/// addresses without `0x`, decimal sizes. `I` lines only advance the instruction count and set
/// the pc of the data accesses that follow; `M` is a load then a store of the same bytes.
/// Valgrind's `==PID==`/`--PID--` message lines and `--trace-superblocks=yes` `SB` lines are
/// skipped.
#[derive(Default)]
pub struct LackeyParser {
    insn: u64,
    pc: u64,
}

impl LineParser for LackeyParser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        if is_valgrind_banner(line) {
            return Ok(());
        }
        let (f, n) = fields::<2>(line).map_err(|extra| format!("unexpected field '{extra}' (format: {LACKEY_SYNTAX})"))?;
        if n == 2 && f[0] == "SB" {
            parse_hex(f[1]).map_err(|_| format!("expected SB <hex-address>, found '{}'", f[1]))?;
            return Ok(());
        }
        if n < 2 {
            return Err(format!("expected {LACKEY_SYNTAX}, found {n} field(s)"));
        }
        let (a, s) = f[1].split_once(',').ok_or_else(|| format!("expected <hex-address>,<size> after '{}', found '{}'", f[0], f[1]))?;
        let addr = parse_hex(a)?;
        let size = parse_dec(s, "access size")?;
        let size = u16::try_from(size).map_err(|_| format!("access size {size} is larger than 65535 bytes"))?;
        let acc = |write| Access { addr, write, insn: self.insn, size, pc: self.pc, ..Default::default() };
        match f[0] {
            "I" => {
                self.insn = advance(self.insn, 0)?;
                self.pc = addr;
            }
            "L" => out.push(&acc(false)),
            "S" => out.push(&acc(true)),
            "M" => {
                out.push(&acc(false));
                out.push(&acc(true));
            }
            k => return Err(format!("expected I, L, S or M as the record kind, found '{k}'")),
        }
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        TraceMeta { time_insn: true, has_pc: true, post_cache: false, line_size: 64, ..Default::default() }
    }
}

const DRAMSIM3_SYNTAX: &str = "<hex-address> <READ|WRITE> <cycle>";

/// DRAMsim3 traces: `<hex-address> <operation> <cycle>`. DRAMsim3 reads the address as
/// hexadecimal with or without `0x`, and the cycle (of the memory clock) as decimal. Its reader
/// takes `WRITE`, `write`, `P_MEM_WR` and `BOFF` as writes and anything else as a read; here
/// the reads must be `READ`, `read`, `P_MEM_RD` or `P_FETCH` (DRAMsim2's names), so that a
/// misspelt operation is an error rather than a silent read.
///
/// A cycle is not an instruction count and not a time until a clock is given: without one
/// ([`Default`]) the cycles are dropped (`time_ns = false`); with [`Dramsim3Parser::with_clock`]
/// they become `ns = floor(cycle * tck_ps / 1000)`.
#[derive(Default)]
pub struct Dramsim3Parser {
    tck_ps: Option<u64>,
}

impl Dramsim3Parser {
    /// Convert cycles to nanoseconds with a memory-clock period of `tck_ps` picoseconds.
    pub fn with_clock(tck_ps: u64) -> std::result::Result<Dramsim3Parser, String> {
        if tck_ps == 0 {
            return Err("the memory-clock period must be at least 1 ps".into());
        }
        Ok(Dramsim3Parser { tck_ps: Some(tck_ps) })
    }
}

impl LineParser for Dramsim3Parser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        let (f, n) = fields::<3>(line).map_err(|extra| format!("unexpected fourth field '{extra}' (format: {DRAMSIM3_SYNTAX})"))?;
        if n < 3 {
            return Err(format!("expected {DRAMSIM3_SYNTAX}, found {n} field(s)"));
        }
        let addr = parse_hex(f[0])?;
        let write = match f[1] {
            "READ" | "read" | "P_MEM_RD" | "P_FETCH" => false,
            "WRITE" | "write" | "P_MEM_WR" | "BOFF" => true,
            op => return Err(format!("expected READ or WRITE as the operation (or read, write, P_MEM_RD, P_FETCH, P_MEM_WR, BOFF), found '{op}'")),
        };
        let cycle = parse_dec(f[2], "cycle")?;
        let ns = match self.tck_ps {
            None => 0,
            Some(tck) => u64::try_from(cycle as u128 * tck as u128 / 1000)
                .map_err(|_| format!("cycle {cycle} at {tck} ps per cycle is beyond 2^64 ns"))?,
        };
        out.push(&Access { addr, write, ns, size: 64, ..Default::default() });
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        let mut m = TraceMeta { post_cache: true, time_ns: self.tck_ps.is_some(), ..Default::default() };
        let how = match self.tck_ps {
            None => "memory-clock cycles, dropped (no clock period was given)".to_string(),
            Some(t) => {
                m.notes.insert("dramsim3.tck_ps".into(), t.to_string());
                "memory-clock cycles, converted to ns = floor(cycle * tck_ps / 1000)".to_string()
            }
        };
        m.notes.insert("dramsim3.cycles".into(), how);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parse `lines` with a fresh parser; the accesses as rows.
    fn parse_all(p: &mut dyn LineParser, lines: &[&str]) -> std::result::Result<Vec<Access>, String> {
        let mut b = Batch::default();
        for l in lines {
            p.parse(l, &mut b)?;
        }
        Ok((0..b.len()).map(|i| b.access(i)).collect())
    }

    fn a(addr: u64, write: bool, insn: u64, ns: u64, size: u16, pc: u64) -> Access {
        Access { addr, write, insn, ns, size, tid: 0, pc }
    }

    #[test]
    fn hex_lines() {
        let got = parse_all(&mut HexParser, &["0x1000", "2000 W", "0XfF r", "ab w"]).unwrap();
        assert_eq!(got, vec![a(0x1000, false, 0, 0, 64, 0), a(0x2000, true, 0, 0, 64, 0), a(0xff, false, 0, 0, 64, 0), a(0xab, true, 0, 0, 64, 0)]);
        let m = HexParser.meta();
        assert!(m.post_cache && !m.time_insn && !m.time_ns && !m.has_pc);
    }

    #[test]
    fn ramulator_lines() {
        let mut p = RamulatorParser::default();
        let got = parse_all(&mut p, &["0 9618752", "3 89528192 140734746854976", "  12\t0x1000  ", "0 0"]).unwrap();
        assert_eq!(
            got,
            vec![
                a(9618752, false, 1, 0, 64, 0),
                a(89528192, false, 5, 0, 64, 0),
                a(140734746854976, true, 5, 0, 64, 0),
                a(0x1000, false, 18, 0, 64, 0),
                a(0, false, 19, 0, 64, 0),
            ]
        );
        let m = p.meta();
        assert!(m.time_insn && m.post_cache && !m.time_ns && !m.has_pc);
        assert_eq!((m.line_size, m.page_size), (64, 4096));
    }

    #[test]
    fn ramulator_without_writebacks_keeps_the_reads_only() {
        // format ramulator-nowb: what GTkernel/cori-sim's hex traces hold (no writebacks), with
        // the same instruction counts and the same checks of the writeback field
        let mut p = RamulatorParser::without_writebacks();
        let got = parse_all(&mut p, &["0 9618752", "3 89528192 140734746854976", "  12\t0x1000  "]).unwrap();
        assert_eq!(got, vec![a(9618752, false, 1, 0, 64, 0), a(89528192, false, 5, 0, 64, 0), a(0x1000, false, 18, 0, 64, 0)]);
        let e = RamulatorParser::without_writebacks().parse("1 100 07", &mut Batch::default()).unwrap_err();
        assert!(e.contains("writeback address"), "{e}");
        // never sniffed: the same lines are ramulator
        assert_eq!(sniff(b"0 9618752\n3 89528192 140734746854976\n"), Ok(Format::Ramulator));
    }

    #[test]
    fn ramulator_rejects_what_it_cannot_read() {
        for (line, expect) in [
            ("5", "found 1 field"),
            ("1 2 3 4", "unexpected fourth field '4'"),
            ("x 100", "decimal bubble count"),
            ("-1 100", "decimal bubble count"),
            ("1 ff00", "needs a 0x prefix"),
            ("1 0100", "octal"),
            ("1 100 W", "unfiltered"),
            ("1 100 0x", "writeback address"),
            ("1 99999999999999999999", "does not fit in 64 bits"),
            ("18446744073709551615 1", "overflows"),
        ] {
            let e = RamulatorParser::default().parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
        // the count overflows on the second line, not the first
        let mut p = RamulatorParser::default();
        p.parse("18446744073709551614 1", &mut Batch::default()).unwrap();
        assert!(p.parse("0 1", &mut Batch::default()).unwrap_err().contains("overflows"));
    }

    #[test]
    fn hma4_lines() {
        let mut p = Hma4Parser::default();
        let got = parse_all(&mut p, &["10 140733193388032 4198400 1", "0 140733193388096 4198405 2", "2 0x7ffe0000 0x400a00 1"]).unwrap();
        assert_eq!(
            got,
            vec![
                a(140733193388032, false, 11, 0, 64, 4198400),
                a(140733193388096, true, 12, 0, 64, 4198405),
                a(0x7ffe0000, false, 15, 0, 64, 0x400a00),
            ]
        );
        let m = p.meta();
        assert!(m.time_insn && m.has_pc && !m.post_cache && !m.time_ns);
        for (line, expect) in [("1 2 3", "found 3 field"), ("1 2 3 0", "1 (read) or 2 (write)"), ("1 2 3 R", "1 (read) or 2"), ("1 2 3 1 5", "fifth field"), ("1 2 pc 1", "pc")] {
            let e = Hma4Parser::default().parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
    }

    #[test]
    fn lackey_lines() {
        let mut p = LackeyParser::default();
        let lines = [
            "==12345== Lackey, an example Valgrind tool",
            "--12345-- warning: something",
            "I  0023C790,2",
            "I  0023C792,5",
            " S 04222CAC,4",
            " L 0025f9b8,8",
            "SB 0023c7a0",
            "I  0023C797,3",
            " M 0421FC08,4",
            "==12345== ",
        ];
        let got = parse_all(&mut p, &lines).unwrap();
        assert_eq!(
            got,
            vec![
                a(0x04222CAC, true, 2, 0, 4, 0x0023C792),
                a(0x0025F9B8, false, 2, 0, 8, 0x0023C792),
                a(0x0421FC08, false, 3, 0, 4, 0x0023C797),
                a(0x0421FC08, true, 3, 0, 4, 0x0023C797),
            ]
        );
        let m = p.meta();
        assert!(m.time_insn && m.has_pc && !m.post_cache && !m.time_ns);
        assert_eq!(m.line_size, 64);
        // a data access before any instruction line: count 0, pc unknown
        assert_eq!(parse_all(&mut LackeyParser::default(), &[" L 10,1"]).unwrap(), vec![a(0x10, false, 0, 0, 1, 0)]);
        for (line, expect) in [
            ("X 10,4", "I, L, S or M"),
            (" L 10", "<hex-address>,<size>"),
            (" L 10,x", "decimal access size"),
            (" L 10,70000", "larger than 65535"),
            (" L zz,4", "hexadecimal"),
            (" L 10,4 extra", "unexpected field"),
            ("L", "found 1 field"),
            ("== not a banner", "unexpected field"),
        ] {
            let e = LackeyParser::default().parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
    }

    #[test]
    fn dramsim3_lines_without_and_with_a_clock() {
        let lines = ["0x12345680 READ 121", "12345700 WRITE 130", "0xABC read 200", "0x40 write 201", "0x80 P_MEM_WR 300", "0xc0 P_FETCH 301"];
        let mut p = Dramsim3Parser::default();
        let got = parse_all(&mut p, &lines).unwrap();
        let dirs: Vec<(u64, bool, u64)> = got.iter().map(|x| (x.addr, x.write, x.ns)).collect();
        assert_eq!(dirs, vec![(0x12345680, false, 0), (0x12345700, true, 0), (0xabc, false, 0), (0x40, true, 0), (0x80, true, 0), (0xc0, false, 0)]);
        assert!(got.iter().all(|x| x.insn == 0 && x.size == 64 && x.pc == 0));
        let m = p.meta();
        assert!(!m.time_ns && !m.time_insn && m.post_cache);
        assert!(m.notes["dramsim3.cycles"].contains("dropped"));

        let mut p = Dramsim3Parser::with_clock(625).unwrap();
        let got = parse_all(&mut p, &lines).unwrap();
        // 121 * 0.625 = 75.625 -> 75; 130 * 0.625 = 81.25 -> 81
        assert_eq!(got.iter().map(|x| x.ns).collect::<Vec<_>>(), vec![75, 81, 125, 125, 187, 188]);
        let m = p.meta();
        assert!(m.time_ns && !m.time_insn);
        assert_eq!(m.notes["dramsim3.tck_ps"], "625");
        assert!(Dramsim3Parser::with_clock(0).is_err());
        let mut big = Dramsim3Parser::with_clock(u64::MAX).unwrap();
        assert!(big.parse("0x0 READ 18446744073709551615", &mut Batch::default()).unwrap_err().contains("beyond"));
        for (line, expect) in [("0x10 FOO 1", "READ or WRITE"), ("0x10 READ", "found 2 field"), ("0x10 READ x", "decimal cycle"), ("0x10 READ 1 2", "fourth field"), ("g READ 1", "hexadecimal")] {
            let e = Dramsim3Parser::default().parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
    }

    #[test]
    fn sniff_picks_the_one_format_that_fits() {
        let cases: [(&str, Format); 7] = [
            ("0x7f001000\n0x7f001040 W\n# comment\n\n", Format::Hex),
            ("4096\n8192\n", Format::Hex),
            ("0 9618752\n3 89528192 140734746854976\n", Format::Ramulator),
            ("10 140733193388032 4198400 1\n0 140733193388096 4198405 2\n", Format::Hma4),
            ("==1== Lackey\nI  0023C790,2\n S 04222CAC,4\n", Format::Lackey),
            ("0x12345680 READ 121\n0x12345700 WRITE 130\n", Format::Dramsim3),
            ("12345680 P_MEM_RD 121\n", Format::Dramsim3),
        ];
        for (text, want) in cases {
            assert_eq!(sniff(text.as_bytes()), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn sniff_explains_failures() {
        assert!(sniff(b"\n# only a comment\n").unwrap_err().contains("no records"));
        let e = sniff(b"# a comment\nhello world\n").unwrap_err();
        assert!(e.contains("no known format") && e.contains("ramulator: line 2"), "{e}");
        // banner lines alone hold no access
        assert!(sniff(b"==1== Lackey\n").unwrap_err().contains("lackey: no accesses"));
        // a line of a mixture fits nothing
        assert!(sniff(b"0 4096\n0x40 READ 3\n").is_err());
    }

    #[test]
    fn sniff_reports_ambiguity() {
        // no two built-in syntaxes overlap, so stand two parsers of one syntax side by side
        let both: Vec<(Format, Box<dyn LineParser>)> = vec![(Format::Hex, Box::new(HexParser)), (Format::Dramsim3, Box::new(HexParser))];
        let e = sniff_among(&[(1, "0x40"), (2, "0x80 W")], both).unwrap_err();
        assert_eq!(e, "it could be any of hex, dramsim3");
    }

    #[test]
    fn sniff_ignores_a_cut_last_line() {
        let limit = super::super::input::SNIFF_LIMIT_HINT;
        let mut head = "0x40\n".repeat(limit / 5 + 1);
        head.truncate(limit - 2);
        head.push_str("zz"); // the head ends inside a line
        assert_eq!(sniff(head.as_bytes()), Ok(Format::Hex));
    }
}
