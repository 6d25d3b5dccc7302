"""``tierkit advise``: which tiering policy to run on a workload and a machine, what it saves,
and the command that applies it (docs/advise.md).

Every *deployable* policy (:mod:`tierkit.deploy`) is a candidate; its main parameter is tuned
by a small search (Cori's method for ``history``'s period, 003 §3.3, through
:mod:`tierkit.cori`; a grid of five values around the default for the others, the table
:data:`SEARCH`); the runs are cells of the sweep machinery (:mod:`tierkit.studies`), kept in
its result store, so that a second advice on the same trace runs nothing again. The
candidates are ranked by simulated runtime against first-touch and all-slow; the winner's
margin over the runner-up, how the ranking moves over its parameter's grid and over the
policies' time scale (K/10 and 10K), and ``deploy.command``'s command for it complete the
advice. Policies that need hardware, future knowledge or have no live version are run for
reference only, with why they cannot be deployed."""
from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

from . import _core, cori, deploy
from ._core import TierkitError
from ._engine import PathLike, check_scale, spec_args, trace_info
from .progress import Bar
from .results import Results, SharedDict

if TYPE_CHECKING:
    import pandas as pd

#: a candidate must beat first-touch by more than this fraction of its runtime to be
#: recommended over it; a runner-up within it is a tie (docs/advise.md, "The noise floor")
NOISE_FLOOR = 0.01
#: the fixed placements every advice runs for its margins
BASELINES = ("all-fast", "all-slow", "first-touch")
#: the multiples of the default a grid tries (five values around the default)
GRID_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: Cori's trials at most (its stopping rule ends most searches after 2-4)
CORI_MAX_TRIALS = 10
#: the candidates run again at the other time scales (besides first-touch): the best few, and
#: every one that never acted at the given scale (its rank there says nothing of it)
TOP_AT_SCALES = 3

#: Per policy, the main parameter and how it is searched: ``cori`` (the period, Cori's
#: candidates and stopping rule), ``times`` (GRID_FACTORS times the registry's default, a
#: time), ``choices`` (the listed values), ``none``. ``fixed``: arguments every run of the
#: policy takes, the form a daemon can run (docs/real-linux.md, "Daemon policies").
SEARCH: dict[str, dict[str, Any]] = {
    "history": {"param": "period", "how": "cori"},
    "hyplacer": {"param": "interval", "how": "times"},
    "nimble": {"param": "period", "how": "times"},
    "clock-dwf": {"param": "interval", "how": "times", "fixed": "detect=interval"},
    "memos": {"param": "period", "how": "times", "fixed": "balance=off"},
    "damon-tiering": {"param": "aggr", "how": "times"},
    "autonuma-tiering": {"param": "scan_period_ms", "how": "times"},
    # live, a memory policy is set at exec without parameters (MPOL_INTERLEAVE: equal weights)
    "interleave": {"param": None, "how": "none"},
    "first-touch": {"param": None, "how": "none"},
}
#: guided placement's strategies, each a candidate of its own when the trace has allocations
GUIDED_STRATEGIES = ("thermos", "hotset", "knapsack")
#: run for reference (never recommended): the future-knowledge bound at history's period,
#: a policy with no live version, and a hardware one
REFERENCE = ("oracle", "tpp", "cache-mode")



_time_ns = deploy.time_ns
fmt_time = deploy.fmt_time


def _params(name: str) -> dict[str, dict]:
    return {p["name"]: p for p in deploy._registry()[name]["params"]}


def grid_values(name: str) -> tuple[Optional[str], list[str]]:
    """The parameter a grid searches for ``name`` and its values (as a spec writes them);
    (None, []) when it is not searched by a grid."""
    s = SEARCH.get(name)
    if s is None or s["how"] in ("none", "cori"):
        return (s or {}).get("param"), []
    if s["how"] == "choices":
        return s["param"], list(s["values"])
    p = _params(name)[s["param"]]
    d = str(p["default"])
    ns = _time_ns(d)
    if ns is not None:
        return s["param"], [fmt_time(f * ns) for f in GRID_FACTORS]
    # a plain number in a time unit (scan_period_ms=1000)
    x = float(d)
    return s["param"], [f"{f * x:g}" for f in GRID_FACTORS]


def _spec(name: str, args: Sequence[str]) -> str:
    a = [x for x in args if x]
    return name + (":" + ",".join(a) if a else "")


def _args_of(spec: str) -> dict[str, str]:
    return dict(spec_args(spec))


# --- runs through the sweep's cells and store -------------------------------------------------


