//! Text trace importers. Each format is a [`LineParser`]; [`TextSource`] does the rest for all
//! of them: plain or gzip input, line numbers for error messages, batching, progress and the
//! digest of the file's bytes.
//!
//! Formats (syntax and meaning in `docs/trace-format.md`): `hex` (one address per line),
//! `ramulator` (Ramulator CPU traces), `hma4` (the adaptive-migration Ramulator fork),
//! `lackey` (Valgrind lackey `--trace-mem=yes`), `dramsim3` (with `dramsim3:tck_ps=N`, its
//! cycles as time), `ramulator2` (Ramulator 2's `LoadStoreTrace` memory traces) and `perf`
//! (`perf script` output of `perf mem record` samples). Parsers never panic on input:
//! every number is parsed with overflow checks and every bad line is an error that says what
//! was expected.

use super::stream::Tap;
use super::{Access, Batch, Format, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufRead, BufReader};
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
        let reader: Box<dyn BufRead + Send> =
            if gz { Box::new(BufReader::with_capacity(1 << 20, flate2::bufread::MultiGzDecoder::new(tap))) } else { Box::new(tap) };
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
            let line =
                std::str::from_utf8(&self.buf).map_err(|_| Error::at_line(&self.path, self.line_no, "not valid UTF-8 text"))?.trim_end_matches(['\n', '\r']);
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
        Format::Dramsim3Clock { tck_ps } => {
            let parser = Dramsim3Parser::with_clock(tck_ps).map_err(|msg| Error::config("--format", msg))?;
            Box::new(TextSource::open(path, parser, format)?)
        }
        Format::Ramulator2 => Box::new(TextSource::open(path, Ramulator2Parser, format)?),
        Format::Perf => {
            // the sampling settings are in the header `perf script --header` prints first
            let (head, _, _) = super::input::head(path)?;
            Box::new(TextSource::open(path, PerfParser::with_header(&String::from_utf8_lossy(&head)), format)?)
        }
        Format::Tkt => return Err(Error::config("--format", "the native format (tkt) is not a text format")),
        Format::Champsim | Format::ChampsimCloudsuite | Format::Drmemtrace => {
            return Err(Error::config("--format", format!("{format} is a binary format, not a text format")))
        }
    })
}

/// Open a DRAMsim3 trace whose cycles are converted to nanoseconds with a memory-clock period
/// of `tck_ps` picoseconds (e.g. 625 for DDR4-3200): `--format dramsim3:tck_ps=N`. Without a
/// period, [`open`] drops the cycles.
pub fn open_dramsim3(path: &Path, tck_ps: u64) -> Result<Box<dyn RecordSource>> {
    let parser = Dramsim3Parser::with_clock(tck_ps).map_err(|msg| Error::config("tck_ps", msg))?;
    Ok(Box::new(TextSource::open(path, parser, Format::Dramsim3Clock { tck_ps })?))
}

