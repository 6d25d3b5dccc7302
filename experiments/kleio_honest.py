#!/usr/bin/env python3
"""Kleio and Kleoniki scored with what a running system knows (docs/learned.md, "The
fallback, decided as a running system would"): on the shared SPEC traces, the learned
workloads and two real programs, the share of the history-to-oracle gap bridged

- with the online fallback and the models' inference charged (the headline), and without
  the inference;
- without the fallback, with the future-knowledge fallback, and with perfect classes for the
  selected pages (hybrid: future knowledge);
- by the controls: untrained models and "no access" always with the online fallback, and
  "no access" always without it (the control of the no-fallback column);

with the models' accessed recall against history's, the share of predictions used, the
inference per boundary against the period's simulated length, the break-even period, and how
the period was chosen (Kleio: searched on the training periods; Kleoniki: Cori's).

    experiments/kleio_honest.py [--traces NAME,...] [--out DIR]

Setup as 003 §3.1: dram-pmem, fast tier 20% of the footprint, simple timing, 60 epochs, one
PyTorch thread; Kleio gives models to 10% of the pages, Kleoniki manages 20%. The learned
workloads are recorded through the `small` cache as `make experiments-learned` does; the
real programs are the guided-placement suite's traces in data/traces/real (make
experiments-guided-suite records them); missing traces are skipped with a line. Writes
DIR/results.jsonl (one study per line, without its runs) and DIR/results.md. About half an
hour on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import tierkit

ROOT = Path(__file__).resolve().parent.parent
SPEC = ("403.gcc", "444.namd", "447.dealII")
WORKLOADS = ("backprop", "kmeans", "lu", "bfs", "btree")
REAL = ("dot-ref", "sqlite3-ref")


def trace_path(name: str, shared: Path, work: Path) -> Path | None:
    if name in SPEC:
        p = shared / f"{name}.gz"
        return p if p.is_file() else None
    if name in REAL:
        p = ROOT / "data" / "traces" / "real" / f"{name}.tkt"
        return p if p.is_file() else None
    p = work / f"{name}.tkt"
    if not p.is_file():
        subprocess.run([str(Path(sys.executable).parent / "tierkit"), "workloads", "trace", name, "--size", "small",
                        "--cache", "small", "-o", str(p), "-q"], check=True)
    return p


def pct(v):
    return "-" if v is None else f"{v:+.1f}%"


def rec(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default=",".join(SPEC + WORKLOADS + REAL))
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "traces")
    ap.add_argument("--out", type=Path, default=ROOT / "target" / "experiments" / "kleio-honest")
    ap.add_argument("--epochs", type=int, default=60)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(a.out / "results.jsonl", "w") as out:
        for name in a.traces.split(","):
            t = trace_path(name, a.shared, a.out)
            if t is None:
                print(f"{name}: no trace, skipped", file=sys.stderr)
                continue
            for policy, pages in (("kleio", 0.1), ("kleoniki", 0.2)):
                t0 = time.time()
                fn = tierkit.kleio if policy == "kleio" else tierkit.kleoniki
                df = fn(t, pages=[pages], epochs=a.epochs, progress=False)
                st = df.attrs["study"]
                x = df.iloc[0].to_dict()
                rec_ = {**st, "trace": name, "trace_path": str(t), "policy": policy, "seconds": time.time() - t0, "row": x}
                out.write(json.dumps(rec_, default=lambda o: o.item() if hasattr(o, "item") else str(o)) + "\n")
                out.flush()
                rows.append(rec_)
                print(f"{name} {policy}: period {st['period']:,} ({st['periods']} periods), gap {pct(x['gap_bridged_pct'])}"
                      f" / free {pct(x['gap_bridged_free_inference_pct'])} / no fb {pct(x['gap_bridged_no_fallback_pct'])}"
                      f" / idle no fb {pct(x['gap_bridged_idle_no_fallback_pct'])} [{time.time() - t0:.0f} s]",
                      file=sys.stderr, flush=True)
    lines = [
        "| trace | policy | period (periods) | models | acc. recall (history) | used | infer / boundary | period (sim) "
        "| break-even | gap: Kleio | no inference | no fallback | future fallback | hybrid | untrained | idle | idle, no fallback |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        x = r["row"]
        used = f"{100 * x['predicted_periods_used'] / x['predicted_periods']:.2f}%" if x["predicted_periods"] else "-"
        be = "never" if x["break_even_period"] is None else f"{int(x['break_even_period']):,}"
        lines.append(
            f"| {r['trace']} | {r['policy']} | {r['period']:,} ({r['periods']}) | {int(x['models']):,} | "
            f"{rec(x['accessed_recall'])} ({rec(x['history_accessed_recall'])}) | {used} | "
            f"{x['inference_ns_per_boundary'] / 1e3:,.0f} µs | {x['period_sim_ns'] / 1e3:,.0f} µs | {be} | "
            f"{pct(x['gap_bridged_pct'])} | {pct(x['gap_bridged_free_inference_pct'])} | "
            f"{pct(x['gap_bridged_no_fallback_pct'])} | {pct(x['gap_bridged_future_fallback_pct'])} | "
            f"{pct(x['gap_bridged_future_hybrid_pct'])} | {pct(x['gap_bridged_untrained_pct'])} | "
            f"{pct(x['gap_bridged_idle_pct'])} | {pct(x['gap_bridged_idle_no_fallback_pct'])} |")
    notes = ["", "Periods chosen:", ""]
    for r in rows:
        notes.append(f"- {r['trace']} {r['policy']}: {r.get('period_chosen') or 'given'}")
    (a.out / "results.md").write_text("\n".join(lines + notes) + "\n")
    print("\n".join(lines + notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