class Runner:
    """Runs simulations of one trace, platform, capacity and timing model as sweep cells
    (:class:`tierkit.studies.Cell`), in parallel, kept in a sweep's result store when one is
    given: a cell already stored is read, not run."""

    def __init__(self, trace: PathLike, platform: str, fast_capacity: Any, timing: str, format: Optional[str],
                 cache: Optional[str], workers: int, progress: Optional[bool], store: Optional[PathLike]) -> None:
        from .studies import Store, claim, file_digest

        self.trace = os.fspath(trace)
        self.platform = platform
        is_file = os.path.isfile(platform)
        self.platform_digest = file_digest(platform) if is_file else None
        self.fast_capacity = fast_capacity
        self.timing, self.format, self.cache = timing, format, cache
        self.workers = max(1, workers)
        self.progress = progress
        self.digest = file_digest(self.trace)
        self.store = None
        if store is not None:
            claim(Path(store))
            self.store = Store(store)
        self.results: dict[tuple[str, float], dict] = {}
        self.ran = 0
        self.cached = 0
        self._pool: Any = None  # one pool of workers for every batch (tierkit.pool), started at the first

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _each(self, cells: list, on_done: Callable[[dict], None], inline: bool = False) -> None:
        """studies' local executor, with the workers kept from one batch to the next."""
        from concurrent.futures import FIRST_COMPLETED, wait

        from .studies import run_cell

        if inline or self.workers <= 1 or len(cells) <= 1:
            for c in cells:
                on_done(run_cell(c))
            return
        if self._pool is None:
            from .pool import pool

            self._pool = pool(self.workers)
        pending = {self._pool.submit(run_cell, c) for c in cells}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                on_done(f.result())

    def cell(self, policy: str, time_scale: float) -> Any:
        from .studies import Cell

        return Cell(Path(self.trace).name, self.trace, self.digest, self.format, self.cache, self.platform,
                    self.platform_digest, self.fast_capacity, self.timing, policy, 1, float(time_scale), grid="advise")

    def run(self, jobs: Sequence[tuple[str, float]], desc: str, inline: bool = False) -> dict[tuple[str, float], dict]:
        """Each (policy, time scale)'s record: ``result`` or ``error``; ``inline``: in this
        process."""
        jobs = [j for j in dict.fromkeys(jobs) if j not in self.results]
        todo = []
        for pol, ts in jobs:
            c = self.cell(pol, ts)
            rec = self.store.get(c) if self.store is not None else None
            if rec is not None and "result" in rec:
                self.results[(pol, ts)] = rec
                self.cached += 1
            else:
                todo.append((pol, ts, c))
        if todo:
            by_key = {c.key: (pol, ts) for pol, ts, c in todo}
            with Bar(f"advise: {desc}", self.progress, unit="run") as bar:
                done = [0]

                def on_done(rec: dict) -> None:
                    if self.store is not None and "result" in rec:
                        self.store.put(rec)
                    self.results[by_key[rec["key"]]] = rec
                    done[0] += 1
                    bar.callback(done[0], len(todo))

                bar.callback(0, len(todo))
                self._each([c for _, _, c in todo], on_done, inline)
            self.ran += len(todo)
        return {j: self.results[j] for j in jobs}

    def result(self, policy: str, time_scale: float) -> Optional[dict]:
        rec = self.results.get((policy, time_scale))
        return None if rec is None else rec.get("result")

    def error(self, policy: str, time_scale: float) -> Optional[str]:
        rec = self.results.get((policy, time_scale))
        return None if rec is None else rec.get("error")


# --- the search -------------------------------------------------------------------------------


def _history_time_spec(period_accesses: int, r: dict, time_scale: float, fixed: Sequence[str]) -> str:
    """history's period in accesses as the time a daemon counts (tierkit.deploy.live_period)."""
    return _spec("history", [f"period={deploy.live_period(period_accesses, r, time_scale)}", *fixed])


def _cori(run: Runner, accesses: int, time_scale: float, extra: Sequence[str]) -> dict:
    """Cori's search for history's period (003 §3.3, tierkit.cori): the dominant reuse period's
    multiples in order, stopping at the first trial that does not improve (patience 1), at
    most CORI_MAX_TRIALS."""
    prof = cori.reuse_profile(run.trace, 1000, run.format, run.cache, run.progress)
    dom = cori.dominant_reuse(prof)
    cands = cori.candidates(dom, accesses)[:CORI_MAX_TRIALS]
    trials: list[dict] = []
    i = 0
    while i < len(cands):
        batch = cands[i:i + run.workers]
        specs = [_spec("history", [f"period={p}", *extra]) for p in batch]
        run.run([(s, time_scale) for s in specs], "history's period (Cori)")
        stop = False
        for p, s in zip(batch, specs):
            r = run.result(s, time_scale)
            if r is None:
                raise TierkitError(f"history:period={p}: {run.error(s, time_scale)}")
            trials.append({"value": p, "spec": s, "runtime_ns": r["runtime_ns"]})
            if cori._stop_at([t["runtime_ns"] for t in trials], 1) is not None:
                stop = True
                break
        if stop:
            break
        i += len(batch)
    best = min(trials, key=lambda t: (t["runtime_ns"], t["value"]))
    return {"dominant_reuse": dom, "candidates": len(cori.candidates(dom, accesses)), "trials": trials,
            "chosen": best["value"], "chosen_spec": best["spec"]}


def _candidates(policies: Optional[Union[str, Sequence[str]]], has_allocs: bool) -> tuple[list[str], list[str], list[dict]]:
    """(deployable candidates, reference specs, skipped with why) from ``policies`` (None: every
    deployable policy)."""
    reg = deploy._registry()
    skipped: list[dict] = []
    if policies is None:
        names = [n for n in reg if deploy.how(n) in deploy.DEPLOYABLE and n not in ("all-fast", "all-slow")]
        given = names
        refs = list(REFERENCE)
    else:
        items = _core.parse_policy_list(policies) if isinstance(policies, str) else list(policies)
        given, refs = [], []
        for it in items:
            spec = str(it).strip()
            name = deploy.name_of(spec)
            if name not in reg:
                raise TierkitError(f"--policies: unknown policy '{name}' (known: {', '.join(reg)})")
            _core.parse_policy_spec(spec)
            _check_spec(spec)
            if name in ("all-fast", "all-slow"):
                continue  # baselines: always run
            (given if deploy.how(name) in deploy.DEPLOYABLE else refs).append(spec)
        if "first-touch" not in given:
            given.append("first-touch")
    out: list[str] = []
    for spec in given:
        name = deploy.name_of(spec)
        if name in ("kleio", "kleoniki"):
            continue
        if name == "guided" and not has_allocs:
            skipped.append({"policy": spec, "why": "the trace has no allocation events (its summary counts no "
                            "allocation): guided placement needs a trace recorded by 'tierkit trace record'"})
            continue
        if name == "guided" and "strategy" not in _args_of(spec) and "guidance" not in _args_of(spec):
            out += [f"guided:strategy={s}" for s in GUIDED_STRATEGIES]
            continue
        out.append(spec)
    return list(dict.fromkeys(out)), list(dict.fromkeys(refs)), skipped


