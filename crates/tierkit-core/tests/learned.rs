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

/// A predictions file with extra top-level keys (e.g. `infer_from_period`).
fn write_predictions_with(dir: &std::path::Path, rows: &[(u32, String)], extra: serde_json::Value) -> String {
    let p = write_predictions(dir, rows, 40, 16);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// The models run at each boundary before the scheduler decides (003 §3.2): with
/// `infer_ns=X` the program halts `models × X` ns at each boundary from `infer_from_period`
/// on, and nothing else changes (docs/learned.md, "Inference cost").
#[test]
fn inference_is_charged_per_boundary_and_model() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &alternating(), None);
    let rows = true_classes(&input, 40, 16);
    let models = rows.len() as f64;
    let x = 1250.0;
    for from in [None, Some(0u64), Some(5)] {
        let extra = match from {
            Some(f) => serde_json::json!({ "infer_from_period": f }),
            None => serde_json::json!({}),
        };
        let pred = write_predictions_with(dir.path(), &rows, extra);
        let free = run(&input, "dram-pmem", &HALF, &format!("kleio:period=40,predictions={pred}"));
        let paid = run(&input, "dram-pmem", &HALF, &format!("kleio:period=40,predictions={pred},infer_ns={x}"));
        let inf = &paid.stats.policy["inference"];
        let boundaries = paid.stats.policy["scheduler"]["boundaries"].as_u64().unwrap();
        let charged = inf["boundaries_charged"].as_u64().unwrap();
        // boundaries schedule periods 1, 2, ...: those before infer_from_period run no model
        let first = from.unwrap_or(0).max(1);
        assert!(boundaries >= 10, "{boundaries}");
        assert_eq!(charged, boundaries + 1 - first, "from {from:?}");
        assert_eq!(paid.runtime_ns - free.runtime_ns, charged as f64 * models * x, "from {from:?}");
        assert_eq!(inf["ns_per_boundary"].as_f64(), Some(models * x));
        assert_eq!(inf["total_ns"].as_f64(), Some(charged as f64 * models * x));
        assert_eq!(inf["infer_ns"].as_f64(), Some(x));
        assert_eq!(inf["from_period"].as_u64(), Some(from.unwrap_or(0)));
        let c = &paid.stats.migration.charges["inference"];
        assert_eq!((c.count, c.halted_ns), (charged, charged as f64 * models * x));
        // the decisions are the same
        assert_eq!((paid.migrations, paid.fast_hit_ratio), (free.migrations, free.fast_hit_ratio));
        // infer_ns=0: nothing charged
        assert_eq!(free.stats.policy["inference"]["boundaries_charged"], 0);
        assert!(!free.stats.migration.charges.contains_key("inference"));
    }
    // from a period past the end: no boundary is charged
    let pred = write_predictions_with(dir.path(), &rows, serde_json::json!({ "infer_from_period": 1000 }));
    let k = run(&input, "dram-pmem", &HALF, &format!("kleoniki:period=40,predictions={pred},infer_ns={x}"));
    assert_eq!(k.stats.policy["inference"]["boundaries_charged"], 0);
}

#[test]
fn bad_infer_from_period_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &alternating(), None);
    for bad in [serde_json::json!(-1), serde_json::json!(2.5), serde_json::json!("3"), serde_json::json!([1])] {
        let pred = write_predictions_with(dir.path(), &[(0, "--1".into())], serde_json::json!({ "infer_from_period": bad }));
        let e = err(&input, &format!("kleio:period=40,predictions={pred}"));
        assert!(e.contains("infer_from_period") && e.contains("pred.json") && e.contains("kleio:predictions"), "{e}");
    }
    let pred = write_predictions(dir.path(), &[(0, "--1".into())], 40, 16);
    let e = err(&input, &format!("kleio:period=40,predictions={pred},infer_ns=-1"));
    assert!(e.contains("infer_ns"), "{e}");
}

#[test]
fn predictions_that_use_the_future_say_so() {
    // the future-knowledge fallback and perfect classes (hybrid) mark their file; the result
    // carries it as the oracle's does
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &alternating(), None);
    let rows = true_classes(&input, 40, 16);
    for (extra, want) in
        [(serde_json::json!({}), false), (serde_json::json!({ "future_knowledge": false }), false), (serde_json::json!({ "future_knowledge": true }), true)]
    {
        let pred = write_predictions_with(dir.path(), &rows, extra);
        let r = run(&input, "dram-pmem", &HALF, &format!("kleio:period=40,predictions={pred}"));
        assert_eq!(r.stats.policy["future_knowledge"].as_bool(), Some(want));
    }
    for bad in [serde_json::json!(1), serde_json::json!("yes")] {
        let pred = write_predictions_with(dir.path(), &rows, serde_json::json!({ "future_knowledge": bad }));
        let e = err(&input, &format!("kleio:period=40,predictions={pred}"));
        assert!(e.contains("future_knowledge") && e.contains("pred.json"), "{e}");
    }
}
