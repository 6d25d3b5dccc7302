"""The report of a study (``tierkit sweep``): from the result store's table, without running
anything: the best policy of every cell, runtime against capacity per policy, and heat maps of
policy × trace (docs/sweep.md, "The report")."""
from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pandas as pd

    from .studies import Study

GROUP = ["trace", "platform", "fast_capacity", "timing", "repeat", "time_scale"]


def _capacity_value(c: str) -> Optional[float]:
    try:
        return float(c)
    except ValueError:
        return None


def best_table(df: "pd.DataFrame", baseline: Optional[str]) -> "pd.DataFrame":
    """Per cell group (trace, platform, capacity, timing, repeat, time scale): the fastest
    policy, its runtime, its margin over the runner-up and its runtime against the baseline."""
    import pandas as pd

    ok = df[df["error"].isna() & df["runtime_ns"].notna()]
    rows = []
    for key, g in ok.groupby(GROUP, sort=False):
        g = g.sort_values(["runtime_ns", "policy"])
        best = g.iloc[0]
        row = dict(zip(GROUP, key))
        row.update({"best": best["policy"], "runtime_ms": best["runtime_ns"] / 1e6})
        if len(g) > 1:
            second = g.iloc[1]
            row["runner_up"] = second["policy"]
            row["margin_pct"] = 100 * (second["runtime_ns"] - best["runtime_ns"]) / second["runtime_ns"]
        if baseline and f"runtime_vs_{baseline}" in g:
            row[f"vs_{baseline}"] = best[f"runtime_vs_{baseline}"]
        rows.append(row)
    return pd.DataFrame(rows)


def capacity_figure(df: "pd.DataFrame", baseline: Optional[str]):
    """Runtime (against the baseline where there is one) over the fast tier's capacity, a line
    per policy, a panel per trace × platform × timing; None when the study has one capacity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = df[df["error"].isna() & df["runtime_ns"].notna()].copy()
    ok["cap"] = ok["fast_capacity"].map(_capacity_value)
    ok = ok[ok["cap"].notna()]
    if ok["cap"].nunique() < 2:
        return None
    y = f"runtime_vs_{baseline}" if baseline and f"runtime_vs_{baseline}" in ok else "runtime_ns"
    panels = list(ok.groupby(["trace", "platform", "timing"], sort=False))
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows + 0.8), squeeze=False)
    for ax, ((tr, pl, tm), g) in zip(axes.flat, panels):
        g = g[(g["repeat"] == g["repeat"].iloc[0]) & (g["time_scale"] == g["time_scale"].iloc[0])]
        for i, (pol, gp) in enumerate(g.groupby("policy", sort=False)):
            gp = gp.sort_values("cap")
            ax.plot(gp["cap"], gp[y] / (1e6 if y == "runtime_ns" else 1), marker="o", markersize=3,
                    linewidth=1, label=pol, color=f"C{i % 10}", linestyle="-" if i < 10 else "--")
        ax.set_title(f"{tr} on {pl} ({tm} timing)", fontsize="small")
        ax.set_xlabel("fast-tier capacity (share of the footprint)")
        ax.set_ylabel(f"runtime / {baseline}" if y != "runtime_ns" else "runtime (ms)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize="small", frameon=False)
    fig.tight_layout(rect=(0, 0.1 + 0.02 * (len(labels) // 5), 1, 1))
    return fig


def heatmap_figure(df: "pd.DataFrame", baseline: Optional[str]):
    """Policy × trace, the runtime against the baseline as colour and number, a panel per
    platform × capacity × timing (at most 6: the first ones)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if not baseline or f"runtime_vs_{baseline}" not in df:
        return None
    col = f"runtime_vs_{baseline}"
    ok = df[df["error"].isna() & df[col].notna() & (df["policy"] != baseline)]
    panels = list(ok.groupby(["platform", "fast_capacity", "timing"], sort=False))[:6]
    if not panels:
        return None
    n_pol = ok["policy"].nunique()
    n_tr = ok["trace"].nunique()
    cols = min(2, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(5.0, 1.1 * n_tr + 3.5) * cols, (0.35 * n_pol + 1.6) * rows),
                             squeeze=False)
    for ax, ((pl, cap, tm), g) in zip(axes.flat, panels):
        g = g[(g["repeat"] == g["repeat"].iloc[0]) & (g["time_scale"] == g["time_scale"].iloc[0])]
        m = g.pivot_table(index="policy", columns="trace", values=col, sort=False)
        im = ax.imshow(m.to_numpy(), cmap="RdYlGn_r", vmin=min(0.5, float(np.nanmin(m.to_numpy()))),
                       vmax=max(1.5, float(np.nanmax(m.to_numpy()))), aspect="auto")
        ax.set_xticks(range(len(m.columns)), [str(c) for c in m.columns], rotation=30, ha="right", fontsize="small")
        ax.set_yticks(range(len(m.index)), list(m.index), fontsize="small")
        for (i, j), v in np.ndenumerate(m.to_numpy()):
            if v == v:
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize="x-small")
        ax.set_title(f"{pl}, capacity {cap}, {tm}: runtime / {baseline}", fontsize="small")
        fig.colorbar(im, ax=ax, fraction=0.04)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _table(df: "pd.DataFrame") -> str:
    return df.to_html(index=False, float_format=lambda v: f"{v:,.4g}", border=0, classes="t")