def _check_spec(spec: str) -> None:
    """A mistake in a spec of ``--policies`` (an unknown parameter, a bad value) is one error
    line before the runs: the spec is run on a trace of two accesses, where the engine reads
    its parameters as every run does (old parameter names included: policy::params::RENAMED).
    Guided placement's specs are made into guidance from the trace's profile: checked by their
    runs."""
    import tempfile

    from ._engine import run as run_one
    from .api import write_trace

    name = deploy.name_of(spec)
    if name in ("guided", "kleio", "kleoniki") or ":" not in spec:
        return
    with tempfile.TemporaryDirectory(prefix="tierkit-advise-") as tmp:
        t = os.path.join(tmp, "check.tkt")
        write_trace(t, [0x10_0000, 0x20_0000])
        try:
            run_one(t, "dram-pmem", spec, 0.5, None, "simple", None, None, False)
        except TierkitError as e:
            raise TierkitError(f"--policies: {spec}: {str(e).removeprefix('--policy: ')}") from None


def _check_capacity(run: Runner, summary: dict, K: float) -> None:
    """An impossible capacity (no page, a bad size) is one error line before any search."""
    run.run([("first-touch", K)], "first-touch")
    err = run.error("first-touch", K)
    if err is not None:
        raise TierkitError(err)
    r = run.result("first-touch", K)
    assert r is not None
    if r.get("fast_capacity_pages") is not None and int(r["fast_capacity_pages"]) < 1:
        raise TierkitError(f"--fast-capacity: '{run.fast_capacity}' holds no page of the trace "
                           f"({summary['pages']:,} pages): give a larger fraction or size")


def _fraction(v: Any) -> float:
    return float(v) if v is not None else math.nan


def advise(trace: PathLike, platform: str = "dram-pmem", fast_capacity: Union[float, str] = 0.2,
           policies: Optional[Union[str, Sequence[str]]] = None, time_scale: Optional[float] = None,
           timing: str = "simple", format: Optional[str] = None, cache: Optional[str] = None,
           program: Optional[Sequence[str]] = None, verify: bool = False, force: bool = False,
           workers: Optional[int] = None, store: Union[None, bool, PathLike] = True,
           progress: Optional[bool] = None) -> pd.DataFrame:
    """Advice on which tiering policy to run (``tierkit advise``, docs/advise.md): a DataFrame
    of the deployable candidates ranked by simulated runtime (``rank`` 1 the fastest), then the
    baselines and the policies run for reference; ``df.attrs["advice"]`` holds the whole
    advice as ``--json`` prints it (``recommendation`` with its ``command``, ``margin``,
    ``sensitivity``, ``skipped``), ``df.attrs["results"]`` each row's full result.

    ``policies``: the candidates (names or specs; a spec that sets the main parameter is not
    tuned), every deployable policy by default. ``time_scale``: the policies' clock
    (``--time-scale``, default 1); the top candidates are also run at a tenth and ten times it.
    ``program``: record the trace first (``tierkit trace record``; an existing trace is used
    unless ``force``); ``verify``: then run the top two live (``tierkit run``) on a machine
    with a fast and a slow NUMA node, or else in the testbed VM when it can boot here, and
    report measured against predicted. ``store``: the
    sweep result store that keeps the runs (True: tierkit's cache folder, unless
    ``TIERKIT_CACHE=off``; a folder; False or None: none). ``workers``: runs at once (default:
    every core)."""
    t0, c0 = time.perf_counter(), _cpu()
    where = "host"
    _, K = check_scale(1, 1.0 if time_scale is None else time_scale)
    if fast_capacity is None or str(fast_capacity).strip() == "":
        raise TierkitError("--fast-capacity: give the fast tier's capacity (a fraction of the footprint, 0.2, or a size, 512M)")
    if verify:
        if not program:
            raise TierkitError("--verify: give the program to run (--program -- PROGRAM ARGS)")
        where = verify_where()
    if program:
        _record(trace, program, force, progress)
    elif not os.path.exists(os.fspath(trace)):
        raise TierkitError(f"{os.fspath(trace)}: no such trace")
    info = trace_info(trace, format, cache, progress)
    summary = info["summary"]
    accesses = int(summary["accesses"])
    if accesses < 2:
        raise TierkitError(f"{os.fspath(trace)}: the trace has {accesses} accesses: advice needs a trace of a "
                           "program's memory accesses")
    has_allocs = int(summary.get("allocs") or 0) + int(summary.get("reallocs") or 0) > 0
    cands, refs, skipped = _candidates(policies, has_allocs)
    if store is True:
        from .output import cache_home

        store = None if os.environ.get("TIERKIT_CACHE", "on") == "off" else os.path.join(cache_home(), "advise-store")
    from .pool import cpu_count

    run = Runner(trace, platform, str(fast_capacity), timing, format, cache, workers or cpu_count(), progress,
                 store or None)
    try:
        df = _advise_on(run, trace, platform, fast_capacity, policies, K, timing, program, where if verify else False, progress, summary,
                        cands, refs, skipped)
    finally:
        run.close()
    a = df.attrs["advice"]
    a["runs"]["store"] = None if run.store is None else os.fspath(store or "")
    a["seconds"], a["cpu_seconds"] = time.perf_counter() - t0, _cpu() - c0
    return df


