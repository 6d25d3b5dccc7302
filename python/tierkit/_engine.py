"""The engine's front in Python: one description of a run (:func:`run_spec`), a plain run of it
(:func:`run`, no front-end expansion), mixes, the files a run reads kept in its result, and the
small helpers every feature module shares. The feature modules (``cori``, ``learned``,
``profiling``, ``replaying``, ``report``) sit on this module, and :mod:`tierkit.api` on them,
so that nothing imports in a circle (docs/architecture.md)."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union, overload

if TYPE_CHECKING:
    import pandas as pd

import numpy as np

from . import _core
from .policy import PeriodicPolicy
from .progress import Bar

PathLike = Union[str, os.PathLike]
PolicyLike = Union[str, PeriodicPolicy]

#: The columns of a result row, in display order.
RESULT_COLUMNS = [
    "trace", "platform", "policy", "timing", "accesses", "reads", "writes", "pages",
    "fast_capacity_pages", "runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes",
    "migration_time_ns", "energy_j", "ipc", "periods", "activations", "warnings",
]


@overload
def _s(p: PathLike) -> str: ...
@overload
def _s(p: None) -> None: ...
def _s(p: Optional[PathLike]) -> Optional[str]:
    return None if p is None else os.fspath(p)


def _cap(c: Union[None, float, int, str]) -> Optional[str]:
    return None if c is None else str(c)


def trace_info(path: PathLike, format: Optional[str] = None, cache: Optional[str] = None,
               progress: Optional[bool] = None) -> dict:
    """Summary of a trace: ``records``, ``accesses``, ``reads``, ``writes``, ``pages``,
    ``footprint_bytes``, ``duration_insn``, ``duration_ns``, ``allocation_sites``..., plus the
    header (``meta``) and the detected ``format``."""
    with Bar(f"reading {Path(path).name}", progress) as bar:
        return json.loads(_core.trace_info(_s(path), format, cache, bar.callback))


def mix_figures(r: Mapping[str, Any]) -> dict:
    """A mix's own figures for a table's row (docs/models.md, "Many cores"): its weighted
    speedup, its throughput, and its slowest program's slowdown (None without ``alone``)."""
    m = r.get("mix") or {}
    slow = [p["slowdown"] for p in r.get("programs") or [] if p.get("slowdown") is not None]
    return {"weighted_speedup": m.get("weighted_speedup"), "throughput_accesses_per_us": m.get("throughput_accesses_per_us"),
            "max_slowdown": max(slow) if slow else None}


