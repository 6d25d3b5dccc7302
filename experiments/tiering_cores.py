#!/usr/bin/env python3
"""Seed 004's setting with many cores (docs/models.md, "Many cores"): the tables of the study
experiments/tiering-cores/study.yaml, from the sweep's store, without simulating anything.

    tierkit sweep experiments/tiering-cores/study.yaml --out DIR     (make experiments-tiering-cores)
    experiments/tiering_cores.py DIR

For each trace (gups's threads on 8 and 16 cores; mixes of 8 and 16 workload-suite programs)
and each DRAM size (1/1.5 and 1/3.5 of the footprint, 004's medium and large): every policy's
runtime against first touch (Linux's default, 004's ADM-default), and for the mixes their
weighted speedup (each program's runtime alone over its runtime in the mix, summed: the mix's
throughput, the analogue of 004's throughput speedup) against first touch's; DCPMM's and
DRAM's bandwidth utilization under first touch; and 004's orderings checked. Writes
DIR/results.md and DIR/results.csv, and prints the checks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
from os_tiering import markdown  # (this directory's)

SIZES = {"0.6666666666666666": "medium (DRAM 1/1.5)", "0.2857142857142857": "large (DRAM 1/3.5)"}
#: 004 §5.3 (Fig. 5), geometric mean speedup over ADM-default on NPB BT, FT, MG, CG (medium, large)
PAPER = {"hyplacer": (3.7, 5.4), "autonuma-tiering": (2.3, 2.8), "memos": (0.72, 0.72)}


def md(t: pd.DataFrame, index: bool = True) -> str:
    t = t.copy()
    if isinstance(t.columns, pd.MultiIndex):
        t.columns = [" ".join(str(x).split(" (")[0] for x in c) for c in t.columns]
    return markdown(t, index)


def short(policy: str) -> str:
    return policy.split(":", 1)[0]


def utilization(rec: dict) -> dict:
    """Each tier's read and write queue utilization over the run."""
    tiers = (rec.get("result") or {}).get("stats", {}).get("timing", {}).get("tiers", [])
    return {t["name"]: (t.get("read_queue_utilization"), t.get("write_queue_utilization")) for t in tiers}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path, help="the sweep's --out directory")
    a = ap.parse_args()
    f = a.dir / "results.parquet"
    if not f.exists():
        print(f"tiering_cores: {f}: no such file (run: tierkit sweep experiments/tiering-cores/study.yaml --out {a.dir})",
              file=sys.stderr)
        return 2
    df = pd.read_parquet(f)
    df = df[df["task"] == "simulate"].copy()
    if df["error"].notna().any():
        bad = df[df["error"].notna()].iloc[0]
        print(f"tiering_cores: {bad['trace']} {bad['policy']}: {bad['error']}", file=sys.stderr)
        return 2
    df["policy"] = df["policy"].map(short)
    df["size"] = df["fast_capacity"].map(SIZES)
    base = df[df["policy"] == "first-touch"].set_index(["trace", "size"])
    df["speedup"] = 1.0 / df["runtime_vs_first-touch"]
    df["ws_vs_first_touch"] = [
        (ws / base.loc[(t, s), "weighted_speedup"]) if pd.notna(ws) else None
        for t, s, ws in zip(df["trace"], df["size"], df["weighted_speedup"])]
    df.to_csv(a.dir / "results.csv", index=False)

    out = ["# Tiering with many cores (seed 004's setting)", ""]
    order = list(dict.fromkeys(df["policy"]))
    for metric, title in (("speedup", "Speedup over first touch: first touch's runtime over the policy's (the run ends "
                                      "with its slowest core)"),
                          ("ws_vs_first_touch", "Mixes: weighted speedup over first touch's (the mix's throughput)")):
        rows = df if metric == "speedup" else df[df["programs"].notna()]
        t = rows.pivot_table(index="policy", columns=["trace", "size"], values=metric, sort=False).reindex(order).dropna(how="all")
        out += [f"## {title}", "", md(t), ""]
    ws = df[df["programs"].notna()].pivot_table(index="policy", columns=["trace", "size"], values="weighted_speedup",
                                                 sort=False).reindex(order)
    out += ["## Mixes: weighted speedup (of 8 or 16)", "", md(ws), ""]

    # the tiers' load under first touch and all-fast (the cells' records)
    util = []
    for _, r in df[df["policy"].isin(["first-touch", "all-fast"])].iterrows():
        recs = list((a.dir / "cells").glob(f"*/{r['key']}.json"))
        u = utilization(json.loads(recs[0].read_text())) if recs else {}
        util.append({"trace": r["trace"], "size": r["size"], "policy": r["policy"],
                     **{f"{n} {k}": v[i] for n, v in u.items() for i, k in enumerate(("read", "write"))}})
    out += ["## Queue utilization over the run", "", md(pd.DataFrame(util), False), ""]

    # 004's findings, checked on every trace and size
    checks = []
    for (t, s), g in df.groupby(["trace", "size"], sort=False):
        sp = g.set_index("policy")["speedup"]
        metric = g.set_index("policy")["ws_vs_first_touch"] if g["programs"].notna().any() else sp
        checks.append((t, s, "hyplacer gains over first touch (by 2% or more)", bool(metric["hyplacer"] >= 1.02)))
        checks.append((t, s, "hyplacer >= autonuma-tiering", bool(metric["hyplacer"] >= metric["autonuma-tiering"])))
        checks.append((t, s, "memos loses to first touch", bool(metric["memos"] < 1.0)))
    out += ["## 004's findings (mixes: by weighted speedup; gups: by runtime)", "",
            "| trace | size | finding | holds |", "| --- | --- | --- | --- |",
            *[f"| {t} | {s} | {c} | {'yes' if ok else 'no'} |" for t, s, c, ok in checks], ""]
    paper = ", ".join(f"{p} {m}x medium, {l}x large" for p, (m, l) in PAPER.items())
    out += [f"004 (Fig. 5, speedup over ADM-default, geometric mean of NPB BT, FT, MG, CG): {paper}.", ""]
    (a.dir / "results.md").write_text("\n".join(out))
    held = sum(ok for *_, ok in checks)
    print(f"{held} of {len(checks)} of 004's findings hold; tables in {a.dir / 'results.md'}")
    for t, s, c, ok in checks:
        print(f"  {'yes' if ok else 'no '}  {t:9} {s:22} {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
