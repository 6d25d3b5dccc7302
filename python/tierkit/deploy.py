"""How each policy can be deployed on a real machine, and the command that applies it
(docs/policies.md, "Deploying a policy").

The registry says it once per policy (`PolicyInfo::deploy` in the Rust core, read through
`_core.policies()`); this module turns it into the words tables, plots and verdicts show, and
into the command a user runs: `tierkit run --policy ... -- PROGRAM` for a memory, daemon or
kernel policy, `tierkit profile` + `tierkit guide` + `tierkit run --guidance` for guided
placement. Policies that need hardware the machine does not have, or knowledge of the future,
have no command: they are bounds and studies, not choices."""
from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from typing import Any, Mapping, Optional

from . import _core
from ._engine import spec_args

#: the ways a policy runs on Linux today, in the order a user would rather run them (no
#: daemon first); `hardware`, `future_knowledge` and `not_live` are not among them
DEPLOYABLE = ("memory", "kernel", "allocator", "daemon")

#: the words for each way, as tables and verdicts show them
LABELS = {
    "memory": "memory policy",
    "kernel": "Linux kernel",
    "allocator": "guided allocator",
    "daemon": "tierkit run daemon",
    "hardware": "hardware only",
    "future_knowledge": "needs future knowledge",
    "not_live": "not deployable",
}

#: a label back to its way (a frame's ``deploy`` column holds the labels)
KEYS = {v: k for k, v in LABELS.items()}

#: shorter words for the terminal's table
SHORT = {"memory": "memory", "kernel": "kernel", "allocator": "allocator", "daemon": "daemon", "hardware": "hardware",
         "future_knowledge": "future", "not_live": "not live"}

#: marks after a plot's policy label for what cannot be deployed
MARKS = {"hardware": "HW", "future_knowledge": "FK", "not_live": "sim"}


def key(policy: str, result: Optional[Mapping[str, Any]] = None) -> str:
    """LABELS' key for a run: ``future_knowledge`` for a run that used the future,
    ``not_live`` for a memory policy given parameters `tierkit run` does not take."""
    if result is not None and uses_future(result):
        return "future_knowledge"
    if _memory_args(policy):
        return "not_live"
    return how(policy)


@lru_cache(maxsize=1)
def _registry() -> dict[str, dict]:
    return {p["name"]: p for p in json.loads(_core.policies())}


def name_of(policy: str) -> str:
    """A policy spec's name (``history:period=10K`` -> ``history``)."""
    return str(policy).split(":", 1)[0]


def how(policy: str) -> str:
    """How the policy deploys: one of LABELS' keys. A Python policy (not in the registry)
    is a prototype: ``not_live``."""
    p = _registry().get(name_of(policy))
    if p is None:
        return "not_live"
    return str(p["deploy"]["how"])


def _memory_args(policy: str) -> bool:
    """A memory policy given parameters: live, `tierkit run` sets a memory policy at exec
    without any (MPOL_INTERLEAVE interleaves with equal weights)."""
    return how(policy) == "memory" and bool(str(policy).partition(":")[2].strip())


def why(policy: str) -> Optional[str]:
    """Why the policy cannot be deployed as it is (None when it can)."""
    p = _registry().get(name_of(policy))
    if p is None:
        return "a Python policy is a prototype: tierkit runs it only in the simulator"
    if _memory_args(policy):
        return (f"tierkit run sets {name_of(policy)} at exec without parameters (the kernel's memory policy: "
                "interleave with equal weights); these parameters are simulation only")
    d = p["deploy"]
    if d["how"] in DEPLOYABLE:
        return None
    if d["how"] == "future_knowledge":
        return d.get("why") or "it reads the trace's future (an oracle bound)"
    return d.get("why")


def deployable(policy: str, result: Optional[Mapping[str, Any]] = None) -> bool:
    """Whether a user can run the policy on a machine with a fast and a slow node. A result
    whose own configuration used future knowledge (``future_knowledge`` in its config, as
    Kleio's future fallback writes it) is not deployable whatever its policy."""
    if how(policy) not in DEPLOYABLE or _memory_args(policy):
        return False
    if result is not None and uses_future(result):
        return False
    return True


def uses_future(r: Mapping[str, Any]) -> bool:
    """Whether a run used anything a running system could not know: its policy is an oracle,
    or its configuration says so (a learned scheduler's future-knowledge fallback or perfect
    classes, ``config.models.future_knowledge``; a period tuned over the whole trace,
    ``period_future_knowledge``; a study's ``future_knowledge``)."""
    if how(str(r.get("policy", ""))) == "future_knowledge":
        return True
    cfg = r.get("config") or {}
    models = cfg.get("models") or {}
    for fk in (r.get("future_knowledge"), cfg.get("future_knowledge"), models.get("future_knowledge"),
               models.get("period_future_knowledge")):
        if isinstance(fk, Mapping) and any(bool(v) for v in fk.values()):
            return True
        if fk is True:
            return True
    return False


