"""A study of `tierkit run` placing a live program with a known hot set, in the testbed VM
(docs/real-linux.md).

The program is testbed/hotcold.c: 64 MiB written once (cold), 16 MiB of random read-modify-writes
(write-intensive), 16 MiB of random reads (read-intensive); before its loop it moves the two hot
regions to the slow node itself (--start-slow), then measures every 500 ms, with move_pages
queries, how many pages of each region are on the fast node. Each policy runs once in one VM
(node 0: 512 MiB, both vCPUs; node 1: 1 GiB, CPU-less, a lower memory tier):

- `first-touch` (no daemon: the reference), `hyplacer` and `history` (daemon policies, the
  simulator's decision code) with a 48 MiB fast budget (the hot set is 32 MiB, the program 96 MiB),
  NUMA balancing off for the run;
- `autonuma-tiering` and `damon-tiering` (kernel policies: the kernel decides; tierkit sets them up
  and restores them), with the fast node filled by a file in /dev/shm so that about 100 MiB of it
  is free when the program starts.

Prints a table (fast-node residency of the hot set over time, migrations, daemon CPU) and
writes experiments/results/live_placement.json. About 2 minutes. Run: `make experiments-live`.
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
PROGRAM = "hotcold --start-slow --seconds 12 --sample-ms 500"
FILL = "rm -f /dev/shm/fill; sync; echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/zero of=/dev/shm/fill bs=1M count=360 2>/dev/null; "
NB_OFF = "nb=$(cat /proc/sys/kernel/numa_balancing); echo 0 > /proc/sys/kernel/numa_balancing; "
NB_BACK = "; echo $nb > /proc/sys/kernel/numa_balancing"
RUNS = [
    ("first-touch", "--policy first-touch --fast-capacity 48M", NB_OFF, NB_BACK),
    ("hyplacer", "--policy hyplacer:write_threshold_mb_per_s=1 --fast-capacity 48M", NB_OFF, NB_BACK),
    ("history", "--policy history --fast-capacity 48M", NB_OFF, NB_BACK),
    ("autonuma-tiering", "--policy autonuma-tiering:hot_threshold_ms=500", FILL, "; rm -f /dev/shm/fill"),
    ("damon-tiering", "--policy damon-tiering", FILL, "; rm -f /dev/shm/fill"),
]
AT_MS = [1000, 2000, 4000, 8000, 12000]


def main() -> int:
    from tierkit.testbed import FileSet, Testbed, VMConfig

    if not BIN.is_file():
        print(f"experiments: {BIN} is missing (cargo build --release -p tierkit-run)", file=sys.stderr)
        return 2
    script = []
    for i, (_, args, pre, post) in enumerate(RUNS):
        script.append(f"{pre}tierkit-run --json {args} -- {PROGRAM} > $OUT/run{i} 2> $OUT/err{i}; echo $? > $OUT/rc{i}{post}")
    t = time.time()
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024), FileSet().add_binary(BIN)) as vm:
        res = vm.run("; ".join(script), timeout_s=580)
    if res.status != 0:
        print(f"experiments: the VM script failed: {res.stderr[-400:]}", file=sys.stderr)
        return 1
    out = {"date": time.strftime("%Y-%m-%d"), "program": PROGRAM, "vm": "testbed (TCG), node 0 512 MiB, node 1 1 GiB", "runs": []}
    print(f"{'policy':18} " + " ".join(f"{'hot@' + str(a // 1000) + 's':>8}" for a in AT_MS)
          + f" {'write@end':>9} {'read@end':>8} {'cold@end':>8} {'tk moves':>8} {'promoted':>8} {'demoted':>8} {'cpu s':>6}")
    for i, (name, args, _, _) in enumerate(RUNS):
        rc = int(res.files[f"rc{i}"])
        lines = res.files[f"run{i}"].decode().strip().splitlines()
        if rc != 0 or len(lines) < 2:
            print(f"{name:18} failed ({rc}): {res.files[f'err{i}'].decode()[-200:]}")
            out["runs"].append({"policy": name, "error": res.files[f"err{i}"].decode()[-400:]})
            continue
        prog, rep = json.loads(lines[0]), json.loads(lines[-1])
        pages = prog["pages"]
        hot = pages["write"] + pages["read"]

        def at(ms):
            s = [x for x in prog["series"] if x[0] <= ms + 100]
            return (s[-1][1] + s[-1][2]) / hot if s else float("nan")

        end = prog["series"][-1]
        v = rep["vmstat"]
        promoted = v["pgpromote_success"] if name in ("autonuma-tiering",) else None
        row = {
            "policy": name, "args": args, "hot_fast_share_at_ms": {a: at(a) for a in AT_MS},
            "write_fast_share_end": end[1] / pages["write"], "read_fast_share_end": end[2] / pages["read"],
            "cold_fast_share_end": end[3] / pages["cold"] if pages["cold"] else 0.0,
            "tierkit_moves_done": rep["migrations"]["done"], "tierkit_moves_failed": rep["migrations"]["failed"],
            "vmstat": v, "daemon_cpu_s": rep["daemon_cpu_s"], "wall_s": rep["wall_s"],
            "started_slow": prog["started_slow"], "series": prog["series"], "pages": pages,
            "notes": rep["notes"],
        }
        out["runs"].append(row)
        prom = promoted if promoted is not None else v["pgmigrate_success"] if name == "damon-tiering" else "-"
        dem = v["pgdemote_kswapd"] + v["pgdemote_direct"] if name == "autonuma-tiering" else "-"
        print(f"{name:18} " + " ".join(f"{100 * at(a):7.0f}%" for a in AT_MS)
              + f" {100 * row['write_fast_share_end']:8.0f}% {100 * row['read_fast_share_end']:7.0f}% {100 * row['cold_fast_share_end']:7.0f}%"
              + f" {row['tierkit_moves_done']:8} {prom!s:>8} {dem!s:>8} {rep['daemon_cpu_s']:6.2f}")
    print(f"({time.time() - t:.0f} s; 'promoted' is pgpromote_success for autonuma-tiering and pgmigrate_success for damon-tiering)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"written: {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
