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
``base-right`` from the shortest up, ``base-random`` in a seeded random order. Each is
given Cori's trial budget; an exhaustive sweep over the grid and the candidates gives the
best period found, against which every method's slowdown and trials-to-best (the trials a
method needs, in its own order, to come within ``within`` of that best) are reported.
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


def _orders(cands: list[int], g: list[int], seed: int) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    return {"cori": cands, "base-left": g[::-1], "base-right": list(g), "base-random": [g[i] for i in rng.permutation(len(g))]}


def tune(trace: PathLike, scheduler: str = "history", platform: str = "dram-pmem",
         fast_capacity: Union[None, float, str] = 0.2, timing: str = "simple", bucket: int = 1000,
         grid_points: int = 50, patience: int = 1, within: float = 0.03, seed: int = 0,
         exhaustive: bool = True, format: Optional[str] = None, cache: Optional[str] = None,
         progress: Optional[bool] = None, workers: Optional[int] = None,
         extra: str = "") -> dict[str, Any]:
    """Tune ``scheduler``'s period on ``trace`` with Cori and the baselines.

    Returns the reuse profile summary, the candidates, Cori's trials and chosen period, and,
    with ``exhaustive``, the best period of the sweep and per method its slowdown after
    Cori's trial budget and its trials to come within ``within`` of the best."""
    from ._engine import run

    if scheduler not in SCHEDULERS:
        raise _core.TierkitError(f"--scheduler: unknown scheduler '{scheduler}' (known: {', '.join(SCHEDULERS)})")
    if patience < 1 or grid_points < 1:
        raise _core.TierkitError("--patience and --grid must be at least 1")
    prof = reuse_profile(trace, bucket, format, cache, progress)
    accesses = int(prof["accesses"])
    if accesses < 2:
        raise _core.TierkitError(f"{os.fspath(trace)}: the trace has {accesses} accesses; tuning needs at least 2")
    dom = dominant_reuse(prof)
    cands = candidates(dom, accesses)
    g = grid(accesses, grid_points)
    results: dict[int, dict] = {}

    def sim(period: int) -> dict:
        pol = f"{scheduler}:period={period}" + (f",{extra}" if extra else "")
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
    methods: dict[str, Any] = {}
    for name, order in _orders(cands, g, seed).items():
        rts = [results[p]["runtime_ns"] for p in order]
        budget = n_cori
        seen = rts[:budget]
        chosen = order[int(np.argmin(seen))]
        close = [i for i, r in enumerate(rts) if r <= best["runtime_ns"] * (1 + within)]
        methods[name] = {
            "trials": budget,
            "chosen_period": chosen,
            "slowdown_vs_best": results[chosen]["runtime_ns"] / best["runtime_ns"] - 1,
            "trials_to_best": close[0] + 1 if close else None,
            "explored": len(order),
        }
    out["methods"] = methods
    out["within"] = within
    return out
