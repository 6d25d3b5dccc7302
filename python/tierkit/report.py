"""``compare --out DIR``: results as CSV and Parquet, PNG plots and one self-contained HTML
page (plots embedded), so a comparison can be archived, diffed and shown."""
from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import List

import pandas as pd

from ._core import TierkitError

FILES = ["results.csv", "results.parquet", "results.jsonl", "runtime.png", "hit_ratio.png", "migrated.png", "index.html"]


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


def check_out_dir(out: Path, force: bool) -> None:
    """Refuse to overwrite any report file unless ``force``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise TierkitError(f"{out}: exists and is not a directory")
    clash = [f for f in FILES if (out / f).exists()]
    if clash and not force:
        raise TierkitError(f"{out / clash[0]}: file exists (use --force to overwrite)")


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
    _save(heatmap_figure(c, f"{Path(trace).name}: {c.pages:,} pages, {c.periods:,} periods"), out)
    return out


def _save(fig, path: Path) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    data = buf.getvalue()
    path.write_bytes(data)
    return data


def write(df: pd.DataFrame, out: Path, force: bool = False, cache: str | None = None) -> List[Path]:
    """Write the report files for a :func:`tierkit.compare` result; returns their paths.
    ``cache``: the cache filter the traces were simulated through (for the heat maps)."""
    out = Path(out)
    check_out_dir(out, force)
    out.mkdir(parents=True, exist_ok=True)
    results = df.attrs.get("results", [])
    flat = df.copy()
    flat.attrs = {}
    written = []
    csv = flat.copy()
    if "warnings" in csv.columns:
        # a list per row: JSON in the CSV's one cell, a list of strings in the Parquet file
        csv["warnings"] = [json.dumps(list(w)) for w in csv["warnings"]]
    csv.to_csv(out / "results.csv", index=False)
    flat.to_parquet(out / "results.parquet", index=False)
    with open(out / "results.jsonl", "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    written += [out / "results.csv", out / "results.parquet", out / "results.jsonl"]

    d = flat.copy()
    norm = next((c for c in d.columns if c.startswith("runtime_vs_")), None)
    d["hit_pct"] = 100 * d["fast_hit_ratio"]
    d["migrated_mib"] = d["migrated_bytes"] / (1 << 20)
    plat = d["platform"].iloc[0]
    pngs = {}
    if norm:
        base = norm.removeprefix("runtime_vs_")
        pngs["runtime.png"] = _save(_plot(d, norm, f"runtime / {base} runtime", f"Runtime normalized to {base} ({plat})", 1.0), out / "runtime.png")
    pngs["hit_ratio.png"] = _save(_plot(d, "hit_pct", "fast-tier hits (%)", f"Fast-tier hit ratio ({plat})"), out / "hit_ratio.png")
    pngs["migrated.png"] = _save(_plot(d, "migrated_mib", "migrated (MiB)", f"Bytes migrated ({plat})"), out / "migrated.png")
    # per-window time series of the policies that record one
    from .api import timeseries

    for i, r in enumerate(results):
        ts = timeseries(r)
        if ts is None or ts.empty:
            continue
        name = f"timeseries-{i}-{_slug(r['policy'])}.png"
        pngs[name] = _save(_plot_timeseries(ts, f"{r['policy']} on {Path(r['trace']).name}"), out / name)
    # Cori's heat map of each trace, at the period of a periodic scheduler in the comparison
    from .kleio import counts, default_period

    for i, t in enumerate(dict.fromkeys(r["trace"] for r in results)):
        rs = [r for r in results if r["trace"] == t]
        cfg0 = rs[0]["config"]
        period = next((_period_of(r) for r in rs if _period_of(r)), None) or default_period(t, cfg0.get("trace_format"), cache)
        name = f"heatmap-{i}-{_slug(Path(t).name)}.png"
        c = counts(t, period, cfg0.get("trace_format"), cache, False)
        pngs[name] = _save(heatmap_figure(c, f"{Path(t).name}: access heat map"), out / name)
    written += [out / n for n in pngs]

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
    (out / "index.html").write_text(page)
    written.append(out / "index.html")
    return written
