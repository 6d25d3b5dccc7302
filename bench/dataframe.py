"""What pandas operations cost on the frames the Python API returns (docs/python.md, "Results
in a notebook"): the frame of a comparison of every policy, and the same comparison written
as a report (``tierkit compare --out``) and read back with ``tierkit.load``.

    python bench/dataframe.py [--label after] [--accesses 2M] [--pages 100K] [--out bench/results/dataframe.json]

Measured, each the best of ``--repeats`` runs, in wall seconds and in this process's CPU
seconds (``time.process_time``, the steadier figure on a shared machine):

- ``select``: 100 column selections (``df[["policy", column]]``, cycling over the columns) on
  the frame of ``tierkit.compare(trace, policies="all")``;
- ``chains``: 20 filter/select/sort chains (``df[df[col] >= q][[...]].sort_values(...)``) on
  the frame of ``tierkit.load(report)``;
- each again on a copy of the frame with ``attrs`` emptied: what pandas itself costs.

The figures are stored under ``--label`` in the JSON file, beside those of other labels (a
"before" and an "after" of a change)."""
import argparse
import datetime
import json
import os
import platform as _platform
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

import tierkit
from tierkit import report

CHAIN_COLS = ["trace", "policy", "runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes"]


def best(fn, repeats: int) -> dict:
    """The best wall and CPU seconds of ``repeats`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return {"wall_s": round(min(walls), 4), "cpu_s": round(min(cpus), 4)}


def selections(df: pd.DataFrame) -> None:
    cols = [c for c in df.columns if c != "policy"]
    for i in range(100):
        df[["policy", cols[i % len(cols)]]]


def chains(df: pd.DataFrame) -> None:
    for i in range(20):
        q = df["fast_hit_ratio"].quantile(i / 20)
        df[df["fast_hit_ratio"] >= q][CHAIN_COLS].sort_values("runtime_ns" if i % 2 else "migrations")


def bare(df: pd.DataFrame) -> pd.DataFrame:
    d = df.copy()
    d.attrs = {}
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="after", help="the name these figures are stored under (before, after, ...)")
    ap.add_argument("--accesses", default="2M")
    ap.add_argument("--pages", default="100K")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "dataframe.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tk-bench-df") as tmp:
        trace = Path(tmp) / "zipf.tkt"
        tierkit.synth("zipf", trace, a.accesses, a.pages, write_ratio=0.2, seed=1, progress=False)
        t = time.perf_counter()
        df = tierkit.compare(trace, policies="all", workers=1, progress=False)
        compare_s = time.perf_counter() - t
        out = Path(tmp) / "report"
        report.write(df, out)
        loaded = tierkit.load(out)
        results_bytes = len(json.dumps(list(df.attrs["results"])))
        fig = {
            "select": best(lambda: selections(df), a.repeats),
            "select_attrs_emptied": best(lambda: selections(bare(df)), a.repeats),
            "chains": best(lambda: chains(loaded), a.repeats),
            "chains_attrs_emptied": best(lambda: chains(bare(loaded)), a.repeats),
        }
    for k in ("select", "chains"):
        fig[f"{k}_cpu_vs_pandas"] = round(fig[k]["cpu_s"] / max(fig[f"{k}_attrs_emptied"]["cpu_s"], 1e-9), 2)
    fig.update({"date": datetime.date.today().isoformat(), "runs": len(df), "columns": len(df.columns),
                "results_json_bytes": results_bytes, "compare_s": round(compare_s, 2),
                "pandas": pd.__version__, "python": _platform.python_version(), "cpus": os.cpu_count()})
    for k in ("select", "chains"):
        e = fig[f"{k}_attrs_emptied"]
        print(f"{a.label} {k:7}: {fig[k]['wall_s']:.3f} s wall, {fig[k]['cpu_s']:.3f} s CPU; attrs emptied: "
              f"{e['wall_s']:.3f} s wall, {e['cpu_s']:.3f} s CPU ({fig[f'{k}_cpu_vs_pandas']}x)", file=sys.stderr)
    stored = json.loads(a.out.read_text()) if a.out.exists() else {}
    stored.update({"accesses": a.accesses, "pages": a.pages, "policies": "all", "repeats": a.repeats})
    stored.setdefault("labels", {})[a.label] = fig
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
