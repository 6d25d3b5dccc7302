"""Studies at scale (``tierkit sweep``, docs/sweep.md): a study file names traces, platforms,
fast-tier capacities, timing models, policies with parameter grids and repeats; every
combination is a *cell*, run once and kept in a result store keyed by the cell's full
configuration, the trace's digest and tierkit's version, so that an interrupted sweep resumes
and a re-run is instant. Cells run in parallel on local cores (a process pool) or on a Ray
cluster; each cell is a pure function of its configuration, so the results are the same, bit
for bit, whichever runs them."""
from __future__ import annotations

import glob
import hashlib
import re
import itertools
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Union

from .._core import TierkitError, __version__

if TYPE_CHECKING:
    import pandas as pd

PathLike = Union[str, os.PathLike]

#: The study file's keys (anything else is an error, named).
KEYS = ("name", "traces", "platforms", "capacities", "timing", "policies", "tune", "kleio", "kleoniki", "repeat",
        "time_scale", "seeds", "baseline", "format", "cache", "guide_from", "grids")
#: What a grid (an entry of ``grids:``) may set; the rest comes from the study's top level.
GRID_KEYS = ("name", "traces", "platforms", "capacities", "timing", "policies", "tune", "kleio", "kleoniki", "repeat",
             "time_scale", "guide_from")
#: The analyses a cell may run besides a simulation, and their parameters (docs/sweep.md).
ANALYSES = {
    "tune": ("scheduler", "bucket", "grid", "patience", "within", "seed", "sweep"),
    "kleio": ("pages", "period", "history", "hidden", "epochs", "seed", "holdout", "weight", "infer_ns"),
    "kleoniki": ("pages", "period", "tol", "history", "hidden", "epochs", "seed", "holdout", "weight", "infer_ns"),
}
TRACE_KINDS = ("file", "workload", "synth", "mix")
MIX_KEYS = ("mix", "name", "quantum")
SYNTH_KEYS = ("synth", "accesses", "pages", "write_ratio", "theta", "phases", "hot_fraction", "insn_per_access", "seed", "name")
WORKLOAD_KEYS = ("workload", "size", "cache", "args", "slice", "name", "cores", "quantum")
FILE_KEYS = ("file", "format", "cache", "name", "cores", "quantum")


# --- the study file --------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceSpec:
    """One trace of a study: a file, a workload-suite program recorded at a size, or a
    synthetic trace; ``name`` is how tables and plots call it."""

    kind: str
    name: str
    path: Optional[str] = None           # file
    format: Optional[str] = None
    cache: Optional[str] = None
    workload: Optional[str] = None       # workload
    size: str = "small"
    args: tuple = ()
    slice: Optional[str] = None          # workload: only this many instructions (--slice)
    synth: Optional[dict] = None         # synth: the synth() arguments
    parts: tuple = ()                    # mix: the programs' traces (TraceSpecs), each on a core
    quantum: int = 1                     # mix, or threads on cores: --quantum
    cores: int = 1                       # file or workload: its threads on this many cores (--cores)


@dataclass(frozen=True)
class Task:
    """What a cell runs on its trace: a simulation under a policy (``kind`` "simulate",
    ``label`` the spec) or an analysis (``tune``, ``kleio``, ``kleoniki``) with its
    parameters (``params``: (name, value) pairs; ``label`` names them all)."""

    kind: str
    label: str
    params: tuple = ()


@dataclass
class Grid:
    """One product of lists: the study's top level, or an entry of its ``grids:``."""

    name: str
    traces: list[str]                    # names of the study's traces
    platforms: list[str]
    capacities: list[Any]
    timing: list[str]
    tasks: list[Task]
    repeat: list[int]
    time_scale: list[float]
    guide_from: dict = field(default_factory=dict)  # trace name -> the trace guided policies profile


@dataclass
class Study:
    name: str
    source: str
    traces: list[TraceSpec]
    grids: list[Grid]
    baseline: Optional[str]
    base_dir: Path = field(default_factory=Path.cwd)

    @property
    def policies(self) -> list[str]:
        """Every policy spec the study simulates (the baseline aside), in order."""
        return list(dict.fromkeys(t.label for g in self.grids for t in g.tasks if t.kind == "simulate"))


def _err(source: str, key: str, msg: str) -> TierkitError:
    return TierkitError(f"{source}: {key}: {msg}")


def _list(source: str, key: str, v: Any, default: Optional[list] = None) -> list:
    if v is None:
        if default is None:
            raise _err(source, key, "missing (give a list)")
        return list(default)
    return list(v) if isinstance(v, (list, tuple)) else [v]


def read_study(path: PathLike) -> dict:
    """The study file's content: YAML (``.yaml``, ``.yml``) or TOML (``.toml``); JSON is YAML."""
    from .. import untrusted

    p = Path(path)
    # a study file may come from anyone (docs/security.md): bounded in size and nesting
    text = untrusted.text(untrusted.read_bytes(p, "study file", untrusted.MAX_STUDY_BYTES), p)
    if p.suffix.lower() == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise TierkitError(f"{p}: not TOML: {e}") from None
        except RecursionError:
            raise TierkitError(f"{p}: nested deeper than {untrusted.MAX_DEPTH} levels") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark is not None else ""
            raise TierkitError(f"{p}: {where}not YAML: {getattr(e, 'problem', None) or e}") from None
        except RecursionError:
            raise TierkitError(f"{p}: nested deeper than {untrusted.MAX_DEPTH} levels") from None
    untrusted.check_depth(data, p)
    if not isinstance(data, dict):
        raise TierkitError(f"{p}: a study file is a mapping of keys ({', '.join(KEYS)})")
    return data


