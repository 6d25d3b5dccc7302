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

    def dense_counts(self, rows: np.ndarray) -> np.ndarray:
        """Access counts [len(rows), periods] of the given page ids."""
        pos = np.full(self.pages, -1, dtype=np.int64)
        pos[rows] = np.arange(len(rows))
        out = np.zeros((len(rows), self.periods), dtype=np.int64)
        sel = pos[self.page] >= 0
        out[pos[self.page[sel]], self.period_of[sel]] = self.count[sel]
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
    ``idle_recall``, ``balanced_accuracy`` (their mean), ``class_mae`` (mean absolute
    error in classes) and ``class_recall`` (per actual class, the share predicted exactly).
    None where there is nothing to score."""
    ok = pred >= 0
    p, a = pred[ok].astype(np.int64), actual[ok].astype(np.int64)
    acc_ = a > 0
    out: dict = {"accuracy": None, "accessed_recall": None, "idle_recall": None, "balanced_accuracy": None,
                 "class_mae": None, "class_recall": {}, "scored": int(len(a))}
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
    out["class_recall"] = {str(int(c)): float((p[a == c] == c).mean()) for c in np.unique(a)}
    return out


#: fallback modes: ``online`` (decided from the periods already scored: what a running
#: system knows), ``future`` (judged on the periods it is applied to: future knowledge),
#: ``off`` (every prediction used)
FALLBACKS = ("online", "future", "off")
#: what predicts the selected pages: the LSTMs, their actual classes (``hybrid``: perfect
#: prediction for them, future knowledge), or "no access" always (``idle``: a constant control)
PREDICTORS = ("lstm", "hybrid", "idle")
#: scored periods of evidence the online fallback looks back on
TRUST = 8


def fallback_mode(policy: str, v: Union[bool, str]) -> str:
    """A fallback setting as one of :data:`FALLBACKS` (True/on = online, False/off = off)."""
    if v is True or v in ("on", "true", "yes", "1"):
        return "online"
    if v is False or v in ("off", "false", "no", "0"):
        return "off"
    if v in FALLBACKS:
        return str(v)
    raise _core.TierkitError(f"{policy}:fallback: '{v}' is not one of {', '.join(FALLBACKS)} (on = online)")


def online_fallback(pred: np.ndarray, prev: np.ndarray, actual: np.ndarray, trust: int) -> np.ndarray:
    """Which predictions a running system would use. ``pred``, ``prev`` (history's guess, the
    last period's class) and ``actual`` are [pages, scored periods] in order. The model's
    prediction for period ``s`` is used when the ``trust`` scored periods before it are all
    known and in them the model

    - under-predicted fewer classes in all than history: it caught accesses history missed,
      what the page selector chose the page for;
    - erred no more than history in all (absolute class error);
    - erred less than the best constant guess for the page in that window (the window's
      median class): a model whose predictions a constant does as well has learned nothing
      about the page's timing, and a gain it shows is a placement, not a prediction.

    Only periods before ``s`` enter the decision. A constant predictor ("no access" always,
    or the constant class an untrained model gives) is never used: it never errs less than
    the window's median."""
    a, m, h = (x.astype(np.int64) for x in (actual, pred, prev))
    P, S = a.shape
    use = np.zeros((P, S), dtype=bool)
    if S <= trust or not P:
        return use

    def window(x: np.ndarray) -> np.ndarray:
        c = np.zeros((P, S + 1), dtype=np.int64)
        np.cumsum(x, axis=1, out=c[:, 1:])
        return c[:, trust:S] - c[:, :S - trust]  # periods [s - trust, s) for s in [trust, S)

    um, uh = window(np.maximum(a - m, 0)), window(np.maximum(a - h, 0))
    em, eh = window(np.abs(m - a)), window(np.abs(h - a))
    # the best constant's error in each window: the sum of distances to the window's median
    win = np.lib.stride_tricks.sliding_window_view(a, trust, axis=1)[:, :S - trust]
    ec = np.abs(win - np.median(win, axis=2, keepdims=True)).sum(2)
    use[:, trust:] = (um < uh) & (em <= eh) & (em < ec)
    return use


def _apply_fallback(mode: str, pred: np.ndarray, prev: np.ndarray, actual: np.ndarray, start: int,
                    trust: int) -> tuple[np.ndarray, np.ndarray]:
    """The predictions a fallback mode keeps (-1 elsewhere: history) and the pages left
    with none in the scored periods [start, periods)."""
    used = pred.copy()
    P, T = pred.shape
    if mode == "off" or start >= T or not P:
        return used, np.zeros(P, dtype=bool)
    act = actual[:, start:].astype(np.int64)
    pm, ph = pred[:, start:].astype(np.int64), prev[:, start:].astype(np.int64)
    if mode == "future":
        # judged with the true classes of the very periods it is applied to: pages whose
        # model under-predicts by more classes in all than history, or errs as much or more
        under_m, under_h = np.maximum(act - pm, 0).sum(1), np.maximum(act - ph, 0).sum(1)
        fell = (under_m > under_h) | (np.abs(pm - act).sum(1) >= np.abs(ph - act).sum(1))
        used[fell] = -1
        return used, fell
    use = online_fallback(pm, ph, act, trust)
    part = used[:, start:]
    part[~use] = -1
    return used, np.asarray(~use.any(1))


def file_digest(path: PathLike) -> str:
    """SHA-256 of a file's bytes (how results name the guidance and predictions they used)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_args(policy: str, pages: float, fast_capacity: float, history: int, hidden: int, epochs: int, bins: int,
               holdout: float, class_weight: str, device: str) -> None:
    """The training parameters' ranges (one error line each), checked before any training."""
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
    try:
        learn._device(learn._torch(), device)
    except ValueError:
        raise _core.TierkitError(f"{policy}:device: '{device}' is not a device (auto, cpu or cuda)") from None


def predictions(trace: PathLike, policy: str = "kleio", pages: float = 0.1, period: int = 1000, bins: int = 16,
                fast_capacity: float = 0.2, history: int = 8, hidden: int = 16, epochs: int = 60, tol: float = 0.5,
                seed: int = 0, train_trace: Optional[PathLike] = None, out: Optional[PathLike] = None,
                format: Optional[str] = None, cache: Optional[str] = None, progress: Optional[bool] = None,
                device: str = "auto", holdout: float = HOLDOUT, fallback: Union[bool, str] = "online",
                class_weight: str = "none", threads: Optional[int] = None,
                also_without_fallback: bool = False, trust: int = TRUST, predictor: str = "lstm",
                variants: Sequence[str] = (), infer_ns: Union[str, float] = "measure",
                model: Optional[PathLike] = None, save: Optional[PathLike] = None, force: bool = False) -> Made:
    """Select pages, train the models and write the predictions file for ``trace``.

    ``policy`` is ``kleio`` (one model per page) or ``kleoniki`` (one per group).
    ``train_trace``: train on this trace of the same program (pages matched by address);
    the selection is made there too, and every period of ``trace`` is out of sample.
    Otherwise ``holdout`` (a fraction in [0, 1)) of the trace's last periods is held out:
    pages are selected and models trained on the periods before, and the models predict
    only the held-out periods (earlier ones follow history); ``holdout=0`` trains and
    predicts on every period (in sample).

    ``fallback`` (:data:`FALLBACKS`): ``online`` (default; True means it) uses a page's
    prediction in a period only when, over the ``trust`` scored periods just before it, the
    model caught accesses history missed (fewer classes under-predicted) without more error in
    all (:func:`online_fallback`): what a running system knows at that boundary. ``future``
    is the per-page rule judged on the very periods it is applied to (future knowledge: the
    result says so); ``off`` (False) keeps every prediction.

    ``predictor`` (:data:`PREDICTORS`): ``lstm`` trains the models; ``hybrid`` gives the
    selected pages their actual classes (perfect prediction for them: future knowledge, the
    headroom of the selection, cori-sim's hybrid); ``idle`` predicts "no access" everywhere
    (a constant control, no models). ``variants``: fallback modes whose predictions are also
    written, from the same models (``info["variant_paths"]``). ``class_weight``: see
    :class:`tierkit.learned.lstm.TrainConfig`. ``threads``: PyTorch threads
    (:func:`tierkit.learned.lstm.threads`).

    ``infer_ns``: what one model's inference at one boundary costs, ns: ``"measure"``
    (default) measures it on this machine with the trained models
    (:func:`tierkit.learned.inference.per_inference_ns`), or a number; recorded in
    ``info["inference"]`` for the scheduler to charge (``kleio:infer_ns=``). The predictions
    file says from which period the models run (``infer_from_period``).

    ``model``: a models file (:mod:`tierkit.learned.modelfile`) to use instead of training
    (pages matched by address; made by the same policy, period, bins and history); ``save``:
    write the trained models there (refused if it exists, unless ``force``).
    Returns the file and the numbers of the run (pages, models, training time, scores, ...)."""
    from . import lstm as learn

    check_args(policy, pages, fast_capacity, history, hidden, epochs, bins, holdout, class_weight, device)
    fallback = fallback_mode(policy, fallback)
    for v in variants:
        fallback_mode(policy, v)
    if predictor not in PREDICTORS:
        raise _core.TierkitError(f"{policy}:predictor: '{predictor}' is not one of {', '.join(PREDICTORS)}")
    if not isinstance(trust, (int, np.integer)) or trust < 1:
        raise _core.TierkitError(f"{policy}:trust: {trust} is not a whole number of periods >= 1")
    if infer_ns != "measure":
        try:
            ok = float(infer_ns) >= 0 and np.isfinite(float(infer_ns))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise _core.TierkitError(f"{policy}:infer_ns: '{infer_ns}' is not 'measure' or a number of ns >= 0")
    if also_without_fallback and "off" not in variants:
        variants = (*variants, "off")
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
    if model is not None:
        try:
            model_digest: Optional[str] = file_digest(model)
        except OSError as e:
            raise _core.TierkitError(f"{os.fspath(model)}: cannot read the models file: {e.strerror}") from None
    else:
        model_digest = None
    n_threads = learn.threads(threads)
    # made before from the same traces and training configuration: reuse it (no file of the
    # user's: those are always made afresh)
    key = None
    if out is None and not variants and save is None and os.environ.get("TIERKIT_CACHE", "on") != "off":
        key = _cache_key(policy=policy, pages=pages, period=int(period), bins=bins, fast_capacity=fast_capacity,
                         history=history, hidden=hidden, epochs=epochs, tol=tol, seed=seed, holdout=holdout,
                         fallback=fallback, trust=trust, predictor=predictor, class_weight=class_weight,
                         infer_ns=infer_ns, model=model_digest,
                         device=str(learn._device(learn._torch(), device)),
                         threads=n_threads, digest=ev.digest, train_digest=None if train_trace is None else tr.digest)
        hit = _cached(key)
        if hit is not None:
            return hit
    cfg = learn.TrainConfig(history=history, hidden=hidden, epochs=epochs, bins=bins, seed=seed, device=device,
                            class_weight=class_weight)
    t0 = time.perf_counter()
    loaded_meta: Optional[dict] = None
    if model is not None:
        from . import modelfile

        models, loaded_meta = modelfile.load(model, device)
        sel_addr, labels, train_end, same = _models_for(model, loaded_meta, models, policy, period, bins, history, ev)
        holdout = float(loaded_meta.get("holdout") or 0.0) if same else 0.0
        misplaced = sel = np.arange(len(sel_addr), dtype=np.uint32)
        distinct = int(loaded_meta.get("distinct_patterns", len(sel)))
        tr_pages = sel_addr
    else:
        tr_sel = tr if train_end == tr.periods else _truncate(tr, train_end)
        misplaced, _ = select_pages(tr_sel, fast_pages(tr, fast_capacity))
        sel = misplaced[:min(len(misplaced), max(1, int(round(pages * tr.pages))))]
        series = tr.dense(sel, bins)[:, :train_end]
        if policy == "kleoniki":
            labels, reps = learn.group_patterns(series, tol=tol, seed=seed)
            train_series = reps
        else:
            labels = np.arange(len(sel))
            train_series = series
        distinct = len(np.unique(series, axis=0)) if len(sel) else 0
        models = None
        if predictor == "lstm" and len(sel):
            with Bar(f"{policy} training", progress, unit="model") as bar:
                models = learn.train(train_series, cfg, progress=bar.callback)
        tr_pages = tr.page_addr[sel]
        if save is not None and models is not None:
            from . import modelfile

            modelfile.save(save, models, {
                "policy": policy, "period": int(period), "bins": int(bins), "history": int(history),
                "page_addresses": [int(a) for a in tr_pages], "labels": [int(x) for x in labels],
                "trace_digest": tr.digest, "train_periods": int(train_end), "holdout": holdout if same else None,
                "distinct_patterns": int(distinct), "fast_capacity": fast_capacity, "pages": pages, "tol": tol,
                "class_weight": class_weight, "seed": seed, "epochs": epochs, "hidden": hidden}, force=force)
    # the evaluated trace's pages: the same ids, or the same addresses of the training trace
    if same and model is None:
        ev_pages = sel
        ev_labels = labels
    else:
        addr_to_ev = {int(a): i for i, a in enumerate(ev.page_addr)}
        ids = np.array([addr_to_ev.get(int(a), -1) for a in tr_pages], dtype=np.int64)
        keep = ids >= 0
        ev_pages = ids[keep].astype(np.uint32)
        ev_labels = np.asarray(labels)[keep]
    inputs = ev.dense(ev_pages, bins)
    t1 = time.perf_counter()
    if predictor == "hybrid":
        pred = inputs.astype(np.int16)  # the actual classes: perfect prediction for the selected pages
    elif predictor == "idle":
        pred = np.zeros(inputs.shape, np.int16)
    elif len(ev_pages) and models is not None:
        pred = learn.predict(models, inputs, np.asarray(ev_labels))
    else:
        pred = np.zeros((0, ev.periods), np.int16)
    infer_s = time.perf_counter() - t1
    # what one boundary's inference costs: measured here with these models, or given
    inference: dict = {"ns_per_model": 0.0, "measured": False, "models": 0}
    if models is not None and len(ev_pages) and predictor == "lstm":
        if infer_ns == "measure":
            from .inference import per_inference_ns

            inference = {**per_inference_ns(models, inputs, np.asarray(ev_labels)), "measured": True}
        else:  # a number, checked with the other arguments above
            inference = {"ns_per_model": float(infer_ns), "measured": False, "models": int(models.count)}
        inference["ns_per_boundary"] = inference["ns_per_model"] * models.count
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
    decided = {m: _apply_fallback(m, pred, prev, inputs, eval_start, trust) for m in dict.fromkeys((fallback, *variants))}
    used, fell = decided[fallback]
    # how the future-knowledge rule would judge each page (reported whatever the mode)
    losing = (decided["future"] if "future" in decided
              else _apply_fallback("future", pred, prev, inputs, eval_start, trust))[1]
    used_scores = scores(np.where(used >= 0, used, prev), inputs)
    kept_periods = int((used[:, eval_start:] >= 0).sum()) if eval_start < ev.periods else 0
    future = fallback == "future" or predictor == "hybrid"
    warnings = []
    mr, hr = model_scores["accessed_recall"], hist_scores["accessed_recall"]
    if predictor == "lstm" and mr is not None and hr is not None and mr < hr:
        warnings.append(
            f"{policy}: the models' accessed recall on the scored periods is {100 * mr:.1f}%, below history's "
            f"{100 * hr:.1f}%: they predict 'no access' in periods the page is used (collapsed models; "
            f"try another period, or weight=); docs/learned.md, \"Scores\"")
    n_models = models.count if models is not None else 0
    inference["from_period"] = int(min(eval_start, ev.periods))
    training = {"policy": policy, "pages": pages, "period": int(period), "bins": bins, "history": history,
                "hidden": hidden, "epochs": epochs, "lr": cfg.lr, "tol": tol if policy == "kleoniki" else None,
                "seed": seed, "fast_capacity": fast_capacity, "holdout": holdout if same else None,
                "fallback": fallback, "trust": trust if fallback == "online" else None, "predictor": predictor,
                "class_weight": class_weight, "device": device,
                "train_trace": tr.trace if not same else None, "train_digest": tr.digest if not same else None}
    info = {
        "policy": policy, "trace": ev.trace, "digest": ev.digest, "train_trace": tr.trace, "period": period,
        "bins": bins, "history": history, "hidden": hidden, "epochs": epochs, "seed": seed,
        "fast_capacity": fast_capacity, "pages_total": ev.pages, "pages_fraction": pages,
        "misplaced_pages": int(len(misplaced)),
        "pages_selected": int(len(sel)), "pages_predicted": int(len(ev_pages)), "models": int(n_models),
        "pages_per_model": (len(sel) / n_models) if n_models else None, "predictor": predictor,
        # what a running system could not know: the future-knowledge fallback, perfect classes
        "future_knowledge": bool(future),
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
        "class_recall": model_scores["class_recall"], "history_class_recall": hist_scores["class_recall"],
        "fallback": fallback, "trust": trust if fallback == "online" else None,
        "fallback_pages": int(fell.sum()),
        # page-periods in which a prediction was used, of the scored page-periods
        "predicted_periods_used": kept_periods,
        "predicted_periods": int(len(ev_pages) * max(0, ev.periods - eval_start)),
        "pages_losing_to_history": int(losing.sum()), "warnings": warnings,
        "inference": inference, "model_file": os.fspath(model) if model is not None else None,
        "saved_to": os.fspath(save) if save is not None and models is not None and model is None else None,
        "class_weight": class_weight, "training": training,
    }
    doc: dict[str, Any] = {"format": "tierkit-predictions", "version": 1, "policy": policy, "period": int(period), "bins": int(bins),
           "models": int(n_models), "trace_digest": ev.digest, "made": info,
           "infer_from_period": int(min(eval_start, ev.periods)), "future_knowledge": bool(future),
           "rows": {str(int(p)): s for p, s in zip(ev_pages, _rows(used))}}
    path = os.fspath(out) if out is not None else _tmp_path(policy)
    # no timings in the file: the same inputs and seed write the same bytes (same digest)
    doc["made"] = {k: v for k, v in info.items() if not k.endswith("seconds") and k not in ("inference_per_period_ms", "inference")}
    from ..output import write_text

    write_text(path, json.dumps(doc, sort_keys=True))
    info["predictions_sha256"] = file_digest(path)
    info["cached"] = False
    if key is not None:
        _store(key, path, info)
    # the same models' predictions under other fallback modes (what fallback=MODE would write)
    info["variant_paths"] = {fallback: path}
    for mode in variants:
        if mode == fallback:
            info["variant_paths"][mode] = path
            continue
        u, f = decided[mode]
        alt = (path[:-5] if path.endswith(".json") else path) + f"-{mode}.json"
        alt_future = mode == "future" or predictor == "hybrid"
        made_alt = {**doc["made"], "fallback": mode, "fallback_pages": int(f.sum()),
                    "trust": trust if mode == "online" else None,
                    "future_knowledge": alt_future,
                    "training": {**training, "fallback": mode, "trust": trust if mode == "online" else None},
                    "scores": {**doc["made"]["scores"], "used": scores(np.where(u >= 0, u, prev), inputs)}}
        write_text(alt, json.dumps({**doc, "made": made_alt, "future_knowledge": alt_future,
                                    "rows": {str(int(p)): r for p, r in zip(ev_pages, _rows(u))}},
                                   sort_keys=True))
        info["variant_paths"][mode] = alt
    if also_without_fallback:
        info["no_fallback_path"] = info["variant_paths"]["off"]
    return Made(path, info)


def _models_for(path: PathLike, meta: dict, models: Any, policy: str, period: int, bins: int, history: int,
                ev: Counts) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """What a saved models file holds for this run, checked against it (one error line naming
    the file and key): the selected pages' addresses, each page's model, the periods the models
    trained on, and whether they were trained on this very trace (same digest)."""
    p = os.fspath(path)

    def bad(key: str, msg: str) -> _core.TierkitError:
        return _core.TierkitError(f"{p}: meta.{key}: {msg}")

    for key, want in (("policy", policy), ("period", int(period)), ("bins", int(bins)), ("history", int(history))):
        if meta.get(key) != want:
            raise bad(key, f"the models were made for {key} {meta.get(key)!r}, this run has {want!r}")
    addr, labels = meta.get("page_addresses"), meta.get("labels")
    if not isinstance(addr, list) or not all(isinstance(a, int) and a >= 0 for a in addr):
        raise bad("page_addresses", "not a list of page addresses")
    if not isinstance(labels, list) or len(labels) != len(addr) or \
            not all(isinstance(x, int) and 0 <= x < models.count for x in labels):
        raise bad("labels", f"not one model index (0..{models.count - 1}) per page address")
    tp = meta.get("train_periods")
    if not isinstance(tp, int) or tp < 0:
        raise bad("train_periods", "not a whole number of periods")
    same = meta.get("trace_digest") == ev.digest
    return np.asarray(addr, dtype=np.uint64), np.asarray(labels, dtype=np.int64), (tp if same else 0), same


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
    return isinstance(info.get("scores"), dict) and info.get("fallback") in FALLBACKS \
        and isinstance(info.get("out_of_sample"), bool)


_TRAINING_KEYS = ("policy", "pages", "period", "bins", "history", "hidden", "epochs", "lr", "tol", "seed",
                  "fast_capacity", "holdout", "fallback", "trust", "predictor", "class_weight", "device", "train_trace",
                  "train_digest")


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
TRAIN_KEYS = ("pages", "history", "hidden", "epochs", "train", "seed", "tol", "holdout", "fallback", "trust",
              "predictor", "weight", "threads", "infer_ns", "model", "save", "device")
#: the fewest periods a trace is cut into by default, per period of model input (K + 1):
#: with half held out, K = 8 leaves 4 (K + 1) = 36 periods to train on
MIN_PERIODS_PER_INPUT = 8


def _nice_floor(x: int) -> int:
    """The largest 1, 2 or 5 times a power of ten not above x (at least 1)."""
    x = max(1, int(x))
    mag = 10 ** int(np.floor(np.log10(x)))
    return int(max(m * mag for m in (1, 2, 5) if m * mag <= x))


#: what Kleoniki's default period says of itself: Cori tunes it by running history over the
#: whole trace, the held-out periods the models are scored on included
CORI_FUTURE = " (FUTURE KNOWLEDGE: Cori ran history over the whole trace, the held-out periods included)"


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


#: the periods :func:`search_period` tries: about this many periods over the trace
SEARCH_PERIODS = (400, 160, 80)


def search_period(trace: PathLike, pages: float = 0.1, bins: int = 16, fast_capacity: float = 0.2, history: int = 8,
                  hidden: int = 16, epochs: int = 60, seed: int = 0, holdout: float = HOLDOUT, trust: int = TRUST,
                  class_weight: str = "none", format: Optional[str] = None, cache: Optional[str] = None,
                  progress: Optional[bool] = None, device: str = "auto") -> tuple[int, str, list[dict]]:
    """Kleio's period, chosen from the training periods only (what a system deploying the
    models has): for each candidate (1-2-5 periods giving about 400, 160 and 80 periods over
    the trace, at least 1,000 accesses, each with at least MIN_PERIODS_PER_INPUT (K + 1) periods,
    else the longest 1-2-5 period that makes that many), the training periods
    are split again, two thirds to fit and the last third to validate; pages are selected and
    models trained on the fit part, and on the validation part the online fallback decides
    which predictions are used. A candidate scores the accesses its used predictions bring to
    the fast tier that history left in the slow one (predicted accessed where history predicted
    idle), minus those they send away that history kept (predicted idle where history predicted
    accessed), over all accesses of the validation periods. The best positive score wins;
    with none, the coarsest candidate (the models gain nothing at any of them, and it has the
    fewest boundaries to pay inference at). Returns the period, a sentence saying how it was picked, and each candidate's
    figures."""
    from . import lstm as learn
    from .._engine import trace_info

    n = int(trace_info(trace, format, cache)["summary"]["accesses"])
    need = MIN_PERIODS_PER_INPUT * (history + 1)
    cands = sorted({_nice_floor(max(1000, n // k)) for k in SEARCH_PERIODS})
    cands = [p for p in cands if n // p >= need] or [_nice_floor(max(1, n // need))]
    tried: list[dict] = []
    for period in cands:
        c = counts(trace, period, format, cache, progress)
        train_end = c.periods - int(holdout * c.periods)
        fit_end = train_end - train_end // 3
        row: dict = {"period": period, "periods": int(c.periods), "fit_periods": int(fit_end),
                     "validate_periods": int(train_end - fit_end), "score": None, "models": 0, "used": 0}
        tried.append(row)
        if fit_end <= history + 1 or train_end - fit_end <= trust:
            continue
        sel = select_pages(_truncate(c, fit_end), fast_pages(c, fast_capacity))[0]
        sel = sel[:min(len(sel), max(1, int(round(pages * c.pages))))]
        if not len(sel):
            continue
        classes = c.dense(sel, bins)
        cfg = learn.TrainConfig(history=history, hidden=hidden, epochs=epochs, bins=bins, seed=seed,
                                class_weight=class_weight, device=device)
        with Bar(f"period {period:,}: training", progress, unit="model") as bar:
            models = learn.train(classes[:, :fit_end], cfg, progress=bar.callback)
        pred = learn.predict(models, classes[:, :train_end])[:, fit_end:train_end].astype(np.int64)
        act = classes[:, fit_end:train_end].astype(np.int64)
        prev = classes[:, fit_end - 1:train_end - 1].astype(np.int64)
        use = online_fallback(pred, prev, act, trust)
        acc = c.dense_counts(sel)[:, fit_end:train_end]
        gained = acc[use & (pred > 0) & (prev == 0)].sum()
        lost = acc[use & (pred == 0) & (prev > 0)].sum()
        total = int(c.count[c.starts[fit_end]:c.starts[train_end]].sum())
        row.update(models=int(models.count), used=int(use.sum()), score=float((gained - lost) / max(1, total)))
    scored = [r for r in tried if r["score"] is not None]
    names = ", ".join(f"{r['period']:,}" for r in tried)
    best = max(scored, key=lambda r: (r["score"], -r["period"])) if scored else None
    if best is not None and best["score"] > 0:
        return int(best["period"]), (
            f"searched on the training periods ({names} accesses): "
            f"{best['period']:,} scored best, its used predictions bringing {100 * best['score']:.2f}% of the "
            f"validation periods' accesses to the fast tier beyond history"), tried
    p = cands[-1]
    return int(p), (f"searched on the training periods ({names} accesses): no "
                    f"candidate's used predictions beat history there; the coarsest, {p:,} (fewest boundaries "
                    f"to pay inference at)"), tried


def on_off(name: str, key: str, v: str) -> bool:
    if v in ("on", "true", "1", "yes"):
        return True
    if v in ("off", "false", "0", "no"):
        return False
    raise _core.TierkitError(f"{name}:{key}: '{v}' is not on or off")


def expand(policy: str, spec: dict, trace: PathLike, fast_capacity: Any, format: Optional[str], cache: Optional[str],
           progress: Optional[bool], platform: Any = "dram-pmem", timing: str = "simple") -> tuple[str, dict]:
    """``kleio:pages=F,...`` / ``kleoniki:...`` → trained predictions and the spec that reads them.

    Kleio's period, when not given (or ``period=search``), is searched on the training periods
    (:func:`search_period`); Kleoniki's defaults to Cori's choice
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
    searched: Optional[list] = None
    if name == "kleoniki" and "period" not in args:
        from ..cori import tune

        t = tune(trace, "history", platform, cap, timing, exhaustive=False, format=format, cache=cache,
                 progress=progress)
        cori_period = t["chosen_period"]
        period, period_note = learned_period(int(t["accesses"]), cori_period, history)
        period_note += CORI_FUTURE
    elif args.get("period") == "search" or (name == "kleio" and "period" not in args):
        check_args(name, num("pages", 0.1), cap, history, num("hidden", 16, int), num("epochs", 60, int),
                   num("bins", 16, int), num("holdout", HOLDOUT), args.get("weight", "none"), args.get("device", "auto"))
        period, period_note, searched = search_period(
            trace, num("pages", 0.1), num("bins", 16, int), cap, history, num("hidden", 16, int), num("epochs", 60, int),
            num("seed", 0, int), num("holdout", HOLDOUT), num("trust", TRUST, int), args.get("weight", "none"),
            format, cache, progress, args.get("device", "auto"))
    else:
        period = num("period", 1000, int)
    made = predictions(trace, name, pages=num("pages", 0.1 if name == "kleio" else 0.2), period=period,
                       bins=num("bins", 16, int), fast_capacity=cap, history=history,
                       hidden=num("hidden", 16, int), epochs=num("epochs", 60, int), tol=num("tol", 0.5),
                       seed=num("seed", 0, int), train_trace=args.get("train"), format=format, cache=cache,
                       progress=progress, holdout=num("holdout", HOLDOUT),
                       # perfect classes are used as they are unless a fallback is asked for
                       fallback=fallback_mode(name, args.get("fallback", "off" if args.get("predictor") == "hybrid"
                                                             else "online")),
                       trust=num("trust", TRUST, int), predictor=args.get("predictor", "lstm"),
                       class_weight=args.get("weight", "none"),
                       threads=num("threads", None, int) if "threads" in args else None,
                       infer_ns=args.get("infer_ns", "measure"), model=args.get("model") or None,
                       save=args.get("save") or None, device=args.get("device", "auto"))
    rest = [f"{k}={v}" for k, v in spec["args"] if k not in TRAIN_KEYS and not (k == "period" and v == "search")]
    # the inference the scheduler charges: measured with these models, or as given
    rest.append(f"infer_ns={made.info['inference']['ns_per_model']!r}")
    if "period" not in args or args["period"] == "search":
        rest.append(f"period={period}")
    return f"{name}:" + ",".join([f"predictions={made.path}", *rest]), {
        **made.info, "cori_period": cori_period, "period_chosen": period_note, "period_search": searched,
        "period_future_knowledge": cori_period is not None}


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
          class_weight: str = "none", threads: Optional[int] = None, trust: int = TRUST,
          infer_ns: Union[str, float] = "measure", device: str = "auto") -> dict:
    """History, oracle and ``policy`` with models for each fraction of the pages: the gap
    bridged (003 Fig. 3.3) against the fraction, with models, training time and the models'
    scores on the held-out periods. Each fraction's models run with the online fallback to
    history (``gap_bridged_pct``, the headline), without it (``gap_bridged_no_fallback_pct``)
    and with the future-knowledge fallback (``gap_bridged_future_fallback_pct``); beside them
    the selected pages with perfect classes (``gap_bridged_future_hybrid_pct``, cori-sim's
    hybrid) and two controls with the online fallback that must not gain: untrained models
    (``gap_bridged_untrained_pct``) and "no access" always (``gap_bridged_idle_pct``); and
    "no access" always without the fallback (``gap_bridged_idle_no_fallback_pct``), the control
    of the no-fallback column."""
    from .._engine import run

    chosen = searched = None
    for f in fractions:
        check_args(policy, f, fast_capacity, history, hidden, epochs, bins, holdout, class_weight, device)
    if period is None and policy == "kleio":
        period, chosen, searched = search_period(trace, max(fractions), bins, fast_capacity, history, hidden, epochs, seed,
                                                 holdout, trust, class_weight, format, cache, progress, device)
    elif period is None:
        period = default_period(trace, format, cache, progress)
    base = {}
    for name in ("history", "oracle"):
        r = run(trace, platform, f"{name}:period={period},bins={bins}", fast_capacity, None, timing, format, cache, False)
        base[name] = r
    hist_ns, orc_ns = base["history"]["runtime_ns"], base["oracle"]["runtime_ns"]
    c = counts(trace, period, format, cache, progress)
    accesses = int(c.accesses)
    from .inference import break_even_period

    rows = []

    from .._engine import keep_inputs

    # every run of the study, with the predictions it read embedded: `tierkit replay` runs them again
    results: list[dict] = []

    def sim(path: str, infer: float = 0.0, what: str = "") -> dict:
        r = keep_inputs(run(trace, platform, f"{policy}:period={period},bins={bins},predictions={path},infer_ns={infer!r}",
                            fast_capacity, None, timing, format, cache, False))
        results.append({**r, "study_run": what})
        return r

    common = dict(period=period, bins=bins, fast_capacity=fast_capacity, history=history, hidden=hidden, tol=tol,
                  seed=seed, train_trace=train_trace, format=format, cache=cache, progress=progress, holdout=holdout,
                  class_weight=class_weight, threads=threads, device=device)
    for f in fractions:
        made = predictions(trace, policy, pages=f, epochs=epochs, trust=trust, variants=("off", "future"),
                           infer_ns=infer_ns, **common)  # type: ignore[arg-type]
        runs = {mode: sim(path, what=f"pages={f}: fallback={mode}, inference not charged")
                for mode, path in made.info["variant_paths"].items()}
        inf = made.info["inference"]
        charged = sim(made.path, inf["ns_per_model"], f"pages={f}: fallback=online, inference charged (the headline)")
        # perfect classes for the selected pages (cori-sim's hybrid: the selection's headroom)
        hyb = sim(predictions(trace, policy, pages=f, epochs=epochs, predictor="hybrid", fallback="off",
                              **common).path, what=f"pages={f}: hybrid (perfect classes, FUTURE KNOWLEDGE)")  # type: ignore[arg-type]
        # controls that must not show a gain: untrained models and "no access" always, with the
        # same (online) fallback
        untrained = sim(predictions(trace, policy, pages=f, epochs=0, trust=trust, **common).path,  # type: ignore[arg-type]
                        what=f"pages={f}: untrained models (control)")
        idle_made = predictions(trace, policy, pages=f, epochs=epochs, predictor="idle", trust=trust,
                                variants=("off",), **common)  # type: ignore[arg-type]
        idle = sim(idle_made.path, what=f"pages={f}: 'no access' always (control)")
        idle_off = sim(idle_made.info["variant_paths"]["off"], what=f"pages={f}: 'no access' always, no fallback (control)")
        r, r0, rf = runs["online"], runs["off"], runs["future"]

        def g(x: dict) -> Optional[float]:
            return gap_bridged(hist_ns, orc_ns, x["runtime_ns"])

        rows.append({**{k: made.info[k] for k in ("pages_fraction", "pages_selected", "models", "pages_per_model",
                                                   "distinct_patterns", "train_seconds", "inference_per_period_ms",
                                                   "accuracy", "history_accuracy", "accessed_recall",
                                                   "history_accessed_recall", "balanced_accuracy",
                                                   "history_balanced_accuracy", "class_recall", "history_class_recall",
                                                   "fallback_pages", "predicted_periods_used", "predicted_periods",
                                                   "pages_losing_to_history", "train_periods",
                                                   "eval_start_period", "eval_periods", "out_of_sample", "warnings")},
                     "runtime_ns": charged["runtime_ns"], "fast_hit_ratio": r["fast_hit_ratio"],
                     "migrations": r["migrations"],
                     "gap_bridged_pct": g(charged),
                     "inference_ns_per_model": inf["ns_per_model"], "inference_ns_per_boundary": inf["ns_per_boundary"],
                     "inference_measured": inf["measured"],
                     "inference_boundaries": charged["stats"]["policy"]["inference"]["boundaries_charged"]
                     if charged["stats"]["policy"].get("inference") else 0,
                     "period_sim_ns": hist_ns / max(1, c.periods),
                     "runtime_free_inference_ns": r["runtime_ns"], "gap_bridged_free_inference_pct": g(r),
                     "break_even_period": break_even_period(accesses, period, hist_ns, r["runtime_ns"],
                                                            inf["ns_per_boundary"]),
                     "break_even_period_no_fallback": break_even_period(accesses, period, hist_ns, r0["runtime_ns"],
                                                                        inf["ns_per_boundary"]),
                     "runtime_no_fallback_ns": r0["runtime_ns"], "gap_bridged_no_fallback_pct": g(r0),
                     "runtime_future_fallback_ns": rf["runtime_ns"], "gap_bridged_future_fallback_pct": g(rf),
                     "runtime_future_hybrid_ns": hyb["runtime_ns"], "gap_bridged_future_hybrid_pct": g(hyb),
                     "gap_bridged_untrained_pct": g(untrained), "gap_bridged_idle_pct": g(idle),
                     # the control of the no-fallback column: what ranking the selected pages last gives
                     "gap_bridged_idle_no_fallback_pct": g(idle_off)})
    return {"trace": os.fspath(trace), "policy": policy, "platform": platform, "fast_capacity": fast_capacity,
            "timing": timing, "period": period, "period_chosen": chosen, "period_search": searched, "bins": bins,
            "history_periods": history,
            "holdout": holdout if train_trace is None else None, "class_weight": class_weight,
            "pages": int(c.pages), "periods": int(c.periods),
            "history_runtime_ns": hist_ns, "oracle_runtime_ns": orc_ns,
            "history_fast_hit_ratio": base["history"]["fast_hit_ratio"],
            "oracle_fast_hit_ratio": base["oracle"]["fast_hit_ratio"], "fallback": "online", "trust": trust,
            # only the headline pays for inference; the other gaps are what the predictions are worth
            "inference_charged_in": ["gap_bridged_pct", "runtime_ns"],
            # the figures that use what a running system could not know, and what
            "future_knowledge": {
                "oracle_runtime_ns": "the oracle ranks pages by their counts in the coming period",
                "gap_bridged_future_fallback_pct": "the fallback is decided per page with the true classes of the "
                                                   "periods it is scored on",
                "gap_bridged_future_hybrid_pct": "the selected pages are given their true classes (perfect prediction)"},
            "rows": rows, "results": [{**base["history"], "study_run": "history"},
                                      {**base["oracle"], "study_run": "oracle"}, *results]}


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
