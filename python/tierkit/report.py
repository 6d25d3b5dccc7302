"""``compare --out DIR``: results as CSV and Parquet, PNG plots and one self-contained HTML
page (plots embedded), so a comparison can be archived, diffed and shown.

Every file the report may write is known before the run (:func:`planned_files`) and checked
for existence then. While the report is written, a file ``INCOMPLETE`` in the directory
says which files are still missing and how to redo them; it is written first and removed
last, so an interrupted or failed report is always marked (docs/limits.md, "Output files").
Each file is written atomically (:mod:`tierkit.output`)."""
from __future__ import annotations

import base64
import html
import io
import json
import os
import stat
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

import pandas as pd

from ._core import TierkitError
from .output import check_new, sigterm_unwinds, write_bytes, write_error, write_text

#: the files of every report, in the order written; per-run time-series and per-trace heat-map
#: PNGs come between the plots and index.html
FILES = ["results.csv", "results.parquet", "results.jsonl", "runtime.png", "hit_ratio.png", "migrated.png", "breakdown.png",
         "index.html"]
#: present while the report is being written, and after an interrupted or failed write
MARKER = "INCOMPLETE"


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)[:60]


def _period_of(r: dict):
    """The period, in accesses, of a periodic page scheduler's run (None for others)."""
    pol = str(r["config"].get("policy", ""))
    name, _, args = pol.partition(":")
    if name not in ("history", "oracle", "kleio", "kleoniki"):
        return None
    for kv in args.split(","):
        k, _, v = kv.partition("=")
        if k == "period" and v.isdigit():
            return int(v)
    return None


def _timeseries_name(i: int, policy: str) -> str:
    return f"timeseries-{i}-{_slug(policy)}.png"


def _heatmap_name(i: int, trace: str) -> str:
    return f"heatmap-{i}-{_slug(Path(trace).name)}.png"


def _is_mix(results: Sequence[dict]) -> bool:
    """The results compare policies on a mix (whose trace is no one file)."""
    return any(r["config"].get("mix") for r in results)


def planned_files(runs: Iterable[Tuple[str, str]], mix: bool = False) -> List[str]:
    """Every file a report of ``runs`` ((trace, policy label) in the comparison's order) may
    write, in the order written: a time series for every run (only those of policies that
    record one are written) and a heat map for every distinct trace (none for a mix: its
    programs' heat maps are each trace's own, ``tierkit heatmap``)."""
    runs = list(runs)
    traces = [] if mix else list(dict.fromkeys(str(t) for t, _ in runs))
    return (FILES[:-1] + [_timeseries_name(i, str(p)) for i, (_, p) in enumerate(runs)]
            + [_heatmap_name(i, t) for i, t in enumerate(traces)] + FILES[-1:])


def check_out_dir(out: Path, force: bool, names: Sequence[str] = FILES) -> None:
    """Refuse to overwrite any of the report files ``names`` unless ``force``."""
    out = Path(out)
    try:
        is_file = not stat.S_ISDIR(os.stat(out).st_mode)
    except FileNotFoundError:
        is_file = False
    except OSError as e:  # a name too long, a parent that is a file...
        raise write_error(out, e) from None
    if is_file:
        raise TierkitError(f"{out}: exists and is not a directory")
    for name in names:
        check_new(out / name, force)


def short_labels(policies: Sequence[str]) -> dict:
    """A short label for each policy spec, for plot axes: the policy's name (before ':'),
    numbered where two specs share one; the report's legend table gives the full specs."""
    names = [str(p).split(":", 1)[0] for p in policies]
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for p, n in zip(policies, names):
        if names.count(n) > 1:
            seen[n] = seen.get(n, 0) + 1
            out[p] = f"{n} #{seen[n]}"
        else:
            out[p] = n
    return out