def _policy_grid(source: str, item: Any) -> list[str]:
    """``"otf"``, ``"otf:threshold=64"``, or ``{"otf": {"threshold": [32, 64], "ar": "os"}}``
    (a grid: every combination) → policy spec strings."""
    from .._core import parse_policy_spec

    if isinstance(item, str):
        specs = [item]
    elif isinstance(item, dict) and len(item) == 1:
        (name, params), = item.items()
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise _err(source, f"policies: {name}", "give its parameters as a mapping (threshold: [32, 64])")
        keys = list(params)
        values = [params[k] if isinstance(params[k], list) else [params[k]] for k in keys]
        specs = []
        for combo in itertools.product(*values):
            args = ",".join(f"{k}={_fmt(v)}" for k, v in zip(keys, combo))
            specs.append(f"{name}:{args}" if args else str(name))
    else:
        raise _err(source, "policies", f"{item!r}: give a policy spec or one mapping policy: {{parameter: [values]}}")
    from ..api import all_policies

    known = all_policies()
    for s in specs:
        try:
            name = json.loads(parse_policy_spec(s))["name"]
        except TierkitError as e:
            raise _err(source, "policies", str(e)) from None
        if name not in known:
            raise _err(source, "policies", f"unknown policy {name!r} (tierkit policies lists them)")
    return specs


def _analysis_grid(source: str, kind: str, params: Any) -> list[Task]:
    """``tune: {scheduler: [history, oracle]}``, ``kleio: {pages: [0.01, 0.1], period: [default,
    aligned]}`` → one task per combination of the lists; ``pages`` is the one list that is not
    an axis (the fractions of one study; a list of lists is an axis)."""
    key = kind
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _err(source, key, "give its parameters as a mapping (scheduler: [history, oracle])")
    unknown = [k for k in params if k not in ANALYSES[kind]]
    if unknown:
        raise _err(source, f"{key}: {unknown[0]}", f"unknown parameter (known: {', '.join(ANALYSES[kind])})")
    axes = []
    for k, v in params.items():
        if k == "pages":
            v = v if isinstance(v, list) and v and all(isinstance(x, list) for x in v) else [v]
            vals = []
            for x in v:
                xs = x if isinstance(x, list) else [x]
                if not xs or any(isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1 for f in xs):
                    raise _err(source, f"{key}: pages", f"{x!r}: fractions of the pages in (0, 1]")
                vals.append(tuple(float(f) for f in xs))
        else:
            vals = v if isinstance(v, list) else [v]
        for x in vals:
            _check_param(source, kind, k, x)
        axes.append((k, vals))
    tasks = []
    for combo in itertools.product(*[vals for _, vals in axes]):
        pairs = tuple((k, x) for (k, _), x in zip(axes, combo))
        label = ",".join(f"{k}={'/'.join(_fmt(f) for f in x) if k == 'pages' else _fmt(x)}" for k, x in pairs)
        tasks.append(Task(kind, f"{kind}:{label}" if label else kind, pairs))
    return tasks


def _check_param(source: str, kind: str, k: str, v: Any) -> None:
    where = f"{kind}: {k}"
    if k == "scheduler" and v not in ("history", "oracle"):
        raise _err(source, where, f"{v!r}: history or oracle")
    if k == "period":
        rules = ("default", "aligned") if kind == "kleio" else ("cori", "aligned")
        if not (v in rules or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)):
            raise _err(source, where, f"{v!r}: a number of accesses >= 1, or {' or '.join(rules)}")
    low = 0 if k in ("seed", "epochs") else 1
    if k in ("bucket", "grid", "patience", "history", "hidden", "epochs", "seed") and (
            isinstance(v, bool) or not isinstance(v, int) or v < low):
        raise _err(source, where, f"{v!r}: a whole number >= {low}")
    if k in ("within", "tol", "holdout") and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise _err(source, where, f"{v!r}: a number")
    if k == "sweep" and not isinstance(v, bool):
        raise _err(source, where, f"{v!r}: true or false")
    if k == "weight" and v not in ("none", "balanced"):
        raise _err(source, where, f"{v!r}: none or balanced")


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _short(v: Any) -> str:
    from ..untrusted import short

    return v if isinstance(v, str) and len(v) <= 40 else short(v)


