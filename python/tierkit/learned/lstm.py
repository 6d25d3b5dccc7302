"""Per-page recurrent predictors of access classes, trained many at a time (003 §3.2, §4).

Kleio (003 §3.2) gives each selected page its own small recurrent network that learns, from
the page's access counts over the last K scheduling periods, how hot the page will be in the
next one. Kleoniki (003 §4) first groups pages whose per-period patterns are alike and trains
one network per group. This module is the learning core of both:

- :func:`count_class` / :func:`class_count`: the log2 access classes the networks predict (the
  same rule as the Rust page scheduler's ``count_class``);
- :func:`train`: M independent LSTM classifiers, one per series, trained together: their
  weights are stacked with a leading model dimension and every step is a batched matrix
  product over [models, windows, features]. Each model's loss is its own and Adam works per
  parameter, so this is M independent trainings done at once;
- :func:`predict`: the class each model predicts for each period of its pages;
- :func:`predict_last`: the classes predicted at one boundary, as a scheduler runs its models
  (:mod:`tierkit.learned.inference` times it);
- :func:`group_patterns`: Kleoniki's grouping of pages into patterns (identical rows, then
  k-means over the distinct rows).

Only :func:`train` and :func:`predict` need PyTorch (``pip install 'torch>=2.2'``), imported
when first called.

The model (per page or group): input at each of the K steps is the class scaled to [0, 1]
(class / bins); one LSTM layer of ``hidden`` units; a linear layer to bins + 1 logits read
from the last hidden state; cross-entropy against the class of the period that follows the
window. The cell input uses 2·sigmoid(z) − 1 (= tanh(z/2), an LSTM with that gate's weights
halved) so that one sigmoid covers all four gates; tanh of the cell is computed the same way.

Training speed comes from three things: windows that occur several times in a series are
trained once with their target counts as weights (the loss is unchanged: a periodic series
of period p has only p distinct windows), models with similar numbers of distinct windows are
trained together, and the forward and backward passes are written out by hand (no autograd
graph, buffers reused across steps).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .._core import TierkitError

#: Adam steps per epoch. A model with more than MIN_BATCH distinct windows sees them in
#: STEPS_PER_EPOCH mini-batches per epoch (one pass); a model with fewer sees all of them
#: in every step (so a short periodic pattern gets as many updates as a long random one).
STEPS_PER_EPOCH = 4
MIN_BATCH = 32
#: bytes of training buffers per chunk on the CPU; the chunk is cut below ``config.chunk``
#: models when its buffers would pass this (cache-sized chunks train faster on a CPU)
CPU_CHUNK_BYTES = 96 << 20
#: models trained together at least before a chunk is cut where the batch size doubles
CHUNK_MIN = 64
#: windows, and blocks of windows of one model, per forward pass in :func:`predict`
PREDICT_WINDOWS = 1 << 16
PREDICT_BLOCKS = 8192

#: the line to install it, as written in pyproject.toml's `ml` extra (docs/install.md)
NO_TORCH = "PyTorch is not installed: pip install 'torch>=2.2'"
#: values of TrainConfig.class_weight
CLASS_WEIGHTS = ("balanced", "sqrt", "none")


# ---------------------------------------------------------------------------------------------
# classes


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Exact bit length of non-negative integers (0 for 0), as int64."""
    v = v.astype(np.uint64, copy=True)
    n = np.zeros(v.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= np.uint64(1 << s)
        n += s * big
        v = np.where(big, v >> np.uint64(s), v)
    return n + (v > 0)


def count_class(counts: np.ndarray, bins: int) -> np.ndarray:
    """Log2 class of per-period access counts: 0 for 0, else min(bins, floor(log2 c) + 1)
    (the Rust page scheduler's ``count_class``). uint8, the shape of ``counts``."""
    if not isinstance(bins, (int, np.integer)) or not 1 <= bins <= 255:
        raise ValueError(f"count_class: bins must be a whole number from 1 to 255, not {bins!r}")
    c = np.asarray(counts)
    if c.dtype == bool:
        c = c.astype(np.uint8)
    if c.dtype.kind not in "iu":
        raise ValueError(f"count_class: counts must be integers, not {c.dtype}")
    if c.dtype.kind == "i" and c.size and c.min() < 0:
        raise ValueError("count_class: counts must not be negative")
    return np.minimum(_bit_length(c), bins).astype(np.uint8)


def class_count(classes: np.ndarray) -> np.ndarray:
    """A representative count of each class: 0 for 0, 2**(c-1) for c >= 1, so that
    ``count_class(class_count(c), bins) == c`` for c <= bins. uint32."""
    c = np.asarray(classes)
    if c.dtype.kind not in "iu":
        raise ValueError(f"class_count: classes must be integers, not {c.dtype}")
    if c.size and (c.min() < 0 or c.max() > 32):
        raise ValueError("class_count: classes must be from 0 to 32")
    c = c.astype(np.int64)
    return np.where(c > 0, np.left_shift(np.int64(1), np.maximum(c, 1) - 1), 0).astype(np.uint32)


# ---------------------------------------------------------------------------------------------
# configuration and trained models


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of :func:`train` (the defaults are this module's choices for 003 §3.2)."""

    history: int = 8  #: K: periods of input per prediction
    hidden: int = 16  #: LSTM hidden units per model
    epochs: int = 60  #: passes over each model's windows (STEPS_PER_EPOCH Adam steps each)
    lr: float = 0.02  #: Adam learning rate
    bins: int = 8  #: classes are 0..bins
    seed: int = 0  #: initial weights and mini-batch order
    device: str = "auto"  #: "auto" (cuda if available, else cpu), "cpu", "cuda"
    chunk: int = 4096  #: at most this many models trained together (bounds memory)
    #: "none": every window weighs the same; "balanced": each model's windows whose target is
    #: "no access" (class 0) and those whose target is an access (class >= 1) weigh half of
    #: its loss each; "sqrt": the square roots of the balanced weights. Weighting raises the
    #: models' recall of accessed periods but, measured on the SPEC traces (docs/learned.md),
    #: costs more in idle periods predicted hot than it gains: "none" by default
    class_weight: str = "none"

    def check(self) -> None:
        for name, lo in (("history", 1), ("hidden", 1), ("epochs", 0), ("chunk", 1)):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"TrainConfig.{name}: {v!r} is not a whole number >= {lo}")
        if not isinstance(self.bins, (int, np.integer)) or not 1 <= self.bins <= 255:
            raise ValueError(f"TrainConfig.bins: {self.bins!r} is not a whole number from 1 to 255")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"TrainConfig.lr: {self.lr!r} is not a positive learning rate")
        if self.class_weight not in CLASS_WEIGHTS:
            raise ValueError(f"TrainConfig.class_weight: {self.class_weight!r} is not one of {', '.join(CLASS_WEIGHTS)}")


