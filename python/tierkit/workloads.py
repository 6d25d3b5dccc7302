"""The project's own test workloads: small C programs in ``workloads/`` with known memory
behaviour (see ``docs/workloads.md``), built with debug information so that the tracer can
name their allocation sites.

Every workload takes ``--size small|medium|large`` (footprint: a few MiB, 64–256 MiB,
1–4 GiB), ``--seed S`` and ``--work F``, and prints its parameters, result lines and a
checksum; the same arguments give the same output byte for byte::

    from tierkit import workloads
    workloads.list_workloads()                       # a DataFrame
    workloads.run("gups", "small")["checksum"]       # natively, with peak RSS
    workloads.trace("sites", "small", out="sites.tkt")   # under the Valgrind tracer
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from . import installed
from ._core import TierkitError

if TYPE_CHECKING:
    import pandas as pd

SIZES = ("small", "medium", "large")


@dataclass(frozen=True)
class Workload:
    name: str
    pattern: str
    description: str
    hot: str
    #: planned peak heap bytes per size, as the program prints it under ``--plan``
    footprint_bytes: dict = field(default_factory=dict)
    #: options of its own, besides --size, --seed, --work and --plan
    options: str = ""


def _w(name, pattern, description, hot, small, medium, large, options=""):
    return Workload(name, pattern, description, hot, {"small": small, "medium": medium, "large": large}, options)


_REGISTRY = [
    _w("gups", "random read-modify-write",
       "random updates of one large table (HPCC RandomAccess-like)",
       "the whole table, uniformly: no locality at any scale",
       4194304, 134217728, 1073741824, "--threads N"),
    _w("bfs", "graph traversal",
       "breadth-first searches on a seeded R-MAT graph in CSR arrays (Graph500-like)",
       "the level array (a random read per edge); adjacency read in short runs at random places",
       4456452, 142606340, 2281701380),
    _w("stencil", "streaming stencil",
       "a 7-point Jacobi stencil over two 3D grids, every cell every iteration (lbm-like)",
       "nothing stands out: both grids are streamed every iteration",
       4194304, 143982592, 2147483648),
    _w("spmv", "sparse streaming + gather",
       "repeated sparse matrix-vector products with a random CSR matrix (CG-like)",
       "the input vector (random gathers); the matrix (95%) is streamed once per iteration",
       3473412, 222298116, 1778384900),
    _w("kmeans", "streaming, compute-heavy",
       "Lloyd's k-means iterations over 8-dimensional points, 16 clusters",
       "the centroids (tiny, cached); the points are streamed every iteration",
       2361472, 150997120, 1207961728),
    _w("btree", "index lookups (pointer chasing)",
       "a B+tree built from random keys, then random lookups",
       "the root and upper levels of the tree; leaves and keys get sparse random reads",
       2162688, 138412032, 1384120320),
    _w("lu", "dense blocked linear algebra",
       "blocked LU factorization (no pivoting) of a dense matrix",
       "the pack buffer; the trailing submatrix, which shrinks towards the bottom-right corner",
       2228224, 134348800, 1208090624, "--steps N"),
    _w("sites", "allocation sites of different hotness",
       "five arrays from five helper functions, from very hot and small to large and cold",
       "make_hot_counters: 1/57 of the footprint, ~56% of the accesses; make_cold_archive is cold",
       3735552, 119537664, 1912602624),
    _w("phases", "moving hot set",
       "each phase hammers a different part of one array (quarters by default)",
       "one part per phase, 70x hotter per byte than the rest; the hot part moves at each phase",
       4194368, 134217792, 2147483712, "--phases N"),
    _w("rwmix", "random access, chosen read/write mix",
       "uniformly random loads and stores over one buffer, a share --write-ratio R of them stores",
       "every word equally; R sets the share of stores (0: loads only, 1: stores only)",
       4194304, 134217728, 2147483648, "--write-ratio R"),
    _w("stages", "moving hot allocation site",
       "each stage hammers its own array, allocated by its own helper function (4 stages by default)",
       "one site per stage (make_stage<s>_table), 73x hotter per byte than the rest; all equally warm over the run",
       4194304, 134217728, 2147483648, "--stages N"),
    _w("backprop", "sequential strided sweeps",
       "a 2-layer neural network trained by back-propagation with momentum (Rodinia backprop-like)",
       "nothing stands out: the weights and their momentum are swept in order every iteration, a periodic pattern",
       4325772, 69206412, 1107296652),
]

#: every workload by name, in the order of the documentation
WORKLOADS = {w.name: w for w in _REGISTRY}


def _check_name(name: str) -> Workload:
    w = WORKLOADS.get(name)
    if w is None:
        raise TierkitError(f"unknown workload '{name}' (one of: {', '.join(WORKLOADS)})")
    return w


def _check_size(size: str) -> str:
    if size not in SIZES:
        raise TierkitError(f"unknown workload size '{size}' (small, medium or large)")
    return size


def list_workloads() -> pd.DataFrame:
    """Every workload: ``name``, ``pattern``, ``description``, ``hot``, ``options`` and the
    planned footprint per size (``small_bytes``, ``medium_bytes``, ``large_bytes``)."""
    import pandas as pd

    rows = []
    for w in WORKLOADS.values():
        row = {k: v for k, v in asdict(w).items() if k != "footprint_bytes"}
        row.update({f"{s}_bytes": w.footprint_bytes[s] for s in SIZES})
        rows.append(row)
    return pd.DataFrame(rows)


def source_dir() -> Path:
    """The ``workloads/`` directory of the repository, or of the data folder for an installed
    tierkit (``tierkit setup``, docs/install.md), or ``$TIERKIT_WORKLOADS``."""
    env = os.environ.get("TIERKIT_WORKLOADS")
    d = Path(env) if env else installed.workloads_dir()
    if not (d / "Makefile").is_file():
        if env:
            raise TierkitError(f"TIERKIT_WORKLOADS: workload sources not found in {d} (set it to a workloads/ directory)")
        raise TierkitError(f"the workloads are not set up ({d} holds no sources): {installed.SETUP_HINT}, "
                           "or set TIERKIT_WORKLOADS to a workloads/ directory")
    return d


def build_dir() -> Path:
    return source_dir() / "build"


def _first_error(text: str) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if re.search(r"error|not found|No such file", l, re.IGNORECASE):
            return l
    return lines[-1] if lines else "no output"


def build() -> Path:
    """Build every workload (``make -C workloads``, a no-op when up to date); returns the
    directory of the programs. Raises :class:`TierkitError` with one line if make or the
    compiler fails."""
    src = source_dir()
    make = shutil.which("make")
    if make is None:
        raise TierkitError("cannot build the workloads: 'make' is not installed")
    try:
        p = subprocess.run([make, "-s", "-C", str(src)], capture_output=True, text=True)
    except OSError as e:
        raise TierkitError(f"cannot build the workloads: {e}") from None
    if p.returncode != 0:
        raise TierkitError(f"building the workloads failed: {_first_error(p.stderr + p.stdout)}")
    return src / "build"


def path(name: str, build_first: bool = True) -> Path:
    """The program of workload ``name`` (built first unless ``build_first`` is false)."""
    _check_name(name)
    d = build() if build_first else build_dir()
    return d / name


def _value(v: str) -> Any:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def parse_output(text: str) -> dict:
    """The output of a workload as a dict: ``name``, ``params`` (line 1's key=value pairs),
    ``results`` (one dict per result line), ``checksum`` (hex string), ``footprint_bytes``."""
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        raise TierkitError("the workload printed nothing")
    head = lines[0].split()
    params = dict(kv.split("=", 1) for kv in head[1:] if "=" in kv)
    results = [dict(kv.split("=", 1) for kv in l.split() if "=" in kv) for l in lines[1:]]
    out: dict[str, Any] = {
        "name": head[0],
        "params": {k: _value(v) for k, v in params.items()},
        "results": [{k: _value(v) for k, v in r.items()} for r in results if "checksum" not in r],
        "checksum": next((r["checksum"] for r in results if "checksum" in r), None),
    }
    out["footprint_bytes"] = out["params"].get("footprint_bytes")
    return out


_GNU_TIME: Optional[str] = None


def _gnu_time() -> Optional[str]:
    """GNU time, if installed: it measures its child's peak RSS from a small process."""
    global _GNU_TIME
    if _GNU_TIME is None:
        _GNU_TIME = ""
        for t in ("/usr/bin/time", shutil.which("time")):
            if t and os.access(t, os.X_OK):
                try:
                    p = subprocess.run([t, "-f", "%M", "true"], capture_output=True, text=True, timeout=10)
                except (OSError, subprocess.SubprocessError):
                    continue
                if p.returncode == 0 and p.stderr.strip().splitlines()[-1:] and p.stderr.strip().splitlines()[-1].isdigit():
                    _GNU_TIME = t
                    break
    return _GNU_TIME or None


def _vmhwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run(name: str, size: str = "small", seed: Optional[int] = None, args: Sequence[str] = (),
        timeout: Optional[float] = None) -> dict:
    """Run a workload natively. Returns :func:`parse_output`'s dict plus ``stdout`` and
    ``peak_rss_bytes``, the workload's peak resident set. A failing workload raises
    :class:`TierkitError` with its error line.

    The peak comes from GNU time (``/usr/bin/time -f %M``) when installed, else from sampling
    ``VmHWM`` in ``/proc`` while the workload runs. (``wait4``/``getrusage`` of the child
    would not do: Linux carries the parent's peak, here Python's ~100 MiB, across fork and
    exec into the child's ``ru_maxrss``.)"""
    _check_size(size)
    prog = path(name)
    argv = [str(prog), "--size", size, *([] if seed is None else ["--seed", str(seed)]), *map(str, args)]
    gnu_time = _gnu_time()
    deadline = None if timeout is None else time.monotonic() + timeout
    killed = False
    hwm = 0
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        if gnu_time:
            argv = [gnu_time, "-f", "%M", "-o", rss.name, *argv]
        # own session, so that a timeout kills the workload and not only GNU time
        p = subprocess.Popen(argv, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
            while True:
                pid, status = os.waitpid(p.pid, os.WNOHANG)
                if pid:
                    break
                if not gnu_time:
                    hwm = max(hwm, _vmhwm(p.pid))
                if deadline is not None and time.monotonic() > deadline and not killed:
                    os.killpg(p.pid, signal.SIGKILL)
                    killed = True
                time.sleep(0.002 if not gnu_time else 0.01)
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        if gnu_time:
            # GNU time writes "Command exited with non-zero status N" first when it fails
            lines = rss.read().split()
            hwm = int(lines[-1]) * 1024 if lines and lines[-1].isdigit() else 0
    if killed:
        raise TierkitError(f"workload {name} --size {size} ran past {timeout} s")
    if p.returncode != 0:
        raise TierkitError(f"workload {name} exited with status {p.returncode}: {_first_error(stderr)}")
    r = parse_output(stdout)
    r["stdout"] = stdout
    r["peak_rss_bytes"] = hwm
    return r


def trace(name: str, size: str = "small", out: Union[str, os.PathLike, None] = None, cache: Optional[str] = None,
          context: int = 4, slice: Union[None, int, str] = None, force: bool = False, extra_args: Sequence[str] = (),
          progress: Optional[bool] = None) -> Any:
    """Build workload ``name`` and record a native trace of it at ``size`` with the Valgrind
    tracer (:func:`tierkit.api.record`); ``out`` defaults to ``NAME-SIZE.tkt``. ``extra_args``
    go to the workload (``["--threads", "2"]``, ``["--write-ratio", "0.9"]``...). Returns what
    ``record`` returns. ``progress`` as ``record``'s."""
    from . import api

    _check_name(name)
    _check_size(size)
    record = getattr(api, "record", None)
    if record is None:
        raise TierkitError("tracing a workload needs tierkit.api.record (the Valgrind tracer), "
                           "which this version of tierkit does not have")
    prog = path(name)
    if out is None:
        out = f"{name}-{size}.tkt"
    return record(str(prog), ["--size", size, *map(str, extra_args)], out, cache=cache, context=context,
                  slice=slice, force=force, progress=progress)
