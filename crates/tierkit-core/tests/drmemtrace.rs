//! The drmemtrace importer (docs/trace-format.md, sections 23 and 25): thread files made here
//! from the records of DynamoRIO's `clients/drcachesim/common/trace_entry.h` (`trace_entry_t`,
//! `trace_type_t`, `trace_marker_type_t`), in zip archives of chunks as raw2trace writes them
//! and as legacy gzip and plain streams, read field by field with their threads interleaved,
//! detected, and refused with one clear line when truncated, corrupt, raw or 32-bit.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use tierkit_core::trace::drmemtrace::Entry;
use tierkit_core::trace::input::detect;
use tierkit_core::trace::tkt::TktReader;
use tierkit_core::trace::{read_all, Access, Format, TraceInput};

mod common;
use common::{read_err, rows, write_file as write};

fn acc(addr: u64, write: bool, insn: u64, size: u16, tid: u32, pc: u64) -> Access {
    Access { addr, write, insn, ns: 0, size, tid, pc }
}

fn e(ty: u16, size: u16, addr: u64) -> Entry {
    Entry { ty, size, addr }
}
const HEADER: u16 = 25;
const FOOTER: u16 = 26;
const MARKER: u16 = 28;
const THREAD: u16 = 22;
const PID: u16 = 24;
const INSTR: u16 = 10;
const READ: u16 = 0;
const WRITE: u16 = 1;
// marker kinds
const TIMESTAMP: u16 = 2;
const CPU_ID: u16 = 3;
const FUNC_ID: u16 = 4;
const FILETYPE: u16 = 9;
const LINE_SIZE: u16 = 10;
const VERSION: u16 = 12;
const PAGE_SIZE: u16 = 18;
const CHUNK_INSTR_COUNT: u16 = 20;
const CHUNK_FOOTER: u16 = 21;
const RECORD_ORDINAL: u16 = 22;

fn bytes(entries: &[Entry]) -> Vec<u8> {
    entries.iter().flat_map(|e| e.bytes()).collect()
}

/// What raw2trace writes first: header, version and filetype markers, thread, pid, cache line
/// size, chunk instruction count.
fn preamble(tid: u64) -> Vec<Entry> {
    vec![
        e(HEADER, 0, 5),
        e(MARKER, VERSION, 5),
        e(MARKER, FILETYPE, 0x240),
        e(THREAD, 4, tid),
        e(PID, 4, 100),
        e(MARKER, LINE_SIZE, 64),
        e(MARKER, CHUNK_INSTR_COUNT, 10_000_000),
    ]
}

/// Thread 101: two chunks, timestamps 1000 and 3000.
fn thread_a() -> Vec<Vec<Entry>> {
    let mut c0 = preamble(101);
    c0.extend([
        e(MARKER, PAGE_SIZE, 4096),
        e(MARKER, TIMESTAMP, 1000),
        e(MARKER, CPU_ID, 7),
        e(INSTR, 4, 0x401000),
        e(READ, 8, 0x7f00),
        e(INSTR, 3, 0x401004),
        e(WRITE, 4, 0x7f10),
        e(MARKER, CHUNK_FOOTER, 0),
    ]);
    let c1 = vec![
        e(MARKER, RECORD_ORDINAL, 15),
        e(MARKER, TIMESTAMP, 3000),
        e(MARKER, CPU_ID, 7),
        e(12, 2, 0x401007), // an indirect jump
        e(3, 64, 0x8000),   // a prefetch (PREFETCHT0)
        e(READ, 8, 0x7f20),
        e(FOOTER, 0, 0),
    ];
    vec![c0, c1]
}

/// Thread 102: one chunk, timestamps 2000 and 4000.
fn thread_b() -> Vec<Vec<Entry>> {
    let mut c0 = preamble(102);
    c0.extend([
        e(MARKER, TIMESTAMP, 2000),
        e(47, 4, 0xc3c3),
        e(INSTR, 5, 0x402000),
        e(WRITE, 8, 0x9000),
        e(MARKER, TIMESTAMP, 4000),
        e(INSTR, 5, 0x402005),
        e(READ, 16, 0x9010),
        e(MARKER, FUNC_ID, 77),
        e(FOOTER, 0, 0),
    ]);
    vec![c0]
}

