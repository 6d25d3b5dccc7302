#!/usr/bin/env python3
"""Cori against the insight-less baselines, counted as seed 003 counts them (docs/experiments.md,
"Cori against the baselines"): per trace and scheduler (history, oracle), Cori's trials run (its
stopping rule) and trials to best (its candidates run to the end, to come within 3% of the
exhaustive sweep's best), its slowdown, and base-left, base-right and base-random after 003's
budget (Cori's trials to best, Fig. 3.6) and after the trials Cori ran, with each baseline's
trials to best (Fig. 3.7). The stopping rule's patience is replayed on the same sweep.

    experiments/cori_baselines.py [--traces 403.gcc,kmeans,...] [--out DIR]

Traces: the three SPEC traces of ../shared/traces, the learned workloads of
experiments/learned/study.yaml (size small through the `small` cache, recorded into
DIR/traces when missing), and two real programs of data/traces/real. Setup as 003 §3.1:
dram-pmem, fast tier 20% of the footprint, simple timing, `tierkit tune`'s defaults (50-period
grid, patience 1, within 3%). Writes DIR/results.json and DIR/results.md. About 4 minutes on
2 cores.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np

from tierkit import cori, workloads
from tierkit.progress import Bar

ROOT = Path(__file__).resolve().parent.parent
SPEC = {"403.gcc": "403.gcc.gz", "444.namd": "444.namd.gz", "447.dealII": "447.dealII.gz"}
LEARNED = ("backprop", "kmeans", "lu", "bfs", "btree")
REAL = {"sqlite3": "sqlite3-ref.tkt", "dot": "dot-ref.tkt"}
NAMES = (*SPEC, *LEARNED, *REAL)
BASELINES = ("base-left", "base-right", "base-random")
SCHEDULERS = ("history", "oracle")
PATIENCE = (1, 2, 3)


def trace_path(name: str, shared: Path, out: Path) -> Path:
    if name in SPEC:
        return shared / SPEC[name]
    if name in REAL:
        return ROOT / "data" / "traces" / "real" / REAL[name]
    p = out / "traces" / f"{name}.tkt"
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        workloads.trace(name, "small", p, cache="small", progress=False)
    return p


def kind(name: str) -> str:
    return "SPEC" if name in SPEC else "learned" if name in LEARNED else "real"


def summarize(name: str, sched: str, r: dict) -> dict[str, Any]:
    """The row of one tune result, with the stopping rule replayed at other patiences."""
    rt = {s["period"]: s["runtime_ns"] for s in r["sweep"]}
    best = r["best_runtime_ns"]
    cand_rt = [rt[p] for p in r["candidates"]]
    m = r["methods"]
    row: dict[str, Any] = {
        "trace": name, "kind": kind(name), "scheduler": sched, "accesses": r["accesses"],
        "dominant_reuse": r["dominant_reuse"], "kept_buckets": r["reuse"]["kept_buckets"],
        "candidates": len(r["candidates"]), "grid": len(r["grid"]),
        "cori_trials": r["budget_cori_trials"], "cori_to_best": m["cori"]["trials_to_best"],
        "budget_to_best": r["budget_cori_trials_to_best"],
        "cori_period": r["chosen_period"], "best_period": r["best_period"],
        "cori_slowdown": m["cori"]["slowdown_at_cori_trials"],
    }
    for b in BASELINES:
        row[f"{b}_at_to_best"] = m[b]["slowdown_at_cori_trials_to_best"]
        row[f"{b}_at_trials"] = m[b]["slowdown_at_cori_trials"]
        row[f"{b}_to_best"] = m[b]["trials_to_best"]
    for pat in PATIENCE:
        n = cori.tuner_trials(cand_rt, pat)
        row[f"patience{pat}_trials"] = n
        row[f"patience{pat}_slowdown"] = min(cand_rt[:n]) / best - 1
    return row


def _never(v: Optional[int], cap: int) -> int:
    return cap if v is None else v


def markdown(rows: list[dict]) -> str:
    i_ = lambda v: "never" if v is None else f"{v:,}"  # noqa: E731
    pc = lambda v: f"{100 * v:.1f}%"  # noqa: E731
    head = ["trace", "sched.", "Cori trials run", "Cori to best", "Cori slowdown", "left / right / random at Cori's to best",
            "left / right / random at Cori's trials run", "to best: left / right / random"]
    md = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        md.append("| " + " | ".join([
            r["trace"], r["scheduler"], str(r["cori_trials"]),
            i_(r["cori_to_best"]) + ("" if r["cori_to_best"] is not None else f" (of {r['candidates']})"),
            pc(r["cori_slowdown"]),
            " / ".join(pc(r[f"{b}_at_to_best"]) for b in BASELINES),
            " / ".join(pc(r[f"{b}_at_trials"]) for b in BASELINES),
            " / ".join(i_(r[f"{b}_to_best"]) for b in BASELINES)]) + " |")
    md += ["", "Means over the rows (a method that never comes within 3% counts as its whole list: "
           "Cori's candidates, the 50-period grid):", ""]
    for label, sel in (("all", rows), *((k, [r for r in rows if r["kind"] == k]) for k in ("SPEC", "learned", "real")),
                       *((s, [r for r in rows if r["scheduler"] == s]) for s in SCHEDULERS)):
        if not sel:
            continue
        cori_tb = np.mean([_never(r["cori_to_best"], r["candidates"]) for r in sel])
        tb = {b: np.mean([_never(r[f"{b}_to_best"], r["grid"]) for r in sel]) for b in BASELINES}
        sd = {b: np.mean([r[f"{b}_at_to_best"] for r in sel]) for b in BASELINES}
        sr = {b: np.mean([r[f"{b}_at_trials"] for r in sel]) for b in BASELINES}
        md.append(f"- {label} ({len(sel)} rows): trials run {np.mean([r['cori_trials'] for r in sel]):.1f}, "
                  f"to best Cori {cori_tb:.1f}, " + ", ".join(f"{b} {v:.1f}" for b, v in tb.items()) +
                  f"; slowdown Cori {100 * np.mean([r['cori_slowdown'] for r in sel]):.1f}%, at Cori's to best " +
                  ", ".join(f"{b} {100 * v:.1f}%" for b, v in sd.items()) + "; at Cori's trials run " +
                  ", ".join(f"{b} {100 * v:.1f}%" for b, v in sr.items()))
    loses = [r for r in rows if any(_never(r[f"{b}_to_best"], r["grid"]) < _never(r["cori_to_best"], r["candidates"])
                                    for b in BASELINES)]
    md += ["", f"Some baseline comes within 3% in fewer trials than Cori in {len(loses)} of {len(rows)} rows: " +
           ", ".join(f"{r['trace']}/{r['scheduler']}" for r in loses) + ".", ""]
    for b in BASELINES:
        tb = [(_never(r["cori_to_best"], r["candidates"]), _never(r[f"{b}_to_best"], r["grid"])) for r in rows]
        at_run = [(r["cori_slowdown"], r[f"{b}_at_trials"]) for r in rows]
        md.append(f"- {b}: to best in fewer trials than Cori in {sum(x > y for x, y in tb)} rows, as many in "
                  f"{sum(x == y for x, y in tb)}, more in {sum(x < y for x, y in tb)}; after the trials Cori ran, "
                  f"closer to the best than Cori in {sum(y < x for x, y in at_run)} rows, as close in "
                  f"{sum(y == x for x, y in at_run)}, farther in {sum(y > x for x, y in at_run)}")
    md += ["", "The stopping rule at other patiences, on the same sweep (trials run, slowdown):", "",
           "| trace | sched. | " + " | ".join(f"patience {p}" for p in PATIENCE) + " |",
           "|" + " --- |" * (2 + len(PATIENCE))]
    for r in rows:
        md.append(f"| {r['trace']} | {r['scheduler']} | " + " | ".join(
            f"{r[f'patience{p}_trials']} ({pc(r[f'patience{p}_slowdown'])})" for p in PATIENCE) + " |")
    md.append("")
    for p in PATIENCE:
        md.append(f"- patience {p}: mean {np.mean([r[f'patience{p}_trials'] for r in rows]):.1f} trials, "
                  f"mean slowdown {100 * np.mean([r[f'patience{p}_slowdown'] for r in rows]):.1f}%, within 3% in "
                  f"{sum(r[f'patience{p}_slowdown'] <= 0.03 for r in rows)} of {len(rows)} rows")
    return "\n".join(md) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default=",".join(NAMES), help=f"comma-separated, of: {', '.join(NAMES)}")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "traces", help="the SPEC traces' folder")
    ap.add_argument("--out", type=Path, default=ROOT / "target" / "experiments" / "cori-baselines")
    a = ap.parse_args()
    names = [x.strip() for x in a.traces.split(",") if x.strip()]
    bad = [n for n in names if n not in NAMES]
    if bad:
        print(f"--traces: unknown trace {bad[0]!r} (known: {', '.join(NAMES)})", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    results, rows = [], []
    jobs = [(n, s) for n in names for s in SCHEDULERS]
    with Bar("cori vs baselines", None, unit="tune") as bar:
        for k, (n, s) in enumerate(jobs):
            r = cori.tune(trace_path(n, a.shared, a.out), s, "dram-pmem", 0.2, "simple", progress=False)
            results.append({"trace": n, "result": r})
            rows.append(summarize(n, s, r))
            bar.callback(k + 1, len(jobs))
    (a.out / "results.json").write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    md = markdown(rows)
    (a.out / "results.md").write_text("# Cori against the baselines (seed 003 §3.3.3)\n\n" + md)
    print(md)
    print(f"wrote {a.out / 'results.md'} and results.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