@dataclass
class Models:
    """M trained models. ``state`` holds their stacked parameters as CPU tensors:

    - ``w_gates`` [M, 4·hidden, hidden + 2]: gate pre-activations (rows: input, forget, output
      gates, cell input) from [h; x; 1] (columns: previous hidden state, input, bias);
    - ``w_out`` [M, bins + 1, hidden + 1]: logits from [h; 1].
    """

    config: TrainConfig
    state: dict
    count: int
    train_seconds: float
    device: str
    info: dict = field(default_factory=dict)  #: e.g. distinct windows per model, chunks


# ---------------------------------------------------------------------------------------------
# torch plumbing


#: environment variable that overrides the PyTorch threads tierkit uses (default 1)
THREADS_ENV = "TIERKIT_TORCH_THREADS"
_threads_set: Optional[int] = None


def threads(n: Optional[int] = None) -> int:
    """The intra-op threads PyTorch uses for tierkit's training and inference: ``n``, else
    ``$TIERKIT_TORCH_THREADS``, else 1. Inter-op threads are set to 1 once (PyTorch allows
    that only before its first parallel work).

    Why 1 by default: the models are many tiny batched matrix products, where thread hand-offs
    cost more than they save, and PyTorch's default (one thread per core) spins on every core
    even when other processes need them: on a loaded 2-core machine ``tierkit kleio`` took
    678 s with the default and 38 s with one thread, with the same results."""
    global _threads_set
    torch = _torch_module()
    if n is None:
        env = os.environ.get(THREADS_ENV, "").strip()
        if env:
            try:
                n = int(env)
            except ValueError:
                n = 0
            if n < 1:
                raise TierkitError(f"{THREADS_ENV}: '{env}' is not a whole number of threads >= 1")
        else:
            n = 1
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise TierkitError(f"threads: {n!r} is not a whole number of threads >= 1")
    n = int(n)
    if _threads_set is None:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass  # already set, or parallel work already ran: PyTorch keeps its pool
    if _threads_set != n or torch.get_num_threads() != n:
        torch.set_num_threads(n)
    _threads_set = n
    return n