/// A per-thread archive: each chunk a `chunk.NNNN` entry, deflated or stored.
fn write_zip(path: &Path, chunks: &[Vec<u8>], deflate: bool) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let method = if deflate { zip::CompressionMethod::Deflated } else { zip::CompressionMethod::Stored };
    for (i, c) in chunks.iter().enumerate() {
        z.start_file(format!("chunk.{i:04}"), zip::write::SimpleFileOptions::default().compression_method(method)).unwrap();
        z.write_all(c).unwrap();
    }
    z.finish().unwrap();
}

/// `drmemtrace.app.100.dir/trace/` with threads 101 (deflated) and 102 (stored).
fn sample_dir(root: &Path) -> PathBuf {
    let d = root.join("drmemtrace.app.100.dir");
    std::fs::create_dir_all(d.join("trace")).unwrap();
    std::fs::create_dir_all(d.join("raw")).unwrap(); // raw2trace leaves it: not read
    let a: Vec<Vec<u8>> = thread_a().iter().map(|c| bytes(c)).collect();
    let b: Vec<Vec<u8>> = thread_b().iter().map(|c| bytes(c)).collect();
    write_zip(&d.join("trace/drmemtrace.app.101.trace.zip"), &a, true);
    write_zip(&d.join("trace/drmemtrace.app.102.trace.zip"), &b, false);
    std::fs::write(d.join("trace/serial_schedule.bin.gz"), b"not a thread").unwrap();
    d
}

fn drmemtrace_expected() -> Vec<Access> {
    vec![
        acc(0x7f00, false, 1, 8, 0, 0x401000),
        acc(0x7f10, true, 2, 4, 0, 0x401004),
        acc(0x9000, true, 3, 8, 1, 0x402000),
        acc(0x7f20, false, 4, 8, 0, 0x401007),
        acc(0x9010, false, 5, 16, 1, 0x402005),
    ]
}

#[test]
fn drmemtrace_threads_interleave_by_their_timestamps() {
    let root = tempfile::tempdir().unwrap();
    let d = sample_dir(root.path());
    for p in [d.clone(), d.join("trace")] {
        assert_eq!(detect(&p).unwrap(), Format::Drmemtrace, "{}", p.display());
        let input = TraceInput::new(&p);
        let mut src = input.open().unwrap();
        assert_eq!(rows(src.as_mut()), drmemtrace_expected());
        let want: BTreeMap<String, u64> =
            [("instruction_fetches", 5), ("prefetches", 1), ("encodings", 1), ("markers", 3)].into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(src.import_losses(), want);
        let m = src.meta();
        assert!(m.time_insn && m.has_pc && !m.post_cache && !m.time_ns);
        assert_eq!((m.page_size, m.line_size), (4096, 64));
        assert_eq!(m.provenance.tool, "import:drmemtrace");
        assert_eq!(m.notes["drmemtrace.os_tids"], "101,102");
        assert_eq!(m.notes["drmemtrace.version"], "5");
        assert_eq!(m.notes["drmemtrace.filetype"], "0x240");
        assert_eq!(m.notes["drmemtrace.interleaving"], "by the threads' timestamp markers");
        // the losses travel with the summary, and into a native trace made from it
        let s = input.summary().unwrap();
        assert_eq!((s.accesses, s.threads, s.duration_insn), (5, 2, 4));
        assert_eq!(s.import_losses, want);
        let out = root.path().join("d.tkt");
        let r = tierkit_core::trace::convert::convert(&input, &out, None, true, None).unwrap();
        assert_eq!(r.summary.import_losses, want);
        assert_eq!(TktReader::read_summary(&out).unwrap().1.import_losses, want);
        assert_eq!(rows(&mut TktReader::open(&out).unwrap()), drmemtrace_expected());
    }
    // one thread's archive alone
    let one = d.join("trace/drmemtrace.app.102.trace.zip");
    assert_eq!(detect(&one).unwrap(), Format::Drmemtrace);
    let got = rows(TraceInput::new(&one).open().unwrap().as_mut());
    assert_eq!(got, vec![acc(0x9000, true, 1, 8, 0, 0x402000), acc(0x9010, false, 2, 16, 0, 0x402005)]);
}

