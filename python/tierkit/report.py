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
FILES = ["results.csv", "results.parquet", "results.jsonl", "runtime.png", "hit_ratio.png", "migrated.png", "index.html"]
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


def planned_files(runs: Iterable[Tuple[str, str]]) -> List[str]:
    """Every file a report of ``runs`` ((trace, policy label) in the comparison's order) may
    write, in the order written: a time series for every run (only those of policies that
    record one are written) and a heat map for every distinct trace."""
    runs = list(runs)
    traces = list(dict.fromkeys(str(t) for t, _ in runs))
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


def _plot(df: pd.DataFrame, column: str, ylabel: str, title: str, ref: float | None = None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(dict.fromkeys(df["trace"]))
    policies = list(dict.fromkeys(df["policy"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(policies) * max(1, len(traces)) + 2), 4.2))
    width = 0.8 / max(1, len(traces))
    for i, t in enumerate(traces):
        sub = df[df["trace"] == t].set_index("policy").reindex(policies)
        xs = [p + (i - (len(traces) - 1) / 2) * width for p in range(len(policies))]
        ax.bar(xs, sub[column].fillna(0).values, width=width, label=Path(t).name)
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(policies)))
    ax.set_xticklabels(policies, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(traces) > 1:
        ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _plot_timeseries(ts: pd.DataFrame, title: str):
    """One panel per column against the first (the window), like 001's Figures 3 and 6."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, cols = ts.columns[0], list(ts.columns[1:])
    fig, axes = plt.subplots(len(cols), 1, figsize=(8, 1.6 * len(cols) + 0.8), sharex=True, squeeze=False)
    for ax, c in zip(axes[:, 0], cols):
        ax.plot(ts[x], ts[c], linewidth=0.9)
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


def heatmap(trace, period: int, out: Path, force: bool = False, format=None, cache=None, progress=None) -> Path:
    """Write the heat map of ``trace`` at ``period`` accesses to the PNG ``out``."""
    from .api import check_new_file
    from .kleio import counts

    out = Path(out)
    check_new_file(out, force)
    c = counts(trace, period, format, cache, progress)
    write_bytes(out, _png(heatmap_figure(c, f"{Path(trace).name}: {c.pages:,} pages, {c.periods:,} periods")), force)
    return out


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
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


def write(df: pd.DataFrame, out: Path, force: bool = False, cache: str | None = None) -> List[Path]:
    """Write the report files for a :func:`tierkit.compare` result; returns their paths.
    ``cache``: the cache filter the traces were simulated through (for the heat maps).
    Until every file is written, ``out/INCOMPLETE`` says what is missing; with ``force``,
    planned files this report did not write (time series of an earlier report) are removed."""
    out = Path(out)
    results = df.attrs.get("results", [])
    names = planned_files((r["trace"], r["policy"]) for r in results)
    check_out_dir(out, force, names)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(out, e) from None
    with sigterm_unwinds():
        written = _write_files(df, out, names, force, cache)
        stale = [out / n for n in names if out / n not in written and (out / n).exists()]
        for p in [*stale, out / MARKER]:
            try:
                p.unlink()
            except OSError as e:
                raise TierkitError(f"{p}: cannot remove: {e.strerror or e}") from None
    return written


def _write_files(df: pd.DataFrame, out: Path, names: Sequence[str], force: bool, cache: Optional[str]) -> List[Path]:
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

    d = flat.copy()
    norm = next((c for c in d.columns if c.startswith("runtime_vs_")), None)
    d["hit_pct"] = 100 * d["fast_hit_ratio"]
    d["migrated_mib"] = d["migrated_bytes"] / (1 << 20)
    plat = d["platform"].iloc[0]
    pngs = {}
    if norm:
        base = norm.removeprefix("runtime_vs_")
        pngs["runtime.png"] = put("runtime.png", _png(_plot(d, norm, f"runtime / {base} runtime", f"Runtime normalized to {base} ({plat})", 1.0)))
    pngs["hit_ratio.png"] = put("hit_ratio.png", _png(_plot(d, "hit_pct", "fast-tier hits (%)", f"Fast-tier hit ratio ({plat})")))
    pngs["migrated.png"] = put("migrated.png", _png(_plot(d, "migrated_mib", "migrated (MiB)", f"Bytes migrated ({plat})")))
    # per-window time series of the policies that record one
    from .api import timeseries

    for i, r in enumerate(results):
        ts = timeseries(r)
        if ts is None or ts.empty:
            continue
        name = _timeseries_name(i, r["policy"])
        pngs[name] = put(name, _png(_plot_timeseries(ts, f"{r['policy']} on {Path(r['trace']).name}")))
    # Cori's heat map of each trace, at the period of a periodic scheduler in the comparison
    from .kleio import counts, default_period

    for i, t in enumerate(dict.fromkeys(r["trace"] for r in results)):
        rs = [r for r in results if r["trace"] == t]
        cfg0 = rs[0]["config"]
        period = next((_period_of(r) for r in rs if _period_of(r)), None) or default_period(t, cfg0.get("trace_format"), cache)
        name = _heatmap_name(i, t)
        c = counts(t, period, cfg0.get("trace_format"), cache, False)
        pngs[name] = put(name, _png(heatmap_figure(c, f"{Path(t).name}: access heat map")))

    from .api import representative

    rep = representative(results) if results else None
    cfg = rep["config"] if rep else {}
    tiers = rep["stats"]["platform"]["tiers"] if rep else []
    table_cols = ["trace", "policy", "runtime_ns", norm, "fast_hit_ratio", "migrations", "migrated_bytes", "migration_time_ns", "energy_j", "ipc",
                  "activations"]
    table = flat[[c for c in table_cols if c and c in flat.columns]].copy()
    table["trace"] = table["trace"].map(lambda t: Path(t).name)
    warned = [(Path(t).name, p, w) for t, p, ws in zip(flat["trace"], flat["policy"], flat.get("warnings", [[]] * len(flat))) for w in ws]
    if "warnings" in flat.columns:
        table["policy"] = [f"{p} (!)" if len(ws) else p for p, ws in zip(table["policy"], flat["warnings"])]
    if "activations" in table.columns:
        table["activations"] = table["activations"].astype(object).where(table["activations"].notna(), "-")
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
</style></head><body>
<h1>Tiering policies on {html.escape(plat)}</h1>
<p>{len(flat)} runs, {flat['trace'].nunique()} trace(s), {flat['policy'].nunique()} policies,
{html.escape(str(flat['timing'].iloc[0]))} timing model, tierkit {html.escape(str(cfg.get('tierkit_version', '')))}.</p>
<h2>Tiers</h2>
<ul>{''.join(f"<li>{html.escape(t['name'])}: {t['capacity_pages'] if t['capacity_pages'] is not None else 'unlimited'} pages</li>" for t in tiers)}</ul>
<h2>Results</h2>
{table.to_html(index=False, float_format=lambda v: f"{v:,.6g}", border=0)}
{warn_html}
<h2>Plots</h2>
{imgs}
<h2>Reproduce</h2>
<p>Trace digests (BLAKE3): {"; ".join(f"<code>{html.escape(k)}</code> {html.escape(str(v))}" for k, v in digests.items())}.
The exact configuration of every run (platform with resolved capacities, policy parameters) is in
<code>results.jsonl</code>.</p>
</body></html>
"""
    put("index.html", page.encode())
    return [out / n for n in done]