def _torch_module():
    try:
        import torch
    except ImportError:
        raise TierkitError(NO_TORCH) from None
    return torch


def _torch():
    torch = _torch_module()
    if _threads_set is None:
        threads()
    return torch


def _device(torch, name: str):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"device: '{name}' is not a device (auto, cpu or cuda)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise TierkitError(f"device '{name}': CUDA is not available to PyTorch on this machine")
    return dev


def _check_classes(a: np.ndarray, bins: int, what: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array [rows, periods], got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"{what}: classes must be integers, not {a.dtype}")
    if a.size and (a.min() < 0 or a.max() > bins):
        raise ValueError(f"{what}: classes must be from 0 to bins={bins} (found {a.min()}..{a.max()})")
    return a


def _distinct_windows(series: np.ndarray, owner: np.ndarray, K: int, C: int):
    """The distinct (owner, window) pairs of all rows' K-period windows.

    Returns (owner_u [U], windows_u [U, K], inverse [rows * (T - K)]), sorted by owner then
    window, so each owner's windows are contiguous."""
    P, T = series.shape
    N = T - K
    win = np.lib.stride_tricks.sliding_window_view(series, K, axis=1)[:, :N]  # [P, N, K]
    own = np.repeat(owner.astype(np.int64), N)
    n_own = int(owner.max()) + 1 if len(owner) else 1
    if C ** K * n_own < 2 ** 62:
        code = np.zeros((P, N), dtype=np.int64)
        for k in range(K):
            code *= C
            code += win[:, :, k]
        key = own * (C ** K) + code.ravel()
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:
        rows = np.concatenate([own[:, None], win.reshape(P * N, K).astype(np.int64)], 1)
        _, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    return own[first], win.reshape(P * N, K)[first], inv


