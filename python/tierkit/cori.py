"""Cori (003 §3.3): tune a periodic page scheduler's period from the trace's data reuse.

1. **Reuse collector**: one pass over the trace gives every page's reuse distances (accesses
   between two consecutive accesses to the page), histogrammed in buckets of ``bucket``
   accesses (1,000 as in cori-sim). A bucket's height is the average number of reuses per
   page over the pages reused more than once at that distance; the first bucket (reuse
   within one bucket) and buckets whose height is at most 2 are dropped, as cori-sim does.
2. **Frequency generator**: the dominant reuse period is the weighted average of the kept
   buckets' distances, each weighted by its height times a weight falling linearly from 1
   (shortest kept distance) to 0 (longest); the candidates are its multiples up to half the
   trace, keeping one period per distinct number of periods in the trace, shortest first.
3. **Tuner**: runs the candidates in that order and stops at the first trial that does not
   improve on the best so far (``patience`` trials in a row, 1 by default); the best trial
   run is the chosen period.

The insight-less baselines of 003 §3.3.3 explore a grid of periods a constant step apart
(``grid`` points up to half the trace): ``base-left`` from the longest period down,
``base-right`` from the shortest up, ``base-random`` in a seeded random order. An exhaustive
sweep over the grid and the candidates gives the best period found. Against it every method
(Cori included) gets, counted alike (:func:`compare_methods`):

* ``trials_to_best``: the trials it needs, in its own order run to the end, to come within
  ``within`` of the best (None if it never does);
* its slowdown at two budgets: ``slowdown_at_cori_trials``, after the trials Cori ran until
  its stopping rule, and ``slowdown_at_cori_trials_to_best``, after Cori's trials to best,
  the budget of 003 §3.3.3 (Fig. 3.6: "the same number of tuning trials that Cori requires
  to find best performance"; Fig. 3.7 compares trials to best).
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _core
from .progress import Bar

PathLike = Union[str, "os.PathLike[str]"]

#: Schedulers Cori can tune (periodic page schedulers whose period is in accesses).
SCHEDULERS = ("history", "oracle")
METHODS = ("cori", "base-left", "base-right", "base-random")
#: The scheduler's ``compat`` values (docs/policies.md, ``history``).
COMPAT = ("none", "cori-sim", "cori-sim-raw")


def reuse_profile(trace: PathLike, bucket: int = 1000, format: Optional[str] = None, cache: Optional[str] = None,
                  progress: Optional[bool] = None) -> dict:
    """The reuse histogram of a trace and what cori-sim keeps of it (``kept``: bucket start
    distances and heights)."""
    if bucket < 1:
        raise _core.TierkitError(f"--bucket: {bucket} must be at least 1 access")
    with Bar("reuse", progress) as bar:
        h = json.loads(_core.reuse_histogram(os.fspath(trace), int(bucket), format, cache, bar.callback))
    rep = np.asarray(h["multi_repeats"], dtype=float)
    pages = np.asarray(h["multi_pages"], dtype=float)
    height = np.divide(rep, pages, out=np.zeros_like(rep), where=pages > 0)
    idx = np.flatnonzero(height > 2)
    idx = idx[idx >= 1]  # the first bucket is reuse within a period
    h["kept"] = {"distance": (idx * bucket).tolist(), "height": height[idx].tolist()}
    reuses = np.asarray(h["reuses"], dtype=float)
    mids = (np.arange(len(reuses)) + 0.5) * bucket
    h["mean_reuse"] = float((reuses * mids).sum() / reuses.sum()) if reuses.sum() > 0 else None
    return h


def dominant_reuse(profile: dict) -> int:
    """The dominant reuse period (accesses) of a :func:`reuse_profile`.

    Falls back, when fewer than two buckets are kept (no weights to average), to the one
    kept distance, else to the mean reuse distance, else to one bucket."""
    d = np.asarray(profile["kept"]["distance"], dtype=float)
    hgt = np.asarray(profile["kept"]["height"], dtype=float)
    if len(d) >= 2:
        w = hgt * np.linspace(1.0, 0.0, num=len(d))
        return max(1, int(np.average(d, weights=w)))
    if len(d) == 1:
        return max(1, int(d[0]))
    if profile.get("mean_reuse"):
        return max(1, int(profile["mean_reuse"]))
    return int(profile["bucket"])


def candidates(dominant: int, accesses: int) -> list[int]:
    """Multiples of the dominant reuse up to half the trace, one per distinct number of
    periods in the trace, shortest first."""
    if dominant < 1:
        raise ValueError("the dominant reuse must be at least 1")
    out: list[int] = []
    seen: set[int] = set()
    p = dominant
    while p <= accesses / 2:
        n = int(accesses / p)
        if n not in seen:
            seen.add(n)
            out.append(p)
        p += dominant
    return out or [max(1, min(dominant, accesses))]


def grid(accesses: int, points: int = 50) -> list[int]:
    """The baselines' periods: ``points`` periods a constant step apart, up to half the trace."""
    step = max(1, int(accesses / 2 / points))
    return sorted({step * i for i in range(1, points + 1)})


