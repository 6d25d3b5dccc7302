#!/usr/bin/env python3
"""Issue 7's study of read/write-aware and OS-level tiering on DRAM + Optane DCPMM
(docs/experiments.md, "HyPlacer and the policies real kernels ship"): 004 §3's bandwidth
balance, and 004 §5's comparison of HyPlacer against Linux's tiered AutoNUMA, TPP, Nimble,
Memos, DAMON tiering, CLOCK-DWF (the partitioned policy) and Memory Mode, at three
footprints; redone for issue 14 §3 with the two sound ways of running long-period policies
on short traces, and a sensitivity table over the time scale.

Setup. Platform: `dram-dcpmm` (one socket of 004's machine) with each tier's bandwidth
divided by the socket's 16 cores (`dram-dcpmm-core16`, written into DIR): 004 runs 32
threads on the 16 cores of the socket, each with its share of the bandwidth; a trace is one
thread of such a program, so one core's share is what one trace may use. Timing: detailed
(out-of-order core, bandwidth queues, loaded latency). Workloads at size small through the
`small` cache, chosen for their read/write ratios after the cache, as 004 Table 3 chose
NPB's: spmv (CG-like, about 16R:1W), stencil (MG-like, 3.6R:1W), bfs (BT's 3.2R:1W),
backprop (FT-like, 1.6R:1W); and two the issue's review used: phases (a moving hot set) and
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
  - periods-only: the study's first method (issue 7), every period divided by 1000 but only
    DAMON's per-event cost, kept to show the bias issue 14 found.
Sizes follow the footprint, not the time: NUMA balancing scans 1 MB per window, Linux's
watermarks round to 0 (min_free_kbytes=4), HyPlacer moves at most 131 pages and Memos 100
per activation, DAMON's quotas are 200 KB per reset interval.

    experiments/os_tiering.py [--out DIR] [--workloads spmv,stencil,...] [--scales 1,10,100,1000]

Writes DIR/results.csv, DIR/results.json, DIR/sensitivity.csv and DIR/results.md; about
ten minutes on 2 cores once the traces are recorded.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import tierkit
from tierkit import workloads

CACHE = "small"
#: the study's main time scale (1 s of the real machine = 1 ms here)
MAIN_SCALE = 1000
SCALES = (1, 10, 100, 1000)
#: the repeat variant: replays, and the time scale that gives as many activations as MAIN_SCALE
REPEAT, REPEAT_SCALE = 10, 100
#: name: (NPB program it stands for, its read/write ratio in 004 Table 3)
WORKLOADS = {"spmv": ("CG", ">60R:1W"), "stencil": ("MG", "4R:1W"), "bfs": ("BT", "3.5R:1W"), "backprop": ("FT", "1.7R:1W"),
             "phases": ("-", "-"), "rwmix": ("-", "-")}
#: footprint label: DRAM capacity as a multiple of the footprint (004 §5.1)
FOOTPRINTS = {"small": 1.25, "medium": 1 / 1.5, "large": 1 / 3.5}
#: DCPMM's share of the pages in the bandwidth-balance sweep (004 §3.3: 100% DRAM, 95%, 90%, ...)
BALANCE_WEIGHTS = {0.05: "19/1", 0.1: "9/1", 0.2: "4/1", 0.3: "7/3", 0.5: "1/1"}


def policies() -> dict[str, str]:
    """Every dynamic policy with its real-machine time constants (its defaults, Memos as 004
    §5.1 ran it: 4 s periods) and amounts sized to these footprints; `--time-scale` does the
    rest. Linux's watermarks are a fraction of a percent of a 32 GiB node (min_free_kbytes is
    sqrt(16 x memory KiB), spread over the nodes): on a DRAM of a few hundred pages they round to
    0, as min_free_kbytes=4 gives here. NUMA balancing scans 256 MB per window, about 1% of
    004's 20-150 GB footprints: 1 MB (256 pages) is about as large a share of these few MiB.
    HyPlacer's 128K pages and Memos' 100,000 pages per activation, and DAMON's 200 MB per quota
    interval, are the first study's amounts (a thousandth)."""
    numa = "scan_size_mb=1,min_free_kbytes=4"
    return {
        "hyplacer": "hyplacer:max_pages=131",
        "autonuma-tiering": f"autonuma-tiering:{numa}",
        "tpp": f"tpp:{numa}",
        "nimble": "nimble",
        "memos": "memos:period=4s,max_pages=100",
        "damon-tiering": "damon-tiering:hot_quota=200000,cold_quota=200000",
        "clock-dwf": "clock-dwf",
        "cache-mode": "cache-mode",
    }