class _Net:
    """The stacked LSTMs of one chunk, with the hand-written training step.

    Layout (feature-major, so that every gate's slice of a step is one contiguous block per
    model): inputs Z [m, K, H+2, b] hold [h_{k-1}; x_k; 1] for each step k; A [m, K, 4H, b]
    the gate activations; G, CS, TC [m, K, H, b] the cell input, cell and tanh(cell); dZ the
    gate pre-activations' gradients."""

    def __init__(self, torch, m: int, b: int, K: int, H: int, C: int, device, dtype=None) -> None:
        dtype = torch.float32 if dtype is None else dtype
        e = lambda *s: torch.empty(*s, dtype=dtype, device=device)  # noqa: E731
        self.t, self.K, self.H = torch, K, H
        self.Z, self.A = e(m, K, H + 2, b), e(m, K, 4 * H, b)
        self.G, self.CS, self.TC = e(m, K, H, b), e(m, K, H, b), e(m, K, H, b)
        self.hout, self.dZ, self.zs = e(m, H + 1, b), e(m, K, 4 * H, b), e(m, 4 * H, b)
        self.gW = e(m, 4 * H, H + 2)
        self.Z[:, 0, :H].zero_()
        self.Z[:, :, H + 1].fill_(1.0)
        self.hout[:, H].fill_(1.0)

    def step(self, W, Wo, x, cnt):
        """Loss gradients for inputs x [m, K, b] and target counts cnt [m, C, b]; each model's
        loss is the mean cross-entropy over its windows of the batch."""
        t, K, H = self.t, self.K, self.H
        Z, A, G, CS, TC, hout, dZ, zs, gW = self.Z, self.A, self.G, self.CS, self.TC, self.hout, self.dZ, self.zs, self.gW
        Z[:, :, H].copy_(x)
        for k in range(K):
            ak, gk, ck, tck = A[:, k], G[:, k], CS[:, k], TC[:, k]
            t.bmm(W, Z[:, k], out=zs)
            t.sigmoid(zs, out=ak)
            t.mul(ak[:, 3 * H:], 2.0, out=gk).sub_(1.0)
            t.mul(ak[:, :H], gk, out=ck)
            if k:
                ck.addcmul_(ak[:, H:2 * H], CS[:, k - 1])
            t.mul(ck, 2.0, out=tck).sigmoid_().mul_(2.0).sub_(1.0)
            t.mul(ak[:, 2 * H:3 * H], tck, out=Z[:, k + 1, :H] if k + 1 < K else hout[:, :H])
        logp = t.log_softmax(t.bmm(Wo, hout), 1)
        tot = cnt.sum(1, keepdim=True)
        denom = tot.sum(2, keepdim=True).clamp_min_(1.0)
        dl = logp.exp_().mul_(tot).sub_(cnt).div_(denom)
        gWo = t.bmm(dl, hout.transpose(1, 2))
        dh = t.bmm(Wo[:, :, :H].transpose(1, 2), dl)
        WhT = W[:, :, :H].transpose(1, 2)
        tanh_bw, sigmoid_bw = t.ops.aten.tanh_backward.grad_input, t.ops.aten.sigmoid_backward.grad_input
        dc = None
        for k in range(K - 1, -1, -1):
            ak, tc, dzk, gk = A[:, k], TC[:, k], dZ[:, k], G[:, k]
            t.mul(dh, tc, out=dzk[:, 2 * H:3 * H])  # output gate
            q = dh.mul_(ak[:, 2 * H:3 * H])
            tanh_bw(q, tc, grad_input=q)  # through tanh(c): q (1 - tc^2)
            if dc is None:
                dc = q
            else:
                dc.add_(q)
            t.mul(dc, gk, out=dzk[:, :H])  # input gate
            if k:
                t.mul(dc, CS[:, k - 1], out=dzk[:, H:2 * H])  # forget gate
            else:
                dzk[:, H:2 * H].zero_()
            t.mul(dc, ak[:, :H], out=dzk[:, 3 * H:]).mul_(2.0)  # cell input, 2 sigmoid - 1
            sigmoid_bw(dzk, ak, grad_input=dzk)  # through the sigmoids: dz a (1 - a)
            if k == K - 1:
                t.bmm(dzk, Z[:, k].transpose(1, 2), out=gW)
            else:
                gW.baddbmm_(dzk, Z[:, k].transpose(1, 2))
            if k:
                dc.mul_(ak[:, H:2 * H])
                dh = t.bmm(WhT, dzk)
        return gW, gWo


def _forward(torch, W, Wo, x, K: int, H: int):
    """Logits [m, C, b] for inputs x [m, K, b]: the network of :class:`_Net`, with autograd."""
    m, _, b = x.shape
    ones = torch.ones(m, 1, b, dtype=W.dtype, device=W.device)
    h = torch.zeros(m, H, b, dtype=W.dtype, device=W.device)
    c = None
    for k in range(K):
        a = torch.sigmoid(torch.bmm(W, torch.cat([h, x[:, k:k + 1], ones], 1)))
        g = a[:, 3 * H:] * 2.0 - 1.0
        c = a[:, :H] * g if c is None else a[:, :H] * g + a[:, H:2 * H] * c
        h = a[:, 2 * H:3 * H] * (torch.sigmoid(c * 2.0) * 2.0 - 1.0)
    return torch.bmm(Wo, torch.cat([h, ones], 1))


# ---------------------------------------------------------------------------------------------
# training


def _init_params(torch, M: int, H: int, C: int, seed: int):
    """Initial weights of all M models from one generator, in model order, so a model's start
    does not depend on how models are chunked: uniform ±1/sqrt(H) as PyTorch's LSTM, except
    the input column, ±bins/sqrt(H), as if the input were the class itself rather than
    class/bins (adjacent classes are 1/bins apart; with the plain scale they start nearly
    indistinguishable and some period-6 patterns were not learnt within 60 epochs)."""
    g = torch.Generator().manual_seed(int(seed))
    s = 1.0 / math.sqrt(H)
    W = (torch.rand(M, 4 * H, H + 2, generator=g) * 2 - 1) * s
    W[:, :, H] *= C - 1
    Wo = (torch.rand(M, C, H + 1, generator=g) * 2 - 1) * s
    return W, Wo


