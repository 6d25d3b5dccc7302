//! The daemon loop of `tierkit run` with a decider of the test's own (the shipped daemon
//! policies come from tierkit_core::live::build_decider): observations reach the decider, its
//! moves are carried out with move_pages(2) and their outcomes come back to it, the fast
//! budget is enforced, and the program's exit status passes through (docs/real-linux.md);
//! seed 004 (HyPlacer) section 4 for the observe / classify / move loop this drives.
//!
//! On a machine with one NUMA node the test names a node 1 that does not exist: every move
//! then fails (ENODEV or EINVAL from move_pages) and is counted, never fatal; on a machine with
//! two nodes the moves happen.

use std::sync::{Arc, Mutex};

use clap::Parser;
use tierkit_core::live::{LiveDecider, LiveMove, MoveResult, Observation, Step};
use tierkit_run::{run, Args, Overrides};

#[derive(Default)]
struct Seen {
    observations: Vec<(u64, usize, usize)>, // (t_ns, fast pages, slow pages)
    results: Vec<MoveResult>,
    asked: usize,
}

/// Demotes every fast page it sees, then promotes every slow page that is referenced or dirty.
struct TestDecider(Arc<Mutex<Seen>>);

impl LiveDecider for TestDecider {
    fn name(&self) -> &str {
        "test-demote-then-promote"
    }
    fn step(&mut self, obs: &Observation) -> tierkit_core::Result<Step> {
        let mut s = self.0.lock().unwrap();
        assert!(obs.pages.windows(2).all(|w| w[0].addr < w[1].addr), "pages sorted by address, no duplicates");
        let fast = obs.pages.iter().filter(|p| p.tier == 0).count();
        s.observations.push((obs.t_ns, fast, obs.pages.len() - fast));
        let moves: Vec<LiveMove> = if s.observations.len() == 1 {
            obs.pages.iter().filter(|p| p.tier == 0).map(|p| LiveMove { addr: p.addr, from: 0, to: 1 }).collect()
        } else {
            obs.pages.iter().filter(|p| p.tier == 1 && (p.referenced || p.dirty)).map(|p| LiveMove { addr: p.addr, from: 1, to: 0 }).collect()
        };
        s.asked += moves.len();
        Ok(Step { moves, clear_bits: true, next_in_ns: 50_000_000 })
    }
    fn moved(&mut self, results: &[MoveResult]) {
        self.0.lock().unwrap().results.extend_from_slice(results);
    }
    fn report(&self) -> serde_json::Value {
        serde_json::json!({"observations": self.0.lock().unwrap().observations.len()})
    }
}

fn node1_exists() -> bool {
    std::path::Path::new("/sys/devices/system/node/node1").exists()
}

#[test]
fn the_loop_feeds_the_decider_and_carries_out_its_moves_within_the_budget() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    // the shell keeps an 8 MB string in its heap, writes it again and again, then exits 5
    let args = Args::parse_from([
        "tierkit-run",
        "--json",
        "--damon",
        "off",
        "--fast-capacity",
        "1M",
        // no step is cut on a loaded machine
        "--step-limit",
        "60s",
        "--",
        "sh",
        "-c",
        "x=$(yes abcdefg | head -c 8000000); i=0; while [ $i -lt 6 ]; do y=\"$x\"; sleep 0.1; i=$((i+1)); done; exit 5",
    ]);
    let rep = run(&args, Some(Overrides { decider: Some(Box::new(TestDecider(seen.clone()))), nodes: Some((0, 1)) })).unwrap();
    assert_eq!(rep.exit_status, 5);
    let j = &rep.json;
    let s = seen.lock().unwrap();
    assert!(s.observations.len() >= 2, "{:?}", s.observations);
    assert!(s.observations.iter().any(|o| o.1 + o.2 > 1000), "the 8 MB string is seen: {:?}", s.observations);
    assert!(s.observations.windows(2).all(|w| w[0].0 < w[1].0), "time goes forward");
    // the budget (1 MiB = 256 pages) is never exceeded by what the decider sees: the excess
    // of the program's first touch goes to the slow node first (or fails and is counted)
    let m = &j["migrations"];
    let (req, done, failed) = (m["requested"].as_u64().unwrap(), m["done"].as_u64().unwrap(), m["failed"].as_u64().unwrap());
    assert_eq!(req, done + failed);
    assert!(m["over_budget_pages_seen"].as_u64().unwrap() > 0);
    // every move the decider asked for came back to it with an outcome
    assert_eq!(s.results.len(), s.asked);
    assert!(req >= s.asked as u64);
    let by: u64 = m["failed_by_errno"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(by, failed);
    if node1_exists() {
        assert!(done > 0);
        assert!(j["pages"]["max_fast"].as_u64().unwrap() <= 256, "{}", j["pages"]);
    } else {
        // no node 1: each move failed, with move_pages' errno, and nothing moved
        assert_eq!(done, 0);
        // (or, for a batch sent as the program exits, program_gone: -3)
        assert!(s.results.iter().all(|r| r.errno > 0 || r.errno == -3), "{:?}", &s.results[..s.results.len().min(3)]);
        let names: Vec<&String> = m["failed_by_errno"].as_object().unwrap().keys().collect();
        assert!(names.iter().all(|n| ["ENODEV", "EINVAL", "over_budget", "program_gone"].contains(&n.as_str())), "{names:?}");
    }
    assert_eq!(j["decider"]["observations"].as_u64().unwrap() as usize, s.observations.len());
    assert_eq!(j["observations"].as_u64().unwrap() as usize, s.observations.len());
}

#[test]
fn a_program_that_dies_mid_interval_ends_the_loop_with_its_status() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let args = Args::parse_from(["tierkit-run", "--damon", "off", "--interval", "10s", "--", "sh", "-c", "sleep 0.3; kill -SEGV $$"]);
    let t = std::time::Instant::now();
    let rep = run(&args, Some(Overrides { decider: Some(Box::new(TestDecider(seen))), nodes: Some((0, 1)) })).unwrap();
    assert_eq!(rep.exit_status, 128 + libc::SIGSEGV);
    assert_eq!(rep.json["signal_name"], "SIGSEGV");
    assert!(t.elapsed().as_secs_f64() < 5.0, "the loop does not wait out its interval");
}
