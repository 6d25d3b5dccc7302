"""Speed of profile-guided placement: `make bench-guidance`.

- `tierkit profile`'s pass over a trace (attribution of every access to its allocation
  site, in Rust), in M accesses/s, on the committed sqlite3 trace (1.8 M accesses, 70 call
  stacks) and, when given, on a larger trace (`--trace`, e.g. a medium workload trace);
- the three strategies on random site tables of 1,000, 5,000 and 20,000 sites (capacity
  12.5% of the total size, knapsack at page granularity);
- a guided run against first-touch on the same trace (the cost of following allocations),
  with the traced layout (`layout=trace`) and the arena layout (`layout=arenas`, the
  default: every access is translated to its allocation's new address).

Best of --repeats runs each. Prints a table and writes bench/results/guidance.json;
bench/README.md keeps the latest figures.

Usage: python bench/guidance.py [--repeats N] [--trace T.tkt]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import tierkit
from tierkit import guidance as guide
from tierkit import profiling as prof

ROOT = Path(__file__).resolve().parents[1]
SQLITE = ROOT / "data" / "traces" / "sqlite3-orders.tkt"


def best(f, repeats: int) -> tuple[float, float]:
    """The fastest of `repeats` runs: its wall time and its CPU time (every thread of the
    process: a guided run translates on its read-ahead thread)."""
    t = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        t.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trace", type=Path, action="append", default=[])
    a = ap.parse_args()
    out: dict = {"profile": [], "strategies": [], "guided_run": []}
    for t in [SQLITE, *a.trace]:
        n = tierkit.trace_info(t, progress=False)["summary"]["accesses"]
        s, c = best(lambda: prof.profile(t, progress=False), a.repeats)
        out["profile"].append({"trace": t.name, "accesses": n, "seconds": round(s, 4), "cpu_seconds": round(c, 4),
                               "m_accesses_per_s": round(n / s / 1e6, 1)})
        p = prof.profile(t, progress=False)
        g = ROOT / "target" / "bench-guidance.json"
        g.parent.mkdir(exist_ok=True)
        guide.write_guidance(guide.make_guidance(p, "thermos", 0.125), g, force=True)
        for pol in ("first-touch", f"guided:guidance={g},layout=trace", f"guided:guidance={g},layout=arenas"):
            s, c = best(lambda: tierkit.run(t, "hbm-ddr3", pol, fast_capacity=0.125, progress=False), a.repeats)
            name = pol.split(":")[0] + ("" if "layout=" not in pol else " " + pol.split(",")[-1])
            out["guided_run"].append({"trace": t.name, "policy": name, "seconds": round(s, 4), "cpu_seconds": round(c, 4),
                                      "m_accesses_per_s": round(n / s / 1e6, 1)})
    rng = np.random.default_rng(1)
    for n in (1000, 5000, 20000):
        sizes = (rng.pareto(1.2, n) * 64 * 1024).astype(np.int64) + 4096
        values = (rng.pareto(1.0, n) * 1000).astype(np.int64)
        cap = int(sizes.sum() * 0.125)
        for name in ("hotset", "thermos", "knapsack"):
            fn = guide.STRATEGIES[name]
            s, c = best(lambda: fn(sizes, values, cap), a.repeats)
            row = {"sites": n, "strategy": name, "seconds": round(s, 4), "cpu_seconds": round(c, 4)}
            if name == "knapsack":
                row["granularity_bytes"] = guide.knapsack_select(sizes, values, cap)[1]
            out["strategies"].append(row)
    for k, rows in out.items():
        print(f"\n{k}")
        for r in rows:
            print("  " + ", ".join(f"{a}={b}" for a, b in r.items()))
    dest = ROOT / "bench" / "results" / "guidance.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
