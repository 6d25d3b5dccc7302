#!/usr/bin/env python3
"""The study of read/write-aware and OS-level tiering on DRAM + Optane DCPMM
(docs/experiments.md, "HyPlacer and the policies real kernels ship"): 004 §3's bandwidth
balance, and 004 §5's comparison of HyPlacer against Linux's tiered AutoNUMA, TPP, Nimble,
Memos, DAMON tiering, CLOCK-DWF (the partitioned policy) and Memory Mode, at three
footprints; redone with the two sound ways of running long-period policies on short traces
(docs/models.md), and a sensitivity table over the time scale.

Setup. Platform: `dram-dcpmm` (one socket of 004's machine) with each tier's bandwidth
divided by the socket's 16 cores (`dram-dcpmm-core16`, written into DIR): 004 runs 32
threads on the 16 cores of the socket, each with its share of the bandwidth; a trace is one
thread of such a program, so one core's share is what one trace may use. Timing: detailed
(out-of-order core, bandwidth queues, loaded latency). Workloads at size small through the
`small` cache, chosen for their read/write ratios after the cache, as 004 Table 3 chose
NPB's: spmv (CG-like, about 16R:1W), stencil (MG-like, 3.6R:1W), bfs (BT's 3.2R:1W),
backprop (FT-like, 1.6R:1W); and two a review of the first study used: phases (a moving hot set) and
rwmix (random, half stores: the write-heavy case). Footprints as 004 §5.1: DRAM holds 1.25x
the footprint (small: fits), 1/1.5 of it (medium) and 1/3.5 (large).

Time. Each trace covers some tens of milliseconds of simulated time, where 004's runs take
minutes and the policies act every 0.1-40 s. Every policy runs with its real time constants
(the kernel's and the papers' defaults) and one of:
  - time-scale K (`--time-scale`): every time constant and per-event cost of the policy and
    the platform's migration costs divided by K (K = 1, 10, 100, 1000); the main table is K =
    1000, where each policy acts about as often per run as on the real machine;
  - repeat (`--repeat 10 --time-scale 100`): the trace replayed 10 times as one run, so the
    policies act as often as at K = 1000 with costs only 100x off;
  - periods-only: the study's first method, every period divided by 1000 but only
    DAMON's per-event cost, kept to show the bias the review found.
Sizes follow the footprint, not the time: NUMA balancing scans 1 MB per window, Linux's
watermarks round to 0 (min_free_kbytes=4), HyPlacer moves at most 131 pages and Memos 100
per activation, DAMON's quotas are 200 KB per reset interval.

The runs are the cells of the study file experiments/tiering/study.yaml (its grids: static,
scales, periods-only, repeat, balance), run by `tierkit sweep`; this script makes the tables
from the sweep's store:

    tierkit sweep experiments/tiering/study.yaml --out DIR     (make experiments-tiering)
    experiments/os_tiering.py DIR

Writes DIR/results.csv, DIR/results.json, DIR/sensitivity.csv, DIR/balance.csv, DIR/results.md
and DIR/results.png; the sweep takes about ten minutes on 2 cores once the traces are recorded.

The policies' amounts (the study file's specs): Linux's watermarks are a fraction of a percent
of a 32 GiB node (min_free_kbytes is sqrt(16 x memory KiB), spread over the nodes): on a DRAM
of a few hundred pages they round to 0, as min_free_kbytes=4 gives here. NUMA balancing scans
256 MB per window, about 1% of 004's 20-150 GB footprints: 1 MB (256 pages) is about as large a
share of these few MiB. HyPlacer's 128K pages and Memos' 100,000 pages per activation, and
DAMON's 200 MB per quota interval, are the first study's amounts (a thousandth). Memos runs as
004 §5.1 ran it: 4 s periods.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

#: the study's main time scale (1 s of the real machine = 1 ms here)
MAIN_SCALE = 1000
#: the repeat variant: replays, and the time scale that gives as many activations as MAIN_SCALE
REPEAT, REPEAT_SCALE = 10, 100
#: name: (NPB program it stands for, its read/write ratio in 004 Table 3)
WORKLOADS = {"spmv": ("CG", ">60R:1W"), "stencil": ("MG", "4R:1W"), "bfs": ("BT", "3.5R:1W"), "backprop": ("FT", "1.7R:1W"),
             "phases": ("-", "-"), "rwmix": ("-", "-")}
#: the study's capacities (DRAM as a share of the footprint, 004 §5.1) and their footprint labels
FOOTPRINTS = {"125%": "small", "0.6666666666666666": "medium", "0.2857142857142857": "large"}
#: DCPMM's share of the pages in the bandwidth-balance grid (004 §3.3: 100% DRAM, 95%, 90%, ...)
BALANCE_WEIGHTS = {0.05: "19/1", 0.1: "9/1", 0.2: "4/1", 0.3: "7/3", 0.5: "1/1"}
STATIC_NAMES = ["all-fast", "first-touch"]
DYNAMIC_NAMES = ["hyplacer", "autonuma-tiering", "tpp", "nimble", "memos", "damon-tiering", "clock-dwf", "cache-mode"]
#: policies with time constants or per-event costs (cache-mode has neither)
TIMED_NAMES = DYNAMIC_NAMES[:-1]


def label(spec: str) -> str:
    return spec.split(":", 1)[0]


def tables(out: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[int]]:
    """The runs (a row per workload, footprint, method and policy, in the order of the tables)
    and the bandwidth balance, from the sweep's store in ``out``; the time scales run."""
    res = pd.read_parquet(out / "results.parquet")
    bad = res[res["error"].notna()]
    if len(bad):
        r = bad.iloc[0]
        raise SystemExit(f"{out}: {len(bad)} cell(s) failed, e.g. {r['trace']} {r['policy']}: {r['error']} "
                         "(run the sweep again)")
    recs = {}
    with open(out / "results.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            recs[rec["key"]] = rec.get("result")
    res["label"] = res["policy"].map(label)
    sim = res[res["grid"] != "balance"]
    scales = sorted(int(k) for k in sim.loc[sim["grid"] == "scales", "time_scale"].unique())
    rep_method = f"repeat {REPEAT} x K={REPEAT_SCALE}"
    rows = []

    def one(grid: str, w: str, cap: str, name: str, k: float = 1.0, repeat: int = 1) -> pd.Series:
        m = sim[(sim["grid"] == grid) & (sim["trace"] == w) & (sim["fast_capacity"] == cap) & (sim["label"] == name)
                & (sim["time_scale"] == k) & (sim["repeat"] == repeat)]
        if len(m) != 1:
            raise SystemExit(f"{out}: {len(m)} runs of {name} in grid {grid} for {w} at capacity {cap}, time scale {k:g}")
        return m.iloc[0]

    for w in dict.fromkeys(sim["trace"]):
        for cap, fp in FOOTPRINTS.items():
            ft = one("static", w, cap, "first-touch")
            base = {"workload": w, "npb": WORKLOADS.get(w, ("", ""))[0], "reads_per_write": ft["reads"] / max(1, ft["writes"]),
                    "footprint": fp, "dram_pages": int(ft["fast_capacity_pages"])}

            def add(method: str, r: pd.Series, k: float, repeat: int) -> None:
                charges = recs[r["key"]]["stats"]["migration"]["charges"]
                rows.append({**base, "method": method, "time_scale": k, "repeat": repeat, "policy": r["label"],
                             "spec": r["policy"], "runtime_ns": r["runtime_ns"], "fast_hit_ratio": r["fast_hit_ratio"],
                             "migrations": r["migrations"], "migration_time_ns": r["migration_time_ns"],
                             "periods": r["periods"], "policy_charges_ns": sum(c["ns"] for c in charges.values())})

            for k in scales:
                for name in STATIC_NAMES:
                    add(f"K={k}", one("static", w, cap, name), k, 1)
                for name in DYNAMIC_NAMES:
                    # cache-mode has no time constant nor OS cost: the static grid's run serves every scale
                    add(f"K={k}", one("static", w, cap, name) if name == "cache-mode" else one("scales", w, cap, name, k), k, 1)
            for name in STATIC_NAMES:
                add("periods-only", one("static", w, cap, name), 1, 1)
            for name in DYNAMIC_NAMES:
                add("periods-only", one("static" if name == "cache-mode" else "periods-only", w, cap, name), 1, 1)
            if fp != "small":
                for name in [*STATIC_NAMES, *TIMED_NAMES]:
                    add(rep_method, one("repeat", w, cap, name, REPEAT_SCALE, REPEAT), REPEAT_SCALE, REPEAT)
    bal = []
    b = res[res["grid"] == "balance"]
    for w in dict.fromkeys(b["trace"]):
        for pname in dict.fromkeys(b["platform"]):
            g = b[(b["trace"] == w) & (b["platform"] == pname)].set_index("policy")
            base_rt = g.loc["all-fast", "runtime_ns"]
            util = recs[g.loc["all-fast", "key"]]["stats"]["timing"]["tiers"][0].get("read_queue_utilization")
            best, best_share = 1.0, 0.0
            for share, wt in BALANCE_WEIGHTS.items():
                sp = base_rt / g.loc[f"interleave:weights={wt}", "runtime_ns"]
                bal.append({"workload": w, "platform": pname, "dcpmm_share": share, "speedup_vs_all_dram": sp,
                            "dram_read_utilization": util})
                if sp > best:
                    best, best_share = sp, share
            bal.append({"workload": w, "platform": pname, "dcpmm_share": "best", "speedup_vs_all_dram": best,
                        "best_share": best_share, "dram_read_utilization": util})
    return pd.DataFrame(rows), pd.DataFrame(bal), scales


def method_names(scales) -> list[str]:
    return [f"K={k}" for k in scales] + ["periods-only", f"repeat {REPEAT} x K={REPEAT_SCALE}"]


def checks(df: pd.DataFrame) -> list[tuple[str, str, object]]:
    """The study's expectations (004's claims) for one method's runs: (check, case, holds) with
    the numbers behind it in `case`; holds is None where the method has no such run."""
    rt = df.set_index(["workload", "footprint", "policy"])["runtime_ns"]
    has = set(rt.index)
    out = []
    for w in df["workload"].unique():
        if (w, "small", "all-fast") in has:
            fast = rt[(w, "small", "all-fast")]
            cd = rt[(w, "small", "clock-dwf")] / fast
            out.append(("partitioned loses when the data fits (004 Obs. 1)", f"{w}: clock-dwf {cd:.2f}x all-fast", cd > 1.01))
            worst = max((rt[(w, "small", p)] / fast, p) for p in ("hyplacer", "autonuma-tiering", "tpp", "nimble", "damon-tiering"))
            out.append(("fits in DRAM: dynamic policies within 3% of all-fast", f"{w}: worst {worst[1]} {worst[0]:.3f}x", worst[0] <= 1.03))
        for fp in ("medium", "large"):
            if (w, fp, "hyplacer") not in has:
                continue
            h, a, n = (rt[(w, fp, p)] for p in ("hyplacer", "autonuma-tiering", "nimble"))
            ft = rt[(w, fp, "first-touch")]
            # three policies that never acted are equal, which shows nothing
            inert = h == a == n == ft
            out.append(("hyplacer <= autonuma-tiering <= nimble (004 §5)",
                        f"{w} {fp}: {h / 1e6:.1f} / {a / 1e6:.1f} / {n / 1e6:.1f} ms" + (" (none acted)" if inert else ""),
                        None if inert else bool(h <= a * 1.0001 and a <= n * 1.0001)))
            dyn = {p: rt[(w, fp, p)] for p in TIMED_NAMES}
            best = min(dyn, key=dyn.get)
            out.append(("hyplacer is the fastest dynamic policy (004 §5)", f"{w} {fp}: fastest {best}", best == "hyplacer"))
            out.append(("hyplacer beats first-touch (004 §5)", f"{w} {fp}: {ft / dyn['hyplacer']:.2f}x", bool(dyn["hyplacer"] < ft)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, nargs="?", default=Path("target/experiments/tiering"),
                    help="the directory `tierkit sweep experiments/tiering/study.yaml --out DIR` wrote")
    a = ap.parse_args()
    out: Path = a.out
    if not (out / "results.parquet").exists():
        print(f"{out}: no results.parquet: run `tierkit sweep experiments/tiering/study.yaml --out {out}` first",
              file=sys.stderr)
        return 2
    df, bdf, scales = tables(out)
    bdf.to_csv(out / "balance.csv", index=False)
    return report(df, bdf, scales, out)


def report(df: pd.DataFrame, bdf: pd.DataFrame, scales: list[int], out: Path) -> int:
    """The tables of results.md (and results.csv, sensitivity.csv, results.json, the plot)."""
    rep_method = f"repeat {REPEAT} x K={REPEAT_SCALE}"
    ft = df[df["policy"] == "first-touch"].set_index(["method", "workload", "footprint"])["runtime_ns"]
    df["speedup_vs_first_touch"] = [ft[(m, w, f)] / r for m, w, f, r in zip(df["method"], df["workload"], df["footprint"], df["runtime_ns"])]
    df.to_csv(out / "results.csv", index=False)

    methods = [m for m in method_names(scales) if m in set(df["method"])]
    main_df = df[df["method"] == f"K={MAIN_SCALE}"]
    table = main_df.pivot_table(index=["workload", "footprint"], columns="policy", values="speedup_vs_first_touch", sort=False)
    table = table[[c for c in ["all-fast", *STATIC_NAMES[1:], *DYNAMIC_NAMES] if c in table.columns]]
    sens = df[df["policy"].isin(TIMED_NAMES)].pivot_table(index=["workload", "footprint", "policy"], columns="method",
                                                         values="speedup_vs_first_touch", sort=False)[methods]
    sens.to_csv(out / "sensitivity.csv")
    sens_ms = df[df["policy"].isin(TIMED_NAMES) & (df["repeat"] == 1)].assign(runtime_ms=lambda d: d["runtime_ns"] / 1e6).pivot_table(
        index=["workload", "footprint", "policy"], columns="method", values="runtime_ms", sort=False)[[m for m in methods if m != rep_method]]
    # the fastest dynamic policy per case and method: where the ranking flips with the scale
    fastest = (df[df["policy"].isin(TIMED_NAMES) & (df["footprint"] != "small")].sort_values("runtime_ns", kind="stable").groupby(["workload", "footprint", "method"], sort=False)["policy"]
               .first().unstack("method").reindex(columns=methods))
    cases = [k for k in dict.fromkeys(zip(df["workload"], df["footprint"])) if k[1] != "small"]
    fastest = fastest.reindex(pd.MultiIndex.from_tuples(cases, names=["workload", "footprint"]))
    check_rows = []
    for m in methods:
        for name, case, ok in checks(df[df["method"] == m]):
            check_rows.append({"method": m, "check": name, "case": case, "holds": ok})
    cdf = pd.DataFrame(check_rows)
    def count(x: pd.Series) -> str:
        known = [v for v in x if v is not None and v == v]
        return f"{sum(bool(v) for v in known)}/{len(known)}" + (f" ({len(x) - len(known)} none acted)" if len(known) < len(x) else "")

    survive = (cdf.groupby(["check", "method"], sort=False)["holds"].agg(count).unstack("method")
               .reindex(columns=methods).fillna("-"))
    best = bdf[bdf["dcpmm_share"] == "best"][["workload", "platform", "best_share", "speedup_vs_all_dram", "dram_read_utilization"]]
    (out / "results.json").write_text(json.dumps({"main_scale": MAIN_SCALE, "scales": scales, "repeat": [REPEAT, REPEAT_SCALE],
                                                  "runs": df.to_dict("records"), "balance": bdf.to_dict("records"),
                                                  "checks": check_rows}, indent=1, default=str))
    md = ["# Read/write-aware and OS-level tiering (seed 004)", "",
          f"Speedup over first-touch (004's ADM-default), detailed timing, --time-scale {MAIN_SCALE}.", "",
          markdown(table), "",
          "## Sensitivity: speedup over first-touch by method", "",
          f"K=k: --time-scale k (every time constant and cost / k); periods-only: the first study's specs (periods / 1000, costs "
          f"at full cost but DAMON's); {rep_method}: --repeat {REPEAT} --time-scale {REPEAT_SCALE} (medium and large only).", "",
          markdown(sens), "", "## Runtime (ms) by time scale", "", markdown(sens_ms), "",
          "## Fastest dynamic policy", "", markdown(fastest), "",
          "## Which conclusions survive (cases where the check holds)", "", markdown(survive), "",
          "## Bandwidth balance (004 §3.3)", "", markdown(best, index=False), "",
          "## Checks", "", *[f"- [{r['method']}] {r['check']}: {r['case']}: {'n/a' if r['holds'] is None else 'holds' if r['holds'] else 'does NOT hold'}" for r in check_rows], ""]
    (out / "results.md").write_text("\n".join(md))
    plot(table, out / "results.png")
    print("\n".join(md[:md.index("## Bandwidth balance (004 §3.3)")]))
    return 0


def markdown(df: pd.DataFrame, index: bool = True) -> str:
    """A DataFrame as a markdown table (floats with 2 decimals, 3 below 10)."""
    d = df.reset_index() if index else df
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)
    head = [str(c) for c in d.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in d.itertuples(index=False)]
    return "\n".join(lines)


def plot(table: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = list(dict.fromkeys(w for w, _ in table.index))
    fig, axes = plt.subplots(1, len(ws), figsize=(4.2 * len(ws), 4.2), sharey=True)
    for ax, w in zip(np.atleast_1d(axes), ws):
        sub = table.loc[w]
        sub.T.plot.bar(ax=ax, width=0.8, legend=ax is np.atleast_1d(axes)[0])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"{w} ({WORKLOADS.get(w, ('',))[0]}-like)")
        ax.set_ylabel("speedup over first-touch")
        ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