def ms(x_ms: float, scale: float) -> str:
    """A duration of the real machine at a time scale."""
    return f"{round(x_ms * 1e6 / scale)}ns"


def periods_only(scale: float = MAIN_SCALE) -> dict[str, str]:
    """The first study's specs (issue 7): periods, delays and time thresholds divided by
    `scale` by hand, per-event costs left at full cost except DAMON's check. Kept as the
    'periods-only' method, to show what scaling only some costs does."""
    per_s = 1 / scale
    numa = (f"scan_period_ms={1000 * per_s:g},scan_delay_ms={1000 * per_s:g},scan_size_mb=1,min_free_kbytes=4,"
            f"kswapd_backoff_ms={10000 * per_s:g}")
    return {
        "hyplacer": f"hyplacer:interval={ms(1000, scale)},delay={ms(50, scale)},max_pages={max(1, round(131072 * per_s))}",
        "autonuma-tiering": f"autonuma-tiering:{numa},hot_threshold_ms={1000 * per_s:g},scan_period_max_ms={60000 * per_s:g}",
        "tpp": f"tpp:{numa}",
        "nimble": f"nimble:period={ms(5000, scale)}",
        "memos": f"memos:period={ms(4000, scale)},max_pages={max(1, round(100000 * per_s))}",
        "damon-tiering": (f"damon-tiering:sample={ms(5, scale)},aggr={ms(100, scale)},quota_reset={ms(1000, scale)},check_ns={500 * per_s:g},"
                          f"hot_quota={max(4096, round(200e6 * per_s))},cold_quota={max(4096, round(200e6 * per_s))}"),
        "clock-dwf": "clock-dwf",
        "cache-mode": "cache-mode",
    }


STATIC = {"all-fast": "all-fast", "first-touch": "first-touch"}
STATIC_NAMES = list(STATIC)
DYNAMIC_NAMES = ["hyplacer", "autonuma-tiering", "tpp", "nimble", "memos", "damon-tiering", "clock-dwf", "cache-mode"]
#: policies with time constants or per-event costs (cache-mode has neither)
TIMED_NAMES = DYNAMIC_NAMES[:-1]


def trace(out: Path, name: str) -> Path:
    p = out / "traces" / f"{name}-small.tkt"
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        print(f"recording {p.name} ...", file=sys.stderr, flush=True)
        tmp = p.with_suffix(".part")
        workloads.trace(name, "small", out=tmp, cache=CACHE, force=True)
        tmp.rename(p)
    return p


def core_platform(out: Path) -> Path:
    """dram-dcpmm with one core's share (1/16) of each tier's bandwidth."""
    src = (Path(__file__).resolve().parents[1] / "platforms" / "dram-dcpmm.toml").read_text()
    s = re.sub(r"(read_bw_gb_per_s|write_bw_gb_per_s) = ([0-9.]+)", lambda m: f"{m.group(1)} = {float(m.group(2)) / 16:.6g}", src)
    s = s.replace('name = "dram-dcpmm"', 'name = "dram-dcpmm-core16"', 1)
    s = s.replace('description = "', 'description = "One core\'s share (1/16) of the bandwidth of: ', 1)
    p = out / "dram-dcpmm-core16.toml"
    p.write_text(s)
    return p


def run(t: Path, platform: Path, policy: str, dram_bytes: int, repeat: int = 1, time_scale: float = 1) -> dict:
    return tierkit.run(t, platform=str(platform), policy=policy, fast_capacity=f"{dram_bytes // 1024}K", timing="detailed",
                       progress=False, repeat=repeat, time_scale=time_scale)


def balance(out: Path, t: Path, platforms: dict[str, Path], pages: int) -> list[dict]:
    """004 §3.3 (Fig. 3): static weighted interleaving, DCPMM's share of the pages 0-50%, with
    DRAM large enough for everything; the best share against all pages in DRAM."""
    rows = []
    dram = max(1, int(pages * FOOTPRINTS["small"])) * 4096
    for pname, plat in platforms.items():
        base = run(t, plat, "all-fast", dram)
        util = base["stats"]["timing"]["tiers"][0].get("read_queue_utilization")
        best, best_share = 1.0, 0.0
        for share, w in BALANCE_WEIGHTS.items():
            r = run(t, plat, f"interleave:weights={w}", dram)
            sp = base["runtime_ns"] / r["runtime_ns"]
            rows.append({"platform": pname, "dcpmm_share": share, "speedup_vs_all_dram": sp, "dram_read_utilization": util})
            if sp > best:
                best, best_share = sp, share
        rows.append({"platform": pname, "dcpmm_share": "best", "speedup_vs_all_dram": best, "best_share": best_share,
                     "dram_read_utilization": util})
    return rows