def idle_access_weights(targets: np.ndarray, sqrt: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per row of targets [M, N]: the weight of a window whose target is class 0 and of one
    whose target is >= 1, so that each kind carries half of the row's total weight N (both 1
    when a row has only one kind); with ``sqrt``, the square roots of those weights (a milder
    correction). float32."""
    N = targets.shape[1]
    n0 = (targets == 0).sum(1).astype(np.float64)
    n1 = N - n0
    both = (n0 > 0) & (n1 > 0)
    w0 = np.where(both, N / (2 * np.maximum(n0, 1)), 1.0)
    w1 = np.where(both, N / (2 * np.maximum(n1, 1)), 1.0)
    if sqrt:
        w0, w1 = np.sqrt(w0), np.sqrt(w1)
    return w0.astype(np.float32), w1.astype(np.float32)


def _batch_size(u):
    """Windows per step of a model with u distinct windows: all of them up to MIN_BATCH,
    else a STEPS_PER_EPOCH-th of them, at least MIN_BATCH."""
    return np.minimum(u, np.maximum(MIN_BATCH, -(-np.asarray(u) // STEPS_PER_EPOCH)))


def _chunk_models(order: np.ndarray, U: np.ndarray, cfg: TrainConfig, on_cpu: bool) -> list:
    """Consecutive runs of ``order`` (models sorted by distinct windows) trained together:
    at most ``cfg.chunk`` models; a new run starts where the batch size doubles (after
    CHUNK_MIN models), so that few models are padded far beyond their windows; on the CPU
    also at most CPU_CHUNK_BYTES of buffers."""
    K, H = cfg.history, cfg.hidden
    per_window = 4 * K * (H + 2 + 4 * H + 3 * H + 4 * H) + 4 * (H + 1 + 4 * H)
    bs = _batch_size(U[order])
    chunks, a = [], 0
    while a < len(order):
        b = min(len(order), a + cfg.chunk)
        if b - a > CHUNK_MIN:
            b = min(b, max(a + CHUNK_MIN, int(np.searchsorted(bs, max(2 * bs[a], MIN_BATCH), side="right"))))
        if on_cpu:
            b = min(b, a + max(1, CPU_CHUNK_BYTES // (int(bs[b - 1]) * per_window)))
        chunks.append(order[a:b])
        a = b
    return chunks


def train(series: np.ndarray, config: TrainConfig = TrainConfig(),
          progress: Optional[Callable[[int, int], Any]] = None) -> Models:
    """Train one model per row of ``series`` [M, T] (integer classes 0..bins).

    Model m learns to predict series[m, t] from series[m, t-K:t] for every t in K..T-1
    (cross-entropy over bins + 1 classes). The M models are independent but trained together
    in chunks of at most ``config.chunk``. ``progress(done_models, total_models)`` is called
    as chunks finish. Same inputs and seed give the same models, bit for bit, on one machine."""
    config.check()
    K, H, C = config.history, config.hidden, config.bins + 1
    series = _check_classes(series, config.bins, "train: series")
    M, T = series.shape
    if T <= K:
        raise ValueError(f"train: the series have {T} periods but each prediction needs history={K} periods "
                         f"before it: give at least {K + 1} periods (or a shorter history)")
    torch = _torch()
    dev = _device(torch, config.device)
    t0 = time.perf_counter()
    W_all, Wo_all = _init_params(torch, M, H, C, config.seed)
    N = T - K
    owner, wins, inv = _distinct_windows(series, np.arange(M), K, C)
    y = series[:, K:].reshape(-1).astype(np.int64)
    cnt = np.bincount(inv * C + y, minlength=len(owner) * C).reshape(len(owner), C).astype(np.float32)
    if config.class_weight != "none":
        w0, w1 = idle_access_weights(series[:, K:], config.class_weight == "sqrt")
        cnt[:, 0] *= w0[owner]
        cnt[:, 1:] *= w1[owner][:, None]
    U = np.bincount(owner, minlength=M)
    start = np.concatenate([[0], np.cumsum(U)])
    order = np.argsort(U, kind="stable")
    chunks = _chunk_models(order, U, config, dev.type == "cpu")
    done = 0
    if progress is not None:
        progress(0, M)
    for ci, ids in enumerate(chunks):
        m = len(ids)
        Um = U[ids]
        bm = _batch_size(Um)
        u, b = int(Um.max()), int(bm.max())
        # this chunk's distinct windows, padded to u per model, plus one empty column (no
        # targets: no gradient) that fills batches of models with fewer windows than b
        rows = np.concatenate([np.arange(start[i], start[i + 1]) for i in ids])
        local = np.repeat(np.arange(m), Um)
        pos = rows - np.repeat(start[ids], Um)
        X = np.zeros((m, K, u + 1), dtype=np.float32)
        X[local, :, pos] = wins[rows] / np.float32(config.bins)
        Y = np.zeros((m, C, u + 1), dtype=np.float32)
        Y[local, :, pos] = cnt[rows]
        X, Y = torch.from_numpy(X).to(dev), torch.from_numpy(Y).to(dev)
        W = W_all[torch.from_numpy(ids)].to(dev)
        Wo = Wo_all[torch.from_numpy(ids)].to(dev)
        opt = torch.optim.Adam([W, Wo], lr=config.lr)
        net = _Net(torch, m, b, K, H, C, dev)
        rng = np.random.default_rng([config.seed, ci])
        full = bool((bm == u).all())  # every model sees all its windows in every step
        if full:
            xb, yb = X[:, :, :u], Y[:, :, :u]
        else:
            cols = np.arange(b)[None, :]
            real = cols < bm[:, None]
            big = Um > bm  # models that go through their windows in mini-batches
        for _ in range(config.epochs):
            if not full:
                # a fresh order of each model's own windows (padding sorts last)
                keys = rng.random((m, u))
                keys[np.arange(u)[None, :] >= Um[:, None]] = 2.0
                perm = np.argsort(keys, axis=1)
            for j in range(STEPS_PER_EPOCH):
                if not full:
                    at = np.where(big[:, None], (j * bm[:, None] + cols) % Um[:, None], cols)
                    idx = np.where(real, np.take_along_axis(perm, np.minimum(at, u - 1), 1), u)
                    it = torch.from_numpy(idx).to(dev)[:, None, :]
                    xb = X.gather(2, it.expand(m, K, b))
                    yb = Y.gather(2, it.expand(m, C, b))
                W.grad, Wo.grad = net.step(W, Wo, xb, yb)
                opt.step()
        W_all[torch.from_numpy(ids)] = W.detach().cpu()
        Wo_all[torch.from_numpy(ids)] = Wo.detach().cpu()
        del net, opt, X, Y
        done += m
        if progress is not None:
            progress(done, M)
    return Models(config=config, state={"w_gates": W_all, "w_out": Wo_all}, count=M,
                  train_seconds=time.perf_counter() - t0, device=str(dev.type),
                  info={"windows": M * N, "distinct_windows": int(len(owner)), "chunks": len(chunks)})


# ---------------------------------------------------------------------------------------------
# prediction


def _model_of(models: Models, model_of: Optional[np.ndarray], P: int, what: str) -> np.ndarray:
    """The model of each of P rows: ``model_of`` checked, or row p's own model when None."""
    if model_of is None:
        if P != models.count:
            raise ValueError(f"{what}: {P} input rows but {models.count} models: give model_of (the model of each row)")
        return np.arange(P)
    model_of = np.asarray(model_of)
    if model_of.shape != (P,) or model_of.dtype.kind not in "iu":
        raise ValueError(f"{what}: model_of must be {P} integers (one model index per input row)")
    if P and (model_of.min() < 0 or model_of.max() >= models.count):
        raise ValueError(f"{what}: model_of has indexes outside 0..{models.count - 1}")
    return model_of


