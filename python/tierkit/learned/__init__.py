"""Kleio (003 §3.2) and Kleoniki (003 §4): the ``history`` page scheduler with learned
predictions for the pages history misplaces.

Pipeline (``predictions``):

1. **Counts**: per-period, per-page access counts of the trace (Rust, one pass; page ids
   are the engine's), binned in log2 classes exactly as ``history``'s ``bins``.
2. **Page selector**: in every period ``t`` the pages history wants in the fast tier are the
   fast tier's capacity worth of the hottest of period ``t-1``; the oracle's are the hottest
   of period ``t``. A page the oracle wants and history does not is *misplaced* in ``t``,
   and its accesses in ``t`` are served from the slow tier for nothing. Pages are ranked by
   those accesses (their misplaced accesses), and the top ``pages`` share of the trace's
   pages gets a model.
3. **Models** (:mod:`tierkit.learned.lstm`, PyTorch): Kleio trains one LSTM per selected page on
   the page's class series (predict period ``t`` from periods ``t-K..t-1``); Kleoniki first
   groups the selected pages whose patterns are identical, then similar (k-means within
   ``tol`` classes per period), and trains one LSTM per group on the group's pattern.
4. **Predictions file**: every selected page's predicted class for every period from ``K``
   on, computed from its own counts in the ``K`` periods before (never from the period
   predicted). In a trace-driven simulation counts do not depend on placement, so this is
   what running the model at each boundary would give. The Rust scheduler ranks those pages
   by their predicted class and every other page by its last-period count.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import numpy as np

from .. import _core
from ..progress import Bar

PathLike = Union[str, "os.PathLike[str]"]
_B36 = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)


@dataclass
class Counts:
    """Sparse per-period counts of one trace (see ``tierkit_core::periods``)."""

    period: int
    periods: int
    accesses: int
    page_addr: np.ndarray
    period_of: np.ndarray
    page: np.ndarray
    count: np.ndarray
    digest: str
    trace: str
    #: start of each period's entries in the arrays (len periods + 1)
    starts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.starts = np.searchsorted(self.period_of, np.arange(self.periods + 1)).astype(np.int64)

    @property
    def pages(self) -> int:
        return len(self.page_addr)

    def dense(self, rows: np.ndarray, bins: int) -> np.ndarray:
        """Classes [len(rows), periods] of the given page ids."""
        from .lstm import count_class

        pos = np.full(self.pages, -1, dtype=np.int64)
        pos[rows] = np.arange(len(rows))
        out = np.zeros((len(rows), self.periods), dtype=np.uint8)
        sel = pos[self.page] >= 0
        out[pos[self.page[sel]], self.period_of[sel]] = count_class(self.count[sel], bins)
        return out


_counts_cache: dict = {}


def counts(trace: PathLike, period: int, format: Optional[str] = None, cache: Optional[str] = None,
           progress: Optional[bool] = None) -> Counts:
    """Per-period counts of a trace for a period of ``period`` accesses (cached per file)."""
    if period < 1:
        raise _core.TierkitError(f"period: {period} must be at least one access")
    try:
        st = os.stat(trace)
        key = (os.path.abspath(trace), st.st_mtime_ns, st.st_size, int(period), format, cache)
    except OSError:
        key = None  # missing or unreadable: the core's reading names the file (one line, status 2)
    if key is None or key not in _counts_cache:
        with Bar("counts", progress) as bar:
            d = _core.period_counts(os.fspath(trace), int(period), format, cache, bar.callback)
        c = Counts(d["period"], d["periods"], d["accesses"], d["page_addr"], d["period_of"], d["page"], d["count"],
                   d["digest"], os.fspath(trace))
        if key is None:
            return c
        # these can be large: keep two, a simulated trace and its training trace
        while len(_counts_cache) >= 2:
            del _counts_cache[next(iter(_counts_cache))]
        _counts_cache[key] = c
    return _counts_cache[key]


def fast_pages(c: Counts, fast_capacity: float) -> int:
    """The fast tier's capacity in pages for a fraction of the footprint (as the engine)."""
    return max(1, int(fast_capacity * c.pages))


