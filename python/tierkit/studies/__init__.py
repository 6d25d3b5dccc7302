"""Studies at scale (``tierkit sweep``, docs/sweep.md): a study file names traces, platforms,
fast-tier capacities, timing models, policies with parameter grids and repeats; every
combination is a *cell*, run once and kept in a result store keyed by the cell's full
configuration, the trace's digest and tierkit's version, so that an interrupted sweep resumes
and a re-run is instant. Cells run in parallel on local cores (a process pool) or on a Ray
cluster; each cell is a pure function of its configuration, so the results are the same, bit
for bit, whichever runs them.

The package: :mod:`.core` (the study file, cells, the result store, running a cell, the table),
:mod:`.ray` (the Ray executor) and :mod:`.report` (the report); :func:`sweep` runs a study on one
of the executors and writes the table and the report."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Union

from .._core import TierkitError, __version__
from .core import (ANALYSES, FILE_KEYS, GRID_KEYS, KEYS, MIX_KEYS, STORE_MARK, SYNTH_KEYS, TRACE_KINDS,  # noqa: F401
                   WORKLOAD_KEYS, Cell, Grid, PathLike, Store, Study, Task, TraceSpec, cells, claim, collect,
                   file_digest, load_study, materialize, read_study, run_cell, valid_record, write_dataset, _read_memo)

if TYPE_CHECKING:
    import pandas as pd


def _local(todo: list[Cell], workers: int, on_done: Callable[[dict], None]) -> None:
    if workers <= 1 or len(todo) <= 1:
        for c in todo:
            on_done(run_cell(c))
        return
    from concurrent.futures import FIRST_COMPLETED, wait

    from ..pool import pool as make_pool

    with make_pool(workers) as pool:
        pending = {pool.submit(run_cell, c) for c in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                on_done(f.result())


def _ray(todo: list[Cell], address: Optional[str], ship: bool, on_done: Callable[[dict], None],
         workers: Optional[int] = None) -> None:
    from . import ray

    ray.run(todo, address, ship, on_done, workers)


def sweep(study: Union[PathLike, Study], out: PathLike, workers: Optional[int] = None, executor: str = "local",
          address: Optional[str] = None, ship_traces: bool = False, progress: Optional[bool] = None,
          report: bool = True, force: bool = False) -> pd.DataFrame:
    """Run every cell of ``study`` not yet in ``out``'s store, then write ``out/results.parquet``
    and ``out/results.jsonl`` (every cell) and, with ``report``, ``out/index.html``. Returns
    the results as a DataFrame, a row per cell (``error`` holds a failed cell's one line).
    ``out`` is a new folder or a sweep's store; another folder with files in it only with
    ``force``."""
    from ..progress import Bar

    st = study if isinstance(study, Study) else load_study(study)
    out = Path(out)
    claim(out, force)
    memo_path = out / "digests.json"
    memo = _read_memo(memo_path)
    all_cells = cells(st, out, progress, memo)
    memo_path.write_text(json.dumps(memo))
    store = Store(out)
    todo = list({c.key: c for c in all_cells if not store.done(c)}.values())
    if executor not in ("local", "ray"):
        raise TierkitError(f"--executor: {executor!r}: local or ray")
    if workers is not None and workers < 1:
        raise TierkitError(f"--workers: {workers}: at least 1")
    from ..pool import cpu_count

    n = workers or cpu_count()
    with Bar(f"sweep {st.name}", progress, unit="cell") as bar:
        n_cells = len({c.key for c in all_cells})
        done = [n_cells - len(todo)]
        bar.callback(done[0], n_cells)

        def on_done(rec: dict) -> None:
            store.put(rec)
            done[0] += 1
            bar.callback(done[0], n_cells)

        if executor == "local":
            _local(todo, n, on_done)
        else:
            _ray(todo, address, ship_traces, on_done, workers)
    df = collect(st, all_cells, store)
    # the table and the report are rewritten only when a cell ran or the study changed: a
    # re-run of a finished study reads the store and stops (docs/sweep.md)
    manifest = json.dumps({"version": __version__, "study": st.name, "baseline": st.baseline, "report": report,
                           "cells": hashlib.sha256(",".join(c.key for c in all_cells).encode()).hexdigest()})
    outputs = [out / "results.parquet", out / "results.jsonl"] + ([out / "index.html"] if report else [])
    mpath = out / "manifest.json"
    fresh = not todo and all(p.exists() for p in outputs) and mpath.exists() and mpath.read_text() == manifest
    if not fresh:
        write_dataset(df, [store.get(c) for c in {c.key: c for c in all_cells}.values()], out)
        if report:
            from . import report as studies_report

            studies_report.write(df, st, out)
        mpath.write_text(manifest)
    df.attrs["ran"] = len(todo)
    df.attrs["written"] = not fresh
    return df