def run(trace: Union[PathLike, Sequence[PathLike]], platform: Union[str, Mapping[str, Any]] = "dram-pmem",
        policy: PolicyLike = "first-touch",
        fast_capacity: Union[None, float, str] = None, capacities: Optional[Mapping[str, Union[float, str]]] = None,
        timing: str = "simple", format: Optional[str] = None, cache: Optional[str] = None,
        progress: Optional[bool] = None, summary: Optional[Mapping] = None, paranoid: bool = False,
        repeat: int = 1, time_scale: float = 1.0,
        watch: Optional[Sequence[tuple[str, int, int]]] = None, watch_every_ns: Optional[float] = None,
        mix: bool = False, cores: int = 1, quantum: int = 1, alone: bool = True,
        trace_digest: Optional[str] = None) -> dict:
    """One simulation of a policy spec as the engine takes it (or a Python policy object),
    with no front-end expansion: the engine's side of :func:`tierkit.api.run`, which first
    makes ``guided:strategy=...`` into guidance and ``kleio:pages=...`` into predictions.
    Arguments and result as :func:`tierkit.api.run`."""
    if mix:
        return _run_mix(trace, platform, policy, fast_capacity, capacities, timing, format, cache, progress, paranoid,
                        repeat, time_scale, quantum, alone, trace_digest)
    if not isinstance(trace, (str, os.PathLike)):
        raise _core.TierkitError("trace: give one trace, or several with mix=True (--mix)")
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise _core.TierkitError(f"--cores: {cores!r}: a whole number of cores >= 1")
    repeat, time_scale = check_scale(repeat, time_scale)
    if watch is not None:
        watch = [(str(n), int(a), int(b)) for n, a, b in watch]
        if watch_every_ns is None or not (float(watch_every_ns) > 0):
            raise _core.TierkitError(f"watch_every_ns: {watch_every_ns!r}: give a positive interval in ns of simulated time")
    label = policy if isinstance(policy, str) else policy.name
    spec_ = run_spec(trace, platform, policy if isinstance(policy, str) else policy.name, fast_capacity, capacities, timing,
                     format, cache, repeat=repeat, time_scale=time_scale, cores=cores, quantum=_quantum(quantum),
                     watch=None if watch is None else {"regions": [list(w) for w in watch], "every_ns": float(watch_every_ns or 0.0)},
                     trace_digest=trace_digest)
    with Bar(f"{label}", progress) as bar:
        out = _core.simulate(json.dumps(spec_), None if isinstance(policy, str) else policy, bar.callback,
                             None if summary is None or cores > 1 else json.dumps(summary), paranoid)
    r = json.loads(out)
    path = _s(trace)
    if path != path.encode("utf-8", "surrogatepass").decode("utf-8", "ignore"):
        # a file name that is not UTF-8: the core writes it with U+FFFD; the result keeps its
        # bytes (as Python holds them), so that it prints and replays as the file's name
        r["trace"] = r["config"]["trace"] = path
    if cores > 1:
        # what replay needs: the trace's path, the cores and the quantum
        r["config"].update(trace=_s(trace), cores=cores, quantum=quantum)
    relabel_warnings(r, r["policy"], label)
    if cache is not None:
        r["config"]["cache"] = cache  # the filter the trace was read through: replay needs it
    # the guidance and predictions files it read travel with the result (by digest)
    return keep_inputs(r)


def relabel_warnings(r: dict, run_as: str, label: str) -> None:
    """Make the warnings of result ``r`` that begin with the policy as it ran (``run_as``: the
    engine's canonical spec, or the spec a front end expanded the user's into) name it as the
    user wrote it (``label``)."""
    if run_as != label:
        r["warnings"] = [label + w[len(run_as):] if w.startswith(run_as + " ") else w for w in r.get("warnings", [])]


def json_path(p: PathLike) -> Union[str, dict]:
    """A path as a run spec holds it: a string when its bytes are UTF-8, else
    ``{"os_bytes_hex": ...}`` (Linux file names are bytes; crates/tierkit-core/src/runspec.rs)."""
    b = os.fsencode(p)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"os_bytes_hex": b.hex()}


def run_spec(trace: Union[PathLike, Sequence[PathLike]], platform: Union[str, Mapping[str, Any]] = "dram-pmem",
             policy: str = "first-touch",
             fast_capacity: Union[None, float, str] = None, capacities: Optional[Mapping[str, Union[float, str]]] = None,
             timing: str = "simple", format: Optional[str] = None, cache: Optional[str] = None, repeat: int = 1,
             time_scale: float = 1.0, cores: int = 1, quantum: int = 1, watch: Optional[dict] = None,
             trace_digest: Optional[str] = None) -> dict[str, Any]:
    """One description of a run (docs/models.md, "One description of a run"): what
    :func:`run` hands the engine and every result records as ``config.run``; a list of
    traces is a mix. Replaying a result (:mod:`tierkit.replaying`) is running its ``config.run``
    again."""
    traces = [trace] if isinstance(trace, (str, os.PathLike)) else list(trace)
    spec: dict[str, Any] = {"trace": json_path(traces[0]), "platform": platform if isinstance(platform, str) else dict(platform),
                            "policy": policy, "timing": timing,
                            "repeat": repeat, "time_scale": time_scale}
    caps = {str(k): _cap(v) for k, v in (capacities or {}).items()}
    if fast_capacity is not None:
        caps["0"] = _cap(fast_capacity)
    if caps:
        spec["capacity"] = caps
    for k, v in (("format", format), ("cache", cache), ("watch", watch), ("trace_digest", trace_digest)):
        if v is not None:
            spec[k] = v
    if len(traces) > 1:
        spec["mix"] = [json_path(t) for t in traces[1:]]
    if cores != 1:
        spec["cores"] = cores
    if quantum != 1:
        spec["quantum"] = quantum
    return spec


