//! Exporters: any record source to the text formats other simulators read (Ramulator CPU
//! traces, one hexadecimal address per line). Both formats hold less than a tierkit trace; every
//! loss is counted in the [`ExportReport`], never silent. What each format keeps is specified in
//! `docs/trace-format.md`.
//!
//! Output goes to `<name>.partial` beside the target and is renamed into place once complete
//! ([`PartialFile`]); a name ending in `.gz` is gzip-compressed.

use super::summary::{Summary, SummaryBuilder};
use super::{Batch, Format, RecordSource, BATCH_RECORDS};
use crate::error::{Error, Result};
use crate::outfile::PartialFile;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// What an export wrote and what it could not express.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ExportReport {
    pub output: String,
    pub format: String,
    /// Lines written.
    pub lines: u64,
    /// Read accesses written (a ramulator line's read address, a hex line without `W`).
    pub reads: u64,
    /// Write accesses written as writes (a ramulator writeback address, a hex line with `W`).
    pub writes: u64,
    /// Ramulator: writes that do not immediately follow a read of the same instruction count
    /// have no writeback slot; each is written as a line whose read is the written address.
    pub writes_as_reads: u64,
    /// Ramulator: lines whose instruction count a reader reconstructs differently from the
    /// source's (two reads at one count, or a count going backwards); the reader sees the
    /// smallest count that keeps one instruction per line.
    pub insn_shifted: u64,
    /// Non-access records (allocations, frees, sites, markers): neither format has them.
    pub events_dropped: u64,
    /// Accesses whose program counter is dropped.
    pub pc_dropped: u64,
    /// Accesses whose timestamp (ns) is dropped.
    pub ns_dropped: u64,
    /// Accesses whose thread id (non-zero) is dropped.
    pub tid_dropped: u64,
    /// Accesses whose size is not the 64 bytes the importers assume.
    pub size_changed: u64,
    /// Hex: accesses whose instruction count is dropped.
    pub insn_dropped: u64,
    /// Trace-level losses (header properties the format cannot carry).
    pub notes: Vec<String>,
    /// Summary of the source's records.
    pub input_summary: Summary,
}

impl ExportReport {
    /// The non-zero loss counters by name (what a front end prints as "dropped").
    pub fn losses(&self) -> BTreeMap<String, u64> {
        [
            ("writes_as_reads", self.writes_as_reads),
            ("insn_shifted", self.insn_shifted),
            ("events", self.events_dropped),
            ("pc", self.pc_dropped),
            ("ns", self.ns_dropped),
            ("tid", self.tid_dropped),
            ("size", self.size_changed),
            ("insn", self.insn_dropped),
        ]
        .into_iter()
        .filter(|&(_, v)| v > 0)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// True when a reader of the output gets back exactly the source's accesses.
    pub fn is_lossless(&self) -> bool {
        self.losses().is_empty() && self.notes.is_empty()
    }
}

/// The output file: plain or gzip, written under a temporary name.
enum Sink {
    Plain(BufWriter<File>),
    Gz(flate2::write::GzEncoder<BufWriter<File>>),
}

struct Output {
    // dropped before `dest`, which then removes the temporary file unless committed
    sink: Option<Sink>,
    dest: PartialFile,
}

impl Output {
    fn create(path: &Path, force: bool) -> Result<Output> {
        let (dest, file) = PartialFile::create(path, force)?;
        let file = BufWriter::with_capacity(1 << 20, file);
        let gz = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"));
        let sink = if gz { Sink::Gz(flate2::write::GzEncoder::new(file, flate2::Compression::default())) } else { Sink::Plain(file) };
        Ok(Output { sink: Some(sink), dest })
    }

    fn w(&mut self) -> &mut dyn Write {
        match self.sink.as_mut() {
            Some(Sink::Plain(w)) => w,
            Some(Sink::Gz(w)) => w,
            None => unreachable!("written after finish"),
        }
    }

    fn line(&mut self, args: std::fmt::Arguments) -> Result<()> {
        let r = self.w().write_fmt(args).and_then(|_| self.w().write_all(b"\n"));
        r.map_err(|e| self.dest.err(e))
    }

