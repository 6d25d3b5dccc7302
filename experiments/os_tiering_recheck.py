#!/usr/bin/env python3
"""Re-simulate the autonuma-tiering rows of a `make experiments-tiering` run (its results.csv
and traces in DIR; the platform beside experiments/tiering/study.yaml) with the current build, and print old and new runtimes (docs/validation.md:
the effect of kswapd's nap on docs/experiments.md; `--no-nap` adds kswapd_nap_ms=1e9, which
reproduces runs made before the nap existed).

    experiments/os_tiering_recheck.py [--dir target/experiments/tiering] [--method K=1000] [--no-nap]
"""
import argparse
import csv
from pathlib import Path

import tierkit

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--dir", type=Path, default=Path("target/experiments/tiering"))
ap.add_argument("--method", default="K=1000", help="a method of results.csv: K=1, K=10, K=100, K=1000, periods-only, 'repeat 10 x K=100'")
ap.add_argument("--no-nap", action="store_true")
a = ap.parse_args()
PLATFORM = Path(__file__).resolve().parent / "tiering" / "dram-dcpmm-core16.toml"
for r in csv.DictReader(open(a.dir / "results.csv")):
    if r["policy"] != "autonuma-tiering" or r["method"] != a.method or r["footprint"] == "small":
        continue
    spec = r["spec"] + (",kswapd_nap_ms=1e9" if a.no_nap else "")
    trace = next((a.dir / "traces").glob(f"{r['workload']}-*.tkt"))
    res = tierkit.run(trace, platform=str(PLATFORM), policy=spec,
                      fast_capacity=f"{int(r['dram_pages']) * 4096 // 1024}K", timing="detailed", progress=False,
                      repeat=int(r["repeat"]), time_scale=float(r["time_scale"]))
    old = float(r["runtime_ns"])
    c = res["stats"]["policy"]["counters"]
    print(f"{r['workload']} {r['footprint']} {a.method}: runtime {old:.0f} -> {res['runtime_ns']:.0f} ns ({100 * (res['runtime_ns'] / old - 1):+.3f} %), "
          f"speedup {float(r['speedup_vs_first_touch']):.3f} -> {float(r['speedup_vs_first_touch']) * old / res['runtime_ns']:.3f}, "
          f"kswapd rechecks {c.get('kswapd_rechecks')}", flush=True)
