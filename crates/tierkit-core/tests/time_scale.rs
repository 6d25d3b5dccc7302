//! Long-period policies on short traces (docs/models.md): `--repeat N` replays the trace N times
//! as one continuous run; `--time-scale K` divides every time constant and per-event cost of
//! the policy, and the platform's migration costs, by K. The OS policies come from seed 004
//! §5 (HyPlacer against Linux's tiered AutoNUMA, TPP, Nimble, Memos, DAMON), whose periods
//! (0.1–40 s) are far longer than a trace of a few milliseconds.

mod common;
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::{self, time_dim, PolicySpec, TimeDim};
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::synth::{SynthKind, SynthSpec};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{read_all, Access, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

/// A phased trace: 4 phases over 1,000 pages, 30 % writes, 20 instructions per access.
fn synth() -> SynthSpec {
    SynthSpec { kind: SynthKind::Phases, accesses: 40_000, pages: 1000, seed: 7, write_ratio: 0.3, phases: 4, insn_per_access: 20, ..Default::default() }
}

/// The accesses of `s` written `passes` times one after the other into a native trace,
/// instruction counts offset as a replay offsets them: what `--repeat` must equal.
fn concatenated(dir: &std::path::Path, name: &str, s: &SynthSpec, passes: u32) -> TraceInput {
    use tierkit_core::engine::TraceOpener;
    let rows: Vec<Access> = read_all(s.open().unwrap().as_mut()).unwrap().iter().flat_map(|b| (0..b.len()).map(|i| b.access(i)).collect::<Vec<_>>()).collect();
    let p = dir.join(name);
    let meta = TraceMeta { time_insn: true, ..Default::default() };
    let mut w = TktWriter::create(&p, &meta, true).unwrap();
    let mut offset = 0;
    for _ in 0..passes {
        for a in &rows {
            w.write_access(&Access { insn: a.insn + offset, ns: 0, ..*a }).unwrap();
        }
        offset += rows.last().unwrap().insn;
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn run_on(input: &TraceInput, spec: &str, timing: TimingKind, repeat: u32, k: f64, platform: Platform) -> SimResult {
    let mut job = Job::new(input, platform);
    job.capacity = vec![(0, Capacity::Fraction(0.5))];
    job.timing = timing;
    job.repeat = repeat;
    job.time_scale = k;
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn run(input: &TraceInput, spec: &str, timing: TimingKind, repeat: u32, k: f64) -> SimResult {
    run_on(input, spec, timing, repeat, k, Platform::load("dram-dcpmm").unwrap())
}

/// The numbers of a result, without the fields that name the input (trace, digest, config).
fn numbers(r: &SimResult) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("trace");
    o.remove("config");
    o.remove("policy");
    v
}

const POLICIES: &[&str] = &[
    "first-touch",
    "history:period=5000",
    // looks ahead with its own reader: must see the same repeated stream
    "oracle:period=5000",
    "hyplacer:interval=1ms,delay=100us,max_pages=64",
    "autonuma-tiering:scan_period_ms=0.5,scan_delay_ms=0.5,scan_size_mb=1,min_free_kbytes=4",
    "damon-tiering:sample=50us,aggr=1ms,quota_reset=5ms",
];

/// `--repeat 3` is exactly the run of the trace written three times over (instruction counts
/// continuing), for every kind of policy (per period, look-ahead oracle, time-driven OS
/// policies) and both timing models: time, pages, placement and policy state carry over.
#[test]
fn repeat_equals_the_concatenated_trace_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let s = synth();
    let once = concatenated(dir.path(), "once.tkt", &s, 1);
    let thrice = concatenated(dir.path(), "thrice.tkt", &s, 3);
    for timing in [TimingKind::Simple, TimingKind::Detailed] {
        for spec in POLICIES {
            let a = run(&once, spec, timing, 3, 1.0);
            let b = run(&thrice, spec, timing, 1, 1.0);
            assert_eq!(numbers(&a), numbers(&b), "{spec} ({timing:?})");
            assert_eq!(a.config.repeat, 3);
            assert_eq!(a.config.trace_digest, run(&once, "first-touch", timing, 1, 1.0).config.trace_digest, "the digest is the trace's");
        }
    }
}

/// N times the accesses, the same pages, and for first-touch (no migration, nothing that
/// depends on time) exactly N times one pass's runtime with the simple model; the same
/// inputs give the same result bit for bit.
#[test]
fn repeat_multiplies_accesses_keeps_pages_and_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let once = concatenated(dir.path(), "once.tkt", &synth(), 1);
    let one = run(&once, "first-touch", TimingKind::Simple, 1, 1.0);
    let four = run(&once, "first-touch", TimingKind::Simple, 4, 1.0);
    assert_eq!(four.accesses, 4 * one.accesses);
    assert_eq!((four.reads, four.writes), (4 * one.reads, 4 * one.writes));
    assert_eq!(four.pages, one.pages);
    assert_eq!(four.fast_hit_ratio, one.fast_hit_ratio);
    assert!((four.runtime_ns / one.runtime_ns - 4.0).abs() < 1e-12, "{} vs 4 x {}", four.runtime_ns, one.runtime_ns);
    // detailed: the queues and the core carry over, so only about N times
    let d1 = run(&once, "first-touch", TimingKind::Detailed, 1, 1.0);
    let d4 = run(&once, "first-touch", TimingKind::Detailed, 4, 1.0);
    assert!((d4.runtime_ns / d1.runtime_ns - 4.0).abs() < 0.02, "{} vs 4 x {}", d4.runtime_ns, d1.runtime_ns);
    let again = run(&once, "hyplacer:interval=1ms,delay=100us", TimingKind::Detailed, 4, 1.0);
    assert_eq!(
        serde_json::to_string(&again).unwrap(),
        serde_json::to_string(&run(&once, "hyplacer:interval=1ms,delay=100us", TimingKind::Detailed, 4, 1.0)).unwrap()
    );
}

/// A policy whose interval is longer than one pass of the trace never acts on it; replayed,
/// it acts (004 §4: HyPlacer's control loop runs once per interval).
#[test]
fn a_policy_with_an_interval_longer_than_one_pass_acts_with_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let once = concatenated(dir.path(), "once.tkt", &synth(), 1);
    let t1 = run(&once, "first-touch", TimingKind::Simple, 1, 1.0).runtime_ns;
    let interval = (1.5 * t1) as u64;
    let spec = format!("hyplacer:interval={interval}ns,delay=100us");
    let one = run(&once, &spec, TimingKind::Simple, 1, 1.0);
    assert_eq!(one.stats.engine.boundaries, 0, "one pass is shorter than the interval");
    let six = run(&once, &spec, TimingKind::Simple, 6, 1.0);
    assert!(six.stats.engine.boundaries >= 3, "{}", six.stats.engine.boundaries);
    assert!(six.migrations > 0, "the replayed run migrates: {}", six.stats.policy);
}