def _trace_specs(source: str, items: list, seeds: list, base: Path, default_format, default_cache) -> list[TraceSpec]:
    out = _parse_traces(source, items, seeds, base, default_format, default_cache, True)
    names = [t.name for t in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise _err(source, "traces", f"two traces are called {dup!r}: give one of them a name:")
    return out


def _parse_traces(source: str, items: list, seeds: list, base: Path, default_format, default_cache,
                  mixes: bool) -> list[TraceSpec]:
    out: list[TraceSpec] = []
    for it in items:
        if isinstance(it, str):
            it = {"file": it}
        if not isinstance(it, dict):
            raise _err(source, "traces", f"{it!r}: give a path or glob, or a mapping with file:, workload: or synth:")
        kinds = [k for k in TRACE_KINDS if k in it]
        if len(kinds) != 1:
            raise _err(source, "traces", f"{it!r}: give exactly one of file:, workload:, synth:, mix:")
        kind = kinds[0]
        allowed = {"file": FILE_KEYS, "workload": WORKLOAD_KEYS, "synth": SYNTH_KEYS, "mix": MIX_KEYS}[kind]
        extra = [k for k in it if k not in allowed]
        if extra:
            raise _err(source, f"traces: {_short(it[kind])}", f"unknown key {extra[0]!r} (known: {', '.join(allowed)})")
        if it.get("name") is not None:
            # a trace's name names its file in the study's folder: never a path
            from ..untrusted import plain_name

            plain_name(it["name"], source, f"traces: {_short(it[kind])}: name")
        if kind == "mix":
            # several programs on cores of their own, sharing the tiers (docs/models.md, "Many cores")
            if not mixes:
                raise _err(source, "traces: mix", "a mix's programs are traces, not mixes")
            if not isinstance(it["mix"], list) or len(it["mix"]) < 2:
                raise _err(source, "traces: mix", "give a list of at least two traces, each a program")
            parts = _parse_traces(source, it["mix"], [1], base, default_format, default_cache, False)
            q = _whole(source, "traces: mix: quantum", it.get("quantum", 1), "accesses")
            out.append(TraceSpec("mix", str(it.get("name") or f"mix-{len(parts)}"), parts=tuple(parts), quantum=q))
            continue
        # a trace's threads on several cores, sharing the tiers (file and workload traces)
        cores = _whole(source, f"traces: {it[kind]}: cores", it.get("cores", 1), "cores")
        quantum = _whole(source, f"traces: {it[kind]}: quantum", it.get("quantum", 1), "accesses")
        if "quantum" in it and cores == 1:
            raise _err(source, f"traces: {it[kind]}: quantum", "only with cores: N (N > 1)")
        if not mixes and cores > 1:
            raise _err(source, f"traces: mix: {it[kind]}: cores", "a mix's program runs on one core")
        first = len(out)
        if kind == "file":
            pattern = os.path.expandvars(str(it["file"]))
            if "$" in pattern:
                raise _err(source, "traces", f"{it['file']}: an environment variable in it is not set")
            full = pattern if os.path.isabs(pattern) else str(base / pattern)
            matches = sorted(glob.glob(full)) if glob.has_magic(pattern) else [full]
            if not matches:
                raise _err(source, "traces", f"{pattern}: matches no file")
            for m in matches:
                if not os.path.exists(m):
                    raise _err(source, "traces", f"{pattern}: no such file")
                if os.path.isdir(m):
                    raise _err(source, "traces", f"{m}: a folder: a study's traces are files (convert a drmemtrace folder with 'tierkit trace convert' first)")
                out.append(TraceSpec("file", str(it["name"]) if len(matches) == 1 and it.get("name") else Path(m).name,
                                     path=m, format=it.get("format", default_format), cache=it.get("cache", default_cache)))
        elif kind == "workload":
            from .. import workloads

            name = str(it["workload"])
            workloads._check_name(name)
            size = str(it.get("size", "small"))
            workloads._check_size(size)
            args = tuple(str(a) for a in (it.get("args") or ()))
            label = it.get("name") or f"{name}-{size}" + ("-" + "-".join(args) if args else "")
            sl = it.get("slice")
            out.append(TraceSpec("workload", label, workload=name, size=size, args=args, cache=it.get("cache"),
                                 slice=None if sl is None else _fmt(sl)))
        else:
            kind_s = str(it["synth"])
            params = {k: it[k] for k in SYNTH_KEYS if k in it and k not in ("synth", "name", "seed")}
            for k in ("accesses", "pages"):
                if k not in params:
                    raise _err(source, f"traces: synth {kind_s}", f"{k}: missing")
            for seed in ([it["seed"]] if "seed" in it else seeds):
                label = it.get("name") or f"{kind_s}"
                label = f"{label}-s{seed}" if len(seeds) > 1 and "seed" not in it else label
                out.append(TraceSpec("synth", label, synth={"kind": kind_s, **{k: _fmt(v) if k in ("accesses", "pages") else v
                                                                                 for k, v in params.items()}, "seed": int(seed)}))
        if cores > 1:
            out[first:] = [replace(t, cores=cores, quantum=quantum) for t in out[first:]]
    return out


def _whole(source: str, key: str, v: Any, unit: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _err(source, key, f"{v!r}: a whole number of {unit} >= 1")
    return v


def load_study(path: PathLike) -> Study:
    """Read and check a study file (docs/sweep.md); every mistake is one error naming the file
    and the key."""
    p = Path(path)
    src = str(p)
    d = read_study(p)
    unknown = [k for k in d if k not in KEYS]
    if unknown:
        raise _err(src, unknown[0], f"unknown key (known: {', '.join(KEYS)})")
    if d.get("name") is not None:
        from ..untrusted import plain_name

        plain_name(d["name"], src, "name")
    seeds = _list(src, "seeds", d.get("seeds"), [1])
    for x in seeds:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 1 << 64:
            raise _err(src, "seeds", f"{_short(x)}: a whole number in 0..2^64-1")
    traces = _trace_specs(src, _list(src, "traces", d.get("traces")), seeds, p.parent, d.get("format"), d.get("cache"))
    if not traces:
        raise _err(src, "traces", "empty")
    baseline = d.get("baseline", "all-slow")
    if baseline is not None:
        baseline = str(baseline)
        _policy_grid(src, baseline)
    names = [t.name for t in traces]
    if "grids" in d:
        entries = d["grids"]
        if not isinstance(entries, list) or not entries:
            raise _err(src, "grids", "give a list of grids (mappings of platforms:, capacities:, policies:, ...)")
        grids = []
        for i, g in enumerate(entries):
            if not isinstance(g, dict):
                raise _err(src, f"grids[{i}]", "a grid is a mapping (platforms:, capacities:, policies:, ...)")
            gname = str(g.get("name", f"grid{i + 1}"))
            bad = [k for k in g if k not in GRID_KEYS]
            if bad:
                raise _err(src, f"grids: {gname}: {bad[0]}", f"unknown key (known: {', '.join(GRID_KEYS)})")
            has_tasks = any(k in g for k in ("policies", *ANALYSES))
            merged = {k: v for k, v in d.items() if k not in ("grids", "traces")
                      and not (has_tasks and k in ("policies", *ANALYSES))}
            merged.update({k: v for k, v in g.items() if k != "traces"})
            sel = None
            if "traces" in g:
                sel = [str(x) for x in _list(src, f"grids: {gname}: traces", g["traces"])]
                for x in sel:
                    if x not in names:
                        raise _err(src, f"grids: {gname}: traces: {x}",
                                   f"no trace of the study is called so (its traces: {', '.join(names)})")
            grids.append(_grid(f"{src}: grids: {gname}", gname, merged, names, p.parent, sel))
        dup = next((g.name for g in grids if [x.name for x in grids].count(g.name) > 1), None)
        if dup is not None:
            raise _err(src, "grids", f"two grids are called {dup!r}")
    else:
        grids = [_grid(src, "main", d, names, p.parent)]
    return Study(str(d.get("name") or p.stem), src, traces, grids, baseline, p.parent)


def _grid(src: str, name: str, d: dict, trace_names: list[str], base: Path, sel: Optional[list[str]] = None) -> Grid:
    """One grid's lists, checked; ``src`` names the file (and the grid) in errors."""
    from ..api import check_scale

    for k in ("platforms", "capacities", "timing", "repeat", "time_scale"):
        if isinstance(d.get(k), (list, tuple)) and not d[k]:
            raise _err(src, k, "empty: give at least one value (or leave it out for the default)")
    platforms = [str(x) for x in _list(src, "platforms", d.get("platforms"), ["dram-pmem"])]
    for pl in platforms:
        _check_platform(src, pl, base)
    platforms = [str(base / pl) if _is_file(pl) and not os.path.isabs(pl) else pl for pl in platforms]
    capacities = _list(src, "capacities", d.get("capacities"), [0.2])
    for c in capacities:
        if isinstance(c, bool) or not isinstance(c, (int, float, str)):
            raise _err(src, "capacities", f"{c!r}: a fraction of the footprint (0.2) or a size ('64M')")
        if isinstance(c, (int, float)) and not 0 < c <= 1:
            raise _err(src, "capacities", f"{c}: a fraction in (0, 1], or a size or percentage as a string ('64M', '125%')")
    timing = [str(t) for t in _list(src, "timing", d.get("timing"), ["simple"])]
    for t in timing:
        if t not in ("simple", "detailed"):
            raise _err(src, "timing", f"{t!r}: simple or detailed")
    # a list in the list is spliced in (a YAML alias of another grid's policies: [a, *timed])
    items = [x for item in _list(src, "policies", d.get("policies"), [])
             for x in (item if isinstance(item, list) else [item])]
    tasks = [Task("simulate", s) for item in items for s in _policy_grid(src, item)]
    for kind in ANALYSES:
        if kind in d:
            tasks += _analysis_grid(src, kind, d[kind])
    if not tasks:
        raise _err(src, "policies", "missing or empty (give policies:, or an analysis: tune:, kleio:, kleoniki:)")
    repeat = _list(src, "repeat", d.get("repeat"), [1])
    time_scale = _list(src, "time_scale", d.get("time_scale"), [1.0])
    try:
        for r, s in itertools.product(repeat, time_scale):
            check_scale(r, s)
    except TierkitError as e:
        raise _err(src, "repeat/time_scale", str(e).replace("--", "")) from None
    gf = d.get("guide_from") or {}
    if not isinstance(gf, dict):
        raise _err(src, "guide_from", "a mapping: trace name: the trace whose profile guides it")
    for k, v in gf.items():
        for x in (k, v):
            if str(x) not in trace_names:
                raise _err(src, f"guide_from: {x}", f"no trace of the study is called so (its traces: {', '.join(trace_names)})")
    return Grid(name, list(sel or trace_names), platforms, capacities, timing, tasks, [int(r) for r in repeat], [float(s) for s in time_scale],
                {str(k): str(v) for k, v in gf.items()})


def _is_file(pl: str) -> bool:
    return pl.endswith((".toml", ".yaml", ".yml", ".json"))


def _check_platform(src: str, pl: str, base: Path) -> None:
    from ..api import platform

    try:
        platform(str(base / pl) if _is_file(pl) and not os.path.isabs(pl) else pl)
    except TierkitError as e:
        raise _err(src, "platforms", str(e)) from None


# --- cells -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One run of a study: everything that decides its result (and, not in its key, the grid
    that asked for it and where its files are on this machine)."""

    trace: str            # the trace's name in the study
    path: str             # where the trace is on this machine
    digest: str           # SHA-256 of the trace file's bytes
    format: Optional[str]
    cache: Optional[str]
    platform: str
    platform_digest: Optional[str]  # of a platform file's bytes (None for a preset)
    fast_capacity: Any
    timing: str
    policy: str           # the policy spec, or the analysis' label
    repeat: int
    time_scale: float
    task: str = "simulate"
    params: tuple = ()    # an analysis' (name, value) pairs
    guide_trace: Optional[str] = None   # guided policies: the trace whose profile guides them
    guide_path: Optional[str] = None
    guide_digest: Optional[str] = None
    grid: str = "main"
    mix_paths: tuple = ()       # a mix: its programs' traces (`path` is the first), and digests
    mix_digests: tuple = ()
    quantum: int = 1
    cores: int = 1              # a trace's threads on this many cores

    def config(self) -> dict:
        """What the key is made of: the path is where the trace is, not what it is; the grid
        is who asked. A simulation without guidance has the keys it always had."""
        c = asdict(self)
        for k in ("path", "grid", "guide_trace", "guide_path", "mix_paths"):
            del c[k]
        if not self.mix_digests:
            del c["mix_digests"]
        else:
            c["mix_digests"] = list(self.mix_digests)
        if not self.mix_digests and self.cores == 1:
            del c["quantum"]
        if self.cores == 1:
            del c["cores"]
        if self.task == "simulate":
            del c["task"], c["params"]
        else:
            c["params"] = [list(x) for x in self.params]
        if self.guide_digest is None:
            del c["guide_digest"]
        c["platform"] = Path(self.platform).name if self.platform_digest else self.platform
        c["version"] = __version__
        return c

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.config(), sort_keys=True).encode()).hexdigest()


def file_digest(path: PathLike, memo: Optional[dict] = None) -> str:
    """SHA-256 of a file's bytes, remembered in ``memo`` by path, size and modification time."""
    st = os.stat(path)
    k = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
    if memo is not None and k in memo:
        return memo[k]
    from ..learned import file_digest as sha256_of

    d = sha256_of(path)
    if memo is not None:
        memo[k] = d
    return d


def materialize(t: TraceSpec, out: Path, progress: Optional[bool] = None) -> str:
    """The trace file of a spec: a file as it is; a workload recorded, or a synthetic trace
    written, once into ``out/traces/`` (reused by later sweeps)."""
    if t.kind == "file":
        return t.path  # type: ignore[return-value]
    d = out / "traces"
    d.mkdir(parents=True, exist_ok=True)
    spec = asdict(t)
    what = {k: spec[k] for k in ("kind", "workload", "size", "args", "cache", "synth")}
    if t.slice:  # a key only where it is set: the traces recorded before keep their names
        what["slice"] = t.slice
    tag = hashlib.sha256(json.dumps(what, sort_keys=True, default=list).encode()).hexdigest()[:16]
    # (a workload's label holds its arguments: only plain characters go into the file name)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", t.name).lstrip(".")[:80] or "trace"
    f = d / f"{stem}-{tag}.tkt"
    if f.exists():
        return str(f)
    if t.kind == "workload":
        from .. import workloads

        workloads.trace(t.workload, t.size, f, cache=t.cache, force=True, extra_args=t.args, slice=t.slice,  # type: ignore[arg-type]
                        progress=progress)
    else:
        from ..api import synth

        s = dict(t.synth or {})
        synth(s.pop("kind"), f, force=True, progress=progress, **s)
    return str(f)


def cells(study: Study, out: Path, progress: Optional[bool] = None, memo: Optional[dict] = None) -> list[Cell]:
    """Every cell of the study, grid by grid, the baseline's included, in a fixed order: trace,
    platform, capacity, timing, repeat, time scale, then task. A cell two grids ask for appears
    in both (with the same key: it runs once). Analyses run once per trace, platform, capacity
    and timing (repeat and time scale are the simulations')."""
    specs = {t.name: t for t in study.traces}
    paths: dict[str, tuple[str, str]] = {}

    def trace_file(name: str) -> tuple[str, str]:
        if name not in paths:
            path = materialize(specs[name], out, progress)
            paths[name] = (path, file_digest(path, memo))
        return paths[name]

    mixes: dict[str, tuple[tuple, tuple]] = {}

    def mix_files(t: TraceSpec) -> tuple[tuple, tuple]:
        if t.name not in mixes:
            ps = [materialize(x, out, progress) for x in t.parts]
            mixes[t.name] = (tuple(ps), tuple(file_digest(x, memo) for x in ps))
        return mixes[t.name]

    out_cells = []
    for g in study.grids:
        tasks = list(g.tasks)
        if study.baseline and any(t.kind == "simulate" for t in tasks):
            tasks = list(dict.fromkeys(tasks + [Task("simulate", study.baseline)]))
        plats = [(pl, file_digest(pl, memo) if _is_file(pl) else None) for pl in g.platforms]
        for name in g.traces:
            t = specs[name]
            mpaths: tuple = ()
            mdigs: tuple = ()
            if t.kind == "mix":
                if any(x.kind != "simulate" for x in tasks):
                    raise TierkitError(f"{study.source}: grids: {g.name}: {name}: a mix runs simulations only, not tune, kleio or kleoniki")
                mpaths, mdigs = mix_files(t)
                path, dig = mpaths[0], "mix:" + hashlib.sha256("+".join(mdigs).encode()).hexdigest()
            else:
                path, dig = trace_file(name)
                if t.cores > 1 and any(x.kind != "simulate" for x in tasks):
                    raise TierkitError(f"{study.source}: grids: {g.name}: {name}: a trace on several cores runs simulations only, not tune, kleio or kleoniki")
            fmt = t.format if t.kind == "file" else None
            cache = t.cache if t.kind == "file" else None
            guide = g.guide_from.get(name)
            gpath, gdig = trace_file(guide) if guide else (None, None)
            for (pl, pd_), cap, tm, rep, ts, task in itertools.product(plats, g.capacities, g.timing, g.repeat,
                                                                        g.time_scale, tasks):
                if task.kind != "simulate":
                    if (rep, ts) != (g.repeat[0], g.time_scale[0]):
                        continue
                    rep, ts = 1, 1.0
                guided = task.kind == "simulate" and guide is not None and task.label.split(":", 1)[0] == "guided"
                out_cells.append(Cell(name, path, dig, fmt, cache, pl, pd_, cap, tm, task.label, rep, ts, task.kind,
                                      task.params, guide if guided else None, gpath if guided else None,
                                      gdig if guided else None, g.name, mpaths, mdigs,
                                      t.quantum if mpaths or t.cores > 1 else 1, t.cores))
    return out_cells


# --- running a cell --------------------------------------------------------------------------


def run_cell(cell: Cell) -> dict:
    """Run one cell: its record for the store (``result`` or a one-line ``error``)."""
    rec: dict[str, Any] = {"key": cell.key, "config": cell.config(), "trace_path": cell.path}
    t0 = time.perf_counter()
    try:
        rec["result"] = _run_task(cell)
    except TierkitError as e:
        rec["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    except Exception as e:  # an internal failure of one cell does not stop the sweep
        rec["error"] = f"internal error: {type(e).__name__}: {e}".splitlines()[0]
    rec["seconds"] = time.perf_counter() - t0
    return rec


def _run_task(cell: Cell) -> dict:
    from .. import api

    if cell.task == "simulate" and cell.mix_paths:
        return api.run(list(cell.mix_paths), cell.platform, cell.policy, cell.fast_capacity, None, cell.timing, cell.format,
                       cell.cache, False, repeat=cell.repeat, time_scale=cell.time_scale, mix=True, quantum=cell.quantum)
    if cell.task == "simulate":
        return api.run(cell.path, cell.platform, cell.policy, cell.fast_capacity, None, cell.timing, cell.format,
                       cell.cache, False, guide_from=cell.guide_path, repeat=cell.repeat, time_scale=cell.time_scale,
                       cores=cell.cores, quantum=cell.quantum)
    p = dict(cell.params)
    common = dict(platform=cell.platform, fast_capacity=cell.fast_capacity, timing=cell.timing, format=cell.format,
                  cache=cell.cache, progress=False)
    if cell.task == "tune":
        return api.tune(cell.path, **p, **common)
    from .. import learned

    period = p.pop("period", None)
    if period == "aligned":
        period = learned.aligned_period(cell.path, p.get("history", 8), format=cell.format, cache=cell.cache)
    elif period == "default":
        period = learned.default_period(cell.path, format=cell.format, cache=cell.cache, progress=False)
    elif period == "cori":
        period = None
    cap = common.pop("fast_capacity")
    kw = dict(pages=list(p.pop("pages", (0.01, 0.02, 0.05, 0.1, 0.2) if cell.task == "kleio" else (0.05, 0.1, 0.2))),
              period=period, history=p.pop("history", 8), hidden=p.pop("hidden", 16), epochs=p.pop("epochs", 60),
              seed=p.pop("seed", 0), train=None, holdout=p.pop("holdout", 0.5), weight=p.pop("weight", "none"),
              threads=None, fast_capacity=cap, infer_ns=p.pop("infer_ns", "measure"), **common)
    if cell.task == "kleio":
        r = api._learned("kleio", cell.path, tol=0.5, **kw)
    else:
        r = api._kleoniki(cell.path, tol=p.pop("tol", 0.5), **kw)
    # a cell keeps the study's figures, not its runs with their inputs (tierkit kleio --json does)
    r.pop("results", None)
    return r


# --- the store -------------------------------------------------------------------------------


class Store:
    """``DIR/cells/KK/KEY.json``: one file per finished cell, written whole (a ``.partial``
    renamed). A cell with a result is done; one with an error is tried again by the next sweep.
    A record is read as untrusted (docs/security.md): one that is not the cell's (another key
    or configuration) or whose result is not what a run gives (a figure missing, not a number,
    not finite, negative) counts as not run, and the sweep runs the cell again."""

    def __init__(self, out: PathLike) -> None:
        self.dir = Path(out) / "cells"
        #: records read and checked, by key, with the file's identity when read (device,
        #: inode, size, mtime): a sweep asks for each record several times (is it done, its
        #: row, the dataset) and reads and checks it once while the file is unchanged
        self._checked: dict[str, tuple[tuple[int, int, int, int], Optional[dict]]] = {}

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, cell: Cell) -> Optional[dict]:
        from .. import untrusted

        p = self.path(cell.key)
        try:
            st = p.stat()
        except OSError:
            return None  # not run yet
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._checked.get(cell.key)
        if hit is not None and hit[0] == ident:
            return hit[1]
        try:
            rec = untrusted.read_json(p, "store record", untrusted.MAX_RECORD_BYTES)
        except TierkitError:
            rec = None  # damaged: run it again
        ok = rec if rec is not None and valid_record(rec, cell) else None
        self._checked[cell.key] = (ident, ok)
        return ok

    def done(self, cell: Cell) -> bool:
        rec = self.get(cell)
        return rec is not None and "result" in rec

    def put(self, rec: dict) -> None:
        p = self.path(rec["key"])
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".partial")
        tmp.write_text(json.dumps(rec))
        os.replace(tmp, p)


