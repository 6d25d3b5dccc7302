"""`tierkit sweep` on this machine's cores (docs/sweep.md; `make bench-sweep`): one 40-cell study
run with 1 worker and with 2 (every core of the development VM), in one run, checked to give
the same results bit for bit, then run again over its store (every cell cached).

    python bench/sweep.py [--workers 2] [--accesses 10M] [--out bench/results/sweep.json]

Study: 2 synthetic traces (zipf and phases) × 2 platforms (dram-pmem, hbm-pcm) × 2 capacities
(0.1, 0.2) × detailed timing × 4 policies and the all-slow baseline = 40 cells."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clock import Clock
from tierkit import studies as sw

STUDY = """\
name: bench-sweep
traces:
  - synth: zipf
    accesses: {acc}
    pages: 20K
    write_ratio: 0.3
    seed: 1
  - synth: phases
    accesses: {acc}
    pages: 20K
    write_ratio: 0.2
    seed: 1
platforms: [dram-pmem, hbm-pcm]
capacities: [0.1, 0.2]
timing: [detailed]
policies: [first-touch, history, otf, clock-dwf]
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--accesses", default="10M")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "sweep.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tk-bench-sweep") as tmp:
        d = Path(tmp)
        f = d / "study.yaml"
        f.write_text(STUDY.format(acc=a.accesses))
        st = sw.load_study(f)
        # the traces are made once, outside the timings (both stores share them)
        for name in ("one", "many"):
            (d / name).mkdir()
            os.symlink(d / "traces", d / name / "traces", target_is_directory=True)
        (d / "traces").mkdir()
        sw.cells(st, d, progress=False)
        timings, cpu = {}, {}
        cpus = sorted(os.sched_getaffinity(0))
        for name, workers, pin in (("one", 1, True), ("one-readahead", 1, False), ("many", a.workers, False)):
            if name == "one-readahead":
                (d / name).mkdir()
                os.symlink(d / "traces", d / name / "traces", target_is_directory=True)
            # one worker on one CPU: the engine then decodes on its own thread (no read-ahead),
            # as each of several workers does (tierkit.pool); unpinned, it reads ahead on a
            # second CPU
            os.sched_setaffinity(0, {cpus[0]} if pin else set(cpus))
            # force: the folder holds only the link to the shared traces (a sweep's store
            # refuses a folder with files it did not make)
            with Clock() as c:
                df = sw.sweep(st, d / name, workers=workers, progress=False, report=False, force=True)
            # CPU: this process (and its read-ahead thread) and the worker processes it waited for
            timings[name], cpu[name] = c.wall_s, c.total_cpu_s
            os.sched_setaffinity(0, set(cpus))
            assert len(df) == 40 and df["error"].isna().all(), df[df["error"].notna()]
        def results(name):
            # the traces' paths name each store's directory; everything else must be equal
            text = (d / name / "results.jsonl").read_text().replace(str(d / name), "STORE")
            return [json.loads(l)["result"] for l in text.splitlines()]

        same = results("one") == results("many") == results("one-readahead")
        t0 = time.perf_counter()
        sw.sweep(st, d / "many", workers=a.workers, progress=False)  # writes the report once
        first_report = time.perf_counter() - t0
        t0 = time.perf_counter()
        df = sw.sweep(st, d / "many", workers=a.workers, progress=False)
        cached = time.perf_counter() - t0
        assert df.attrs["ran"] == 0
        # and as a user runs it: the whole command, from a new process
        with Clock() as c:
            subprocess.run([sys.executable, "-m", "tierkit.cli", "sweep", str(f), "--out", str(d / "many"), "-q"],
                           check=True, capture_output=True)
        cached_cli, cached_cli_cpu = c.wall_s, c.children_cpu_s
        recs = [json.loads(l) for l in (d / "one" / "results.jsonl").read_text().splitlines()]
        per_cell = sum(r["seconds"] for r in recs) / len(recs)
    res = {
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "cells": 40, "accesses_per_trace": a.accesses,
        "workers": a.workers, "seconds_1_worker": round(timings["one"], 3),  # on one CPU
        f"seconds_{a.workers}_workers": round(timings["many"], 3),
        "speedup": round(timings["one"] / timings["many"], 3),
        "seconds_1_worker_read_ahead": round(timings["one-readahead"], 3),
        "speedup_vs_read_ahead": round(timings["one-readahead"] / timings["many"], 3), "identical_results": same,
        "seconds_report": round(first_report, 3), "seconds_rerun_cached": round(cached, 3),
        "seconds_rerun_cached_command": round(cached_cli, 3),
        "mean_cell_seconds": round(per_cell, 4),
        # CPU seconds of the same runs (the process and its waited-for workers): the figure to
        # trust on a shared machine; several workers' CPU time adds up, so compare it with the
        # one-worker run's for their overhead, and the wall seconds for the speedup
        "cpu_seconds_1_worker": round(cpu["one"], 3), f"cpu_seconds_{a.workers}_workers": round(cpu["many"], 3),
        "cpu_seconds_1_worker_read_ahead": round(cpu["one-readahead"], 3),
        "cpu_seconds_rerun_cached_command": round(cached_cli_cpu, 3),
    }
    print(json.dumps(res, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    if not same:
        sys.exit("results differ between 1 and several workers")


if __name__ == "__main__":
    main()