def label(policy: str, result: Optional[Mapping[str, Any]] = None) -> str:
    """The deployment column's text for a run."""
    return LABELS[key(policy, result)]


def _size(nbytes: int) -> str:
    """Bytes in the units `tierkit run --fast-capacity` reads (K, M, G), rounded up."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{-(-nbytes // scale)}{unit}"
    return str(nbytes)


def capacity_fraction(r: Mapping[str, Any]) -> Optional[float]:
    """The fast tier's capacity as the run was given it, a fraction of the footprint (None
    when it was given as a size, or the result does not say)."""
    caps = ((r.get("config") or {}).get("platform") or {}).get("capacity")
    first = caps[0] if isinstance(caps, list) and caps else None
    return first["fraction"] if isinstance(first, Mapping) and "fraction" in first else None


def fast_bytes(r: Mapping[str, Any]) -> Optional[int]:
    """A run's fast-tier capacity in bytes (None when unknown or unlimited)."""
    pages = r.get("fast_capacity_pages")
    if pages is None or int(pages) >= 1 << 60:
        return None
    page = int((r.get("config") or {}).get("page_size") or 4096)
    return int(pages) * page


_UNITS_NS = (("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("ns", 1))


def time_ns(v: str) -> Optional[float]:
    """A period written as a time (``100ms``, ``1s``) in ns; None for accesses or instructions."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ns|us|µs|ms|s)\s*", str(v))
    if not m:
        return None
    scale = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}[m.group(2)]
    return float(m.group(1)) * scale


def fmt_time(ns: float) -> str:
    """A time as a period parameter takes it, in the largest unit that writes it whole."""
    n = max(1, int(round(ns)))
    for unit, div in _UNITS_NS:
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    for unit, div in _UNITS_NS:
        if n >= 10 * div:
            return f"{int(round(n / div))}{unit}"
    return f"{n}ns"


def live_period(period_accesses: int, r: Mapping[str, Any], time_scale: float = 1.0) -> str:
    """A period of ``period_accesses`` accesses as the time it spanned in the run ``r``, which
    is what a daemon counts: live, `tierkit run` takes history's period as a time
    (docs/real-linux.md), and a program's accesses are not counted there. Three significant
    digits, at least 1 µs."""
    ns = period_accesses * float(r["runtime_ns"]) / max(1, int(r["accesses"])) * time_scale
    ns = max(1000.0, float(f"{ns:.3g}"))
    return fmt_time(ns)


def _accesses(v: str) -> Optional[int]:
    """A period in accesses (``1000``, ``10K``, ``2M``); None for anything else."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([KMG]?)\s*", str(v))
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1000, "M": 1000_000, "G": 1000_000_000}[m.group(2)]


def live_spec(policy: str, result: Optional[Mapping[str, Any]] = None) -> str:
    """The spec `tierkit run` takes for a simulated one: a history period counted in accesses
    (its default, 1000) becomes the time it spanned in ``result``; anything else as it is."""
    name = name_of(policy)
    if name != "history" or result is None or not result.get("accesses"):
        return str(policy)
    args = spec_args(str(policy))
    n = _accesses(dict(args).get("period", "1000"))
    if n is None:
        return str(policy)
    k = float((result.get("config") or {}).get("time_scale") or 1.0)
    args = [(a, v) for a, v in args if a != "period"] + [("period", live_period(n, result, k))]
    return name + ":" + ",".join(f"{a}={v}" if v else a for a, v in args)


def command(policy: str, result: Optional[Mapping[str, Any]] = None, program: str = "PROGRAM",
            trace: Optional[str] = None) -> Optional[str]:
    """The command that applies the policy to a program on a tiered machine, or None when it
    cannot be deployed. ``result`` gives the fast capacity the simulation used; ``trace`` the
    trace a guided policy's profile comes from."""
    if not deployable(policy, result):
        return None
    h = how(policy)
    cap = fast_bytes(result) if result is not None else None
    capopt = f" --fast-capacity {_size(cap)}" if cap else ""
    if h == "allocator":
        src = trace or (str(result["trace"]) if result is not None and "trace" in result else "TRACE.tkt")
        strategy = dict(spec_args(str(policy))).get("strategy") or "thermos"
        frac = capacity_fraction(result) if result is not None else None
        c = str(frac) if frac is not None else (_size(cap) if cap else None)
        return (f"tierkit profile {shlex.quote(src)} -o profile.json && "
                f"tierkit guide profile.json -s {strategy}" + (f" -c {c}" if c else "") + " -o guidance.json && "
                f"tierkit run --guidance guidance.json{capopt} -- {program}")
    spec = shlex.quote(live_spec(policy, result))
    return f"tierkit run --policy {spec}{capopt} -- {program}"