#: a simulation's figures in a stored result, by what they must be (api.RESULT_COLUMNS): the
#: table's columns, so a figure of another type would also break results.parquet
_SIM_FIGURES = {
    "str": ("trace", "platform", "policy", "timing"),
    "count": ("accesses", "reads", "writes", "pages", "migrations", "migrated_bytes", "periods"),
    "amount": ("runtime_ns", "migration_time_ns", "energy_j"),
}
_NONNEG_SUFFIXES = ("_ns", "_s", "_seconds", "_bytes", "_pages", "_count", "accesses", "migrations")


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63  # an int64 column


def _is_amount(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 2.0 ** 63


def valid_record(rec: Any, cell: Cell) -> bool:
    """Whether a store record is ``cell``'s, with a result of the shape a run gives or a
    one-line error."""
    if not isinstance(rec, dict) or rec.get("key") != cell.key:
        return False
    if rec.get("config") != json.loads(json.dumps(cell.config())):
        return False
    if "result" not in rec:
        return isinstance(rec.get("error"), str)
    r = rec["result"]
    if not isinstance(r, dict) or not _finite_tree(r):
        return False
    if cell.task != "simulate":
        # an analysis: its figures are scalars (the table's columns), its rows objects of scalars
        rows = r.get("rows", [])
        return isinstance(rows, list) and all(isinstance(x, dict) for x in rows) and all(
            _scalar_or_nested(v) for x in [r, *rows] for v in x.values())
    if not all(isinstance(r.get(k), str) for k in _SIM_FIGURES["str"]):
        return False
    if not all(_is_count(r.get(k)) for k in _SIM_FIGURES["count"]):
        return False
    if not all(_is_amount(r.get(k)) for k in _SIM_FIGURES["amount"]):
        return False
    h, ipc = r.get("fast_hit_ratio"), r.get("ipc")
    if not (h is None or (_is_amount(h) and h <= 1)) or not (ipc is None or _is_amount(ipc)):
        return False
    if not all(r.get(k) is None or _is_count(r[k]) for k in ("activations", "fast_capacity_pages")):
        return False
    w = r.get("warnings", [])
    if not isinstance(w, list) or not all(isinstance(x, str) for x in w):
        return False
    if cell.mix_paths:
        m, progs = r.get("mix"), r.get("programs")
        if not isinstance(m, dict) or not all(v is None or _is_amount(v) for k, v in m.items()
                                              if k in ("weighted_speedup", "throughput_accesses_per_us")):
            return False
        if not isinstance(progs, list) or not all(isinstance(p, dict) and (p.get("slowdown") is None or _is_amount(p["slowdown"]))
                                                  for p in progs):
            return False
    return True


def _scalar_or_nested(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, dict, list))