def policy_color(policy: str):
    """One colour per policy name, the same in every plot of every report: the registry's
    order into a palette of 29 distinguishable colours (tab20, then Set1); grey for a policy
    the registry does not know (a Python policy)."""
    import matplotlib

    from .deploy import _registry, name_of

    names = list(_registry())
    name = name_of(policy)
    if name not in names:
        return (0.5, 0.5, 0.5, 1.0)
    palette = [matplotlib.colormaps["tab20"](i) for i in range(20)] + [matplotlib.colormaps["Set1"](i) for i in range(9)]
    return palette[names.index(name) % len(palette)]


#: a runtime plot switches to a log axis when its largest bar is this many times its smallest
LOG_SPREAD = 5.0
#: hatches that tell the traces apart when several share a plot (colour is the policy's)
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++")


def _plot(df: pd.DataFrame, column: str, ylabel: str, title: str, ref: float | None = None, log_spread: float | None = None):
    """Bars per policy (its own colour, tierkit.report.policy_color), traces side by side
    (hatched apart). Policies that cannot be deployed carry their mark (HW: hardware only;
    FK: future knowledge; sim: simulation only). ``log_spread``: a log axis when the bars'
    largest is more than this many times their smallest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .deploy import MARKS

    traces = list(dict.fromkeys(df["trace"]))
    policies = list(dict.fromkeys(df["policy"]))
    labels = short_labels(policies)
    if "deploy" in df.columns:
        from .deploy import KEYS

        mark = {p: MARKS.get(KEYS.get(str(d), ""), "") for p, d in zip(df["policy"], df["deploy"])}
        labels = {p: (f"{lab} [{mark[p]}]" if mark.get(p) else lab) for p, lab in labels.items()}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(policies) * max(1, len(traces)) + 2), 4.4))
    width = 0.8 / max(1, len(traces))
    vals = df[column].astype(float)
    pos = vals[vals > 0]
    log = bool(log_spread and len(pos) and pos.max() > log_spread * pos.min())
    colors = [policy_color(p) for p in policies]
    for i, t in enumerate(traces):
        sub = df[df["trace"] == t].set_index("policy").reindex(policies)
        xs = [p + (i - (len(traces) - 1) / 2) * width for p in range(len(policies))]
        ax.bar(xs, sub[column].fillna(0).values, width=width, color=colors, edgecolor="black", linewidth=0.4,
               hatch=HATCHES[i % len(HATCHES)] if len(traces) > 1 else None, label=Path(t).name)
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8, linestyle="--")
    if log:
        ax.set_yscale("log")
        ylabel += " (log scale)"
    ax.set_xticks(range(len(policies)))
    ax.set_xticklabels([labels[p] for p in policies], rotation=35, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(traces) > 1:
        ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _plot_breakdown(bd: pd.DataFrame, title: str):
    """Where each run's time went (tierkit.verdict.breakdown, ms): one stacked bar per policy,
    a panel per trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = [c for c in bd.columns if c not in ("trace", "policy", "runtime")]
    traces = list(dict.fromkeys(bd["trace"]))
    n = max(len(bd[bd["trace"] == t]) for t in traces)
    fig, axes = plt.subplots(len(traces), 1, figsize=(9, (0.32 * n + 1.3) * len(traces) + 0.6), squeeze=False)
    for ax, t in zip(axes[:, 0], traces):
        sub = bd[bd["trace"] == t].iloc[::-1]
        labels = short_labels(list(bd[bd["trace"] == t]["policy"]))
        left = [0.0] * len(sub)
        for j, c in enumerate(parts):
            vals = list(sub[c])
            ax.barh(range(len(sub)), vals, left=left, color=f"C{j}", label=c)
            left = [a + b for a, b in zip(left, vals)]
        ax.set_yticks(range(len(sub)))
        ax.set_yticklabels([labels[p] for p in sub["policy"]], fontsize="small")
        ax.set_xlabel("ms")
        ax.set_title(t, fontsize="small")
        ax.grid(axis="x", alpha=0.3)
    # the legend under the panels, where it covers no bar
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize="small", loc="lower center", ncol=len(parts), frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
    return fig


#: Columns that are the time of a window: the x axis when a series has one.
TIME_COLUMNS = ("time_ms", "time_ns", "time_s")


