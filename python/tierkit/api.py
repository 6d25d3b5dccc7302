"""The Python API: every CLI operation as a function returning pandas objects or dicts."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

# pandas is imported inside the functions that return DataFrames: loading it takes ~0.3 s,
# which most CLI commands do not need
if TYPE_CHECKING:
    import pandas as pd

import numpy as np

from . import _core, _engine, results as _results
from . import installed
from . import deploy as _deploy
from ._engine import (RESULT_COLUMNS, PathLike, PolicyLike, _cap, _s, check_scale, json_path, mix_figures,  # noqa: F401
                      representative, run_spec, timeseries, trace_info, watch_frame)
from .output import check_new as check_new_file  # noqa: F401
from .progress import Bar










def detect_format(path: PathLike) -> str:
    return _core.detect_format(_s(path))


def read_trace(path: PathLike, format: Optional[str] = None, cache: Optional[str] = None,
               limit: Optional[int] = None) -> pd.DataFrame:
    """The accesses of a trace as a DataFrame (``addr``, ``write``, ``insn``, ``ns``,
    ``size``, ``tid``, ``pc``); ``df.attrs['events']`` holds the other records and
    ``df.attrs['meta']`` the header (both shared by the frames derived from this one, not
    copied into each: :class:`tierkit.results.Shared`)."""
    import pandas as pd

    d = _core.trace_read(_s(path), format, cache, limit)
    df = pd.DataFrame({k: d[k] for k in ("addr", "write", "insn", "ns", "size", "tid", "pc")})
    df.attrs["events"] = _results.Shared(json.loads(d["events"]))
    df.attrs["meta"] = _results.SharedDict(json.loads(d["meta"]))
    return df


def write_trace(path: PathLike, addr: Sequence[int], write: Optional[Sequence[bool]] = None,
                insn: Optional[Sequence[int]] = None, page_size: int = 4096, force: bool = False) -> dict:
    """Write a native trace from arrays of addresses (and write flags, instruction counts)."""
    a = np.ascontiguousarray(addr, dtype=np.uint64)
    w = np.zeros(len(a), dtype=bool) if write is None else np.ascontiguousarray(write, dtype=bool)
    i = None if insn is None else np.ascontiguousarray(insn, dtype=np.uint64)
    return json.loads(_core.trace_write(_s(path), a, w, i, page_size, force))


def convert(src: PathLike, out: PathLike, format: Optional[str] = None, to: Optional[str] = None,
            cache: Optional[str] = None, force: bool = False, progress: Optional[bool] = None) -> dict:
    """Convert a trace (any readable format, optionally through the cache filter) to the
    native format or a text format; returns a report with the summary of what was written."""
    with Bar(f"converting {Path(src).name}", progress) as bar:
        return json.loads(_core.trace_convert(_s(src), _s(out), format, to, cache, force, bar.callback))


def _check_u64(opt: str, v: Any) -> None:
    """A whole number in 0..2^64-1 for a core parameter, else :class:`TierkitError` naming
    ``opt``."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 2**64:
        raise _core.TierkitError(f"{opt}: {v!r} is not a whole number in 0..{2**64 - 1}")


def synth(kind: str, out: PathLike, accesses: Union[int, str], pages: Union[int, str], seed: int = 1, write_ratio: float = 0.0,
          theta: float = 0.99, phases: int = 4, hot_fraction: float = 0.9, insn_per_access: int = 20,
          force: bool = False, progress: Optional[bool] = None) -> dict:
    """Write a synthetic trace (``zipf``, ``uniform``, ``stream``, ``phases``). Counts may be
    integers or strings with decimal multiples (``"50M"``)."""
    # the core takes these as unsigned 64-bit numbers: out of range is the user's error, named
    for opt, v in (("--seed", seed), ("--phases", phases), ("--insn-per-access", insn_per_access)):
        _check_u64(opt, v)
    with Bar(f"synth {kind}", progress, unit="acc") as bar:
        return json.loads(_core.trace_synth(kind, _s(out), str(accesses), str(pages), int(seed), float(write_ratio),
                                            float(theta), int(phases), float(hot_fraction), int(insn_per_access),
                                            force, bar.callback))


def tracer_dir() -> Path:
    """The Valgrind library directory that holds tierkit's tool (``tierkit-PLATFORM``, its
    malloc-replacement preload and links to Valgrind's core files): ``$TIERKIT_TRACER_DIR``
    if set, else ``tracer/build/lib`` of the source tree, which ``make build`` fills, or of the
    data folder, which ``tierkit setup`` fills for an installed tierkit (docs/install.md)."""
    env = os.environ.get("TIERKIT_TRACER_DIR")
    return Path(env) if env else installed.tracer_lib()


