//! Throughput benchmark (release build): `make bench`, or
//! `cargo bench -p tierkit-core --bench throughput [-- --accesses N --pages P --only POLICY:TIMING]`.
//!
//! Generates once (cached under `target/bench/`) a synthetic zipf trace (θ = 0.99, 20% writes)
//! of 50 M accesses over 1 M pages, then measures in one run, on this machine:
//! - decoding the trace alone (every column, one thread);
//! - simulating it on `dram-pmem` with the fast tier at 12.5% of the footprint, with
//!   first-touch, history (default period, 1000 accesses) and cache-mode under both timing
//!   models, on one thread; and the headline cases again with read-ahead (decoding on a
//!   second thread);
//! - the dynamic-migration policies (`otf` under both models; `otf-adaptive`, `otf-reverse`,
//!   `hma-epoch`, `fthp` and `mempod` under the detailed model), one thread, same trace and
//!   platform;
//! - the tiering policies of seed 004 (`hyplacer`, `autonuma-tiering`, `tpp`, `nimble`,
//!   `memos`, `clock-dwf`, `damon-tiering`) under the detailed model, one thread, with their
//!   periods a hundredth of their defaults so that they act on this trace;
//! - real traces beside the synthetic one, `first-touch` under both models: the vendored
//!   `data/traces/403.gcc.gz` (Ramulator text, 50 K accesses over 1,306 pages: the text import
//!   and the fixed state dominate) and, when present, `data/traces/real/python3-ref.tkt`
//!   (git-ignored, recorded by `make traces`; skipped with a note when absent).
//!
//! With `--only`, the other rows of `bench/results/throughput.json` are kept.
//!
//! Each figure is the best of several runs. Reports wall seconds and the process's CPU seconds
//! (this machine is shared: CPU time is the steadier figure, and with read-ahead it counts
//! both threads), accesses per second of wall time, the ratio to decoding, and the engine's
//! per-page state. Results are printed and written to
//! `bench/results/throughput.json`; `bench/README.md` keeps the latest figures.

use std::path::PathBuf;
use std::time::Instant;
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::synth::{SynthSource, SynthSpec};
use tierkit_core::trace::tkt::{TktReader, TktWriter};
use tierkit_core::trace::{Batch, RecordSource, TraceInput};
use tierkit_core::units::Capacity;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn count(name: &str, default: u64) -> u64 {
    arg(name).map(|v| tierkit_core::units::parse_count(name, &v).expect("a count")).unwrap_or(default)
}