def method_names(scales) -> list[str]:
    return [f"K={k}" for k in scales] + ["periods-only", f"repeat {REPEAT} x K={REPEAT_SCALE}"]


def checks(df: pd.DataFrame) -> list[tuple[str, str, object]]:
    """The issue's expectations for one method's runs: (check, case, holds) with the numbers
    behind it in `case`; holds is None where the method has no such run."""
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
    ap.add_argument("--out", type=Path, default=Path("target/experiments/tiering"))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--scales", default=",".join(map(str, SCALES)), help="time scales of the sensitivity table")
    ap.add_argument("--report", action="store_true", help="only remake the tables from DIR/results.csv and DIR/balance.csv")
    a = ap.parse_args()
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    scales = [int(x) for x in a.scales.split(",")]
    if MAIN_SCALE not in scales:
        scales.append(MAIN_SCALE)
    if a.report:
        return report(pd.read_csv(out / "results.csv"), pd.read_csv(out / "balance.csv"), scales, out)
    plat = core_platform(out)
    socket = Path(__file__).resolve().parents[1] / "platforms" / "dram-dcpmm.toml"
    specs, legacy = policies(), periods_only()
    rep_method = f"repeat {REPEAT} x K={REPEAT_SCALE}"
    rows, bal = [], []
    t0 = time.perf_counter()
    for w in a.workloads.split(","):
        t = trace(out, w)
        info = tierkit.trace_info(t, progress=False)["summary"]
        pages = info["pages"]
        for fp, mult in FOOTPRINTS.items():
            dram = max(1, int(pages * mult)) * 4096
            base = {"workload": w, "npb": WORKLOADS.get(w, ("", ""))[0], "reads_per_write": info["reads"] / max(1, info["writes"]),
                    "footprint": fp, "dram_pages": dram // 4096}

            def add(method: str, label: str, spec: str, repeat: int = 1, k: float = 1, r: dict | None = None) -> dict:
                r = r or run(t, plat, spec, dram, repeat, k)
                charges = r["stats"]["migration"]["charges"]
                rows.append({**base, "method": method, "time_scale": k, "repeat": repeat, "policy": label, "spec": spec,
                             "runtime_ns": r["runtime_ns"], "fast_hit_ratio": r["fast_hit_ratio"], "migrations": r["migrations"],
                             "migration_time_ns": r["migration_time_ns"], "periods": r["periods"],
                             "policy_charges_ns": sum(c["ns"] for c in charges.values())})
                return r

            static = {label: run(t, plat, spec, dram) for label, spec in STATIC.items()}
            cache_mode = run(t, plat, specs["cache-mode"], dram)
            for k in scales:
                for label, spec in static.items():
                    add(f"K={k}", label, STATIC[label], 1, k, spec)
                for label in DYNAMIC_NAMES:
                    # cache-mode has no time constant nor OS cost: one run serves every scale
                    add(f"K={k}", label, specs[label], 1, k, cache_mode if label == "cache-mode" else None)
            for label, spec in static.items():
                add("periods-only", label, STATIC[label], 1, 1, spec)
            for label in DYNAMIC_NAMES:
                add("periods-only", label, legacy[label], 1, 1, cache_mode if label == "cache-mode" else None)
            if fp != "small":
                for label in [*STATIC_NAMES, *TIMED_NAMES]:
                    add(rep_method, label, STATIC.get(label) or specs[label], REPEAT, REPEAT_SCALE)
            print(f"{w} {fp}: done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        for b in balance(out, t, {"dram-dcpmm-core16": plat, "dram-dcpmm": socket}, pages):
            bal.append({"workload": w, **b})
    df = pd.DataFrame(rows)
    bdf = pd.DataFrame(bal)
    bdf.to_csv(out / "balance.csv", index=False)
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)
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
    md = ["# Read/write-aware and OS-level tiering (issues 7 and 14)", "",
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
