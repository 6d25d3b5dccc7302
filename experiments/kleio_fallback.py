#!/usr/bin/env python3
"""A check of Kleio on real SPEC traces (docs/learned.md, "Scores, held-out periods
and the future-knowledge fallback"): the models' accessed recall against history's, and the
share of the history-to-oracle gap bridged without a fallback and with the per-page fallback
judged on the held-out periods (fallback=future: FUTURE KNOWLEDGE), for each class
weighting. experiments/kleio_honest.py has the honest (online) fallback beside it.

    experiments/kleio_fallback.py [--traces DIR] [--pages 0.1,0.2] [--out FILE]

Setup as 003 §3.1: dram-pmem, fast tier 20% of the footprint, simple timing, the default
period (about 400 periods, at least 1,000 accesses), one PyTorch thread. Minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierkit import learned as kleio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=Path, default=Path("../shared/traces"))
    ap.add_argument("--pages", default="0.1,0.2")
    ap.add_argument("--weights", default="none,balanced")
    ap.add_argument("--period", type=int, default=1000, help="the period of the table in docs/learned.md (default 1000)")
    ap.add_argument("--out", type=Path, default=Path("target/experiments/kleio-fallback.json"))
    a = ap.parse_args()
    traces = sorted(a.traces.glob("*.gz"))
    if not traces:
        print(f"no traces (*.gz) in {a.traces}", file=sys.stderr)
        return 2
    fr = [float(x) for x in a.pages.split(",")]
    rows, res = [], []
    for t in traces:
        for w in a.weights.split(","):
            s = kleio.study(t, "kleio", fr, a.period, class_weight=w, progress=False)
            res.append(s)
            for x in s["rows"]:
                rows.append((t.name, s["period"], s["periods"], w, x))
                print(t.name, w, x["pages_fraction"], x["gap_bridged_no_fallback_pct"], x["gap_bridged_future_fallback_pct"],
                      file=sys.stderr, flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    pc = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    g = lambda v: "-" if v is None else f"{v:+.1f}%"  # noqa: E731
    print("| trace | period (periods) | weight | pages | models | accuracy (history) | accessed recall (history) "
          "| fallbacks (future rule) | gap bridged, no fallback | gap bridged, fallback=future (FUTURE KNOWLEDGE) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, per, n, w, x in rows:
        print(f"| {name} | {per:,} ({n}) | {w} | {100 * x['pages_fraction']:.0f}% | {x['models']} | "
              f"{pc(x['accuracy'])} ({pc(x['history_accuracy'])}) | {pc(x['accessed_recall'])} "
              f"({pc(x['history_accessed_recall'])}) | {x['pages_losing_to_history']} | "
              f"{g(x['gap_bridged_no_fallback_pct'])} | {g(x['gap_bridged_future_fallback_pct'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