def write(df: "pd.DataFrame", study: "Study", out: Path) -> list[Path]:
    """``out/index.html`` and its plots; returns the files written."""
    from .output import write_bytes, write_text
    from .report import _png

    out = Path(out)
    written = []
    figs = {"capacity.png": capacity_figure(df, study.baseline), "heatmap.png": heatmap_figure(df, study.baseline)}
    imgs = []
    for name, fig in figs.items():
        if fig is not None:
            write_bytes(out / name, _png(fig), True)
            written.append(out / name)
            imgs.append(name)
    best = best_table(df, study.baseline)
    failed = df[df["error"].notna()][["trace", "platform", "fast_capacity", "timing", "policy", "error"]]
    n_ok = int(df["error"].isna().sum())
    parts = [
        "<!doctype html><meta charset=utf-8><title>", html.escape(study.name), "</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table.t{border-collapse:collapse;font-size:13px}table.t td,table.t th{border:1px solid #ccc;padding:2px 6px}"
        "table.t th{background:#eee}img{max-width:100%}</style>",
        f"<h1>Study {html.escape(study.name)}</h1>",
        f"<p>{len(df):,} cells ({n_ok:,} ran, {len(df) - n_ok:,} failed): {df['trace'].nunique()} trace(s) × "
        f"{df['platform'].nunique()} platform(s) × {df['fast_capacity'].nunique()} capacit{'y' if df['fast_capacity'].nunique() == 1 else 'ies'} × "
        f"{df['timing'].nunique()} timing model(s) × {df['policy'].nunique()} policies; study file "
        f"<code>{html.escape(study.source)}</code>; the data: <code>results.parquet</code>, <code>results.jsonl</code>.</p>",
        "<h2>The best policy of each cell</h2>",
        "<p>margin: how much faster than the runner-up (%).</p>",
        _table(best) if len(best) else "<p>No cell ran.</p>",
    ]
    for name in imgs:
        title = {"capacity.png": "Runtime against the fast tier's capacity", "heatmap.png": "Policy × trace"}[name]
        parts += [f"<h2>{title}</h2>", f'<img src="{name}" alt="{title}">']
    if len(failed):
        parts += ["<h2>Failed cells</h2>", "<p>Each failed cell's error; the next sweep tries them again.</p>",
                  _table(failed)]
    write_text(out / "index.html", "".join(parts), True)
    written.append(out / "index.html")
    return written
