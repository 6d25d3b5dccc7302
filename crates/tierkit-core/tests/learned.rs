//! `kleio` / `kleoniki` (003 §3.2, §4): the history scheduler with predictions for selected
//! pages. Without predictions it is `history`; with the right predictions for the pages that
//! history misplaces it decides as the oracle does.

mod common;
use common::{run, write_pages};
use tierkit_core::engine::{simulate, Job};
use tierkit_core::periods::period_counts;
use tierkit_core::platform::Platform;
use tierkit_core::policy::page_scheduler::count_class;
use tierkit_core::policy::PolicySpec;
use tierkit_core::trace::TraceInput;
use tierkit_core::units::Capacity;

const HALF: [(usize, Capacity); 1] = [(0, Capacity::Fraction(0.5))];

/// Two sets of four pages take turns, 40 accesses per period: set A in even periods, set B
/// in odd ones. The fast tier holds four pages, so history always holds last period's set,
/// which is the wrong one.
fn alternating() -> Vec<u64> {
    let mut v = Vec::new();
    for period in 0..12 {
        let base = if period % 2 == 0 { 0 } else { 4 };
        for i in 0..40 {
            v.push(base + (i % 4));
        }
    }
    v
}

fn write_predictions(dir: &std::path::Path, rows: &[(u32, String)], period: u64, bins: u32) -> String {
    let rows: serde_json::Map<String, serde_json::Value> = rows.iter().map(|(p, s)| (p.to_string(), serde_json::Value::String(s.clone()))).collect();
    let v = serde_json::json!({"format": "tierkit-predictions", "version": 1, "policy": "kleio", "period": period, "bins": bins, "models": rows.len(), "rows": rows});
    let p = dir.join("pred.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p.display().to_string()
}

/// The classes each page really has in each period (what a perfect model predicts).
fn true_classes(input: &TraceInput, period: u64, bins: u32) -> Vec<(u32, String)> {
    let c = period_counts(input, period, |_, _| true).unwrap();
    let n = c.page_addr.len();
    let mut rows = vec![vec![0u32; c.periods as usize]; n];
    for i in 0..c.page.len() {
        rows[c.page[i] as usize][c.period_of[i] as usize] = count_class(c.count[i], bins);
    }
    rows.into_iter()
        .enumerate()
        .map(|(p, r)| (p as u32, r.into_iter().enumerate().map(|(t, k)| if t == 0 { '-' } else { std::char::from_digit(k, 36).unwrap() }).collect()))
        .collect()
}

#[test]
fn without_predictions_kleio_is_history() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &alternating(), None);
    let pred = write_predictions(dir.path(), &[], 40, 16);
    let h = run(&input, "dram-pmem", &HALF, "history:period=40");
    let k = run(&input, "dram-pmem", &HALF, &format!("kleio:period=40,predictions={pred}"));
    assert_eq!(k.runtime_ns, h.runtime_ns);
    assert_eq!(k.migrations, h.migrations);
    assert_eq!(k.fast_hit_ratio, h.fast_hit_ratio);
    assert_eq!(k.stats.policy["predictions"]["pages"], 0);
}

#[test]
fn right_predictions_bridge_the_gap_to_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &alternating(), None);
    let h = run(&input, "dram-pmem", &HALF, "history:period=40");
    let o = run(&input, "dram-pmem", &HALF, "oracle:period=40");
    let pred = write_predictions(dir.path(), &true_classes(&input, 40, 16), 40, 16);
    let k = run(&input, "dram-pmem", &HALF, &format!("kleio:period=40,predictions={pred}"));
    assert!(h.runtime_ns > o.runtime_ns, "history {} oracle {}", h.runtime_ns, o.runtime_ns);
    // history serves every period after the first from the wrong set
    assert!(h.fast_hit_ratio < 0.2, "history hits {}", h.fast_hit_ratio);
    assert_eq!(k.fast_hit_ratio, o.fast_hit_ratio);
    assert_eq!(k.migrations, o.migrations);
    assert_eq!(k.runtime_ns, o.runtime_ns);
    // a prediction for half the pages bridges part of the gap only
    let half: Vec<_> = true_classes(&input, 40, 16).into_iter().filter(|(p, _)| p % 2 == 0).collect();
    let pred = write_predictions(dir.path(), &half, 40, 16);
    let k2 = run(&input, "dram-pmem", &HALF, &format!("kleio:period=40,predictions={pred}"));
    assert!(k2.runtime_ns < h.runtime_ns && k2.runtime_ns > o.runtime_ns, "{} not between {} and {}", k2.runtime_ns, o.runtime_ns, h.runtime_ns);
}

fn err(input: &TraceInput, spec: &str) -> String {
    let mut job = Job::new(input, Platform::load("dram-pmem").unwrap());
    job.capacity = HALF.to_vec();
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).err().unwrap_or_else(|| panic!("{spec} should fail")).to_string()
}

#[test]
fn bad_predictions_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &alternating(), None);
    assert!(err(&input, "kleio:pages=0.1").contains("Python front end"));
    let pred = write_predictions(dir.path(), &[(0, "--1x".into())], 40, 16);
    let e = err(&input, &format!("kleio:period=40,predictions={pred}"));
    assert!(e.contains("rows.0: character 3 ('x')"), "{e}");
    let pred = write_predictions(dir.path(), &[(0, "--1".into())], 40, 16);
    let e = err(&input, &format!("kleio:period=80,predictions={pred}"));
    assert!(e.contains("run with period=40"), "{e}");
    let e = err(&input, &format!("kleoniki:period=40,bins=8,predictions={pred}"));
    assert!(e.contains("run with bins=16"), "{e}");
    std::fs::write(dir.path().join("bad.json"), "{\"format\": 3}").unwrap();
    let e = err(&input, &format!("kleio:predictions={}", dir.path().join("bad.json").display()));
    assert!(e.contains("not a predictions file"), "{e}");
}
