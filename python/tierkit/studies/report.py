"""The report of a study (``tierkit sweep``): from the result store's table, without running
anything: the best policy of every cell, runtime against capacity per policy, and heat maps of
policy × trace (docs/sweep.md, "The report")."""
from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import pandas as pd

    from .core import Study

GROUP = ["grid", "trace", "platform", "fast_capacity", "timing", "repeat", "time_scale"]

#: The columns an analysis' table shows (those its rows have), by task.
ANALYSIS_COLUMNS = {
    "tune": ["grid", "trace", "platform", "fast_capacity", "policy", "accesses", "dominant_reuse", "trials_count",
             "chosen_period", "best_period", "cori_trials_to_best", "cori_slowdown_at_cori_trials",
             "base-left_trials_to_best", "base-right_trials_to_best", "base-random_trials_to_best",
             "base-left_slowdown_at_cori_trials_to_best", "base-right_slowdown_at_cori_trials_to_best",
             "base-random_slowdown_at_cori_trials_to_best"],
    "kleio": ["grid", "trace", "platform", "fast_capacity", "policy", "period", "periods", "pages_fraction",
              "pages_selected", "models", "train_seconds", "accuracy", "history_accuracy", "accessed_recall",
              "history_accessed_recall", "inference_ns_per_boundary", "break_even_period",
              "gap_bridged_no_fallback_pct", "gap_bridged_future_fallback_pct", "gap_bridged_future_hybrid_pct",
              "gap_bridged_untrained_pct", "gap_bridged_idle_pct", "gap_bridged_idle_no_fallback_pct",
              "gap_bridged_free_inference_pct", "gap_bridged_pct"],
}
ANALYSIS_COLUMNS["kleoniki"] = ANALYSIS_COLUMNS["kleio"][:9] + ["pages_per_model", "distinct_patterns", "cori_period",
                                                                "gap_bridged_pct"]


def _capacity_value(c: str) -> Optional[float]:
    try:
        return float(c[:-1]) / 100 if c.endswith("%") else float(c)
    except ValueError:
        return None


def _panel_keys(df: "pd.DataFrame", keys: list[str]) -> list[str]:
    """Panels split by grid too when the study has several."""
    return (["grid"] if "grid" in df and df["grid"].nunique() > 1 else []) + keys


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
    keys = _panel_keys(ok, ["trace", "platform", "timing"])
    panels = list(ok.groupby(keys, sort=False))
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows + 0.8), squeeze=False)
    for ax, (k, g) in zip(axes.flat, panels):
        *gr, tr, pl, tm = k
        g = g[(g["repeat"] == g["repeat"].iloc[0]) & (g["time_scale"] == g["time_scale"].iloc[0])]
        for i, (pol, gp) in enumerate(g.groupby("policy", sort=False)):
            gp = gp.sort_values("cap")
            ax.plot(gp["cap"], gp[y] / (1e6 if y == "runtime_ns" else 1), marker="o", markersize=3,
                    linewidth=1, label=pol, color=f"C{i % 10}", linestyle="-" if i < 10 else "--")
        ax.set_title(f"{str(gr[0]) + ': ' if gr else ''}{tr} on {pl} ({tm} timing)", fontsize="small")
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
    panels = list(ok.groupby(_panel_keys(ok, ["platform", "fast_capacity", "timing"]), sort=False))[:6]
    if not panels:
        return None
    n_pol = ok["policy"].nunique()
    n_tr = ok["trace"].nunique()
    cols = min(2, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(5.0, 1.1 * n_tr + 3.5) * cols, (0.35 * n_pol + 1.6) * rows),
                             squeeze=False)
    for ax, (k, g) in zip(axes.flat, panels):
        *gr, pl, cap, tm = k
        g = g[(g["repeat"] == g["repeat"].iloc[0]) & (g["time_scale"] == g["time_scale"].iloc[0])]
        m = g.pivot_table(index="policy", columns="trace", values=col, sort=False)
        im = ax.imshow(m.to_numpy(), cmap="RdYlGn_r", vmin=min(0.5, float(np.nanmin(m.to_numpy()))),
                       vmax=max(1.5, float(np.nanmax(m.to_numpy()))), aspect="auto")
        ax.set_xticks(range(len(m.columns)), [str(c) for c in m.columns], rotation=30, ha="right", fontsize="small")
        ax.set_yticks(range(len(m.index)), list(m.index), fontsize="small")
        for (i, j), v in np.ndenumerate(m.to_numpy()):
            if v == v:
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize="x-small")
        ax.set_title(f"{str(gr[0]) + ': ' if gr else ''}{pl}, capacity {cap}, {tm}: runtime / {baseline}", fontsize="small")
        fig.colorbar(im, ax=ax, fraction=0.04)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _table(df: "pd.DataFrame") -> str:
    return df.to_html(index=False, float_format=lambda v: f"{v:,.4g}", border=0, classes="t")