#[test]
fn drmemtrace_digest_is_of_the_records_not_their_compression() {
    let root = tempfile::tempdir().unwrap();
    let d = sample_dir(root.path());
    let mut a = TraceInput::new(&d).open().unwrap();
    rows(a.as_mut());
    // the same records, thread 101 stored instead of deflated
    let chunks: Vec<Vec<u8>> = thread_a().iter().map(|c| bytes(c)).collect();
    write_zip(&d.join("trace/drmemtrace.app.101.trace.zip"), &chunks, false);
    let mut b = TraceInput::new(&d).open().unwrap();
    rows(b.as_mut());
    assert_eq!(a.digest(), b.digest());
    // other records, another digest
    let mut c0 = chunks[0].clone();
    let at = c0.len() - 20;
    c0[at] ^= 1;
    write_zip(&d.join("trace/drmemtrace.app.101.trace.zip"), &[c0, chunks[1].clone()], false);
    let mut c = TraceInput::new(&d).open().unwrap();
    let _ = read_all(c.as_mut());
    assert_ne!(a.digest(), c.digest());
}

#[test]
fn drmemtrace_without_timestamps_reads_thread_by_thread_and_legacy_gz_files() {
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join("trace");
    std::fs::create_dir_all(&d).unwrap();
    let strip = |chunks: Vec<Vec<Entry>>| -> Vec<Entry> { chunks.concat().into_iter().filter(|e| !(e.ty == MARKER && e.size == TIMESTAMP)).collect() };
    // legacy per-thread .trace.gz (the records without chunks) and an uncompressed .trace
    write(&d, "drmemtrace.app.102.trace.gz", &bytes(&strip(thread_b())));
    write(&d, "drmemtrace.app.101.trace", &bytes(&strip(thread_a())));
    assert_eq!(detect(&d.join("drmemtrace.app.102.trace.gz")).unwrap(), Format::Drmemtrace);
    let mut src = TraceInput::new(&d).open().unwrap();
    // no timestamps: threads in the order of their file names, each to its end
    assert_eq!(
        rows(src.as_mut()),
        vec![
            acc(0x7f00, false, 1, 8, 0, 0x401000),
            acc(0x7f10, true, 2, 4, 0, 0x401004),
            acc(0x7f20, false, 3, 8, 0, 0x401007),
            acc(0x9000, true, 4, 8, 1, 0x402000),
            acc(0x9010, false, 5, 16, 1, 0x402005),
        ]
    );
    assert_eq!(src.meta().notes["drmemtrace.interleaving"], "thread by thread (no timestamp markers)");
}