def select_pages(c: Counts, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Kleio's page selector: pages ranked by their misplaced accesses (accesses in periods
    where the oracle wants them in the fast tier and history does not), most first; pages
    never misplaced are left out. Returns (page ids, misplaced accesses)."""
    score = np.zeros(c.pages, dtype=np.int64)
    prev_top: Optional[np.ndarray] = None
    for t in range(c.periods):
        a, b = c.starts[t], c.starts[t + 1]
        pages, cnt = c.page[a:b], c.count[a:b]
        if len(pages) > capacity:
            # the hottest `capacity`, ties by first access in the period (stable)
            top = pages[np.argsort(-cnt.astype(np.int64), kind="stable")[:capacity]]
        else:
            top = pages
        if prev_top is not None:
            wanted = np.zeros(c.pages, dtype=bool)
            wanted[top] = True
            wanted[prev_top] = False
            miss = wanted[pages]
            np.add.at(score, pages[miss], cnt[miss])
        prev_top = top
    order = np.argsort(-score, kind="stable")
    order = order[score[order] > 0]
    return order.astype(np.uint32), score[order]


@dataclass
class Made:
    """What :func:`predictions` made: the file, and how it was made."""

    path: str
    info: dict


def _rows(pred: np.ndarray) -> list[str]:
    """Predicted classes (-1 = none) → one base-36 string per row."""
    chars = np.where(pred < 0, ord("-"), _B36[np.clip(pred, 0, 35)]).astype(np.uint8)
    return [bytes(r).decode("ascii") for r in chars]


#: share of the periods held out by default: models train on the periods before, and are
#: judged (and used) only on the held-out periods after
HOLDOUT = 0.5


def scores(pred: np.ndarray, actual: np.ndarray) -> dict:
    """How well predicted classes match the actual ones (arrays of the same shape; entries
    with pred < 0 are left out): ``accuracy`` (exact class), ``accessed_recall`` (of the
    periods in which the page is accessed, the share predicted accessed: a model that
    collapses to "no access" scores low here while its accuracy can look good),
    ``idle_recall``, ``balanced_accuracy`` (their mean) and ``class_mae`` (mean absolute
    error in classes). None where there is nothing to score."""
    ok = pred >= 0
    p, a = pred[ok].astype(np.int64), actual[ok].astype(np.int64)
    acc_ = a > 0
    out: dict = {"accuracy": None, "accessed_recall": None, "idle_recall": None, "balanced_accuracy": None,
                 "class_mae": None, "scored": int(len(a))}
    if not len(a):
        return out
    out["accuracy"] = float((p == a).mean())
    out["class_mae"] = float(np.abs(p - a).mean())
    if acc_.any():
        out["accessed_recall"] = float((p[acc_] > 0).mean())
    if (~acc_).any():
        out["idle_recall"] = float((p[~acc_] == 0).mean())
    parts = [x for x in (out["accessed_recall"], out["idle_recall"]) if x is not None]
    out["balanced_accuracy"] = float(np.mean(parts))
    return out


def file_digest(path: PathLike) -> str:
    """SHA-256 of a file's bytes (how results name the guidance and predictions they used)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def predictions(trace: PathLike, policy: str = "kleio", pages: float = 0.1, period: int = 1000, bins: int = 16,
                fast_capacity: float = 0.2, history: int = 8, hidden: int = 16, epochs: int = 60, tol: float = 0.5,
                seed: int = 0, train_trace: Optional[PathLike] = None, out: Optional[PathLike] = None,
                format: Optional[str] = None, cache: Optional[str] = None, progress: Optional[bool] = None,
                device: str = "auto", holdout: float = HOLDOUT, fallback: bool = True,
                class_weight: str = "none", threads: Optional[int] = None,
                also_without_fallback: bool = False) -> Made:
    """Select pages, train the models and write the predictions file for ``trace``.

    ``policy`` is ``kleio`` (one model per page) or ``kleoniki`` (one per group).
    ``train_trace``: train on this trace of the same program (pages matched by address);
    the selection is made there too, and every period of ``trace`` is out of sample.
    Otherwise ``holdout`` (a fraction in [0, 1)) of the trace's last periods is held out:
    pages are selected and models trained on the periods before, and the models predict
    only the held-out periods (earlier ones follow history); ``holdout=0`` trains and
    predicts on every period (in sample). ``fallback``: a page whose model predicts the
    held-out periods worse than history does (larger mean class error) gets no predictions,
    so it follows history. ``class_weight``: see :class:`tierkit.learned.lstm.TrainConfig`.
    ``threads``: PyTorch threads (:func:`tierkit.learned.lstm.threads`).
    Returns the file and the numbers of the run (pages, models, training time, scores, ...)."""
    from . import lstm as learn

    if policy not in ("kleio", "kleoniki"):
        raise _core.TierkitError(f"unknown learned policy '{policy}' (kleio, kleoniki)")
    if not 0 < pages <= 1:
        raise _core.TierkitError(f"{policy}:pages: {pages} is not a fraction in (0, 1]")
    if not 0 < fast_capacity <= 1:
        raise _core.TierkitError(f"{policy}: the fast capacity {fast_capacity} is not a fraction in (0, 1]")
    if history < 1 or hidden < 1 or epochs < 0 or not 1 <= bins <= 32:
        raise _core.TierkitError(f"{policy}: history, hidden must be >= 1, epochs >= 0 and bins 1..32")
    if not 0 <= holdout < 1:
        raise _core.TierkitError(f"{policy}:holdout: {holdout} is not a fraction in [0, 1)")
    if class_weight not in learn.CLASS_WEIGHTS:
        raise _core.TierkitError(f"{policy}:weight: '{class_weight}' is not one of {', '.join(learn.CLASS_WEIGHTS)}")
    ev = counts(trace, period, format, cache, progress)
    tr = ev if train_trace is None else counts(train_trace, period, format, cache, progress)
    # the periods models learn from: all of another run's, or the first part of this one's
    same = train_trace is None
    train_end = tr.periods - int(holdout * tr.periods) if same else tr.periods
    if train_end <= history + 1:
        held = f" ({tr.periods - train_end} of {tr.periods} held out)" if same and holdout else ""
        # short enough to stay whole in a 200-character error line
        raise _core.TierkitError(
            f"{policy}: {tr.trace}: {train_end} periods of {period} accesses to train on{held}, too few for "
            f"{history} periods of history: give a shorter period or history=")
    n_threads = learn.threads(threads)
    # made before from the same traces and training configuration: reuse it (no file of the
    # user's: those are always made afresh)
    key = None
    if out is None and not also_without_fallback and os.environ.get("TIERKIT_CACHE", "on") != "off":
        key = _cache_key(policy=policy, pages=pages, period=int(period), bins=bins, fast_capacity=fast_capacity,
                         history=history, hidden=hidden, epochs=epochs, tol=tol, seed=seed, holdout=holdout,
                         fallback=bool(fallback), class_weight=class_weight, device=str(learn._device(learn._torch(), device)),
                         threads=n_threads, digest=ev.digest, train_digest=None if train_trace is None else tr.digest)
        hit = _cached(key)
        if hit is not None:
            return hit
    t0 = time.perf_counter()
    tr_sel = tr if train_end == tr.periods else _truncate(tr, train_end)
    misplaced, _ = select_pages(tr_sel, fast_pages(tr, fast_capacity))
    sel = misplaced[:min(len(misplaced), max(1, int(round(pages * tr.pages))))]
    series = tr.dense(sel, bins)[:, :train_end]
    cfg = learn.TrainConfig(history=history, hidden=hidden, epochs=epochs, bins=bins, seed=seed, device=device,
                            class_weight=class_weight)
    if policy == "kleoniki":
        labels, reps = learn.group_patterns(series, tol=tol, seed=seed)
        train_series = reps
    else:
        labels = np.arange(len(sel))
        train_series = series
    distinct = len(np.unique(series, axis=0)) if len(sel) else 0
    with Bar(f"{policy} training", progress, unit="model") as bar:
        models = learn.train(train_series, cfg, progress=bar.callback) if len(sel) else None
    # the evaluated trace's pages: the same ids, or the same addresses of the training trace
    if same:
        ev_pages = sel
        ev_labels = labels
    else:
        addr_to_ev = {int(a): i for i, a in enumerate(ev.page_addr)}
        ids = np.array([addr_to_ev.get(int(a), -1) for a in tr.page_addr[sel]], dtype=np.int64)
        keep = ids >= 0
        ev_pages = ids[keep].astype(np.uint32)
        ev_labels = np.asarray(labels)[keep]
    inputs = ev.dense(ev_pages, bins)
    t1 = time.perf_counter()
    pred = learn.predict(models, inputs, np.asarray(ev_labels)) if len(ev_pages) and models is not None \
        else np.zeros((0, ev.periods), np.int16)
    infer_s = time.perf_counter() - t1
    # scored periods: the held-out ones (every period from K on when trained on another run,
    # or in sample with holdout=0); history's guess is the last period's class
    eval_start = max(history, train_end if same and holdout else history)
    if eval_start < ev.periods:
        pred[:, :eval_start] = -1
    prev = np.full(inputs.shape, -1, dtype=np.int16)
    prev[:, 1:] = inputs[:, :-1]
    prev[:, :eval_start] = -1
    model_scores = scores(pred, inputs)
    hist_scores = scores(prev, inputs)
    # fallback: pages whose model, on the scored periods, under-predicts by more classes in
    # all than history (a page predicted cooler than it is goes to the slow tier when used:
    # the collapse to "no access"), or whose mean class error is not below history's (a tie
    # changes predictions without evidence that they are better)
    fell = np.zeros(len(ev_pages), dtype=bool)
    if len(ev_pages) and eval_start < ev.periods:
        act = inputs[:, eval_start:].astype(np.int64)
        pm, ph = pred[:, eval_start:].astype(np.int64), prev[:, eval_start:].astype(np.int64)
        under_m, under_h = np.maximum(act - pm, 0).sum(1), np.maximum(act - ph, 0).sum(1)
        fell = (under_m > under_h) | (np.abs(pm - act).sum(1) >= np.abs(ph - act).sum(1))
    used = pred.copy()
    if fallback:
        used[fell] = -1
    used_scores = scores(np.where(used >= 0, used, prev), inputs)
    n_models = models.count if models is not None else 0
    training = {"policy": policy, "pages": pages, "period": int(period), "bins": bins, "history": history,
                "hidden": hidden, "epochs": epochs, "lr": cfg.lr, "tol": tol if policy == "kleoniki" else None,
                "seed": seed, "fast_capacity": fast_capacity, "holdout": holdout if same else None,
                "fallback": bool(fallback), "class_weight": class_weight, "device": device,
                "train_trace": tr.trace if not same else None, "train_digest": tr.digest if not same else None}
    info = {
        "policy": policy, "trace": ev.trace, "digest": ev.digest, "train_trace": tr.trace, "period": period,
        "bins": bins, "history": history, "hidden": hidden, "epochs": epochs, "seed": seed,
        "fast_capacity": fast_capacity, "pages_total": ev.pages, "pages_fraction": pages,
        "misplaced_pages": int(len(misplaced)),
        "pages_selected": int(len(sel)), "pages_predicted": int(len(ev_pages)), "models": int(n_models),
        "pages_per_model": (len(sel) / n_models) if n_models else None,
        "distinct_patterns": int(distinct), "tol": tol if policy == "kleoniki" else None,
        "train_seconds": models.train_seconds if models is not None else 0.0,
        "train_device": models.device if models is not None else None, "threads": n_threads,
        "select_and_train_seconds": time.perf_counter() - t0 - infer_s,
        "inference_seconds": infer_s, "inference_per_period_ms": 1e3 * infer_s / max(1, ev.periods),
        # what was held out and scored: periods [eval_start, periods) of the evaluated trace
        "train_periods": int(train_end), "eval_start_period": int(min(eval_start, ev.periods)),
        "eval_periods": int(max(0, ev.periods - eval_start)),
        "out_of_sample": bool(not same or holdout > 0),
        "accuracy": model_scores["accuracy"], "history_accuracy": hist_scores["accuracy"],
        "accessed_recall": model_scores["accessed_recall"], "history_accessed_recall": hist_scores["accessed_recall"],
        "balanced_accuracy": model_scores["balanced_accuracy"],
        "history_balanced_accuracy": hist_scores["balanced_accuracy"],
        "scores": {"models": model_scores, "history": hist_scores, "used": used_scores},
        "fallback": bool(fallback), "fallback_pages": int(fell.sum()) if fallback else 0,
        "pages_losing_to_history": int(fell.sum()),
        "class_weight": class_weight, "training": training,
    }
    doc: dict[str, Any] = {"format": "tierkit-predictions", "version": 1, "policy": policy, "period": int(period), "bins": int(bins),
           "models": int(n_models), "trace_digest": ev.digest, "made": info,
           "rows": {str(int(p)): s for p, s in zip(ev_pages, _rows(used))}}
    path = os.fspath(out) if out is not None else _tmp_path(policy)
    # no timings in the file: the same inputs and seed write the same bytes (same digest)
    doc["made"] = {k: v for k, v in info.items() if not k.endswith("seconds") and k != "inference_per_period_ms"}
    from ..output import write_text

    write_text(path, json.dumps(doc, sort_keys=True))
    info["predictions_sha256"] = file_digest(path)
    info["cached"] = False
    if key is not None:
        _store(key, path, info)
    if also_without_fallback:
        # the same models' predictions with every page kept (what fallback=off would write)
        alt = path[:-5] + "-nofallback.json" if path.endswith(".json") else path + "-nofallback"
        no_fb = {**doc, "made": {**doc["made"], "fallback": False, "fallback_pages": 0,
                                 "training": {**training, "fallback": False}},
                 "rows": {str(int(p)): s for p, s in zip(ev_pages, _rows(pred))}}
        no_fb["made"]["scores"] = {**doc["made"]["scores"], "used": scores(np.where(pred >= 0, pred, prev), inputs)}
        write_text(alt, json.dumps(no_fb, sort_keys=True))
        info["no_fallback_path"] = alt
    return Made(path, info)