def _finite_tree(doc: Any) -> bool:
    """Every number in a result finite, and those named as counts, sizes or times >= 0."""
    stack: list = [(None, doc)]
    while stack:
        k, v = stack.pop()
        if isinstance(v, dict):
            stack += list(v.items())
        elif isinstance(v, list):
            stack += [(k, x) for x in v]
        elif isinstance(v, float) and not math.isfinite(v):
            return False
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(k, str) \
                and k.endswith(_NONNEG_SUFFIXES) and v < 0:
            return False
    return True


# --- the sweep -------------------------------------------------------------------------------


#: the file that marks a folder as a sweep's store (``sweep --out`` writes into no other
#: folder that holds files without ``--force``)
STORE_MARK = "tierkit-store.json"


def claim(out: Path, force: bool = False) -> None:
    """Make ``out`` a sweep's store: a new or empty folder, or one a sweep made (its
    ``STORE_MARK``, or the ``cells/`` of a store made before the mark); any other folder with
    files in it only with ``force``."""
    if out.exists() and not out.is_dir():
        raise TierkitError(f"{out}: exists and is not a folder (--out names the study's folder)")
    ours = (out / STORE_MARK).is_file() or (out / "cells").is_dir()
    if out.is_dir() and not ours and any(out.iterdir()) and not force:
        raise TierkitError(f"{out}: a folder with files that is not a sweep's store: name a new folder, "
                           f"or give --force to write the store into it")
    out.mkdir(parents=True, exist_ok=True)
    if not (out / STORE_MARK).is_file():
        from ..output import write_text

        write_text(out / STORE_MARK, json.dumps({"format": "tierkit-sweep-store", "version": 1}) + "\n", True)