def x_column(ts: pd.DataFrame) -> str:
    """The x axis of a time series: its time column if it has one, else its first column (the
    window's number)."""
    return next((c for c in TIME_COLUMNS if c in ts.columns), ts.columns[0])


def varying_columns(ts: pd.DataFrame) -> list:
    """The time-series columns whose values change, other than the window's number (the first
    column) and its time (the x axis)."""
    x = x_column(ts)
    return [c for c in ts.columns[1:] if c != x and ts[c].nunique(dropna=True) > 1]


def _plot_timeseries(ts: pd.DataFrame, title: str, color=None):
    """One panel per column that varies, against the window's time (or its number), like
    001's Figures 3 and 6."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, cols = x_column(ts), varying_columns(ts)
    fig, axes = plt.subplots(len(cols), 1, figsize=(8, 1.6 * len(cols) + 0.8), sharex=True, squeeze=False)
    for ax, c in zip(axes[:, 0], cols):
        ax.plot(ts[x], ts[c], linewidth=0.9, color=color)
        ax.set_ylabel(c, fontsize="small")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(x)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def heatmap_figure(c, title: str, max_rows: int = 512, max_cols: int = 512):
    """Cori's trace heat map (003 §3.3): pages (by address, rows) × periods (columns), the
    accesses of each page in each period as colour on a log scale. Pages and periods are
    summed into at most ``max_rows`` × ``max_cols`` cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm

    n_pages, n_periods = max(1, c.pages), max(1, c.periods)
    rank = np.empty(c.pages, dtype=np.int64)
    rank[np.argsort(c.page_addr, kind="stable")] = np.arange(c.pages)
    rows = min(max_rows, n_pages)
    cols = min(max_cols, n_periods)
    r = rank[c.page] * rows // n_pages
    k = c.period_of.astype(np.int64) * cols // n_periods
    grid = np.zeros((rows, cols), dtype=np.float64)
    np.add.at(grid, (r, k), c.count)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    masked = np.ma.masked_equal(grid, 0)
    im = ax.imshow(masked, aspect="auto", origin="lower", interpolation="nearest", cmap="viridis",
                   norm=LogNorm(vmin=max(1.0, masked.min() if masked.count() else 1.0), vmax=max(1.0, grid.max())),
                   extent=(0, n_periods, 0, n_pages))
    ax.set_xlabel(f"period ({c.period:,} accesses each)")
    ax.set_ylabel("page (by address)")
    ax.set_title(title)
    cb = fig.colorbar(im, ax=ax)
    per_cell = f" per cell ({n_pages / rows:.1f} pages)" if rows < n_pages else ""
    cb.set_label("accesses" + per_cell)
    fig.tight_layout()
    return fig


def heatmap_of(trace, period: int, format=None, cache=None, progress=None):
    """The heat map of ``trace`` at ``period`` accesses, as a figure titled with its size."""
    from .learned import counts

    c = counts(trace, period, format, cache, progress)
    return heatmap_figure(c, f"{Path(trace).name}: {c.pages:,} pages, {c.periods:,} periods")


def heatmap(trace, period: int, out: Path, force: bool = False, format=None, cache=None, progress=None) -> Path:
    """Write the heat map of ``trace`` at ``period`` accesses to the PNG ``out``."""
    from .output import check_new as check_new_file

    out = Path(out)
    check_new_file(out, force)
    write_bytes(out, _png(heatmap_of(trace, period, format, cache, progress)), force)
    return out


