//! Bounded work (docs/limits.md): a policy period at or below the work of one boundary must not
//! make boundaries cascade. The OS policies of seed 004 §5 (HyPlacer, AutoNUMA tiering, TPP,
//! Nimble, Memos, DAMON) and the epoch/page schedulers of seeds 001 §4 and 003 §3.1 run a
//! daemon every interval of simulated time; a daemon that overruns its interval runs once
//! when it next gets the CPU, so the engine runs at most one boundary per access and folds
//! the missed ones into it (counted in `stats.engine.coalesced_boundaries`).
//! The tests are free of timeouts: before the fix they either hang (a period below its own
//! cost) or cross more boundaries than accesses, which the assertions catch.

mod common;
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::{self, ParamType, PolicySpec};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::synth::{SynthKind, SynthSpec};

fn trace() -> SynthSpec {
    SynthSpec { kind: SynthKind::Phases, accesses: 6_000, pages: 400, seed: 11, write_ratio: 0.3, phases: 3, insn_per_access: 20, ..Default::default() }
}

fn run(t: &SynthSpec, spec: &str, timing: TimingKind, scale: f64) -> tierkit_core::error::Result<SimResult> {
    let mut job = Job::new(t, Platform::load("dram-pmem").unwrap());
    job.timing = timing;
    job.time_scale = scale;
    job.paranoid = true;
    simulate(&mut job, &PolicySpec::parse(spec).unwrap())
}

fn bounded(r: &SimResult, spec: &str) {
    let b = r.stats.engine.boundaries;
    assert!(b <= r.accesses, "{spec}: {b} boundaries for {} accesses", r.accesses);
    assert!(r.runtime_ns.is_finite() && r.runtime_ns > 0.0, "{spec}: runtime {}", r.runtime_ns);
}

/// The reported case: `history:period=3us` on dram-pmem, whose `per_period_ns` is 3 µs, cascaded
/// forever (each boundary's cost reached the next). Now it ends, with boundaries bounded by the
/// accesses and a warning that names the period.
#[test]
fn a_period_at_its_own_cost_ends_with_a_warning() {
    let t = trace();
    for timing in [TimingKind::Simple, TimingKind::Detailed] {
        let r = run(&t, "history:period=3us", timing, 1.0).unwrap();
        bounded(&r, "history:period=3us");
        assert!(r.stats.engine.coalesced_boundaries > 0);
        assert!(r.warnings.iter().any(|w| w.contains("folded into the next") && w.contains("3 µs")), "{:?}", r.warnings);
        // same inputs, same result, bit for bit
        let again = run(&t, "history:period=3us", timing, 1.0).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&again).unwrap());
    }
    // --time-scale divides the period and the cost alike: still at its cost, still bounded
    let r = run(&t, "history:period=3us", TimingKind::Simple, 10.0).unwrap();
    bounded(&r, "history:period=3us scaled by 10");
    assert!(r.warnings.iter().any(|w| w.contains("--time-scale 10")), "{:?}", r.warnings);
}

/// Every policy with a period in simulated time, that period set to 1 ns (far below an
/// access, a migration or the per-period cost): each run ends with at most one boundary per
/// access and a finite runtime. Before the fix these crossed several boundaries per access
/// (or never ended); policies that reject such a period must say so in one line naming it.
#[test]
fn every_time_period_far_below_its_cost_is_bounded() {
    let t = trace();
    let mut covered = Vec::new();
    // kleio and kleoniki need a predictions file, and take their period in accesses only
    for p in policy::REGISTRY.iter().filter(|p| !["kleio", "kleoniki"].contains(&p.name)) {
        for d in p.params.iter().filter(|d| matches!(d.ty, ParamType::Period)) {
            let spec = format!("{}:{}=1ns", p.name, d.name);
            match run(&t, &spec, TimingKind::Simple, 1.0) {
                Ok(r) => {
                    eprintln!("{spec}: {} boundaries, {} coalesced", r.stats.engine.boundaries, r.stats.engine.coalesced_boundaries);
                    bounded(&r, &spec);
                    if r.stats.engine.coalesced_boundaries > 0 {
                        covered.push(spec);
                    }
                }
                Err(e) => {
                    let m = e.to_string();
                    eprintln!("{spec}: {m}");
                    assert!(!m.contains('\n') && m.contains(d.name), "{spec}: {m}");
                }
            }
        }
    }
    assert!(covered.len() >= 6, "{covered:?}");
}

/// Every policy with a time period or interval (an engine period, or a timer the policy keeps
/// itself from its per-access hook), set to about 1 ns: the run ends with its activations and
/// boundaries bounded by the accesses and a finite runtime, under both timing models.
#[test]
fn every_policy_with_a_time_interval_is_bounded() {
    let t = trace();
    let specs = [
        "history:period=1ns",                                                               // 003 §3.1
        "hma-epoch:epoch=1ns",                                                              // 001 §2.4
        "fthp:epoch=1ns",                                                                   // 000 §5.1
        "mempod:epoch=1ns",                                                                 // 004 §5
        "damon-tiering:sample=1ns,aggr=1ns,quota_reset=1ns",                                // 004 §5
        "memos:period=1ns",                                                                 // 004 §5
        "hyplacer:interval=2ns,delay=1ns",                                                  // 004 §4
        "nimble:period=1ns",                                                                // 004 §5
        "autonuma-tiering:scan_period_ms=0.000001,scan_delay_ms=0,rate_window_ms=0.000001", // 004 §5
        "tpp:scan_period_ms=0.000001,scan_delay_ms=0,rate_window_ms=0.000001",              // 004 §5
        "otf:twindow=1",                                                                    // 001 §3.1
    ];
    for timing in [TimingKind::Simple, TimingKind::Detailed] {
        for spec in specs {
            let r = run(&t, spec, timing, 1.0).unwrap_or_else(|e| panic!("{spec}: {e}"));
            bounded(&r, spec);
            let acts = r.activations.unwrap_or(0);
            assert!(acts <= r.accesses + 1, "{spec} ({timing:?}): {acts} activations for {} accesses", r.accesses);
        }
    }
}