def _stop_at(runtimes: Sequence[float], patience: int, min_gain: float = 0.0) -> Optional[int]:
    """The trial (1-based) after which the tuner stops, or None if it runs them all."""
    best = float("inf")
    misses = 0
    for i, r in enumerate(runtimes):
        if r < best * (1 - min_gain):
            best = r
            misses = 0
        else:
            misses += 1
            if misses >= patience:
                return i + 1
    return None


def tuner_trials(runtimes: Sequence[float], patience: int = 1, min_gain: float = 0.0) -> int:
    """Cori's stopping rule: how many trials run, in order, before ``patience`` trials in a
    row fail to improve on the best so far by more than ``min_gain`` (a fraction)."""
    return _stop_at(runtimes, patience, min_gain) or len(runtimes)


def trials_to_best(runtimes: Sequence[float], best: float, within: float) -> Optional[int]:
    """Trials (1-based) a method needs, running ``runtimes`` in order to the end, to come
    within ``within`` (a fraction) of ``best``; None if it never does."""
    for i, r in enumerate(runtimes):
        if r <= best * (1 + within):
            return i + 1
    return None


def best_within(runtimes: Sequence[float], budget: int) -> int:
    """Index of the fastest of the first ``budget`` trials (all of them if fewer; the first
    of equals)."""
    return int(np.argmin(runtimes[:max(1, budget)]))


def compare_methods(orders: dict[str, list[int]], runtime: dict[int, float], cori_trials: int,
                    within: float) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """Every method counted alike against the best runtime of ``runtime`` (period → ns).

    Returns the two budgets, ``cori_trials`` (the trials Cori ran) and ``cori_trials_to_best``
    (the trials Cori needs, its candidates run to the end, to come within ``within`` of the
    best; all its candidates if it never does), and per method its ``trials_to_best`` and the
    period it chooses and its slowdown after each budget."""
    best = min(runtime.values())
    ttb = {name: trials_to_best([runtime[p] for p in order], best, within) for name, order in orders.items()}
    budgets = {"cori_trials": cori_trials,
               "cori_trials_to_best": ttb["cori"] if ttb["cori"] is not None else len(orders["cori"])}
    methods: dict[str, dict[str, Any]] = {}
    for name, order in orders.items():
        rts = [runtime[p] for p in order]
        m: dict[str, Any] = {"trials_to_best": ttb[name], "explored": len(order)}
        for key, budget in budgets.items():
            chosen = order[best_within(rts, budget)]
            m[f"period_at_{key}"] = chosen
            m[f"slowdown_at_{key}"] = runtime[chosen] / best - 1
        methods[name] = m
    return budgets, methods


def _orders(cands: list[int], g: list[int], seed: int) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    return {"cori": cands, "base-left": g[::-1], "base-right": list(g), "base-random": [g[i] for i in rng.permutation(len(g))]}


