//! Property tests of the round trips (docs/trace-format.md, section 20): native write → read,
//! native → every exporter → importer, convert ∘ convert, and the units' parse ∘ print. The
//! expected values come from `docs/trace-format.md` (sections 4–9 for the native format, 18 for the
//! exports), written out independently here rather than taken from the code under test.
//!
//! Runs are deterministic: a fixed RNG seed and no failure-persistence files, so CI sees the
//! same cases every time. To run more cases or other seeds locally:
//! `PROPTEST_CASES=5000 PROPTEST_RNG_SEED=7 cargo test -p tierkit-core --release --test roundtrip_props`
//! (a failure prints its minimal input; turn it into a named `#[test]` below).

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use tierkit_core::trace::convert::convert;
use tierkit_core::trace::export::ExportReport;
use tierkit_core::trace::summary::scan;
use tierkit_core::trace::threaded::ReadAhead;
use tierkit_core::trace::tkt::{TktReader, TktWriter};
use tierkit_core::trace::{
    read_all, Access, AllocFn, Batch, EventKind, Format, MarkerKind, Projection, Provenance, RecordSource, Summary, TraceInput, TraceMeta,
};

/// Cases per property unless `PROPTEST_CASES` says otherwise; the seed unless
/// `PROPTEST_RNG_SEED` says otherwise.
fn config(cases: u32) -> Config {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        cases: env("PROPTEST_CASES").map(|c| c as u32).unwrap_or(cases),
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(0x07e1_2c17)),
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    }
}

/// A scratch directory, in memory where the system has one: the writers sync every file they
/// finish, and a property writes a dozen files per case.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Records as a flat sequence (accesses and events in program order)

#[derive(Clone, Debug, PartialEq)]
enum Rec {
    A(Access),
    E { insn: u64, ns: u64, tid: u32, kind: EventKind },
}

/// The records of a read, in order: an event precedes the access whose index is its `at`.
fn flatten(batches: &[Batch]) -> Vec<Rec> {
    let mut out = Vec::new();
    for b in batches {
        let mut e = 0;
        for i in 0..b.len() {
            while e < b.events.len() && b.events[e].at as usize <= i {
                let ev = &b.events[e];
                out.push(Rec::E { insn: ev.insn, ns: ev.ns, tid: ev.tid, kind: ev.kind.clone() });
                e += 1;
            }
            out.push(Rec::A(b.access(i)));
        }
        for ev in &b.events[e..] {
            out.push(Rec::E { insn: ev.insn, ns: ev.ns, tid: ev.tid, kind: ev.kind.clone() });
        }
    }
    out
}

fn read_recs(src: &mut dyn RecordSource) -> Vec<Rec> {
    flatten(&read_all(src).unwrap())
}

fn accesses(recs: &[Rec]) -> Vec<Access> {
    recs.iter().filter_map(|r| if let Rec::A(a) = r { Some(*a) } else { None }).collect()
}

/// What the native format keeps of a record (section 4.1): no instruction counts without
/// `time_insn`, no timestamps without `time_ns`, no pcs without `has_pc`; everything else.
fn native_projection(meta: &TraceMeta, recs: &[Rec]) -> Vec<Rec> {
    let t = |v: u64, on: bool| if on { v } else { 0 };
    recs.iter()
        .map(|r| match r {
            Rec::A(a) => Rec::A(Access { insn: t(a.insn, meta.time_insn), ns: t(a.ns, meta.time_ns), pc: t(a.pc, meta.has_pc), ..*a }),
            Rec::E { insn, ns, tid, kind } => Rec::E { insn: t(*insn, meta.time_insn), ns: t(*ns, meta.time_ns), tid: *tid, kind: kind.clone() },
        })
        .collect()
}

/// The summary as section 8 defines it, computed from the records a reader gets back.
fn model_summary(page_size: u64, recs: &[Rec]) -> Summary {
    let shift = page_size.trailing_zeros();
    let mut s = Summary { page_size, ..Default::default() };
    let (mut pages, mut threads, mut sites) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let (mut first, mut max_insn, mut max_ns) = (None, 0u64, 0u64);
    for r in recs {
        s.records += 1;
        let (insn, ns, tid) = match r {
            Rec::A(a) => {
                s.accesses += 1;
                if a.write {
                    s.writes += 1
                } else {
                    s.reads += 1
                }
                pages.insert(a.addr >> shift);
                (a.insn, a.ns, a.tid)
            }
            Rec::E { insn, ns, tid, kind } => {
                match kind {
                    EventKind::Alloc { .. } => s.allocs += 1,
                    EventKind::Free { .. } => s.frees += 1,
                    EventKind::Realloc { .. } => s.reallocs += 1,
                    EventKind::Site { site, .. } => {
                        sites.insert(*site);
                    }
                    EventKind::Marker { .. } => s.markers += 1,
                }
                (*insn, *ns, *tid)
            }
        };
        threads.insert(tid);
        first.get_or_insert((insn, ns));
        max_insn = max_insn.max(insn);
        max_ns = max_ns.max(ns);
    }
    s.pages = pages.len() as u64;
    s.footprint_bytes = s.pages * page_size;
    s.threads = threads.len() as u64;
    s.allocation_sites = sites.len() as u64;
    if let Some((i, n)) = first {
        s.duration_insn = max_insn - i;
        s.duration_ns = max_ns - n;
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Strategies

fn any_string() -> impl Strategy<Value = String> {
    // any Unicode, multi-byte characters included
    proptest::collection::vec(any::<char>(), 0..6).prop_map(|v| v.into_iter().collect())
}

fn meta_strategy() -> impl Strategy<Value = TraceMeta> {
    (6u32..=30)
        .prop_flat_map(|ps| (Just(ps), 0u32..=ps.min(15)))
        .prop_flat_map(|(ps, ls)| {
            (
                Just(ps),
                Just(ls),
                (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
                proptest::option::of(any_string()),
                (proptest::option::of(any_string()), proptest::collection::vec(any_string(), 0..3), any_string()),
                proptest::collection::btree_map(any_string(), any_string(), 0..3),
            )
        })
        .prop_map(|(ps, ls, (time_insn, time_ns, has_pc, post_cache), cache_filter, (program, args, tool), notes)| TraceMeta {
            page_size: 1 << ps,
            line_size: 1 << ls,
            time_insn,
            time_ns,
            has_pc,
            post_cache,
            cache_filter,
            provenance: Provenance { program, args, tool, ..Default::default() },
            notes,
            ..TraceMeta::default()
        })
}

/// A time: mostly small steps forward from the previous record, sometimes anything (going
/// down, wrapping, the extremes).
#[derive(Clone, Debug)]
enum Step {
    Fwd(u64),
    Abs(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..40).prop_map(Step::Fwd),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()].prop_map(Step::Abs),
    ]
}

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        // a few hot pages (of any page size), line-aligned or not
        4 => ((0u64..8), (0u64..64)).prop_map(|(p, l)| (p << 16) | (l << 6)),
        2 => ((0u64..8), any::<u16>()).prop_map(|(p, o)| (p << 16) | o as u64),
        1 => any::<u64>(),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX - 63)],
    ]
}

fn event_kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        (any::<u64>(), any::<u64>(), any::<u32>(), 0u8..8).prop_map(|(addr, size, site, f)| EventKind::Alloc {
            addr,
            size,
            site,
            func: AllocFn::from_u8(f).unwrap()
        }),
        any::<u64>().prop_map(|addr| EventKind::Free { addr }),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(old_addr, addr, size, site)| EventKind::Realloc { old_addr, addr, size, site }),
        // version 2: a site carries its frame keys (one per frame) or none
        (0u32..4, proptest::collection::vec((any_string(), any_string()), 0..3), any::<bool>()).prop_map(|(site, fk, keyed)| {
            let (frames, keys): (Vec<String>, Vec<String>) = fk.into_iter().unzip();
            EventKind::Site { site, frames, keys: if keyed { keys } else { Vec::new() } }
        }),
        (0u8..3, any::<u64>(), any_string()).prop_map(|(m, id, label)| EventKind::Marker { marker: MarkerKind::from_u8(m).unwrap(), id, label }),
    ]
}

