"""A study of `tierkit run` placing a live program with a known hot set, in the testbed VM with
its slow tier on (docs/real-linux.md), so that each policy's measured speedup means something.

The program is testbed/hotcold.c: 64 MiB written once (cold), 16 MiB of random read-modify-writes
(write-intensive), 16 MiB of random reads (read-intensive); before its loop it moves the two hot
regions to the slow node itself (--start-slow), then measures every 4 s, with move_pages
queries, how many pages of each region are on the fast node, and how many accesses it has made
(40 s in all).
The slow-tier plugin paces the guest: a miss of its cache model costs 1 us on node 0 and 3 us on
node 1 of guest time, so accesses per second of guest time are the program's speed under a
policy, independent of the host's load (as long as the host keeps up: `lag_s`). Each policy runs
once in one VM (node 0: 512 MiB, both vCPUs; node 1: 1 GiB, CPU-less, a lower memory tier):

- `all-fast` and `all-slow`: the program bound to node 0 or node 1 (testbed/numapol.c), without
  --start-slow: the references the speedups are measured against;
- `first-touch` (no daemon), `hyplacer` and `history` (daemon policies, the simulator's decision
  code) with a 48 MiB fast budget (the hot set is 32 MiB, the program 96 MiB), NUMA balancing off
  for the run;
- `autonuma-tiering` and `damon-tiering` (kernel policies: the kernel decides; tierkit sets them up
  and restores them), with the fast node filled by a file in /dev/shm so that about 100 MiB of it
  is free when the program starts.

Prints a table (accesses per second of guest time and the speedup over all-slow and over
first-touch, over the whole run and over its second half; fast-node residency of the hot set over
time, migrations, the policy's CPU) and writes experiments/results/live_placement.json. About 10 minutes.
Run: `make experiments-live`.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
BIN = ROOT / "target" / "release" / "tierkit-run"
RESULTS = ROOT / "experiments" / "results" / "live_placement.json"
SECONDS = 40
PROGRAM = f"hotcold --seconds {SECONDS} --sample-ms 4000 --tlb-flush-ms 20"
FILL = "rm -f /dev/shm/fill; sync; echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/zero of=/dev/shm/fill bs=1M count=360 2>/dev/null; "
NB_OFF = "nb=$(cat /proc/sys/kernel/numa_balancing); echo 0 > /proc/sys/kernel/numa_balancing; "
NB_BACK = "; echo $nb > /proc/sys/kernel/numa_balancing"
# (name, how the program runs: a tierkit-run policy, or None for a reference bound to a node,
# the bound node, what runs before, after)
RUNS = [
    ("all-fast", None, 0, NB_OFF, NB_BACK),
    ("all-slow", None, 1, NB_OFF, NB_BACK),
    ("first-touch", "--policy first-touch --fast-capacity 48M", None, NB_OFF, NB_BACK),
    ("hyplacer", "--policy hyplacer --fast-capacity 48M", None, NB_OFF, NB_BACK),
    ("history", "--policy history --fast-capacity 48M", None, NB_OFF, NB_BACK),
    ("autonuma-tiering", "--policy autonuma-tiering:hot_threshold_ms=500", None, FILL, "; rm -f /dev/shm/fill"),
    ("damon-tiering", "--policy damon-tiering", None, FILL, "; rm -f /dev/shm/fill"),
]
AT_MS = [4000, 8000, 16000, 24000, 40000]


def speed(prog: dict, from_ms: float = 0.0) -> float:
    """Accesses per second of guest time in the program's loop between the first sample at or
    after `from_ms` and the last one (the samples' own time left out: their move_pages queries
    cost the same under every policy, over a second each in the paced VM)."""
    t = [x[0] for x in prog["series"]]
    a, w = prog["accesses_series"], prog["work_ms_series"]
    i = next(k for k, x in enumerate(t) if x >= from_ms)
    return (a[-1] - a[i]) / ((w[-1] - w[i]) / 1e3) if w[-1] > w[i] else float("nan")


def main() -> int:
    import argparse

    from tierkit.testbed import FileSet, SlowTier, Testbed, VMConfig, calibrate

    ap = argparse.ArgumentParser(description="tierkit run's policies on a known hot set in the paced testbed VM")
    ap.add_argument("--only", help="comma-separated policies to run (the results file is then not written)")
    opts = ap.parse_args()
    runs = RUNS
    if opts.only:
        names = opts.only.split(",")
        unknown = [n for n in names if n not in [r[0] for r in RUNS]]
        if unknown:
            print(f"experiments: unknown policy {unknown[0]!r} (known: {', '.join(r[0] for r in RUNS)})", file=sys.stderr)
            return 2
        runs = [r for r in RUNS if r[0] in names]

    if not BIN.is_file():
        print(f"experiments: {BIN} is missing (cargo build --release -p tierkit-run)", file=sys.stderr)
        return 2
    t = time.time()
    st = SlowTier()
    out: dict = {"date": time.strftime("%Y-%m-%d"), "program": PROGRAM,
                 "vm": "testbed (TCG, slow-tier plugin), node 0 512 MiB, node 1 1 GiB",
                 "slow_tier": st.__dict__, "runs": []}
    res = {}
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024, slow_tier=st), FileSet().add_binary(BIN), boot_timeout_s=300) as vm:
        out["calibration"] = calibrate(vm)
        for name, args, node, pre, post in runs:
            if args is None:
                cmd = f"{pre}numapol bind:{node} {PROGRAM} > $OUT/prog 2> $OUT/err; echo $? > $OUT/rc{post}"
            else:
                cmd = (f"{pre}tierkit-run --json {args} -- {PROGRAM} --start-slow > $OUT/run 2> $OUT/err; "
                       f"echo $? > $OUT/rc{post}")
            res[name] = vm.run(cmd, timeout_s=600)
            print(f"{name}: {time.time() - t:.0f} s", file=sys.stderr)
    cal = out["calibration"]["nodes"]
    print(f"calibration: chase {cal[0]['chase_ns']:.0f} / {cal[1]['chase_ns']:.0f} ns (node 0 / node 1)")
    print(f"{'policy':18} {'M acc/s':>7} {'vs slow':>7} {'vs f-t':>7} {'2nd half':>8} "
          + " ".join(f"{'hot@' + str(a // 1000) + 's':>8}" for a in AT_MS)
          + f" {'write@end':>9} {'read@end':>8} {'cold@end':>8} {'tk moves':>8} {'promoted':>8} {'demoted':>8} {'pol cpu':>7} {'lag s':>5}")
    for name, args, node, _, _ in runs:
        r = res[name]
        rc = int(r.files.get("rc", b"255").strip() or 255) if r.status == 0 else r.status
        lines = r.files.get("run" if args else "prog", b"").decode().strip().splitlines()
        if rc != 0 or len(lines) < (2 if args else 1):
            err = r.files.get("err", b"").decode() + r.stderr
            print(f"{name:18} failed ({rc}): {err[-200:]}")
            out["runs"].append({"policy": name, "error": err[-400:]})
            continue
        prog = json.loads(lines[0])
        rep = json.loads(lines[-1]) if args else None
        pages = prog["pages"]
        hot = pages["write"] + pages["read"]

        def at(ms, prog=prog, hot=hot):
            s = [x for x in prog["series"] if x[0] <= ms + 100]
            return (s[-1][1] + s[-1][2]) / hot if s else float("nan")

        end = prog["series"][-1]
        v = rep["vmstat"] if rep else {}
        row = {
            "policy": name, "args": args if args else f"numapol bind:{node}",
            "accesses_per_s": speed(prog), "accesses_per_s_second_half": speed(prog, SECONDS * 500),
            "accesses": prog["accesses"],
            "lag_s": (r.model or {}).get("lag_ns", 0) / 1e9,
            "hot_fast_share_at_ms": {a: at(a) for a in AT_MS},
            "write_fast_share_end": end[1] / pages["write"], "read_fast_share_end": end[2] / pages["read"],
            "cold_fast_share_end": end[3] / pages["cold"] if pages["cold"] else 0.0,
            "tierkit_moves_done": rep["migrations"]["done"] if rep else 0,
            "tierkit_moves_failed": rep["migrations"]["failed"] if rep else 0,
            "vmstat": v, "daemon_cpu_s": rep["daemon_cpu_s"] if rep else 0.0,
            "wall_s": rep["wall_s"] if rep else None, "program_rusage": rep.get("program_rusage") if rep else None,
            "started_slow": prog["started_slow"], "series": prog["series"],
            "accesses_series": prog["accesses_series"], "work_ms_series": prog["work_ms_series"], "pages": pages,
            "failed_by_errno": rep["migrations"]["failed_by_errno"] if rep else {},
            "kernel_threads_cpu_s": rep.get("kernel_threads_cpu_s") if rep else None,
            "policy_cpu_s": rep.get("policy_cpu_s") if rep else None,
            # the daemon's own account (hyplacer's write estimates, the mirror's counts)
            "decider_live": ((rep.get("decider") or {}).get("live") if rep else None),
            "damon": rep.get("damon") if rep else None, "daemon_time_s": rep.get("daemon_time_s") if rep else None, "notes": rep["notes"] if rep else [],
        }
        out["runs"].append(row)
    by = {x["policy"]: x for x in out["runs"] if "error" not in x}
    for row in out["runs"]:
        if "error" in row:
            continue
        name = row["policy"]
        for ref in ("all-slow", "first-touch"):
            for k, key in (("", "accesses_per_s"), ("_second_half", "accesses_per_s_second_half")):
                row[f"speedup_vs_{ref.replace('-', '_')}{k}"] = row[key] / by[ref][key] if ref in by else None
        v = row["vmstat"]
        prom = v.get("pgpromote_success") if name == "autonuma-tiering" else v.get("pgmigrate_success") if name == "damon-tiering" else "-"
        dem = v["pgdemote_kswapd"] + v["pgdemote_direct"] if name == "autonuma-tiering" else "-"

        def f(x):
            return f"{x:7.2f}" if x is not None else "      -"

        print(f"{name:18} {row['accesses_per_s'] / 1e6:7.3f} {f(row['speedup_vs_all_slow'])} {f(row['speedup_vs_first_touch'])} "
              f"{f(row['speedup_vs_all_slow_second_half']):>8} "
              + " ".join(f"{100 * row['hot_fast_share_at_ms'][a]:7.0f}%" for a in AT_MS)
              + f" {100 * row['write_fast_share_end']:8.0f}% {100 * row['read_fast_share_end']:7.0f}% {100 * row['cold_fast_share_end']:7.0f}%"
              + f" {row['tierkit_moves_done']:8} {prom!s:>8} {dem!s:>8} {row['policy_cpu_s'] or 0.0:7.2f} {row['lag_s']:5.2f}")
    print(f"({time.time() - t:.0f} s. Speedups: accesses per second of guest time over all-slow's and first-touch's, "
          f"over the whole run; '2nd half' over all-slow from {SECONDS // 2} s on. 'promoted' is pgpromote_success for "
          "autonuma-tiering and pgmigrate_success for damon-tiering)")
    if opts.only:
        print(json.dumps([{k: x.get(k) for k in ("policy", "daemon_time_s", "damon", "failed_by_errno", "daemon_cpu_s")} for x in out["runs"]]))
        return 0
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"written: {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