def _truncate(c: Counts, periods: int) -> Counts:
    """The first ``periods`` periods of ``c`` (same page ids)."""
    e = int(c.starts[periods])
    return Counts(c.period, periods, int(c.count[:e].sum()), c.page_addr, c.period_of[:e], c.page[:e], c.count[:e],
                  c.digest, c.trace)


_tmp_dir: Optional[str] = None


def cache_dir() -> str:
    """Where trained predictions are kept for reuse: $TIERKIT_CACHE_DIR, else
    $XDG_CACHE_HOME/tierkit, else ~/.cache/tierkit (a `predictions/` folder in it);
    TIERKIT_CACHE=off neither reads nor writes it."""
    from ..output import cache_home

    return os.path.join(cache_home(), "predictions")


def _cache_key(**cfg: Any) -> str:
    import hashlib

    cfg["tierkit_version"] = _core.__version__
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _cached(key: str) -> Optional[Made]:
    """The predictions made before under `key`, if their file is whole (its digest matches)."""
    from .. import untrusted

    d = cache_dir()
    path, meta = os.path.join(d, f"{key}.json"), os.path.join(d, f"{key}.info.json")
    try:
        info = untrusted.read_json(meta, "predictions cache record", untrusted.MAX_RECORD_BYTES)
        if not _valid_info(info) or file_digest(path) != info["predictions_sha256"]:
            return None  # damaged or not ours: made again (and stored anew)
    except (OSError, _core.TierkitError):
        return None
    info["cached"] = True
    return Made(path, info)


