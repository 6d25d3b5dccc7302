//! Models match hand-computed figures: the static policies under the simple timing model.

mod common;
use tierkit_core::engine::{simulate, Job};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::trace::TraceInput;
use tierkit_core::units::Capacity;

fn write_trace(dir: &std::path::Path, pages: &[u64], writes: &[bool]) -> TraceInput {
    common::write_pages(dir, pages, Some(writes))
}

#[test]
fn first_touch_on_dram_pmem_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    // 10 accesses over pages 0..4; fast tier holds 2 pages (0.5 of 4): pages 0 and 1
    let pages = [0, 1, 2, 0, 3, 0, 1, 2, 2, 3];
    let input = write_trace(dir.path(), &pages, &[false; 10]);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    job.capacity = vec![(0, Capacity::Fraction(0.5))];
    let r = simulate(&mut job, &PolicySpec::parse("first-touch").unwrap()).unwrap();
    assert_eq!(r.accesses, 10);
    assert_eq!(r.pages, 4);
    assert_eq!(r.fast_capacity_pages, Some(2));
    // fast hits: page 0 (3) + page 1 (2) = 5
    assert_eq!(r.fast_hit_ratio, 0.5);
    // latency = 5*50 + 5*150 = 1000 ns; floor: PMEM moves 5*64 B at 3.7 B/ns = 86.5 ns
    assert!((r.runtime_ns - 1000.0).abs() < 1e-9, "{}", r.runtime_ns);
    assert_eq!(r.migrations, 0);
    assert_eq!(r.stats.platform.tiers[0].used_pages, 2);
}

#[test]
fn all_fast_and_all_slow_ignore_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let pages = [0, 1, 2, 3];
    let input = write_trace(dir.path(), &pages, &[false, true, false, true]);
    let plat = Platform::load("dram-pmem").unwrap();
    let mut job = Job::new(&input, plat.clone());
    job.capacity = vec![(0, Capacity::Fraction(0.25))];
    let fast = simulate(&mut job, &PolicySpec::parse("all-fast").unwrap()).unwrap();
    assert_eq!(fast.fast_hit_ratio, 1.0);
    assert_eq!(fast.runtime_ns, 200.0);
    let slow = simulate(&mut job, &PolicySpec::parse("all-slow").unwrap()).unwrap();
    assert_eq!(slow.fast_hit_ratio, 0.0);
    assert_eq!(slow.runtime_ns, 600.0);
}

#[test]
fn interleave_weights_place_four_and_four() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..20).collect();
    let input = write_trace(dir.path(), &pages, &[false; 20]);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    // fast tier: 6 of 20 pages. 4/4 gives pages 0-3 fast, 4-7 slow, 8-9 fast (then full), rest slow
    job.capacity = vec![(0, Capacity::Fraction(0.3))];
    let r = simulate(&mut job, &PolicySpec::parse("interleave:weights=4/4").unwrap()).unwrap();
    assert_eq!(r.fast_hit_ratio, 6.0 / 20.0);
    let r = simulate(&mut job, &PolicySpec::parse("interleave").unwrap()).unwrap();
    assert_eq!(r.fast_hit_ratio, 6.0 / 20.0);
}

#[test]
fn unknown_policy_and_parameter_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[0], &[false]);
    let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
    let e = simulate(&mut job, &PolicySpec::parse("frist-touch").unwrap()).unwrap_err().to_string();
    assert!(e.contains("frist-touch") && e.contains("first-touch"), "{e}");
    // a typo gets the close name first, and the whole list of known names survives the cap
    assert!(e.contains("unknown policy 'frist-touch' (did you mean 'first-touch'?); known: all-fast,") && e.ends_with("nimble"), "{e}");
    let e = simulate(&mut job, &PolicySpec::parse("interleave:weight=1/1").unwrap()).unwrap_err().to_string();
    assert!(e.contains("interleave") && e.contains("unknown parameter 'weight' (did you mean 'weights'?); known: weights"), "{e}");
    let e = simulate(&mut job, &PolicySpec::parse("no-such-thing").unwrap()).unwrap_err().to_string();
    assert!(!e.contains("did you mean"), "{e}");
    let e = Platform::load("dram-pmme").unwrap_err().to_string();
    assert!(e.contains("unknown platform 'dram-pmme' (did you mean 'dram-pmem'?); presets: ") && e.ends_with("platform file"), "{e}");
}

/// A fast tier given in bytes that holds every page the trace touches leaves no decision: every
/// policy equals all-fast (003 §3.1's bound), and the result says so, naming both sizes.
#[test]
fn a_fast_capacity_over_the_footprint_is_warned() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[0, 1, 2, 3, 0, 1], &[false; 6]);
    let run = |cap: Capacity, policy: &str| {
        let mut job = Job::new(&input, Platform::load("dram-pmem").unwrap());
        job.capacity = vec![(0, cap)];
        simulate(&mut job, &PolicySpec::parse(policy).unwrap()).unwrap().warnings
    };
    let w = run(Capacity::Bytes(512 << 20), "first-touch");
    let said: Vec<_> = w.iter().filter(|w| w.contains("holds the whole footprint")).collect();
    assert_eq!(said.len(), 1, "{w:?}");
    assert!(said[0].contains("its capacity, 512 MiB (131072 pages), is at least the 4 pages (16 KiB)") && said[0].contains("equals all-fast"), "{}", said[0]);
    // exactly the footprint is all of it too; one page short leaves a decision
    assert!(run(Capacity::Bytes(4 << 12), "history:period=2").iter().any(|w| w.contains("holds the whole footprint")));
    assert!(!run(Capacity::Bytes(3 << 12), "first-touch").iter().any(|w| w.contains("footprint")));
    // a fraction says it itself; all-fast ignores capacities
    assert!(!run(Capacity::Fraction(1.0), "first-touch").iter().any(|w| w.contains("footprint")));
    assert!(!run(Capacity::Bytes(512 << 20), "all-fast").iter().any(|w| w.contains("footprint")));
}