/// A fresh parser for a text format (`None` for the native format). A `perf` parser made here
/// has not read the file's header, so its header says the sampling rate is unknown.
pub fn parser_for(format: Format) -> Option<Box<dyn LineParser>> {
    Some(match format {
        Format::Hex => Box::new(HexParser),
        Format::Ramulator => Box::new(RamulatorParser::default()),
        Format::RamulatorNoWb => Box::new(RamulatorParser::without_writebacks()),
        Format::Hma4 => Box::new(Hma4Parser::default()),
        Format::Lackey => Box::new(LackeyParser::default()),
        Format::Dramsim3 => Box::new(Dramsim3Parser::default()),
        Format::Dramsim3Clock { tck_ps } => Box::new(Dramsim3Parser::with_clock(tck_ps).ok()?),
        Format::Ramulator2 => Box::new(Ramulator2Parser),
        Format::Perf => Box::new(PerfParser::default()),
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
/// seven syntaxes are disjoint (one hex token and an optional R/W; 2-3 numbers; 4 numbers ending
/// in 1 or 2; lackey's `I`/`L`/`S`/`M` lines; an address, an operation word and a cycle; `LD` or
/// `ST` and an address; perf's `<seconds>.<fraction>:` time token before an event name), so a
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
    // (the line a format stopped at, the format, why), the formats that read every line last
    let mut why_not: Vec<(usize, Format, String)> = Vec::new();
    for (format, mut parser) in candidates {
        let mut batch = Batch::default();
        let mut failure = None;
        for &(line_no, l) in sample {
            if let Err(msg) = parser.parse(l, &mut batch) {
                failure = Some((line_no, format, format!("line {line_no}: {msg}")));
                break;
            }
        }
        match failure {
            None if !batch.addr.is_empty() => fits.push(format),
            None => why_not.push((usize::MAX, format, "no accesses in the first lines".into())),
            Some(f) => why_not.push(f),
        }
    }
    match fits.as_slice() {
        [one] => Ok(*one),
        [] => Err(no_format_fits(why_not)),
        many => Err(format!("it could be any of {}", many.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "))),
    }
}

/// Why no format fits, in one short line: the format that read furthest, with its reason in
/// full (usually what the user meant), then where each other one stopped.
fn no_format_fits(mut why_not: Vec<(usize, Format, String)>) -> String {
    // furthest first; among equals, the order of Format::ALL
    why_not.sort_by_key(|&(line, _, _)| std::cmp::Reverse(line));
    let Some((_, closest, why)) = why_not.first() else {
        return "no known format matches its first lines".into();
    };
    let mut others: Vec<(usize, Vec<&str>)> = Vec::new();
    for (line, f, _) in &why_not[1..] {
        match others.last_mut() {
            Some((l, names)) if l == line => names.push(f.name()),
            _ => others.push((*line, vec![f.name()])),
        }
    }
    let others: Vec<String> = others
        .iter()
        .map(|(l, names)| if *l == usize::MAX { format!("find no accesses: {}", names.join(", ")) } else { format!("stop at line {l}: {}", names.join(", ")) })
        .collect();
    let rest = if others.is_empty() { String::new() } else { format!("; the others {}", others.join("; ")) };
    format!("no known format matches its first lines; closest: {closest} ({why}){rest}")
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
    insn.checked_add(bubble).and_then(|v| v.checked_add(1)).ok_or_else(|| format!("the instruction count overflows 64 bits (bubble count {bubble})"))
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
            Some(tck) => u64::try_from(cycle as u128 * tck as u128 / 1000).map_err(|_| format!("cycle {cycle} at {tck} ps per cycle is beyond 2^64 ns"))?,
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

const RAMULATOR2_SYNTAX: &str = "LD|ST <address>";

/// Ramulator 2's memory traces, as its `LoadStoreTrace` frontend reads them: `LD <address>`
/// (a read) or `ST <address>` (a write), one request per line, the address decimal or
/// hexadecimal with `0x`/`0X`. Ramulator 2 sends each line to the memory system as it is, so
/// the stream is post-cache; it has no time column: the accesses are in order, like `hex`.
///
/// Ramulator 2 takes the words in capitals only and reads a decimal address in base 10 (a
/// leading zero is not octal there), and so does this parser. Its `ReadWriteTrace` frontend's
/// `R`/`W` lines hold DRAM address vectors, not addresses, and are refused with a message
/// that says so.
#[derive(Default)]
pub struct Ramulator2Parser;

impl LineParser for Ramulator2Parser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        let (f, n) = fields::<2>(line).map_err(|extra| format!("unexpected third field '{extra}' (format: {RAMULATOR2_SYNTAX})"))?;
        let write = match f[0] {
            "LD" => false,
            "ST" => true,
            "R" | "W" => {
                return Err(format!(
                "'{}' is how Ramulator 2's ReadWriteTrace starts a line (R|W <DRAM address vector>), which holds no addresses; expected {RAMULATOR2_SYNTAX}",
                f[0]
            ))
            }
            w if w.eq_ignore_ascii_case("ld") || w.eq_ignore_ascii_case("st") => {
                return Err(format!("expected LD or ST in capitals (as Ramulator 2 reads them), found '{w}'"))
            }
            w => return Err(format!("expected LD (load) or ST (store), found '{w}' (format: {RAMULATOR2_SYNTAX})")),
        };
        if n < 2 {
            return Err(format!("expected {RAMULATOR2_SYNTAX}, found {n} field(s)"));
        }
        let addr = if f[1].starts_with("0x") || f[1].starts_with("0X") {
            parse_hex(f[1])?
        } else if f[1].bytes().all(|b| b.is_ascii_digit()) {
            f[1].parse::<u64>().map_err(|_| format!("the address '{}' does not fit in 64 bits", f[1]))?
        } else {
            let hint = if f[1].bytes().all(|b| b.is_ascii_hexdigit()) { " (hexadecimal needs a 0x prefix)" } else { "" };
            return Err(format!("expected an address (decimal, or hexadecimal with 0x), found '{}'{hint}", f[1]));
        };
        out.push(&Access { addr, write, size: 64, ..Default::default() });
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        TraceMeta { post_cache: true, ..Default::default() }
    }
}

const PERF_SYNTAX: &str = "[[<command>] <tid>] [[<cpu>]] <seconds>.<fraction>: [<period>] <event>: <hex-address> [<data_src> |OP ...]";

/// How an event of a `perf record` session was sampled, from the header `perf script
/// --header` prints (`# event : name = ..., { sample_period, sample_freq } = N, ..., freq = 1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfSampling {
    /// One sample every `N` events (`perf record -c N`).
    Period(u64),
    /// About `N` samples a second, the kernel adjusting the period (`perf record -F N`, and
    /// perf's default).
    Frequency(u64),
    /// The header names the event but not its sampling.
    Unknown,
}

/// What a `perf script --header` header says about the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfHeader {
    /// Each sampled event's name and sampling, in the header's order.
    pub events: Vec<(String, PerfSampling)>,
    /// The recording's command line (`# cmdline : ...`).
    pub cmdline: Option<String>,
}

impl PerfHeader {
    /// Read the header lines (`# ...`) of `text`, the start of a `perf script --header` output;
    /// other lines are ignored. Never fails: what it cannot read it leaves out.
    pub fn parse(text: &str) -> PerfHeader {
        let mut h = PerfHeader::default();
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix('#') else { continue };
            let rest = rest.trim();
            if let Some(cmd) = rest.strip_prefix("cmdline :") {
                h.cmdline = Some(cmd.trim().to_string()).filter(|c| !c.is_empty());
            } else if let Some(desc) = rest.strip_prefix("event :") {
                let desc = desc.trim();
                let Some(after) = desc.strip_prefix("name = ") else { continue };
                // the name may hold commas (cpu/mem-loads,ldlat=30/P) but not ", "
                let end = [", , ", ", id = ", ", type = ", ", size = ", ", config = ", ", { sample_period", ", sample_type = "]
                    .iter()
                    .filter_map(|m| after.find(m))
                    .min()
                    .unwrap_or_else(|| after.find(", ").unwrap_or(after.len()));
                let name = after[..end].trim().trim_end_matches(',').to_string();
                if name.is_empty() || name.starts_with("dummy") {
                    continue; // perf's side-band events sample nothing
                }
                let value = ["{ sample_period, sample_freq } = ", "sample_period = ", "sample_freq = "].iter().find_map(|k| {
                    let v = &after[after.find(k)? + k.len()..];
                    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
                    v[..digits].parse::<u64>().ok()
                });
                let freq = after.contains(", freq = 1") || after.contains(" sample_freq = ");
                let sampling = match value {
                    Some(v) if v > 0 && freq => PerfSampling::Frequency(v),
                    Some(v) if v > 0 => PerfSampling::Period(v),
                    _ => PerfSampling::Unknown,
                };
                h.events.push((name, sampling));
            }
        }
        h
    }

    /// The sampling of every event, in words (the note `perf.sampling`).
    pub fn describe_sampling(&self) -> String {
        if self.events.is_empty() {
            return "unknown: the file has no perf header (record it with perf script --header)".into();
        }
        self.events
            .iter()
            .map(|(name, s)| match s {
                PerfSampling::Period(n) => format!("{name}: one sample every {n} events"),
                PerfSampling::Frequency(n) => format!("{name}: about {n} samples per second (frequency mode: the period varies)"),
                PerfSampling::Unknown => format!("{name}: unknown"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `perf script` output of `perf mem record` samples: one line per sampled load or store,
/// as `perf script -F tid,time,event,addr,data_src` prints it (`docs/trace-format.md`
/// section 22 names the accepted fields):
///
/// ```text
///    4242  3678.072400: cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40         68100142 |OP LOAD|LVL L1 hit|...
/// ```
///
/// The thread id (optional; `pid/tid` also), the cpu (optional), the time (seconds and a
/// fraction of 1 to 9 digits: perf's microseconds, or nanoseconds with `--ns`), the period
/// (optional), the event name and the data address (hexadecimal), then optionally the
/// `data_src` field (its value and its decoding). A sample is a load or a store by its
/// `data_src` operation (`|OP LOAD|`, `|OP STORE|`) or else by its event's name (`mem-loads`,
/// `mem-stores`); a sample with a data address of 0, or whose `data_src` names another
/// operation, is not an access and is skipped. Times become ns after the first sample line.
///
/// The trace is *sampled*: each record stands for one sample, not for every access, and
/// the header's notes say so, with the sampling rate when the file starts with the header
/// `perf script --header` prints ([`PerfParser::with_header`]).
#[derive(Default)]
pub struct PerfParser {
    first_ns: Option<u64>,
    header: PerfHeader,
}

impl PerfParser {
    /// A parser whose trace header records what the perf header at the start of `head` says.
    pub fn with_header(head: &str) -> PerfParser {
        PerfParser { first_ns: None, header: PerfHeader::parse(head) }
    }
}

/// `<seconds>.<fraction>:` as perf prints a sample's time, in ns.
fn perf_time(tok: &str) -> Option<std::result::Result<u64, String>> {
    let t = tok.strip_suffix(':')?;
    let (s, f) = t.split_once('.')?;
    if s.is_empty() || f.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if f.len() > 9 {
        return Some(Err(format!("the time '{t}' has more than 9 digits after the point")));
    }
    let ns = s
        .parse::<u64>()
        .ok()
        .and_then(|secs| secs.checked_mul(1_000_000_000))
        .and_then(|ns| ns.checked_add(f.parse::<u64>().ok()? * 10u64.pow(9 - f.len() as u32)));
    Some(ns.ok_or_else(|| format!("the time '{t}' is beyond 2^64 ns")))
}

/// Load (false) or store (true) by a perf event's name: Intel's and POWER's `mem-loads` and
/// `mem-stores` (`cpu/mem-loads,ldlat=30/P`, `cpu_core/mem-stores/P`...).
fn perf_event_direction(name: &str) -> Option<bool> {
    if name.contains("mem-stores") {
        Some(true)
    } else if name.contains("mem-loads") && !name.contains("mem-loads-aux") {
        Some(false)
    } else {
        None
    }
}

impl LineParser for PerfParser {
    fn parse(&mut self, line: &str, out: &mut Batch) -> std::result::Result<(), String> {
        let mut it = line.split_whitespace();
        let bad = |tok: &str| format!("expected a perf script sample line ({PERF_SYNTAX}), found '{tok}'");
        // before the time: the command name, the thread id (or pid/tid), the cpu, all optional
        // (perf script's default fields start with the command, `%16s`, which may hold blanks:
        // the words are read from the right, where the thread id and the cpu are)
        let is_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let is_tid = |s: &str| is_digits(s) || s.split_once('/').is_some_and(|(p, t)| is_digits(p) && is_digits(t));
        let is_cpu = |s: &str| s.len() > 2 && s.starts_with('[') && s.ends_with(']') && is_digits(&s[1..s.len() - 1]);
        let mut before: Vec<&str> = Vec::new();
        let time = loop {
            match it.next() {
                None => break None,
                Some(tok) => match perf_time(tok) {
                    Some(t) => break Some(t),
                    // a command name is at most 15 bytes (TASK_COMM_LEN), so a few words
                    None if before.len() >= 10 => return Err(bad(before[0])),
                    None => before.push(tok),
                },
            }
        };
        let mut rest = before.as_slice();
        if let [head @ .., last] = rest {
            if is_cpu(last) {
                rest = head;
            }
        }
        let mut tid = 0u32;
        if let [head @ .., last] = rest {
            if is_tid(last) {
                let t = last.rsplit('/').next().unwrap_or(last);
                tid = t.parse::<u32>().map_err(|_| format!("the thread id '{t}' does not fit in 32 bits"))?;
                // the command comes only with a thread id, and is not a number or a cpu
                if let Some(first) = head.first() {
                    if is_tid(first) || is_cpu(first) {
                        return Err(bad(first));
                    }
                }
                rest = &[];
            }
        }
        if let Some(first) = rest.first() {
            return Err(bad(first));
        }
        let ns = time.ok_or("expected the sample's time (<seconds>.<fraction>:), found the end of the line")??;
        // the period (optional), then the event
        let mut tok = it.next().ok_or("expected the event name after the time (perf script -F needs event and addr)")?;
        if tok.bytes().all(|b| b.is_ascii_digit()) {
            tok = it.next().ok_or("expected the event name after the period")?;
        }
        let event = match tok.strip_suffix(':') {
            Some(e) if !e.is_empty() => e,
            _ => return Err(format!("expected the event name and a colon after the time, found '{tok}'")),
        };
        let a = it.next().ok_or("expected the data address after the event (perf script -F needs addr)")?;
        let addr = parse_hex(a).map_err(|_| format!("expected the data address (hexadecimal) after the event, found '{a}'"))?;
        // data_src: its value, then its decoding, which runs to the end of the line
        let mut op = None;
        if let Some(d) = it.next() {
            parse_hex(d).map_err(|_| format!("unexpected '{d}' after the data address (perf script -F may add data_src there, nothing else)"))?;
            let rest_at = d.as_ptr() as usize - line.as_ptr() as usize + d.len();
            let decode = line[rest_at..].trim();
            if decode.starts_with('|') {
                op = decode.find("|OP ").map(|i| decode[i + 4..].split(['|', ' ']).find(|w| !w.is_empty()).unwrap_or(""));
            } else if !(decode.ends_with(')') && decode.contains(" (") || decode.starts_with('(') && decode.ends_with(')')) {
                // else perf script's default fields without data_src: the sample's ip, then
                // its symbol and `(dso)`, which say nothing of the access
                return Err(format!(
                    "expected the decoding of data_src ('|OP ...|LVL ...') or the sample's symbol and (dso) after '{d}', found '{}'",
                    decode.split_whitespace().next().unwrap_or("")
                ));
            }
        }
        let first = *self.first_ns.get_or_insert(ns);
        let ns = ns.checked_sub(first).ok_or_else(|| {
            format!("this sample's time is {} ns before the first sample's; perf script prints samples in time order (was --deltatime used?)", first - ns)
        })?;
        let write = match op {
            Some("LOAD") => Some(false),
            Some("STORE") => Some(true),
            Some("PFETCH") | Some("EXEC") => return Ok(()), // a prefetch or an instruction fetch
            _ => perf_event_direction(event),               // N/A, No, or no data_src
        };
        if addr == 0 {
            return Ok(()); // no data address: not an access
        }
        let Some(write) = write else {
            return Err(match op {
                Some(o) => format!("cannot tell a load from a store: data_src's operation is '{o}' and event '{event}' is neither mem-loads nor mem-stores"),
                None => format!("cannot tell a load from a store: event '{event}' is neither mem-loads nor mem-stores and the line has no data_src (add it to perf script -F)"),
            });
        };
        out.push(&Access { addr, write, ns, tid, size: 64, ..Default::default() });
        Ok(())
    }
    fn meta(&self) -> TraceMeta {
        let mut m = TraceMeta { time_ns: true, post_cache: false, ..Default::default() };
        m.notes.insert("address_space".into(), "virtual".into());
        m.notes.insert("sampled".into(), "yes: each record stands for one sample (a load or store perf sampled), not for every access the program made".into());
        m.notes.insert("perf.sampling".into(), self.header.describe_sampling());
        m.notes.insert("perf.time".into(), "perf's timestamps, as ns after the first sample line".into());
        m.notes.insert(
            "perf.dropped".into(),
            "kept per sample: thread id, time, data address, load or store; dropped: cpu, period, event, data_src levels, access size (64 assumed); samples without a data address or not a load or store are skipped".into(),
        );
        if let Some(c) = &self.header.cmdline {
            m.notes.insert("perf.cmdline".into(), c.clone());
        }
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
            vec![a(140733193388032, false, 11, 0, 64, 4198400), a(140733193388096, true, 12, 0, 64, 4198405), a(0x7ffe0000, false, 15, 0, 64, 0x400a00),]
        );
        let m = p.meta();
        assert!(m.time_insn && m.has_pc && !m.post_cache && !m.time_ns);
        for (line, expect) in
            [("1 2 3", "found 3 field"), ("1 2 3 0", "1 (read) or 2 (write)"), ("1 2 3 R", "1 (read) or 2"), ("1 2 3 1 5", "fifth field"), ("1 2 pc 1", "pc")]
        {
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
        for (line, expect) in [
            ("0x10 FOO 1", "READ or WRITE"),
            ("0x10 READ", "found 2 field"),
            ("0x10 READ x", "decimal cycle"),
            ("0x10 READ 1 2", "fourth field"),
            ("g READ 1", "hexadecimal"),
        ] {
            let e = Dramsim3Parser::default().parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
    }

    #[test]
    fn ramulator2_lines() {
        // Ramulator 2's LoadStoreTrace: LD/ST, then 0x/0X hexadecimal or decimal (base 10,
        // a leading zero included)
        let mut p = Ramulator2Parser;
        let got = parse_all(&mut p, &["LD 0x1234abcd", "ST 0X1234ABCE", "LD 305441741", "ST\t0100", "  LD   0x0  "]).unwrap();
        let rows: Vec<(u64, bool)> = got.iter().map(|x| (x.addr, x.write)).collect();
        assert_eq!(rows, vec![(0x1234abcd, false), (0x1234abce, true), (305441741, false), (100, true), (0, false)]);
        assert!(got.iter().all(|x| x.insn == 0 && x.ns == 0 && x.size == 64 && x.pc == 0 && x.tid == 0));
        let m = p.meta();
        assert!(m.post_cache && !m.time_insn && !m.time_ns && !m.has_pc);
        for (line, expect) in [
            ("LD", "found 1 field"),
            ("LD 0x10 0x20", "unexpected third field '0x20'"),
            ("ld 0x10", "in capitals"),
            ("St 0x10", "in capitals"),
            ("LOAD 0x10", "expected LD (load) or ST (store), found 'LOAD'"),
            ("R 0,0,1,2,33,4", "ReadWriteTrace"),
            ("W 7", "ReadWriteTrace"),
            ("LD ff00", "needs a 0x prefix"),
            ("LD -5", "expected an address"),
            ("LD 0x", "hexadecimal"),
            ("LD 0x10000000000000000", "hexadecimal"),
            ("ST 99999999999999999999", "does not fit in 64 bits"),
        ] {
            let e = Ramulator2Parser.parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
    }

    /// `perf script` without `-F` over `perf mem record` (or `perf record -d -e ...`): its
    /// default fields for a sampled event (perf's tools/perf/builtin-script.c, `output[]` and
    /// `perf_sample__fprintf_start`): the command (`%16s`, blanks allowed), the thread id, the
    /// cpu when sampled, the time, the period, the event, the address, then `data_src` with its
    /// decoding, the weight and the ip, symbol and dso; without `data_src`, ip, symbol and dso.
    #[test]
    fn perf_script_default_fields() {
        let lines = [
            "            gups  1234 [000]  12.345678:          1 cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A        35           4005d6 main+0x16 (/home/u/gups)",
            "     Web Content  1235 [003]  12.345679:      10007         cpu/mem-stores/P:           601040          5080144 |OP STORE|LVL L1 hit|SNP N/A|TLB N/A|LCK N/A|BLK  N/A         0           4005e0 update+0x4 (/home/u/gups)",
            "            gups  1234  12.345680:     cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c80           4005d6 main+0x16 (/home/u/gups)",
            "            gups  1234/1236  12.345681:   cpu/mem-loads,ldlat=30/P:     7ffd1a2b3cc0           4005d6 [unknown] (/home/u/gups)",
        ];
        let got = parse_all(&mut PerfParser::default(), &lines).unwrap();
        let rows: Vec<(u64, bool, u64, u32)> = got.iter().map(|x| (x.addr, x.write, x.ns, x.tid)).collect();
        assert_eq!(
            rows,
            vec![(0x7ffd1a2b3c40, false, 0, 1234), (0x601040, true, 1_000, 1235), (0x7ffd1a2b3c80, false, 2_000, 1234), (0x7ffd1a2b3cc0, false, 3_000, 1236)]
        );
        // detected as perf, as the -F layout is
        assert_eq!(sniff(lines.join("\n").as_bytes()), Ok(Format::Perf));
        // and a line perf would not print is still one error naming what it found
        let e = PerfParser::default().parse("  gups 1234 12.3: cpu/mem-loads/P: 7f00 4005d6 main", &mut Batch::default()).unwrap_err();
        assert!(e.contains("or the sample's symbol and (dso) after '4005d6', found 'main'"), "{e}");
    }

    #[test]
    fn perf_lines() {
        // perf script -F tid,time,event,addr,data_src, and the variants section 22 accepts
        let lines = [
            "   4242  3678.072400: cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A",
            "   4243  3678.072401:         cpu/mem-stores/P:         601040         5080144 |OP STORE|LVL L1 hit|SNP N/A|TLB N/A|LCK N/A|BLK  N/A",
            "3678.072500123: cpu/mem-loads,ldlat=30/P: 601080",
            "4242/4244 [003] 3678.073: 10007 cpu/mem-stores/P: 6010c0",
            "[001] 3678.0735: ibs_op//: 7f0000001000 1a0000042 |OP STORE|LVL L1 hit|SNP N/A|TLB L1 or L2 hit|LCK No|BLK  N/A       35",
            // skipped: no data address; a prefetch; an operation the data source does not name on an IBS event
            "3678.074: cpu/mem-loads,ldlat=30/P: 0",
            "3678.0741: ibs_op//: 7f00 0 |OP PFETCH|LVL N/A",
            "3678.0742: ibs_op//: 0 0 |OP N/A|LVL N/A",
            // N/A falls back to the event's name; an older perf prints no |OP
            "3678.0743: cpu/mem-stores/P: 7f40 0 |OP N/A|LVL N/A",
            "3678.0744: cpu/mem-loads,ldlat=30/P: 7f80 68100142 |LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No",
        ];
        let mut p = PerfParser::default();
        let got = parse_all(&mut p, &lines).unwrap();
        let rows: Vec<(u64, bool, u64, u32)> = got.iter().map(|x| (x.addr, x.write, x.ns, x.tid)).collect();
        assert_eq!(
            rows,
            vec![
                (0x7ffd1a2b3c40, false, 0, 4242),
                (0x601040, true, 1_000, 4243),
                (0x601080, false, 100_123, 0),
                (0x6010c0, true, 600_000, 4244),
                (0x7f0000001000, true, 1_100_000, 0),
                (0x7f40, true, 1_900_000, 0),
                (0x7f80, false, 2_000_000, 0),
            ]
        );
        assert!(got.iter().all(|x| x.insn == 0 && x.size == 64 && x.pc == 0));
        let m = p.meta();
        assert!(m.time_ns && !m.time_insn && !m.has_pc && !m.post_cache);
        assert!(m.notes["sampled"].starts_with("yes"), "{:?}", m.notes);
        assert!(m.notes["perf.sampling"].starts_with("unknown"));
        assert_eq!(m.notes["address_space"], "virtual");
        for (line, expect) in [
            ("prog 3678.072400: mem-loads: 7f00", "found 'prog'"),
            ("prog [001] 3678.072400: mem-loads: 7f00", "found 'prog'"),
            ("4242", "found the end of the line"),
            ("4242 4243 3678.07: mem-loads: 7f00", "found '4242'"),
            ("[001] 4242 3678.07: mem-loads: 7f00", "found '[001]'"),
            ("3678.07:", "expected the event name"),
            ("3678.07: mem-loads", "expected the event name and a colon"),
            ("3678.07: mem-loads:", "expected the data address"),
            ("3678.07: mem-loads: zz", "expected the data address (hexadecimal)"),
            ("3678.07: mem-loads: 7f00 4005d6 main+0x16", "expected the decoding of data_src"),
            ("sum 4242 3678.07: mem-loads: 7f00 4005d6 main+0x16 (/bin/sum", "or the sample's symbol and (dso)"),
            ("3678.07: mem-loads: 7f00 main", "unexpected 'main' after the data address"),
            ("3678.0712345678: mem-loads: 7f00", "more than 9 digits"),
            ("99999999999.5: mem-loads: 7f00", "beyond 2^64 ns"),
            ("3678.07: cycles:u: 7f00", "cannot tell a load from a store: event 'cycles:u'"),
            ("3678.07: ibs_op//: 7f00 0 |OP N/A|LVL N/A", "data_src's operation is 'N/A'"),
            ("99999999999 3678.07: mem-loads: 7f00", "does not fit in 32 bits"),
        ] {
            let e = PerfParser::default().parse(line, &mut Batch::default()).unwrap_err();
            assert!(e.contains(expect), "{line:?}: {e}");
        }
        // times are after the first sample line; one before it is an error, not a wrap
        let mut p = PerfParser::default();
        p.parse("10.5: mem-loads: 40", &mut Batch::default()).unwrap();
        assert!(p.parse("10.4: mem-loads: 40", &mut Batch::default()).unwrap_err().contains("100000000 ns before the first"));
    }

    #[test]
    fn perf_header_gives_the_sampling() {
        let head = "# ========\n# captured on    : Fri Nov 27 08:00:00 2026\n# cmdline : /usr/bin/perf record -e cpu/mem-loads,ldlat=30/P -e cpu/mem-stores/P -c 10007 -- ./a.out 5\n\
# event : name = cpu/mem-loads,ldlat=30/P, , id = { 11, 12 }, type = 4 (PERF_TYPE_RAW), size = 136, config = 0x1cd, { sample_period, sample_freq } = 4000, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC|WEIGHT_STRUCT, read_format = ID, freq = 1, precise_ip = 3\n\
# event : name = cpu/mem-stores/P, , id = { 13 }, type = 4, size = 136, config = 0x82d0, { sample_period, sample_freq } = 10007, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC, precise_ip = 3\n\
# event : name = dummy:u, , id = { 14 }, type = 1, { sample_period, sample_freq } = 1\n\
# event : name = ibs_op//, type = 11, size = 136\n# ========\n#\n   4242  3678.072400: cpu/mem-loads,ldlat=30/P: 7f00\n";
        let h = PerfHeader::parse(head);
        assert_eq!(
            h.events,
            vec![
                ("cpu/mem-loads,ldlat=30/P".to_string(), PerfSampling::Frequency(4000)),
                ("cpu/mem-stores/P".to_string(), PerfSampling::Period(10007)),
                ("ibs_op//".to_string(), PerfSampling::Unknown),
            ]
        );
        assert_eq!(h.cmdline.as_deref(), Some("/usr/bin/perf record -e cpu/mem-loads,ldlat=30/P -e cpu/mem-stores/P -c 10007 -- ./a.out 5"));
        let m = PerfParser::with_header(head).meta();
        assert_eq!(
            m.notes["perf.sampling"],
            "cpu/mem-loads,ldlat=30/P: about 4000 samples per second (frequency mode: the period varies); cpu/mem-stores/P: one sample every 10007 events; ibs_op//: unknown"
        );
        assert!(m.notes["perf.cmdline"].contains("-c 10007"));
        // no header: unknown, and said how to record it
        assert!(PerfHeader::parse("3678.07: mem-loads: 7f00\n").describe_sampling().contains("perf script --header"));
    }

    #[test]
    fn sniff_picks_the_one_format_that_fits() {
        let cases: [(&str, Format); 11] = [
            ("0x7f001000\n0x7f001040 W\n# comment\n\n", Format::Hex),
            ("4096\n8192\n", Format::Hex),
            ("0 9618752\n3 89528192 140734746854976\n", Format::Ramulator),
            ("10 140733193388032 4198400 1\n0 140733193388096 4198405 2\n", Format::Hma4),
            ("==1== Lackey\nI  0023C790,2\n S 04222CAC,4\n", Format::Lackey),
            ("0x12345680 READ 121\n0x12345700 WRITE 130\n", Format::Dramsim3),
            ("12345680 P_MEM_RD 121\n", Format::Dramsim3),
            ("LD 0x1234abcd\nST 0x1234abce\n", Format::Ramulator2),
            ("ST 4096\n", Format::Ramulator2),
            ("# ========\n#\n   4242  3678.072400: cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40\n", Format::Perf),
            ("3678.072400: mem-stores: 4096\n", Format::Perf),
        ];
        for (text, want) in cases {
            assert_eq!(sniff(text.as_bytes()), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn sniff_explains_failures() {
        assert!(sniff(b"\n# only a comment\n").unwrap_err().contains("no records"));
        let e = sniff(b"# a comment\nhello world\n").unwrap_err();
        assert!(e.contains("no known format") && e.contains("ramulator") && e.contains("line 2"), "{e}");
        // the format that read furthest comes first, with its reason whole
        let e = sniff(b"LD 0x1000\nST 0x2000\nLD zz\n").unwrap_err();
        assert!(e.contains("closest: ramulator2 (line 3: ") && e.contains("; the others stop at line 1: hex, ramulator,"), "{e}");
        // banner lines alone hold no access
        assert!(sniff(b"==1== Lackey\n").unwrap_err().contains("closest: lackey (no accesses"));
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