#[derive(Clone, Debug)]
enum RecGen {
    A { addr: u64, write: bool, size: u16, tid: u32, pc: u64 },
    E { tid: u32, kind: EventKind },
}

fn rec_gen() -> impl Strategy<Value = (RecGen, Step, Step)> {
    let size = prop_oneof![8 => Just(64u16), 1 => any::<u16>(), 1 => Just(8u16)];
    let tid = prop_oneof![8 => Just(0u32), 2 => 0u32..3, 1 => any::<u32>()];
    let pc = prop_oneof![1 => Just(0u64), 1 => 0x40_0000u64..0x40_0100, 1 => any::<u64>()];
    let rec = prop_oneof![
        8 => (addr(), any::<bool>(), size, tid.clone(), pc).prop_map(|(addr, write, size, tid, pc)| RecGen::A { addr, write, size, tid, pc }),
        1 => (tid, event_kind()).prop_map(|(tid, kind)| RecGen::E { tid, kind }),
    ];
    (rec, step(), step())
}

fn records(max: usize) -> impl Strategy<Value = Vec<Rec>> {
    proptest::collection::vec(rec_gen(), 0..max).prop_map(|gens| {
        let (mut insn, mut ns) = (0u64, 0u64);
        let adv = |t: &mut u64, s: &Step| {
            *t = match *s {
                Step::Fwd(d) => t.wrapping_add(d),
                Step::Abs(v) => v,
            }
        };
        gens.iter()
            .map(|(g, si, sn)| {
                adv(&mut insn, si);
                adv(&mut ns, sn);
                match g {
                    RecGen::A { addr, write, size, tid, pc } => Rec::A(Access { addr: *addr, write: *write, insn, ns, size: *size, tid: *tid, pc: *pc }),
                    RecGen::E { tid, kind } => Rec::E { insn, ns, tid: *tid, kind: kind.clone() },
                }
            })
            .collect()
    })
}

/// A trace: header, records, where its data chunks end (cut points into the records) and
/// where empty data chunks go (positions among the chunks).
#[derive(Clone, Debug)]
struct Case {
    meta: TraceMeta,
    recs: Vec<Rec>,
    cuts: Vec<usize>,
    empties: Vec<usize>,
}

