//! Policies keep their contracts: for every registered policy, on two- and three-tier
//! platforms and both timing models, the engine's invariants hold (no tier over capacity,
//! every access counted once, every migrated byte accounted), and the same inputs give the
//! same results bit for bit, with or without the read-ahead thread.

use tierkit_core::engine::{run_policy, simulate, Job, SimResult};
use tierkit_core::mechanics::TierId;
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::{Ctx, Needs, Policy, PolicySpec, REGISTRY};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::synth::{SynthKind, SynthSource, SynthSpec};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Batch, RecordSource, TraceInput};
use tierkit_core::units::Capacity;
use tierkit_core::Error;

fn trace(dir: &std::path::Path, kind: SynthKind) -> TraceInput {
    let p = dir.join(format!("{}.tkt", kind.name()));
    let spec = SynthSpec { kind, accesses: 60_000, pages: 3_000, seed: 11, write_ratio: 0.3, phases: 3, ..Default::default() };
    let mut src = SynthSource::new(spec).unwrap();
    let mut w = TktWriter::create(&p, src.meta(), true).unwrap();
    let mut b = Batch::default();
    while src.next_batch(&mut b).unwrap() {
        w.write_batch(&b).unwrap();
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn run(input: &TraceInput, platform: &str, policy: &str, timing: TimingKind, read_ahead: bool) -> SimResult {
    let mut job = Job::new(input, Platform::load(platform).unwrap());
    job.capacity = vec![(0, Capacity::Fraction(0.1))];
    if platform == "hbm-dram-cxl" {
        job.capacity.push((1, Capacity::Fraction(0.3)));
    }
    job.timing = timing;
    job.paranoid = true; // the mechanics' invariants checked at every period boundary too
    job.read_ahead = read_ahead;
    simulate(&mut job, &PolicySpec::parse(policy).unwrap()).unwrap_or_else(|e| panic!("{policy} on {platform}: {e}"))
}

fn check(r: &SimResult) {
    let tiers = &r.stats.platform.tiers;
    let served: u64 = tiers.iter().map(|t| t.counters.reads + t.counters.writes).sum();
    assert_eq!(served, r.accesses, "{}: every access served exactly once", r.policy);
    assert_eq!(r.reads + r.writes, r.accesses);
    let m = &r.stats.migration;
    assert_eq!(m.migrated_bytes, m.migrations * 4096, "{}", r.policy);
    assert_eq!(m.bytes_out.iter().sum::<u64>(), m.migrated_bytes);
    assert_eq!(m.bytes_in.iter().sum::<u64>(), m.migrated_bytes);
    assert_eq!(m.promotions + m.demotions, m.migrations);
    for t in tiers {
        if let Some(cap) = t.capacity_pages {
            assert!(t.used_pages <= cap, "{}: tier {} holds {} pages, capacity {}", r.policy, t.name, t.used_pages, cap);
        }
        // a tier's bytes are its demand lines, extra lines and migrated pages
        let c = &t.counters;
        let (mig_out, mig_in) = {
            let i = tiers.iter().position(|x| x.name == t.name).unwrap();
            (m.bytes_out[i], m.bytes_in[i])
        };
        assert_eq!(c.bytes_read, (c.reads + c.probes + c.extra_reads) * 64 + mig_out, "{} {}", r.policy, t.name);
        assert_eq!(c.bytes_written, (c.writes + c.extra_writes) * 64 + mig_in, "{} {}", r.policy, t.name);
    }
    assert!(r.runtime_ns.is_finite() && r.runtime_ns > 0.0);
    assert!((0.0..=1.0).contains(&r.fast_hit_ratio));
}

/// How each registered policy runs here: `guided` needs a guidance file (the synthetic
/// traces have no allocations, so it places by `nonheap=` and `then=` migrates); `kleio`
/// and `kleoniki` need predictions (here arbitrary classes for 500 pages, some periods
/// without).
fn spec(name: &str, dir: &std::path::Path) -> String {
    if name == "kleio" || name == "kleoniki" {
        let rows: serde_json::Map<String, serde_json::Value> = (0..500u32)
            .map(|p| {
                let s: String = (0..60u32).map(|t| if (p + t) % 7 == 0 { '-' } else { std::char::from_digit((p * 7 + t) % 6, 36).unwrap() }).collect();
                (p.to_string(), serde_json::Value::String(s))
            })
            .collect();
        let v = serde_json::json!({"format": "tierkit-predictions", "version": 1, "policy": name, "period": 1000, "bins": 16, "models": 500, "rows": rows});
        let f = dir.join(format!("{name}.json"));
        std::fs::write(&f, v.to_string()).unwrap();
        return format!("{name}:period=1000,predictions={}", f.display());
    }
    if name != "guided" {
        return name.to_string();
    }
    let g = dir.join("guidance.json");
    std::fs::write(
        &g,
        r#"{"format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 0,
            "arenas": [{"id": 0, "tiers": [0]}], "sites": [{"frames": ["f (a.c:1)"], "arena": 0}]}"#,
    )
    .unwrap();
    format!("guided:guidance={},then=otf", g.display())
}

#[test]
fn every_policy_keeps_the_invariants_on_two_and_three_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), SynthKind::Phases);
    for info in REGISTRY {
        for platform in ["dram-pmem", "hbm-dram-cxl"] {
            for timing in [TimingKind::Simple, TimingKind::Detailed] {
                let r = run(&input, platform, &spec(info.name, dir.path()), timing, false);
                check(&r);
            }
        }
    }
}

#[test]
fn same_inputs_same_results_bit_for_bit_with_or_without_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), SynthKind::Zipf);
    for info in REGISTRY {
        let sp = spec(info.name, dir.path());
        let a = serde_json::to_string(&run(&input, "dram-pmem", &sp, TimingKind::Detailed, false)).unwrap();
        let b = serde_json::to_string(&run(&input, "dram-pmem", &sp, TimingKind::Detailed, false)).unwrap();
        let c = serde_json::to_string(&run(&input, "dram-pmem", &sp, TimingKind::Detailed, true)).unwrap();
        assert_eq!(a, b, "{} is not deterministic", info.name);
        assert_eq!(a, c, "{}: read-ahead changed the result", info.name);
    }
}

/// A policy that breaks the contract: it places every page in the fast tier.
struct Greedy;
impl Policy for Greedy {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, _ctx: &mut Ctx) -> TierId {
        0
    }
}

#[test]
fn a_policy_that_overfills_a_tier_is_stopped_with_an_invariant_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), SynthKind::Uniform);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, Capacity::Fraction(0.1))];
    let e = run_policy(Greedy, &mut job).unwrap_err();
    assert!(matches!(e, Error::Invariant(_)), "{e}");
    assert!(e.to_string().contains("full"), "{e}");
    assert!(!e.is_user_error());
}

#[test]
fn reading_ahead_stops_cleanly_on_a_corrupt_trace() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), SynthKind::Zipf);
    let mut data = std::fs::read(&input.path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x55;
    let bad = dir.path().join("bad.tkt");
    std::fs::write(&bad, &data).unwrap();
    let bad_input = TraceInput::new(&bad);
    let mut job = Job::new(&bad_input, Platform::load("dram-pmem").unwrap());
    job.read_ahead = true;
    let e = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap_err().to_string();
    assert!(e.contains("bad.tkt") && e.contains("offset"), "{e}");
}

#[test]
fn summary_counts_match_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), SynthKind::Stream);
    let s = input.summary().unwrap();
    let mut src = input.open().unwrap();
    let scanned = tierkit_core::trace::summary::scan(src.as_mut()).unwrap();
    assert_eq!(s, scanned);
}