def tune(trace: PathLike, scheduler: str = "history", platform: str = "dram-pmem",
         fast_capacity: Union[None, float, str] = 0.2, timing: str = "simple", bucket: int = 1000,
         grid_points: int = 50, patience: int = 1, within: float = 0.03, seed: int = 0,
         exhaustive: bool = True, format: Optional[str] = None, cache: Optional[str] = None,
         progress: Optional[bool] = None, workers: Optional[int] = None,
         extra: str = "", compat: str = "none", bins: Optional[int] = None) -> dict[str, Any]:
    """Tune ``scheduler``'s period on ``trace`` with Cori and the baselines.

    ``compat`` and ``bins`` are the scheduler's parameters of those names (``bins=None``: its
    default). Returns the reuse profile summary, the candidates, Cori's trials and chosen
    period, and, with ``exhaustive``, the best period of the sweep, the two budgets
    (``budget_cori_trials``, ``budget_cori_trials_to_best``) and per method its trials to
    best and its slowdown after each budget (:func:`compare_methods`)."""
    from ._engine import run

    if scheduler not in SCHEDULERS:
        raise _core.TierkitError(f"--scheduler: unknown scheduler '{scheduler}' (known: {', '.join(SCHEDULERS)})")
    if patience < 1 or grid_points < 1:
        raise _core.TierkitError("--patience and --grid must be at least 1")
    if compat not in COMPAT:
        raise _core.TierkitError(f"--compat: unknown value '{compat}' (known: {', '.join(COMPAT)})")
    if bins is not None and (isinstance(bins, bool) or not isinstance(bins, int) or not 0 <= bins <= 32):
        raise _core.TierkitError(f"--bins: {bins!r} must be a whole number in [0, 32] (log2 count classes)")
    params = [f"compat={compat}"] + ([f"bins={bins}"] if bins is not None else []) + ([extra] if extra else [])
    prof = reuse_profile(trace, bucket, format, cache, progress)
    accesses = int(prof["accesses"])
    if accesses < 2:
        raise _core.TierkitError(f"{os.fspath(trace)}: the trace has {accesses} accesses; tuning needs at least 2")
    dom = dominant_reuse(prof)
    cands = candidates(dom, accesses)
    g = grid(accesses, grid_points)
    results: dict[int, dict] = {}

    def sim(period: int) -> dict:
        pol = f"{scheduler}:period={period}," + ",".join(params)
        r = run(trace, platform, pol, fast_capacity, None, timing, format, cache, False)
        return {"period": period, "runtime_ns": r["runtime_ns"], "migrations": r["migrations"],
                "fast_hit_ratio": r["fast_hit_ratio"]}

    def ensure(periods: Sequence[int], desc: str) -> None:
        todo = [p for p in dict.fromkeys(periods) if p not in results]
        if not todo:
            return
        bar = Bar(desc, progress, unit="run")
        n = workers or min(len(todo), os.cpu_count() or 1)
        with bar, ThreadPoolExecutor(max_workers=n) as ex:
            for k, r in enumerate(ex.map(sim, todo)):
                results[r["period"]] = r
                bar.callback(k + 1, len(todo))

    # Cori's own trials, one at a time in order, stopping by its rule
    trials: list[dict] = []
    for p in cands:
        ensure([p], "cori")
        trials.append(results[p])
        if _stop_at([t["runtime_ns"] for t in trials], patience) is not None:
            break
    n_cori = len(trials)
    best_trial = min(trials, key=lambda t: (t["runtime_ns"], t["period"]))
    out: dict[str, Any] = {
        "trace": os.fspath(trace), "scheduler": scheduler, "platform": platform,
        "fast_capacity": fast_capacity, "timing": timing,
        "accesses": accesses, "pages": prof["pages"],
        "reuse": {"bucket": bucket, "kept_buckets": len(prof["kept"]["distance"]), "mean_reuse": prof["mean_reuse"]},
        "policy_params": {"compat": compat, "bins": bins},
        "dominant_reuse": dom, "candidates": cands, "patience": patience,
        "trials": trials, "chosen_period": best_trial["period"], "chosen_runtime_ns": best_trial["runtime_ns"],
    }
    if not exhaustive:
        return out
    ensure(sorted(set(g) | set(cands)), "sweep")
    sweep = sorted(results.values(), key=lambda r: r["period"])
    best = min(sweep, key=lambda r: (r["runtime_ns"], r["period"]))
    out["grid"] = g
    out["sweep"] = sweep
    out["best_period"] = best["period"]
    out["best_runtime_ns"] = best["runtime_ns"]
    budgets, methods = compare_methods(_orders(cands, g, seed), {p: r["runtime_ns"] for p, r in results.items()},
                                       n_cori, within)
    out["budget_cori_trials"] = budgets["cori_trials"]
    out["budget_cori_trials_to_best"] = budgets["cori_trials_to_best"]
    out["methods"] = methods
    out["within"] = within
    out["warnings"] = [] if methods["cori"]["trials_to_best"] is not None else [
        f"Cori's candidates never come within {100 * within:g}% of the best period ({best['period']:,}); "
        f"the baselines' budget budget_cori_trials_to_best is all {len(cands)} candidates"]
    return out