def _advise_on(run: Runner, trace: PathLike, platform: str, fast_capacity: Union[float, str],
               policies: Optional[Union[str, Sequence[str]]], K: float, timing: str, program: Optional[Sequence[str]],
               verify: Union[bool, str], progress: Optional[bool], summary: dict, cands: list[str], refs: list[str],
               skipped: list[dict]) -> pd.DataFrame:
    import pandas as pd

    accesses = int(summary["accesses"])
    _check_capacity(run, summary, K)
    # guided placement profiles the trace, the longest step of a run on a long trace: the first
    # guided candidate runs in this process before the workers start, so that the forked
    # workers find its profile in the front end's cache (tierkit.api's, inherited) and profile
    # nothing again
    guided = [c for c in cands if deploy.name_of(c) == "guided"]
    if guided:
        run.run([(guided[0], K)], "profiling for guided placement", inline=True)

    # 1. the baselines and every candidate's search
    run.run([(b, K) for b in BASELINES], "baselines")
    for b in BASELINES:
        if run.result(b, K) is None:
            raise TierkitError(f"{b}: {run.error(b, K)}")
    searches: dict[str, dict] = {}   # candidate spec -> its search
    jobs: list[tuple[str, float]] = []
    for spec in cands:
        name = deploy.name_of(spec)
        s = SEARCH.get(name, {"param": None, "how": "none"})
        args = _args_of(spec)
        fixed = [f"{k}={v}" for k, v in args.items()]
        live_form = str(s.get("fixed") or "")
        if live_form and live_form.split("=", 1)[0] not in args:
            fixed.append(live_form)
        param = s.get("param")
        if name == "history" and "period" not in args:
            searches[spec] = {"name": name, "param": "period", "how": "cori", "fixed": fixed}
            continue
        _, values = grid_values(name)
        if not values or (param in args):
            one = _spec(name, fixed)
            searches[spec] = {"name": name, "param": param if param in args else None, "how": "fixed" if param in args else "none",
                              "grid": [{"value": args.get(param) if param else None, "spec": one}], "fixed": fixed}
            jobs.append((one, K))
            continue
        g = [{"value": v, "spec": _spec(name, [f"{param}={v}", *fixed])} for v in values]
        searches[spec] = {"name": name, "param": param, "how": s["how"], "grid": g, "fixed": fixed,
                          "default_index": GRID_FACTORS.index(1.0) if s["how"] == "times" else s.get("default_index", 0),
                          "default": str(_params(name)[param]["default"]) if param in _params(name) else None}
        jobs += [(x["spec"], K) for x in g]
    run.run(jobs, f"{len(jobs)} runs of {len(cands)} candidates")
    hist_period: Optional[int] = None
    for spec, s in searches.items():
        if s["how"] == "cori":
            c = _cori(run, accesses, K, s["fixed"])
            hist_period = int(c["chosen"])
            r = run.result(c["chosen_spec"], K)
            assert r is not None
            live = _history_time_spec(hist_period, r, K, s["fixed"])
            s.update(cori={k: c[k] for k in ("dominant_reuse", "candidates", "chosen")},
                     grid=[{"value": t["value"], "spec": t["spec"]} for t in c["trials"]], live_spec=live)
            run.run([(live, K)], "history's period as a time")
        elif s["name"] == "history" and str(s["grid"][0]["value"]).isdigit():
            # a period given in accesses: the same period as a time, as a daemon counts it
            r = run.result(s["grid"][0]["spec"], K)
            if r is not None:
                rest = [f for f in s["fixed"] if not f.startswith("period=")]
                s["live_spec"] = _history_time_spec(int(s["grid"][0]["value"]), r, K, rest)
                run.run([(s["live_spec"], K)], "history's period as a time")
    # the chosen value of each search, and the rows
    rows: list[dict] = []
    results: list[dict] = []
    ft = run.result("first-touch", K)
    slow = run.result("all-slow", K)
    assert ft is not None and slow is not None

    def row(spec: str, role: str, r: dict, **extra: Any) -> dict:
        d = {"policy": spec, "role": role, "runtime_ns": float(r["runtime_ns"]),
             "speedup_vs_first_touch": ft["runtime_ns"] / r["runtime_ns"] if r["runtime_ns"] else math.nan,
             "speedup_vs_all_slow": slow["runtime_ns"] / r["runtime_ns"] if r["runtime_ns"] else math.nan,
             "fast_hit_ratio": _fraction(r.get("fast_hit_ratio")), "migrations": int(r.get("migrations") or 0),
             "activations": r.get("activations"), "deployment": deploy.label(spec, r),
             "deployable": deploy.deployable(spec, r), "warnings": list(r.get("warnings") or [])}
        d.update(extra)
        return d

    for spec, s in searches.items():
        for x in s["grid"]:
            rr = run.result(x["spec"], K)
            x["runtime_ns"] = None if rr is None else float(rr["runtime_ns"])
            x["error"] = run.error(x["spec"], K) if rr is None else None
        ok = [x for x in s["grid"] if x["runtime_ns"] is not None]
        if not ok:
            if policies is not None:  # the user's own spec: its error, as a run of it gives it
                raise TierkitError(f"{spec}: {s['grid'][0]['error']}")
            skipped.append({"policy": spec, "why": s["grid"][0]["error"] or "every run failed"})
            continue
        # equal runtimes (a policy that never acted): the value nearest the default
        mid = s.get("default_index", 0)
        best = min(ok, key=lambda x: (x["runtime_ns"], abs(s["grid"].index(x) - mid)))
        final = s.get("live_spec") or best["spec"]
        r = run.result(final, K)
        if r is None:
            skipped.append({"policy": spec, "why": run.error(final, K) or "the run failed"})
            continue
        if s["how"] == "cori":
            tuned = (f"period {final.split('period=', 1)[1].split(',')[0]} (Cori: {best['value']:,} accesses, "
                     f"{len(s['grid'])} trials)")
            value: Any = best["value"]
        elif s["how"] in ("times", "choices"):
            tuned = f"{s['param']}={best['value']} (grid of {len(s['grid'])}, default {s.get('default') or 'equal'})"
            value = best["value"]
        elif s["how"] == "fixed":
            tuned = f"{s['param']}={best['value']} (given" + (f"; {final.split('period=', 1)[1].split(',')[0]} as a time)"
                                                             if s.get("live_spec") else ")")
            value = best["value"]
        else:
            tuned, value = "-", None
        s["chosen"] = value
        s["spec"] = final
        rows.append(row(final, "candidate", r, parameter=s["param"], value=None if value is None else str(value),
                        tuned=tuned, search=s["how"], command=None, why=None))
        results.append(r)
    # equal runtimes: the simplest deployment, then the candidates' order (the registry's;
    # guided's strategies thermos, hotset, knapsack)
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["runtime_ns"], _simplest(rows[i]["policy"]), i))
    rows, results = [rows[i] for i in order], [results[i] for i in order]
    for i, d in enumerate(rows):
        d["rank"] = i + 1
    # baselines and reference
    base_rows = []
    for b in ("all-fast", "all-slow"):
        r = run.result(b, K)
        assert r is not None
        base_rows.append(row(b, "baseline", r, parameter=None, value=None, tuned="-", search="none", command=None,
                             why="a bound: the whole footprint in the fast tier" if b == "all-fast"
                             else "every page in the slow tier", rank=None))
        results.append(r)
    ref_specs = []
    for spec in refs:
        if deploy.name_of(spec) == "oracle" and ":" not in spec:
            spec = f"oracle:period={hist_period or 1000}"
        ref_specs.append(spec)
    run.run([(s, K) for s in ref_specs], "reference policies")
    ref_rows = []
    for spec in ref_specs:
        r = run.result(spec, K)
        if r is None:
            skipped.append({"policy": spec, "why": run.error(spec, K) or "the run failed"})
            continue
        ref_rows.append(row(spec, "reference", r, parameter=None, value=None, tuned="-", search="none", command=None,
                            why=deploy.why(spec) or deploy.label(spec, r), rank=None))
        results.append(r)
    ref_rows.sort(key=lambda d: d["runtime_ns"])
    ref_results = {d["policy"]: run.result(d["policy"], K) for d in ref_rows}
    results = results[:len(rows) + len(base_rows)] + [r for r in ref_results.values() if r is not None]

    # 2. the recommendation
    prog = shlex.join(list(program)) if program else "PROGRAM"
    best = rows[0]
    ft_row = next(d for d in rows if d["policy"] == "first-touch")
    gain = best["speedup_vs_first_touch"] - 1
    if best["policy"] != "first-touch" and gain > NOISE_FLOOR:
        rec, reason = best, (f"{best['policy']} is {100 * gain:.1f}% faster than first-touch "
                             f"({best['speedup_vs_first_touch']:.3f}x)")
    else:
        rec = ft_row
        reason = ("first-touch is the fastest deployable policy" if best["policy"] == "first-touch" else
                  f"no deployable policy beats first-touch by more than the noise floor ({100 * NOISE_FLOOR:g}%): "
                  f"the best, {best['policy']}, is {100 * gain:+.1f}%")
    rec_result = results[rows.index(rec)]
    command = deploy.command(rec["policy"], rec_result, prog, os.fspath(trace))
    for d, r in zip(rows, results):
        d["command"] = deploy.command(d["policy"], r, prog, os.fspath(trace))
    runner_up = rows[1] if len(rows) > 1 else None
    other = runner_up if rec is best else best
    margin = None if other is None else other["runtime_ns"] / rec["runtime_ns"] - 1
    # the runner-up may be the same policy with another strategy or value: the best other policy too
    rival = next((d for d in rows if deploy.name_of(d["policy"]) != deploy.name_of(rec["policy"])), None)
    rival_margin = None if rival is None else rival["runtime_ns"] / rec["runtime_ns"] - 1

    # 3. sensitivity: the winner's grid, and the time scale
    sens: dict[str, Any] = {}
    w = searches.get(next((sp for sp, s in searches.items() if s.get("spec") == best["policy"]), ""), {})
    if w and len(w.get("grid", [])) > 1 and runner_up is not None:
        sens["parameter"] = _grid_sensitivity(w, best, rows)
    sens["time_scale"] = _scale_sensitivity(run, rows, K, rec["policy"])

    verified = verify_live(rows, results, program, trace, progress, where=verify) if verify else None
    advice: dict[str, Any] = {
        "trace": os.fspath(trace), "accesses": accesses, "pages": int(summary["pages"]),
        "allocations": int(summary.get("allocs") or 0), "platform": platform, "fast_capacity": str(fast_capacity),
        "fast_capacity_pages": ft.get("fast_capacity_pages"), "timing": timing, "time_scale": K,
        "noise_floor": NOISE_FLOOR,
        "recommendation": {"policy": rec["policy"], "deployment": rec["deployment"], "reason": reason,
                           "speedup_vs_first_touch": rec["speedup_vs_first_touch"],
                           "speedup_vs_all_slow": rec["speedup_vs_all_slow"], "runtime_ns": rec["runtime_ns"],
                           "margin": margin, "versus": None if other is None else other["policy"],
                           "margin_other_policy": rival_margin,
                           "versus_other_policy": None if rival is None else rival["policy"],
                           "command": command},
        "rows": [_jsonable(d) for d in rows + base_rows + ref_rows],
        "searches": {sp: _jsonable({k: v for k, v in s.items() if k != "fixed"}) for sp, s in searches.items()},
        "sensitivity": sens, "skipped": skipped,
        "runs": {"ran": run.ran, "cached": run.cached, "store": None},
        "seconds": None, "cpu_seconds": None,
    }
    if verified is not None:
        advice["verify"] = verified
    df = pd.DataFrame(rows + base_rows + ref_rows)
    cols = ["rank", "policy", "parameter", "value", "tuned", "runtime_ns", "speedup_vs_first_touch", "speedup_vs_all_slow",
            "deployment", "deployable", "command", "role", "search", "fast_hit_ratio", "migrations", "activations", "why",
            "warnings"]
    df = df[cols]
    df["rank"] = df["rank"].astype("Int64")
    df["activations"] = df["activations"].astype("Int64")
    # shared by the frames derived from this one, as compare's (tierkit.results)
    df.attrs["advice"] = SharedDict(advice)
    df.attrs["results"] = Results(results)
    return df