fn case(max: usize) -> impl Strategy<Value = Case> {
    (meta_strategy(), records(max), proptest::collection::vec(any::<usize>(), 0..4), proptest::collection::vec(any::<usize>(), 0..3)).prop_map(
        |(meta, recs, cuts, empties)| {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (recs.len() + 1)).collect();
            cuts.sort();
            Case { meta, recs, cuts, empties }
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Writing native traces with chosen chunk boundaries

fn write_native(meta: &TraceMeta, recs: &[Rec], path: &Path) -> Summary {
    let mut w = TktWriter::create(path, meta, true).unwrap();
    for r in recs {
        match r {
            Rec::A(a) => w.write_access(a).unwrap(),
            Rec::E { insn, ns, tid, kind } => w.write_event(*insn, *ns, *tid, kind).unwrap(),
        }
    }
    w.finish().unwrap()
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}

/// The file header and the data chunks of a native trace (section 3), as bytes.
fn split_native(bytes: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let data_start = 20 + u32_at(bytes, 12) as usize;
    let end = u64::from_le_bytes(bytes[bytes.len() - 16..bytes.len() - 8].try_into().unwrap()) as usize;
    let mut chunks = Vec::new();
    let mut at = data_start;
    while at < end {
        assert_eq!(bytes[at], b'D');
        let len = 17 + u32_at(bytes, at + 9) as usize;
        chunks.push(bytes[at..at + len].to_vec());
        at += len;
    }
    assert_eq!(at, end);
    (bytes[..data_start].to_vec(), chunks)
}

/// A chunk of kind `kind` around `raw` (section 5).
fn chunk(kind: u8, n: u32, raw: &[u8]) -> Vec<u8> {
    let comp = zstd::bulk::compress(raw, 3).unwrap();
    let mut c = vec![kind];
    c.extend_from_slice(&n.to_le_bytes());
    c.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    c.extend_from_slice(&(comp.len() as u32).to_le_bytes());
    c.extend_from_slice(&crc32fast::hash(&comp).to_le_bytes());
    c.extend_from_slice(&comp);
    c
}

/// A valid data chunk of no records: a record count of 0 and ten empty columns (section 6.1).
fn empty_chunk() -> Vec<u8> {
    chunk(b'D', 0, &[0u8; 11])
}

/// Write `case` as a native trace whose data chunks end at `case.cuts` (each piece written by
/// tierkit's writer, so every chunk is the writer's own), with empty data chunks inserted at
/// `case.empties`, an end chunk holding `summary` and the trailer.
fn write_chunked(case: &Case, summary: &Summary, dir: &Path, name: &str) -> PathBuf {
    let mut header = None;
    let mut chunks = Vec::new();
    let mut from = 0;
    for (k, &to) in case.cuts.iter().chain(std::iter::once(&case.recs.len())).enumerate() {
        let piece = dir.join(format!("{name}.piece{k}.tkt"));
        write_native(&case.meta, &case.recs[from..to], &piece);
        let (h, c) = split_native(&std::fs::read(&piece).unwrap());
        header.get_or_insert(h);
        chunks.extend(c);
        from = to;
    }
    for &e in &case.empties {
        chunks.insert(e % (chunks.len() + 1), empty_chunk());
    }
    let mut out = header.unwrap();
    for c in chunks {
        out.extend(c);
    }
    let end = out.len() as u64;
    out.extend(chunk(b'E', 0, &serde_json::to_vec(summary).unwrap()));
    out.extend_from_slice(&end.to_le_bytes());
    out.extend_from_slice(b"TKTEND\x00\x01");
    let p = dir.join(format!("{name}.tkt"));
    std::fs::write(&p, out).unwrap();
    p
}

// ---------------------------------------------------------------------------------------------
// Models of the exports (docs/trace-format.md section 18)

/// What a ramulator export loses (section 18.1): the keys of `ConvertReport::dropped`.
const RAMULATOR_LOSSES: [&str; 7] = ["writes_as_reads", "insn_shifted", "events", "pc", "ns", "tid", "size"];
/// What a hex export loses (section 18.2).
const HEX_LOSSES: [&str; 6] = ["insn", "events", "pc", "ns", "tid", "size"];

/// The loss counters the exporters share (section 18.1, "Dropped and counted").
fn common_losses(meta: &TraceMeta, recs: &[Rec]) -> BTreeMap<String, u64> {
    let acc = accesses(recs);
    let count = |f: &dyn Fn(&Access) -> bool| acc.iter().filter(|a| f(a)).count() as u64;
    let mut m = BTreeMap::new();
    m.insert("events".to_string(), (recs.len() - acc.len()) as u64);
    m.insert("pc".to_string(), count(&|a| a.pc != 0));
    m.insert("ns".to_string(), if meta.time_ns { acc.len() as u64 } else { 0 });
    m.insert("tid".to_string(), count(&|a| a.tid != 0));
    m.insert("size".to_string(), count(&|a| a.size != 64));
    m
}

fn trace_notes(meta: &TraceMeta) -> usize {
    (meta.page_size != 4096) as usize + (meta.line_size != 64) as usize + (!meta.post_cache) as usize
}

/// The accesses a ramulator reader gets back from an export of `recs`, and the losses.
/// Returns `None` when the export cannot be read back: a line's rebuilt instruction count
/// would pass 2^64 − 1.
fn ramulator_model(meta: &TraceMeta, recs: &[Rec]) -> Option<(Vec<Access>, BTreeMap<String, u64>)> {
    let line = |addr, write, insn| Access { addr, write, insn, size: 64, ..Default::default() };
    let mut out: Vec<Access> = Vec::new();
    let mut losses = common_losses(meta, recs);
    let (mut writes_as_reads, mut shifted) = (0u64, 0u64);
    // the rebuilt count of the last line, and the source count of a read still open for a writeback
    let mut recon: Option<u64> = None;
    let mut open: Option<u64> = None;
    for a in accesses(recs) {
        if a.write && open == Some(a.insn) {
            out.push(line(a.addr, true, recon.unwrap()));
            open = None;
            continue;
        }
        // each line is one instruction after the previous one's, or at its own count if later
        let next = match recon {
            None => 1,
            Some(r) => r.checked_add(1)?,
        };
        let rebuilt = if meta.time_insn { a.insn.max(next) } else { next };
        shifted += (meta.time_insn && rebuilt != a.insn) as u64;
        recon = Some(rebuilt);
        out.push(line(a.addr, false, rebuilt));
        if a.write {
            writes_as_reads += 1;
            open = None;
        } else {
            open = Some(a.insn);
        }
    }
    losses.insert("writes_as_reads".into(), writes_as_reads);
    losses.insert("insn_shifted".into(), shifted);
    losses.retain(|_, v| *v > 0);
    Some((out, losses))
}

fn hex_model(meta: &TraceMeta, recs: &[Rec]) -> (Vec<Access>, BTreeMap<String, u64>) {
    let acc = accesses(recs);
    let out = acc.iter().map(|a| Access { addr: a.addr, write: a.write, size: 64, ..Default::default() }).collect();
    let mut losses = common_losses(meta, recs);
    losses.insert("insn".into(), if meta.time_insn { acc.len() as u64 } else { 0 });
    losses.retain(|_, v| *v > 0);
    (out, losses)
}

fn gunzip(p: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap()).read_to_end(&mut v).unwrap();
    v
}

fn conv(input: &Path, format: Option<Format>, out: &Path, to: Format) -> tierkit_core::Result<tierkit_core::trace::convert::ConvertReport> {
    convert(&TraceInput::new(input).with_format(format), out, Some(to), true, None)
}

// ---------------------------------------------------------------------------------------------
// The properties

/// Native write → read, whatever the chunking: the records, header and summary come back,
/// with read-ahead on and off and under a projection.
fn check_native(case: &Case) -> Result<(), TestCaseError> {
    let dir = scratch();
    let want = native_projection(&case.meta, &case.recs);
    let summary = model_summary(case.meta.page_size, &want);
    let mut meta = case.meta.clone();
    meta.version = tierkit_core::trace::FORMAT_VERSION;

    // one writer, its own chunking
    let whole = dir.path().join("whole.tkt");
    let written = write_native(&case.meta, &case.recs, &whole);
    prop_assert_eq!(&written, &summary, "the writer's summary is section 8's");

    let chunked = write_chunked(case, &summary, dir.path(), "chunked");
    for p in [&whole, &chunked] {
        let bytes = std::fs::read(p).unwrap();
        let mut r = TktReader::open(p).unwrap();
        prop_assert_eq!(r.meta(), &meta);
        prop_assert_eq!(read_recs(&mut r), want.clone());
        prop_assert_eq!(r.summary(), Some(&summary));
        prop_assert_eq!(r.digest().unwrap(), blake3::hash(&bytes).to_hex().to_string());
        prop_assert_eq!(TktReader::read_summary(p).unwrap(), (meta.clone(), summary.clone()));
        prop_assert_eq!(scan(&mut TktReader::open(p).unwrap()).unwrap(), summary.clone(), "summary::scan");

        // read-ahead: the same records (empty chunks are batches, not the end)
        let mut ra = ReadAhead::new(Box::new(TktReader::open(p).unwrap()));
        prop_assert_eq!(read_recs(&mut ra), want.clone(), "read-ahead");
        prop_assert_eq!(ra.digest().unwrap(), blake3::hash(&bytes).to_hex().to_string());

        // a consumer that reads neither times nor addresses gets the same pages and the rest
        let mut r = TktReader::open(p).unwrap();
        r.set_projection(Projection { insn: false, ns: false, addr: false });
        let batches = read_all(&mut r).unwrap();
        let shift = case.meta.page_size.trailing_zeros();
        let mut got = Vec::new();
        for b in &batches {
            prop_assert!(b.insn.is_empty() && b.ns.is_empty() && b.addr.is_empty());
            for i in 0..b.len() {
                let page = b.dict_pages[b.dict_idx[i] as usize];
                got.push((page, b.write[i], b.size_at(i), b.tid_at(i), b.pc_at(i)));
            }
        }
        let expect: Vec<_> = accesses(&want).iter().map(|a| (a.addr >> shift, a.write, a.size, a.tid, a.pc)).collect();
        prop_assert_eq!(got, expect, "projected read");
    }

    // re-chunking is canonical: converting the chunked trace gives the writer's own bytes,
    // and converting again changes nothing
    let once = dir.path().join("once.tkt");
    let twice = dir.path().join("twice.tkt");
    let rep = conv(&chunked, None, &once, Format::Tkt).unwrap();
    prop_assert_eq!(&rep.summary, &summary);
    prop_assert!(rep.dropped.is_empty());
    conv(&once, None, &twice, Format::Tkt).unwrap();
    let w = std::fs::read(&whole).unwrap();
    prop_assert!(std::fs::read(&once).unwrap() == w, "convert of the chunked trace differs from the writer's bytes");
    prop_assert!(std::fs::read(&twice).unwrap() == w, "convert is not idempotent");
    Ok(())
}

/// Native → ramulator and hex (plain and gzip) → import: exactly section 18's projection and
/// loss counts; and convert ∘ convert is stable.
fn check_exports(case: &Case) -> Result<(), TestCaseError> {
    let dir = scratch();
    let d = dir.path();
    let src = native_projection(&case.meta, &case.recs);
    let summary = model_summary(case.meta.page_size, &src);
    let native = write_chunked(case, &summary, d, "src");

    // ramulator
    let ram = d.join("a.trace");
    match ramulator_model(&case.meta, &src) {
        None => {
            let e = conv(&native, None, &ram, Format::Ramulator).unwrap_err();
            prop_assert!(e.is_user_error(), "{}", e);
            prop_assert!(!ram.exists());
        }
        Some((want, losses)) => {
            let rep = conv(&native, None, &ram, Format::Ramulator).unwrap();
            prop_assert_eq!(&rep.summary, &summary, "the export's input summary");
            prop_assert_eq!(&rep.dropped, &losses);
            prop_assert_eq!(rep.notes.len(), trace_notes(&case.meta) + !case.meta.time_insn as usize, "{:?}", rep.notes);
            let mut back = TraceInput::new(&ram).with_format(Some(Format::Ramulator)).open().unwrap();
            prop_assert_eq!(accesses(&read_recs(back.as_mut())), want.clone());
            if !want.is_empty() {
                prop_assert_eq!(TraceInput::new(&ram).resolved_format().unwrap(), Format::Ramulator, "detection");
            }
            // gzip output: the same text, compressed
            let ramgz = d.join("a.trace.gz");
            conv(&native, None, &ramgz, Format::Ramulator).unwrap();
            prop_assert!(gunzip(&ramgz) == std::fs::read(&ram).unwrap());
            // convert ∘ convert: ramulator → ramulator, ramulator → native → ramulator (the
            // format named: an empty file cannot be detected, section 12)
            let (r2, t1, r3, t2) = (d.join("b.trace"), d.join("r.tkt"), d.join("c.trace"), d.join("r2.tkt"));
            let rep2 = conv(&ram, Some(Format::Ramulator), &r2, Format::Ramulator).unwrap();
            prop_assert!(rep2.dropped.is_empty(), "{:?}", rep2.dropped);
            conv(&ram, Some(Format::Ramulator), &t1, Format::Tkt).unwrap();
            conv(&t1, None, &r3, Format::Ramulator).unwrap();
            conv(&t1, None, &t2, Format::Tkt).unwrap();
            let text = std::fs::read(&ram).unwrap();
            prop_assert!(std::fs::read(&r2).unwrap() == text, "ramulator → ramulator changed the text");
            prop_assert!(std::fs::read(&r3).unwrap() == text, "ramulator → native → ramulator changed the text");
            prop_assert!(std::fs::read(&t2).unwrap() == std::fs::read(&t1).unwrap(), "native → native changed the bytes");
            if rep.dropped.is_empty() && rep.notes.is_empty() {
                // lossless: the reader gets the source's accesses back
                prop_assert_eq!(want, accesses(&src));
            }
        }
    }

    // hex
    let hex = d.join("a.hex");
    let (want, losses) = hex_model(&case.meta, &src);
    let rep = conv(&native, None, &hex, Format::Hex).unwrap();
    prop_assert_eq!(&rep.summary, &summary, "the export's input summary");
    prop_assert_eq!(&rep.dropped, &losses);
    prop_assert_eq!(rep.notes.len(), trace_notes(&case.meta), "{:?}", rep.notes);
    let mut back = TraceInput::new(&hex).with_format(Some(Format::Hex)).open().unwrap();
    prop_assert_eq!(accesses(&read_recs(back.as_mut())), want.clone());
    if !want.is_empty() {
        prop_assert_eq!(TraceInput::new(&hex).resolved_format().unwrap(), Format::Hex, "detection");
    }
    let hexgz = d.join("a.hex.gz");
    conv(&native, None, &hexgz, Format::Hex).unwrap();
    prop_assert!(gunzip(&hexgz) == std::fs::read(&hex).unwrap());
    let (h2, t1, h3) = (d.join("b.hex"), d.join("h.tkt"), d.join("c.hex"));
    let rep2 = conv(&hex, Some(Format::Hex), &h2, Format::Hex).unwrap();
    prop_assert!(rep2.dropped.is_empty(), "{:?}", rep2.dropped);
    conv(&hex, Some(Format::Hex), &t1, Format::Tkt).unwrap();
    conv(&t1, None, &h3, Format::Hex).unwrap();
    let text = std::fs::read(&hex).unwrap();
    prop_assert!(std::fs::read(&h2).unwrap() == text, "hex → hex changed the text");
    prop_assert!(std::fs::read(&h3).unwrap() == text, "hex → native → hex changed the text");
    Ok(())
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn native_write_read_round_trips(case in case(120)) {
        check_native(&case)?;
    }

    #[test]
    fn exports_give_their_documented_projection_and_convert_is_stable(case in case(80)) {
        check_exports(&case)?;
    }
}

proptest! {
    #![proptest_config(config(16))]

    /// Many distinct pages in one chunk: two-byte page indices (more than 256 pages).
    #[test]
    fn native_round_trips_wide_page_dictionaries(meta in meta_strategy(), pages in proptest::collection::vec(any::<u64>(), 257..700)) {
        let recs: Vec<Rec> = pages.iter().enumerate().map(|(i, &addr)| Rec::A(Access { addr, write: i % 3 == 0, size: 64, insn: i as u64, ..Default::default() })).collect();
        check_native(&Case { meta, recs, cuts: vec![], empties: vec![] })?;
    }
}

/// The writer's own chunk boundary (65,536 records, section 5): records on both sides of it,
/// an event as the last record of the first chunk and another as the first of the second, a
/// thread and a size change across it (the decoding state restarts in every chunk), 65,536
/// distinct pages in the first chunk (two-byte page indices) and byte-granular offsets.
#[test]
fn native_round_trips_across_the_writers_chunk_boundary() {
    let n = tierkit_core::trace::BATCH_RECORDS;
    let meta = TraceMeta { time_insn: true, time_ns: true, has_pc: true, ..TraceMeta::default() };
    let mut recs: Vec<Rec> = (0..n as u64 - 1)
        .map(|i| Rec::A(Access { addr: (i << 12) | (i % 4096), write: i % 5 == 0, insn: i * 3, ns: i * 7, size: 64, tid: 1, pc: 0x40_0000 + i % 9 }))
        .collect();
    recs.push(Rec::E { insn: u64::MAX, ns: 0, tid: 2, kind: EventKind::Marker { marker: MarkerKind::Slice, id: 1, label: "last of chunk 1".into() } });
    recs.push(Rec::E { insn: 5, ns: 1, tid: 2, kind: EventKind::Free { addr: 1 } });
    recs.extend((0..1000u64).map(|i| Rec::A(Access { addr: i * 64, write: i % 2 == 1, insn: 1 << 40, ns: i, size: 8, tid: 2, pc: 0 })));
    let case = Case { meta, recs, cuts: vec![], empties: vec![] };
    check_native(&case).unwrap();
    let dir = scratch();
    let p = dir.path().join("t.tkt");
    write_native(&case.meta, &case.recs, &p);
    let (_, chunks) = split_native(&std::fs::read(&p).unwrap());
    assert_eq!(chunks.iter().map(|c| u32_at(c, 1)).collect::<Vec<_>>(), vec![n as u32, 1001]);
}

/// The section 18 loss names used above are the ones the documentation lists.
#[test]
fn documented_export_losses_are_the_ones_checked() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/trace-format.md")).unwrap();
    let exports = &doc[doc.find("## 18. Exports").unwrap()..];
    let exports = &exports[..exports.find("## 19.").unwrap()];
    let counter = |k: &str| match k {
        "events" | "pc" | "ns" | "tid" | "insn" => format!("{k}_dropped"),
        "size" => "size_changed".to_string(),
        k => k.to_string(),
    };
    for k in RAMULATOR_LOSSES.iter().chain(HEX_LOSSES.iter()) {
        assert!(exports.contains(&format!("`{}`", counter(k))), "section 18 does not document the loss '{k}'");
    }
    // and the report's field names are those counters
    let r = serde_json::to_value(ExportReport::default()).unwrap();
    for k in RAMULATOR_LOSSES.iter().chain(HEX_LOSSES.iter()) {
        assert!(r.get(counter(k)).is_some(), "ExportReport has no '{}'", counter(k));
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the minimal inputs of the failures the properties found, one test each

/// The writer summarised instruction counts and timestamps the header says the trace does not
/// carry (section 8: `duration_insn` is 0 without instruction counts), so its summary
/// disagreed with the records a reader gets back.
#[test]
fn summary_ignores_times_the_header_does_not_carry() {
    let dir = scratch();
    let p = dir.path().join("t.tkt");
    let meta = TraceMeta { time_insn: false, time_ns: false, ..TraceMeta::default() };
    let recs = [
        Rec::A(Access { addr: 0, insn: 5, ns: 7, size: 64, ..Default::default() }),
        Rec::A(Access { addr: 64, insn: 9, ns: 8, size: 64, ..Default::default() }),
    ];
    let s = write_native(&meta, &recs, &p);
    assert_eq!((s.duration_insn, s.duration_ns), (0, 0));
    let mut r = TktReader::open(&p).unwrap();
    assert!(accesses(&read_recs(&mut r)).iter().all(|a| a.insn == 0 && a.ns == 0));
}

/// `SummaryBuilder::add_batch` took a batch's accesses before its events, so an event before
/// the first access was not the "first record" of `duration_insn` (section 8): `summary::scan`
/// and the exports' input summaries disagreed with the writer's.
#[test]
fn scanned_summary_takes_records_in_order() {
    let dir = scratch();
    let p = dir.path().join("t.tkt");
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let recs = [Rec::E { insn: 0, ns: 0, tid: 0, kind: EventKind::Free { addr: 0 } }, Rec::A(Access { addr: 0, insn: 1, size: 64, ..Default::default() })];
    let written = write_native(&meta, &recs, &p);
    assert_eq!(written.duration_insn, 1);
    assert_eq!(scan(&mut TktReader::open(&p).unwrap()).unwrap(), written);
    let rep = conv(&p, None, &dir.path().join("t.hex"), Format::Hex).unwrap();
    assert_eq!(rep.summary, written);
}

/// Two reads at instruction 2^64 − 1: a ramulator reader must rebuild the second at 2^64, which
/// it cannot, so the export wrote a file that cannot be read back, and said nothing. The
/// export is refused instead, naming the record.
#[test]
fn ramulator_export_refuses_counts_a_reader_cannot_rebuild() {
    let dir = scratch();
    let p = dir.path().join("t.tkt");
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let a = Access { addr: 0, insn: u64::MAX, size: 64, ..Default::default() };
    write_native(&meta, &[Rec::A(a), Rec::A(a)], &p);
    let out = dir.path().join("t.trace");
    let e = conv(&p, None, &out, Format::Ramulator).unwrap_err();
    assert!(e.is_user_error() && e.to_string().contains("2^64"), "{e}");
    assert!(!out.exists());
    // one such read is fine
    write_native(&meta, &[Rec::A(a)], &p);
    conv(&p, None, &out, Format::Ramulator).unwrap();
    let mut back = TraceInput::new(&out).open().unwrap();
    assert_eq!(accesses(&read_recs(back.as_mut()))[0].insn, u64::MAX);
}

// ---------------------------------------------------------------------------------------------
// Units (crates/tierkit-core/src/units.rs): parse ∘ print is the identity over each type's
// whole range, print ∘ parse is canonical, and numbers that do not fit are errors

mod units_props {
    use super::config;
    use proptest::prelude::*;
    use tierkit_core::cache::CacheSpec;
    use tierkit_core::policy::params::Value;
    use tierkit_core::units::{parse_bytes, parse_count, parse_duration_ns, Capacity, Period};

    /// Byte-size units and their multiples (binary, any case: `docs/platforms.md`).
    const BYTE_UNITS: [(&str, u32); 13] =
        [("", 0), ("b", 0), ("B", 0), ("K", 10), ("k", 10), ("KiB", 10), ("kb", 10), ("M", 20), ("MiB", 20), ("G", 30), ("GB", 30), ("T", 40), ("tib", 40)];
    /// Count units (decimal).
    const COUNT_UNITS: [(&str, u32); 7] = [("", 0), ("K", 3), ("k", 3), ("M", 6), ("m", 6), ("G", 9), ("B", 9)];

    fn int() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => any::<u64>(),
            2 => (0u32..64).prop_map(|k| 1u64 << k),
            1 => (0u32..64).prop_map(|k| (1u64 << k).wrapping_sub(1)),
            1 => (0u32..64).prop_map(|k| (1u64 << k) + 1),
            1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(1u64 << 53), Just((1u64 << 53) + 1)],
            2 => 0u64..100_000,
        ]
    }

    fn period() -> impl Strategy<Value = Period> {
        (0u8..3, int().prop_filter("periods are positive", |&n| n > 0)).prop_map(|(u, n)| match u {
            0 => Period::Accesses(n),
            1 => Period::Insn(n),
            _ => Period::Ns(n),
        })
    }

    proptest! {
        #![proptest_config(config(256))]

        /// A byte count printed as an integer, with any unit, reads back exactly; one that
        /// does not fit in 64 bits is an error, never a clamped value.
        #[test]
        fn byte_sizes_parse_exactly(n in int(), unit in 0..BYTE_UNITS.len()) {
            let (u, shift) = BYTE_UNITS[unit];
            let want = (n as u128) << shift;
            let got = parse_bytes("k", &format!("{n}{u}"));
            if want <= u64::MAX as u128 {
                prop_assert_eq!(got.unwrap(), want as u64);
            } else {
                prop_assert!(got.is_err(), "{}{} = {} bytes does not fit in 64 bits, parsed as {:?}", n, u, want, got);
            }
            // `Value::Bytes` (a policy parameter's canonical form) prints bytes; they read back
            prop_assert_eq!(parse_bytes("k", &Value::Bytes(n).to_string()).unwrap(), n);
        }

        #[test]
        fn counts_parse_exactly(n in int(), unit in 0..COUNT_UNITS.len()) {
            let (u, exp) = COUNT_UNITS[unit];
            let want = n as u128 * 10u128.pow(exp);
            let got = parse_count("k", &format!("{n}{u}"));
            if want <= u64::MAX as u128 {
                prop_assert_eq!(got.unwrap(), want as u64);
            } else {
                prop_assert!(got.is_err(), "{}{} = {} does not fit in 64 bits, parsed as {:?}", n, u, want, got);
            }
        }

        /// Durations are f64 nanoseconds: exact for integers below 2^53 in any unit.
        #[test]
        fn durations_parse_exactly_below_2_53(n in 0u64..(1 << 53) / 1_000_000_000, unit in 0usize..5) {
            let (u, mult) = [("", 1u64), ("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)][unit];
            prop_assert_eq!(parse_duration_ns("d", &format!("{n}{u}")).unwrap(), (n * mult) as f64);
        }

        /// A period as a policy's canonical form prints it (`Value::Period`) reads back as itself.
        #[test]
        fn periods_print_then_parse_to_themselves(p in period()) {
            let text = Value::Period(p).to_string();
            prop_assert_eq!(Period::parse("p", &text).unwrap(), p, "{}", text);
        }

        /// Whatever a period is written as, its printed form reads back as the same period.
        #[test]
        fn printed_periods_are_canonical(
            whole in 0u64..2_000_000, frac in proptest::option::of(0u32..1000), underscore in any::<bool>(),
            unit in 0usize..14,
        ) {
            let units = ["", "K", "M", "-insn", "K-insn", "insn", "-acc", "-accesses", "ns", "us", "µs", "ms", "s", "M-insn"];
            let mut num = whole.to_string();
            if underscore && num.len() > 3 {
                num.insert(num.len() - 3, '_');
            }
            if let Some(f) = frac {
                num = format!("{num}.{f:03}");
            }
            let text = format!("{num}{}", units[unit]);
            if let Ok(p) = Period::parse("p", &text) {
                let printed = Value::Period(p).to_string();
                prop_assert_eq!(Period::parse("p", &printed).unwrap(), p, "{} -> {}", text, printed);
                prop_assert_eq!(Value::Period(Period::parse("p", &printed).unwrap()).to_string(), printed);
            }
        }

        /// Capacities given as sizes read back as those sizes; fractions in (0, 1] as themselves.
        #[test]
        fn capacities_parse_exactly(n in int().prop_filter("a capacity is positive", |&n| n > 0), unit in 3..BYTE_UNITS.len(), f in 1u32..=1000) {
            let (u, shift) = BYTE_UNITS[unit];
            let want = (n as u128) << shift;
            let got = Capacity::parse("c", &format!("{n}{u}"));
            if want <= u64::MAX as u128 {
                prop_assert_eq!(got.unwrap(), Capacity::Bytes(want as u64));
            } else {
                prop_assert!(got.is_err(), "{:?}", got);
            }
            let frac = f as f64 / 1000.0;
            prop_assert_eq!(Capacity::parse("c", &frac.to_string()).unwrap(), Capacity::Fraction(frac));
        }

        /// A cache spec's canonical text (recorded in trace headers and results) parses back to
        /// the same hierarchy.
        #[test]
        fn cache_specs_print_then_parse_to_themselves(
            line_shift in 0u32..=12,
            levels in proptest::collection::vec((1u32..=32, 0u32..=14, 1u64..=8), 1..4),
        ) {
            let line = 1u64 << line_shift;
            let spec = levels
                .iter()
                .enumerate()
                .map(|(i, &(ways, sets_shift, mul))| format!("L{}:{}:{ways}:{line}", i + 1, (ways as u64) * line * (mul << sets_shift)))
                .collect::<Vec<_>>()
                .join(",");
            if let Some(parsed) = CacheSpec::parse("--cache", &spec).ok().flatten() {
                let text = parsed.describe();
                let again = CacheSpec::parse("--cache", &text).unwrap().unwrap();
                prop_assert_eq!(&again, &parsed, "{} -> {}", spec, text);
                prop_assert_eq!(again.describe(), text);
            }
        }
    }

    /// 2^53 + 1 bytes printed as an integer read back as 2^53: sizes went through f64.
    #[test]
    fn large_integer_sizes_are_exact() {
        assert_eq!(parse_bytes("k", "9007199254740993").unwrap(), 9007199254740993);
        assert_eq!(Period::parse("p", "9007199254740993ns").unwrap(), Period::Ns(9007199254740993));
        assert_eq!(parse_count("k", "9007199254740993").unwrap(), 9007199254740993);
        assert_eq!(Period::parse("p", "9007199254740993").unwrap(), Period::Accesses(9007199254740993));
    }

    /// 2^64 (and 2^24 T) did not fit but were clamped to 2^64 − 1 instead of refused.
    #[test]
    fn sizes_past_64_bits_are_errors() {
        assert_eq!(parse_bytes("k", "18446744073709551615").unwrap(), u64::MAX);
        assert!(parse_bytes("k", "18446744073709551616").is_err());
        assert!(parse_bytes("k", "16777216T").is_err());
        assert!(parse_count("k", "18446744073709551616").is_err());
        assert!(parse_count("k", "18446744073709552G").is_err());
        assert!(Period::parse("p", "18446744073709551616ns").is_err());
        assert!(Period::parse("p", "1e30s").is_err());
        assert_eq!(Period::parse("p", "18446744073709551615ns").unwrap(), Period::Ns(u64::MAX));
    }
}

// ---------------------------------------------------------------------------------------------
// Policy specs: `Params::canonical` (recorded in results, replayed by `--policy`) parses back to
// the same parameters, for every registered policy and any in-range values

mod policy_spec_props {
    use super::config;
    use proptest::prelude::*;
    use tierkit_core::policy::params::{ParamType, Params, PolicySpec, Value};
    use tierkit_core::policy::REGISTRY;
    use tierkit_core::units::Period;

    /// A value of `ty` written as a user would (`None`: keep the default).
    fn value_text(ty: ParamType, r: (u64, u64, bool)) -> Option<String> {
        let (a, b, flag) = r;
        Some(match ty {
            ParamType::Int { min, max } => {
                let span = (max as i128 - min as i128) as u128 + 1;
                (min as i128 + (a as u128 % span) as i128).to_string()
            }
            ParamType::Float { min, max } => {
                let lo = if min.is_finite() { min } else { -1e300 };
                let hi = if max.is_finite() { max } else { 1e300 };
                let v = lo + (hi - lo) * (a as f64 / u64::MAX as f64);
                v.clamp(lo, hi).to_string()
            }
            ParamType::Bool => flag.to_string(),
            ParamType::Choice { options } => options[a as usize % options.len()].to_string(),
            ParamType::Period => {
                let n = b.max(1);
                Value::Period([Period::Accesses(n), Period::Insn(n), Period::Ns(n)][a as usize % 3]).to_string()
            }
            ParamType::Bytes => Value::Bytes(b).to_string(),
            ParamType::Text => return None,
        })
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn canonical_policy_specs_parse_back_to_themselves(
            which in 0..REGISTRY.len(),
            raw in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<bool>(), any::<bool>()), 16),
        ) {
            let info = REGISTRY[which];
            let args: Vec<String> = info
                .params
                .iter()
                .zip(raw.iter().cycle())
                .filter(|(_, r)| r.3)
                .filter_map(|(d, r)| value_text(d.ty, (r.0, r.1, r.2)).map(|v| format!("{}={v}", d.name)))
                .collect();
            let text = if args.is_empty() { info.name.to_string() } else { format!("{}:{}", info.name, args.join(",")) };
            let spec = PolicySpec::parse(&text).unwrap();
            // a combination a policy refuses (e.g. a period shorter than another) is not a round trip to check
            if let Ok(p) = Params::parse(info.name, info.params, &spec) {
                let canon = p.canonical();
                let again = Params::parse(info.name, info.params, &PolicySpec::parse(&canon).unwrap()).unwrap();
                prop_assert_eq!(&again.values, &p.values, "{} -> {}", text, canon);
                prop_assert_eq!(again.canonical(), canon);
            }
        }
    }

    /// `min_free_kbytes` takes -1 ("the kernel's formula"); 2^64 − 1 was read through a wrapping
    /// cast as -1 and accepted. An integer outside i64 is an error naming the parameter.
    #[test]
    fn integers_past_64_bits_are_not_wrapped_into_range() {
        let info = REGISTRY.iter().find(|p| p.name == "tpp").unwrap();
        for v in ["18446744073709551615", "9223372036854775808", "-9223372036854775809"] {
            let spec = PolicySpec::parse(&format!("tpp:min_free_kbytes={v}")).unwrap();
            let e = Params::parse(info.name, info.params, &spec).unwrap_err().to_string();
            assert!(e.contains("min_free_kbytes"), "{v}: {e}");
        }
        let spec = PolicySpec::parse("tpp:min_free_kbytes=-1").unwrap();
        assert_eq!(Params::parse(info.name, info.params, &spec).unwrap().int("min_free_kbytes"), -1);
    }
}