/// `--time-scale 1` is the plain run, bit for bit.
#[test]
fn time_scale_one_is_the_plain_run() {
    let dir = tempfile::tempdir().unwrap();
    let once = concatenated(dir.path(), "once.tkt", &synth(), 1);
    for spec in POLICIES {
        let plain = {
            let mut job = Job::new(&once, Platform::load("dram-dcpmm").unwrap());
            job.capacity = vec![(0, Capacity::Fraction(0.5))];
            job.timing = TimingKind::Detailed;
            simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap()
        };
        let k1 = run(&once, spec, TimingKind::Detailed, 1, 1.0);
        assert_eq!(serde_json::to_string(&plain).unwrap(), serde_json::to_string(&k1).unwrap(), "{spec}");
        assert_eq!(k1.config.scaled_policy, None);
    }
}

/// Worked check: under `--time-scale 10` every per-event cost autonuma-tiering charges is
/// exactly a tenth: a NUMA hint fault costs the platform's fault_ns (5 µs on dram-dcpmm,
/// seed 000 §5.1) / 10 = 500 ns, a PTE update 50 / 10 = 5 ns, a TLB flush 3 µs / 10 =
/// 300 ns; and the run is exactly the run with those values (and the times) written by hand
/// and the platform's migration costs divided by 10.
#[test]
fn time_scale_divides_every_cost_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let once = concatenated(dir.path(), "once.tkt", &synth(), 1);
    let spec =
        "autonuma-tiering:scan_period_ms=2,scan_delay_ms=2,scan_size_mb=1,min_free_kbytes=4,hot_threshold_ms=10,scan_period_max_ms=20,kswapd_backoff_ms=100";
    let r = run(&once, spec, TimingKind::Detailed, 1, 10.0);
    let charges = &r.stats.migration.charges;
    let per = |what: &str| {
        let c = charges.get(what).unwrap_or_else(|| panic!("no '{what}' in {charges:?}"));
        assert!(c.count > 0, "{what}");
        c.ns / c.count as f64
    };
    assert_eq!(per("NUMA hint fault"), 500.0);
    assert_eq!(per("NUMA scan (TLB flush)"), 300.0);
    let pte = &charges["NUMA scan (PTE updates)"];
    let armed: u64 = r.stats.policy["counters"]["ptes_armed"].as_u64().unwrap_or_else(|| panic!("{}", r.stats.policy));
    assert_eq!(pte.ns, armed as f64 * 5.0);
    assert_eq!(r.config.time_scale, 10.0);
    assert!(r.config.policy.contains("scan_period_ms=2,"), "the config keeps the policy as given: {}", r.config.policy);
    let scaled = r.config.scaled_policy.clone().unwrap();
    assert!(scaled.contains("scan_period_ms=0.2,") && scaled.contains("promote_rate_limit_mib_per_s=655360,"), "{scaled}");

    // by hand: times / 10, the rate limit x 10, the platform's migration costs / 10
    let mut plat = Platform::load("dram-dcpmm").unwrap();
    plat.migration.fault_ns /= 10.0;
    plat.migration.tlb_shootdown_ns /= 10.0;
    plat.migration.per_page_ns /= 10.0;
    plat.migration.per_period_ns /= 10.0;
    let hand = "autonuma-tiering:scan_period_ms=0.2,scan_delay_ms=0.2,scan_size_mb=1,min_free_kbytes=4,hot_threshold_ms=1,scan_period_max_ms=2,kswapd_backoff_ms=10,pte_update_ns=5,pte_scan_ns=1,lru_scan_ns=10,promote_rate_limit_mib_per_s=655360,rate_window_ms=100";
    let h = run_on(&once, hand, TimingKind::Detailed, 1, 1.0, plat);
    // the kernel's 1 s window (rate_window_ms) is a time like the others: 100 ms by hand
    assert_eq!(numbers(&r), numbers(&h));
}