def _read_memo(path: Path) -> dict:
    """The digests memo (``digests.json``): path|size|mtime -> SHA-256; anything else in it is
    dropped (the digests are computed again)."""
    from .. import untrusted

    try:
        memo = untrusted.read_json(path, "digests memo", untrusted.MAX_RECORD_BYTES)
    except TierkitError:
        return {}
    if not isinstance(memo, dict):
        return {}
    return {k: v for k, v in memo.items() if isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v)}


def collect(study: Study, all_cells: Sequence[Cell], store: Store) -> pd.DataFrame:
    """The study's table from the store: a row per cell of each grid (an analysis with several
    fractions of pages, a row per fraction), its configuration and figures, and
    ``runtime_vs_<baseline>`` (against the baseline in the same grid, trace, platform,
    capacity, timing, repeat and time scale)."""
    import pandas as pd

    from ..api import RESULT_COLUMNS, mix_figures

    rows = []
    for c in all_cells:
        rec = store.get(c) or {"error": "not run"}
        r = rec.get("result")
        row: dict[str, Any] = {
            "grid": c.grid, "task": c.task, "trace": c.trace,
            "platform": Path(c.platform).stem if c.platform_digest else c.platform,
            "fast_capacity": str(c.fast_capacity), "timing": c.timing, "policy": c.policy, "repeat": c.repeat,
            "time_scale": c.time_scale, "guide_from": c.guide_trace}
        if c.task == "simulate":
            for k in RESULT_COLUMNS:
                if k not in row and k != "warnings":
                    row[k] = r.get(k) if r else None
            row["warnings"] = list(r.get("warnings") or []) if r else []
            if c.mix_paths:
                row["programs"] = len(c.mix_paths)
                row.update(mix_figures(r or {}))
            if c.cores > 1:
                row["cores"] = c.cores
        tail = {"trace_digest": c.digest, "key": c.key, "error": rec.get("error")}
        if c.task == "simulate" or not r:
            rows.append({**row, **tail})
            continue
        # the configuration's columns stay the cell's (the result repeats some in its own form)
        flat = {k: v for k, v in _flatten(r).items() if k not in row}
        if c.task == "tune":
            rows.append({**row, **flat, **tail})
        else:  # kleio, kleoniki: a row per fraction of the pages
            for x in r.get("rows") or [{}]:
                rows.append({**row, **flat, **{k: v for k, v in x.items() if k not in row and not isinstance(v, (list, dict))},
                             **tail})
    df = pd.DataFrame(rows)
    df["trace"] = df["trace"].astype(str)
    if study.baseline and "runtime_ns" in df:
        sim = df["task"] == "simulate"
        group = ["grid", "trace", "platform", "fast_capacity", "timing", "repeat", "time_scale"]
        base = df[sim & (df["policy"] == study.baseline)].set_index(group)["runtime_ns"]
        base = base[~base.index.duplicated()]  # a cell two grids share is one run
        idx = pd.MultiIndex.from_frame(df[group])
        vs = df["runtime_ns"].to_numpy(dtype=float) / base.reindex(idx).to_numpy(dtype=float)
        df[f"runtime_vs_{study.baseline}"] = [v if s_ else None for v, s_ in zip(vs, sim)]
        # the same under a name df.query takes (runtime_vs_all_slow), as tierkit.compare's frames
        from ..results import query_name

        alias = query_name(f"runtime_vs_{study.baseline}")
        if alias not in df.columns:
            df[alias] = df[f"runtime_vs_{study.baseline}"]
    return df