#: what a cached record's figures are (the rest are names, flags or nested scores)
_INFO_NUMBERS = ("period", "bins", "history", "hidden", "epochs", "seed", "fast_capacity", "pages_total",
                 "pages_fraction", "misplaced_pages", "pages_selected", "pages_predicted", "models",
                 "distinct_patterns", "train_seconds", "threads", "select_and_train_seconds", "inference_seconds",
                 "inference_per_period_ms", "train_periods", "eval_start_period", "eval_periods", "fallback_pages",
                 "pages_losing_to_history")


def _valid_info(info: Any) -> bool:
    """Whether a predictions cache record has the shape :func:`predictions` writes: every
    figure a finite number >= 0, the digests SHA-256s, the scores objects."""
    import math

    if not isinstance(info, dict) or not isinstance(info.get("predictions_sha256"), str):
        return False
    for k in _INFO_NUMBERS:
        v = info.get(k)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            return False
    for k in ("policy", "trace", "digest", "class_weight"):
        if not isinstance(info.get(k), str):
            return False
    t = info.get("training")
    # what a run's result takes from the training record (api.run records it in the spec)
    if not isinstance(t, dict) or any(k not in t or isinstance(t[k], (dict, list)) for k in _TRAINING_KEYS):
        return False
    return isinstance(info.get("scores"), dict) and isinstance(info.get("fallback"), bool) \
        and isinstance(info.get("out_of_sample"), bool)


