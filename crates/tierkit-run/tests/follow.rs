//! `tierkit run` follows the program's memory wherever its processes hold it (docs/real-linux.md,
//! "What is observed"): through an exec of a wrapper (`sh -c 'exec prog'`), into the processes
//! it forks, and it says when an observation finds nothing; a daemon step that runs past its
//! time bound is cut and counted. Observation only on this machine (first-touch, or moves to a
//! node 1 that may not exist): the moves themselves are checked in the testbed VM
//! (tests/test_run_vm.py).

use std::sync::{Arc, Mutex};

use clap::Parser;
use tierkit_core::live::{LiveDecider, LiveMove, MoveResult, Observation, Step};
use tierkit_run::{run, Args, Overrides};

fn nodes() -> Option<Overrides> {
    Some(Overrides { decider: None, nodes: Some((0, 1)) })
}

/// A shell that holds a 3 MB string (about 730 pages) for a while.
const HOLD: &str = "x=$(yes abcdefg | head -c 3000000); i=0; while [ $i -lt 8 ]; do y=\"$x\"; sleep 0.1; i=$((i+1)); done";

#[test]
fn the_program_is_seen_after_a_wrapper_execs_it() {
    let script = format!("sleep 0.2; exec sh -c '{HOLD}; exit 3'");
    let args = Args::parse_from(["tierkit-run", "--json", "--damon", "off", "--interval", "100ms", "--", "sh", "-c", &script]);
    let rep = run(&args, nodes()).unwrap();
    assert_eq!(rep.exit_status, 3);
    let j = &rep.json;
    // the page map is read from the address space the process has now: the string is seen
    assert!(j["pages"]["max_fast"].as_u64().unwrap() > 700, "{}", j["pages"]);
    assert_eq!(j["empty_observations"], 0, "{}", j["notes"]);
}

#[test]
fn the_processes_a_program_forks_are_observed_with_it() {
    // two children hold 3 MB each while their parent waits with next to nothing
    let script = format!("sh -c '{HOLD}' & sh -c '{HOLD}' & wait");
    let ts = tempfile::tempdir().unwrap();
    let tsf = ts.path().join("ts.csv");
    let args =
        Args::parse_from(["tierkit-run", "--json", "--damon", "off", "--interval", "100ms", "--timeseries", tsf.to_str().unwrap(), "--", "sh", "-c", &script]);
    let rep = run(&args, nodes()).unwrap();
    let j = &rep.json;
    assert!(j["processes"]["max_observed"].as_u64().unwrap() >= 3, "{}", j["processes"]);
    // both strings, in two processes, at one observation
    assert!(j["pages"]["max_fast"].as_u64().unwrap() > 1400, "{}", j["pages"]);
    let text = std::fs::read_to_string(&tsf).unwrap();
    assert!(text.lines().next().unwrap().ends_with(",processes"));
    assert!(text.lines().skip(1).any(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap() >= 3), "{text}");
    assert!(j["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("process tree")), "{}", j["notes"]);
}

/// Asks, at every step, to move every page it sees to the other tier, after thinking 5 ms.
struct MoveAll(Arc<Mutex<Vec<MoveResult>>>);

impl LiveDecider for MoveAll {
    fn name(&self) -> &str {
        "test-move-all"
    }
    fn step(&mut self, obs: &Observation) -> tierkit_core::Result<Step> {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let moves = obs.pages.iter().map(|p| LiveMove { addr: p.addr, from: p.tier, to: 1 - p.tier }).collect();
        Ok(Step { moves, clear_bits: false, next_in_ns: 100_000_000 })
    }
    fn moved(&mut self, results: &[MoveResult]) {
        self.0.lock().unwrap().extend_from_slice(results);
    }
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

#[test]
fn a_step_past_its_time_bound_is_cut_and_counted() {
    let results = Arc::new(Mutex::new(Vec::new()));
    // a 1 ms bound: the decision alone takes longer, so no move is tried
    let args = Args::parse_from(["tierkit-run", "--json", "--damon", "off", "--step-limit", "1ms", "--", "sh", "-c", HOLD]);
    let rep = run(&args, Some(Overrides { decider: Some(Box::new(MoveAll(results.clone()))), nodes: Some((0, 1)) })).unwrap();
    let j = &rep.json;
    assert!(j["steps_cut"].as_u64().unwrap() >= 1, "{}", j);
    assert_eq!(j["step_limit_ms"], 1.0);
    let cut = j["migrations"]["failed_by_errno"]["step_time_bound"].as_u64().unwrap_or(0);
    assert!(cut > 0, "{}", j["migrations"]);
    // the decider hears of every move it asked for, the cut ones as failed (status -2): here
    // all of them
    let r = results.lock().unwrap();
    assert_eq!(r.iter().filter(|m| m.errno == -2).count() as u64, cut);
    assert_eq!(cut, j["migrations"]["requested"].as_u64().unwrap());
}

#[test]
fn a_migration_rate_needs_a_policy_that_migrates_and_a_positive_rate() {
    for (rate, policy) in [("0", "first-touch"), ("nan", "history"), ("5", "all-fast")] {
        let args = Args::parse_from(["tierkit-run", "--policy", policy, "--max-migrate-rate", rate, "--", "true"]);
        let e = match run(&args, nodes()) {
            Err(e) => e.to_string(),
            Ok(r) => panic!("{rate} {policy}: {}", r.json),
        };
        assert!(e.contains("--max-migrate-rate"), "{e}");
    }
}