#[test]
fn drmemtrace_bad_input_is_one_clear_line() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let b = thread_b().concat();
    let check = |name: &str, chunks: Vec<Vec<u8>>, deflate: bool, expect: &[&str]| {
        let p = dir.join(name);
        write_zip(&p, &chunks, deflate);
        let e = read_err(&TraceInput::new(&p).with_format(Some(Format::Drmemtrace)));
        for x in expect {
            assert!(e.contains(x), "{name}: expected '{x}' in: {e}");
        }
        assert!(!e.contains('\n') && e.contains(name), "{e}");
    };
    // a chunk cut inside a record
    let mut cut = bytes(&b);
    cut.truncate(cut.len() - 7);
    check("cut.trace.zip", vec![cut], true, &["offset 180", "chunk.0000, record 16", "ends inside a record (5 of its 12 bytes present)"]);
    // the footer missing
    check("nofooter.trace.zip", vec![bytes(&b[..b.len() - 1])], false, &["without a footer record"]);
    // records after the footer
    let mut after = b.clone();
    after.push(e(INSTR, 1, 1));
    check("after.trace.zip", vec![bytes(&after)], false, &["after the footer"]);
    // not starting with a header
    check("nohdr.trace.zip", vec![bytes(&b[1..])], false, &["offset 0", "does not begin with a header record"]);
    // a stored chunk whose bytes changed after it was written: its CRC no longer matches
    let p = dir.join("crc.trace.zip");
    write_zip(&p, &[bytes(&b)], false);
    let mut z = std::fs::read(&p).unwrap();
    let needle = 0x9000u64.to_le_bytes();
    let at = z.windows(8).position(|w| w == needle).unwrap();
    z[at] ^= 0x40;
    std::fs::write(&p, &z).unwrap();
    let e = read_err(&TraceInput::new(&p));
    assert!(e.contains("crc.trace.zip") && e.contains("CRC-32 mismatch"), "{e}");
    // an archive of something else
    let p = dir.join("other.zip");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
    w.start_file("readme.txt", zip::write::SimpleFileOptions::default()).unwrap();
    w.write_all(b"hello").unwrap();
    w.finish().unwrap();
    let e = detect(&p).unwrap_err().to_string();
    assert!(e.contains("other.zip") && e.contains("not a drmemtrace thread file"), "{e}");
}

#[test]
fn raw_and_32_bit_drmemtrace_files_are_refused_with_what_to_do() {
    let root = tempfile::tempdir().unwrap();
    // a raw offline file: offline_entry_t header (EXTENDED, ext HEADER, version 7, type 0x240)
    let hdr: u64 = (6u64 << 61) | (4u64 << 56) | (7u64 << 48) | 0x240;
    let raw: Vec<u8> = [hdr.to_le_bytes(), 0x2000_0000_0000_0065u64.to_le_bytes()].concat();
    let d = root.path().join("drmemtrace.app.9.dir");
    std::fs::create_dir_all(d.join("raw")).unwrap();
    let p = write(&d.join("raw"), "drmemtrace.app.10.raw", &raw);
    for target in [p.clone(), d.clone()] {
        let e = detect(&target).unwrap_err().to_string();
        assert!(e.contains("raw2trace") && e.contains("drraw2trace -indir"), "{e}");
    }
    let e = read_err(&TraceInput::new(&p).with_format(Some(Format::Drmemtrace)));
    assert!(e.contains("raw2trace"), "{e}");
    // gzip-compressed raw data too
    let p = write(root.path(), "x.raw.gz", &raw);
    assert!(detect(&p).unwrap_err().to_string().contains("raw2trace"));
    // a 32-bit build's 8-byte records: header (version 5), version marker
    let mut r32 = Vec::new();
    for (ty, size, addr) in [(HEADER, 0u16, 5u32), (MARKER, VERSION, 5), (MARKER, FILETYPE, 0x220)] {
        r32.extend_from_slice(&ty.to_le_bytes());
        r32.extend_from_slice(&size.to_le_bytes());
        r32.extend_from_slice(&addr.to_le_bytes());
    }
    let p = write(root.path(), "t32.trace.gz", &r32);
    assert!(detect(&p).unwrap_err().to_string().contains("32-bit"));
    // a directory without thread files
    let empty = root.path().join("empty.dir");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(detect(&empty).unwrap_err().to_string().contains("no drmemtrace thread files"));
    // and a directory is no trace of another format
    let e = TraceInput::new(&empty).with_format(Some(Format::Hex)).open().err().unwrap().to_string();
    assert!(e.contains("is a directory"), "{e}");
}

#[test]
fn drmemtrace_has_a_name() {
    assert_eq!(Format::parse("--format", "drmemtrace").unwrap(), Format::Drmemtrace);
    assert_eq!(Format::Drmemtrace.name(), "drmemtrace");
    assert!(!Format::Drmemtrace.is_text());
    assert_eq!(serde_json::to_string(&Format::Drmemtrace).unwrap(), "\"drmemtrace\"");
}
