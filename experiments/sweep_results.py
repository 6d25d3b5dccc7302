"""A finished sweep's table, as the experiments' table scripts read it (docs/sweep.md): the
study's `results.parquet`, refused with one line when the sweep has not run (exit status 2)
or when one of its cells failed (exit status 1)."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def read(out: Path, study: str) -> pd.DataFrame:
    """`out/results.parquet`, which `tierkit sweep STUDY --out OUT` wrote."""
    if not (out / "results.parquet").exists():
        print(f"{out}: no results.parquet: run `tierkit sweep {study} --out {out}` first", file=sys.stderr)
        raise SystemExit(2)
    raw = pd.read_parquet(out / "results.parquet")
    if raw["error"].notna().any():
        r = raw[raw["error"].notna()].iloc[0]
        print(f"{out}: a cell failed: {r['trace']} {r['policy']}: {r['error']} (run the sweep again)", file=sys.stderr)
        raise SystemExit(1)
    return raw