def _simplest(spec: str) -> int:
    """Equal runtimes are ranked by how simple the deployment is (deploy.DEPLOYABLE's order:
    a memory policy before a kernel setting, an allocator, a daemon)."""
    h = deploy.how(spec)
    return deploy.DEPLOYABLE.index(h) if h in deploy.DEPLOYABLE else len(deploy.DEPLOYABLE)


def _choose(ranking: list[tuple[str, float]], ft: float) -> str:
    """The recommendation among (spec, runtime) sorted fastest first: the fastest, if it beats
    first-touch (runtime ``ft``) by more than the noise floor; else first-touch."""
    p, r = ranking[0]
    return p if p != "first-touch" and ft / r - 1 > NOISE_FLOOR else "first-touch"


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the pool's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _grid_sensitivity(s: dict, best: dict, rows: list[dict]) -> dict:
    """At each value of the winner's grid, whether it still beats every other candidate (at
    their chosen values), and who wins where it does not."""
    others = [d for d in rows if d["policy"] != best["policy"]]
    top = min(others, key=lambda d: d["runtime_ns"])
    points = []
    for x in s["grid"]:
        if x.get("runtime_ns") is None:
            continue
        wins = x["runtime_ns"] < top["runtime_ns"]
        points.append({"value": x["value"], "runtime_ns": x["runtime_ns"], "wins": wins,
                       "winner": s["name"] if wins else top["policy"]})
    unit = " accesses" if s["how"] == "cori" else ""
    fmt = (lambda v: f"{v:,}{unit}") if s["how"] == "cori" else (lambda v: str(v))  # noqa: E731
    won = [p for p in points if p["wins"]]
    if len(won) == len(points):
        text = f"{s['name']} wins at every {s['param']} tried ({', '.join(fmt(p['value']) for p in points)})"
    elif not won:
        text = (f"{s['name']} wins only as run for the command ({best['policy']}); at every {s['param']} of the search "
                f"{top['policy']} wins")
    else:
        lost = [p for p in points if not p["wins"]]
        text = (f"{s['name']} wins only at {s['param']}={', '.join(fmt(p['value']) for p in won)}; at "
                f"{', '.join(fmt(p['value']) for p in lost)} {top['policy']} wins")
    return {"param": s["param"], "points": points, "holds": len(won) == len(points), "text": text}


