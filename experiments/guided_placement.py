#!/usr/bin/env python3
"""Issue 5's study of profile-guided placement (docs/experiments.md, "Guidance by
allocation site"): static guidance against first touch, the three strategies, training
against reference profiles, and per-phase against static arenas.

Setup (000 §5.1, §6): platform hbm-ddr3, fast tier 12.5% of the footprint, detailed timing,
the 000 cache (one 512 KiB, 32-way level). Reference traces are the workloads at size
medium; training traces are size small, profiled through a cache scaled down with the
footprint (16 KiB), so that what is hot in the cache-filtered stream stays comparable.

    experiments/guided_placement.py [--out DIR] [--workloads sites,spmv,...]

Traces are recorded once into DIR/traces (minutes; Valgrind), then every run takes
seconds. Writes DIR/results.csv and DIR/results.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

import tierkit
from tierkit import workloads

PLATFORM = "hbm-ddr3"
FAST = 0.125
REF_CACHE = "L1:512K:32"
TRAIN_CACHE = "L1:16K:16"
STRATEGIES = ("thermos", "hotset", "knapsack")
SKEWED = ("sites", "spmv", "bfs", "btree")
PHASED = "stages"
SLICE = "20M"
PHASE_PLATFORMS = (PLATFORM, "dram-pmem", "hbm-pcm")


def trace(out: Path, name: str, size: str, cache: str, extra: list[str] | None = None, slice_insn: str | None = None) -> Path:
    p = out / "traces" / f"{name}-{size}.tkt"
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        print(f"recording {p.name} ...", file=sys.stderr, flush=True)
        workloads.trace(name, size, out=p, cache=cache, slice=slice_insn, extra_args=extra or [])
    return p


def compare(t: Path, policies: list[str], guide_from: Path | None = None, platform: str = PLATFORM) -> pd.DataFrame:
    return tierkit.compare(t, platform=platform, policies=policies, fast_capacity=FAST, timing="detailed",
                           progress=False, baseline="first-touch", guide_from=guide_from)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("target/experiments/guided"))
    ap.add_argument("--workloads", default=",".join(SKEWED))
    a = ap.parse_args()
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    rows = []

    # -- static guidance, three strategies, reference and training profiles
    for w in [x for x in a.workloads.split(",") if x]:
        ref = trace(out, w, "medium", REF_CACHE)
        train = trace(out, w, "small", TRAIN_CACHE)
        pols = ["first-touch", "cache-mode", "fthp", "all-fast"] + [f"guided:strategy={s}" for s in STRATEGIES]
        df = compare(ref, pols)
        df["profile"] = ["ref" if p.startswith("guided") else "" for p in df["policy"]]
        tr = compare(ref, [f"guided:strategy={s}" for s in STRATEGIES], guide_from=train)
        tr["profile"] = "train"
        both = pd.concat([df, tr[tr["policy"] != "first-touch"]], ignore_index=True)
        ft = float(df.loc[df["policy"] == "first-touch", "runtime_ns"].iloc[0])
        both["vs_first_touch"] = both["runtime_ns"] / ft - 1
        both["workload"] = w
        rows.append(both)
        print(f"{w}: done", file=sys.stderr, flush=True)

    # -- per-phase against static arenas on the phase-changing workload, on 000's platform
    # and on two whose slow tier is slower in latency too (DRAM + PMEM, HBM + PCM)
    st = trace(out, PHASED, "medium", REF_CACHE, slice_insn=SLICE)
    pols = ["first-touch", "fthp", "all-fast", "guided:strategy=thermos",
            "guided:strategy=thermos,mode=per-phase", "guided:strategy=hotset,mode=per-phase"]
    for plat in PHASE_PLATFORMS:
        df = compare(st, pols, platform=plat)
        df["profile"] = ["ref" if p.startswith("guided") else "" for p in df["policy"]]
        ft = float(df.loc[df["policy"] == "first-touch", "runtime_ns"].iloc[0])
        df["vs_first_touch"] = df["runtime_ns"] / ft - 1
        df["workload"] = PHASED
        rows.append(df)

    res = pd.concat(rows, ignore_index=True)
    cols = ["workload", "platform", "policy", "profile", "runtime_ns", "vs_first_touch", "fast_hit_ratio", "migrations", "migrated_bytes"]
    res[cols].to_csv(out / "results.csv", index=False)
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
