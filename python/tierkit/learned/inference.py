"""What running the learned schedulers' models costs, and when it pays (docs/learned.md,
"Inference cost").

Kleio and Kleoniki (003 §3.2, §4) run their models at every period boundary before the
scheduler decides what to move, so the program waits for them. The Rust scheduler charges
``models × infer_ns`` ns of halting time per boundary (``kleio:infer_ns=``); this module
measures ``infer_ns`` on this machine (:func:`per_inference_ns`) and says at which period the
learned scheduler's gain over ``history`` would pay for that time (:func:`break_even_period`).
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from . import lstm


def per_inference_ns(models: lstm.Models, inputs: np.ndarray, labels: Optional[np.ndarray] = None,
                     repeats: int = 5) -> dict:
    """Measure what one period boundary's inference costs on this machine, per model.

    ``inputs`` [P, T]: the integer classes of the managed pages per period (as
    :func:`lstm.predict` takes them); ``labels`` [P]: the model of each row (Kleoniki's groups),
    None when row p has model p (Kleio). One boundary is timed: the one after the last of the T
    periods, where every row's model predicts from the row's last K classes
    (:func:`lstm.predict_last`: all models at once, on the models' device, weights already
    there, as a scheduler keeps them between boundaries). For Kleio that is exactly one window
    per model; a Kleoniki model runs on the window of each page of its group, so its cost per
    model includes its pages. The call includes the preparation of the inputs and the copy of
    the predicted classes back to the host (on a GPU, that waits for the kernels).

    One untimed call warms up, then ``repeats`` timed ones. Returns:

    - ``ns_per_model``: the fastest boundary (``time.perf_counter``) divided by the models:
      the figure to pass as ``kleio:infer_ns=`` / ``kleoniki:infer_ns=``;
    - ``ns_per_boundary``: that fastest boundary, ns;
    - ``wall_ns`` and ``cpu_ns``: per repeat, the boundary's wall time and the process's CPU
      time (``time.process_time``, every thread) over it, ns;
    - ``models``, ``rows`` (windows per boundary), ``device``, ``threads`` (PyTorch's intra-op
      threads), ``repeats``.
    """
    if not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"per_inference_ns: repeats must be a whole number >= 1, not {repeats!r}")
    K = models.config.history
    inputs = np.asarray(inputs)
    if inputs.ndim != 2 or inputs.shape[1] < K:
        raise ValueError(f"per_inference_ns: inputs must be [rows, periods] with at least K={K} periods, not shape {inputs.shape}")
    if models.count < 1:
        raise ValueError("per_inference_ns: no models")
    windows = np.ascontiguousarray(inputs[:, inputs.shape[1] - K:])
    weights = lstm.device_weights(models)
    torch = lstm._torch()
    lstm.predict_last(models, windows, labels, weights)  # warm-up: allocations, kernels
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time_ns(), time.perf_counter_ns()
        lstm.predict_last(models, windows, labels, weights)
        t1, c1 = time.perf_counter_ns(), time.process_time_ns()
        wall.append(t1 - t0)
        cpu.append(c1 - c0)
    best = min(wall)
    return {
        "ns_per_model": best / models.count,
        "ns_per_boundary": best,
        "wall_ns": wall,
        "cpu_ns": cpu,
        "models": int(models.count),
        "rows": int(windows.shape[0]),
        "device": str(weights[0].device),
        "threads": int(torch.get_num_threads()),
        "repeats": int(repeats),
    }


def break_even_period(accesses: int, period: int, history_ns: float, learned_ns: float,
                      per_boundary_ns: float) -> Optional[int]:
    """The period (in accesses) at which the learned scheduler's gain over ``history`` equals
    the cost of running its models; None when it gains nothing.

    ``history_ns`` and ``learned_ns`` are the runtimes of ``history`` and of the learned
    scheduler, without inference, over the same ``accesses`` at period ``period``;
    ``per_boundary_ns`` is one boundary's inference (``models × infer_ns``). The gain per
    access is ``(history_ns - learned_ns) / accesses``; inference costs ``per_boundary_ns /
    P`` per access at period ``P``, so the two are equal at ``P = per_boundary_ns /
    gain_per_access``, rounded up to a whole number of accesses (at least 1): at that period
    or longer the models pay for themselves.

    **Assumption:** the gain per access stays what it was measured to be at ``period``. It
    does not in general: a longer period changes what every scheduler does (Cori's tuning,
    docs/learned.md, exists because of it), so the answer says how long a period the gain
    measured at ``period`` would need, not that a run at that period would gain it. Confirm
    it with a run at that period (``kleio:period=P,infer_ns=...``)."""
    if not accesses > 0 or not period > 0:
        raise ValueError(f"break_even_period: accesses and period must be positive (got {accesses}, {period})")
    for name, v in (("history_ns", history_ns), ("learned_ns", learned_ns), ("per_boundary_ns", per_boundary_ns)):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"break_even_period: {name} must be a finite number >= 0, not {v!r}")
    gain_ns = history_ns - learned_ns
    if gain_ns <= 0:
        return None
    return max(1, math.ceil(per_boundary_ns * accesses / gain_ns))
