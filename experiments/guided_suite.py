#!/usr/bin/env python3
"""000's and 002's studies of allocation-site guidance on the suite of real programs
(docs/experiments.md, "Guidance on real programs"): the tables, from the sweep of
experiments/guided-suite/study.yaml.

    make traces                                                   (the suite, about 7 minutes)
    tierkit sweep experiments/guided-suite/study.yaml --out DIR    (make experiments-guided-suite)
    experiments/guided_suite.py DIR

Every figure is a share of all-fast's gain: (first-touch - policy) / (first-touch - all-fast),
in runtime. "best" columns take, per program, the guidance capacity (3.125-50%) that did best
on the very run they score: a running system could not choose it so, and the columns say so
(`future_knowledge` in results.json). Writes DIR/suite.csv, DIR/suite.md and DIR/results.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

STRATEGIES = ("thermos", "hotset", "knapsack")
CAPS = (0.03125, 0.0625, 0.125, 0.25, 0.5)
DEPTHS = (0, 1, 2, 4, 8)


def params(policy: str) -> dict:
    """`guided:strategy=thermos,capacity=0.125` -> {'name': 'guided', 'strategy': ..., ...}."""
    name, _, rest = policy.partition(":")
    out = {"name": name}
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def tables(raw: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    res = raw.assign(program=raw["trace"].str.replace("-ref", "", regex=False))
    p = res["policy"].map(params)
    res = res.assign(strategy=p.map(lambda d: d.get("strategy", "")), gcap=p.map(lambda d: float(d.get("capacity", "nan"))),
                     context=p.map(lambda d: d.get("context", "")), mode=p.map(lambda d: d.get("mode", "static")))
    rows, detail = [], {}
    for prog in dict.fromkeys(res["program"]):
        r = res[res["program"] == prog]

        def rt(grid: str, policy: str = "", platform: str = "hbm-ddr3", **kw) -> float:
            m = (r["grid"] == grid) & (r["platform"] == platform)
            if policy:
                m &= r["policy"] == policy
            for k, v in kw.items():
                m &= r[k] == v
            sel = r[m]
            if len(sel) != 1:
                raise SystemExit(f"{prog}: {len(sel)} cells for {grid} {policy} {kw} (is the sweep complete?)")
            return float(sel["runtime_ns"].iloc[0])

        row: dict = {"program": prog}
        for plat, grid, tag, cap in (("hbm-ddr3", "ref", "", 0.125), ("dram-pmem", "dram-pmem", "pmem ", 0.125),
                                     ("hbm-ddr3", "fast50", "fast50 ", 0.5)):
            ft, af = rt(grid, "first-touch", plat), rt(grid, "all-fast", plat)
            row[f"{tag}all-fast gain"] = 1 - af / ft
            gap = ft - af

            def share(x: float) -> float:
                return (ft - x) / gap if gap > 0 else float("nan")

            if grid != "ref":
                for s in STRATEGIES:
                    x = rt(grid, platform=plat, strategy=s, gcap=cap)
                    row[f"{tag}{s}"] = share(x)
                    row[f"{tag}{s} vs first-touch"] = 1 - x / ft
                continue
            for s in STRATEGIES:
                row[f"{s} vs first-touch"] = 1 - rt("ref", strategy=s, gcap=0.125) / ft
                # runtimes at the oracle-best capacities, for 000's best hotset against best knapsack
                row[f"{s} best runtime (oracle)"] = min(rt("ref", strategy=s, gcap=c) for c in CAPS)
                row[f"{s} train best runtime (oracle)"] = min(rt("train", strategy=s, gcap=c) for c in CAPS)
            for s in STRATEGIES:
                row[s] = share(rt("ref", strategy=s, gcap=0.125))
                by_cap = {c: share(rt("ref", strategy=s, gcap=c)) for c in CAPS}
                best = max(by_cap, key=lambda c: by_cap[c])
                row[f"{s} best (oracle)"] = by_cap[best]
                row[f"{s} best cap"] = best
                row[f"{s} train"] = share(rt("train", strategy=s, gcap=0.125))
                tr = {c: share(rt("train", strategy=s, gcap=c)) for c in CAPS}
                row[f"{s} train best (oracle)"] = max(tr.values())
                detail.setdefault(prog, {})[s] = {"ref": by_cap, "train": tr}
            for d in DEPTHS:
                row[f"thermos ctx{d}"] = share(rt("context", strategy="thermos", context=str(d)))
                row[f"hotset ctx{d}"] = share(rt("context", strategy="hotset", context=str(d)))
            for s in ("thermos", "hotset"):
                row[f"{s} per-phase"] = share(rt("phases", strategy=s, mode="per-phase"))
            m = (r["grid"] == "ref") & (r["platform"] == "hbm-ddr3")
            row["pages first-touch"] = int(r[m & (r["policy"] == "first-touch")]["pages"].iloc[0])
            g = r[m & (r["strategy"] != "")]
            row["pages guided (min)"] = int(g["pages"].min())
            row["pages guided (max)"] = int(g["pages"].max())
        rows.append(row)
    return pd.DataFrame(rows), detail


def pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f}%"


def markdown(t: pd.DataFrame) -> str:
    out = ["### Shares of all-fast's gain (hbm-ddr3, fast tier 12.5%; guidance capacity 12.5% unless said)", "",
           "| program | all-fast gain | thermos | hotset | knapsack | thermos best (oracle) | hotset best (oracle, cap) | "
           "knapsack best (oracle, cap) | thermos train | hotset train | knapsack train | pages guided / first-touch |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for _, r in t.iterrows():
        out.append(f"| {r['program']} | {pct(r['all-fast gain'])} | {pct(r['thermos'])} | {pct(r['hotset'])} | {pct(r['knapsack'])} | "
                   f"{pct(r['thermos best (oracle)'])} | {pct(r['hotset best (oracle)'])} ({r['hotset best cap']:g}) | "
                   f"{pct(r['knapsack best (oracle)'])} ({r['knapsack best cap']:g}) | {pct(r['thermos train'])} | "
                   f"{pct(r['hotset train'])} | {pct(r['knapsack train'])} | "
                   f"{r['pages guided (min)']:,}–{r['pages guided (max)']:,} / {r['pages first-touch']:,} |")
    out += ["", "### Call-path depth and per-phase arenas (shares of all-fast's gain)", "",
            "| program | " + " | ".join(f"thermos depth {d}" for d in DEPTHS) + " | "
            + " | ".join(f"hotset depth {d}" for d in DEPTHS) + " | thermos per-phase | hotset per-phase |",
            "| --- |" + " --- |" * (2 * len(DEPTHS) + 2)]
    for _, r in t.iterrows():
        out.append(f"| {r['program']} | " + " | ".join(pct(r[f"thermos ctx{d}"]) for d in DEPTHS) + " | "
                   + " | ".join(pct(r[f"hotset ctx{d}"]) for d in DEPTHS)
                   + f" | {pct(r['thermos per-phase'])} | {pct(r['hotset per-phase'])} |")
    for tag, title in (("pmem ", "dram-pmem (fast tier 12.5%, guidance 12.5%)"),
                       ("fast50 ", "hbm-ddr3 with the fast tier at 50% (guidance 50%)")):
        out += ["", f"### {title}: shares of all-fast's gain, and runtime gained over first touch", "",
                "| program | all-fast gain | thermos | hotset | knapsack | thermos vs first-touch |",
                "| --- | --- | --- | --- | --- | --- |"]
        for _, r in t.iterrows():
            out.append(f"| {r['program']} | {pct(r[tag + 'all-fast gain'])} | {pct(r[tag + 'thermos'])} | {pct(r[tag + 'hotset'])} | "
                       f"{pct(r[tag + 'knapsack'])} | {pct(r[tag + 'thermos vs first-touch'])} |")
    out += ["", "### Means over the programs (runtime)", ""]
    for what, a, b in (("best hotset against best knapsack (oracle capacities), ref profile", "hotset best runtime (oracle)",
                        "knapsack best runtime (oracle)"),
                       ("best hotset against best knapsack (oracle capacities), train profile", "hotset train best runtime (oracle)",
                        "knapsack train best runtime (oracle)")):
        out.append(f"- {what}: {pct(float((t[b] / t[a] - 1).mean()))} faster (arithmetic mean of the runtime ratios less one)")
    for tag, cap in (("", "12.5%"), ("fast50 ", "50%")):
        out.append(f"- thermos over first touch, fast tier {cap}: {pct(float(t[tag + 'thermos vs first-touch'].mean()))}; "
                   f"all-fast over first touch: {pct(float(t[tag + 'all-fast gain'].mean()))}")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, nargs="?", default=Path("target/experiments/guided-suite"),
                    help="the directory `tierkit sweep experiments/guided-suite/study.yaml --out DIR` wrote")
    a = ap.parse_args()
    out: Path = a.out
    from sweep_results import read  # beside this script

    raw = read(out, "experiments/guided-suite/study.yaml")
    t, detail = tables(raw)
    t.to_csv(out / "suite.csv", index=False)
    md = markdown(t)
    (out / "suite.md").write_text(md)
    summary = {"future_knowledge": ["* best (oracle)", "* best cap"],
               "note": "best capacities are chosen on the run they score",
               "programs": t.to_dict(orient="records"), "by_capacity": detail}
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