def _blocks(owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows of one model side by side: ``owner`` [R] (sorted) is each row's model; rows are
    cut into blocks of L (a power of two up to 256, about the rows per model), each block one
    model's. Returns each row's block and slot in it, each block's model, and L."""
    R = len(owner)
    used, first, per = np.unique(owner, return_index=True, return_counts=True)
    L = int(min(256, 1 << int(math.ceil(math.log2(max(1.0, R / max(1, len(used))))))))
    nblk = -(-per // L)
    blk0 = np.concatenate([[0], np.cumsum(nblk)])
    pos = np.arange(R) - np.repeat(first, per)
    return np.repeat(blk0[:-1], per) + pos // L, pos % L, np.repeat(used, nblk), L


def predict(models: Models, inputs: np.ndarray, model_of: Optional[np.ndarray] = None) -> np.ndarray:
    """Predicted classes [P, T] (int16) for inputs [P, T] of integer classes: out[p, t] is
    the class model ``model_of[p]`` (row p's own model when None) predicts for period t from
    inputs[p, t-K:t]; -1 for t < K. Identical (model, window) pairs are evaluated once."""
    cfg = models.config
    K, H, C = cfg.history, cfg.hidden, cfg.bins + 1
    inputs = _check_classes(inputs, cfg.bins, "predict: inputs")
    P, T = inputs.shape
    model_of = _model_of(models, model_of, P, "predict")
    out = np.full((P, T), -1, dtype=np.int16)
    if T <= K or P == 0:
        return out
    torch = _torch()
    dev = _device(torch, cfg.device)
    owner, wins, inv = _distinct_windows(inputs, model_of, K, C)
    R = len(owner)
    # windows of one model are contiguous; cut them into blocks of L windows, each block
    # evaluated with its model's weights (one gather per block, not per window)
    blk, slot, blk_model, L = _blocks(owner)
    pred_u = np.empty(R, dtype=np.int16)
    Wg, Wog = models.state["w_gates"], models.state["w_out"]
    step = max(1, min(PREDICT_WINDOWS // L, PREDICT_BLOCKS))
    with torch.no_grad():
        for a in range(0, len(blk_model), step):
            e = min(len(blk_model), a + step)
            r0, r1 = np.searchsorted(blk, [a, e])  # blk is sorted
            bl, sl = blk[r0:r1] - a, slot[r0:r1]
            X = np.zeros((e - a, K, L), dtype=np.float32)
            X[bl, :, sl] = wins[r0:r1] / np.float32(cfg.bins)
            idx = torch.from_numpy(blk_model[a:e])
            W, Wo = Wg[idx].to(dev), Wog[idx].to(dev)
            logits = _forward(torch, W, Wo, torch.from_numpy(X).to(dev), K, H)
            cls = logits.argmax(1).cpu().numpy()  # [blocks, L]
            pred_u[r0:r1] = cls[bl, sl]
    out[:, K:] = pred_u[inv].reshape(P, T - K)
    return out


def device_weights(models: Models) -> tuple:
    """The models' stacked weights (``w_gates``, ``w_out``) on their device, for
    :func:`predict_last`: a scheduler that runs its models at every boundary keeps them there."""
    torch = _torch()
    dev = _device(torch, models.device)
    return models.state["w_gates"].to(dev), models.state["w_out"].to(dev)


def predict_last(models: Models, windows: np.ndarray, model_of: Optional[np.ndarray] = None,
                 weights: Optional[tuple] = None) -> np.ndarray:
    """The class (int16 [P]) model ``model_of[p]`` (row p's own when None) predicts for the
    period after ``windows[p]``, the K periods before one boundary: what a scheduler computes
    at that boundary, one forward pass over all rows at once on the models' device (as
    :func:`predict`, without its deduplication of windows over a whole series). ``weights``:
    :func:`device_weights`, else moved for this call."""
    cfg = models.config
    K, H = cfg.history, cfg.hidden
    windows = _check_classes(windows, cfg.bins, "predict_last: windows")
    P = windows.shape[0]
    if windows.shape[1] != K:
        raise ValueError(f"predict_last: windows must have K={K} periods, not {windows.shape[1]}")
    model_of = _model_of(models, model_of, P, "predict_last")
    if P == 0:
        return np.empty(0, dtype=np.int16)
    torch = _torch()
    dev = _device(torch, models.device)
    Wg, Wog = weights if weights is not None else device_weights(models)
    # rows of one model side by side in blocks of L (one block per model for Kleio)
    order = np.argsort(model_of, kind="stable")
    blk, slot, blk_model, L = _blocks(model_of[order])
    X = np.zeros((len(blk_model), K, L), dtype=np.float32)
    X[blk, :, slot] = windows[order] / np.float32(cfg.bins)
    with torch.no_grad():
        if len(blk_model) == models.count and L == 1:
            W, Wo = Wg, Wog  # every model once, in order: no gather
        else:
            idx = torch.from_numpy(blk_model).to(Wg.device)
            W, Wo = Wg[idx], Wog[idx]
        logits = _forward(torch, W, Wo, torch.from_numpy(X).to(dev), K, H)
        cls = logits.argmax(1).cpu().numpy()
    out = np.empty(P, dtype=np.int16)
    out[order] = cls[blk, slot]
    return out


# ---------------------------------------------------------------------------------------------
# grouping (Kleoniki, 003 §4.2)


def _representatives(x: np.ndarray, w: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Rounded weighted centroid of each cluster (half rounds up)."""
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(k))  # every label 0..k-1 is used
    sums = np.add.reduceat(x[order] * w[order, None], starts, axis=0)
    return np.floor(sums / np.add.reduceat(w[order], starts)[:, None] + 0.5)


def group_patterns(classes: np.ndarray, tol: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Kleoniki's page grouping (003 §4.2): pages [P, T] of classes -> (labels [P] int64,
    representative series [G, T] uint8).

    Identical rows form one group; then similar groups merge: k-means (k-means++ seeding,
    ``tierkit.profiling.kmeans``) over the distinct rows weighted by how many pages have each,
    with the smallest k (doubling, then binary search) for which the mean over pages of the mean absolute
    per-period difference between a page's row and its group's representative is at most
    ``tol`` (in classes). The representative is the rounded weighted centroid. Groups are
    numbered by size, largest first, ties by first page. Deterministic for a seed."""
    from ..profiling import kmeans

    a = np.asarray(classes)
    if a.ndim != 2:
        raise ValueError(f"group_patterns: expected a 2-D array [pages, periods], got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"group_patterns: classes must be integers, not {a.dtype}")
    if a.size and (a.min() < 0 or a.max() > 255):
        raise ValueError("group_patterns: classes must be from 0 to 255")
    if not tol >= 0:
        raise ValueError(f"group_patterns: tol must be >= 0, not {tol!r}")
    P, T = a.shape
    if P == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, T), dtype=np.uint8)
    uniq, inv, mult = np.unique(a, axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    D = len(uniq)
    x = uniq.astype(np.float64)
    w = mult.astype(np.float64)

    def attempt(k: int):
        if k >= D:
            return np.arange(D), x.copy(), 0.0
        lab, _ = kmeans(x, k, seed, weights=w, n_init=1)
        used, lab = np.unique(lab, return_inverse=True)
        rep = _representatives(x, w, lab, len(used))
        err = float((w * np.abs(x - rep[lab]).mean(1)).sum() / P) if T else 0.0
        return lab, rep, err

    # the smallest k that meets tol: doubling k from 1 brackets it (small k are cheap, and
    # pages with alike patterns need few groups), then a binary search inside the bracket
    best = (np.arange(D), x, 0.0)  # k = D: every distinct row its own group
    lo, hi = 1, D
    k = 1
    while k < D:
        r = attempt(k)
        if r[2] <= tol:
            hi, best = k, r
            break
        lo = k + 1
        k *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        r = attempt(mid)
        if r[2] <= tol:
            hi, best = mid, r
        else:
            lo = mid + 1
    lab_d, rep, _ = best
    page_group = lab_d[inv]
    G = len(rep)
    size = np.bincount(page_group, minlength=G)
    first = np.full(G, P, dtype=np.int64)
    np.minimum.at(first, page_group, np.arange(P))
    rank = np.lexsort((first, -size))
    new = np.empty(G, dtype=np.int64)
    new[rank] = np.arange(G)
    return new[page_group], rep[rank].astype(np.uint8)
