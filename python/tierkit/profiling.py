"""Allocation-site profiles (``tierkit profile``; 000 §4.1, 002 §III and Fig. 2).

The Rust core makes one pass over the trace and attributes every access to the live
allocation that holds it (``_core.profile_trace``). Here the raw sites are grouped by
call-path depth (depth 0: the call site of the allocation alone; depth d: it and d callers,
counted in physical frames; sites are keyed by their frame keys when the trace has them,
else by their display frames), the run's slices are clustered into phases, and the profile
file is written. The file's fields are documented in ``docs/guidance.md`` ("The profile
file").
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from . import _core
from ._core import TierkitError
from .guidance import site_frames, site_label
from .output import check_new as check_new_file
from .output import write_bytes, write_text
from .progress import Bar

PathLike = Union[str, os.PathLike]

FORMAT = "tierkit-profile"
VERSION = 1
#: explained share of the slices' variance at which the phase count stops growing (the
#: SimPoint-style "smallest k that is nearly as good as the best")
PHASE_VARIANCE = 0.9


#: below this many point-centre-dimension cells, distances are computed exactly as sums of
#: squared differences in one array (the phase clustering's sizes); above it, blockwise with
#: BLAS as |x|^2 - 2 x.c + |c|^2, so memory and time stay bounded for thousands of points and
#: centres (tierkit.learned.lstm.group_patterns)
_EXACT_CELLS = 1 << 22
_BLOCK_ROWS = 4096


def _nearest(x: np.ndarray, xx: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Index of the nearest centre of each point."""
    n, k, d = len(x), len(c), x.shape[1]
    if n * k * d <= _EXACT_CELLS:
        return ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
    cc = (c * c).sum(1)
    out = np.empty(n, dtype=np.int64)
    step = max(1, min(_BLOCK_ROWS, _EXACT_CELLS // max(1, k)))
    for a in range(0, n, step):
        d2 = x[a:a + step] @ c.T
        d2 *= -2.0
        d2 += xx[a:a + step, None]
        d2 += cc[None]
        out[a:a + step] = d2.argmin(1)
    return out


def _sqdist_to(x: np.ndarray, xx: np.ndarray, j: int, exact: bool) -> np.ndarray:
    """Squared distance of every point to point j (exact, or with one BLAS product)."""
    if exact:
        return ((x - x[j]) ** 2).sum(-1)
    d = x @ x[j]
    d *= -2.0
    d += xx
    d += xx[j]
    np.maximum(d, 0.0, out=d)
    d[j] = 0.0
    return d


def kmeans(x: np.ndarray, k: int, seed: int, weights: Optional[np.ndarray] = None, n_init: int = 4,
           iters: int = 100) -> tuple[np.ndarray, float]:
    """Lloyd's k-means with k-means++ seeding; returns labels and the within-cluster sum of
    squares. ``weights`` (optional, positive) makes a point count as that many copies: in the
    seeding, the centres and the sum of squares. Deterministic for a given seed. An empty
    cluster keeps its centre."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    rng = np.random.default_rng(seed)
    xx = (x * x).sum(1)
    small = n * k * d <= _EXACT_CELLS
    best: tuple[np.ndarray, float] | None = None
    for _ in range(n_init):
        # k-means++: each new centre drawn with probability proportional to (weight times)
        # the squared distance to the nearest centre so far
        first = int(rng.integers(n)) if w is None else int(rng.choice(n, p=w / w.sum()))
        chosen = [first]
        d2 = _sqdist_to(x, xx, first, small)
        for _ in range(1, k):
            p = d2 if w is None else d2 * w
            tot = p.sum()
            j = int(rng.choice(n, p=p / tot)) if tot > 0 else int(rng.integers(n))
            chosen.append(j)
            np.minimum(d2, _sqdist_to(x, xx, j, small), out=d2)
        c = x[chosen].copy()
        labels = np.zeros(n, dtype=np.int64)
        for it in range(iters):
            new = _nearest(x, xx, c)
            if it and np.array_equal(new, labels):
                break
            labels = new
            if small:
                for j in range(k):
                    m = labels == j
                    if m.any():
                        c[j] = x[m].mean(0) if w is None else (w[m, None] * x[m]).sum(0) / w[m].sum()
            else:
                order = np.argsort(labels, kind="stable")
                used, starts = np.unique(labels[order], return_index=True)
                wo = np.ones(n) if w is None else w[order]
                sums = np.add.reduceat(x[order] * wo[:, None], starts, axis=0)
                c[used] = sums / np.add.reduceat(wo, starts)[:, None]
        sq = (x - c[labels]) ** 2
        sse = float(sq.sum()) if w is None else float((w * sq.sum(-1)).sum())
        if best is None or sse < best[1] - 1e-12:
            best = (labels, sse)
    assert best is not None
    return best



def cluster_phases(vectors: np.ndarray, max_phases: int, seed: int = 1) -> np.ndarray:
    """Phase of each slice: k-means over the slices' access-share vectors (one column per
    site) for k = 1..max_phases, keeping the smallest k that explains ``PHASE_VARIANCE`` of
    what the best k explains. Phases are numbered in order of first appearance; an empty
    slice keeps the phase before it."""
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    tot = vectors.sum(1, keepdims=True)
    busy = tot[:, 0] > 0
    x = np.where(tot > 0, vectors / np.where(tot > 0, tot, 1), 0.0)[busy]
    if len(x) == 0 or max_phases <= 1:
        return np.zeros(n, dtype=np.int64)
    kmax = min(max_phases, len(np.unique(x.round(12), axis=0)))
    runs = [kmeans(x, k, seed) for k in range(1, kmax + 1)]
    sse = np.array([r[1] for r in runs])
    target = sse.min() + (1 - PHASE_VARIANCE) * (sse[0] - sse.min())
    k = int(np.argmax(sse <= target + 1e-12))
    labels_busy = runs[k][0]
    labels = np.full(n, -1, dtype=np.int64)
    labels[busy] = labels_busy
    prev = labels_busy[0]
    for i in range(n):
        if labels[i] < 0:
            labels[i] = prev
        prev = labels[i]
    # renumber by first appearance
    order: dict[int, int] = {}
    for v in labels:
        order.setdefault(int(v), len(order))
    return np.array([order[int(v)] for v in labels], dtype=np.int64)


def _membership(groups: list, n_raw: int) -> np.ndarray:
    """The group of each raw site, for one depth's groups."""
    member = np.zeros(n_raw, dtype=np.int64)
    for g, grp in enumerate(groups):
        member[grp["sites"]] = g
    return member


def profile(trace: PathLike, context: Optional[int] = None, phases: int = 8, slice: Optional[str] = None,
            format: Optional[str] = None, cache: Optional[str] = None, progress: Optional[bool] = None,
            seed: int = 1) -> dict:
    """Profile a trace by allocation site; returns the profile as a dict (the file's content).

    ``context``: call-path depth of the site keys (0 = the allocation's call site alone, d =
    it and d callers: d + 1 physical frames); by default every frame the trace recorded. ``phases``: at most this many phases, found by
    clustering the slices (or given by the trace's phase markers). ``slice``: slice length
    (``50M-insn`` or a number of accesses) when the trace has no slice markers; by default
    64 equal slices."""
    if phases < 1:
        raise TierkitError(f"--phases: {phases} is not a positive number of phases")
    with Bar(f"profile {Path(trace).name}", progress) as bar:
        raw = json.loads(_core.profile_trace(os.fspath(trace), format, cache, slice, bar.callback))
    depths = raw["depths"]
    max_depth = len(depths) - 1
    if context is None:
        context = max_depth
    if context < 0:
        raise TierkitError(f"--context: {context} is not a depth (0 = the allocating function alone)")
    if context > max_depth:
        raise TierkitError(f"--context: {trace} records {max_depth + 1} frame(s) per allocation site, so the deepest "
                           f"context is {max_depth} (record with 'tierkit trace record --context N' for more)")
    if not raw["sites"]:
        raise TierkitError(f"{trace}: the trace has no allocation events: profiling by allocation site needs a trace "
                           "recorded by 'tierkit trace record' (or any trace with alloc and site records)")

    n_slices = raw["slices"]["count"]
    n_raw = len(raw["sites"])
    # slice x raw-site access counts (reads, writes); the last column is non-heap
    sc = np.array(raw["slice_counts"], dtype=np.int64).reshape(-1, 4)
    site_col = np.where(sc[:, 1] == 0xFFFFFFFF, n_raw, sc[:, 1])
    per_r = np.zeros((n_slices, n_raw + 1), dtype=np.int64)
    per_w = np.zeros((n_slices, n_raw + 1), dtype=np.int64)
    np.add.at(per_r, (sc[:, 0], site_col), sc[:, 2])
    np.add.at(per_w, (sc[:, 0], site_col), sc[:, 3])

    groups = depths[context]["groups"]
    member = _membership(groups, n_raw)
    n_g = len(groups)
    # slice x group
    gr = np.zeros((n_slices, n_g + 1), dtype=np.int64)
    gw = np.zeros((n_slices, n_g + 1), dtype=np.int64)
    cols = np.append(member, n_g)
    np.add.at(gr.T, cols, per_r.T)
    np.add.at(gw.T, cols, per_w.T)

    labels = raw["slices"]["phase_label"]
    if any(lbl is not None for lbl in labels):
        names: dict = {}
        of_slice = np.array([names.setdefault(lbl, len(names)) for lbl in labels], dtype=np.int64)
        phase_source = "markers"
    elif phases > 1 and n_slices > 1:
        of_slice = cluster_phases((gr + gw).astype(np.float64), phases, seed)
        phase_source = "kmeans"
    else:
        of_slice = np.zeros(n_slices, dtype=np.int64)
        phase_source = "single"
    n_ph = int(of_slice.max()) + 1 if n_slices else 1
    pr = np.zeros((n_ph, n_g + 1), dtype=np.int64)
    pw = np.zeros((n_ph, n_g + 1), dtype=np.int64)
    np.add.at(pr, of_slice, gr)
    np.add.at(pw, of_slice, gw)

    raw_by_id = raw["sites"]
    insn = raw["insn"]
    line = raw["line_size"]
    keyed = bool(raw.get("keyed"))
    sites = []
    for g, grp in enumerate(groups):
        members = [raw_by_id[i] for i in grp["sites"]]
        reads = int(pr[:, g].sum())
        writes = int(pw[:, g].sum())
        peak = int(grp["peak_bytes"])
        acc = reads + writes
        sites.append({
            **({"key": grp["keys"]} if keyed else {}),
            "frames": grp["frames"],
            "peak_bytes": peak,
            "allocs": int(sum(m["allocs"] for m in members)),
            "bytes_allocated": int(sum(m["bytes_allocated"] for m in members)),
            "reads": reads,
            "writes": writes,
            "accesses_per_byte": acc / peak if peak else (float("inf") if acc else 0.0),
            "bytes_per_kinsn": acc * line * 1000 / insn if insn else None,
            "raw_sites": len(members),
            "phase_reads": [int(v) for v in pr[:, g]],
            "phase_writes": [int(v) for v in pw[:, g]],
        })
    # the key breaks ties between sites that display alike (a stripped program's)
    sites.sort(key=lambda s: (-(s["reads"] + s["writes"]), s["frames"], s.get("key", [])))
    nonheap = {"reads": int(pr[:, n_g].sum()), "writes": int(pw[:, n_g].sum()),
               "phase_reads": [int(v) for v in pr[:, n_g]], "phase_writes": [int(v) for v in pw[:, n_g]]}

    # 002 Fig. 2: cumulative capacity against cumulative traffic, sites by hotness, per depth
    curves = {}
    raw_acc = np.array([s["reads"] + s["writes"] for s in raw_by_id], dtype=np.float64)
    for d in range(context + 1):
        gd = depths[d]["groups"]
        g_acc = np.zeros(len(gd), dtype=np.float64)
        np.add.at(g_acc, _membership(gd, n_raw), raw_acc)
        cap = np.array([grp["peak_bytes"] for grp in gd], dtype=np.float64)
        dens = np.where(cap > 0, g_acc / np.maximum(cap, 1), np.where(g_acc > 0, np.inf, 0))
        by_heat = np.lexsort((np.arange(len(gd)), -g_acc, -dens))
        tc, ta = cap.sum(), g_acc.sum()
        curves[str(d)] = {
            "sites": len(gd),
            "capacity": [round(float(v), 6) for v in (np.cumsum(cap[by_heat]) / tc if tc else np.zeros(len(gd)))],
            "accesses": [round(float(v), 6) for v in (np.cumsum(g_acc[by_heat]) / ta if ta else np.zeros(len(gd)))],
        }

    return {
        "format": FORMAT,
        "version": VERSION,
        "trace": {"path": os.fspath(trace), "digest": raw["digest"], "program": raw["program"], "args": raw["args"],
                  "page_size": raw["page_size"], "line_size": line, "post_cache": raw["post_cache"]},
        "context": context,
        "max_context": max_depth,
        # sites carry "key", their frame keys (context + 1 of them at most), and group by them
        "site_keys": keyed,
        "totals": {
            "accesses": raw["accesses"], "reads": raw["reads"], "writes": raw["writes"], "insn": insn,
            "heap_accesses": raw["heap_reads"] + raw["heap_writes"],
            "nonheap_accesses": raw["nonheap_reads"] + raw["nonheap_writes"],
            # of the heap accesses: to memory a freed block last held (written back after the
            # free), and post-cache lines holding the start of an allocation (docs/guidance.md)
            "freed_accesses": raw["freed_accesses"],
            "lines_by_next_allocation": raw["lines_by_next_allocation"],
            "peak_live_bytes": raw["peak_live_bytes"],
            "raw_sites": n_raw,
            "unmatched_frees": raw["unmatched_frees"],
            "overlapping_allocs": raw["overlapping_allocs"],
            "alloc_calls": raw["alloc_calls"],
        },
        "slices": {"source": raw["slices"]["source"], "count": n_slices, "length": raw["slices"]["length"],
                   "start_insn": raw["slices"]["start_insn"], "start_access": raw["slices"]["start_access"],
                   # where the run's allocation calls fall: the phase markers of per-phase
                   # guidance (docs/guidance.md, "Phase markers")
                   "start_allocs": raw["slices"]["start_allocs"],
                   "first_alloc_insn": raw["slices"]["first_alloc_insn"],
                   "last_alloc_insn": raw["slices"]["last_alloc_insn"]},
        "phases": {"source": phase_source, "count": n_ph, "of_slice": [int(v) for v in of_slice]},
        "sites": sites,
        "nonheap": nonheap,
        "curves": curves,
    }


def sites_frame(p: dict):
    """The profile's sites as a DataFrame, hottest first (``site`` is the innermost frame, with
    its caller where it says little; frames as ``guidance.site_frames`` shows them: a stripped
    program's by their frame keys)."""
    import pandas as pd

    rows = []
    tot = max(1, p["totals"]["accesses"])
    for s in p["sites"]:
        acc = s["reads"] + s["writes"]
        rows.append({"site": site_label(s), "callers": " < ".join(site_frames(s)[1:]),
                     **({"key": s["key"][0] if s["key"] else ""} if "key" in s else {}),
                     "peak_bytes": s["peak_bytes"], "reads": s["reads"], "writes": s["writes"],
                     "accesses_pct": 100 * acc / tot, "accesses_per_byte": s["accesses_per_byte"],
                     "bytes_per_kinsn": s["bytes_per_kinsn"], "allocs": s["allocs"]})
    return pd.DataFrame(rows)


def write(p: dict, path: PathLike, force: bool = False) -> None:
    write_text(path, json.dumps(p, indent=1) + "\n", force)


def plot(p: dict, path: PathLike, force: bool = False) -> None:
    """002 Fig. 2: cumulative capacity (x) against cumulative accesses (y) of the sites in
    order of hotness, one line per call-path depth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_new_file(path, force)
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for d, c in sorted(p["curves"].items(), key=lambda kv: int(kv[0])):
        x = [0.0] + c["capacity"]
        y = [0.0] + c["accesses"]
        ax.plot(x, y, marker="o", markersize=3, label=f"depth {d} ({c['sites']} sites)")
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("cumulative capacity (share of the sites' peak bytes)")
    ax.set_ylabel("cumulative post-cache accesses (share)")
    prog = p["trace"].get("program") or p["trace"]["path"]
    ax.set_title(f"sites by hotness: {Path(str(prog)).name}", fontsize=10)
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, metadata={"Software": None})
    plt.close(fig)
    write_bytes(path, buf.getvalue(), force)


def load(path: PathLike) -> dict[str, Any]:
    """Read a profile file (checked by :func:`tierkit.guidance.read_profile`)."""
    from .guidance import read_profile

    return read_profile(path)