/// Time scaling reaches the costs policies hold in code, not in parameters: otf's reverse
/// mapping walk and TLB shootdown (001 §3, the shootdown curve of its Fig. 3), DAMON's age
/// in seconds (mm/damon's `damon_hot_score`), and the kernel's 1 s promotion rate-limit
/// window. Here: otf's address-reconciliation cost per page divides by K.
#[test]
fn time_scale_reaches_costs_held_in_code() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        SynthSpec { kind: SynthKind::Zipf, accesses: 60_000, pages: 2000, seed: 1, write_ratio: 0.3, theta: 0.9, insn_per_access: 20, ..Default::default() };
    let t = concatenated(dir.path(), "z.tkt", &s, 1);
    let per_page = |k: f64| {
        let mut job = Job::new(&t, Platform::load("hbm-pcm").unwrap());
        job.capacity = vec![(0, Capacity::Fraction(0.1))];
        job.timing = TimingKind::Detailed;
        job.time_scale = k;
        let r = simulate(&mut job, &PolicySpec::parse("otf:ar=os,ar_start=0.05,threshold=8").unwrap()).unwrap();
        let c = r.stats.migration.charges.get("address reconciliation").cloned().unwrap_or_else(|| panic!("{:?}", r.stats.migration.charges));
        assert!(c.count > 0);
        c.ns / c.count as f64
    };
    let (one, ten) = (per_page(1.0), per_page(10.0));
    assert!(one > 0.0);
    assert!((one / ten - 10.0).abs() < 1e-9, "{one} vs {ten}");
}