def _ensure_tracer() -> Path:
    """:func:`tracer_dir`, building the tool first if it is missing from the source tree."""
    import glob
    import shutil
    import subprocess

    d = tracer_dir()
    src = installed.SOURCE_ROOT / "tracer"
    if (not os.environ.get("TIERKIT_TRACER_DIR") and not installed.in_clone() and shutil.which("valgrind")
            and not glob.glob(str(d / "tierkit-*-*"))):
        raise _core.TierkitError(f"tracer: the tierkit Valgrind tool is not built ({d} holds none): "
                                 f"{installed.SETUP_HINT}, or set TIERKIT_TRACER_DIR to the directory that holds it")
    if (os.environ.get("TIERKIT_TRACER_DIR") or glob.glob(str(d / "tierkit-*-*"))
            or not (src / "Makefile").is_file() or shutil.which("valgrind") is None or shutil.which("make") is None):
        return d  # the core reports what is missing
    p = subprocess.run(["make", "-s", "-C", str(src)], capture_output=True, text=True)
    if p.returncode != 0:
        lines = [ln.strip() for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        # the Makefile's own explanation first, else the compiler's first error, else make's
        why = (next((ln.removeprefix("tracer: ") for ln in lines if ln.startswith("tracer: ")), None)
               or next((ln for ln in lines if "error" in ln.lower()), None)
               or f"make exited with status {p.returncode}")
        raise _core.TierkitError(f"tracer: the tierkit Valgrind tool cannot be built: {why}")
    return d


def record(program: PathLike, args: Sequence[Any] = (), out: Optional[PathLike] = None, cache: Optional[str] = "default",
           context: int = 4, slice: Union[None, int, str] = None, force: bool = False,
           kill_after: Optional[float] = None, progress: Optional[bool] = None) -> dict:
    """Run an unmodified program under tierkit's Valgrind tool and write its native trace.

    ``cache``: the in-band cache hierarchy (a spec such as ``"L1:32K:8,L2:1M:16"`` or a preset
    name; ``None`` means the ``default`` preset) or ``"none"`` for the raw loads and stores
    (unlike :func:`convert`, where ``None`` means no filter: a recording always has a
    cache setting, and ``"none"`` says it explicitly); ``context``: frames per
    allocation site; ``slice``: a slice marker every this many instructions (``"10M"``);
    ``out`` defaults to ``PROGRAM.tkt`` in the current directory and is never overwritten
    without ``force``. The program's standard streams are its own.

    Interruption (``docs/trace-format.md`` section 19): SIGTERM, SIGINT or SIGHUP sent to this
    process while it records is passed on to the program at once (Ctrl-C and hang-ups from
    the terminal already reach it); a program still running ``kill_after`` seconds later
    (default 2) is killed, as it is at a second such signal. The trace is then finished,
    valid and flagged ``incomplete``.

    Returns the report: ``status`` (the program's exit code, or 128 + the signal that killed
    it; 128 + the signal received if the program had to be killed), ``exit_code``,
    ``signal``, ``incomplete`` (why the trace stops short, or None), ``interrupted_by`` (the
    signal passed on, or None), ``killed_after_grace``,
    ``forks`` (children are not traced), ``instructions``, ``raw_loads``, ``raw_stores``,
    ``cache`` (per-level counts), ``path`` and the trace's ``summary``.

    ``progress``: plain lines on stderr while the program runs (after 5 s, then every 15 s:
    the trace records written so far, accesses and events, and the time), on a terminal too,
    where the program's own output shares the screen; False silences them."""
    from .progress import Watch

    prog = os.fspath(program)
    if out is None:
        out = Path.cwd() / (Path(prog).name + ".tkt")
    tool = _ensure_tracer()
    # the core counts the records it writes (the file itself grows only by whole compressed
    # chunks, long after the first records); the watch says the count even while the program
    # is silent. The core handles SIGTERM, SIGINT and SIGHUP while the program runs (passing
    # them on).
    written = [0]

    def count(n: int, _total: Optional[int]) -> None:
        written[0] = n

    with Watch(f"recording {Path(prog).name} (trace records written)", lambda: written[0], progress, unit="record") as w:
        r = _core.trace_record(prog, [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args],
                               os.fspath(out), os.fspath(tool), "default" if cache is None else str(cache), int(context),
                               None if slice is None else str(slice), force, None,
                               None if kill_after is None else float(kill_after), count if w.bar.enabled else None)
    return json.loads(r)


def _row(r: Mapping[str, Any]) -> dict:
    row = {k: r.get(k) for k in RESULT_COLUMNS}
    row["warnings"] = list(r.get("warnings") or [])
    row["trace_digest"] = r["config"].get("trace_digest")
    row["policy_config"] = r["config"].get("policy")
    row["repeat"] = r["config"].get("repeat", 1)
    row["time_scale"] = r["config"].get("time_scale", 1.0)
    # how the run's policy can be deployed, as the registry says (tierkit.deploy)
    row["deploy"] = _deploy.label(str(r["policy"]), r)
    row["deployable"] = _deploy.deployable(str(r["policy"]), r)
    if r.get("mix"):
        row.update(mix_figures(r))
    return row




def run(trace: Union[PathLike, Sequence[PathLike]], platform: Union[str, Mapping[str, Any]] = "dram-pmem",
        policy: PolicyLike = "first-touch",
        fast_capacity: Union[None, float, str] = None, capacities: Optional[Mapping[str, Union[float, str]]] = None,
        timing: str = "simple", format: Optional[str] = None, cache: Optional[str] = None,
        progress: Optional[bool] = None, summary: Optional[Mapping] = None, paranoid: bool = False,
        guide_from: Optional[PathLike] = None, repeat: int = 1, time_scale: float = 1.0,
        watch: Optional[Sequence[tuple[str, int, int]]] = None, watch_every_ns: Optional[float] = None,
        mix: bool = False, cores: int = 1, quantum: int = 1, alone: bool = True,
        trace_digest: Optional[str] = None) -> dict:
    """One simulation; returns the full result (top-level figures, ``stats`` tree with
    platform/tier/policy/migration/timing subtrees, and the exact ``config``).

    ``guided:strategy=S,...`` is made into guidance here: the profile of ``guide_from`` (by
    default the simulated trace itself), the strategy, and the capacity (``capacity=``, or
    the fast tier's fraction, or 12.5%); see ``docs/guidance.md``.

    ``repeat``: replay the trace this many times as one continuous run (time, pages,
    placement and policy state carry over). ``time_scale``: divide every time constant and
    per-event cost of the policy, and the platform's migration costs, by this; latencies and
    bandwidths stay (see ``docs/models.md``, "Long-period policies on short traces").

    ``watch``: regions ``(name, start, end)`` of the trace's addresses to sample every
    ``watch_every_ns`` of simulated time (and at the end): the result's ``watch`` has, per
    sample and region, the accesses since the last sample and the pages on the fast tier and
    elsewhere, and the trace's user markers (``TIERKIT_MARK``) with their times; see
    :func:`watch_frame` and ``docs/validation.md`` ("Hot data").

    Several cores (``docs/models.md``, "Many cores"; detailed timing only): ``mix=True`` with
    a list of traces runs each as a program on its own core, in its own address space,
    sharing the tiers; ``cores=N`` runs a trace's threads on N cores. ``quantum``: accesses a core
    may run at once before the cores are compared again (1: in time order; more is faster and
    less exact). A mix's result adds ``programs`` (each program's runtime, IPC, fast hits and migrations)
    and ``mix`` (throughput, tier utilization and, with ``alone``, each program's runtime alone
    on the machine and the weighted speedup).

    ``platform``: a preset's name, a platform file, or the platform itself (a dict, as results
    record it). ``trace_digest``: the SHA-256 the trace read must have (a mix's: its
    programs', joined by ``+``), or an error; replay passes the recorded one. The result's
    ``config.run`` is the one description of the run (:func:`run_spec`)."""
    if mix:
        return _engine.run(trace, platform, policy, fast_capacity, capacities, timing, format, cache, progress, summary,
                           paranoid, repeat, time_scale, watch, watch_every_ns, mix, cores, quantum, alone, trace_digest)
    if not isinstance(trace, (str, os.PathLike)):
        raise _core.TierkitError("trace: give one trace, or several with mix=True (--mix)")
    label = policy if isinstance(policy, str) else policy.name
    guidance = None
    spec = json.loads(_core.parse_policy_spec(policy)) if isinstance(policy, str) else None
    if spec and spec["name"] == "guided" and any(k == "strategy" for k, _ in spec["args"]):
        policy, guidance = _expand_guided(label, spec, guide_from or trace, fast_capacity, format, cache, progress)
    learned = None
    if spec and spec["name"] in ("kleio", "kleoniki") and not any(k == "predictions" for k, _ in spec["args"]):
        from . import learned as _kleio

        if repeat != 1:
            raise _core.TierkitError(f"--repeat: policy '{label}' predicts the periods of one pass of the trace; run it with --repeat 1")
        policy, learned = _kleio.expand(label, spec, trace, fast_capacity, format, cache, progress, platform, timing)
    r = _engine.run(trace, platform, policy, fast_capacity, capacities, timing, format, cache, progress, summary,
                    paranoid, repeat, time_scale, watch, watch_every_ns, False, cores, quantum, alone, trace_digest)
    # the engine's run named its warnings by the spec it was given: name them by the user's
    _engine.relabel_warnings(r, policy if isinstance(policy, str) else policy.name, label)
    if guidance is not None:
        # the user's spec names the run; the config records what the guidance was made from
        r["policy"] = label
        r["config"]["guidance"] = guidance
    if learned is not None:
        r["policy"] = label
        r["config"]["models"] = learned
        # the training parameters the front end consumed, in the recorded spec (not blank)
        t = learned["training"]
        r["config"]["policy"] = _engine.with_args(str(r["config"]["policy"]), {
            "pages": t["pages"], "history": t["history"], "hidden": t["hidden"], "epochs": t["epochs"],
            "seed": t["seed"], "tol": t["tol"], "train": t["train_trace"], "holdout": t["holdout"],
            "fallback": t["fallback"], "trust": t["trust"], "predictor": t["predictor"], "weight": t["class_weight"],
            "threads": learned["threads"], "device": t["device"], "model": learned.get("model_file"),
            "save": learned.get("saved_to")})
        # the models' own warnings (collapsed models) beside the engine's
        r.setdefault("warnings", []).extend(learned.get("warnings") or [])
    return r

def replay(result: Mapping[str, Any], trace: Optional[PathLike] = None, progress: Optional[bool] = None) -> dict:
    """Run a result again from its one description of the run (``config.run``) and the files
    it carries (``tierkit replay``); ``trace``: where its trace is now (its digest must be the
    recorded one). Compare with :func:`tierkit.replaying.differences`, or the figures directly."""
    from . import replaying as _replay

    return _replay.replay(dict(result), trace, progress)








#: ``guided`` parameters the Python front end turns into a guidance file
_GUIDE_KEYS = ("strategy", "capacity", "context", "phases", "slice")
_profiles: dict = {}
_guidance_dir: Optional[str] = None




def _expand_guided(policy: str, spec: dict, source: PathLike, fast_capacity, format, cache, progress) -> tuple[str, dict]:
    """``guided:strategy=S[,capacity=F,context=N,phases=K,slice=L,...]`` → a guidance file
    made from ``source``'s profile, and the spec that reads it."""
    import atexit
    import shutil
    import tempfile

    from . import guidance as _guide
    from . import profiling as _profile

    global _guidance_dir
    args = dict(spec["args"])
    if "guidance" in args:
        raise _core.TierkitError(f"policy '{policy}': give either guidance=FILE or strategy=..., not both")
    per_phase = args.get("mode") == "per-phase"
    if "capacity" in args:
        cap: Any = _guide.parse_capacity(args["capacity"], key="guided:capacity")
    elif fast_capacity is None:
        cap = 0.125
    else:
        # the run's fast capacity, read as the simulator reads it: a size is the same bytes for
        # the guidance (-c 1M used to fall back to 0.125 of the heap without a word); a fraction
        # or percentage applies to the profile's peak live heap (docs/guidance.md); beyond the
        # whole (125%, unlimited) everything fits
        text = str(fast_capacity).strip()
        if text.lower() == "unlimited":
            cap = 1.0
        else:
            try:
                cap = _guide.parse_capacity(float(text) if isinstance(fast_capacity, float) else text,
                                            key="--fast-capacity")
            except _guide.GuidanceError:
                over = _guide._NUMBER.match(text)
                if over and over.group(2) in ("", "%") and float(over.group(1).replace("_", "")) > 0:
                    cap = 1.0
                else:
                    raise
    def count(key: str, default: Optional[int]) -> Optional[int]:
        if key not in args:
            return default
        try:
            v = int(args[key])
        except ValueError:
            v = -1
        if v < 0:
            raise _core.TierkitError(f"guided:{key}: '{args[key]}' is not a whole number")
        return v

    context = count("context", None)
    phases = count("phases", 8 if per_phase else 1) or 1
    st = os.stat(source)
    key = (os.path.abspath(source), st.st_mtime_ns, st.st_size, context, phases, args.get("slice"), format, cache)
    if key not in _profiles:
        _profiles[key] = _profile.profile(source, context, phases, args.get("slice"), format, cache, progress)
    prof = _profiles[key]
    try:
        g = _guide.make_guidance(prof, args["strategy"], cap, per_phase=per_phase)
    except _guide.GuidanceError as e:
        raise _core.TierkitError(f"policy '{policy}': {e}") from None
    if _guidance_dir is None:
        _guidance_dir = tempfile.mkdtemp(prefix="tierkit-guidance-")
        atexit.register(shutil.rmtree, _guidance_dir, True)
    path = os.path.join(_guidance_dir, f"g{len(os.listdir(_guidance_dir))}.json")
    _guide.write_guidance(g, path)
    rest = [f"{k}={v}" for k, v in spec["args"] if k not in _GUIDE_KEYS]
    info = {"from_trace": os.fspath(source), "from_digest": prof["trace"]["digest"], "strategy": g["strategy"],
            "mode": g["mode"], "capacity_bytes": g["capacity_bytes"], "context": g["context"],
            "sites": len(g["sites"]), "arenas": len(g["arenas"]),
            # how it was made, in full (the spec's strategy=, capacity=, ... are consumed here)
            "made_with": {"strategy": args["strategy"], "capacity": args.get("capacity", cap), "context": context,
                          "phases": phases, "slice": args.get("slice"), "per_phase": per_phase}}
    return "guided:" + ",".join([f"guidance={path}", *rest]), info


def simulate(trace: PathLike, platform: str = "dram-pmem", policy: PolicyLike = "first-touch",
             fast_capacity: Union[None, float, str] = None, capacities: Optional[Mapping[str, Union[float, str]]] = None,
             timing: str = "simple", format: Optional[str] = None, cache: Optional[str] = None,
             progress: Optional[bool] = None, repeat: int = 1, time_scale: float = 1.0) -> pd.DataFrame:
    """One simulation as a one-row DataFrame (columns as :func:`compare`'s); the full result
    is in ``df.attrs['results']`` (a :class:`tierkit.results.Results`, shared by the frames
    derived from this one). ``repeat`` and ``time_scale`` as in :func:`run`."""
    import pandas as pd

    r = run(trace, platform, policy, fast_capacity, capacities, timing, format, cache, progress,
            repeat=repeat, time_scale=time_scale)
    df = _results.tidy(pd.DataFrame([_row(r)]))
    df.attrs["results"] = _results.Results([r])
    return df


def all_policies() -> list[str]:
    """Names of every registered policy."""
    return [p["name"] for p in json.loads(_core.policies())]


_NOT_IN_ALL = ("guided", "kleio", "kleoniki")


def parse_policies(spec: Union[str, Iterable[PolicyLike]]) -> list[PolicyLike]:
    """``"a,b:k=v,k2=v2,c"`` (or ``all``) → a list of policy specs; objects pass through."""
    if isinstance(spec, str):
        out_: list[PolicyLike] = []
        for p in _core.parse_policy_list(spec):
            # 'all': every policy that needs no input of its own (guided needs guidance),
            # nor the learned schedulers, which train models (tierkit[ml])
            out_ += [n for n in all_policies() if n not in _NOT_IN_ALL] if p == "all" else [p]
        return out_
    out: list[PolicyLike] = []
    for item in spec:
        out += parse_policies(item) if isinstance(item, str) else [item]
    return out


def _compared_policies(policies: Union[str, Iterable[PolicyLike]], baseline: str) -> list[PolicyLike]:
    pols = parse_policies(policies)
    labels = [p if isinstance(p, str) else p.name for p in pols]
    if baseline and baseline not in labels:
        pols.append(baseline)
    return pols


def compare_runs(traces: Union[PathLike, Sequence[PathLike]], policies: Union[str, Iterable[PolicyLike]] = "all",
                 baseline: str = "all-slow", mix: bool = False) -> list[tuple[str, str]]:
    """The runs :func:`compare` makes, in its order: (trace, policy label) pairs, the labels
    its results carry (so that ``compare --out`` knows every file it will write before the run)."""
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    pols = _compared_policies(policies, baseline)
    units = [" + ".join(os.fspath(t) for t in traces)] if mix else [os.fspath(t) for t in traces]
    return [(t, p if isinstance(p, str) else p.name) for t in units for p in pols]


def compare(traces: Union[PathLike, Sequence[PathLike]], platform: str = "dram-pmem",
            policies: Union[str, Iterable[PolicyLike]] = "all", fast_capacity: Union[None, float, str] = None,
            capacities: Optional[Mapping[str, Union[float, str]]] = None, timing: str = "simple",
            format: Optional[str] = None, cache: Optional[str] = None, progress: Optional[bool] = None,
            baseline: str = "all-slow", guide_from: Optional[PathLike] = None, repeat: int = 1,
            time_scale: float = 1.0, workers: Optional[int] = 1, mix: bool = False, cores: int = 1,
            quantum: int = 1, alone: bool = True) -> pd.DataFrame:
    """Every policy on every trace. Adds ``runtime_vs_<baseline>`` (runtime divided by the
    baseline policy's runtime on the same trace; the baseline is run if not listed) and
    ``speedup_vs_<baseline>``, and the same columns under names ``df.query`` takes
    (``runtime_vs_all_slow``; the names with ``-`` are kept for one release). ``trace_name``:
    the trace's file name; the numeric columns are float (``ipc`` NaN under the simple timing
    model). Full results are in ``df.attrs['results']``, a :class:`tierkit.results.Results`
    that the frames derived from this one share (pandas deep-copies ``attrs``; this holder is
    its own deep copy); per tier: :func:`tierkit.results.tiers`. ``repeat`` and
    ``time_scale`` (as in :func:`run`) apply to every run, the baseline's included.

    Several cores, as :func:`run`: ``mix=True`` compares the policies on the traces run
    together as one mix (each a program on its own core; the rows add ``weighted_speedup``,
    ``throughput_accesses_per_us`` and ``max_slowdown``, the slowest program's runtime in the
    mix over its runtime alone); ``cores=N`` runs each trace's threads on N cores.

    ``workers``: runs at once, each in its own process (the same results, bit for bit, in the
    same order); None: every core, when the work is long enough to pay for starting them
    (about 5 M accesses in all); policies written in Python run in this process."""
    import pandas as pd

    repeat, time_scale = check_scale(repeat, time_scale)
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise _core.TierkitError(f"--workers: {workers!r}: at least 1")
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    pols = _compared_policies(policies, baseline)
    args: dict[str, Any] = dict(platform=platform, fast_capacity=fast_capacity, capacities=capacities, timing=timing,
                                format=format, cache=cache, repeat=repeat, time_scale=time_scale)
    if mix:
        if len(traces) < 2:
            raise _core.TierkitError("--mix: give at least two traces, each a program of the mix")
        if guide_from is not None:
            raise _core.TierkitError("--guide-from: guided policies are made from one trace's profile; they do not run on a mix")
        # the mix is the one thing compared (a run takes no summary for it), its size its
        # programs' together
        parts = [trace_info(t, format, cache, progress)["summary"] for t in traces]
        units: list[Any] = [[os.fspath(t) for t in traces]]
        summaries: list[Optional[dict]] = [None]
        sizes = [sum(int(x["accesses"]) for x in parts)]
        args.update(mix=True, quantum=quantum, alone=alone)
    else:
        # one summary per trace (instant for native traces), shared by its runs
        units = [os.fspath(t) for t in traces]
        summaries = [trace_info(t, format, cache, progress)["summary"] for t in traces]
        sizes = [int(x["accesses"]) for x in summaries]  # type: ignore[index]
        args.update(guide_from=guide_from)
        if cores != 1:
            args.update(cores=cores, quantum=quantum)
    jobs = [(i, p) for i in range(len(units)) for p in pols]
    par = [k for k, (_, p) in enumerate(jobs) if isinstance(p, str)]
    from .pool import cpu_count

    n = min(cpu_count() if workers is None else workers, len(par))
    if workers is None and sum(sizes[jobs[k][0]] * repeat for k in par) < 5_000_000:
        n = 1
    out: list[Optional[dict]] = [None] * len(jobs)
    if n > 1:
        from .pool import pool as make_pool

        with Bar("compare", progress, unit="run") as bar, make_pool(n) as pool:
            futs = {k: pool.submit(_compare_job, units[jobs[k][0]], jobs[k][1], summaries[jobs[k][0]], args) for k in par}
            done = 0
            for k in range(len(jobs)):
                if k in futs:
                    ok, r = futs[k].result()
                    if not ok:
                        raise _core.TierkitError(r)
                else:
                    i, p = jobs[k]
                    r = run(units[i], policy=p, progress=False, summary=summaries[i], **args)
                out[k] = r
                done += 1
                bar.callback(done, len(jobs))
    else:
        for k, (i, p) in enumerate(jobs):
            out[k] = run(units[i], policy=p, progress=progress, summary=summaries[i], **args)
    results = [r for r in out if r is not None]
    rows = [_row(r) for r in results]
    _flag_identical(results, rows)
    df = pd.DataFrame(rows)
    if baseline:
        base = df[df["policy"] == baseline].set_index("trace")["runtime_ns"]
        df[f"runtime_vs_{baseline}"] = df["runtime_ns"] / df["trace"].map(base)
        df[f"speedup_vs_{baseline}"] = 1.0 / df[f"runtime_vs_{baseline}"]
    # typed columns, trace_name, the query-friendly names; activations null for a policy with
    # no periodic work (see docs/policies.md, "Activations and warnings")
    _results.tidy(df)
    df.attrs["results"] = _results.Results(results)
    return df


def _compare_job(trace: Any, policy: PolicyLike, summary: Optional[dict], args: dict) -> tuple[bool, Any]:
    """One run of :func:`compare` in a worker process: (True, result) or (False, the error)."""
    try:
        return True, run(trace, policy=policy, progress=False, summary=summary, **args)
    except _core.TierkitError as e:
        return False, str(e)


#: Policies whose result is a fixed placement: a policy that moved no page and equals one of
#: them on the same trace is told so.
_FIXED = ("first-touch", "all-slow", "all-fast", "interleave")


def _flag_identical(results: list, rows: list) -> None:
    """Add a warning to each result that moved no page and whose runtime and fast-tier hits
    equal those of a fixed placement compared on the same trace (docs/policies.md, "Activations and warnings": a policy that
    equals first-touch is a bug until shown otherwise)."""
    fixed = [r for r in results if r["policy"] in _FIXED]
    for r, row in zip(results, rows):
        if r["policy"] in _FIXED or r["migrations"] != 0:
            continue
        same = next((f["policy"] for f in fixed if f["trace"] == r["trace"] and f["runtime_ns"] == r["runtime_ns"]
                     and f["fast_hit_ratio"] == r["fast_hit_ratio"]), None)
        if same is not None:
            w = f"{r['policy']}'s result is identical to {same}'s (same runtime and fast-tier hits)"
            r.setdefault("warnings", []).append(w)
            row["warnings"] = list(r["warnings"])








def policies() -> pd.DataFrame:
    """Every registered policy: name, summary, source, future knowledge, parameters."""
    import pandas as pd

    return pd.DataFrame(json.loads(_core.policies()))


def platforms() -> pd.DataFrame:
    """The preset platforms, one row per tier."""
    import pandas as pd

    rows = []
    for p in json.loads(_core.platforms()):
        for i, t in enumerate(p["tiers"]):
            rows.append({"platform": p["name"], "tier": i, **{k: v for k, v in t.items()}})
    return pd.DataFrame(rows)


def platform(name_or_path: str) -> dict:
    """A platform (preset or file) as a dict."""
    return json.loads(_core.platforms(name_or_path))


def cache_presets() -> list[dict]:
    return json.loads(_core.cache_presets())


# --- the rest of the command line: profiles and guidance, Cori, the learned schedulers,
# heat maps, report directories (docs/python.md: the Python API at parity with the CLI) ---


def _fractions(key: str, values: Union[float, str, Sequence[Union[float, str]]]) -> list[float]:
    """Fractions in (0, 1]: one, a sequence, or a comma-separated string. ``key`` is the
    command line's option (the Python functions' errors name the parameter: tierkit.__init__)."""
    items = [x.strip() for x in values.split(",") if x.strip()] if isinstance(values, str) else \
        [values] if isinstance(values, (int, float)) else list(values)
    out = []
    for x in items:
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise _core.TierkitError(f"{key}: '{x}' is not a number") from None
        if not 0 < v <= 1:
            raise _core.TierkitError(f"{key}: {x} is not a fraction in (0, 1]")
        out.append(v)
    if not out:
        raise _core.TierkitError(f"{key}: give at least one fraction")
    return out


def profile(trace: PathLike, context: Optional[int] = None, phases: int = 8, slice: Optional[str] = None,
            format: Optional[str] = None, cache: Optional[str] = None, out: Optional[PathLike] = None,
            force: bool = False, progress: Optional[bool] = None, seed: int = 1) -> dict[str, Any]:
    """Profile a trace by allocation site (``tierkit profile``): the profile as a dict, as the
    file holds it (docs/guidance.md, "The profile file"); :func:`profile_sites` makes its sites
    a DataFrame. ``out``: also write the profile file (refused if it exists, unless ``force``)."""
    from . import profiling

    if out is not None:
        check_new_file(out, force)
    if phases < 1:
        raise _core.TierkitError(f"phases: {phases} must be at least 1")
    p = profiling.profile(trace, context, phases, slice, format, cache, progress, seed)
    if out is not None:
        profiling.write(p, Path(out), force=force)
    return p


def profile_sites(profile: Union[Mapping[str, Any], PathLike]) -> pd.DataFrame:
    """A profile's allocation sites as a DataFrame, hottest first: ``site``, ``peak_bytes``,
    ``reads``, ``writes``, ``accesses_pct``, ``accesses_per_byte``, ... (the table ``tierkit
    profile`` prints). ``profile``: a dict from :func:`profile` or a profile file."""
    from . import guidance, profiling

    p = guidance.read_profile(profile) if isinstance(profile, (str, os.PathLike)) else profile
    return profiling.sites_frame(dict(p))


def guide(profile: Union[Mapping[str, Any], PathLike], strategy: str = "thermos",
          capacity: Union[float, int, str, Sequence[Union[float, int, str]]] = 0.125,
          tiers: Optional[Sequence[str]] = None, per_phase: bool = False, out: Optional[PathLike] = None,
          force: bool = False) -> dict[str, Any]:
    """Choose each allocation site's tier from a profile (``tierkit guide``): the guidance as
    a dict (docs/guidance.md, "The guidance file"). ``profile``: a dict from :func:`profile` or
    a profile file. ``strategy``: ``knapsack``, ``hotset`` or ``thermos``. ``capacity``: one
    per tier but the last: a fraction of the profile's peak live heap (0.125), bytes (an int)
    or a size (``"64M"``). ``out``: also write the guidance file (a ``guided:guidance=FILE``
    policy reads it); refused if it exists, unless ``force``."""
    from . import guidance

    if out is not None:
        check_new_file(out, force)
    p = guidance.read_profile(profile) if isinstance(profile, (str, os.PathLike)) else dict(profile)
    caps: list[Any] = list(capacity) if isinstance(capacity, (list, tuple)) else [capacity]
    g = guidance.make_guidance(p, strategy, caps, tiers=None if tiers is None else list(tiers),
                               per_phase=per_phase)
    if out is not None:
        guidance.write_guidance(g, Path(out), force=force)
    return g


def tune(trace: PathLike, scheduler: str = "history", platform: str = "dram-pmem",
         fast_capacity: Union[float, str] = 0.2, timing: str = "simple", bucket: int = 1000, grid: int = 50,
         patience: int = 1, within: float = 0.03, seed: int = 0, sweep: bool = True,
         format: Optional[str] = None, cache: Optional[str] = None, progress: Optional[bool] = None,
         compat: str = "none", bins: Optional[int] = None) -> dict[str, Any]:
    """Cori (``tierkit tune``, 003 §3.3): a periodic scheduler's period chosen from the trace's
    data reuse (``compat`` and ``bins``: the scheduler's parameters). Returns the reuse summary,
    the candidates, Cori's ``trials`` and ``chosen_period``; with ``sweep``, the best period of
    the exhaustive sweep and, per method (Cori and the baselines), its ``trials_to_best`` and its
    slowdown after Cori's trials run (``slowdown_at_cori_trials``) and after Cori's trials to
    best (``slowdown_at_cori_trials_to_best``, 003's budget).
    :func:`tune_trials` makes the trials a DataFrame."""
    from . import cori

    for key, v, low in (("bucket", bucket, 1), ("grid", grid, 1), ("patience", patience, 1)):
        if not isinstance(v, int) or v < low:
            raise _core.TierkitError(f"{key}: {v!r} must be a whole number >= {low}")
    # the capacity as the command line gives it (a string), so that both record the same
    return cori.tune(trace, scheduler, platform, _cap(fast_capacity), timing, bucket, grid, patience, within, seed, sweep,
                     format, cache, progress, compat=compat, bins=bins)


def tune_trials(result: Mapping[str, Any]) -> pd.DataFrame:
    """The trials of a :func:`tune` result (``period``, ``runtime_ns``, ``fast_hit_ratio``,
    ...) as a DataFrame, with ``chosen`` marking Cori's choice."""
    import pandas as pd

    df = pd.DataFrame(result["trials"])
    df["chosen"] = df["period"] == result["chosen_period"] if len(df) else []
    return df


def _study_frame(r: dict) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame(r["rows"])
    # (the runs themselves, with their inputs, stay out: large, and copied with the frame)
    df.attrs["study"] = {k: v for k, v in r.items() if k not in ("rows", "results")}
    return df


def _learned(policy: str, trace: PathLike, pages, period, platform, fast_capacity, timing, history, hidden, epochs,
             tol, seed, train, holdout, weight, threads, format, cache, progress, infer_ns="measure",
             device="auto") -> dict:
    """The study behind ``tierkit kleio`` and :func:`kleio` (and Kleoniki's at a given period),
    as the dict ``--json`` prints."""
    from . import learned

    fractions = _fractions("--pages", pages)
    cap = _fractions("--fast-capacity", [fast_capacity])[0]
    if not 0 <= holdout < 1:
        raise _core.TierkitError(f"--holdout: {holdout} is not a fraction in [0, 1)")
    if threads is not None and threads < 1:
        raise _core.TierkitError(f"--threads: {threads} is not a whole number of threads >= 1")
    if period is not None and period < 1:
        raise _core.TierkitError(f"--period: {period} must be at least 1 access")
    return learned.study(trace, policy, fractions, period, platform, cap, timing, history=history, hidden=hidden,
                         epochs=epochs, tol=tol, seed=seed, train_trace=train, format=format, cache=cache,
                         progress=progress, holdout=holdout, class_weight=weight, threads=threads, infer_ns=infer_ns,
                         device=device)


def kleio(trace: PathLike, pages: Union[float, str, Sequence[float]] = (0.01, 0.02, 0.05, 0.1, 0.2),
          period: Optional[int] = None, platform: str = "dram-pmem", fast_capacity: float = 0.2,
          timing: str = "simple", history: int = 8, hidden: int = 16, epochs: int = 60, seed: int = 0,
          train: Optional[PathLike] = None, holdout: float = 0.5, weight: str = "none",
          threads: Optional[int] = None, format: Optional[str] = None, cache: Optional[str] = None,
          progress: Optional[bool] = None, infer_ns: Union[str, float] = "measure",
          device: str = "auto") -> pd.DataFrame:
    """Kleio (``tierkit kleio``, 003 §3.2): per-page LSTMs for the pages history misplaces,
    for each fraction of the pages in ``pages``. One row per fraction (models, training time,
    scores, ``runtime_ns``, ``gap_bridged_pct``, ...); ``df.attrs['study']`` holds the rest
    (history's and the oracle's runtimes, the period, the trace's pages and periods).
    ``infer_ns``: one model's inference per boundary, ns, charged in ``gap_bridged_pct``
    ("measure": measured here); ``device``: where the models train and run (auto, cpu, cuda).
    Needs PyTorch (``pip install 'torch>=2.2'``)."""
    return _study_frame(_learned("kleio", trace, pages, period, platform, fast_capacity, timing, history, hidden,
                                 epochs, 0.5, seed, train, holdout, weight, threads, format, cache, progress, infer_ns,
                                 device))


def kleoniki(trace: PathLike, pages: Union[float, str, Sequence[float]] = (0.05, 0.1, 0.2),
             period: Optional[int] = None, tol: float = 0.5, platform: str = "dram-pmem",
             fast_capacity: float = 0.2, timing: str = "simple", history: int = 8, hidden: int = 16,
             epochs: int = 60, seed: int = 0, train: Optional[PathLike] = None, holdout: float = 0.5,
             weight: str = "none", threads: Optional[int] = None, format: Optional[str] = None,
             cache: Optional[str] = None, progress: Optional[bool] = None,
             infer_ns: Union[str, float] = "measure", device: str = "auto") -> pd.DataFrame:
    """Kleoniki (``tierkit kleoniki``, 003 §4): Kleio with one model per group of pages with
    the same per-period pattern, at Cori's period unless ``period`` is given. Rows and
    ``df.attrs['study']`` as :func:`kleio`'s, with ``cori_period`` and ``period_chosen`` (how
    the period was chosen) in the study. Needs PyTorch (``pip install 'torch>=2.2'``)."""
    return _study_frame(_kleoniki(trace, pages, period, tol, platform, fast_capacity, timing, history, hidden, epochs,
                                  seed, train, holdout, weight, threads, format, cache, progress, infer_ns, device))


def _kleoniki(trace: PathLike, pages, period, tol, platform, fast_capacity, timing, history, hidden, epochs, seed,
              train, holdout, weight, threads, format, cache, progress, infer_ns="measure", device="auto") -> dict:
    """Kleoniki's study at Cori's period unless ``period`` is given (``tierkit kleoniki``,
    :func:`kleoniki`), as the dict ``--json`` prints."""
    from . import cori, learned

    chosen = note = None
    if period is None:
        cap = _fractions("--fast-capacity", [fast_capacity])[0]
        t = cori.tune(trace, "history", platform, cap, timing, exhaustive=False, format=format, cache=cache,
                      progress=progress)
        chosen = t["chosen_period"]
        period, note = learned.learned_period(int(t["accesses"]), chosen, history)
    r = _learned("kleoniki", trace, pages, period, platform, fast_capacity, timing, history, hidden, epochs, tol, seed,
                 train, holdout, weight, threads, format, cache, progress, infer_ns, device)
    r["cori_period"] = chosen
    r["period_chosen"] = note
    if chosen is not None:
        r["period_chosen"] += learned.CORI_FUTURE
        r["future_knowledge"]["period"] = learned.CORI_FUTURE.strip(" ()")
    return r


def heatmap(trace: PathLike, period: Optional[int] = None, out: Optional[PathLike] = None, force: bool = False,
            format: Optional[str] = None, cache: Optional[str] = None, progress: Optional[bool] = None) -> Any:
    """The trace's heat map (``tierkit trace heatmap``; Cori's visualization, 003 §3.3): pages by
    address × periods of ``period`` accesses (by default about 400 periods), accesses as colour.
    Returns the matplotlib Figure; with ``out``, also writes it as a PNG (refused if the file
    exists, unless ``force``)."""
    from . import learned, report
    from .output import write_bytes

    if out is not None:
        check_new_file(out, force)
    if period is None:
        period = learned.default_period(trace, format, cache)
    if period < 1:
        raise _core.TierkitError(f"--period: {period} must be at least 1 access")
    fig = report.heatmap_of(trace, period, format, cache, progress)
    if out is not None:
        write_bytes(Path(out), report._png(fig, close=False), force)
    return fig


def load(directory: PathLike) -> pd.DataFrame:
    """A report directory (``tierkit compare --out DIR``) read back: the comparison's
    DataFrame as :func:`compare` returned it, with every run's full result in
    ``df.attrs['results']`` (a :class:`tierkit.results.Results`). A report written before
    ``trace_name`` and the query-friendly names gets them here. An unfinished report (its
    ``INCOMPLETE`` marker) is refused."""
    import pandas as pd

    d = Path(directory)
    if not d.is_dir():
        what = "a file, not a report directory" if d.exists() else "no such directory"
        raise _core.TierkitError(
            f"{d}: {what}: tierkit.load reads the report directory that 'tierkit compare TRACE... --out DIR' writes "
            "(from Python: tierkit.report.write(tierkit.compare(...), DIR)); one result of 'tierkit simulate --json' "
            "is read with json.load")
    if (d / "INCOMPLETE").exists():
        raise _core.TierkitError(f"{d / 'INCOMPLETE'}: this report was not finished; run its compare again with force")
    for name in ("results.parquet", "results.jsonl"):
        if not (d / name).is_file():
            raise _core.TierkitError(f"{d / name}: missing: {d} is not a tierkit report directory")
    # a report may come from anyone (docs/security.md): sizes checked before reading
    from . import untrusted

    pq = d / "results.parquet"
    untrusted.check_file(pq, "report's results.parquet", untrusted.MAX_RESULT_BYTES)
    try:
        df = pd.read_parquet(pq)
    except Exception as e:  # pyarrow's errors have no common base
        raise _core.TierkitError(f"{pq}: unreadable: {e}") from None
    jl = d / "results.jsonl"
    text = untrusted.text(untrusted.read_bytes(jl, "report's results.jsonl", untrusted.MAX_RESULT_BYTES), jl)
    results = []
    for i, r in untrusted.json_lines(text, jl):
        if not isinstance(r, dict):
            raise untrusted.fail(jl, f"line {i}", f"{untrusted.short(r)} is not a run's result (an object)")
        results.append(r)
    if len(results) != len(df):
        raise _core.TierkitError(f"{d}: results.jsonl has {len(results)} runs and results.parquet {len(df)} rows")
    if "warnings" in df.columns:
        ws = []
        for i, w in enumerate(df["warnings"]):
            w = [] if w is None else w
            if isinstance(w, str) or not hasattr(w, "__iter__") or not all(isinstance(x, str) for x in w):
                raise untrusted.fail(pq, f"row {i}: warnings", f"{untrusted.short(w)} is not a list of strings")
            ws.append(list(w))
        df["warnings"] = ws
    try:
        _results.tidy(df)
    except _core.TierkitError as e:
        raise _core.TierkitError(f"{pq}: {e}") from None
    df.attrs["results"] = _results.Results(results)
    return df


def run_program(program: Optional[PathLike] = None, args: Sequence[Any] = (), policy: str = "first-touch",
                fast_node: Optional[int] = None, slow_node: Optional[int] = None,
                fast_capacity: Optional[str] = None, interval: Optional[str] = None,
                timeseries: Optional[PathLike] = None, regions: Optional[PathLike] = None,  # noqa: F811
                region_series: Optional[PathLike] = None, damon: Optional[str] = None,
                guidance: Optional[PathLike] = None, thp: Optional[str] = None, pid: Optional[int] = None,
                force: bool = False) -> dict[str, Any]:
    """Run a program on a machine with a fast and a slow NUMA node and place its pages under
    ``policy`` (``tierkit run``, docs/real-linux.md); or follow a running process (``pid``).
    Returns the report ``tierkit run --json`` prints: ``exit_status`` (or ``signal``), pages
    per node, ``migrations``, the daemon's cost, ``notes``. The program's output passes through
    (its stdout to ``sys.stdout``); the keyword arguments are the command's options."""
    import subprocess
    import sys

    if (program is None) == (pid is None):
        raise _core.TierkitError("program, pid: give a program to run or the pid of a running process, not both")
    argv = [sys.executable, "-m", "tierkit.cli", "run", "--json", "--policy", policy]
    for opt, v in (("--fast-node", fast_node), ("--slow-node", slow_node), ("--fast-capacity", fast_capacity),
                   ("--interval", interval), ("--timeseries", timeseries), ("--regions", regions),
                   ("--region-series", region_series), ("--damon", damon), ("--guidance", guidance),
                   ("--thp", thp), ("--pid", pid)):
        if v is not None:
            argv += [opt, os.fspath(v) if isinstance(v, os.PathLike) else str(v)]
    if force:
        argv.append("--force")
    if program is not None:
        argv += ["--", os.fspath(program), *map(str, args)]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = p.stdout.splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        report = None
    if not isinstance(report, dict):
        # tierkit's own error: one line on stderr, exit status 2, no report
        err = [l for l in p.stderr.splitlines() if l.startswith("tierkit: error: ")]
        msg = err[-1].removeprefix("tierkit: error: ") if err else (p.stderr.strip().splitlines() or ["no report"])[-1]
        raise _core.TierkitError(msg)
    out = "\n".join(lines[:-1])
    if out:
        print(out, file=sys.stdout)
    if p.stderr:
        print(p.stderr, end="", file=sys.stderr)
    return report
