"""What a comparison says, in words: which policy wins on each trace, by how much, and why
(`tierkit compare`'s table and the HTML report; docs/policies.md, "Reading a comparison").

Everything here is computed from the results' own numbers: the runtime breakdown from the
timing model's statistics (`stats.timing`), the reasons from the fast-tier hits and the
migrations. Nothing is said that the numbers do not show."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

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
    return " + ".join(Path(t).name for t in str(trace).split(" + "))


def _name(policy: str) -> str:
    return str(policy).split(":", 1)[0]


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


def verdict(results: Sequence[Mapping[str, Any]], baseline: str = "all-slow") -> list[str]:
    """Sentences per trace: the fastest policy (references apart) and its margin over the
    baseline and first-touch, why (fast-tier hits, migrations and their cost), the bound of
    all-fast, and every upper-bound policy that lost, with why it can."""
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
        s = f"{head}{best['policy']} is the fastest, {ms(best['runtime_ns'])}"
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
            s += f" Next: {second['policy']}, {ms(second['runtime_ns'])}."
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
        idle = [r["policy"] for r in rs if did_nothing(r)]
        if idle:
            out.append(f"{_short(t)}: {', '.join(idle)} never acted (their result is their initial placement, "
                       "marked ! in the table): see --repeat / --time-scale.")
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