def _quantum(q: Any) -> int:
    if isinstance(q, bool) or not isinstance(q, int) or q < 1:
        raise _core.TierkitError(f"--quantum: {q!r}: a whole number of accesses >= 1")
    return q


def _run_mix(traces, platform, policy, fast_capacity, capacities, timing, format, cache, progress, paranoid, repeat,
             time_scale, quantum, alone, trace_digest=None) -> dict:
    """Several programs on cores of their own sharing the tiers (``run(..., mix=True)``)."""
    if isinstance(traces, (str, os.PathLike)) or len(traces) < 2:
        raise _core.TierkitError("--mix: give at least two traces, each a program of the mix")
    if not isinstance(policy, str):
        raise _core.TierkitError("--mix: give the policy as a spec (a Python policy object runs on one core)")
    spec = json.loads(_core.parse_policy_spec(policy))
    if spec["name"] in ("guided", "kleio", "kleoniki"):
        raise _core.TierkitError(f"--mix: policy '{spec['name']}' is made from one trace's profile; it does not run on a mix")
    repeat, time_scale = check_scale(repeat, time_scale)
    paths = [_s(t) for t in traces]
    spec_ = run_spec(paths, platform, policy, fast_capacity, capacities, timing, format, cache, repeat=repeat,
                     time_scale=time_scale, quantum=_quantum(quantum), trace_digest=trace_digest)
    with Bar(f"{policy} on a mix of {len(paths)}", progress) as bar:
        out = _core.simulate(json.dumps(spec_), None, bar.callback, None, paranoid)
    r = json.loads(out)
    tiers = r["stats"]["timing"].get("tiers", [])
    programs = []
    for path, c in zip(paths, r.get("cores") or []):
        programs.append({"trace": path, "runtime_ns": c["runtime_ns"], "ipc": c["ipc"], "accesses": c["accesses"],
                         "fast_hit_ratio": c["fast_hit_ratio"], "migrations": c.get("migrations")})
    runtime_us = r["runtime_ns"] / 1e3
    mix_stats: dict[str, Any] = {
        "programs": len(paths),
        "quantum": quantum,
        "throughput_accesses_per_us": r["accesses"] / runtime_us if runtime_us > 0 else None,
        "throughput_ipc": sum(p["ipc"] for p in programs) if programs and all(p["ipc"] is not None for p in programs) else None,
        "tier_utilization": {t["name"]: {"read": t.get("read_queue_utilization"), "write": t.get("write_queue_utilization")}
                             for t in tiers},
    }
    if alone:
        # each program alone on the machine: the same policy, platform and fast tier (in pages)
        fast = r.get("fast_capacity_pages")
        cap = f"{fast * r['config']['page_size'] // 1024}K" if fast else _cap(fast_capacity)
        for p in programs:
            a = run(p["trace"], platform, policy, cap, capacities, timing, format, cache, False, paranoid=paranoid,
                    repeat=repeat, time_scale=time_scale)
            p["runtime_alone_ns"] = a["runtime_ns"]
            p["slowdown"] = p["runtime_ns"] / a["runtime_ns"] if a["runtime_ns"] > 0 else None
        # a program's progress in the mix against alone: its runtime alone over its runtime here
        mix_stats["weighted_speedup"] = sum(p["runtime_alone_ns"] / p["runtime_ns"] for p in programs if p["runtime_ns"] > 0)
    r["programs"] = programs
    r["mix"] = mix_stats
    # what replay needs: the programs' traces and the quantum
    r["config"].update(mix=paths, quantum=quantum)
    if cache is not None:
        r["config"]["cache"] = cache
    return r


