"""Profile-guided placement by allocation site (``tierkit guide``; 000 §3.1–3.2, 002 §III-A).

A profile (``tierkit profile``) lists the program's allocation sites with their capacity
(peak live bytes) and post-cache accesses. A *strategy* picks the sites that go to the fast
tier under a capacity; the picks become a *guidance file* of arenas (groups of sites that
always share a tier) which a guided run (``guided:guidance=FILE``) applies at each
allocation. The rules, the file format and the matching of sites are in
``docs/guidance.md``.

Everything here is plain numpy: the module needs no compiled extension.
"""
from __future__ import annotations

import json
import os
import re
from bisect import bisect_right
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import untrusted

try:  # the command line prints a TierkitError as one line; stay usable without the extension
    from ._core import TierkitError as _ErrorBase
except ImportError:  # pragma: no cover - only when the compiled extension is missing
    _ErrorBase = Exception  # type: ignore[misc, assignment]

PathLike = Union[str, os.PathLike]
Capacity = Union[int, float, str]
Strategy = Callable[[np.ndarray, np.ndarray, int], np.ndarray]

FORMAT = "tierkit-guidance"
#: the version written for profiles with frame keys (docs/guidance.md); a profile without them (an
#: imported trace, or one recorded before keys) gives version 1, keyed by display frames
VERSION = 2
VERSIONS = (1, 2)
#: a frame key: `build-id:HEX+0xOFFSET` or `file:NAME+0xOFFSET` (crates/tierkit-core/src/sitekey.rs)
FRAME_KEY = re.compile(r"^(build-id:[0-9a-f]+|file:[^/]+)\+0x[0-9a-f]{1,16}$")
#: The largest guidance file tierkit run --guidance and the preloaded allocator read (their
#: MAX_GUIDANCE_BYTES; docs/guidance.md)
MAX_GUIDANCE_BYTES = 16 << 20
PROFILE_FORMAT = "tierkit-profile"
PROFILE_VERSION = 1
DEFAULT_TIERS = ("fast", "slow")
DEFAULT_GRANULARITY = 4096
#: DP cells (sites x capacity units) above which knapsack coarsens its granularity: the take
#: bitmap then stays under ~250 MB and the run under a few tens of seconds
MAX_KNAPSACK_CELLS = 2_000_000_000


class GuidanceError(_ErrorBase, ValueError):
    """An impossible option or a malformed profile/guidance file; the message is one line
    naming the file (or option) and the key."""


# ------------------------------------------------------------------ how sites are shown

#: a display frame that names no function: Valgrind's ``??? (in /usr/bin/sort)`` (a stripped
#: program or library), or ``???`` (an address in no known object)
_UNNAMED_FRAME = re.compile(r"^\?\?\?(?: \(in (.+)\))?$")


def frame_label(frame: str, key: Optional[str] = None) -> str:
    """How tierkit shows one frame of a site to people (docs/guidance.md, "Site keys"): its
    display frame, except where that names no function (``??? (in OBJECT)``: a stripped
    program), which would show every site of the object alike; there the frame's key tells
    them apart, as ``OBJECTNAME+0xOFFSET`` (the object's file name without its directory, the
    key's offset). A bare ``???`` is shown as its key. Frames without a key (version-1
    guidance, an imported trace) are shown as they are."""
    m = _UNNAMED_FRAME.match(frame)
    if m is None or key is None or not FRAME_KEY.match(key):
        return frame
    if m.group(1) is None:
        return key
    obj = m.group(1).rstrip("/")
    return f"{obj.rsplit('/', 1)[-1] or obj}+0x{key.rsplit('+0x', 1)[1]}"


def site_frames(site: dict) -> list[str]:
    """A profile's or guidance file's site as shown: each display frame (``frames``) through
    ``frame_label`` with its frame key (``key``, one per frame where the site has keys)."""
    frames = list(site.get("frames") or [])
    keys = site.get("key") or []
    return [frame_label(f, keys[i] if i < len(keys) else None) for i, f in enumerate(frames)]


def site_label(site: dict) -> str:
    """A site in one line, as tables and listings show it: its innermost frame (``site_frames``),
    and the first caller when the innermost frame alone says little (an allocation wrapper, a
    short label, or a frame without a name or key)."""
    frames = site_frames(site)
    if not frames:
        return "?"
    head = frames[0]
    if len(frames) > 1 and (head.startswith("???") or len(head) < 12):
        head += " < " + frames[1]
    return head if len(head) <= 80 else head[:77] + "..."


# ------------------------------------------------------------------------------ strategies