    fn finish(mut self) -> Result<()> {
        let buf = match self.sink.take() {
            Some(Sink::Plain(w)) => w,
            Some(Sink::Gz(g)) => g.finish().map_err(|e| self.dest.err(e))?,
            None => unreachable!("finished twice"),
        };
        let file = buf.into_inner().map_err(|e| self.dest.err(e.into_error()))?;
        self.dest.commit(&file)
    }
}

/// Feed every batch of `src` to `f`, keeping the summary and reporting progress.
fn drive(
    src: &mut dyn RecordSource,
    report: &mut ExportReport,
    mut progress: Option<&mut super::ProgressFn>,
    mut f: impl FnMut(&Batch, &mut ExportReport) -> Result<()>,
) -> Result<()> {
    let page_size = src.meta().page_size;
    if !page_size.is_power_of_two() {
        return Err(Error::config("page_size", format!("{page_size} is not a power of two")));
    }
    let mut summary = SummaryBuilder::new(page_size);
    let mut b = Batch::with_capacity(BATCH_RECORDS);
    while src.next_batch(&mut b)? {
        summary.add_batch(&b);
        report.events_dropped += b.events.len() as u64;
        f(&b, report)?;
        if let Some(cb) = progress.as_mut() {
            let p = src.progress();
            if !cb(p.bytes_read, p.bytes_total) {
                return Err(Error::Interrupted);
            }
        }
    }
    report.input_summary = summary.finish();
    Ok(())
}

/// Per-access losses common to both formats.
fn count_common(b: &Batch, i: usize, has_ns: bool, r: &mut ExportReport) {
    r.pc_dropped += (b.pc_at(i) != 0) as u64;
    r.ns_dropped += has_ns as u64;
    r.tid_dropped += (b.tid_at(i) != 0) as u64;
    r.size_changed += (b.size_at(i) != 64) as u64;
}

fn new_report(out: &Path, format: Format, src: &dyn RecordSource) -> ExportReport {
    let mut r = ExportReport { output: out.display().to_string(), format: format.name().to_string(), ..Default::default() };
    let m = src.meta();
    if m.page_size != 4096 {
        r.notes.push(format!("page size {} is not kept (readers assume 4096)", m.page_size));
    }
    if m.line_size != 64 {
        r.notes.push(format!("line size {} is not kept (readers assume 64)", m.line_size));
    }
    if !m.post_cache {
        r.notes.push(format!("the source is a raw (pre-cache) stream; a {format} reader takes it as post-cache"));
    }
    r
}

/// A Ramulator line being assembled: its read may still gain a writeback.
struct Pending {
    bubble: u64,
    read: u64,
    insn: u64,
}

/// Write `src` as a Ramulator CPU trace: `<bubble> <read-addr> [<wb-addr>]`, decimal.
///
/// Each read starts a line; a write that immediately follows a read with the same instruction
/// count becomes that line's writeback address. Any other write has no place in the format and
/// is written as a line whose read is the written address (so the page's access count and the
/// order survive; the write direction does not), counted in
/// [`ExportReport::writes_as_reads`]. Bubbles are instruction deltas minus one (floor 0) when
/// the source has instruction counts, otherwise 0.
pub fn to_ramulator(src: &mut dyn RecordSource, out: &Path, force: bool) -> Result<ExportReport> {
    to_ramulator_with_progress(src, out, force, None)
}

pub fn to_ramulator_with_progress(src: &mut dyn RecordSource, out: &Path, force: bool, progress: Option<&mut super::ProgressFn>) -> Result<ExportReport> {
    let mut report = new_report(out, Format::Ramulator, src);
    let (time_insn, has_ns) = (src.meta().time_insn, src.meta().time_ns);
    let mut o = Output::create(out, force)?;
    // the count a reader reconstructs for the last line written; bubbles are taken against it
    // so that one shifted line does not shift all that follow
    let mut recon: u64 = 0;
    let mut pending: Option<Pending> = None;

    fn flush(o: &mut Output, p: Pending, wb: Option<u64>, r: &mut ExportReport) -> Result<()> {
        r.lines += 1;
        match wb {
            Some(w) => o.line(format_args!("{} {} {}", p.bubble, p.read, w)),
            None => o.line(format_args!("{} {}", p.bubble, p.read)),
        }
    }

    let name = src.name().to_string();
    let mut seen: u64 = 0;
    drive(src, &mut report, progress, |b, r| {
        for i in 0..b.len() {
            seen += 1;
            count_common(b, i, has_ns, r);
            let (addr, write, insn) = (b.addr[i], b.write[i], b.insn_at(i));
            if write {
                if let Some(p) = pending.take() {
                    if p.insn == insn {
                        r.writes += 1;
                        flush(&mut o, p, Some(addr), r)?;
                        continue;
                    }
                    flush(&mut o, p, None, r)?;
                }
            } else if let Some(p) = pending.take() {
                flush(&mut o, p, None, r)?;
            }
            // every line is at least one instruction after the last: past 2^64 - 1 a reader
            // cannot rebuild it (it refuses the file), so the export is refused here instead
            let next = recon.checked_add(1).ok_or_else(|| {
                Error::trace(&name, format!("access {seen}: a ramulator reader would rebuild its instruction count past 2^64 - 1 (every line counts one instruction); the format cannot express it"))
            })?;
            let bubble = if time_insn { insn.saturating_sub(next) } else { 0 };
            recon = next + bubble;
            if time_insn && recon != insn {
                r.insn_shifted += 1;
            }
            if write {
                r.writes_as_reads += 1;
                flush(&mut o, Pending { bubble, read: addr, insn }, None, r)?;
            } else {
                r.reads += 1;
                pending = Some(Pending { bubble, read: addr, insn });
            }
        }
        Ok(())
    })?;
    if let Some(p) = pending.take() {
        flush(&mut o, p, None, &mut report)?;
    }
    if !time_insn {
        report.notes.push("the source has no instruction counts: every bubble is 0".into());
    }
    o.finish()?;
    Ok(report)
}

/// Write `src` as one hexadecimal address per line: `0x<addr>`, followed by ` W` for writes.
/// Only addresses and directions survive; instruction counts, timestamps, pcs, threads, sizes
/// and non-access records are dropped and counted.
pub fn to_hex(src: &mut dyn RecordSource, out: &Path, force: bool) -> Result<ExportReport> {
    to_hex_with_progress(src, out, force, None)
}

pub fn to_hex_with_progress(src: &mut dyn RecordSource, out: &Path, force: bool, progress: Option<&mut super::ProgressFn>) -> Result<ExportReport> {
    let mut report = new_report(out, Format::Hex, src);
    let (time_insn, has_ns) = (src.meta().time_insn, src.meta().time_ns);
    let mut o = Output::create(out, force)?;
    drive(src, &mut report, progress, |b, r| {
        for i in 0..b.len() {
            count_common(b, i, has_ns, r);
            r.insn_dropped += time_insn as u64;
            r.lines += 1;
            if b.write[i] {
                r.writes += 1;
                o.line(format_args!("0x{:x} W", b.addr[i]))?;
            } else {
                r.reads += 1;
                o.line(format_args!("0x{:x}", b.addr[i]))?;
            }
        }
        Ok(())
    })?;
    o.finish()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::text::{self};
    use crate::trace::{read_all, Access, EventKind, MarkerKind, TraceMeta, VecSource};

    fn rows(src: &mut dyn RecordSource) -> Vec<Access> {
        read_all(src).unwrap().iter().flat_map(|b| (0..b.len()).map(move |i| b.access(i))).collect()
    }

    fn acc(addr: u64, write: bool, insn: u64) -> Access {
        Access { addr, write, insn, size: 64, ..Default::default() }
    }

    fn insn_meta() -> TraceMeta {
        TraceMeta { time_insn: true, ..Default::default() }
    }

    #[test]
    fn ramulator_pairs_writebacks_and_computes_bubbles() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.trace");
        let accs = vec![acc(4096, false, 1), acc(8192, true, 1), acc(64, false, 11), acc(128, false, 12), acc(192, true, 30)];
        let mut src = VecSource::new(insn_meta(), accs, Vec::new());
        let r = to_ramulator(&mut src, &out, false).unwrap();
        // the write at 30 follows a read at 12: no writeback slot, written as a read line
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "0 4096 8192\n9 64\n0 128\n17 192\n");
        assert_eq!((r.lines, r.reads, r.writes, r.writes_as_reads, r.insn_shifted), (4, 3, 1, 1, 0));
        assert_eq!(r.losses(), BTreeMap::from([("writes_as_reads".to_string(), 1)]));
        assert_eq!(r.input_summary.accesses, 5);
    }

    #[test]
    fn ramulator_reports_shifted_counts_and_dropped_fields() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.trace");
        let mut a = vec![acc(0, false, 5), acc(64, false, 5), acc(128, false, 3), acc(192, false, 9)];
        a[1].pc = 0x400000;
        a[2].tid = 2;
        a[3].size = 8;
        let ev = crate::trace::Event { at: 0, insn: 5, ns: 0, tid: 0, kind: EventKind::Marker { marker: MarkerKind::User, id: 1, label: "x".into() } };
        let mut src = VecSource::new(insn_meta(), a, vec![(1, ev)]);
        let r = to_ramulator(&mut src, &out, false).unwrap();
        // reader sees 5, 6, 7, 9: the second and third lines are shifted, the fourth is not
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "4 0\n0 64\n0 128\n1 192\n");
        assert_eq!((r.insn_shifted, r.pc_dropped, r.tid_dropped, r.size_changed, r.events_dropped), (2, 1, 1, 1, 1));
        assert!(!r.is_lossless());
        let mut back = text::open(&out, Format::Ramulator).unwrap();
        assert_eq!(rows(back.as_mut()).iter().map(|a| a.insn).collect::<Vec<_>>(), vec![5, 6, 7, 9]);
    }

    #[test]
    fn ramulator_without_instruction_counts_has_zero_bubbles() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.trace");
        let mut src = VecSource::from_accesses(vec![acc(10, false, 0), acc(20, true, 0), acc(30, true, 0)]);
        let r = to_ramulator(&mut src, &out, false).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "0 10 20\n0 30\n");
        assert_eq!((r.writes, r.writes_as_reads, r.insn_shifted), (1, 1, 0));
        assert_eq!(r.notes.len(), 1);
    }

    #[test]
    fn hex_writes_addresses_and_directions() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.hex");
        let mut src = VecSource::new(insn_meta(), vec![acc(0xdead_beef, false, 1), acc(0x40, true, 2)], Vec::new());
        let r = to_hex(&mut src, &out, false).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "0xdeadbeef\n0x40 W\n");
        assert_eq!((r.lines, r.reads, r.writes, r.insn_dropped), (2, 1, 1, 2));
        let mut back = text::open(&out, Format::Hex).unwrap();
        let got = rows(back.as_mut());
        assert_eq!(got.iter().map(|a| (a.addr, a.write)).collect::<Vec<_>>(), vec![(0xdead_beef, false), (0x40, true)]);
    }

    #[test]
    fn refuses_to_overwrite_without_force_and_leaves_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.trace");
        std::fs::write(&out, b"precious").unwrap();
        let e = to_ramulator(&mut VecSource::from_accesses(vec![acc(1, false, 0)]), &out, false).unwrap_err();
        assert!(matches!(e, Error::Exists { .. }), "{e}");
        assert_eq!(std::fs::read(&out).unwrap(), b"precious");
        to_hex(&mut VecSource::from_accesses(vec![acc(1, false, 0)]), &out, true).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "0x1\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    /// A source that fails after its first batch: the export must fail and leave nothing.
    struct Failing(u32);
    impl RecordSource for Failing {
        fn meta(&self) -> &TraceMeta {
            static M: std::sync::OnceLock<TraceMeta> = std::sync::OnceLock::new();
            M.get_or_init(TraceMeta::default)
        }
        fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
            batch.clear();
            self.0 += 1;
            if self.0 > 1 {
                return Err(Error::trace("bad", "broken"));
            }
            batch.push(&acc(64, false, 0));
            Ok(true)
        }
        fn name(&self) -> &str {
            "failing"
        }
    }

    #[test]
    fn a_failed_export_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.trace.gz");
        assert!(to_ramulator(&mut Failing(0), &out, false).is_err());
        assert!(to_hex(&mut Failing(0), &out, false).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn gz_output_is_compressed_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.trace.gz");
        let accs: Vec<Access> = (0..1000).map(|i| acc(i * 64, false, i + 1)).collect();
        to_ramulator(&mut VecSource::new(insn_meta(), accs.clone(), Vec::new()), &out, false).unwrap();
        assert!(crate::trace::input::is_gzip(&std::fs::read(&out).unwrap()));
        let mut back = text::open(&out, Format::Ramulator).unwrap();
        assert_eq!(rows(back.as_mut()), accs);
    }
}