// ---------------------------------------------------------------------------------------------
// Text formats (sections 12-17): any well-formed file, however it is spaced, commented, cased
// or compressed, imports to what the documentation says its lines mean; it is detected as its
// format; native and back keeps it; and for the two formats tierkit also writes, converting to
// the same format gives a canonical text that converts to itself.

mod text_props {
    use super::*;
    use tierkit_core::trace::text;

    /// One line's raw material; each format reads the numbers its own way.
    #[derive(Clone, Debug)]
    struct Item {
        kind: u8,
        a: u64,
        b: u64,
        c: u64,
        style: u8,
        /// a comment or blank line before this one (0: none)
        before: u8,
    }

    fn item() -> impl Strategy<Value = Item> {
        let num = prop_oneof![3 => 0u64..100_000, 2 => any::<u64>(), 1 => Just(u64::MAX), 1 => Just(0u64)];
        (any::<u8>(), num.clone(), num.clone(), num, any::<u8>(), prop_oneof![6 => Just(0u8), 1 => 1u8..4]).prop_map(|(kind, a, b, c, style, before)| Item {
            kind,
            a,
            b,
            c,
            style,
            before,
        })
    }

    /// Hexadecimal as the formats allow it: with or without 0x/0X (when `prefix` allows), any case,
    /// zero-padded to 8 or 16 digits or not.
    fn hex(v: u64, style: u8, prefix: bool) -> String {
        let digits = match (style >> 2) & 3 {
            0 | 1 => format!("{v:x}"),
            2 => format!("{v:08X}"),
            _ => format!("{v:016x}"),
        };
        let digits = if style & 16 != 0 { digits.to_uppercase() } else { digits };
        match (prefix, style & 3) {
            (true, 1) => format!("0x{digits}"),
            (true, 2) => format!("0X{digits}"),
            _ => digits,
        }
    }

