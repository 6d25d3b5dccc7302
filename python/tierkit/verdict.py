"""What a comparison says, in words: which policy wins on each trace, by how much, and why
(`tierkit compare`'s table and the HTML report; docs/policies.md, "Reading a comparison").

Everything here is computed from the results' own numbers: the runtime breakdown from the
timing model's statistics (`stats.timing`), the reasons from the fast-tier hits and the
migrations. Nothing is said that the numbers do not show."""
from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from . import deploy as _deploy
from .results import trace_name

if TYPE_CHECKING:
    import pandas as pd

#: policies that place everything in one tier: references, not contenders
REFERENCES = ("all-fast", "all-slow")
#: policies whose name promises a bound, and what they bound
UPPER_BOUNDS = {
    "oracle": "it knows each period's accesses before the period starts, so it bounds what a "
              "history-based scheduler can choose to migrate, not the runtime: every page it moves is "
              "still copied at the tier's bandwidth",
}
#: keys `--sort` takes, and the column (and direction) each sorts by
SORT_KEYS = {"runtime": ("runtime_ns", True), "policy": (None, True), "hits": ("fast_hit_ratio", False),
             "migrations": ("migrations", True), "energy": ("energy_j", True)}


def _short(trace: str) -> str:
    """A trace's file name; a mix's, its programs' names (``a.tkt + b.tkt``)."""
    return trace_name(str(trace))


_name = _deploy.name_of


def breakdown(r: Mapping[str, Any]) -> dict[str, float]:
    """Where a run's time went, ns, in parts that add up to its runtime.

    simple timing: the fast tier's and the slower tiers' access latency, migration (fixed
    costs and copies), policy overhead (per-period work, halting charges, per-access delays a
    policy adds) and the wait for bandwidth (the busiest tier's floor above the rest).
    detailed timing: compute (instructions at the base CPI), memory stalls (the window and
    write queue, and the drain at the end), migration, policy overhead, and anything left over
    (overlap the model does not attribute) as "other". Empty when the model reports no parts."""
    t = (r.get("stats") or {}).get("timing") or {}
    total = float(r["runtime_ns"])
    if t.get("model") == "simple" and "tier_latency_ns" in t:
        lat = [float(x) for x in t["tier_latency_ns"]]
        parts = {
            "fast tier": lat[0] if lat else 0.0,
            "slower tiers": sum(lat[1:]),
            "migration": float(t.get("migration_ns", 0.0)),
            "policy overhead": float(t.get("period_ns", 0.0)) + float(t.get("halting_charges_ns", 0.0)) + float(t.get("added_latency_ns", 0.0)),
            "bandwidth wait": float(t.get("queue_ns", 0.0)),
        }
    elif t.get("model") == "detailed":
        parts = {
            "compute": float(t.get("compute_ns", 0.0)),
            "memory stalls": float(t.get("window_stall_ns", 0.0)) + float(t.get("write_queue_stall_ns", 0.0)) + float(t.get("tail_ns", 0.0)),
            "migration": float(t.get("migration_stall_ns", 0.0)),
            "policy overhead": float(t.get("period_stall_ns", 0.0)) + float(t.get("charge_stall_ns", 0.0)),
        }
        rest = total - sum(parts.values())
        if abs(rest) > 1e-6 * max(total, 1.0):
            parts["other"] = rest
    else:
        return {}
    return parts


def ms(ns: float) -> str:
    """A time in readable units (ns ... s)."""
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.3g} {unit}" if abs(v) / scale < 1000 else f"{v / scale:,.0f} {unit}"
    return f"{v:,.3g} ns"


def _pct_less(a: float, b: float) -> str:
    """'x% less than' / 'x% more than' of a against b."""
    if b <= 0:
        return "as long as"
    d = (b - a) / b
    if abs(d) < 0.0005:
        return "as long as"
    return f"{100 * abs(d):.1f}% {'less' if d > 0 else 'more'} than"


