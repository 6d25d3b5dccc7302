#!/usr/bin/env python3
"""The study of profile-guided placement (docs/experiments.md, "Guidance by
allocation site"): the tables, from the sweep of experiments/guided/study.yaml (its setup and
grids are there: static guidance against first touch, the three strategies, training against
reference profiles, and per-phase against static arenas).

    tierkit sweep experiments/guided/study.yaml --out DIR     (make experiments-guided)
    experiments/guided_placement.py DIR

The sweep records the traces once into DIR/traces (minutes; Valgrind), then every run takes
seconds. Writes DIR/results.csv and DIR/results.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

PHASED = "stages"
COLS = ["workload", "platform", "policy", "profile", "runtime_ns", "vs_first_touch", "fast_hit_ratio", "migrations",
        "migrated_bytes"]


def table(res: pd.DataFrame) -> pd.DataFrame:
    """A row per run, workload by workload: the reference grid's policies, then the guided
    ones trained on the small input; the per-phase grid last."""
    res = res.assign(workload=res["trace"], vs_first_touch=res["runtime_vs_first-touch"] - 1)
    guided = res["policy"].str.startswith("guided")
    res["profile"] = ""
    res.loc[guided & (res["grid"] != "train"), "profile"] = "ref"
    res.loc[guided & (res["grid"] == "train"), "profile"] = "train"
    parts = []
    for w in dict.fromkeys(res.loc[res["grid"] == "ref", "trace"]):
        parts += [res[(res["grid"] == "ref") & (res["trace"] == w)],
                  res[(res["grid"] == "train") & (res["trace"] == w) & (res["policy"] != "first-touch")]]
    parts.append(res[res["grid"] == "phases"])
    return pd.concat(parts, ignore_index=True)[COLS]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, nargs="?", default=Path("target/experiments/guided"),
                    help="the directory `tierkit sweep experiments/guided/study.yaml --out DIR` wrote")
    a = ap.parse_args()
    out: Path = a.out
    from sweep_results import read  # beside this script

    raw = read(out, "experiments/guided/study.yaml")
    res = table(raw)
    res.to_csv(out / "results.csv", index=False)
    md = ["| workload | platform | policy | profile | runtime (ms) | vs first-touch | fast hits | migrated MiB |",
          "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in res.itertuples():
        md.append(f"| {r.workload} | {r.platform} | {r.policy} | {r.profile} | {r.runtime_ns / 1e6:.1f} | {100 * r.vs_first_touch:+.1f}% | "
                  f"{100 * r.fast_hit_ratio:.1f}% | {r.migrated_bytes / (1 << 20):.1f} |")
    (out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    # averages over the skewed workloads
    g = res[(res["workload"] != PHASED) & res["policy"].str.startswith("guided")]
    avg = g.groupby(["policy", "profile"])["vs_first_touch"].mean().mul(100).round(1)
    print("\nmean change against first-touch (%):\n" + avg.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
