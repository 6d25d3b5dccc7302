#!/usr/bin/env python3
"""Issue 6's study of learned page scheduling (docs/experiments.md, "Cori, Kleio and
Kleoniki"): Cori's period tuning against the insight-less baselines, Kleio's share of the
history-to-oracle gap against the share of pages given models, and Kleoniki's pages per
model.

Setup (003 §3.1): platform dram-pmem (cori-sim's Fast:NearSlow), fast tier 20% of the
footprint, simple timing. Traces: the workloads at size small, recorded through the
``small`` cache preset, regular (backprop, kmeans, lu) and irregular (bfs, btree).

    experiments/learned_scheduling.py [--out DIR] [--workloads backprop,kmeans,...] [--epochs N]

Traces are recorded once into DIR/traces (seconds; Valgrind). Writes DIR/results.json and
DIR/results.md, and a heat map of each trace. About 10 minutes on 2 idle cores.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from tierkit import cori, learned as kleio, report, workloads

PLATFORM = "dram-pmem"
FAST = 0.2
CACHE = "small"
REGULAR = ("backprop", "kmeans", "lu")
IRREGULAR = ("bfs", "btree")
FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2)
ALIGNED = (0.2, 0.5, 1.0)


def trace(out: Path, name: str) -> Path:
    p = out / "traces" / f"{name}-small.tkt"
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        print(f"recording {p.name} ...", file=sys.stderr, flush=True)
        workloads.trace(name, "small", out=p, cache=CACHE)
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("target/experiments/learned"))
    ap.add_argument("--workloads", default=",".join(REGULAR + IRREGULAR))
    ap.add_argument("--epochs", type=int, default=60)
    a = ap.parse_args()
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"platform": PLATFORM, "fast_capacity": FAST, "cache": CACHE, "workloads": {}}
    md = ["# Learned page scheduling (issue 6)", "",
          f"Platform {PLATFORM}, fast tier {FAST:.0%} of the footprint, simple timing, traces at size small "
          f"through the `{CACHE}` cache.", ""]
    tune_rows = []
    kleio_rows = []
    kleoniki_rows = []
    aligned_rows = []
    for w in a.workloads.split(","):
        t = trace(out, w)
        kind = "regular" if w in REGULAR else "irregular"
        entry: dict = {"kind": kind}
        # 1. Cori on both schedulers
        for sched in ("history", "oracle"):
            t0 = time.perf_counter()
            r = cori.tune(t, sched, PLATFORM, FAST, progress=False)
            r["seconds"] = time.perf_counter() - t0
            entry[f"tune_{sched}"] = {k: v for k, v in r.items() if k not in ("sweep",)}
            m = r["methods"]
            tune_rows.append((w, kind, sched, r["dominant_reuse"], len(r["trials"]), r["chosen_period"], r["best_period"],
                              100 * m["cori"]["slowdown_vs_best"],
                              *(m[b]["trials_to_best"] for b in ("cori", "base-left", "base-right", "base-random")),
                              *(100 * m[b]["slowdown_vs_best"] for b in ("base-left", "base-right", "base-random"))))
            print(f"{w} {sched}: Cori {len(r['trials'])} trials, slowdown {100 * m['cori']['slowdown_vs_best']:.1f}%",
                  file=sys.stderr, flush=True)
        # 2. Kleio at a fine period
        period = kleio.default_period(t)
        s = kleio.study(t, "kleio", FRACTIONS, period, PLATFORM, FAST, epochs=a.epochs, progress=False)
        entry["kleio"] = s
        for x in s["rows"]:
            kleio_rows.append((w, kind, period, s["periods"], 100 * x["pages_fraction"], x["pages_selected"], x["models"],
                               x["train_seconds"], x["accuracy"], x["history_accuracy"], x["accessed_recall"],
                               x["history_accessed_recall"], x["fallback_pages"], x["gap_bridged_no_fallback_pct"],
                               x["gap_bridged_pct"]))
        print(f"{w} kleio: " + ", ".join(f"{x['pages_fraction']:g}: {x['gap_bridged_pct']}" for x in s["rows"]),
              file=sys.stderr, flush=True)
        # 3. Kleoniki at its default period: Cori's for history, shortened when it leaves too
        # few periods for K = 8 (issue 14)
        cp, note = kleio.learned_period(int(entry["tune_history"]["accesses"]), entry["tune_history"]["chosen_period"])
        k = kleio.study(t, "kleoniki", (0.2, 0.5), cp, PLATFORM, FAST, epochs=a.epochs, progress=False)
        k["period_chosen"] = note
        entry["kleoniki"] = k
        for x in k["rows"]:
            kleoniki_rows.append((w, kind, cp, k["periods"], 100 * x["pages_fraction"], x["pages_selected"], x["models"],
                                  x["pages_per_model"], x["distinct_patterns"], x["gap_bridged_pct"]))
        # 4. both at the reuse-aligned period: a page's dominant reuse spans half the models'
        # input window (at most 2,000 periods over the trace)
        acc = int(entry["tune_history"]["accesses"])
        dom = int(entry["tune_history"]["dominant_reuse"])
        ap = max(dom * 2 // 8, -(-acc // 2000), 1)
        entry["aligned_period"] = ap
        for pol in ("kleio", "kleoniki"):
            al = kleio.study(t, pol, ALIGNED, ap, PLATFORM, FAST, epochs=a.epochs, progress=False)
            entry[f"{pol}_aligned"] = al
            for x in al["rows"]:
                aligned_rows.append((w, kind, pol, ap, al["periods"], 100 * x["pages_fraction"], x["pages_selected"],
                                     x["models"], x["pages_per_model"], x["train_seconds"], x["gap_bridged_pct"]))
        print(f"{w} aligned {ap}: done", file=sys.stderr, flush=True)
        # Kleio with Kleoniki's model budget at the same period (the same training overheads)
        budget = max(1, k["rows"][0]["models"])
        frac = min(1.0, budget / k["pages"])
        kb = kleio.study(t, "kleio", (frac,), cp, PLATFORM, FAST, epochs=a.epochs, progress=False)
        entry["kleio_same_budget"] = kb
        report.heatmap(t, period, out / f"heatmap-{w}.png", force=True)
        res["workloads"][w] = entry
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
           "Trials: Cori's, by its stopping rule; trials to best: in each method's own order, to come within 3% of the "
           "exhaustive sweep's best. Baseline slowdowns are after Cori's number of trials.", ""]
    md += table(["workload", "kind", "scheduler", "dominant reuse", "Cori trials", "chosen", "best", "Cori slowdown %",
                 "to best: Cori", "base-left", "base-right", "base-random", "left slowdown %", "right %", "random %"],
                tune_rows, [s_, s_, s_, i_, i_, i_, i_, p1, i_, i_, i_, i_, p1, p1, p1])
    reg = [r for r in tune_rows if r[1] == "regular"]
    md += ["", f"Regular workloads: Cori within 3% of the best in at most 5 trials in "
           f"{sum(1 for r in reg if r[7] <= 3 and r[4] <= 5)} of {len(reg)} runs."]
    means = {}
    for j, name in zip((4, 9, 10, 11), ("Cori (trials run)", "base-left", "base-right", "base-random")):
        vals = [r[j] if r[j] is not None else 50 for r in tune_rows]
        means[name] = float(np.mean(vals))
    md += ["Mean trials (a baseline that never comes within 3% counts as its whole grid, 50): " +
           ", ".join(f"{k} {v:.1f}" for k, v in means.items()) + ".", ""]
    md += ["## Kleio: gap bridged against pages with models", ""]
    md += ["Models train on the first half of the periods; scores and predictions are on the held-out second "
           "half (the first half follows history). Accessed recall: share of the periods in which a page is "
           "accessed that are predicted accessed. Fallbacks: pages whose model loses to history on the held-out "
           "periods and follow history.", ""]
    md += table(["workload", "kind", "period", "periods", "pages %", "pages with models", "models", "train s",
                 "accuracy", "history accuracy", "accessed recall", "history recall", "fallbacks",
                 "gap bridged % (no fallback)", "gap bridged %"],
                kleio_rows, [s_, s_, i_, i_, p1, i_, i_, lambda v: f"{v:.2f}", pc, pc, pc, pc, i_, p1, p1])
    md += ["", "## Kleoniki: pages per model at its default period", ""]
    md += table(["workload", "kind", "period", "periods", "pages %", "pages managed", "models", "pages/model",
                 "distinct patterns", "gap bridged %"],
                kleoniki_rows, [s_, s_, i_, i_, p1, i_, i_, lambda v: "-" if v is None else f"{v:.1f}", i_, p1])
    md += ["", "## Kleio and Kleoniki at the reuse-aligned period", "",
           "Period: a quarter of the dominant reuse (K = 8 periods of input hold two reuses), at most 2,000 periods.", ""]
    md += table(["workload", "kind", "policy", "period", "periods", "pages %", "pages with models", "models",
                 "pages/model", "train s", "gap bridged %"],
                aligned_rows, [s_, s_, s_, i_, i_, p1, i_, i_, lambda v: "-" if v is None else f"{v:.1f}",
                               lambda v: f"{v:.2f}", p1])
    md += ["", "Kleio with Kleoniki's model budget (first row's models) at Cori's period:", ""]
    for w, e in res["workloads"].items():
        kb = e["kleio_same_budget"]["rows"][0]
        kn = e["kleoniki"]["rows"][0]
        md.append(f"- {w}: Kleoniki {kn['pages_selected']:,} pages with {kn['models']:,} models, gap bridged "
                  f"{p1(kn['gap_bridged_pct'])}%; Kleio {kb['pages_selected']:,} pages with {kb['models']:,} models, "
                  f"gap bridged {p1(kb['gap_bridged_pct'])}%")
    res["mean_trials"] = means
    (out / "results.json").write_text(json.dumps(res, indent=1, default=float))
    (out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