/// Every registered parameter whose unit names a time is scaled, so that none is forgotten
/// as policies gain parameters: a unit with a time word (ns, µs, ms, s, cycles, time,
/// second) is a time or a rate, unless it says it is a latency paid per access or a measured
/// bandwidth (the platform's).
#[test]
fn every_time_parameter_is_scaled() {
    let time_words = ["ns", "us", "µs", "ms", "s", "cycles", "time", "second", "seconds", "MiB/s", "MB/s", "MBps"];
    let mut scaled = Vec::new();
    for p in policy::REGISTRY {
        for d in p.params {
            let words: Vec<&str> = d.unit.split(|c: char| !(c.is_alphanumeric() || c == '/' || c == 'µ')).collect();
            let timeish = words.iter().any(|w| time_words.contains(w));
            let dim = time_dim(d);
            if dim != TimeDim::None {
                scaled.push(format!("{}:{}", p.name, d.name));
            } else if timeish {
                assert!(
                    d.unit.contains("per access")
                        || d.unit.contains("bandwidth")
                        || !matches!(d.ty, policy::ParamType::Int { .. } | policy::ParamType::Float { .. }),
                    "{}:{} has unit '{}' but is not scaled by --time-scale",
                    p.name,
                    d.name,
                    d.unit
                );
            }
        }
    }
    for must in [
        "autonuma-tiering:hint_fault_ns",
        "tpp:lru_scan_ns",
        "hyplacer:counter_read_ns",
        "hyplacer:walk_ns_per_pte",
        "memos:counter_read_ns",
        "nimble:syscall_ns",
        "damon-tiering:check_ns",
        "clock-dwf:pte_scan_ns",
        "otf:rmap_cycles",
        "otf:flush_us",
        "fthp:epoch",
        "autonuma-tiering:promote_rate_limit_mib_per_s",
    ] {
        assert!(scaled.iter().any(|s| s == must), "{must} is not scaled: {scaled:?}");
    }
    for p in policy::REGISTRY {
        for d in p.params {
            let n = format!("{}:{}", p.name, d.name);
            if ["otf:remap_lookup_cycles", "hyplacer:write_threshold_mb_per_s", "hyplacer:max_pages", "damon-tiering:hot_quota"].contains(&n.as_str()) {
                assert_eq!(time_dim(d), TimeDim::None, "{n}");
            }
        }
    }
}

/// Bad scales are one clear error naming the option.
#[test]
fn bad_scales_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let once = concatenated(dir.path(), "once.tkt", &synth(), 1);
    for k in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut job = Job::new(&once, Platform::load("dram-dcpmm").unwrap());
        job.time_scale = k;
        let e = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap_err().to_string();
        assert!(e.contains("--time-scale"), "{e}");
    }
    let mut job = Job::new(&once, Platform::load("dram-dcpmm").unwrap());
    job.repeat = 0;
    let e = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap_err().to_string();
    assert!(e.contains("--repeat"), "{e}");
}

/// The kernel's promotion rate limit (kernel/sched/fair.c `numa_promotion_rate_limit`) counts
/// candidates in a one-second window against a limit in MB/s. The scenario of
/// tests/os_tiering.rs (its window `rate_window_ms` shrunk to 2 ms, so that task_scan_min's
/// floor allows its 0.2 ms scan period) written 10 times slower, run at K = 10: the window
/// lasts 2 ms and the limit (a rate, ×10) still allows 256 pages per window: of 600
/// candidates in one window, 345 are refused.
#[test]
fn time_scale_keeps_the_rate_limit_per_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace: Vec<u64> = (0..608).collect();
    trace.extend(std::iter::repeat_n(0, 200));
    trace.extend(8..608);
    let input = common::write_pages(dir.path(), &trace, None);
    let spec = "autonuma-tiering:scan_period_ms=2,scan_delay_ms=0,rate_window_ms=20,watermark_scale_factor=1,hint_fault_ns=0,pte_update_ns=0,pte_scan_ns=0,tlb_flush_ns=0,lru_scan_ns=0,min_free_kbytes=0,promote_rate_limit_mib_per_s=1";
    let limited = |k: f64| {
        let mut job = Job::new(&input, Platform::load("dram-dcpmm").unwrap());
        job.capacity = vec![(0, Capacity::Bytes(8 * 4096))];
        job.time_scale = k;
        let r = simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap();
        let c = &r.stats.policy["counters"];
        (c["candidates"].as_u64().unwrap(), c["rate_limited"].as_u64().unwrap())
    };
    assert_eq!(limited(10.0), (600, 345));
}