/// CPU seconds this process has used so far, all its threads together (clock_gettime(2),
/// CLOCK_PROCESS_CPUTIME_ID).
fn cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The best of `repeats` runs of `policy` on `input`, fast tier at 12.5% of the footprint:
/// (wall seconds, CPU seconds, the last run's result).
fn best_of(repeats: usize, input: &TraceInput, platform: &Platform, policy: &str, timing: TimingKind, read_ahead: bool) -> (f64, f64, SimResult) {
    let spec = PolicySpec::parse(policy).unwrap();
    let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
    let mut result = None;
    for _ in 0..repeats {
        let mut job = Job::new(input, platform.clone());
        job.capacity = vec![(0, Capacity::Fraction(0.125))];
        job.timing = timing;
        job.paranoid = false;
        job.read_ahead = read_ahead;
        let (t, c) = (Instant::now(), cpu_s());
        let r = simulate(&mut job, &spec).expect("simulation");
        best = best.min(t.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(cpu_s() - c);
        result = Some(r);
    }
    (best, best_cpu, result.expect("at least one repeat"))
}

fn main() {
    let accesses = count("--accesses", 50_000_000);
    let pages = count("--pages", 1_000_000);
    let repeats = count("--repeats", 3) as usize;
    let only = arg("--only");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("zipf-{accesses}-{pages}.tkt"));
    if !path.exists() {
        eprintln!("generating {} ...", path.display());
        let spec = SynthSpec { accesses, pages, seed: 42, write_ratio: 0.2, ..Default::default() };
        let mut src = SynthSource::new(spec).unwrap();
        let mut w = TktWriter::create(&path, src.meta(), false).unwrap();
        let mut b = Batch::default();
        while src.next_batch(&mut b).unwrap() {
            w.write_batch(&b).unwrap();
        }
        w.finish().unwrap();
    }
    let file_bytes = std::fs::metadata(&path).unwrap().len();

    let (mut decode_s, mut decode_cpu) = (f64::MAX, f64::MAX);
    for _ in 0..repeats {
        let (t, c) = (Instant::now(), cpu_s());
        let mut r = TktReader::open(&path).unwrap();
        let mut b = Batch::default();
        let mut n = 0u64;
        while r.next_batch(&mut b).unwrap() {
            n += b.len() as u64;
        }
        assert_eq!(n, accesses);
        decode_s = decode_s.min(t.elapsed().as_secs_f64());
        decode_cpu = decode_cpu.min(cpu_s() - c);
    }
    let decode_rate = accesses as f64 / decode_s;
    println!(
        "trace: {} ({accesses} accesses, {pages} pages requested, {:.1} MB, {:.2} bytes/access)",
        path.display(),
        file_bytes as f64 / 1e6,
        file_bytes as f64 / accesses as f64
    );
    println!(
        "{:<12} {:<9} {:<8} {:>9} {:>9} {:>13} {:>10} {:>13}",
        "policy", "timing", "threads", "seconds", "cpu s", "accesses/s", "vs decode", "state B/page"
    );
    println!("{:<12} {:<9} {:<8} {:>9.3} {:>9.3} {:>13.3e} {:>10} {:>13}", "(decode)", "-", "1", decode_s, decode_cpu, decode_rate, "1.00", "-");

    let input = TraceInput::new(&path);
    let platform = Platform::load("dram-pmem").unwrap();
    let mut rows = vec![serde_json::json!({"policy": "decode", "threads": 1, "seconds": decode_s, "cpu_seconds": decode_cpu, "accesses_per_s": decode_rate})];
    let cases = [
        ("first-touch", TimingKind::Simple, false),
        ("first-touch", TimingKind::Detailed, false),
        ("history", TimingKind::Simple, false),
        ("history", TimingKind::Detailed, false),
        ("cache-mode", TimingKind::Simple, false),
        ("cache-mode", TimingKind::Detailed, false),
        ("first-touch", TimingKind::Simple, true),
        ("history", TimingKind::Detailed, true),
        // dynamic migration (seed 001): per-access and per-epoch policies
        ("otf", TimingKind::Simple, false),
        ("otf", TimingKind::Detailed, false),
        ("otf-adaptive", TimingKind::Detailed, false),
        ("otf-reverse", TimingKind::Detailed, false),
        ("hma-epoch", TimingKind::Detailed, false),
        ("fthp", TimingKind::Detailed, false),
        ("mempod", TimingKind::Detailed, false),
        // read/write-aware and OS-level tiering (seed 004), their periods a hundredth of their
        // defaults so that they act on this trace (0.8 s of simulated time; defaults of 1-40 s),
        // and amounts per period (pages, bytes) a hundredth too, so that rates stay the same
        ("hyplacer:interval=10ms,delay=500us,max_pages=1311", TimingKind::Detailed, false),
        ("autonuma-tiering:scan_period_ms=10,scan_delay_ms=10,hot_threshold_ms=10,scan_period_max_ms=600", TimingKind::Detailed, false),
        ("tpp:scan_period_ms=10,scan_delay_ms=10", TimingKind::Detailed, false),
        ("nimble:period=50ms", TimingKind::Detailed, false),
        ("memos:period=40ms,max_pages=1000", TimingKind::Detailed, false),
        ("clock-dwf", TimingKind::Detailed, false),
        ("damon-tiering:sample=50us,aggr=1ms,quota_reset=10ms,hot_quota=2M,cold_quota=2M", TimingKind::Detailed, false),
    ];
    for (policy, timing, read_ahead) in cases {
        let name = policy.split(':').next().unwrap();
        if only.as_deref().is_some_and(|o| o != format!("{name}:{}", timing.name())) {
            continue;
        }
        let (best, best_cpu, r) = best_of(repeats, &input, &platform, policy, timing, read_ahead);
        let rate = accesses as f64 / best;
        let per_page = r.stats.engine.state_bytes as f64 / r.pages as f64;
        let threads = if read_ahead { 2 } else { 1 };
        println!(
            "{:<16} {:<9} {:<8} {:>9.3} {:>9.3} {:>13.3e} {:>10.2} {:>13.1}",
            name,
            timing.name(),
            threads,
            best,
            best_cpu,
            rate,
            rate / decode_rate,
            per_page
        );
        rows.push(serde_json::json!({
            "policy": name, "spec": policy, "timing": timing.name(), "threads": threads, "seconds": best, "cpu_seconds": best_cpu,
            "accesses_per_s": rate, "ratio_to_decode": rate / decode_rate, "state_bytes_per_page": per_page,
            "fast_hit_ratio": r.fast_hit_ratio, "migrations": r.migrations, "simulated_s": r.runtime_ns / 1e9,
        }));
    }
    // real traces beside the synthetic one: a recorded program's access stream is not zipf's
    // (bench/README.md, "Which figure to trust")
    let real = [("403.gcc", root.join("data/traces/403.gcc.gz")), ("python3-ref", root.join("data/traces/real/python3-ref.tkt"))];
    for (trace, p) in &real {
        for timing in [TimingKind::Simple, TimingKind::Detailed] {
            if only.as_deref().is_some_and(|o| o != format!("first-touch:{}", timing.name())) {
                continue;
            }
            if !p.exists() {
                println!("{trace}: {} is absent (git-ignored; `make traces` records it): skipped", p.display());
                rows.push(serde_json::json!({"policy": "first-touch", "trace": trace, "timing": timing.name(), "threads": 1, "skipped": "absent"}));
                continue;
            }
            let (best, best_cpu, r) = best_of(repeats, &TraceInput::new(p), &platform, "first-touch", timing, false);
            let per_page = r.stats.engine.state_bytes as f64 / r.pages as f64;
            println!(
                "{:<16} {:<9} {:<8} {:>9.3} {:>9.3} {:>13.3e} {:>10} {:>13.1}  ({trace}: {} accesses, {} pages; per CPU s {:.3e})",
                "first-touch",
                timing.name(),
                1,
                best,
                best_cpu,
                r.accesses as f64 / best,
                "-",
                per_page,
                r.accesses,
                r.pages,
                r.accesses as f64 / best_cpu
            );
            rows.push(serde_json::json!({
                "policy": "first-touch", "trace": trace, "timing": timing.name(), "threads": 1, "seconds": best, "cpu_seconds": best_cpu,
                "accesses": r.accesses, "pages": r.pages, "accesses_per_s": r.accesses as f64 / best,
                "accesses_per_cpu_s": r.accesses as f64 / best_cpu, "state_bytes_per_page": per_page, "state_bytes": r.stats.engine.state_bytes,
            }));
        }
    }
    let out = root.join("bench/results");
    std::fs::create_dir_all(&out).unwrap();
    // with --only, the other rows of the last full run are kept
    if only.is_some() {
        let old: Option<serde_json::Value> = std::fs::read(out.join("throughput.json")).ok().and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(old_rows) = old.as_ref().and_then(|d| d["runs"].as_array()) {
            let key = |r: &serde_json::Value| (r["policy"].to_string(), r["trace"].to_string(), r["timing"].to_string(), r["threads"].to_string());
            let mut merged: Vec<serde_json::Value> =
                old_rows.iter().filter(|o| o["policy"] == "decode" || !rows.iter().any(|n| key(n) == key(o))).cloned().collect();
            merged.extend(rows.into_iter().filter(|n| n["policy"] != "decode"));
            rows = merged;
        }
    }
    let doc = serde_json::json!({"accesses": accesses, "pages": pages, "trace_bytes": file_bytes, "repeats": repeats, "runs": rows});
    std::fs::write(out.join("throughput.json"), serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}