def _scale_sensitivity(run: Runner, rows: list[dict], K: float, rec: str) -> dict:
    """The top candidates and first-touch at K/10 and 10K: the recommendation each scale
    would give (by the same rule), and whether it is the one given at K."""
    others = [d for d in rows if d["policy"] != "first-touch"]
    top = [d["policy"] for i, d in enumerate(others) if i < TOP_AT_SCALES or d["activations"] == 0] + ["first-touch"]
    scales = [K / 10, K * 10]
    run.run([(p, k) for k in scales for p in top], "other time scales")
    out: list[dict[str, Any]] = []
    for k in scales:
        ok = [(p, r) for p, r in ((p, run.result(p, k)) for p in top) if r is not None]
        ok.sort(key=lambda pr: (pr[1]["runtime_ns"], _simplest(pr[0]), top.index(pr[0])))  # ties: as ranked at K
        ft = next(r for p, r in ok if p == "first-touch")["runtime_ns"]
        ranking: list[dict[str, Any]] = [
            {"policy": p, "runtime_ns": r["runtime_ns"], "speedup_vs_first_touch": ft / r["runtime_ns"]} for p, r in ok]
        chosen = _choose([(x["policy"], x["runtime_ns"]) for x in ranking], ft)
        out.append({"time_scale": k, "ranking": ranking, "recommendation": chosen, "holds": chosen == rec})
    holds = all(x["holds"] for x in out)
    parts = []
    for x in out:
        others = [y for y in x["ranking"] if y["policy"] != "first-touch"]
        if x["recommendation"] != "first-touch":
            what = f"{x['recommendation']} ({others[0]['speedup_vs_first_touch']:.3f}x first-touch)"
        elif others:
            what = f"first-touch (best other: {others[0]['policy']}, {others[0]['speedup_vs_first_touch']:.3f}x)"
        else:
            what = "first-touch (no other candidate)"
        if x["recommendation"] != rec:
            mine = next((y["speedup_vs_first_touch"] for y in x["ranking"] if y["policy"] == rec), None)
            what += "" if mine is None else f", {rec} {mine:.3f}x"
        parts.append(f"at {x['time_scale']:g}: {what}")
    text = (f"time scale {K / 10:g} and {K * 10:g} ({len(top) - 1} candidates and first-touch): " + "; ".join(parts) +
            (f": the recommendation ({rec}) holds" if holds else f": the recommendation ({rec}) does not hold at every time scale"))
    return {"scales": out, "holds": holds, "text": text}


# --- recording and verifying ------------------------------------------------------------------


def _record(trace: PathLike, program: Sequence[str], force: bool, progress: Optional[bool]) -> None:
    from .api import record

    if os.path.exists(os.fspath(trace)) and not force:
        print(f"tierkit advise: {os.fspath(trace)} exists: advising on it (--force records the program again)",
              file=sys.stderr)
        return
    # the program's output goes to stderr: this command's standard output is the advice
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        r = record(program[0], list(program[1:]), trace, force=force, progress=progress)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    if r["status"] != 0:
        print(f"tierkit advise: warning: {program[0]} exited with status {r['status']} while recorded", file=sys.stderr)
    if r.get("incomplete"):
        print(f"tierkit advise: warning: the trace is incomplete: {r['incomplete']}", file=sys.stderr)