def sort_results(results: Sequence[Mapping[str, Any]], key: str = "runtime") -> list:
    """The results sorted by `key` (SORT_KEYS) within each trace, traces in their order;
    `policy` keeps the comparison's order."""
    if key not in SORT_KEYS:
        raise ValueError(f"--sort: unknown key '{key}' (known: {', '.join(SORT_KEYS)})")
    col, ascending = SORT_KEYS[key]
    traces = list(dict.fromkeys(r["trace"] for r in results))
    out = []
    for t in traces:
        rs = [r for r in results if r["trace"] == t]
        if col is not None:
            rs = sorted(rs, key=lambda r: (float(r.get(col) or 0.0) * (1 if ascending else -1), r["policy"]))
        out.extend(rs)
    return out


def did_nothing(r: Mapping[str, Any]) -> bool:
    """A run whose policy could move pages and neither acted nor moved any."""
    return r.get("activations") == 0 and not r.get("migrations")


def _nice_up(x: float) -> float:
    """The smallest of 1, 2, 5 × 10^k at least ``x`` (a time scale people can type)."""
    if x <= 1:
        return 1.0
    k = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * k >= x * (1 - 1e-12):
            return float(m * k)
    return float(10 * k)


def acts_at(r: Mapping[str, Any], times: int = 3) -> Optional[dict]:
    """For a run whose policy acted fewer than ``times`` times: the ``--time-scale`` K and the
    ``--repeat`` R at which its interval fits ``times`` times in the run (docs/policies.md,
    "Activations and warnings"). A time-scale divides a policy's time parameters by K, so an
    interval of I ns fits K·T/I times in a run of T ns; a repeat of R makes the run R times
    longer. An interval counted in accesses is not scaled by time: only R is given. None
    when the run acted often enough, or its interval is unknown (results written before
    tierkit recorded ``activation_interval``, or a per-access policy)."""
    acts, every = r.get("activations"), r.get("activation_interval")
    if acts is None or every is None or acts >= times:
        return None
    unit, n = every.get("unit"), float(every.get("n") or 0)
    if n <= 0:
        return None
    k0 = float((r.get("config") or {}).get("time_scale") or 1.0)
    r0 = int((r.get("config") or {}).get("repeat") or 1)
    if unit == "ns":
        t = float(r["runtime_ns"]) / r0  # one pass of the trace, at this scale
        # a little over: the last interval must end before the run does, and a policy's own
        # work lengthens the run it is timed against
        need = 1.1 * times * n / max(t, 1e-9)
        return {"time_scale": _nice_up(need * k0), "repeat": max(r0 + 1, math.ceil(need))}
    if unit == "accesses":
        per_pass = float(r["accesses"]) / r0
        # a boundary falls after every n accesses, and the last must come before the end
        return {"time_scale": None, "repeat": max(r0 + 1, math.floor(times * n / max(per_pass, 1.0)) + 1)}
    return None


def acts_at_text(r: Mapping[str, Any]) -> Optional[str]:
    """:func:`acts_at` in the words of a command line (``--time-scale 500 or --repeat 450``)."""
    a = acts_at(r)
    if a is None:
        return None
    opts = ([f"--time-scale {a['time_scale']:g}"] if a["time_scale"] else []) + [f"--repeat {a['repeat']:,}"]
    return " or ".join(opts)


def _tune_hint(r: Mapping[str, Any]) -> str:
    """How to look for parameters that suit the trace better."""
    name = _name(r["policy"])
    cfg = r.get("config") or {}
    c = _deploy.capacity_fraction(r)
    if name in ("history", "oracle"):
        return (f"tierkit tune {shlex.quote(str(cfg.get('trace') or r['trace']))} --scheduler {name} -p {r.get('platform', '')}"
                + (f" -c {c}" if c is not None else "") + " (Cori's period search, 003 §3.3)")
    return "tierkit sweep over its parameters (docs/sweep.md), or tierkit advise (docs/advise.md)"


def _deploy_note(r: Mapping[str, Any]) -> str:
    """``(hardware only)`` after a policy that cannot be deployed as simulated, else empty."""
    return "" if _deploy.deployable(r["policy"], r) else f" ({_deploy.label(r['policy'], r)})"