def _arrays(sizes: Any, values: Any, capacity: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """Checked int64 copies, so every strategy fails the same way on bad input."""
    s = np.asarray(sizes)
    v = np.asarray(values)
    if s.ndim != 1 or v.ndim != 1 or len(s) != len(v):
        raise GuidanceError(f"sizes, values: need two 1-D arrays of one length (got shapes {s.shape} and {v.shape})")
    for name, a in (("sizes", s), ("values", v)):
        if len(a) and not np.issubdtype(a.dtype, np.integer):
            if not (np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and np.all(a == np.floor(a))):
                raise GuidanceError(f"{name}: need whole numbers (got dtype {a.dtype})")
        if len(a) and a.min() < 0:
            raise GuidanceError(f"{name}: {a.min()} is negative")
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
        raise GuidanceError(f"capacity: {capacity!r} is not a whole number of bytes")
    if capacity < 0:
        raise GuidanceError(f"capacity: {capacity} bytes is negative")
    return s.astype(np.int64), v.astype(np.int64), int(capacity)


def density_order(sizes: Any, values: Any) -> np.ndarray:
    """Site indices hottest first: accesses per byte descending (a 0-byte site with accesses
    is infinitely dense, one without has density 0), then accesses descending, then index.
    Every strategy walks this order, which makes ties deterministic."""
    s = np.asarray(sizes, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(s > 0, v / np.where(s > 0, s, 1.0), np.where(v > 0, np.inf, 0.0))
    return np.lexsort((np.arange(len(s)), -v, -dens))


def hotset(sizes: Any, values: Any, capacity: int) -> np.ndarray:
    """000 §3.1 / 002 §III-A hotset: sites in density order until their total size first
    reaches or exceeds ``capacity`` (the site that crosses it is taken: a soft limit, so a
    very hot site too big for the tier still gets part of it). Sites without accesses are
    never taken. Returns the mask of selected sites."""
    s, v, cap = _arrays(sizes, values, capacity)
    order = density_order(s, v)
    before = np.cumsum(s[order]) - s[order]  # bytes taken before each site
    take = (before < cap) & (v[order] > 0)
    mask = np.zeros(len(s), dtype=bool)
    mask[order[take]] = True
    return mask


def knapsack_select(sizes: Any, values: Any, capacity: int, granularity: int = DEFAULT_GRANULARITY,
                    max_cells: int = MAX_KNAPSACK_CELLS) -> tuple[np.ndarray, int]:
    """000 §3.1 knapsack, exact 0/1: the sites of greatest total accesses whose total size
    fits in ``capacity``. Sizes are rounded up to whole ``granularity`` units (arenas are
    page-aligned) and the capacity down. When sites x units would exceed ``max_cells`` the
    granularity doubles until it fits. Returns (mask, granularity actually used).

    Among equally valuable selections the one found first in density order wins: a site
    replaces the best choice without it only when strictly better."""
    s, v, cap = _arrays(sizes, values, capacity)
    if isinstance(granularity, bool) or not isinstance(granularity, (int, np.integer)) or granularity < 1:
        raise GuidanceError(f"--granularity: {granularity!r} is not a positive number of bytes")
    g = int(granularity)
    mask = np.zeros(len(s), dtype=bool)
    mask[(v > 0) & (s == 0)] = True  # take no room
    cand = (v > 0) & (s > 0) & (s <= cap)
    order = density_order(s, v)
    order = order[cand[order]]
    while True:
        units = -(-s[order] // g)
        cap_u = cap // g
        ok = units <= cap_u
        items, w = order[ok], units[ok]
        if int(w.sum()) <= cap_u:  # everything fits: no DP needed
            mask[items] = True
            return mask, g
        if len(items) * (cap_u + 1) <= max_cells:
            break
        g *= 2
    vals = v[items]
    if int(vals.sum()) >= 2**62:
        raise GuidanceError("values: total accesses exceed what the knapsack can add up exactly (2**62)")
    width = cap_u + 1
    best = np.zeros(width, dtype=np.int64)  # best[c]: greatest value within c units
    taken: list[np.ndarray] = []  # per item: packed bits of "taken at capacity w..cap_u"
    for wi, vi in zip(w.tolist(), vals.tolist()):
        with_it = best[: width - wi] + vi
        better = with_it > best[wi:]
        np.maximum(best[wi:], with_it, out=best[wi:])
        taken.append(np.packbits(better))
    c = cap_u
    for j in range(len(items) - 1, -1, -1):
        wi = int(w[j])
        if c >= wi:
            k = c - wi
            if (taken[j][k >> 3] >> (7 - (k & 7))) & 1:
                mask[items[j]] = True
                c -= wi
    return mask, g


def knapsack(sizes: Any, values: Any, capacity: int, granularity: int = DEFAULT_GRANULARITY) -> np.ndarray:
    """The knapsack mask alone (see :func:`knapsack_select` for the granularity used)."""
    return knapsack_select(sizes, values, capacity, granularity)[0]


def thermos(sizes: Any, values: Any, capacity: int) -> np.ndarray:
    """002 §III-A thermos: hotset that admits a site past the capacity only when the
    accesses it brings exceed those of the hottest data it could displace, so lukewarm
    sites cannot crowd out hot ones. Formal rule (docs/guidance.md): walking sites in
    density order with ``used`` bytes selected, a site of w bytes and v accesses is taken
    if it fits; otherwise with d = min(used, used + w - capacity) it is taken iff
    v * min(w, capacity) / w > (accesses of the hottest d selected bytes, pro-rata)."""
    s, v, cap = _arrays(sizes, values, capacity)
    mask = np.zeros(len(s), dtype=bool)
    used = 0
    sel_w: list[int] = []  # selected sites, densest first (the walk's order)
    sel_v: list[int] = []
    cum_w = [0]  # prefix sums over the selected sites
    cum_v = [0]
    for i in density_order(s, v).tolist():
        w, val = int(s[i]), int(v[i])
        if val == 0:
            continue
        if used + w > cap:
            d = min(used, used + w - cap)
            k = bisect_right(cum_w, d) - 1  # whole selected sites inside d bytes
            r = d - cum_w[k]
            nw, nv = (sel_w[k], sel_v[k]) if k < len(sel_w) else (1, 0)
            # contributed = val*min(w,cap)/w (all of it for w = 0); displaced = cum_v[k] + r*nv/nw;
            # compared exactly by cross-multiplying
            if w > 0:
                lhs, rhs = val * min(w, cap) * nw, (cum_v[k] * nw + r * nv) * w
            else:
                lhs, rhs = val * nw, cum_v[k] * nw + r * nv
            if not lhs > rhs:
                continue
        mask[i] = True
        used += w
        sel_w.append(w)
        sel_v.append(val)
        cum_w.append(cum_w[-1] + w)
        cum_v.append(cum_v[-1] + val)
    return mask


STRATEGIES: dict[str, Strategy] = {"hotset": hotset, "knapsack": knapsack, "thermos": thermos}


def _strategy(strategy: Union[str, Strategy], granularity: int, used: list[int]) -> Strategy:
    if callable(strategy):
        return strategy
    if strategy == "knapsack":
        def run(s: np.ndarray, v: np.ndarray, c: int) -> np.ndarray:
            m, g = knapsack_select(s, v, c, granularity)
            used.append(g)
            return m
        return run
    if strategy not in STRATEGIES:
        raise GuidanceError(f"--strategy: '{strategy}' is not one of {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[strategy]


def _assign(sizes: Any, values: Any, capacities: Sequence[int], strategy: Union[str, Strategy],
            granularity: int, used: list[int]) -> np.ndarray:
    fn = _strategy(strategy, granularity, used)
    s = np.asarray(sizes, dtype=np.int64)
    v = np.asarray(values, dtype=np.int64)
    tier = np.full(len(s), len(capacities), dtype=np.int64)
    left = np.arange(len(s))
    for t, cap in enumerate(capacities):
        if len(left) == 0:
            break
        m = np.asarray(fn(s[left], v[left], int(cap)), dtype=bool)
        tier[left[m]] = t
        left = left[~m]
    return tier


def assign_tiers(sizes: Any, values: Any, capacities: Sequence[int], strategy: Union[str, Strategy],
                 granularity: int = DEFAULT_GRANULARITY) -> np.ndarray:
    """Tier of each site (0 = fastest; ``len(capacities)`` = the last, unbounded tier): the
    strategy fills tier 0 from all sites, then tier 1 from the sites left, and so on; what
    is left goes to the last tier. ``strategy`` is a name (hotset, knapsack, thermos) or a
    function (sizes, values, capacity) -> mask."""
    return _assign(sizes, values, capacities, strategy, granularity, [])


# ---------------------------------------------------------------------- capacity options

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
_NUMBER = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE]-?[0-9]+)?|\.[0-9]+)\s*([A-Za-z%]*)\s*$")


def parse_capacity(text: Capacity, key: str = "--capacity") -> Union[int, float]:
    """A capacity as users write it, in the convention of the rest of tierkit: a number in
    (0, 1] or a percentage is a fraction of the footprint (float); a size with a unit
    (``512M``, ``1GiB``, binary multiples) is bytes (int). A Python int is bytes, a float a
    fraction."""
    if isinstance(text, bool):
        raise GuidanceError(f"{key}: {text!r} is not a capacity")
    if isinstance(text, (int, np.integer)):
        if text <= 0:
            raise GuidanceError(f"{key}: {text} bytes cannot work: a capacity must be positive")
        return int(text)
    if isinstance(text, (float, np.floating)):
        if not (0 < text <= 1):
            raise GuidanceError(f"{key}: {text} is not a fraction of the footprint in (0, 1] "
                                "(give bytes as an int or a size such as 512M)")
        return float(text)
    if not isinstance(text, str):
        raise GuidanceError(f"{key}: {text!r} is not a capacity")
    m = _NUMBER.match(text)
    if not m:
        raise GuidanceError(f"{key}: '{text}' is not a capacity (examples: 0.125, 12.5%, 512M)")
    num, unit = float(m.group(1).replace("_", "")), m.group(2)
    if unit == "%":
        if not (0 < num <= 100):
            raise GuidanceError(f"{key}: '{text}': a percentage of the footprint must be in (0%, 100%]")
        return num / 100
    if unit == "":
        if not (0 < num <= 1):
            raise GuidanceError(f"{key}: '{text}' cannot work: give a fraction of the footprint in (0, 1] "
                                "(e.g. 0.125) or a size with a unit (e.g. 512M)")
        return num
    mult = _UNITS.get(unit.lower())
    if mult is None:
        raise GuidanceError(f"{key}: '{text}' is not a capacity (examples: 0.125, 12.5%, 512M)")
    b = round(num * mult)
    if b <= 0:
        raise GuidanceError(f"{key}: '{text}': a capacity of 0 bytes cannot work")
    return int(b)


def _capacities(capacity: Any, n_tiers: int, footprint: int) -> tuple[list[int], list[Optional[float]]]:
    caps = list(capacity) if isinstance(capacity, (list, tuple)) else [capacity]
    if len(caps) != n_tiers - 1:
        raise GuidanceError(f"--capacity: {len(caps)} capacit{'y' if len(caps) == 1 else 'ies'} for {n_tiers} tiers "
                            f"(give one per tier but the last, which is unbounded: {n_tiers - 1})")
    out_b: list[int] = []
    out_f: list[Optional[float]] = []
    for c in caps:
        p = parse_capacity(c)
        if isinstance(p, float):
            out_f.append(p)
            out_b.append(int(p * footprint))  # floor, as tier capacities are resolved elsewhere
        else:
            out_f.append(None)
            out_b.append(p)
    return out_b, out_f


# ------------------------------------------------------------------------ file checking


#: Largest count or size (bytes, accesses) a profile or guidance file may hold: 2**48 (256 TiB,
#: 2.8e14 accesses), so that the strategies' int64 sums over up to 2**15 sites cannot overflow.
MAX_COUNT = 2**48


class _Check(untrusted.Check):
    """The reader of guidance and profile files (docs/guidance.md): the typed access of every
    untrusted file (``SOURCE: KEY: what is wrong``, one line), as a GuidanceError, with counts
    bounded by MAX_COUNT; and the checks of sites, frame keys and call paths."""

    error = GuidanceError
    max_count = MAX_COUNT

    def counts(self, obj: dict, key: str, where: str, n: Optional[int] = None) -> list[int]:
        xs = self.get(obj, key, where, "list")
        path = f"{where}.{key}" if where else key
        for i, x in enumerate(xs):
            self.value(x, f"{path}[{i}]", "count")
        if n is not None and len(xs) != n:
            raise self.fail(path, f"{len(xs)} entries, expected {n}")
        return xs

    def sites(self, d: dict, ctx: int, keyed: bool = False, key_len: Optional[int] = None):
        """``(where, site)`` for each entry of ``d["sites"]``, checking that each is an
        object with a call path of at most ``ctx + 1`` frames, unique in the list; with
        ``keyed``, that each has a ``key`` of 1 to ``key_len`` frame keys (default ``ctx +
        1``), unique instead (display frames may repeat: a stripped program's do)."""
        seen: dict[tuple, int] = {}
        for i, s in enumerate(self.get(d, "sites", "", "list")):
            w = f"sites[{i}]"
            self.value(s, w, "dict")
            frames = tuple(self.frames(s, w, ctx + 1 if not keyed else 1 << 30))
            if keyed:
                key = tuple(self.keys(s, w, ctx + 1 if key_len is None else key_len))
                what = f"{w}.key", "same frame keys"
            else:
                key, what = frames, (f"{w}.frames", "same call path")
            if key in seen:
                raise self.fail(what[0], f"{what[1]} as sites[{seen[key]}]")
            seen[key] = i
            yield w, s

    def keys(self, obj: dict, where: str, max_len: int) -> list[str]:
        ks = self.get(obj, "key", where, "list")
        if not ks:
            raise self.fail(f"{where}.key", "empty: a site key has at least one frame")
        for j, k in enumerate(ks):
            self.value(k, f"{where}.key[{j}]", "str")
            if not FRAME_KEY.match(k):
                raise self.fail(f"{where}.key[{j}]", f"{_short(k)} is not a frame key (build-id:HEX+0xOFFSET or file:NAME+0xOFFSET)")
        if len(ks) > max_len:
            raise self.fail(f"{where}.key", f"{len(ks)} frames, but the context keys sites by at most {max_len}")
        return ks

    def frames(self, obj: dict, where: str, max_len: int) -> list[str]:
        fr = self.get(obj, "frames", where, "list")
        for j, f in enumerate(fr):
            self.value(f, f"{where}.frames[{j}]", "str")
        if len(fr) > max_len:
            raise self.fail(f"{where}.frames", f"{len(fr)} frames, but context {max_len - 1} keys sites by at most {max_len}")
        return fr


def _short(x: Any) -> str:
    t = json.dumps(x) if isinstance(x, (dict, list, str, int, float, bool)) or x is None else repr(x)
    return t if len(t) <= 40 else t[:37] + "..."


def _format(c: _Check, d: Any, fmt: str, version: Union[int, Sequence[int]]) -> int:
    if not isinstance(d, dict):
        raise c.fail("format", f"the file holds {type(d).__name__}, not a {fmt} object")
    f = c.get(d, "format", "", "str")
    if f != fmt:
        raise c.fail("format", f"'{f}' is not '{fmt}'")
    v = c.get(d, "version", "", "int")
    ok = (version,) if isinstance(version, int) else tuple(version)
    if v not in ok:
        which = f"version {ok[0]}" if len(ok) == 1 else "versions " + " and ".join(map(str, ok))
        raise c.fail("version", f"{v} is not supported (this tierkit reads {which})")
    return v


def check_profile(p: Any, source: str = "profile") -> dict:
    """Check the fields of a profile that guidance uses; raise :class:`GuidanceError`
    naming ``source`` and the key. Returns the profile."""
    c = _Check(source)
    _format(c, p, PROFILE_FORMAT, PROFILE_VERSION)
    tr = c.get(p, "trace", "", "dict")
    c.get(tr, "path", "trace", "str")
    c.get(tr, "digest", "trace", "str", nullable=True)
    c.get(tr, "program", "trace", "str", nullable=True)
    for i, a in enumerate(c.get(tr, "args", "trace", "list")):
        c.value(a, f"trace.args[{i}]", "str")
    for k in ("page_size", "line_size"):
        c.get(tr, k, "trace", "count")
    ctx = c.get(p, "context", "", "count")
    keyed = p.get("site_keys", False)
    if not isinstance(keyed, bool):
        raise c.fail("site_keys", f"{_short(keyed)} is not true or false")
    tot = c.get(p, "totals", "", "dict")
    for k in ("accesses", "reads", "writes", "heap_accesses", "peak_live_bytes"):
        c.get(tot, k, "totals", "count")
    sl = c.get(p, "slices", "", "dict")
    c.get(sl, "source", "slices", "str")
    n_slices = c.get(sl, "count", "slices", "count")
    c.get(sl, "length", "slices", "count")
    ph = c.get(p, "phases", "", "dict")
    c.get(ph, "source", "phases", "str")
    n_ph = c.get(ph, "count", "phases", "count")
    if n_ph < 1:
        raise c.fail("phases.count", "0: a profile has at least one phase")
    of = c.counts(ph, "of_slice", "phases", n_slices)
    bad = [x for x in of if x >= n_ph]
    if bad:
        raise c.fail("phases.of_slice", f"phase {bad[0]} of a profile with {n_ph} phase(s)")
    # what the phase markers are made from (phase_markers), where the profile has them
    for k in ("insn", "alloc_calls"):
        if k in tot:
            c.get(tot, k, "totals", "count", nullable=True)
    if "start_allocs" in sl:
        c.counts(sl, "start_insn", "slices", n_slices)
        sa = c.counts(sl, "start_allocs", "slices", n_slices)
        if any(b < a for a, b in zip(sa, sa[1:])):
            raise c.fail("slices.start_allocs", "decreases: it counts the allocation calls before each slice")
        for k in ("first_alloc_insn", "last_alloc_insn"):
            xs = c.get(sl, k, "slices", "list")
            if len(xs) != n_slices:
                raise c.fail(f"slices.{k}", f"{len(xs)} entries, expected {n_slices}")
            for i, x in enumerate(xs):
                c.value(x, f"slices.{k}[{i}]", "count", nullable=True)
    for w, s in c.sites(p, ctx, keyed):
        for k in ("peak_bytes", "allocs", "bytes_allocated", "reads", "writes"):
            c.get(s, k, w, "count")
        c.counts(s, "phase_reads", w, n_ph)
        c.counts(s, "phase_writes", w, n_ph)
    nh = c.get(p, "nonheap", "", "dict")
    for k in ("reads", "writes"):
        c.get(nh, k, "nonheap", "count")
    c.counts(nh, "phase_reads", "nonheap", n_ph)
    c.counts(nh, "phase_writes", "nonheap", n_ph)
    return p


def check_guidance(g: Any, source: str = "guidance") -> dict:
    """Check a guidance dict field by field (docs/guidance.md); raise
    :class:`GuidanceError` naming ``source`` and the key. Returns the guidance."""
    c = _Check(source)
    version = _format(c, g, FORMAT, VERSIONS)
    strat = c.get(g, "strategy", "", "str")
    if strat not in STRATEGIES:
        raise c.fail("strategy", f"'{strat}' is not one of {', '.join(sorted(STRATEGIES))}")
    mode = c.get(g, "mode", "", "str")
    if mode not in ("static", "per-phase"):
        raise c.fail("mode", f"'{mode}' is not static or per-phase")
    tiers = c.get(g, "tiers", "", "list")
    for i, t in enumerate(tiers):
        c.value(t, f"tiers[{i}]", "str")
    if len(tiers) < 2:
        raise c.fail("tiers", "a guidance file names at least two tiers")
    nt = len(tiers)
    c.counts(g, "capacity_bytes", "", nt - 1)
    fr = c.get(g, "capacity_fraction", "", "list")
    if len(fr) != nt - 1:
        raise c.fail("capacity_fraction", f"{len(fr)} entries, expected {nt - 1}")
    for i, f in enumerate(fr):
        c.value(f, f"capacity_fraction[{i}]", "number", nullable=True)
        if f is not None and not 0 < f <= 1:
            raise c.fail(f"capacity_fraction[{i}]", f"{f} is not in (0, 1]")
    gran = c.get(g, "granularity_bytes", "", "int", nullable=True)
    if gran is not None and gran < 1:
        raise c.fail("granularity_bytes", f"{gran} is not a positive number of bytes")
    ctx = c.get(g, "context", "", "count")
    if version >= 2 and ctx < 1:
        raise c.fail("context", "0: version-2 guidance keys sites by at least one frame")
    c.get(g, "unmatched", "", "str")
    pr = c.get(g, "profile", "", "dict")
    c.get(pr, "trace_path", "profile", "str")
    c.get(pr, "trace_digest", "profile", "str", nullable=True)
    c.get(pr, "program", "profile", "str", nullable=True)
    c.get(pr, "args", "profile", "list")
    c.get(pr, "footprint_bytes", "profile", "count")
    ph = c.get(g, "phases", "", "dict")
    n_ph = c.get(ph, "count", "phases", "count")
    if n_ph < 1:
        raise c.fail("phases.count", "0: guidance has at least one phase")
    if mode == "static" and n_ph != 1:
        raise c.fail("phases.count", f"{n_ph}: static guidance has one phase")
    c.get(ph, "slice_source", "phases", "str", nullable=True)
    length = c.get(ph, "slice_length", "phases", "count")
    if "made_from" in ph:
        mf = c.get(ph, "made_from", "phases", "dict")
        c.get(mf, "trace_digest", "phases.made_from", "str", nullable=True)
        for k in ("insn", "accesses"):
            c.get(mf, k, "phases.made_from", "count", nullable=True)
    of = c.counts(ph, "of_slice", "phases")
    bad = [x for x in of if x >= n_ph]
    if bad:
        raise c.fail("phases.of_slice", f"phase {bad[0]} of {n_ph}")
    if mode == "per-phase":
        if not of:
            raise c.fail("phases.of_slice", "empty: per-phase guidance needs the phase of each slice")
        if length == 0:
            raise c.fail("phases.slice_length", "0: per-phase guidance needs the slice length")
    if "markers" in ph:
        prev = (-1, 1)
        for i, m in enumerate(c.get(ph, "markers", "phases", "list")):
            w = f"phases.markers[{i}]"
            c.value(m, w, "dict")
            if c.get(m, "phase", w, "count") >= n_ph:
                raise c.fail(f"{w}.phase", f"{m['phase']} is not a phase (0..{n_ph - 1})")
            c.get(m, "slice", w, "count")
            at = c.get(m, "alloc", w, "count", nullable=True)
            side = c.get(m, "side", w, "str", nullable=True)
            if at is not None:
                if side not in ("before", "after"):
                    raise c.fail(f"{w}.side", f"{side!r} is not \"before\" or \"after\"")
                pos = (at, 0 if side == "before" else 1)
                if pos < prev:
                    raise c.fail(f"{w}.alloc", f"{at} ({side}) comes before the marker ahead of it")
                prev = pos
    arenas = c.get(g, "arenas", "", "list")
    for i, a in enumerate(arenas):
        w = f"arenas[{i}]"
        c.value(a, w, "dict")
        if c.get(a, "id", w, "int") != i:
            raise c.fail(f"{w}.id", f"{a['id']} is not its position {i}")
        ts = c.counts(a, "tiers", w, n_ph)
        bad = [t for t in ts if t >= nt]
        if bad:
            raise c.fail(f"{w}.tiers", f"tier {bad[0]} is not one of the {nt} tiers")
    # version 1: context + 1 display frames; version 2: context frame keys
    for w, s in c.sites(g, ctx, keyed=version >= 2, key_len=ctx):
        a = c.get(s, "arena", w, "count")
        if a >= len(arenas):
            raise c.fail(f"{w}.arena", f"{a} is not an arena id (0..{len(arenas) - 1})")
        t = c.get(s, "tier", w, "count")
        if t != arenas[a]["tiers"][0]:
            raise c.fail(f"{w}.tier", f"{t} differs from the tier of arena {a} in phase 0 ({arenas[a]['tiers'][0]})")
        if "bits" in s:
            b = c.value(s["bits"], f"{w}.bits", "str")
            want = "".join("1" if x == 0 else "0" for x in arenas[a]["tiers"])
            if b != want:
                raise c.fail(f"{w}.bits", f"'{b}' does not match arena {a} ('{want}')")
        c.get(s, "peak_bytes", w, "count")
        c.get(s, "accesses", w, "count")
        c.get(s, "accesses_per_byte", w, "number", nullable=True)
        if "phase_accesses" in s:
            c.counts(s, "phase_accesses", w, n_ph)
    return g


def _load_json(path: PathLike) -> Any:
    """A profile or guidance file, read as untrusted (docs/security.md): a regular file of at
    most ``untrusted.MAX_PROFILE_BYTES``, UTF-8, JSON nested at most ``untrusted.MAX_DEPTH``."""

    try:
        return untrusted.read_json(path, "profile or guidance file", untrusted.MAX_PROFILE_BYTES)
    except _ErrorBase as e:
        raise GuidanceError(str(e)) from None


def read_profile(path: PathLike) -> dict:
    """Load and check a profile file (``tierkit profile``)."""
    return check_profile(_load_json(path), os.fspath(path))


def read_guidance(path: PathLike) -> dict:
    """Load and check a guidance file (``tierkit guide``)."""
    return check_guidance(_load_json(path), os.fspath(path))


def dumps(g: dict) -> str:
    """The file's text: stable (the same guidance gives the same bytes), one key per line
    and one arena or site per line (readable, and diffs show which sites moved), strict
    JSON (no NaN or Infinity, which the Rust reader rejects)."""
    def one(x: Any) -> str:
        return json.dumps(x, allow_nan=False, ensure_ascii=False)

    parts = []
    for k, v in g.items():
        if isinstance(v, list) and v and all(isinstance(e, dict) for e in v):
            body = ",\n  ".join(one(e) for e in v)
            parts.append(f" {one(k)}: [\n  {body}\n ]")
        else:
            parts.append(f" {one(k)}: {one(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_guidance(g: dict, path: PathLike, force: bool = False) -> None:
    """Write guidance as JSON; an existing file is kept unless ``force``."""
    from .output import write_text

    text = dumps(g)
    try:
        write_text(path, text, force)  # whole or not at all
    except _ErrorBase as e:
        raise GuidanceError(str(e)) from None


# ------------------------------------------------------------------------------ guidance


def _per_byte(acc: int, peak: int) -> Optional[float]:
    # JSON has no Infinity: a 0-byte site with accesses has no finite density
    return acc / peak if peak else (None if acc else 0.0)


def make_guidance(profile: dict, strategy: str, capacity: Union[Capacity, Sequence[Capacity]],
                  tiers: Optional[Sequence[str]] = None, per_phase: bool = False,
                  granularity: int = DEFAULT_GRANULARITY) -> dict:
    """Guidance from a profile: the strategy picks the sites of each tier but the last
    (static), or does so for every phase on that phase's accesses (``per_phase``, 000 §3.2)
    and sites with the same tier in every phase share an arena.

    ``capacity``: one per tier but the last; a float in (0, 1] is a fraction of the
    profile's footprint (``totals.peak_live_bytes``, D of 000 §3.1), an int is bytes, a
    string is parsed like the command line's (``0.125``, ``12.5%``, ``512M``)."""
    check_profile(profile)
    if strategy not in STRATEGIES:
        raise GuidanceError(f"--strategy: '{strategy}' is not one of {', '.join(sorted(STRATEGIES))}")
    tiers = list(DEFAULT_TIERS if tiers is None else tiers)
    if len(tiers) < 2:
        raise GuidanceError(f"--tiers: {len(tiers)} tier(s): guidance places sites in at least two tiers")
    for t in tiers:
        if not isinstance(t, str) or not t:
            raise GuidanceError(f"--tiers: {_short(t)} is not a tier name")
    if len(set(tiers)) != len(tiers):
        raise GuidanceError(f"--tiers: {','.join(tiers)} names a tier twice")
    if isinstance(granularity, bool) or not isinstance(granularity, (int, np.integer)) or granularity < 1:
        raise GuidanceError(f"--granularity: {granularity!r} is not a positive number of bytes")
    footprint = int(profile["totals"]["peak_live_bytes"])
    cap_b, cap_f = _capacities(capacity, len(tiers), footprint)

    ph = profile["phases"]
    sl = profile["slices"]
    tot = profile["totals"]
    # what a per-phase schedule was made from: a guided run of another length or trace is
    # warned about (docs/guidance.md, "Applying guidance to another run")
    made_from = {"trace_digest": profile["trace"]["digest"],
                 "insn": tot["insn"] if isinstance(tot.get("insn"), int) and tot["insn"] > 0 else None,
                 "accesses": int(tot["accesses"])}
    if per_phase:
        if ph["count"] < 1 or not ph["of_slice"]:
            raise GuidanceError("--per-phase: the profile has no phases (phases.of_slice is empty): "
                                "profile a trace with slices, or make static guidance")
        if sl["length"] <= 0:
            raise GuidanceError("--per-phase: the profile has no slice length (slices.length is 0): "
                                "a guided run could not tell when phases change")

    keyed = bool(profile.get("site_keys"))
    sites = [s for s in profile["sites"] if s["reads"] + s["writes"] > 0 or s["allocs"] > 0]
    # version 2 writes the frames as people are shown them (a stripped program's by their keys:
    # frame_label); version 1's frames are its keys, written as they are
    shown = {id(s): site_frames(s) if keyed else list(s["frames"]) for s in sites}
    sites.sort(key=lambda s: (-(s["reads"] + s["writes"]), shown[id(s)], s.get("key", [])))
    out_sites = []
    for s in sites:
        acc = s["reads"] + s["writes"]
        e: dict[str, Any] = {"key": list(s["key"])} if keyed else {}
        e.update({"frames": shown[id(s)], "arena": 0, "tier": 0})
        e["peak_bytes"] = s["peak_bytes"]
        e["accesses"] = acc
        e["accesses_per_byte"] = _per_byte(acc, s["peak_bytes"])
        if per_phase:
            e["phase_accesses"] = [a_r + a_w for a_r, a_w in zip(s["phase_reads"], s["phase_writes"])]
        out_sites.append(e)
    if per_phase:
        markers, marker_warnings = phase_markers(profile)
        phases = {"count": int(ph["count"]), "slice_source": sl["source"], "slice_length": int(sl["length"]),
                  "of_slice": [int(x) for x in ph["of_slice"]], "made_from": made_from, "markers": markers}
    else:
        phases = {"count": 1, "slice_source": sl["source"], "slice_length": int(sl["length"]),
                  "of_slice": [0] * len(ph["of_slice"])}
    arenas, used = _place(out_sites, phases["count"] if per_phase else 0, cap_b, strategy, granularity, len(tiers))

    tr = profile["trace"]
    out = {
        "format": FORMAT,
        "version": VERSION if keyed else 1,
        "strategy": strategy,
        "mode": "per-phase" if per_phase else "static",
        "tiers": tiers,
        "capacity_bytes": cap_b,
        "capacity_fraction": cap_f,
        "granularity_bytes": (max(used) if used else int(granularity)) if strategy == "knapsack" else None,
        # version 2 counts the frames of a key; version 1 is the depth (frames - 1)
        "context": int(profile["context"]) + 1 if keyed else int(profile["context"]),
        # what the runtime does with them, and guided runs by default (docs/guidance.md)
        "unmatched": "first-touch",
        "profile": {"trace_path": tr["path"], "trace_digest": tr["digest"], "program": tr["program"],
                    "args": list(tr["args"]), "footprint_bytes": footprint},
        "phases": phases,
        "arenas": arenas,
        "sites": out_sites,
    }
    if per_phase and marker_warnings:
        out["warnings"] = marker_warnings
    return out


def _place(sites: list[dict], n_phases: int, cap_b: Sequence[int], strategy: str, granularity: int,
           n_tiers: int) -> tuple[list[dict], list[int]]:
    """Run the strategy on the guidance sites' sizes (``peak_bytes``) and values (``accesses``,
    or each phase's ``phase_accesses`` when ``n_phases`` > 0), setting each site's ``arena``,
    ``tier`` and (per-phase, two tiers) ``bits`` in place: sites with the same tier in every
    phase share an arena, numbered in the sites' order. The arenas, and the granularities
    knapsack used."""
    sizes = np.array([s["peak_bytes"] for s in sites], dtype=np.int64)
    used: list[int] = []
    if n_phases:
        cols = [_assign(sizes, np.array([s["phase_accesses"][p] for s in sites], dtype=np.int64), cap_b, strategy,
                        granularity, used) for p in range(n_phases)]
        per_site = np.stack(cols, axis=1) if sites else np.zeros((0, n_phases), dtype=np.int64)
    else:
        per_site = _assign(sizes, np.array([s["accesses"] for s in sites], dtype=np.int64), cap_b, strategy,
                           granularity, used)[:, None]
    arena_of: dict[tuple, int] = {}
    for e, row in zip(sites, per_site.tolist()):
        e["arena"] = arena_of.setdefault(tuple(row), len(arena_of))
        e["tier"] = row[0]
        if n_phases and n_tiers == 2:
            e["bits"] = "".join("1" if t == 0 else "0" for t in row)
    return [{"id": i, "tiers": list(k)} for k, i in arena_of.items()], used


def resolve(g: dict, capacity: Union[Capacity, Sequence[Capacity]]) -> dict:
    """The same guidance solved again for other tier capacities: the strategy runs on the
    sizes (``peak_bytes``) and values (``accesses``, per phase ``phase_accesses``) the file
    keeps for each site, as ``tierkit guide`` ran it on the profile's. For the capacity of a
    real run (``tierkit run --guidance G --fast-capacity BYTES``): the profile's capacity was
    a share of the training run's footprint, not of the machine's fast memory. ``capacity``
    is as for :func:`make_guidance` (a fraction is of ``profile.footprint_bytes``). The
    result says what it was solved from in ``resolved_from``."""
    g = check_guidance(json.loads(json.dumps(g)))
    if "resolved_from" in g:
        raise GuidanceError("resolved_from: this guidance was solved again already: solve the original file")
    if g["strategy"] not in STRATEGIES:
        raise GuidanceError(f"strategy: '{g['strategy']}' is not one of {', '.join(sorted(STRATEGIES))}")
    cap_b, cap_f = _capacities(capacity, len(g["tiers"]), int(g["profile"]["footprint_bytes"]))
    per_phase = g["mode"] == "per-phase"
    for i, s in enumerate(g["sites"]):
        if per_phase and len(s.get("phase_accesses", ())) != g["phases"]["count"]:
            raise GuidanceError(f"sites[{i}].phase_accesses: per-phase guidance keeps each site's accesses per phase "
                                "to be solved again; this file has none")
    gran = g.get("granularity_bytes") or DEFAULT_GRANULARITY
    old = {"capacity_bytes": g["capacity_bytes"], "capacity_fraction": g["capacity_fraction"],
           "fast_sites": sum(1 for s in g["sites"] if s["tier"] == 0)}
    g["arenas"], used = _place(g["sites"], g["phases"]["count"] if per_phase else 0, cap_b, g["strategy"], int(gran),
                               len(g["tiers"]))
    g["capacity_bytes"], g["capacity_fraction"] = cap_b, cap_f
    if g["strategy"] == "knapsack":
        g["granularity_bytes"] = max(used) if used else int(gran)
    g["resolved_from"] = old
    return g


#: a phase marker further than this share of the shorter adjacent phase run from its boundary
#: is warned about (docs/guidance.md, "Phase markers")
MARKER_OFFSET_WARN = 0.1


def phase_markers(profile: dict) -> tuple[list, list]:
    """The phase markers of per-phase guidance: for each boundary between phases (a slice
    whose phase differs from the one before), the allocation call of the profiled run nearest
    to it, which a running program's allocator can count (it has no instruction counter). The
    marker is the first allocation call after the boundary (``side: "before"``: switch before
    serving call ``alloc``, counted from 0) or the last one before it (``side: "after"``:
    switch once call ``alloc`` is served), whichever is nearer in instructions, and only from
    the phase runs on either side of the boundary. A boundary with no allocation call in
    either run gets ``alloc: null``: a guided run cannot see it. Returns (markers, warnings)."""
    sl, ph, tot = profile["slices"], profile["phases"], profile["totals"]
    of = [int(x) for x in ph["of_slice"]]
    if "start_allocs" not in sl:
        return [], ["warning: the profile has no allocation counts per slice (made before phase markers existed): "
                    "a guided run cannot tell when phases change; profile the trace again"]
    sa = [int(x) for x in sl["start_allocs"]]
    first, last = sl["first_alloc_insn"], sl["last_alloc_insn"]
    start = [int(x) for x in sl["start_insn"]]
    n = len(of)
    total_calls = int(tot.get("alloc_calls", sa[-1] if sa else 0))
    end_insn = int(tot["insn"]) if isinstance(tot.get("insn"), int) else (start[-1] if start else 0)
    has_insn = sl["source"] != "accesses" or any(x is not None for x in first)
    cuts = [k for k in range(1, n) if of[k] != of[k - 1]]
    bounds = [0] + cuts + [n]
    markers, warnings = [], []
    for b, k in enumerate(cuts, start=1):
        lo, hi = bounds[b - 1], bounds[b + 1]
        calls_at = sa[k]
        calls_hi = sa[hi] if hi < n else total_calls
        at = start[k]
        cands = []
        if calls_at > sa[lo]:  # the last call before the boundary, in the run before it
            j = max((i for i in range(lo, k) if last[i] is not None), default=None) if has_insn else None
            ins = last[j] if j is not None else None
            cands.append((calls_at - 1, "after", ins))
        if calls_hi > calls_at:  # the first call after it, in the run after it
            j = min((i for i in range(k, hi) if first[i] is not None), default=None) if has_insn else None
            ins = first[j] if j is not None else None
            cands.append((calls_at, "before", ins))
        m: dict[str, Any] = {"slice": k, "phase": of[k], "insn": at, "alloc": None, "side": None, "offset_insn": None}
        if not cands:
            warnings.append(f"warning: the phase boundary at slice {k} (instruction {at:,}) has no allocation call "
                            f"in the phases on either side: a guided run cannot see it and keeps the phase "
                            "it is in until the next boundary it sees")
        else:
            # nearest in instructions; without instruction counts, the call after the boundary
            best = min(cands, key=lambda c: (abs(c[2] - at) if c[2] is not None else 0, c[1] == "after"))
            m.update(alloc=best[0], side=best[1], offset_insn=None if best[2] is None else best[2] - at)
            if best[2] is not None:
                run_before = at - start[lo]
                run_after = (start[hi] if hi < n else end_insn) - at
                span = min(run_before, run_after)
                if span > 0 and abs(best[2] - at) > MARKER_OFFSET_WARN * span:
                    warnings.append(f"warning: the phase boundary at slice {k} (instruction {at:,}) has its nearest "
                                    f"allocation call {abs(best[2] - at):,} instructions {'after' if best[2] > at else 'before'} "
                                    f"it ({100 * abs(best[2] - at) / span:.0f}% of the shorter phase run beside it): "
                                    f"a guided run switches phases that far from the boundary")
        markers.append(m)
    if len(warnings) > 4:
        warnings = warnings[:3] + [f"warning: ... and {len(warnings) - 3} more phase boundaries like these "
                                   "(the guidance's phases.markers lists them all)"]
    return markers, warnings


def classify(keys: Sequence[str], sites: Sequence[tuple], context: int) -> tuple[str, Any]:
    """The classification rule of guidance version 2 (docs/guidance.md; the same as
    ``tierkit_core::sitekey::classify``, which the guided policy and the runtime use): walk
    the allocation's frame keys innermost first; after j frames, S_j is the sites whose key
    starts with them. S_j empty: ``("unmatched", j)``. All of S_j in one arena: ``("arena",
    (arena, j))``. Otherwise one frame deeper; at j = ``context``, the site whose key equals
    the frames. When the keys run out first with S_j in several arenas: the site whose key is
    exactly those keys if any, else ``("too-few-frames", (len(keys), arenas))``.
    ``sites``: (key, arena) pairs."""
    cand = list(range(len(sites)))
    limit = max(1, int(context))
    for j in range(1, limit + 1):
        if j > len(keys):
            exact = [i for i in cand if len(sites[i][0]) == len(keys)]
            if exact:
                return "arena", (sites[exact[0]][1], len(keys))
            return "too-few-frames", (len(keys), sorted({sites[i][1] for i in cand}))
        cand = [i for i in cand if len(sites[i][0]) >= j and sites[i][0][j - 1] == keys[j - 1]]
        if not cand:
            return "unmatched", j
        if len({sites[i][1] for i in cand}) == 1:
            return "arena", (sites[cand[0]][1], j)
    exact = [i for i in cand if len(sites[i][0]) == limit]
    return ("arena", (sites[exact[0]][1], limit)) if exact else ("unmatched", limit)


def match_site(frames: Sequence[str], guidance: dict) -> Optional[dict]:
    """The guidance site of a trace allocation site, or None (then the site goes to the
    ``unmatched`` tier); the same rule as the guided policy. Version 2: ``frames`` are the
    site's frame keys, classed by :func:`classify`; the first site (in file order) of the
    arena it decides is returned. Version 1: the first ``context + 1`` display frames equal
    a site's; a trace that records fewer frames takes the sites whose key starts with what
    it has when they are all in one arena. Too few frames to decide raises
    :class:`GuidanceError`."""
    if int(guidance.get("version", 1)) >= 2:
        sites = [(list(s["key"]), s["arena"]) for s in guidance["sites"]]
        what, detail = classify(list(frames), sites, int(guidance["context"]))
        if what == "arena":
            return next(s for s in guidance["sites"] if s["arena"] == detail[0]
                        and list(s["key"][:detail[1]]) == list(frames[:detail[1]]))
        if what == "unmatched":
            return None
        have, arenas = detail
        raise GuidanceError(f"site {_short(list(frames))}: {have} frame(s), too few to tell arenas "
                            f"{', '.join(map(str, arenas))} apart (the guidance keys sites by {guidance['context']} frames)")
    n = int(guidance["context"]) + 1
    key = list(frames[:n])
    for s in guidance["sites"]:
        if s["frames"] == key:
            return s
    if len(key) < n:
        starts = [s for s in guidance["sites"] if s["frames"][: len(key)] == key]
        arenas = sorted({s["arena"] for s in starts})
        if len(arenas) > 1:
            raise GuidanceError(f"site {_short(key)}: {len(key)} frame(s), too few to tell arenas "
                                f"{', '.join(map(str, arenas))} apart (the guidance keys sites by {n} frames)")
        return starts[0] if starts else None
    return None


def tier_summary(g: dict):
    """Sites, peak bytes and accesses per phase and tier, for printing (a DataFrame).
    In static guidance ``accesses`` are the whole run's; per phase they are the phase's."""
    import pandas as pd

    n_ph = g["phases"]["count"] if g["mode"] == "per-phase" else 1
    arenas = g["arenas"]
    rows = []
    for p in range(n_ph):
        for t, name in enumerate(g["tiers"]):
            ss = [s for s in g["sites"] if arenas[s["arena"]]["tiers"][p] == t]
            rows.append({
                "phase": p, "tier": name,
                "capacity_bytes": g["capacity_bytes"][t] if t < len(g["capacity_bytes"]) else None,
                "sites": len(ss), "peak_bytes": sum(s["peak_bytes"] for s in ss),
                "accesses": sum(s["phase_accesses"][p] if "phase_accesses" in s else s["accesses"] for s in ss),
            })
    df = pd.DataFrame(rows)
    df["capacity_bytes"] = df["capacity_bytes"].astype("Int64")  # the last tier has none
    return df