def nodes_with_memory(root: str = "/sys/devices/system/node") -> list[int]:
    """The NUMA nodes with memory (``has_memory``; every ``nodeN`` folder where it is missing)."""
    try:
        text = Path(root, "has_memory").read_text().strip()
    except OSError:
        try:
            return sorted(int(p.name[4:]) for p in Path(root).glob("node[0-9]*"))
        except OSError:
            return []
    out: list[int] = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def check_two_nodes(root: str = "/sys/devices/system/node") -> None:
    nodes = nodes_with_memory(root)
    if len(nodes) < 2:
        where = f"one NUMA node with memory (node {nodes[0]})" if nodes else "no NUMA node with memory that Linux shows"
        raise TierkitError(f"--verify: this machine has {where}: a live run needs a fast and a slow node (the testbed "
                           "VM, docs/real-linux.md)")


def verify_where(root: str = "/sys/devices/system/node") -> str:
    """Where ``--verify`` runs the top two live: ``host`` on a machine with a fast and a slow
    NUMA node, else ``vm``, the testbed VM (docs/real-linux.md) when it can boot here; one
    error line saying both when neither can."""
    if len(nodes_with_memory(root)) >= 2:
        return "host"
    from .testbed import availability

    why = availability()
    if why is None:
        return "vm"
    try:
        check_two_nodes(root)
    except TierkitError as e:
        raise TierkitError(f"{e}; and the testbed VM cannot run here: {why}") from None
    return "host"


class VMRunner:
    """``tierkit run`` in the testbed VM, for ``--verify`` on a machine with one node: one VM
    (1 GiB fast node 0, 1 GiB slow node 1, docs/real-linux.md) with tierkit-run, the
    allocator, the program (the host's binary at its own path, with the libraries it loads)
    and the files named in its arguments; each call runs the program under one policy and
    returns tierkit-run's report, whose ``wall_s`` is the program's wall time in the VM."""

    def __init__(self, program: Sequence[str], progress: Optional[bool]):
        from .testbed import FileSet, Testbed, VMConfig
        from .validate import ROOT

        run_bin = ROOT / "target" / "release" / "tierkit-run"
        lib = ROOT / "target" / "release" / "libtierkit_alloc.so"
        for p, how in ((run_bin, "cargo build --release -p tierkit-run"), (lib, "make alloc")):
            if not p.is_file():
                raise TierkitError(f"--verify: {p} is missing ({how}); the VM runs it")
        exe = shutil.which(str(program[0])) or str(program[0])
        exe_path = Path(exe).resolve()
        if not exe_path.is_file():
            raise TierkitError(f"--verify: {program[0]}: no such program")
        files = FileSet().add_binary(run_bin).add_binary(lib, "/usr/local/bin/libtierkit_alloc.so")
        files.add_binary(exe_path, str(exe_path))
        argv = [str(exe_path)]
        for a in program[1:]:
            pa = Path(str(a))
            if pa.is_file():
                files.add_file(pa.resolve(), str(pa.resolve()))
                argv.append(str(pa.resolve()))
            else:
                argv.append(str(a))
        self.argv = argv
        self.progress = progress
        self.vm = Testbed(VMConfig(fast_mib=1024, slow_mib=1024), files)

    def __enter__(self) -> "VMRunner":
        self.vm.__enter__()
        if self.progress is not False:
            print(f"tierkit advise: testbed VM up in {self.vm.boot_s:.0f} s", file=sys.stderr)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.vm.__exit__(*exc)

    def __call__(self, program: str, args: Sequence[str], policy: str = "first-touch",
                 fast_capacity: Optional[str] = None, guidance: Optional[PathLike] = None) -> dict:
        from .testbed import FileSet

        how = ["--policy", policy]
        if fast_capacity:
            how += ["--fast-capacity", str(fast_capacity)]
        if guidance is not None:
            self.vm.put(FileSet().add_file(Path(guidance), "/root/advise.guidance.json"))
            how += ["--guidance", "/root/advise.guidance.json"]
        cmd = (f"tierkit-run --json {shlex.join(how)} -- {shlex.join(self.argv)} > $OUT/run 2> $OUT/err; "
               "echo $? > $OUT/rc")
        r = self.vm.run(cmd, timeout_s=600)
        out = (r.files.get("run") or b"").decode().strip().splitlines()
        try:
            rep = json.loads(out[-1])
        except (IndexError, ValueError):
            err = ((r.files.get("err") or b"").decode() + r.stderr).strip().replace("\n", " ")[-300:]
            raise TierkitError(f"--verify: tierkit run --policy {policy} in the VM failed: {err}") from None
        rep["where"] = "testbed VM"
        return rep


def verify_live(rows: list[dict], results: list[dict], program: Optional[Sequence[str]], trace: PathLike,
                progress: Optional[bool], runner: Optional[Callable[..., dict]] = None,
                where: Union[bool, str] = "host") -> list[dict]:
    """Run the top two candidates live (``tierkit run``) on ``program`` and measure their wall
    time, against their predicted runtimes (the simulation's: their ratio is what to compare,
    as the simulated time is the trace's accesses and the live time the whole program's).
    ``where``: ``host``, or ``vm`` (the testbed VM, :class:`VMRunner`); a ``wall_s`` in the
    live report (the program's own, as tierkit-run measured it) is taken over the time the
    call took."""
    import tempfile

    from . import api

    assert program
    if runner is None and where == "vm":
        with VMRunner(program, progress) as vm:
            return verify_live(rows, results, program, trace, progress, vm, "vm")
    runner = runner or api.run_program
    out = []
    for d, r in list(zip(rows, results))[:2]:
        cap = deploy.fast_bytes(r)
        capopt = deploy._size(cap) if cap else None
        kw: dict[str, Any] = {"fast_capacity": capopt}
        with tempfile.TemporaryDirectory(prefix="tierkit-advise-") as tmp:
            if deploy.how(d["policy"]) == "allocator":
                strategy = _args_of(d["policy"]).get("strategy", "thermos")
                p = api.profile(trace, progress=progress)
                frac = deploy.capacity_fraction(r)
                c: Any = 0.125 if frac is None else frac
                api.guide(p, strategy=strategy, capacity=c, out=Path(tmp) / "guidance.json")
                kw.update(policy="first-touch", guidance=Path(tmp) / "guidance.json")
            else:
                kw.update(policy=d["policy"])
            print(f"tierkit advise: running {d['policy']} live: {shlex.join(list(program))}", file=sys.stderr)
            t0 = time.perf_counter()
            with redirect_stdout(sys.stderr):
                rep = runner(program[0], list(program[1:]), **kw)
            wall = time.perf_counter() - t0
        if isinstance(rep.get("wall_s"), (int, float)):
            wall = float(rep["wall_s"])
        out.append({"policy": d["policy"], "predicted_runtime_ns": d["runtime_ns"], "measured_wall_s": wall,
                    "exit_status": rep.get("exit_status"), "migrations": rep.get("migrations"),
                    "where": rep.get("where", "this machine")})
    if len(out) == 2 and out[0]["measured_wall_s"] > 0:
        pred = out[1]["predicted_runtime_ns"] / out[0]["predicted_runtime_ns"]
        meas = out[1]["measured_wall_s"] / out[0]["measured_wall_s"]
        out[0]["ratio"] = {"predicted": pred, "measured": meas, "holds": (pred >= 1) == (meas >= 1)}
    return out