def _uncharged(r: Mapping[str, Any]) -> list[str]:
    """The work a run did that its runtime charges no time for: copies carried as memory
    traffic with no fixed cost per move, and a hardware controller's counting of every access."""
    out = []
    if r.get("migrations") and not (r.get("migration_time_ns") or 0.0):
        out.append(f"its {r['migrations']:,} migrations are charged only as memory traffic (no fault, no TLB "
                   "shootdown, no time of their own)")
    if _deploy.how(r["policy"]) == "hardware":
        out.append("it counts every access in a memory controller, at no cost to the program")
    return out


def verdict(results: Sequence[Mapping[str, Any]], baseline: str = "all-slow", program: str = "PROGRAM") -> list[str]:
    """Sentences per trace: the fastest policy (references apart) and its margin over the
    baseline and first-touch, why (fast-tier hits, migrations and their cost), the bound of
    all-fast, every upper-bound policy that lost, with why it can; then the fastest policy a
    user can deploy (tierkit.deploy) when the fastest cannot be, whether the winner's lead
    rests on work charged no time, every policy slower than all-slow (why, and how to tune
    it), the policies that never acted (and at which --time-scale or --repeat they would),
    and last the command that applies the deployable winner."""
    out = []
    for t in dict.fromkeys(r["trace"] for r in results):
        rs = [r for r in results if r["trace"] == t]
        by = {r["policy"]: r for r in rs}
        contenders = [r for r in rs if _name(r["policy"]) not in REFERENCES]
        if not contenders:
            continue
        best = min(contenders, key=lambda r: r["runtime_ns"])
        timing = best.get("timing", "")
        head = f"{_short(t)} ({best.get('platform', '')}, {timing} timing): "
        refs = []
        for ref in dict.fromkeys([baseline, "first-touch"]):
            b = by.get(ref)
            if b is not None and b is not best:
                refs.append(f"{_pct_less(best['runtime_ns'], b['runtime_ns'])} {ref} ({ms(b['runtime_ns'])})")
        s = f"{head}{best['policy']}{_deploy_note(best)} is the fastest, {ms(best['runtime_ns'])}"
        s += (", " + " and ".join(refs) + "." if refs else ".")
        ft = by.get("first-touch")
        why = [f"{100 * best['fast_hit_ratio']:.1f}% of its accesses hit the fast tier"
               + (f" against first-touch's {100 * ft['fast_hit_ratio']:.1f}%" if ft is not None and ft is not best else "")]
        if best.get("migrations"):
            cost = best.get("migration_time_ns") or 0.0
            why.append(f"it moved {best['migrated_bytes'] / (1 << 20):,.1f} MiB in {best['migrations']:,} migrations"
                       + (f" costing {ms(cost)}" if cost > 0 else ", copied as memory traffic (no time charged as migration)"))
        else:
            why.append("it moved nothing")
        s += " Why: " + "; ".join(why) + "."
        af = by.get("all-fast")
        if af is not None:
            s += f" With every page in the fast tier (all-fast) the run would take {ms(af['runtime_ns'])}."
        others = sorted(contenders, key=lambda r: r["runtime_ns"])
        if len(others) > 1:
            second = others[1]
            s += f" Next: {second['policy']}{_deploy_note(second)}, {ms(second['runtime_ns'])}."
        out.append(s)
        for r in contenders:
            why_bound = UPPER_BOUNDS.get(_name(r["policy"]))
            if why_bound is None or r is best:
                continue
            beaten_by = [x for x in contenders if x["runtime_ns"] < r["runtime_ns"]]
            if not beaten_by:
                continue
            most_hits = max(contenders, key=lambda x: x["fast_hit_ratio"]) is r
            note = (f"{_short(t)}: {r['policy']}, an upper bound by name, is slower than {len(beaten_by)} "
                    f"polic{'y' if len(beaten_by) == 1 else 'ies'} (the fastest, {best['policy']}, by "
                    f"{ms(r['runtime_ns'] - best['runtime_ns'])}): {why_bound}. ")
            note += (f"It has the most fast-tier hits ({100 * r['fast_hit_ratio']:.1f}%), " if most_hits
                     else f"It has {100 * r['fast_hit_ratio']:.1f}% fast-tier hits, ")
            cost = r.get("migration_time_ns") or 0.0
            note += (f"and moved {r['migrated_bytes'] / (1 << 20):,.1f} MiB"
                     + (f", whose migrations cost {ms(cost)}." if cost > 0 else "."))
            out.append(note)
        # what a user can run: the fastest deployable policy (first-touch counts: it is the
        # default a user already has), and whether the winner's lead over it is real work
        deployable = sorted((r for r in rs if _deploy.deployable(r["policy"], r) and _name(r["policy"]) not in REFERENCES),
                            key=lambda r: r["runtime_ns"])
        choice = deployable[0] if deployable else None
        if choice is not best and choice is not None:
            lead = choice["runtime_ns"] - best["runtime_ns"]
            sent = (f"{_short(t)}: {best['policy']} cannot be deployed as simulated ({_deploy.why(best['policy']) or _deploy.label(best['policy'], best)}). "
                    f"The fastest policy you can deploy is {choice['policy']} ({_deploy.label(choice['policy'], choice)}), "
                    f"{ms(choice['runtime_ns'])}, {ms(lead)} behind it")
            free = _uncharged(best)
            sent += (f"; that lead rests on work charged no time: {'; '.join(free)}." if free else ".")
            out.append(sent)
        elif choice is best and _uncharged(best):
            out.append(f"{_short(t)}: part of {best['policy']}'s lead rests on work charged no time: {'; '.join(_uncharged(best))}.")
        slow = by.get("all-slow")
        if slow is not None:
            for r in sorted(contenders, key=lambda r: -r["runtime_ns"]):
                if r["runtime_ns"] <= slow["runtime_ns"] * 1.0005:
                    continue
                parts = breakdown(r)
                cost = [(k, v) for k, v in parts.items() if k in ("migration", "policy overhead", "bandwidth wait") and v > 0]
                reason = (", ".join(f"{k} {ms(v)}" for k, v in sorted(cost, key=lambda kv: -kv[1]))
                          if cost else f"{100 * r['fast_hit_ratio']:.1f}% fast-tier hits")
                moved = f"{r['migrations']:,} migrations, " if r.get("migrations") else ""
                out.append(f"{_short(t)}: {r['policy']} is {100 * (r['runtime_ns'] / slow['runtime_ns'] - 1):.1f}% slower than all-slow, which "
                           f"places every page in the slow tier: its work costs more than its fast-tier hits save "
                           f"({moved}{reason}). Its parameters may not suit this trace: {_tune_hint(r)}.")
        idle = [r for r in rs if did_nothing(r)]
        if idle:
            fixes = [f"{r['policy']} at {acts_at_text(r)}" for r in idle if acts_at_text(r)]
            out.append(f"{_short(t)}: {', '.join(r['policy'] for r in idle)} never acted (their result is their initial "
                       "placement, marked ! in the table): the trace is shorter than their interval. "
                       + (f"They would act at least 3 times with: {'; '.join(fixes)}." if fixes else "See --repeat / --time-scale."))
        if choice is not None:
            ft_r = by.get("first-touch")
            if ft_r is not None and choice["runtime_ns"] >= ft_r["runtime_ns"] * 0.99:
                out.append(f"{_short(t)}: no deployable policy saves 1% over first-touch here; first-touch (the "
                           "kernel's default) is the honest choice.")
            else:
                cmd = _deploy.command(choice["policy"], choice, program=program)
                if cmd:
                    out.append(f"{_short(t)}: to apply {choice['policy']}: {cmd}")
    return out


def breakdown_table(results: Sequence[Mapping[str, Any]]) -> Optional["pd.DataFrame"]:
    """One row per run: the runtime's parts in ms (columns in breakdown()'s order; all-zero
    columns left out); None when no run reports parts."""
    import pandas as pd

    rows = []
    for r in results:
        b = breakdown(r)
        if not b:
            continue
        rows.append({"trace": _short(r["trace"]), "policy": r["policy"], **{k: v / 1e6 for k, v in b.items()},
                     "runtime": r["runtime_ns"] / 1e6})
    if not rows:
        return None
    df = pd.DataFrame(rows).fillna(0.0)
    keep = [c for c in df.columns if c in ("trace", "policy", "runtime") or (df[c].abs() > 0).any()]
    return df[keep]
