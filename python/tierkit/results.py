"""Results in a notebook (docs/python.md, "Results in a notebook"): the holder of a frame's full
results, the frames' typed and query-friendly columns, one row per run and tier, plots.

pandas copies a frame's ``attrs`` into every frame it derives from it, and "copies are always
deep" (pandas documentation, ``DataFrame.attrs``): a full result per row there made every
selection, filter and sort copy every run's statistics. :class:`Results` is a list whose deep
copy is itself, so that derived frames share it and cost what pandas costs."""
from __future__ import annotations

import html
import math
import numbers
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Union

if TYPE_CHECKING:
    import pandas as pd

from ._core import TierkitError


class Shared(list):
    """A list in a frame's ``attrs`` that derived frames share instead of deep-copying (the
    events of :func:`tierkit.read_trace`, and :class:`Results`): its deep copy is itself."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict) -> Shared:
        return self

    # pandas compares the attrs of the frames it concatenates: the same holder is equal at once
    def __eq__(self, other: object) -> bool:
        return self is other or list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other


class SharedDict(dict):
    """A dict in a frame's ``attrs`` that derived frames share (the header of
    :func:`tierkit.read_trace`)."""

    def __deepcopy__(self, memo: dict) -> SharedDict:
        return self

    def __eq__(self, other: object) -> bool:
        return self is other or dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None


class Results(Shared):
    """The full results of a frame's runs, in its rows' order (each a dict as
    :func:`tierkit.run` returns it): ``df.attrs['results']`` of :func:`tierkit.compare`,
    :func:`tierkit.simulate` and :func:`tierkit.load`.

    A list in every way but two: ``copy.deepcopy`` returns the same object (pandas deep-copies
    ``attrs`` into each frame it derives; they share the one holder instead, so change a result
    in place and every derived frame sees it; copy a result with ``copy.deepcopy(results[i])``),
    and it shows itself as a short summary (``repr``) and a table in Jupyter (``_repr_html_``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        pols = list(dict.fromkeys(str(r.get("policy")) for r in self if isinstance(r, Mapping)))
        traces = list(dict.fromkeys(trace_name(r.get("trace")) for r in self if isinstance(r, Mapping)))
        shown = ", ".join(pols[:6]) + (f", ... ({len(pols)} policies)" if len(pols) > 6 else "")
        on = ", ".join(traces[:3]) + (f", ... ({len(traces)} traces)" if len(traces) > 3 else "")
        return f"Results({len(self)} run{'s' if len(self) != 1 else ''}: {shown}" + (f" on {on})" if on else ")")

    def _repr_html_(self) -> str:
        rows = []
        for r in self:
            if not isinstance(r, Mapping):
                continue
            ws = r.get("warnings")
            rows.append([trace_name(r.get("trace")), r.get("policy"), _fmt(_num(r.get("runtime_ns")), 1e-6),
                         _fmt(_num(r.get("fast_hit_ratio")), 100.0), _fmt(_num(r.get("migrations")), 1.0),
                         str(len(ws)) if isinstance(ws, list) and ws else ""])
        head = ["trace", "policy", "runtime (ms)", "fast-tier hits (%)", "migrations", "warnings"]
        cells = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
        return (f"<table><caption>tierkit results: {len(self)} run{'s' if len(self) != 1 else ''} "
                f"(full results: <code>df.attrs['results'][i]</code>; per tier: <code>tierkit.tiers(df)</code>)</caption>"
                "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + f"</tr></thead><tbody>{cells}</tbody></table>")

    def tiers(self) -> pd.DataFrame:
        """:func:`tiers` of these results."""
        return tiers(self)


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _fmt(v: float, scale: float) -> str:
    if math.isnan(v):
        return ""
    return f"{int(v):,}" if scale == 1.0 and v.is_integer() else f"{v * scale:,.4g}"


def trace_name(trace: Any) -> str:
    """A run's trace as a short name: the file's name (``zipf.tkt``), ``a.tkt + b.tkt`` for a
    mix, ``a.tkt on 2 cores`` for a trace's threads on several cores."""
    if not isinstance(trace, str):
        return "" if trace is None else str(trace)
    return " + ".join(Path(p).name for p in trace.split(" + "))


#: Columns of a run's frame that hold a number or nothing (the IPC under the simple timing
#: model, energy without a model of it, a mix's figures): float, NaN for nothing.
FLOAT_COLUMNS = ("runtime_ns", "fast_hit_ratio", "migration_time_ns", "energy_j", "ipc", "fast_capacity_pages",
                 "weighted_speedup", "throughput_accesses_per_us", "max_slowdown")

_NOT_A_NAME = re.compile(r"\W")


def query_name(column: str) -> str:
    """``runtime_vs_all-slow`` → ``runtime_vs_all_slow``: a name ``df.query`` and attribute
    access take without backticks (every character that is not a letter, digit or ``_``
    becomes ``_``)."""
    return _NOT_A_NAME.sub("_", column)


def tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Make a frame of runs (rows as :func:`tierkit.compare` builds them, or read back from a
    report) what the API returns, in place: ``trace_name`` after ``trace``, the numeric columns
    float (NaN for nothing), ``activations`` a nullable integer, and beside each
    ``runtime_vs_<baseline>`` / ``speedup_vs_<baseline>`` whose baseline is not a Python name
    the same column under its query-friendly name (the first names are kept for one release)."""
    import pandas as pd

    if "trace" in df.columns and "trace_name" not in df.columns:
        df.insert(list(df.columns).index("trace") + 1, "trace_name",
                  pd.Series([trace_name(t) for t in df["trace"]], index=df.index, dtype="str"))
    for c in FLOAT_COLUMNS:
        if c in df.columns and df[c].dtype != "float64":
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    if "activations" in df.columns:
        try:
            df["activations"] = pd.to_numeric(df["activations"], errors="coerce").astype("Int64")
        except (TypeError, ValueError):
            raise TierkitError("column 'activations': not whole numbers") from None
    for c in list(df.columns):
        if isinstance(c, str) and c.startswith(("runtime_vs_", "speedup_vs_")) and query_name(c) not in df.columns:
            df[query_name(c)] = df[c]
    return df


def results_of(obj: Any) -> list[dict]:
    """The runs ``obj`` holds, in order: a result (:func:`tierkit.run`), a list of results, a
    :class:`Results`, or a frame of :func:`tierkit.compare`, :func:`tierkit.simulate` or
    :func:`tierkit.load`, possibly filtered or sorted (its rows' runs, matched by the index the
    frame was returned with, else by trace and policy)."""
    return [r for _, r in _labelled(obj)]


def _labelled(obj: Any) -> list[tuple[Any, dict]]:
    """:func:`results_of`, each with its label: the row's index label in a frame, else its
    position."""
    import pandas as pd

    if isinstance(obj, Mapping):
        return [(0, _result(obj, "result"))]
    if isinstance(obj, pd.DataFrame):
        return _frame_results(obj)
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
        return [(i, _result(r, f"results[{i}]")) for i, r in enumerate(obj)]
    raise TierkitError(f"{type(obj).__name__}: not a run's result, a list of them or a frame of runs")


def _result(r: Any, what: str) -> dict:
    if not isinstance(r, Mapping) or not isinstance(r.get("stats"), Mapping) or "policy" not in r:
        raise TierkitError(f"{what}: not a run's result (a dict as tierkit.run returns, with 'stats')")
    return dict(r)


def _frame_results(df: pd.DataFrame) -> list[tuple[Any, dict]]:
    held = df.attrs.get("results")
    if held is None:
        raise TierkitError("the frame holds no results (df.attrs['results']): give a frame of "
                           "tierkit.compare, simulate or load, or the results themselves")
    runs = [_result(r, f"df.attrs['results'][{i}]") for i, r in enumerate(held)]
    keyed = {"trace", "policy"} <= set(df.columns)
    keys = list(zip(df["trace"], df["policy"])) if keyed else None
    # the index the frame was returned with: row i is results[i], however the rows were
    # since filtered or sorted
    idx = list(df.index)
    if all(isinstance(i, numbers.Integral) and not isinstance(i, bool) and 0 <= int(i) < len(runs) for i in idx) and \
            (keys is None or all((runs[int(i)]["trace"], runs[int(i)]["policy"]) == k for i, k in zip(idx, keys))):
        return [(i, runs[int(i)]) for i in idx]
    if keys is None:
        raise TierkitError("the frame's index is not the one it was returned with, and it has no 'trace' and "
                           "'policy' columns to match its rows with its results")
    by_key: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        by_key.setdefault((r["trace"], r["policy"]), []).append(i)
    out = []
    for label, (t, p) in zip(idx, keys):
        found = by_key.get((t, p), [])
        if len(found) != 1:
            why = "no result" if not found else f"{len(found)} results"
            raise TierkitError(f"row of policy '{p}' on '{trace_name(t)}': {why} in df.attrs['results'] with that "
                               "trace and policy (keep the frame's index to match rows to results)")
        out.append((label, runs[found[0]]))
    return out


def _at(xs: Any, i: int) -> Any:
    return xs[i] if isinstance(xs, list) and i < len(xs) else None


def tiers(obj: Any) -> pd.DataFrame:
    """One row per run and tier, from a run's result, a list of results, or a frame of runs
    (:func:`results_of`): ``trace``, ``trace_name``, ``policy``, ``run`` (the row's index label in
    a frame, to join the two on; the run's position in a list), ``tier`` (0 the fastest), ``tier_name``, ``hits`` (accesses the tier served:
    ``reads`` + ``writes``), ``reads``, ``writes``, ``hit_share`` (of the run's accesses),
    ``bytes_read``, ``bytes_written``, ``migrated_in_bytes``, ``migrated_out_bytes``,
    ``used_pages``, ``capacity_pages`` (NaN: unlimited), ``read_latency_ns`` and
    ``write_latency_ns`` (the platform's), ``latency_ns`` (the time the simple model charged
    the tier's accesses; NaN under the detailed one), ``avg_read_latency_ns`` (the detailed
    model's, queueing included; NaN under the simple one), ``energy_j``.
    Over a run's tiers, ``hits``, ``reads``, ``writes`` and the migrated bytes add up to the
    run's ``accesses``, ``reads``, ``writes`` and ``migrated_bytes``."""
    import pandas as pd

    rows = []
    for k, r in _labelled(obj):
        try:
            rows += _tier_rows(k, r)
        except (AttributeError, TypeError, ValueError, OverflowError):
            # a result read from a file (tierkit.load) may be anything (docs/security.md)
            raise TierkitError(f"run {k} (policy '{r.get('policy')}'): its stats are not a run's statistics "
                               "(stats.platform.tiers, stats.timing, stats.migration)") from None
    cols = ["trace", "trace_name", "policy", "run", "tier", "tier_name", "hits", "reads", "writes", "hit_share",
            "bytes_read", "bytes_written", "migrated_in_bytes", "migrated_out_bytes", "used_pages", "capacity_pages",
            "read_latency_ns", "write_latency_ns", "latency_ns", "avg_read_latency_ns", "energy_j"]
    return pd.DataFrame(rows, columns=cols)


def _tier_rows(k: Any, r: Mapping[str, Any]) -> list[dict]:
    st = r["stats"]
    plat = (st.get("platform") or {}).get("tiers") or []
    cfg_tiers = (((r.get("config") or {}).get("platform") or {}).get("platform") or {}).get("tiers") or []
    tim = st.get("timing") or {}
    mig = st.get("migration") or {}
    accesses = _num(r.get("accesses"))
    rows = []
    for i, t in enumerate(plat):
        c = _at(cfg_tiers, i) or {}
        d = _at(tim.get("tiers"), i) or {}
        cap = t.get("capacity_pages")
        reads, writes = int(t.get("reads") or 0), int(t.get("writes") or 0)
        rows.append({
            "trace": r.get("trace"), "trace_name": trace_name(r.get("trace")), "policy": r.get("policy"), "run": k,
            "tier": i, "tier_name": t.get("name"), "hits": reads + writes, "reads": reads, "writes": writes,
            "hit_share": (reads + writes) / accesses if accesses else math.nan,
            "bytes_read": int(t.get("bytes_read") or 0), "bytes_written": int(t.get("bytes_written") or 0),
            "migrated_in_bytes": int(_at(mig.get("bytes_in"), i) or 0),
            "migrated_out_bytes": int(_at(mig.get("bytes_out"), i) or 0),
            "used_pages": int(t.get("used_pages") or 0),
            # the engine writes an unlimited tier's capacity as nothing or as u64::MAX
            "capacity_pages": math.nan if cap is None or cap >= 2**63 else float(cap),
            "read_latency_ns": _num(c.get("read_latency_ns")), "write_latency_ns": _num(c.get("write_latency_ns")),
            "latency_ns": _num(_at(tim.get("tier_latency_ns"), i)),
            "avg_read_latency_ns": _num(d.get("avg_read_latency_ns")), "energy_j": _num(t.get("energy_j")),
        })
    return rows


def _runtime_column(df: pd.DataFrame) -> Optional[str]:
    """The frame's runtime normalized to its baseline, under its query-friendly name."""
    norm = [c for c in df.columns if isinstance(c, str) and c.startswith("runtime_vs_")]
    return next((c for c in norm if c == query_name(c)), norm[0] if norm else None)


def _labels(df: pd.DataFrame) -> Any:
    return df["trace_name"] if "trace_name" in df.columns else df["trace"].map(trace_name)


def plot_runtime(df: pd.DataFrame, ax: Any = None, column: Optional[str] = None, log: Optional[bool] = None) -> Any:
    """A bar per run of a frame of runs (:func:`tierkit.compare`, :func:`tierkit.load`),
    grouped by trace: its runtime normalized to the baseline (``runtime_vs_<baseline>``, with
    a line at 1) if the frame has one, else its runtime in ms; or ``column``. ``log``: a log
    axis; by default when the largest bar is more than 10 times the smallest. Draws on ``ax``
    (a new figure's if None) and returns it."""
    col = column or _runtime_column(df)
    if col is None:
        col = "runtime_ms"
        values = df["runtime_ns"].astype(float) / 1e6
        label = "runtime (ms)"
    elif col not in df.columns:
        raise TierkitError(f"column '{col}': not in the frame (its columns: {', '.join(map(str, df.columns))})")
    else:
        values = df[col].astype(float)
        # the baseline as the user named it (all-slow), not as the query-friendly name has it
        base = next((c for c in df.columns if isinstance(c, str) and c.startswith("runtime_vs_") and c != col
                     and query_name(c) == col), col).removeprefix("runtime_vs_")
        label = f"runtime / {base} runtime" if col.startswith("runtime_vs_") else col
    table = (values.groupby([df["policy"].to_numpy(), _labels(df).to_numpy()], sort=False).first().unstack())
    table = table.reindex(index=list(dict.fromkeys(df["policy"])), columns=list(dict.fromkeys(_labels(df))))
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7.0, 0.3 * len(table.index) * max(1, len(table.columns) ** 0.5) + 1.2),
                             layout="constrained")
    table.iloc[::-1].plot.barh(ax=ax, legend=False, width=0.8)
    if len(table.columns) > 1:
        _legend_above(ax)
    pos = values[values > 0]
    if log is None:
        log = len(pos) > 0 and float(pos.max()) > 10 * float(pos.min())
    if log:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        # 0.3, 2, 40 rather than 3x10^-1
        for axis in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
            axis(FuncFormatter(lambda v, _: f"{v:g}"))
    if col.startswith("runtime_vs_"):
        ax.axvline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xlabel(label + (" (log scale)" if log else ""))
    ax.set_ylabel("")
    if len(table.columns) == 1:
        ax.set_title(f"{label} on {table.columns[0]}")
    return ax


def _legend_above(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(labels), 4), frameon=False)


def plot_tiers(obj: Any, ax: Any = None) -> Any:
    """A stacked bar per run: the share of its accesses each tier served (:func:`tiers`), the
    fastest tier first. ``obj`` as :func:`tiers` takes it. Draws on ``ax`` (a new figure's if
    None) and returns it."""
    t = tiers(obj)
    several = t["trace_name"].nunique() > 1
    t["label"] = [f"{p} ({n})" if several else str(p) for p, n in zip(t["policy"], t["trace_name"])]
    order = list(dict.fromkeys(zip(t["run"], t["label"])))
    table = t.set_index(["run", "label", "tier"])["hit_share"].unstack("tier").reindex(order)
    table.index = [label for _, label in order]
    names = t.drop_duplicates("tier").set_index("tier")["tier_name"]
    table.columns = [str(names.get(c, c)) for c in table.columns]
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7.0, 0.3 * len(table) + 1.2), layout="constrained")
    (100 * table.iloc[::-1]).plot.barh(ax=ax, stacked=True, width=0.8, legend=False)
    _legend_above(ax)
    ax.set_xlabel("accesses served (%)")
    ax.set_ylabel("")
    ax.set_xlim(0, 100)
    return ax


def holder(results: Union[Results, Iterable[dict]]) -> Results:
    """``results`` as the holder a frame keeps in ``attrs['results']``."""
    return results if isinstance(results, Results) else Results(results)