# --- the text the command prints -------------------------------------------------------------


def _ms(ns: Optional[float]) -> str:
    if ns is None:
        return "-"
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3f} {unit}"
    return f"{ns:.0f} ns"


def text(advice: dict) -> list[str]:
    """The advice as ``tierkit advise`` prints it; the last line is ``Run: <command>``."""
    a = advice
    alloc = f"{a['allocations']:,} allocations" if a["allocations"] else "no allocation events"
    cap = f" ({a['fast_capacity_pages']:,} pages)" if a.get("fast_capacity_pages") is not None else ""
    out = [f"trace {a['trace']}: {a['accesses']:,} accesses, {a['pages']:,} pages, {alloc}; {a['platform']}, "
           f"fast tier {a['fast_capacity']}{cap}, {a['timing']} timing, time scale {a['time_scale']:g}"]
    cand = [r for r in a["rows"] if r["role"] == "candidate"]
    wp = max([len(r["policy"]) for r in cand] + [6])
    wt = max([len(r["tuned"]) for r in cand] + [5])
    out.append(f"{'rank':>4}  {'policy':<{wp}}  {'tuned':<{wt}}  {'runtime':>11}  {'vs first-touch':>14}  "
               f"{'vs all-slow':>11}  {'acted':>7}  deployment")
    for r in cand:
        acted = "-" if r["activations"] is None else f"{r['activations']:,}"
        out.append(f"{r['rank']:>4}  {r['policy']:<{wp}}  {r['tuned']:<{wt}}  {_ms(r['runtime_ns']):>11}  "
                   f"{r['speedup_vs_first_touch']:>13.3f}x  {r['speedup_vs_all_slow']:>10.3f}x  {acted:>7}  {r['deployment']}")
    never = [r["policy"] for r in cand if r["activations"] == 0]
    if never:
        ft = next(r for r in cand if r["policy"] == "first-touch")
        out.append(f"  (acted 0: {', '.join(never)}: never acted, their periods are longer than the trace's "
                   f"{_ms(ft['runtime_ns'])} of simulated time; --time-scale K divides them by K, docs/models.md)")
    base = [r for r in a["rows"] if r["role"] == "baseline"]
    out.append("baselines: " + "; ".join(f"{r['policy']} {_ms(r['runtime_ns'])} ({r['speedup_vs_first_touch']:.3f}x "
                                         f"first-touch; {r['why']})" for r in base))
    ref = [r for r in a["rows"] if r["role"] == "reference"]
    if ref:
        out.append("for reference, not deployable:")
        for r in ref:
            out.append(f"  {r['policy']}  {_ms(r['runtime_ns'])} ({r['speedup_vs_first_touch']:.3f}x first-touch): "
                       f"{r['deployment']}: {r['why']}")
    for s in a["skipped"]:
        out.append(f"skipped: {s['policy']}: {s['why']}")
    rec = a["recommendation"]
    out.append(f"recommendation: {rec['policy']} ({rec['deployment']}): {rec['reason']}")
    if rec["versus"] is not None and rec["margin"] is not None:
        m = rec["margin"]
        tie = " (within the noise floor: a tie)" if abs(m) <= a["noise_floor"] else ""
        line = f"margin: {100 * m:+.1f}% over {rec['versus']}{tie}"
        if rec.get("versus_other_policy") not in (None, rec["versus"]):
            line += f"; {100 * rec['margin_other_policy']:+.1f}% over the best other policy, {rec['versus_other_policy']}"
        out.append(line)
    sens = a["sensitivity"]
    if "parameter" in sens:
        out.append(f"sensitivity ({sens['parameter']['param']}): {sens['parameter']['text']}")
    else:
        best = cand[0]["policy"] if cand else "-"
        out.append(f"sensitivity (parameter): none searched for {best}")
    out.append(f"sensitivity (time scale): {sens['time_scale']['text']}")
    for v in a.get("verify") or []:
        out.append(f"verify: {v['policy']}: measured {v['measured_wall_s']:.3f} s wall in {v.get('where', 'this machine')} (exit {v['exit_status']}), "
                   f"predicted {_ms(v['predicted_runtime_ns'])} (the trace's simulated time)")
        if "ratio" in v:
            q = v["ratio"]
            out.append(f"verify: second over first: predicted {q['predicted']:.3f}, measured {q['measured']:.3f}: "
                       + ("the order holds" if q["holds"] else "the order does NOT hold live"))
    out.append(f"({a['runs']['ran']} runs, {a['runs']['cached']} from the store; {a['seconds']:.1f} s wall, "
               f"{a['cpu_seconds']:.1f} s CPU)")
    out.append(f"Run: {rec['command']}")
    return out
