//! Watched regions (`Job::watch`): accesses and pages per tier of address ranges over
//! simulated time, with the trace's user markers; what `tierkit validate` holds against the
//! kernel's pages per region (docs/validation.md, "Hot data").
use tierkit_core::engine::{simulate, Job, SimResult, Watch, WatchRegion};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, EventKind, MarkerKind, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

const PAGE: u64 = 4096;
const A: u64 = 0x10_0000;
const B: u64 = 0x20_0000;

enum R {
    /// `n` reads, one per line, cycling over `pages` pages from `addr`
    Touch(u64, u64, u64),
    Mark(u64),
}

fn trace(dir: &std::path::Path, recs: &[R]) -> TraceInput {
    let p = dir.join("w.tkt");
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let mut w = TktWriter::create(&p, &meta, true).unwrap();
    let mut insn = 0u64;
    for r in recs {
        match r {
            R::Touch(addr, pages, n) => {
                for i in 0..*n {
                    insn += 1;
                    let a = addr + (i % pages) * PAGE + ((i / pages) % 64) * 64;
                    w.write_access(&Access { addr: a, write: false, insn, size: 64, ..Default::default() }).unwrap();
                }
            }
            R::Mark(id) => w.write_event(insn, 0, 0, &EventKind::Marker { marker: MarkerKind::User, id: *id, label: String::new() }).unwrap(),
        }
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn regions() -> Vec<WatchRegion> {
    vec![
        WatchRegion { name: "a".into(), start: A, end: A + 4 * PAGE },
        WatchRegion { name: "b".into(), start: B, end: B + 8 * PAGE },
        // overlaps both: the last page of a and the first two of b are not in it
        WatchRegion { name: "ab".into(), start: A, end: B + 2 * PAGE },
    ]
}

fn run(input: &TraceInput, every_ns: f64) -> SimResult {
    let mut job = Job::new(input, Platform::load("hbm-ddr3").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(4 * PAGE))];
    job.paranoid = true;
    job.watch = Some(Watch { regions: regions(), every_ns });
    simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap()
}

const RECS: &[R] = &[R::Touch(A, 4, 400), R::Mark(1), R::Touch(B, 8, 800), R::Mark(2), R::Touch(A, 4, 200)];

#[test]
fn one_sample_at_the_end_counts_every_access_and_page_of_each_region() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path(), RECS);
    let r = run(&t, 1e18);
    let w = r.watch.expect("watched");
    assert_eq!(w.regions, vec!["a", "b", "ab"]);
    // one sample, at the end: first-touch filled the 4 fast pages with a, b went slow
    let rows: Vec<_> = w.rows.iter().map(|&(_, i, acc, f, s)| (i, acc, f, s)).collect();
    assert_eq!(rows, vec![(0, 600, 4, 0), (1, 800, 0, 8), (2, 600 + 200, 4, 2)]);
    assert!((w.rows[0].0 - r.runtime_ns / 1e6).abs() < 1e-9);
    // the markers, in order, where they came: 1 after a's first 400 reads, 2 after b's 800
    assert_eq!(w.marks.iter().map(|m| m.0).collect::<Vec<_>>(), vec![1, 2]);
    assert!(0.0 < w.marks[0].1 && w.marks[0].1 < w.marks[1].1 && w.marks[1].1 < w.rows[0].0);
    let share = w.marks[0].1 / w.rows[0].0;
    assert!((0.2..0.4).contains(&share), "mark 1 at {share} of the run (400 of 1400 reads)");
}

#[test]
fn samples_over_time_add_up_and_see_the_pages_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path(), RECS);
    let end = run(&t, 1e18).runtime_ns;
    let r = run(&t, end / 20.0);
    let w = r.watch.unwrap();
    let samples = w.rows.len() / 3;
    assert!(samples >= 15, "{samples} samples at a twentieth of the run");
    for (i, total) in [(0, 600), (1, 800), (2, 800)] {
        let s: u64 = w.rows.iter().filter(|x| x.1 == i).map(|x| x.2).sum();
        assert_eq!(s, total, "region {i}");
    }
    // times never go back; b's slow pages only grow, to 8
    assert!(w.rows.windows(2).all(|p| p[0].0 <= p[1].0));
    let b: Vec<u64> = w.rows.iter().filter(|x| x.1 == 1).map(|x| x.4).collect();
    assert!(b.windows(2).all(|p| p[0] <= p[1]) && b[0] == 0 && *b.last().unwrap() == 8, "{b:?}");
    // watching changes nothing else
    let plain = {
        let mut job = Job::new(&t, Platform::load("hbm-ddr3").unwrap());
        job.capacity = vec![(0, Capacity::Bytes(4 * PAGE))];
        simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap()
    };
    assert_eq!(plain.runtime_ns.to_bits(), r.runtime_ns.to_bits());
    assert!(plain.watch.is_none());
    // and is deterministic
    let again = run(&t, end / 20.0).watch.unwrap();
    assert_eq!(format!("{:?}", again.rows), format!("{:?}", w.rows));
}

#[test]
fn a_bad_interval_or_an_empty_region_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path(), RECS);
    for (every, regs) in [(0.0, regions()), (f64::NAN, regions()), (1e6, vec![WatchRegion { name: "z".into(), start: A, end: A }])] {
        let mut job = Job::new(&t, Platform::load("hbm-ddr3").unwrap());
        job.watch = Some(Watch { regions: regs, every_ns: every });
        let e = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap_err().to_string();
        assert!(e.contains("watch"), "{e}");
    }
}