def _png(fig, close: bool = True) -> bytes:
    """The figure as PNG bytes; ``close``: release it from pyplot (a figure that is returned
    to the caller stays open)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    if close:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return buf.getvalue()


def _mark(out: Path, names: Sequence[str], done: Sequence[str]) -> None:
    """(Re)write the ``INCOMPLETE`` marker: what is written, what is missing, how to redo."""
    missing = [n for n in names if n not in done]
    write_text(out / MARKER, (
        "This tierkit report is INCOMPLETE: 'tierkit compare --out' was interrupted or failed while writing it.\n"
        f"Not written yet (time series only for policies that record one): {', '.join(missing)}\n"
        f"Written by this run: {', '.join(done) if done else 'none'}\n"
        "To redo it, run the same 'tierkit compare ... --out' command again with --force.\n"
        "This file is removed when every file of the report is written.\n"))


def write(df: pd.DataFrame, out: Path, force: bool = False, cache: str | None = None, sort: str = "runtime") -> List[Path]:
    """Write the report files for a :func:`tierkit.compare` result; returns their paths.
    ``cache``: the cache filter the traces were simulated through (for the heat maps).
    Until every file is written, ``out/INCOMPLETE`` says what is missing; with ``force``,
    planned files this report did not write (time series of an earlier report) are removed.
    ``sort``: the order of the page's table (tierkit.verdict.SORT_KEYS); the data files keep
    the comparison's order."""
    out = Path(out)
    results = df.attrs.get("results", [])
    names = planned_files(((r["trace"], r["policy"]) for r in results), _is_mix(results))
    check_out_dir(out, force, names)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(out, e) from None
    with sigterm_unwinds():
        written = _write_files(df, out, names, force, cache, sort)
        stale = [out / n for n in names if out / n not in written and (out / n).exists()]
        for p in [*stale, out / MARKER]:
            try:
                p.unlink()
            except OSError as e:
                raise TierkitError(f"{p}: cannot remove: {e.strerror or e}") from None
    return written


def _table_html(table: pd.DataFrame, grey: Sequence[bool]) -> str:
    """The results table as HTML, the rows flagged in ``grey`` with class ``inert``."""
    def cell(v) -> str:
        if isinstance(v, float):
            return "-" if v != v else f"{v:,.4g}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    grey = list(grey) + [False] * (len(table) - len(grey))
    inert = ' class="inert"'
    rows = "".join(f"<tr{inert if g else ''}>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>\n"
                   for row, g in zip(table.itertuples(index=False), grey))
    return f'<table class="dataframe">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}</tbody></table>'