    /// An address in a Ramulator-style field: decimal, or hexadecimal with 0x.
    fn dec_or_hex(v: u64, style: u8) -> String {
        if style & 1 == 0 {
            v.to_string()
        } else {
            format!("0x{}", hex(v, style & !3, false))
        }
    }

    fn sep(style: u8) -> &'static str {
        [" ", "  ", "\t", " \t "][(style >> 5) as usize & 3]
    }

    /// The file's text and the accesses section 12-17 say it holds. `tck_ps`: dramsim3's clock.
    fn render(format: Format, items: &[Item], crlf: bool, tck_ps: Option<u64>) -> (String, Vec<Access>) {
        let mut lines: Vec<String> = Vec::new();
        let mut want = Vec::new();
        let (mut insn, mut pc) = (0u64, 0u64);
        let (mut perf_us, mut perf_first) = (1_000_000u64, None);
        let acc = |addr, write, insn, size, pc| Access { addr, write, insn, size, pc, ..Default::default() };
        for it in items {
            match it.before {
                1 => lines.push("# a comment, 0x10 W".into()),
                2 => lines.push(" \t".into()),
                3 => lines.push(String::new()),
                _ => {}
            }
            let s = sep(it.style);
            let line = match format {
                Format::Hex => {
                    let (suffix, write) = [("", false), ("R", false), ("r", false), ("W", true), ("w", true)][it.kind as usize % 5];
                    want.push(acc(it.a, write, 0, 64, 0));
                    if suffix.is_empty() {
                        hex(it.a, it.style, true)
                    } else {
                        format!("{}{s}{suffix}", hex(it.a, it.style, true))
                    }
                }
                Format::Ramulator | Format::Hma4 => {
                    // bubbles below 2^56, so that the counts of a few hundred lines fit in 64 bits
                    let bubble = if it.style & 64 != 0 { it.b >> 8 } else { it.b % 50 };
                    insn += bubble + 1;
                    if format == Format::Ramulator {
                        want.push(acc(it.a, false, insn, 64, 0));
                        if it.kind & 1 == 1 {
                            want.push(acc(it.c, true, insn, 64, 0));
                            format!("{bubble}{s}{}{s}{}", dec_or_hex(it.a, it.style), dec_or_hex(it.c, it.style >> 1))
                        } else {
                            format!("{bubble}{s}{}", dec_or_hex(it.a, it.style))
                        }
                    } else {
                        let write = it.kind & 1 == 1;
                        want.push(acc(it.a, write, insn, 64, it.c));
                        format!("{bubble}{s}{}{s}{}{s}{}", dec_or_hex(it.a, it.style), dec_or_hex(it.c, it.style >> 1), if write { 2 } else { 1 })
                    }
                }
                Format::Lackey => {
                    let size = (it.b % 65_536) as u16;
                    let a = hex(it.a, it.style, true);
                    match it.kind % 8 {
                        0 | 1 => {
                            insn += 1;
                            pc = it.a;
                            format!("I{s}{a},{}", it.b % 16)
                        }
                        2 => {
                            want.push(acc(it.a, false, insn, size, pc));
                            format!(" L{s}{a},{size}")
                        }
                        3 => {
                            want.push(acc(it.a, true, insn, size, pc));
                            format!(" S{s}{a},{size}")
                        }
                        4 => {
                            want.push(acc(it.a, false, insn, size, pc));
                            want.push(acc(it.a, true, insn, size, pc));
                            format!(" M{s}{a},{size}")
                        }
                        5 => format!("=={}== Lackey, an example Valgrind tool", it.b % 100_000),
                        6 => format!("--{}-- warning: something", it.b % 100_000),
                        _ => format!("SB{s}{a}"),
                    }
                }
                Format::Dramsim3 => {
                    let ops = ["READ", "read", "P_MEM_RD", "P_FETCH", "WRITE", "write", "P_MEM_WR", "BOFF"];
                    let k = it.kind as usize % ops.len();
                    let cycle = if tck_ps.is_some() { it.b >> 14 } else { it.b };
                    let ns = tck_ps.map(|t| (cycle as u128 * t as u128 / 1000) as u64).unwrap_or(0);
                    want.push(Access { ns, ..acc(it.a, k >= 4, 0, 64, 0) });
                    format!("{}{s}{}{s}{cycle}", hex(it.a, it.style, true), ops[k])
                }
                Format::Ramulator2 => {
                    let write = it.kind & 1 == 1;
                    want.push(acc(it.a, write, 0, 64, 0));
                    let addr = match it.style & 3 {
                        0 => it.a.to_string(),
                        1 => format!("{:020}", it.a), // base 10 in Ramulator 2: leading zeros are not octal
                        2 => format!("0x{}", hex(it.a, it.style & !3, false)),
                        _ => format!("0X{}", hex(it.a, it.style & !3, false)),
                    };
                    format!("{}{s}{addr}", if write { "ST" } else { "LD" })
                }
                Format::Perf => {
                    // [tid] [cpu] time: [period] event: addr [data_src decoding], times in µs or ns
                    perf_us += it.c % 2_000_000;
                    let first = *perf_first.get_or_insert(perf_us);
                    let mut toks: Vec<String> = Vec::new();
                    let tid = if it.style & 2 != 0 { (it.b % 4_000_000) as u32 } else { 0 };
                    if it.style & 2 != 0 {
                        toks.push(if it.style & 4 != 0 { format!("{}/{tid}", it.b % 7) } else { tid.to_string() });
                    }
                    if it.style & 8 != 0 {
                        toks.push(format!("[{:03}]", it.b % 256));
                    }
                    let (secs, us) = (perf_us / 1_000_000, perf_us % 1_000_000);
                    toks.push(if it.style & 1 != 0 { format!("{secs}.{:09}:", us * 1000) } else { format!("{secs}.{us:06}:") });
                    if it.style & 16 != 0 {
                        toks.push((it.b % 100_000 + 1).to_string());
                    }
                    let (event, decode, write) = match it.kind % 6 {
                        0 => ("cpu/mem-loads,ldlat=30/P", None, Some(false)),
                        1 => ("cpu/mem-stores/P", None, Some(true)),
                        2 => ("ibs_op//", Some("|OP LOAD|LVL L1 hit|SNP N/A|TLB L1 or L2 hit|LCK No|BLK  N/A"), Some(false)),
                        3 => ("memory", Some("|OP STORE|LVL L1 miss|SNP N/A|TLB Walker hit|LCK No|BLK  N/A"), Some(true)),
                        4 => ("cpu/mem-loads,ldlat=30/P", Some("|OP PFETCH|LVL N/A"), None),
                        _ => ("cpu/mem-stores/P", Some("|OP N/A|LVL N/A|SNP N/A"), Some(true)),
                    };
                    toks.push(format!("{event:>24}:"));
                    toks.push(format!("{:16x}", it.a));
                    if let Some(d) = decode {
                        toks.push(format!("{:16x} {d}", it.b));
                    }
                    if let Some(write) = write.filter(|_| it.a != 0) {
                        want.push(Access { ns: (perf_us - first) * 1000, tid, ..acc(it.a, write, 0, 64, 0) });
                    }
                    toks.join(s)
                }
                _ => unreachable!(),
            };
            // leading and trailing blanks are ignored
            lines.push(if it.style & 128 != 0 { format!(" {line}\t") } else { line });
        }
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut t = lines.join(eol);
        if !lines.is_empty() {
            t.push_str(eol);
        }
        (t, want)
    }

    fn write_text(dir: &Path, name: &str, text: &str, gz: bool) -> PathBuf {
        use std::io::Write;
        let p = dir.join(if gz { format!("{name}.gz") } else { name.to_string() });
        if gz {
            let mut g = flate2::write::GzEncoder::new(std::fs::File::create(&p).unwrap(), flate2::Compression::fast());
            g.write_all(text.as_bytes()).unwrap();
            g.finish().unwrap();
        } else {
            std::fs::write(&p, text).unwrap();
        }
        p
    }

    const TEXT_FORMATS: [Format; 7] = [Format::Hex, Format::Ramulator, Format::Hma4, Format::Lackey, Format::Dramsim3, Format::Ramulator2, Format::Perf];

    fn check_text(format: Format, items: &[Item], crlf: bool, gz: bool) -> Result<(), TestCaseError> {
        let dir = scratch();
        let d = dir.path();
        let (text, want) = render(format, items, crlf, None);
        let p = write_text(d, "in.txt", &text, gz);
        let mut src = TraceInput::new(&p).with_format(Some(format)).open().unwrap();
        let got = read_recs(src.as_mut());
        prop_assert_eq!(accesses(&got), want.clone(), "{}", text);
        prop_assert_eq!(got.len(), want.len(), "text formats have no events");
        // the header of section 12 and the format's own section
        let m = src.meta().clone();
        prop_assert_eq!((m.page_size, m.line_size), (4096, 64));
        prop_assert_eq!(&m.provenance.tool, &format!("import:{format}"));
        prop_assert_eq!(m.provenance.source_format.as_deref(), Some(format.name()));
        let (time_insn, time_ns, has_pc, post_cache) = match format {
            Format::Hex | Format::Dramsim3 | Format::Ramulator2 => (false, false, false, true),
            Format::Ramulator => (true, false, false, true),
            Format::Perf => (false, true, false, false),
            _ => (true, false, true, false),
        };
        prop_assert_eq!((m.time_insn, m.time_ns, m.has_pc, m.post_cache), (time_insn, time_ns, has_pc, post_cache));
        if format == Format::Perf {
            prop_assert!(m.notes["sampled"].starts_with("yes"));
        }
        if !want.is_empty() {
            prop_assert_eq!(TraceInput::new(&p).resolved_format().unwrap(), format, "detection");
        }
        // ramulator-nowb: the same lines, the reads alone
        if format == Format::Ramulator {
            let mut nowb = TraceInput::new(&p).with_format(Some(Format::RamulatorNoWb)).open().unwrap();
            let reads: Vec<Access> = want.iter().filter(|a| !a.write).copied().collect();
            prop_assert_eq!(accesses(&read_recs(nowb.as_mut())), reads);
        }
        // dramsim3 with a clock: ns = floor(cycle × tck_ps / 1000)
        if format == Format::Dramsim3 {
            let tck = 1 + items.first().map(|i| i.c % 5000).unwrap_or(624);
            let (text, want) = render(format, items, crlf, Some(tck));
            let p = write_text(d, "clocked.txt", &text, gz);
            // as --format dramsim3:tck_ps=N names it
            let named = Format::parse("--format", &format!("dramsim3:tck_ps={tck}")).unwrap();
            prop_assert_eq!(named, Format::Dramsim3Clock { tck_ps: tck });
            let mut src = TraceInput::new(&p).with_format(Some(named)).open().unwrap();
            prop_assert!(src.meta().time_ns);
            prop_assert_eq!(accesses(&read_recs(src.as_mut())), want.clone());
            // the library call reads the same
            prop_assert_eq!(accesses(&read_recs(text::open_dramsim3(&p, tck).unwrap().as_mut())), want);
        }
        // native and back
        let t1 = d.join("t1.tkt");
        let rep = conv(&p, Some(format), &t1, Format::Tkt).unwrap();
        prop_assert_eq!(rep.summary, model_summary(4096, &got));
        let mut r = TktReader::open(&t1).unwrap();
        prop_assert_eq!(r.meta(), &m);
        prop_assert_eq!(read_recs(&mut r), got.clone());
        // canonical text: converting to the same format twice gives the same bytes
        if matches!(format, Format::Hex | Format::Ramulator) {
            let (c1, c2) = (d.join("c1.txt"), d.join("c2.txt"));
            let rep = conv(&p, Some(format), &c1, format).unwrap();
            prop_assert!(rep.dropped.is_empty() && rep.notes.is_empty(), "{:?} {:?}", rep.dropped, rep.notes);
            conv(&c1, Some(format), &c2, format).unwrap();
            prop_assert!(std::fs::read(&c1).unwrap() == std::fs::read(&c2).unwrap(), "the canonical text is not a fixed point");
            let mut back = TraceInput::new(&c1).with_format(Some(format)).open().unwrap();
            prop_assert_eq!(read_recs(back.as_mut()), got);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(96))]

        #[test]
        fn text_imports_mean_what_the_documentation_says(
            format in 0..TEXT_FORMATS.len(),
            items in proptest::collection::vec(item(), 0..60),
            crlf in any::<bool>(),
            gz in any::<bool>(),
        ) {
            check_text(TEXT_FORMATS[format], &items, crlf, gz)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Platform files (docs/platforms.md): a platform written as TOML, YAML or JSON loads back as
// itself, and writing what was loaded gives the same text

mod platform_props {
    use super::{config, scratch};
    use proptest::prelude::*;
    use tierkit_core::platform::{CapacityField, Platform, PRESETS};

    /// A number in [lo, hi] spread over its orders of magnitude (docs/limits.md, "Platform numbers").
    fn in_range(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
        (0.0f64..=1.0, 0u8..4).prop_map(move |(u, k)| match k {
            0 => lo,
            1 => hi,
            _ => {
                let (a, b) = (lo.max(1e-12).ln(), hi.ln());
                (a + (b - a) * u).exp().clamp(lo, hi)
            }
        })
    }

    fn capacity() -> impl Strategy<Value = Option<CapacityField>> {
        prop_oneof![
            Just(None),
            (1u32..=1000).prop_map(|f| Some(CapacityField::Number(f as f64 / 1000.0))),
            prop_oneof![Just("16G"), Just("512M"), Just("12.5%"), Just("unlimited"), Just("1.5GiB")].prop_map(|s| Some(CapacityField::Text(s.into()))),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(any::<char>(), 0..12).prop_map(|v| v.into_iter().collect())
    }

    fn platform() -> impl Strategy<Value = Platform> {
        let tier = (
            (in_range(1e-3, 1e9), in_range(1e-3, 1e9), in_range(1e-6, 1e6), in_range(1e-6, 1e6)),
            (in_range(0.0, 1e6), in_range(0.0, 1e6), any::<bool>()),
            capacity(),
            (text(), text()),
        );
        (
            0..PRESETS.len(),
            proptest::collection::vec(tier, 8),
            (text(), text()),
            (in_range(0.0, 1e9), in_range(0.0, 1e9), in_range(1e-3, 1000.0), in_range(1e-3, 1e6)),
        )
            .prop_map(|(which, tiers, (description, source), (fault, per_page, freq, cpi))| {
                let mut p = Platform::load(PRESETS[which].0).unwrap();
                for (i, (t, ((rl, wl, rb, wb), (re, we, shared), cap, (name, tech)))) in p.tiers.iter_mut().zip(tiers).enumerate() {
                    t.read_latency_ns = rl;
                    t.write_latency_ns = wl;
                    t.read_bw_gb_per_s = rb;
                    t.write_bw_gb_per_s = wb;
                    t.read_energy_pj_per_bit = re;
                    t.write_energy_pj_per_bit = we;
                    t.shared_bandwidth = shared;
                    t.technology = tech;
                    if !name.is_empty() {
                        t.name = format!("{name}{i}");
                    }
                    if i + 1 < 8 {
                        t.capacity = cap;
                    }
                }
                p.description = description;
                p.source = source;
                p.migration.fault_ns = fault;
                p.migration.per_page_ns = per_page;
                p.cpu.freq_ghz = freq;
                p.cpu.base_cpi = cpi;
                p
            })
    }

    proptest! {
        #![proptest_config(config(96))]

        #[test]
        fn platform_files_load_back_as_themselves(p in platform(), format in 0usize..3) {
            let dir = scratch();
            let (ext, write): (&str, fn(&Platform) -> String) = [
                ("toml", (|p: &Platform| toml::to_string(p).unwrap()) as fn(&Platform) -> String),
                ("yaml", |p: &Platform| serde_yaml_ng::to_string(p).unwrap()),
                ("json", |p: &Platform| serde_json::to_string_pretty(p).unwrap()),
            ][format];
            let text = write(&p);
            let path = dir.path().join(format!("p.{ext}"));
            std::fs::write(&path, &text).unwrap();
            // a platform the generator made invalid (e.g. a capacity a tier may not have) is not a round trip
            if p.validate("p").is_ok() {
                let back = Platform::load(path.to_str().unwrap()).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
                prop_assert_eq!(&back, &p, "{}", text);
                prop_assert_eq!(write(&back), text);
            }
        }
    }
}

/// serde_json's default float parser is not correctly rounded: `0.010996537907100543` in a
/// JSON platform file was read one ulp off (…545), so the same platform gave other numbers as
/// JSON than as TOML or YAML. tierkit-core now enables serde_json's `float_roundtrip`.
#[test]
fn json_platform_numbers_read_exactly() {
    let dir = scratch();
    let mut p = tierkit_core::platform::Platform::load("hbm-ddr3").unwrap();
    p.cpu.freq_ghz = 0.010996537907100543;
    for (ext, text) in [("json", serde_json::to_string(&p).unwrap()), ("toml", toml::to_string(&p).unwrap()), ("yaml", serde_yaml_ng::to_string(&p).unwrap())] {
        let path = dir.path().join(format!("p.{ext}"));
        std::fs::write(&path, text).unwrap();
        let back = tierkit_core::platform::Platform::load(path.to_str().unwrap()).unwrap();
        assert_eq!(back.cpu.freq_ghz.to_bits(), 0.010996537907100543f64.to_bits(), "{ext}");
    }
}