def _flatten(r: dict) -> dict:
    """An analysis' scalar figures: top-level scalars as they are, a mapping of mappings
    (Cori's ``methods``) as ``<inner>_<figure>``, a list by its length (``<name>_count``)."""
    out: dict[str, Any] = {}
    for k, v in r.items():
        if k == "rows":
            continue
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(v2, dict):
                    for k3, v3 in v2.items():
                        if not isinstance(v3, (list, dict)):
                            out[f"{k2}_{k3}"] = v3
        elif isinstance(v, list):
            out[f"{k}_count"] = len(v)
        else:
            out[k] = v
    return out


def write_dataset(df: pd.DataFrame, records: Iterable[Optional[dict]], out: Path) -> None:
    """``results.parquet`` (the table) and ``results.jsonl`` (each cell's record), written whole."""
    from ..output import write_bytes

    import io

    buf = io.BytesIO()
    try:
        df.to_parquet(buf, index=False)
    except Exception as e:  # pyarrow's errors have no common base: a column of mixed types
        col = e.args[1] if len(getattr(e, "args", ())) > 1 else e
        raise TierkitError(f"{out / 'results.parquet'}: the store's records do not make one table ({col}): "
                           f"a record edited by hand? remove it from {out / 'cells'} to run its cell again") from None
    write_bytes(out / "results.parquet", buf.getvalue(), True)
    write_bytes(out / "results.jsonl", "".join(json.dumps(r) + "\n" for r in records if r is not None).encode(), True)
