"""``tierkit sweep --executor ray``: the cells of a study as Ray tasks (docs/sweep.md, "On a
Ray cluster"). Each task runs one cell (``tierkit.studies.run_cell``) on one CPU and returns its
record to the driver, which alone writes the store: a cell is stored once, whichever worker ran
it. A task whose worker dies is run again by Ray (``max_retries``); a cell that fails in
tierkit is a record with its error, like any other.

Traces are read where the cell names them (a path every node sees: a shared file system) or,
with ``ship``, sent once through Ray's object store and written by each node that needs one
into its temporary directory, keyed by the trace's digest."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from .._core import TierkitError

#: Times Ray runs a cell again after its worker process or node died.
MAX_RETRIES = 3


def _write_once(digest: str, name: str, data: bytes) -> str:
    d = Path(tempfile.gettempdir()) / "tierkit-traces" / digest
    f = d / name
    if not f.exists():
        d.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.partial")
        tmp.write_bytes(data)
        os.replace(tmp, f)
    return str(f)


def _local_copy(cell: Any, data: Optional[bytes], guide: Optional[bytes] = None) -> Any:
    """On a worker: the cell, its trace (and the trace that guides it) written locally (once
    per node) if it was shipped. (Ray hands a task the value of an object reference given as
    an argument, fetched into the node's object store once.)"""
    import dataclasses

    if data is not None:
        cell = dataclasses.replace(cell, path=_write_once(cell.digest, Path(cell.path).name, data))
    if guide is not None and cell.guide_path:
        cell = dataclasses.replace(cell, guide_path=_write_once(cell.guide_digest, Path(cell.guide_path).name, guide))
    return cell


def _task(cell: Any, data: Optional[bytes] = None, guide: Optional[bytes] = None) -> dict:
    from .core import run_cell

    local = _local_copy(cell, data, guide)
    rec = run_cell(local)
    if "result" in rec:
        # the result names the traces by the driver's paths, whichever copy ran
        enc = lambda p: json.dumps(p)[1:-1]  # noqa: E731
        text = json.dumps(rec["result"])
        for here, there in ((local.path, cell.path), (local.guide_path, cell.guide_path)):
            if here and here != there:
                text = text.replace(enc(here), enc(there))
        rec["result"] = json.loads(text)
    rec["trace_path"] = cell.path
    rec["host"] = os.uname().nodename
    return rec


def run(todo: list, address: Optional[str], ship: bool, on_done: Callable[[dict], None],
        workers: Optional[int] = None) -> None:
    try:
        import ray
    except ImportError:
        raise TierkitError("--executor ray: Ray is not installed: pip install 'tierkit[ray]'") from None
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False, "configure_logging": False}
        if address:
            kw["address"] = address
        elif workers:
            kw["num_cpus"] = workers
        try:
            ray.init(**kw)
        except Exception as e:  # Ray's connection errors have no common base
            where = f"the cluster at {address}" if address else "a local Ray instance"
            raise TierkitError(f"--executor ray: cannot connect to {where}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_task)
        refs: dict[str, Any] = {}
        if ship:
            for c in todo:
                for dig, path in ((c.digest, c.path), (c.guide_digest, c.guide_path)):
                    if dig and dig not in refs:
                        refs[dig] = ray.put(Path(path).read_bytes())
        pending = {task.remote(c, refs.get(c.digest), refs.get(c.guide_digest) if c.guide_digest else None): c
                   for c in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for r in ready:
                cell = pending.pop(r)
                try:
                    rec = ray.get(r)
                except Exception as e:  # the task failed for good (its retries spent)
                    from .core import Cell  # noqa: F401  (the record's shape is run_cell's)

                    msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                    rec = {"key": cell.key, "config": cell.config(), "trace_path": cell.path,
                           "error": f"ray: {type(e).__name__}: {msg}"}
                on_done(rec)
    finally:
        if started:  # disconnects this driver; a cluster joined by address keeps running
            ray.shutdown()