_TRAINING_KEYS = ("policy", "pages", "period", "bins", "history", "hidden", "epochs", "lr", "tol", "seed",
                  "fast_capacity", "holdout", "fallback", "class_weight", "device", "train_trace", "train_digest")


def _store(key: str, path: str, info: dict) -> None:
    """Keep a copy of the predictions and how they were made; a cache that cannot be written
    is no error (the next run trains again)."""
    import shutil

    d = cache_dir()
    try:
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".{key}.{os.getpid()}")
        shutil.copyfile(path, tmp + ".json")
        with open(tmp + ".info.json", "w") as f:
            json.dump(info, f, default=str)
        os.replace(tmp + ".json", os.path.join(d, f"{key}.json"))
        os.replace(tmp + ".info.json", os.path.join(d, f"{key}.info.json"))
    except OSError:
        pass


def _tmp_path(policy: str) -> str:
    import atexit
    import shutil
    import tempfile

    global _tmp_dir
    if _tmp_dir is None:
        _tmp_dir = tempfile.mkdtemp(prefix="tierkit-predictions-")
        atexit.register(shutil.rmtree, _tmp_dir, True)
    return os.path.join(_tmp_dir, f"{policy}{len(os.listdir(_tmp_dir))}.json")


#: parameters of kleio / kleoniki that the Python front end turns into a predictions file
TRAIN_KEYS = ("pages", "history", "hidden", "epochs", "train", "seed", "tol", "holdout", "fallback", "weight",
              "threads")
