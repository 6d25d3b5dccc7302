#!/usr/bin/env python3
"""The study of learned page scheduling (docs/experiments.md, "Cori, Kleio and
Kleoniki"): the tables and heat maps, from the sweep of experiments/learned/study.yaml (its
setup and grids are there: Cori's period tuning against the insight-less baselines, Kleio's
share of the history-to-oracle gap against the share of pages given models, Kleoniki's pages
per model, both at the reuse-aligned period).

    tierkit sweep experiments/learned/study.yaml --out DIR     (make experiments-learned)
    experiments/learned_scheduling.py DIR

The one step that needs the first sweep's results: Kleio with Kleoniki's model budget at
Kleoniki's period, a study file written as DIR/budget.yaml and swept into DIR/budget. Writes
DIR/results.json and DIR/results.md, and a heat map of each trace. About 10 minutes on 2 idle
cores.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import tierkit
from tierkit import report

REGULAR = ("backprop", "kmeans", "lu")
STUDY = Path(__file__).resolve().parent / "learned" / "study.yaml"


def records(out: Path) -> tuple[pd.DataFrame, dict]:
    """The sweep's table and each cell's record by key."""
    res = pd.read_parquet(out / "results.parquet")
    bad = res[res["error"].notna()]
    if len(bad):
        r = bad.iloc[0]
        raise SystemExit(f"{out}: a cell failed: {r['trace']} {r['policy']}: {r['error']} (run the sweep again)")
    recs = {}
    with open(out / "results.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            recs[rec["key"]] = rec
    return res, recs


def budget_study(out: Path, entries: dict, recs: dict, res: pd.DataFrame) -> Path:
    """DIR/budget.yaml: Kleio at Kleoniki's period with Kleoniki's model budget (its first
    row's models), one grid per trace."""
    import yaml

    first = res.drop_duplicates("trace").set_index("trace")
    traces, grids = [], []
    for w, e in entries.items():
        k = e["kleoniki"]
        budget = max(1, k["rows"][0]["models"])
        frac = min(1.0, budget / k["pages"])
        traces.append({"file": str(Path(recs[first.loc[w, "key"]]["trace_path"]).resolve()), "name": w})
        grids.append({"name": w, "traces": [w], "kleio": {"pages": [frac], "period": int(k["period"]), "epochs": e["epochs"]}})
    st = first.iloc[0]
    doc = {"name": "learned-budget", "traces": traces, "platforms": [st["platform"]], "capacities": [float(st["fast_capacity"])],
           "timing": [st["timing"]], "baseline": None, "grids": grids}
    p = out / "budget.yaml"
    p.write_text("# written by experiments/learned_scheduling.py from the sweep of experiments/learned/study.yaml\n"
                 + yaml.safe_dump(doc, sort_keys=False))
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, nargs="?", default=Path("target/experiments/learned"),
                    help="the directory `tierkit sweep experiments/learned/study.yaml --out DIR` wrote")
    a = ap.parse_args()
    out: Path = a.out
    if not (out / "results.parquet").exists():
        print(f"{out}: no results.parquet: run `tierkit sweep {STUDY.relative_to(Path.cwd()) if STUDY.is_relative_to(Path.cwd()) else STUDY} "
              f"--out {out}` first", file=sys.stderr)
        return 2
    res_df, recs = records(out)
    first = res_df.iloc[0]
    PLATFORM, FAST, CACHE = first["platform"], float(first["fast_capacity"]), "small"

    def record(grid: str, w: str, task: str) -> dict:
        keys = res_df.loc[(res_df["grid"] == grid) & (res_df["trace"] == w) & (res_df["task"] == task), "key"].unique()
        if len(keys) != 1:
            raise SystemExit(f"{out}: {len(keys)} {task} cells in grid {grid} for {w}")
        return recs[keys[0]]

    def result(grid: str, w: str, task: str) -> dict:
        return record(grid, w, task)["result"]

    def tune(w: str, sched: str) -> dict:
        k = res_df.loc[(res_df["grid"] == "cori") & (res_df["trace"] == w)
                       & (res_df["policy"] == f"tune:scheduler={sched}"), "key"].iloc[0]
        return recs[k]

    res: dict = {"platform": PLATFORM, "fast_capacity": FAST, "cache": CACHE, "workloads": {}}
    md = ["# Learned page scheduling (seed 003)", "",
          f"Platform {PLATFORM}, fast tier {FAST:.0%} of the footprint, simple timing, traces at size small "
          f"through the `{CACHE}` cache.", ""]
    tune_rows = []
    kleio_rows = []
    kleoniki_rows = []
    aligned_rows = []
    for w in dict.fromkeys(res_df["trace"]):
        kind = "regular" if w in REGULAR else "irregular"
        entry: dict = {"kind": kind}
        # 1. Cori on both schedulers
        for sched in ("history", "oracle"):
            rec = tune(w, sched)
            r = dict(rec["result"])
            r["seconds"] = rec["seconds"]
            entry[f"tune_{sched}"] = {k: v for k, v in r.items() if k not in ("sweep",)}
            m = r["methods"]
            tune_rows.append((w, kind, sched, r["dominant_reuse"], len(r["trials"]), r["chosen_period"], r["best_period"],
                              100 * m["cori"]["slowdown_at_cori_trials"],
                              *(m[b]["trials_to_best"] for b in ("cori", "base-left", "base-right", "base-random")),
                              *(100 * m[b]["slowdown_at_cori_trials_to_best"] for b in ("base-left", "base-right", "base-random")),
                              *(100 * m[b]["slowdown_at_cori_trials"] for b in ("base-left", "base-right", "base-random"))))
        # 2. Kleio at a fine period
        s = result("kleio", w, "kleio")
        period = s["period"]
        entry["kleio"] = s
        for x in s["rows"]:
            kleio_rows.append((w, kind, period, s["periods"], 100 * x["pages_fraction"], x["models"],
                               x["accessed_recall"], x["history_accessed_recall"],
                               x["predicted_periods_used"] / max(1, x["predicted_periods"]),
                               x["inference_ns_per_boundary"] / 1e3, x["gap_bridged_pct"],
                               x["gap_bridged_free_inference_pct"], x["gap_bridged_no_fallback_pct"],
                               x["gap_bridged_future_fallback_pct"], x["gap_bridged_future_hybrid_pct"],
                               x["gap_bridged_idle_no_fallback_pct"]))
        # 3. Kleoniki at its default period: Cori's for history, shortened when it leaves too
        # few periods for K = 8 (docs/learned.md)
        k = result("kleoniki", w, "kleoniki")
        cp = k["period"]
        entry["kleoniki"] = k
        entry["epochs"] = int(dict(map(tuple, record("kleoniki", w, "kleoniki")["config"]["params"])).get("epochs", 60))
        for x in k["rows"]:
            kleoniki_rows.append((w, kind, cp, k["periods"], 100 * x["pages_fraction"], x["pages_selected"], x["models"],
                                  x["pages_per_model"], x["distinct_patterns"], x["gap_bridged_pct"],
                                  x["gap_bridged_free_inference_pct"], x["gap_bridged_no_fallback_pct"],
                                  x["gap_bridged_idle_no_fallback_pct"]))
        # 4. both at the reuse-aligned period
        for pol in ("kleio", "kleoniki"):
            al = result("aligned", w, pol)
            entry["aligned_period"] = ap = al["period"]
            entry[f"{pol}_aligned"] = al
            for x in al["rows"]:
                aligned_rows.append((w, kind, pol, ap, al["periods"], 100 * x["pages_fraction"], x["pages_selected"],
                                     x["models"], x["pages_per_model"], x["train_seconds"], x["gap_bridged_pct"],
                                     x["gap_bridged_free_inference_pct"], x["gap_bridged_no_fallback_pct"],
                                     x["gap_bridged_idle_no_fallback_pct"]))
        res["workloads"][w] = entry
    # Kleio with Kleoniki's model budget at the same period (the same training overheads)
    bdir = out / "budget"
    budget = tierkit.sweep(budget_study(out, res["workloads"], recs, res_df), bdir, report=False)
    _, brecs = records(bdir)
    for w, e in res["workloads"].items():
        e["kleio_same_budget"] = brecs[budget.loc[budget["trace"] == w, "key"].iloc[0]]["result"]
        t = recs[res_df.loc[res_df["trace"] == w, "key"].iloc[0]]["trace_path"]
        report.heatmap(t, e["kleio"]["period"], out / f"heatmap-{w}.png", force=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, default=float))

    def table(head, rows, fmt):
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            lines.append("| " + " | ".join(f(v) for f, v in zip(fmt, r)) + " |")
        return lines

    s_ = str
    i_ = lambda v: "never" if v is None else f"{v:,}"
    p1 = lambda v: "-" if v is None else f"{v:.1f}"
    pc = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    md += ["## Cori: period tuning", "",
           "Trials: Cori's, by its stopping rule; trials to best: in each method's own order run to the end, to come "
           "within 3% of the exhaustive sweep's best. Baseline slowdowns after Cori's trials to best (003 Fig. 3.6's "
           "budget), then after the trials Cori ran (experiments/cori_baselines.py has more traces).", ""]
    md += table(["workload", "kind", "scheduler", "dominant reuse", "Cori trials", "chosen", "best", "Cori slowdown %",
                 "to best: Cori", "base-left", "base-right", "base-random", "at Cori's to best: left %", "right %",
                 "random %", "at Cori's trials: left %", "right %", "random %"],
                tune_rows, [s_, s_, s_, i_, i_, i_, i_, p1, i_, i_, i_, i_, p1, p1, p1, p1, p1, p1])
    reg = [r for r in tune_rows if r[1] == "regular"]
    md += ["", f"Regular workloads: Cori within 3% of the best in at most 5 trials in "
           f"{sum(1 for r in reg if r[7] <= 3 and r[4] <= 5)} of {len(reg)} runs."]
    means = {}
    for j, name in zip((4, 8, 9, 10, 11), ("Cori (trials run)", "Cori (to best)", "base-left", "base-right",
                                           "base-random")):
        vals = [r[j] if r[j] is not None else 50 for r in tune_rows]
        means[name] = float(np.mean(vals))
    md += ["Mean trials (trials to best unless said; a method that never comes within 3% counts as 50): " +
           ", ".join(f"{k} {v:.1f}" for k, v in means.items()) + ".", ""]
    md += ["## Kleio: gap bridged against pages with models", ""]
    md += ["Models train on the first half of the periods; scores and predictions are on the held-out second "
           "half (the first half follows history). Accessed recall: share of the periods in which a page is "
           "accessed that are predicted accessed. Used: the scored page-periods whose prediction the online "
           "fallback used. Gap bridged (history 0%, oracle 100%): Kleio is the default (online fallback, measured "
           "inference charged); the other columns leave inference out; future fallback and hybrid use future "
           "knowledge; idle, no fallback is 'no access' always without a fallback (the no-fallback column's "
           "control).", ""]
    md += table(["workload", "kind", "period", "periods", "pages %", "models", "accessed recall", "history recall",
                 "used", "infer µs / boundary", "Kleio %", "no inference %", "no fallback %", "future fallback %",
                 "hybrid %", "idle, no fallback %"],
                kleio_rows, [s_, s_, i_, i_, p1, i_, pc, pc, pc, lambda v: f"{v:,.0f}", p1, p1, p1, p1, p1, p1])
    md += ["", "## Kleoniki: pages per model at its default period", ""]
    md += table(["workload", "kind", "period", "periods", "pages %", "pages managed", "models", "pages/model",
                 "distinct patterns", "Kleoniki %", "no inference %", "no fallback %", "idle, no fallback %"],
                kleoniki_rows, [s_, s_, i_, i_, p1, i_, i_, lambda v: "-" if v is None else f"{v:.1f}", i_, p1, p1, p1,
                                p1])
    md += ["", "## Kleio and Kleoniki at the reuse-aligned period", "",
           "Period: a quarter of the dominant reuse (K = 8 periods of input hold two reuses), at most 2,000 periods.", ""]
    md += table(["workload", "kind", "policy", "period", "periods", "pages %", "pages with models", "models",
                 "pages/model", "train s", "gap bridged %", "no inference %", "no fallback %", "idle, no fallback %"],
                aligned_rows, [s_, s_, s_, i_, i_, p1, i_, i_, lambda v: "-" if v is None else f"{v:.1f}",
                               lambda v: f"{v:.2f}", p1, p1, p1, p1])
    md += ["", "Kleio with Kleoniki's model budget (first row's models) at Cori's period:", ""]
    for w, e in res["workloads"].items():
        kb = e["kleio_same_budget"]["rows"][0]
        kn = e["kleoniki"]["rows"][0]
        md.append(f"- {w}: Kleoniki {kn['pages_selected']:,} pages with {kn['models']:,} models, gap bridged "
                  f"{p1(kn['gap_bridged_pct'])}% ({p1(kn['gap_bridged_free_inference_pct'])}% without inference); "
                  f"Kleio {kb['pages_selected']:,} pages with {kb['models']:,} models, gap bridged "
                  f"{p1(kb['gap_bridged_pct'])}% ({p1(kb['gap_bridged_free_inference_pct'])}% without inference)")
    res["mean_trials"] = means
    (out / "results.json").write_text(json.dumps(res, indent=1, default=float))
    (out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