/// A predictions file (003 §3.2: per-page classes for the selected pages) whose page id is
/// 2^32 - 1 used to size a 16 GiB index and abort; now the index is bounded, the id is
/// found by search, and a run on a trace of fewer pages names the id and the limit.
#[test]
fn a_huge_predicted_page_id_is_checked_not_allocated() {
    use tierkit_core::policy::learned::Predictions;
    let dir = tempfile::tempdir().unwrap();
    let big = u32::MAX;
    let v = serde_json::json!({"format": "tierkit-predictions", "version": 1, "policy": "kleio", "period": 40, "bins": 16, "models": 2,
        "rows": {"1": "-3", big.to_string(): "-5"}});
    let pred = dir.path().join("pred.json");
    std::fs::write(&pred, v.to_string()).unwrap();
    let p = Predictions::load(&pred, "kleio:predictions").unwrap();
    assert_eq!((p.class(1, 1), p.class(big, 1), p.class(big - 1, 1)), (Some(3), Some(5), None));
    let pages: Vec<u64> = (0..480).map(|i| i % 8).collect();
    let input = common::write_pages(dir.path(), &pages, None);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, tierkit_core::units::Capacity::Fraction(0.5))];
    let e = simulate(&mut job, &PolicySpec::parse(&format!("kleio:period=40,predictions={}", pred.display())).unwrap()).unwrap_err().to_string();
    assert!(e.contains("kleio:predictions") && e.contains(&format!("page id {big}")) && e.contains("the trace's 8 pages"), "{e}");
    assert!(!e.contains('\n'));
}

/// `--cache L1:1T:16` asked for 2^34 lines (128 GiB of tags) and aborted; the size is now
/// checked against the named limit before anything is allocated, as is a line size that
/// used to wrap through `u32` (8G + 64 read as 64).
#[test]
fn cache_sizes_are_checked_before_allocating() {
    use tierkit_core::cache::{CacheSpec, MAX_LINES};
    let e = CacheSpec::parse("--cache", "L1:1T:16").unwrap_err().to_string();
    assert!(e.contains("--cache") && e.contains(&format!("at most {MAX_LINES} lines")), "{e}");
    let e = CacheSpec::parse("--cache", "L1:32K:8:8589934656").unwrap_err().to_string();
    assert!(e.contains("a line is at most 4096 bytes"), "{e}");
    // the largest level allowed still parses
    assert!(CacheSpec::parse("--cache", "L3:1G:16").unwrap().is_some());
}

/// A platform file nested 100,000 deep took 97 s (YAML; quadratic) to a clean error, and deep
/// flow nesting risks the recursive parsers' stack; a linear pre-scan now rejects anything
/// nested deeper than a platform can be, naming the file, the line and the limit.
#[test]
fn deeply_nested_platform_files_are_rejected_before_parsing() {
    use tierkit_core::platform::{MAX_INDENT, MAX_NESTING};
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000;
    let cases = [
        ("flow.yaml", format!("name: x\ntiers: {}{}\n", "[".repeat(n), "]".repeat(n))),
        // (line i indented by i: 5,000 levels in 12.5 MB; at 100,000 it was 5 GB and 30 s)
        ("block.yaml", (0..5_000).map(|i| format!("{}a:\n", " ".repeat(i))).collect::<String>()),
        ("seq.yaml", format!("tiers:\n{}x\n", "- ".repeat(n))),
        ("flow.json", format!("{{\"tiers\": {}{}}}", "[".repeat(n), "]".repeat(n))),
        ("flow.toml", format!("name = \"x\"\ntiers = {}{}\n", "[".repeat(n), "]".repeat(n))),
    ];
    for (name, text) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let e = Platform::load(p.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains("nested deeper than a platform file may be"), "{name}: {e}");
        assert!(e.contains(&format!("at most {MAX_NESTING} levels")) || e.contains(&format!("at most {MAX_INDENT} columns")), "{e}");
    }
    // brackets inside strings and comments are not nesting; the presets still load
    let p = dir.path().join("ok.yaml");
    let mut text = tierkit_core::platform::Platform::load("dram-pmem").map(|pl| serde_yaml_ng::to_string(&pl).unwrap()).unwrap();
    text = text.replacen("name: dram-pmem", &format!("name: '{}' # {}", "[".repeat(100), "{".repeat(100)), 1);
    std::fs::write(&p, text).unwrap();
    Platform::load(p.to_str().unwrap()).unwrap();
}