#: the fewest periods a trace is cut into by default, per period of model input (K + 1):
#: with half held out, K = 8 leaves 4 (K + 1) = 36 periods to train on
MIN_PERIODS_PER_INPUT = 8


def _nice_floor(x: int) -> int:
    """The largest 1, 2 or 5 times a power of ten not above x (at least 1)."""
    x = max(1, int(x))
    mag = 10 ** int(np.floor(np.log10(x)))
    return int(max(m * mag for m in (1, 2, 5) if m * mag <= x))


def learned_period(accesses: int, cori_period: int, history: int = 8) -> tuple[int, str]:
    """Kleoniki's default period: Cori's choice for history, unless it cuts the trace into
    fewer than MIN_PERIODS_PER_INPUT (K + 1) periods (Cori favours long periods; 003 §4's
    traces run for billions of accesses, ordinary ones for millions, and K = 8 periods of
    input then leave nothing to learn from); then the longest 1-2-5 period that makes that
    many. Returns the period and a sentence saying how it was picked."""
    need = MIN_PERIODS_PER_INPUT * (history + 1)
    if accesses // max(1, cori_period) >= need:
        return int(cori_period), f"Cori's period for history ({cori_period:,} accesses)"
    p = _nice_floor(max(1, accesses // need))
    return p, (f"Cori's period for history ({cori_period:,} accesses) makes {accesses // max(1, cori_period):,} "
               f"periods, too few for history={history}; shortened to {p:,} accesses "
               f"({accesses // p:,} periods, at least {need} = {MIN_PERIODS_PER_INPUT} x (history + 1))")


def on_off(name: str, key: str, v: str) -> bool:
    if v in ("on", "true", "1", "yes"):
        return True
    if v in ("off", "false", "0", "no"):
        return False
    raise _core.TierkitError(f"{name}:{key}: '{v}' is not on or off")


def expand(policy: str, spec: dict, trace: PathLike, fast_capacity: Any, format: Optional[str], cache: Optional[str],
           progress: Optional[bool], platform: Any = "dram-pmem", timing: str = "simple") -> tuple[str, dict]:
    """``kleio:pages=F,...`` / ``kleoniki:...`` → trained predictions and the spec that reads them.

    Kleio's period defaults to ``history``'s (1,000 accesses); Kleoniki's to Cori's choice
    for ``history`` on the same platform and capacity, shortened when it leaves too few
    periods (:func:`learned_period`)."""
    name = spec["name"]
    args = dict(spec["args"])

    def num(key: str, default: Optional[float], conv: type = float) -> Any:
        if key not in args:
            return default
        try:
            return conv(args[key])
        except ValueError:
            raise _core.TierkitError(f"{name}:{key}: '{args[key]}' is not a {'whole ' if conv is int else ''}number") from None

    try:
        cap = float(fast_capacity) if fast_capacity is not None else 0.2
    except ValueError:
        raise _core.TierkitError(f"{name}: the fast capacity must be a fraction of the footprint "
                                 f"(e.g. --fast-capacity 0.2) to select pages, not '{fast_capacity}'") from None
    history = num("history", 8, int)
    cori_period = None
    period_note = None
    if name == "kleoniki" and "period" not in args:
        from ..cori import tune

        t = tune(trace, "history", platform, cap, timing, exhaustive=False, format=format, cache=cache,
                 progress=progress)
        cori_period = t["chosen_period"]
        period, period_note = learned_period(int(t["accesses"]), cori_period, history)
    else:
        period = num("period", 1000, int)
    made = predictions(trace, name, pages=num("pages", 0.1 if name == "kleio" else 0.2), period=period,
                       bins=num("bins", 16, int), fast_capacity=cap, history=history,
                       hidden=num("hidden", 16, int), epochs=num("epochs", 60, int), tol=num("tol", 0.5),
                       seed=num("seed", 0, int), train_trace=args.get("train"), format=format, cache=cache,
                       progress=progress, holdout=num("holdout", HOLDOUT),
                       fallback=on_off(name, "fallback", args.get("fallback", "on")),
                       class_weight=args.get("weight", "none"),
                       threads=num("threads", None, int) if "threads" in args else None)
    rest = [f"{k}={v}" for k, v in spec["args"] if k not in TRAIN_KEYS]
    if "period" not in args:
        rest.append(f"period={period}")
    return f"{name}:" + ",".join([f"predictions={made.path}", *rest]), {
        **made.info, "cori_period": cori_period, "period_chosen": period_note}


def gap_bridged(history_ns: float, oracle_ns: float, x_ns: float) -> Optional[float]:
    """Share of the history→oracle gap a run bridges, in percent (history 0, oracle 100);
    None when the oracle is not faster than history."""
    if history_ns <= oracle_ns:
        return None
    return 100.0 * (history_ns - x_ns) / (history_ns - oracle_ns)


def study(trace: PathLike, policy: str = "kleio", fractions: Sequence[float] = (0.01, 0.02, 0.05, 0.1, 0.2),
          period: Optional[int] = None, platform: str = "dram-pmem", fast_capacity: float = 0.2,
          timing: str = "simple", bins: int = 16, history: int = 8, hidden: int = 16, epochs: int = 60,
          tol: float = 0.5, seed: int = 0, train_trace: Optional[PathLike] = None, format: Optional[str] = None,
          cache: Optional[str] = None, progress: Optional[bool] = None, holdout: float = HOLDOUT,
          class_weight: str = "none", threads: Optional[int] = None) -> dict:
    """History, oracle and ``policy`` with models for each fraction of the pages: the gap
    bridged (003 Fig. 3.3) against the fraction, with models, training time and the models'
    scores on the held-out periods. Each fraction's models run twice: with the fallback to
    history (``gap_bridged_pct``) and without (``gap_bridged_no_fallback_pct``)."""
    from .._engine import run

    if period is None:
        period = default_period(trace, format, cache, progress)
    base = {}
    for name in ("history", "oracle"):
        r = run(trace, platform, f"{name}:period={period},bins={bins}", fast_capacity, None, timing, format, cache, False)
        base[name] = r
    hist_ns, orc_ns = base["history"]["runtime_ns"], base["oracle"]["runtime_ns"]
    rows = []
    for f in fractions:
        made = predictions(trace, policy, pages=f, period=period, bins=bins, fast_capacity=fast_capacity,
                           history=history, hidden=hidden, epochs=epochs, tol=tol, seed=seed,
                           train_trace=train_trace, format=format, cache=cache, progress=progress, holdout=holdout,
                           class_weight=class_weight, threads=threads, also_without_fallback=True)
        r = run(trace, platform, f"{policy}:period={period},bins={bins},predictions={made.path}", fast_capacity, None,
                timing, format, cache, False)
        r0 = run(trace, platform, f"{policy}:period={period},bins={bins},predictions={made.info['no_fallback_path']}",
                 fast_capacity, None, timing, format, cache, False)
        rows.append({**{k: made.info[k] for k in ("pages_fraction", "pages_selected", "models", "pages_per_model",
                                                   "distinct_patterns", "train_seconds", "inference_per_period_ms",
                                                   "accuracy", "history_accuracy", "accessed_recall",
                                                   "history_accessed_recall", "balanced_accuracy",
                                                   "history_balanced_accuracy", "fallback_pages", "train_periods",
                                                   "eval_start_period", "eval_periods", "out_of_sample")},
                     "runtime_ns": r["runtime_ns"], "fast_hit_ratio": r["fast_hit_ratio"],
                     "migrations": r["migrations"],
                     "gap_bridged_pct": gap_bridged(hist_ns, orc_ns, r["runtime_ns"]),
                     "runtime_no_fallback_ns": r0["runtime_ns"],
                     "gap_bridged_no_fallback_pct": gap_bridged(hist_ns, orc_ns, r0["runtime_ns"])})
    c = counts(trace, period, format, cache, progress)
    return {"trace": os.fspath(trace), "policy": policy, "platform": platform, "fast_capacity": fast_capacity,
            "timing": timing, "period": period, "bins": bins, "history_periods": history,
            "holdout": holdout if train_trace is None else None, "class_weight": class_weight,
            "pages": int(c.pages), "periods": int(c.periods),
            "history_runtime_ns": hist_ns, "oracle_runtime_ns": orc_ns,
            "history_fast_hit_ratio": base["history"]["fast_hit_ratio"],
            "oracle_fast_hit_ratio": base["oracle"]["fast_hit_ratio"], "rows": rows}


def aligned_period(trace: PathLike, history: int = 8, format: Optional[str] = None, cache: Optional[str] = None,
                   max_periods: int = 2000) -> int:
    """The reuse-aligned period: a page's dominant reuse (Cori's, 003 §3.3) spans half of the
    models' input window of ``history`` periods, so that the window holds two reuses; no
    shorter than the trace over ``max_periods`` periods."""
    from .. import cori
    from .._engine import trace_info

    n = int(trace_info(trace, format, cache)["summary"]["accesses"])
    dom = cori.dominant_reuse(cori.reuse_profile(trace, format=format, cache=cache, progress=False))
    return max(dom * 2 // history, -(-n // max_periods), 1)


def default_period(trace: PathLike, format: Optional[str] = None, cache: Optional[str] = None,
                   progress: Optional[bool] = None, periods: int = 400) -> int:
    """A period giving about ``periods`` periods over the trace (at least 1,000 accesses),
    rounded down to 1, 2 or 5 times a power of ten: enough history for the models to learn."""
    from .._engine import trace_info

    n = int(trace_info(trace, format, cache)["summary"]["accesses"])
    raw = max(1000, n // periods)
    mag = 10 ** int(np.floor(np.log10(raw)))
    return int(max(m * mag for m in (1, 2, 5) if m * mag <= raw))
