//! `--regions` / `--region-series` on a real program: a shell that writes its regions file
//! while it runs (it does not exist when tierkit starts; its last line is once left half
//! written), and a bad region line written mid-run, which ends the run with an error.
//!
//! The nodes are given (0 fast, 1 slow) as in daemon_loop.rs; under first-touch nothing moves,
//! so on a machine with one NUMA node every page is on the fast node.

use std::collections::BTreeMap;

use clap::Parser;
use tierkit_run::{run, Args, Overrides};

fn overrides() -> Option<Overrides> {
    Some(Overrides { decider: None, nodes: Some((0, 1)) })
}

/// The CSV's rows as vectors of fields (no quoted fields in these tests).
fn csv(path: &std::path::Path) -> (String, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    (header, lines.map(|l| l.split(',').map(String::from).collect()).collect())
}

#[test]
fn every_observation_counts_the_pages_of_each_region_known_then() {
    let d = tempfile::tempdir().unwrap();
    let rf = d.path().join("regions.txt");
    let ts = d.path().join("ts.csv");
    let rs = d.path().join("rs.csv");
    // "all" holds every user-space page, "none" none; "heap" is the shell's heap (its range
    // from its own maps); "late" is written in two halves, 0.4 s apart
    let script = format!(
        r#"x=$(yes abcdefg | head -c 4000000); sleep 0.2
rf='{rf}'
heap=$(grep '\[heap\]' /proc/$$/maps | cut -d' ' -f1)
s=${{heap%-*}}; e=${{heap#*-}}
printf 'region all 0x1000 %d\nregion none 0x0 4096\nhot 200 all\n' $((0x800000000000 - 0x1000)) > "$rf"
printf 'region heap 0x%s %d\n' "$s" $((0x$e - 0x$s)) >> "$rf"
printf 'region late 0x1000 ' >> "$rf"
i=0; while [ $i -lt 4 ]; do y="$x"; sleep 0.1; i=$((i+1)); done
printf '4096\n' >> "$rf"
i=0; while [ $i -lt 4 ]; do y="$x"; sleep 0.1; i=$((i+1)); done
exit 4"#,
        rf = rf.display()
    );
    let (tss, rss, rfs) = (ts.to_str().unwrap(), rs.to_str().unwrap(), rf.to_str().unwrap());
    let args = Args::parse_from([
        "tierkit-run",
        "--json",
        "--damon",
        "off",
        "--interval",
        "50ms",
        "--timeseries",
        tss,
        "--regions",
        rfs,
        "--region-series",
        rss,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let rep = run(&args, overrides()).unwrap();
    assert_eq!(rep.exit_status, 4, "written also when the program fails");
    let (h, ts_rows) = csv(&ts);
    assert!(h.starts_with("time_ms,pages_fast,pages_slow,") && h.ends_with(",processes"), "{h}");
    let (h, rows) = csv(&rs);
    assert_eq!(h, "time_ms,region,pages_fast,pages_slow");
    assert_eq!(rep.json["region_series"], rss);
    assert_eq!(rep.json["region_series_rows"].as_u64().unwrap() as usize, rows.len());
    // time_ms -> region -> (fast, slow)
    let mut by_t: BTreeMap<u64, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    for r in &rows {
        assert_eq!(r.len(), 4, "{r:?}");
        let prev = by_t.entry(r[0].parse().unwrap()).or_default().insert(r[1].clone(), (r[2].parse().unwrap(), r[3].parse().unwrap()));
        assert!(prev.is_none(), "one row per region per observation: {r:?}");
    }
    // time -> (fast, slow, processes): the shell's children (yes, head, sleep) are observed
    // with it, while the regions are the shell's own
    let ts_by_t: BTreeMap<u64, (u64, u64, u64)> =
        ts_rows.iter().map(|r| (r[0].parse().unwrap(), (r[1].parse().unwrap(), r[2].parse().unwrap(), r[13].parse().unwrap()))).collect();
    // the first observations come before the file exists: no rows for them
    assert!(ts_rows.len() > by_t.len(), "{} observations, {} with regions", ts_rows.len(), by_t.len());
    let mut saw_late_missing = false;
    for (t, regs) in &by_t {
        // the same time as the time series' row of that observation, and "all" is its total
        // when the shell ran alone, part of it otherwise
        let (fast, slow, procs) = *ts_by_t.get(t).unwrap();
        let all = regs["all"];
        if procs == 1 {
            assert_eq!(all, (fast, slow), "at {t} ms");
        } else {
            assert!(procs > 1 && all.0 <= fast && all.1 <= slow && all.0 + all.1 > 0, "at {t} ms: {all:?} of {fast}/{slow} in {procs} processes");
        }
        assert_eq!(regs["none"], (0, 0));
        let heap = regs["heap"];
        assert!(heap.0 + heap.1 > 0 && heap.0 + heap.1 <= regs["all"].0 + regs["all"].1, "{heap:?}");
        if !regs.contains_key("late") {
            saw_late_missing = true;
            assert_eq!(regs.len(), 3);
        } else {
            assert!(regs["late"].0 + regs["late"].1 <= 1);
        }
    }
    let last = by_t.values().last().unwrap();
    assert!(last.contains_key("late"), "the completed line is read: {last:?}");
    assert!(saw_late_missing, "the half-written line is not read (nor an error)");
    // the program's 4 MB string is in the first-touch fast node's count
    assert!(last["all"].0 > 900, "{last:?}");
}

#[test]
fn a_bad_region_line_written_mid_run_ends_the_program_with_an_error_naming_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let rf = d.path().join("regions.txt");
    let rs = d.path().join("rs.csv");
    let script = format!("sleep 0.3; printf 'region a 0x1000 4096\\nregion b 0xnothex 4096\\n' > '{}'; sleep 30", rf.display());
    let args = Args::parse_from([
        "tierkit-run",
        "--damon",
        "off",
        "--interval",
        "50ms",
        "--regions",
        rf.to_str().unwrap(),
        "--region-series",
        rs.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let t = std::time::Instant::now();
    let e = run(&args, overrides()).err().expect("an error").to_string();
    assert!(t.elapsed().as_secs_f64() < 10.0, "the program is ended, not waited for");
    assert!(e.starts_with(&format!("{}: line 2: ", rf.display())) && e.contains("0xnothex") && e.contains("ended the program"), "{e}");
    assert!(!rs.exists() && !tierkit_core::outfile::partial_path(&rs).exists(), "no file is left");

    // the same line there before the start: the error comes before the program starts
    let marker = d.path().join("started");
    let args = Args::parse_from(["tierkit-run", "--damon", "off", "--regions", rf.to_str().unwrap(), "--", "touch", marker.to_str().unwrap()]);
    let e = run(&args, overrides()).err().expect("an error").to_string();
    assert!(e.contains("line 2") && !e.contains("ended"), "{e}");
    assert!(!marker.exists());
}

#[test]
fn region_series_needs_regions_and_an_existing_file_needs_force() {
    let d = tempfile::tempdir().unwrap();
    let rs = d.path().join("rs.csv");
    let run_cli = |a: &[&str]| tierkit_run::main_with_args(std::iter::once("tierkit-run").chain(a.iter().copied()).map(String::from));
    let rss = rs.to_str().unwrap();
    assert_eq!(run_cli(&["--region-series", rss, "--", "true"]), 2);
    assert!(!rs.exists());
    std::fs::write(&rs, "keep").unwrap();
    let rf = d.path().join("none.txt");
    let rfs = rf.to_str().unwrap();
    assert_eq!(run_cli(&["--regions", rfs, "--region-series", rss, "--", "true"]), 2);
    assert_eq!(std::fs::read_to_string(&rs).unwrap(), "keep");
    assert_eq!(run_cli(&["--regions", rfs, "--region-series", rss, "--timeseries", rss, "--force", "--", "true"]), 2);
    assert_eq!(run_cli(&["--json", "--regions", rfs, "--region-series", rss, "--force", "--", "true"]), 0);
    assert_eq!(std::fs::read_to_string(&rs).unwrap(), "time_ms,region,pages_fast,pages_slow\n");
}