def write(df: "pd.DataFrame", study: "Study", out: Path) -> list[Path]:
    """``out/index.html`` and its plots; returns the files written."""
    from ..output import write_bytes, write_text
    from ..report import _png

    out = Path(out)
    written = []
    full = df
    df = df[df["task"] == "simulate"] if "task" in df else df
    figs = {"capacity.png": capacity_figure(df, study.baseline), "heatmap.png": heatmap_figure(df, study.baseline)}
    imgs = []
    for name, fig in figs.items():
        if fig is not None:
            write_bytes(out / name, _png(fig), True)
            written.append(out / name)
            imgs.append(name)
    best = best_table(df, study.baseline)
    failed = full[full["error"].notna()][["grid", "trace", "platform", "fast_capacity", "timing", "policy", "error"]]
    n_ok = int(full["error"].isna().sum())
    df = full if not len(df) else df
    parts = [
        "<!doctype html><meta charset=utf-8><title>", html.escape(study.name), "</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table.t{border-collapse:collapse;font-size:13px}table.t td,table.t th{border:1px solid #ccc;padding:2px 6px}"
        "table.t th{background:#eee}img{max-width:100%}</style>",
        f"<h1>Study {html.escape(study.name)}</h1>",
        f"<p>{len(full):,} cells ({n_ok:,} ran, {len(full) - n_ok:,} failed): {df['trace'].nunique()} trace(s) × "
        f"{df['platform'].nunique()} platform(s) × {df['fast_capacity'].nunique()} capacit{'y' if df['fast_capacity'].nunique() == 1 else 'ies'} × "
        f"{df['timing'].nunique()} timing model(s) × {df['policy'].nunique()} policies; study file "
        f"<code>{html.escape(study.source)}</code>; the data: <code>results.parquet</code>, <code>results.jsonl</code>.</p>",
    ]
    if "task" not in full or (full["task"] == "simulate").any():
        parts += ["<h2>The best policy of each cell</h2>",
                  "<p>margin: how much faster than the runner-up (%).</p>",
                  _table(best) if len(best) else "<p>No cell ran.</p>"]
    for kind, title in (("tune", "Cori: period tuning"), ("kleio", "Kleio"), ("kleoniki", "Kleoniki")):
        rows = full[(full["task"] == kind) & full["error"].isna()] if "task" in full else full.iloc[:0]
        if len(rows):
            cols = [c for c in ANALYSIS_COLUMNS[kind] if c in rows and rows[c].notna().any()]
            parts += [f"<h2>{title}</h2>", _table(rows[cols])]
    for name in imgs:
        title = {"capacity.png": "Runtime against the fast tier's capacity", "heatmap.png": "Policy × trace"}[name]
        parts += [f"<h2>{title}</h2>", f'<img src="{name}" alt="{title}">']
    if len(failed):
        parts += ["<h2>Failed cells</h2>", "<p>Each failed cell's error; the next sweep tries them again.</p>",
                  _table(failed)]
    write_text(out / "index.html", "".join(parts), True)
    written.append(out / "index.html")
    return written