def _write_files(df: pd.DataFrame, out: Path, names: Sequence[str], force: bool, cache: Optional[str], sort: str = "runtime") -> List[Path]:
    from . import verdict as vd

    results = df.attrs.get("results", [])
    done: List[str] = []
    _mark(out, names, done)

    def put(name: str, data: bytes) -> bytes:
        write_bytes(out / name, data, force)
        done.append(name)
        _mark(out, names, done)
        return data

    flat = df.copy()
    flat.attrs = {}
    csv = flat.copy()
    if "warnings" in csv.columns:
        # a list per row: JSON in the CSV's one cell, a list of strings in the Parquet file
        csv["warnings"] = [json.dumps(list(w)) for w in csv["warnings"]]
    put("results.csv", csv.to_csv(index=False).encode())
    pq = io.BytesIO()
    flat.to_parquet(pq, index=False)
    put("results.parquet", pq.getvalue())
    put("results.jsonl", "".join(json.dumps(r) + "\n" for r in results).encode())

    # the page shows the rows in `sort` order (the data files above keep the comparison's)
    order = vd.sort_results(results, sort)
    if len(results) == len(flat):
        # row i of the frame is results[i]
        rank = {id(r): k for k, r in enumerate(order)}
        shown = flat.iloc[sorted(range(len(flat)), key=lambda i: rank[id(results[i])])].reset_index(drop=True)
        shown_results = order  # the run of each row shown
    else:
        shown, shown_results = flat, []
    d = shown.copy()
    norm = next((c for c in d.columns if c.startswith("runtime_vs_")), None)
    d["hit_pct"] = 100 * d["fast_hit_ratio"]
    d["migrated_mib"] = d["migrated_bytes"] / (1 << 20)
    plat = d["platform"].iloc[0]
    timing = str(d["timing"].iloc[0])
    on = f"{plat}, {timing} timing"
    pngs = {}
    if norm:
        base = norm.removeprefix("runtime_vs_")
        pngs["runtime.png"] = put("runtime.png", _png(_plot(d, norm, f"runtime / {base} runtime", f"Runtime normalized to {base} ({on})", 1.0,
                                                    log_spread=LOG_SPREAD)))
    pngs["hit_ratio.png"] = put("hit_ratio.png", _png(_plot(d, "hit_pct", "fast-tier hits (%)", f"Fast-tier hit ratio ({on})")))
    pngs["migrated.png"] = put("migrated.png", _png(_plot(d, "migrated_mib", "migrated (MiB)", f"Bytes migrated ({on})")))
    bd = vd.breakdown_table(order)
    if bd is not None:
        pngs["breakdown.png"] = put("breakdown.png", _png(_plot_breakdown(bd, f"Where the time goes ({on})")))
    # per-window time series of the policies that record one, panels for the series that
    # vary, none for a policy that never acted
    from ._engine import timeseries

    for i, r in enumerate(results):
        ts = timeseries(r)
        if ts is None or ts.empty or vd.did_nothing(r) or not varying_columns(ts):
            continue
        name = _timeseries_name(i, r["policy"])
        pngs[name] = put(name, _png(_plot_timeseries(ts, f"{r['policy']} on {Path(r['trace']).name} ({timing} timing)",
                                                     policy_color(r["policy"]))))
    # Cori's heat map of each trace, at the period of a periodic scheduler in the comparison
    from .learned import counts, default_period

    for i, t in enumerate([] if _is_mix(results) else dict.fromkeys(r["trace"] for r in results)):
        rs = [r for r in results if r["trace"] == t]
        cfg0 = rs[0]["config"]
        path = cfg0["trace"]  # the file (a trace on several cores is labelled with them)
        period = next((_period_of(r) for r in rs if _period_of(r)), None) or default_period(path, cfg0.get("trace_format"), cache)
        name = _heatmap_name(i, t)
        heat = counts(path, period, cfg0.get("trace_format"), cache, False)
        pngs[name] = put(name, _png(heatmap_figure(heat, f"{Path(t).name}: access heat map")))

    from ._engine import representative

    rep = representative(results) if results else None
    cfg = rep["config"] if rep else {}
    # the table in readable units, columns that hold nothing left out
    units = {"trace": ("trace", None), "policy": ("policy", None), "runtime_ns": ("runtime (ms)", 1e-6),
             norm: (f"vs {norm.removeprefix('runtime_vs_')}" if norm else "", None), "fast_hit_ratio": ("fast-tier hits (%)", 100.0),
             "migrations": ("migrations", None), "migrated_bytes": ("migrated (MiB)", 1 / (1 << 20)),
             "migration_time_ns": ("migration time (ms)", 1e-6), "energy_j": ("energy (J)", None), "ipc": ("IPC", None),
             "activations": ("acted", None)}
    table = pd.DataFrame()
    for c, (label, scale) in units.items():
        if not c or c not in shown.columns:
            continue
        col = shown[c]
        if c not in ("trace", "policy") and (col.isna().all() or (c in ("energy_j", "migration_time_ns", "migrations", "migrated_bytes") and not (col.fillna(0) != 0).any())):
            continue
        table[label] = col * scale if scale is not None else col
    if "trace" in table.columns:
        table["trace"] = table["trace"].map(lambda t: Path(t).name)
        if table["trace"].nunique() == 1:
            table = table.drop(columns=["trace"])
    warned = [(Path(t).name, p, w) for t, p, ws in zip(shown["trace"], shown["policy"], shown.get("warnings", [[]] * len(shown))) for w in ws]
    if "warnings" in shown.columns:
        table["policy"] = [f"{p} (!)" if len(ws) else p for p, ws in zip(table["policy"], shown["warnings"])]
    if "acted" in table.columns:
        table["acted"] = [("-" if pd.isna(a) else f"{int(a):,}") for a in table["acted"]]
    if "deploy" in shown.columns:
        table["deploys as"] = list(shown["deploy"])
    # rows whose policy never acted: greyed, with the --time-scale / --repeat at which it would
    inert = [vd.did_nothing(r) for r in shown_results] or [False] * len(table)
    if any(inert):
        table["acts at"] = [(vd.acts_at_text(r) or "see --repeat / --time-scale") if k else "" for r, k in zip(shown_results, inert)]
    verdict_html = "".join(f"<p class=\"verdict\">{html.escape(x)}</p>" for x in vd.verdict(results))
    legend = {p: lab for p, lab in short_labels(list(dict.fromkeys(shown["policy"]))).items() if p != lab}
    legend_html = ("<p>Plot labels: " + "; ".join(f"<b>{html.escape(lab)}</b> = <code>{html.escape(p)}</code>" for p, lab in legend.items())
                   + ".</p>") if legend else ""
    bd_html = ""
    if bd is not None:
        bdt = bd.copy()
        if bdt["trace"].nunique() == 1:
            bdt = bdt.drop(columns=["trace"])
        bd_html = ("<h2>Where the time goes (ms)</h2>\n<p>The runtime's parts as the " + html.escape(timing)
                   + " timing model adds them up (docs/policies.md, \"Reading a comparison\").</p>\n"
                   + bdt.to_html(index=False, float_format=lambda v: f"{v:,.3f}", border=0))
    # each trace's own tiers (capacities are resolved per trace: a fraction of its footprint)
    tiers_html = ""
    for t in dict.fromkeys(r["trace"] for r in results):
        rt = representative([r for r in results if r["trace"] == t])
        tiers_html += (f"<li><b>{html.escape(Path(t).name)}</b>: " + ", ".join(
            f"{html.escape(x['name'])} {x['capacity_pages']:,} pages" if x["capacity_pages"] is not None else f"{html.escape(x['name'])} unlimited"
            for x in rt["stats"]["platform"]["tiers"]) + "</li>")
    warn_html = (
        "<h2>Warnings</h2>\n<p>Results marked (!) cannot show what their policy does; the policy's "
        "<code>activations</code> count how often its periodic work ran.</p>\n<ul class=\"warnings\">"
        + "".join(f"<li><b>{html.escape(t)}</b>: {html.escape(w)}</li>" for t, _, w in warned)
        + "</ul>"
        if warned else ""
    )
    imgs = "\n".join(
        f'<figure><img alt="{html.escape(n)}" src="data:image/png;base64,{base64.b64encode(b).decode()}"></figure>' for n, b in pngs.items()
    )
    digests = {Path(r["trace"]).name: r["config"].get("trace_digest") for r in results}
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tierkit comparison: {html.escape(plat)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }} td:first-child, td:nth-child(2) {{ text-align: left; }}
figure {{ display: inline-block; margin: 0.5em; }} img {{ max-width: 100%; }}
code {{ background: #f5f5f5; padding: 0 0.2em; }}
ul.warnings li {{ color: #8a4b00; }}
tr.inert td {{ color: #999; background: #fafafa; }}
p.verdict {{ font-size: 1.05em; border-left: 3px solid #4a7; padding-left: 0.6em; }}
</style></head><body>
<h1>Tiering policies on {html.escape(plat)}</h1>
<p>{len(flat)} runs, {flat['trace'].nunique()} trace(s), {flat['policy'].nunique()} policies,
{html.escape(timing)} timing model, tierkit {html.escape(str(cfg.get('tierkit_version', '')))}.</p>
{verdict_html}
<h2>Tiers</h2>
<ul>{tiers_html}</ul>
<h2>Results ({html.escape(timing)} timing, sorted by {html.escape(sort)})</h2>
{_table_html(table, inert)}
{warn_html}
{bd_html}
<h2>Plots</h2>
{legend_html}
{imgs}
<h2>Reproduce</h2>
<p>Trace digests (BLAKE3): {"; ".join(f"<code>{html.escape(k)}</code> {html.escape(str(v))}" for k, v in digests.items())}.
The exact configuration of every run (platform with resolved capacities, policy parameters) is in
<code>results.jsonl</code>.</p>
</body></html>
"""
    put("index.html", page.encode())
    return [out / n for n in done]