def check_scale(repeat: Any, time_scale: Any) -> tuple[int, float]:
    """``repeat`` as a whole number >= 1 and ``time_scale`` as a finite number > 0, or a
    :class:`TierkitError` naming the option."""
    import math

    if isinstance(repeat, str) and repeat.strip().isdigit():
        r = int(repeat)
    elif isinstance(repeat, (int, np.integer)) and not isinstance(repeat, bool):
        r = int(repeat)
    else:
        raise _core.TierkitError(f"--repeat: '{repeat}' is not a whole number")
    if r < 1:
        raise _core.TierkitError(f"--repeat: {r}: give at least 1 (1 = the trace once)")
    if r > 2**32 - 1:
        raise _core.TierkitError(f"--repeat: {r} is too large")
    try:
        k = float(time_scale)
    except (TypeError, ValueError):
        raise _core.TierkitError(f"--time-scale: '{time_scale}' is not a number") from None
    if not (k > 0 and math.isfinite(k)):
        raise _core.TierkitError(f"--time-scale: {time_scale}: give a positive number (1 = no scaling)")
    return r, k


def timeseries(result: Mapping[str, Any]) -> "Optional[pd.DataFrame]":
    """The per-window time series a policy recorded (``stats.policy.timeseries``: e.g. MBQ,
    migrations, threshold per window), as a DataFrame; None if the policy records none."""
    import pandas as pd

    ts = (result.get("stats", {}).get("policy") or {}).get("timeseries") if isinstance(result.get("stats", {}).get("policy"), dict) else None
    if not ts:
        return None
    return pd.DataFrame(ts["rows"], columns=ts["columns"])


def watch_frame(result: Mapping[str, Any]) -> "Optional[pd.DataFrame]":
    """A watched run's samples (``run(..., watch=...)``) as a DataFrame: one row per sample
    and region (``time_ms``, ``region`` by name, ``accesses``, ``pages_fast``,
    ``pages_slow``); ``None`` for a run that watched nothing."""
    w = result.get("watch")
    if not w:
        return None
    import pandas as pd

    df = pd.DataFrame(w["rows"], columns=w["columns"])
    df["region"] = [w["regions"][i] for i in df["region"]]
    return df


def representative(results: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The result that shows the platform as configured: the first run of a policy that
    respects capacities (the all-fast/all-slow references ignore them)."""
    return next((r for r in results if r["fast_capacity_pages"] is not None), results[0])


# --- the files a run reads, kept in its result (replaying re-creates them) --------------------

#: policy parameters that name an input file the result must carry
FILE_KEYS = ("guidance", "predictions")

def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

def spec_args(spec: str) -> list[tuple[str, str]]:
    """``name:k=v,...`` → [(k, v), ...] (values never hold commas in a canonical spec)."""
    _, _, args = spec.partition(":")
    return [tuple(kv.split("=", 1)) if "=" in kv else (kv, "") for kv in args.split(",") if kv]  # type: ignore[misc]

def with_args(spec: str, values: Mapping[str, Any], drop_empty: bool = False) -> str:
    """``spec`` with the given parameters' values replaced (those it has); ``drop_empty``
    leaves out parameters without a value (those the Python front end consumed)."""
    name, _, _ = spec.partition(":")
    args = [(k, str(values[k]) if k in values and values[k] is not None else v) for k, v in spec_args(spec)]
    if drop_empty:
        args = [(k, v) for k, v in args if v != ""]
    return name + (":" + ",".join(f"{k}={v}" for k, v in args) if args else "")

def keep_inputs(result: dict) -> dict:
    """Embed in ``result['config']['inputs']`` every file its policy spec names (guidance=,
    predictions=), with its SHA-256. Returns the result."""
    cfg = result["config"]
    inputs = {}
    for k, v in spec_args(str(cfg.get("policy", ""))):
        if k in FILE_KEYS and v:
            data = Path(v).read_bytes()
            inputs[k] = {"path": v, "sha256": sha256(data),
                         "zlib_base64": base64.b64encode(zlib.compress(data, 9)).decode("ascii")}
    if inputs:
        cfg["inputs"] = inputs
    return result
