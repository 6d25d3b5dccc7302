"""The ``tierkit`` command line. Every command is a thin layer over :mod:`tierkit.api`.

Errors in what the user gave (a bad trace, an unknown name, an impossible capacity, a bad
option) print one line, ``tierkit: error: ...``, naming the file and offset or line, or the
key, and exit with status 2.
"""
from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path
from typing import List, Optional, Sequence, Union

import typer
from typing_extensions import Annotated

from . import api
from ._core import TierkitError, TierkitInternalError
from .output import Terminated
from .testbed import TestbedError

app = typer.Typer(
    name="tierkit",
    help="Decide which data belongs in which memory tier, and prove it with numbers.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        print(f"tierkit {__version__}")
        raise typer.Exit()


@app.callback()
def _tierkit(version: Annotated[bool, typer.Option("--version", help="print tierkit's version and exit", callback=_print_version,
                                                   is_eager=True)] = False) -> None:
    """Decide which data belongs in which memory tier, and prove it with numbers."""


trace_app = typer.Typer(help="Inspect, convert and generate traces.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(trace_app, name="trace")
from .workloads_cli import workloads_app  # noqa: E402

app.add_typer(workloads_app, name="workloads")

FORMATS = "tkt|hex|ramulator|ramulator-nowb|hma4|lackey|dramsim3|dramsim3:tck_ps=N|ramulator2|perf|champsim|champsim-cloudsuite|drmemtrace"
FormatOpt = Annotated[Optional[str], typer.Option("--format", help=f"input trace format ({FORMATS}); detected when unambiguous")]
CacheOpt = Annotated[Optional[str], typer.Option("--cache", help="filter a raw trace through a cache hierarchy: 'L1:32K:8,L2:1M:16', a preset (default, small, knl, skylake-sp) or 'none'")]
PlatformOpt = Annotated[str, typer.Option("--platform", "-p", help="preset name (see 'tierkit platforms') or a .toml/.yaml/.json platform file")]
FastCapOpt = Annotated[Optional[str], typer.Option("--fast-capacity", "-c", help="capacity of the fastest tier: a fraction of the trace's footprint (0.125) or a size (512M)")]
CapOpt = Annotated[Optional[List[str]], typer.Option("--capacity", help="capacity of another tier, TIER=VALUE (tier name or index); repeatable")]
TimingOpt = Annotated[str, typer.Option("--timing", "-t", help="timing model: simple or detailed")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")]
RepeatOpt = Annotated[int, typer.Option("--repeat", help="replay the trace N times as one continuous run (time, pages, placement and policy state carry over), so that policies with long periods act on a short trace")]
TimeScaleOpt = Annotated[float, typer.Option("--time-scale", help="divide every time constant and per-event cost of the policy (and the platform's migration costs) by K; latencies and bandwidths stay (docs/models.md)")]
GuideFromOpt = Annotated[Optional[Path], typer.Option("--guide-from", help="make the guidance of 'guided:strategy=...' policies from this trace's profile (a training input) instead of the simulated trace's")]


def _progress(quiet: bool) -> Optional[bool]:
    return False if quiet else None  # None: shown when stderr is a terminal


def _caps(items: Optional[List[str]]) -> dict:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise TierkitError(f"--capacity: '{it}' is not TIER=VALUE (e.g. DRAM=0.25)")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _fmt_ns(ns: float) -> str:
    for unit, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= div:
            return f"{ns / div:.3f} {unit}"
    return f"{ns:.1f} ns"


def _fmt_bytes(b: float) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.2f} {unit}"
    return f"{int(b)} B"


@app.command()
def simulate(
    traces: Annotated[list[Path], typer.Argument(help="trace file (several with --mix)", metavar="TRACE...")],
    platform: PlatformOpt = "dram-pmem",
    policy: Annotated[str, typer.Option("--policy", "-P", help="NAME or NAME:key=value,... (see 'tierkit policies')")] = "first-touch",
    fast_capacity: FastCapOpt = None,
    capacity: CapOpt = None,
    timing: TimingOpt = "simple",
    format: FormatOpt = None,
    cache: CacheOpt = None,
    json_out: JsonOpt = False,
    timeseries: Annotated[Optional[Path], typer.Option("--timeseries", help="write the policy's per-window time series (e.g. MBQ, migrations, threshold) as CSV")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite the --timeseries file")] = False,
    guide_from: GuideFromOpt = None,
    repeat: RepeatOpt = 1,
    time_scale: TimeScaleOpt = 1.0,
    mix: Annotated[bool, typer.Option("--mix", help="run the traces as a mix: each a program on its own core, sharing the tiers (detailed timing; docs/models.md, \"Many cores\")")] = False,
    cores: Annotated[int, typer.Option("--cores", help="run the trace's threads on N cores sharing the tiers (detailed timing)")] = 1,
    quantum: Annotated[int, typer.Option("--quantum", help="several cores: accesses a core may run at once before the cores are compared again (1, the default: in time order; more: faster, less exact; docs/models.md)")] = 1,
    quiet: QuietOpt = False,
) -> None:
    """Simulate one policy on one trace (or on a mix of traces, each on its own core)."""
    if timeseries is not None:
        api.check_new_file(timeseries, force)
    if len(traces) > 1 and not mix:
        raise TierkitError(f"{len(traces)} traces: give --mix to run them as programs sharing the tiers (or compare them with tierkit compare)")
    if mix:
        r = api.run(traces, platform, policy, fast_capacity, _caps(capacity), timing, format, cache, _progress(quiet),
                    repeat=repeat, time_scale=time_scale, mix=True, quantum=quantum)
        if json_out:
            print(json.dumps(r))
        else:
            _print_mix(r)
        return
    trace = traces[0]
    r = api.run(trace, platform, policy, fast_capacity, _caps(capacity), timing, format, cache, _progress(quiet),
                guide_from=guide_from, repeat=repeat, time_scale=time_scale, cores=cores, quantum=quantum)
    if timeseries is not None:
        ts = api.timeseries(r)
        if ts is None:
            raise TierkitError(f"--timeseries: policy '{r['policy']}' records no time series (the on-the-fly and epoch policies do)")
        from .output import write_text

        write_text(timeseries, ts.to_csv(index=False), force)
        print(f"wrote {timeseries}: {len(ts)} windows", file=sys.stderr)
    if json_out:
        print(json.dumps(r))
        return
    tiers = r["stats"]["platform"]["tiers"]
    cap = " | ".join(f"{t['name']} {t['capacity_pages'] if t['capacity_pages'] is not None else 'unlimited'} pages" for t in tiers)
    lines = [
        ("trace", f"{r['trace']}  ({r['accesses']:,} accesses, {r['pages']:,} pages, digest {str(r['config']['trace_digest'])[:12]})"
                  + _scale_note(r)),
        ("platform", f"{r['platform']}  ({cap})"),
        ("policy", _shown_policy(r)),
        *([("  ran as", f"{r['config']['scaled_policy']}  (times / {r['config']['time_scale']:g})")] if r["config"].get("scaled_policy") else []),
        ("runtime", f"{_fmt_ns(r['runtime_ns'])}  ({r['timing']} model)" + (f", IPC {r['ipc']:.3f}" if r.get("ipc") else "")),
        ("fast-tier hits", f"{100 * r['fast_hit_ratio']:.2f} %"),
        ("migrations", f"{r['migrations']:,} pages, {_fmt_bytes(r['migrated_bytes'])}, {_fmt_ns(r['migration_time_ns'])}"),
        ("energy", f"{r['energy_j']:.6g} J" if _has_energy(r) else "not modelled (the platform gives no energy figures)"),
        ("activations", _activations(r.get("activations"))),
    ]
    for t in tiers:
        lines.append((f"  {t['name']}", f"{t['reads']:,} reads, {t['writes']:,} writes, {_fmt_bytes(t['bytes_read'] + t['bytes_written'])} moved, {t['used_pages']:,} pages at end"))
    for c in r.get("cores") or []:
        lines.append((f"  core {c['core']}", f"{c['accesses']:,} accesses, runtime {_fmt_ns(c['runtime_ns'])}"
                      + (f", IPC {c['ipc']:.3f}" if c.get("ipc") else "") + f", fast-tier hits {100 * c['fast_hit_ratio']:.2f} %"))
    lines += _models_lines(r)
    lines += [("warning", x) for x in r.get("warnings", [])]
    w = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{w}}  {v}")


def _print_mix(r: dict) -> None:
    """A mix's result: the whole mix, then a line per program."""
    m = r["mix"]
    util = ", ".join(f"{k} read {100 * (v['read'] or 0):.1f} % write {100 * (v['write'] or 0):.1f} %" for k, v in m["tier_utilization"].items())
    lines = [
        ("mix", f"{m['programs']} programs on {m['programs']} cores  ({r['accesses']:,} accesses, {r['pages']:,} pages)"),
        ("platform", r["platform"]),
        ("policy", r["policy"]),
        ("runtime", f"{_fmt_ns(r['runtime_ns'])}  (the last program's end; {r['timing']} model, quantum {m['quantum']})"),
        ("throughput", f"{m['throughput_accesses_per_us']:.1f} accesses/µs" + (f", IPC {m['throughput_ipc']:.3f} (sum)" if m.get("throughput_ipc") else "")),
        *([("weighted speedup", f"{m['weighted_speedup']:.3f} (of {m['programs']}: each program's runtime alone over its runtime in the mix)")] if m.get("weighted_speedup") is not None else []),
        ("fast-tier hits", f"{100 * r['fast_hit_ratio']:.2f} %"),
        ("migrations", f"{r['migrations']:,} pages"),
        ("utilization", util),
    ]
    w = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{w}}  {v}")
    print()
    print(f"{'program':<28} {'runtime':>12} {'alone':>12} {'slowdown':>9} {'IPC':>7} {'fast hits':>9} {'migrations':>10}")
    for p in r["programs"]:
        print(f"{Path(p['trace']).name[:28]:<28} {_fmt_ns(p['runtime_ns']):>12} {_fmt_ns(p['runtime_alone_ns']) if 'runtime_alone_ns' in p else '-':>12} "
              f"{(format(p['slowdown'], '.3f') + 'x') if p.get('slowdown') else '-':>9} {format(p['ipc'], '.3f') if p['ipc'] else '-':>7} "
              f"{100 * p['fast_hit_ratio']:>8.2f}% {p['migrations'] if p['migrations'] is not None else '-':>10}")


def _activations(n) -> str:
    """How often the policy's periodic work ran; a policy without any says so."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "none (no periodic work)"
    return f"{int(n):,}"


def _warnings_block(df) -> str:
    """The warnings of a comparison, one per line, each row's marked in the table."""
    if "warnings" not in df.columns:
        return ""
    many = df["trace"].nunique() > 1
    lines = [f"  ! {Path(t).name + ': ' if many else ''}{w}" for t, ws in zip(df["trace"], df["warnings"]) for w in ws]
    return ("warnings (! in the table):\n" + "\n".join(lines)) if lines else ""


def _scale_note(r: dict) -> str:
    """How the run stretched or scaled time, if it did."""
    c = r["config"]
    parts = []
    if c.get("repeat", 1) != 1:
        parts.append(f"replayed {c['repeat']} times")
    if c.get("time_scale", 1.0) != 1.0:
        parts.append(f"policy times / {c['time_scale']:g}")
    return f", {', '.join(parts)}" if parts else ""


def _models_lines(r: dict) -> list:
    """What a learned policy's front end made: period, models, scores, fallbacks."""
    m = r["config"].get("models")
    if not m:
        return []
    pc = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    out = []
    if m.get("period_chosen"):
        out.append(("period", m["period_chosen"]))
    where = (f"held-out periods {m['eval_start_period']:,}.. (trained on 0..{m['train_periods'] - 1:,})"
             if m.get("holdout") is not None or m["training"].get("holdout") else
             "every period" + ("" if m["out_of_sample"] else ", in sample"))
    fb = {"online": f"used once they beat history and a constant over the {m.get('trust')} periods before",
          "future": "fallback judged on the periods it is applied to: FUTURE KNOWLEDGE",
          "off": "every prediction used"}.get(m["fallback"], m["fallback"])
    used = (f"{m['predicted_periods_used']:,} of {m['predicted_periods']:,} page-periods"
            if m.get("predicted_periods") is not None else "-")
    what = {"hybrid": "perfect classes for the selected pages (hybrid): FUTURE KNOWLEDGE",
            "idle": "'no access' always (a constant control)"}.get(m.get("predictor", "lstm"))
    out.append(("models", (what + f" for {m['pages_predicted']:,} pages" if what else
                           f"{m['models']:,} for {m['pages_predicted']:,} pages") +
                f"; predictions {fb}: {used}; {m['fallback_pages']:,} pages never used theirs"))
    out.append(("  scores", f"on {where}: accuracy {pc(m['accuracy'])} (history {pc(m['history_accuracy'])}), "
                            f"accessed recall {pc(m['accessed_recall'])} (history {pc(m['history_accessed_recall'])})"))
    cr = m.get("class_recall") or {}
    if cr:
        out.append(("  class recall", ", ".join(f"{c}: {pc(v)} ({pc((m.get('history_class_recall') or {}).get(c))})"
                                                for c, v in sorted(cr.items(), key=lambda kv: int(kv[0])))
                    + " (history)"))
    inf = m.get("inference") or {}
    if inf.get("models"):
        out.append(("  inference", f"{inf['ns_per_model'] / 1e3:,.1f} us per model, {inf['ns_per_boundary'] / 1e6:,.3f} ms "
                                   f"per boundary ({'measured here' if inf.get('measured') else 'given'}), charged from "
                                   f"period {inf.get('from_period', 0):,} on"))
    return out


@app.command()
def replay(
    result: Annotated[Path, typer.Argument(help="a result: simulate --json output, or compare --out's results.jsonl")],
    trace: Annotated[Optional[Path], typer.Option("--trace", help="the trace, if it has moved (its digest must match)")] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run a recorded result's configuration again (with the guidance and predictions it
    carries) and check that every figure comes out the same. Exit code 1 if one differs."""
    from . import replaying as rp

    bad = 0
    for old in rp.load(result):
        new = rp.replay(old, trace, _progress(quiet), source=str(result))
        diff = rp.differences(old, new)
        bad += bool(diff)
        if json_out:
            print(json.dumps(new))
        else:
            print(f"{old.get('policy')}: " + ("same figures, bit for bit" if not diff else "DIFFERENT: " + "; ".join(diff)))
    if bad:
        raise typer.Exit(1)


def _shown_policy(r: dict) -> str:
    """The run's policy with every parameter: the resolved spec, less the parameters that
    the Python front end consumed (left empty), with what it made them into alongside."""
    name, _, args = str(r["config"]["policy"]).partition(":")
    kv = [x for x in args.split(",") if x]
    kept = [x for x in kv if not x.endswith("=")]
    if len(kept) == len(kv):
        return str(r["config"]["policy"])
    return f"{r['policy']}  ->  {name}" + (":" + ",".join(kept) if kept else "")


def _has_energy(r: dict) -> bool:
    return any(t["read_energy_pj_per_bit"] or t["write_energy_pj_per_bit"] for t in r["config"]["platform"]["platform"]["tiers"])


def _sorted(df, key: str):
    """The comparison's rows sorted by `key` (tierkit.verdict.SORT_KEYS) within each trace."""
    from .verdict import SORT_KEYS

    col, ascending = SORT_KEYS[key]
    if col is None:
        return df
    order = {t: i for i, t in enumerate(dict.fromkeys(df["trace"]))}
    d = df.assign(_t=df["trace"].map(order), _k=df[col].astype(float) * (1 if ascending else -1))
    out = d.sort_values(["_t", "_k", "policy"], kind="stable").drop(columns=["_t", "_k"])
    out.attrs = df.attrs
    return out


def _table(df) -> str:
    import pandas as pd

    cols = {
        "trace": "trace",
        "policy": "policy",
        "runtime_ms": "runtime (ms)",
        "runtime_vs_all-slow": "vs all-slow",
        "hit_pct": "fast hits %",
        "migrations": "migrations",
        "migrated_mib": "migrated MiB",
        "energy_j": "energy (J)",
        "weighted_speedup": "weighted speedup",
        "max_slowdown": "worst slowdown",
    }
    d = df.copy()
    if "warnings" in d.columns:
        # a result that cannot show what its policy does is marked, and explained below
        d["policy"] = [f"{p} !" if ws else p for p, ws in zip(d["policy"], d["warnings"])]
    if "activations" in d.columns:
        cols["acted"] = "acted"
        d["acted"] = ["-" if pd.isna(a) else f"{int(a):,}" for a in d["activations"]]
    if "deploy" in d.columns:
        from . import deploy as _deploy

        # how each policy runs on a real machine (tierkit.deploy); the verdict names the
        # fastest one that can
        cols["deploys"] = "deploys as"
        d["deploys"] = [_deploy.SHORT.get(_deploy.KEYS.get(x, ""), x) for x in d["deploy"]]
    d["runtime_ms"] = d["runtime_ns"] / 1e6
    d["hit_pct"] = 100 * d["fast_hit_ratio"]
    d["migrated_mib"] = d["migrated_bytes"] / (1 << 20)
    if d["trace"].nunique() == 1:
        cols.pop("trace")
    if not any(_has_energy(r) for r in df.attrs.get("results", [])):
        cols.pop("energy_j")
    keep = [c for c in cols if c in d.columns]
    d = d[keep].rename(columns=cols)
    return d.to_string(index=False, float_format=lambda v: f"{v:,.4g}" if not math.isnan(v) else "-")


@app.command()
def compare(
    traces: Annotated[List[Path], typer.Argument(help="one or more trace files")],
    platform: PlatformOpt = "dram-pmem",
    policies: Annotated[str, typer.Option("--policies", help="comma-separated policies (NAME or NAME:key=value,...), or 'all'")] = "all",
    fast_capacity: FastCapOpt = None,
    capacity: CapOpt = None,
    timing: TimingOpt = "simple",
    format: FormatOpt = None,
    cache: CacheOpt = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="write CSV, Parquet, PNG plots and an HTML page to this directory")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite files in --out")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object per run")] = False,
    guide_from: GuideFromOpt = None,
    repeat: RepeatOpt = 1,
    time_scale: TimeScaleOpt = 1.0,
    sort: Annotated[str, typer.Option("--sort", help="order of the table's rows within a trace: runtime (fastest first), hits (most fast-tier hits first), migrations, energy, or policy (as given)")] = "runtime",
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="runs at once, a process each [default: every core, when the runs are long enough to pay for it]")] = None,
    mix: Annotated[bool, typer.Option("--mix", help="compare the policies on the traces run together as one mix: each a program on its own core, sharing the tiers (detailed timing; docs/models.md, \"Many cores\")")] = False,
    cores: Annotated[int, typer.Option("--cores", help="run each trace's threads on N cores sharing the tiers (detailed timing)")] = 1,
    quantum: Annotated[int, typer.Option("--quantum", help="several cores: accesses a core may run at once before the cores are compared again (1, the default: in time order)")] = 1,
    quiet: QuietOpt = False,
) -> None:
    """Compare policies on one or more traces (runtime normalized to all-slow), or on a mix
    of traces run together (--mix).

    'guided:strategy=thermos' (or knapsack, hotset) profiles the trace itself, or the
    --guide-from trace (a training input), and places by the guidance it makes."""
    from .verdict import SORT_KEYS, verdict

    if sort not in SORT_KEYS:
        raise TierkitError(f"--sort: unknown key '{sort}' (known: {', '.join(SORT_KEYS)})")
    if out is not None:
        from . import report

        # every file the report will write, checked before the run, not after it
        report.check_out_dir(out, force, report.planned_files(api.compare_runs(traces, policies, mix=mix), mix))
    df = api.compare(traces, platform, policies, fast_capacity, _caps(capacity), timing, format, cache, _progress(quiet),
                     guide_from=guide_from, repeat=repeat, time_scale=time_scale, workers=workers, mix=mix, cores=cores,
                     quantum=quantum)
    if json_out:
        for r in df.attrs["results"]:
            print(json.dumps(r))
    else:
        tiers = api.representative(df.attrs["results"])["stats"]["platform"]["tiers"]
        cap = ", ".join(f"{t['name']} {t['capacity_pages'] if t['capacity_pages'] is not None else 'unlimited'}" for t in tiers)
        print(f"platform {df['platform'].iloc[0]} (pages: {cap}), {timing} timing model" + _scale_note(df.attrs["results"][0]))
        for t in dict.fromkeys(df["trace"]):
            row = df[df["trace"] == t].iloc[0]
            print(f"trace {t}: {row['accesses']:,} accesses, {row['pages']:,} pages")
        print(_table(_sorted(df, sort)))
        for line in verdict(df.attrs["results"]):
            print(textwrap.fill(line, width=110, subsequent_indent="  "))
        block = _warnings_block(df)
        if block:
            print(block)
    if out is not None:
        from . import report

        written = report.write(df, out, force=force, cache=cache, sort=sort)
        print(f"wrote {', '.join(p.name for p in written)} to {out}", file=sys.stderr)


@app.command("sweep")
def sweep_cmd(
    study: Annotated[Path, typer.Argument(help="study file (YAML or TOML; docs/sweep.md)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="the study's directory: result store, results.parquet, report")],
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="cells run at once [default: every core; with --executor ray, the local instance's CPUs]")] = None,
    executor: Annotated[str, typer.Option("--executor", help="local (a process per worker) or ray (pip install 'tierkit[ray]')")] = "local",
    address: Annotated[Optional[str], typer.Option("--address", help="with --executor ray: the cluster to join (host:port, or auto) [default: start a local instance]")] = None,
    ship_traces: Annotated[bool, typer.Option("--ship-traces", help="with --executor ray: send the traces through Ray's object store instead of reading them at their paths on every node")] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="write index.html and its plots")] = True,
    force: Annotated[bool, typer.Option("--force", help="write the store into OUT even if it is a folder with other files")] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run a study: every combination of its traces, platforms, capacities, timing models,
    policies and parameters, in parallel; cells already in OUT's store are not run again."""
    import time as _time

    from . import studies as sw

    st = sw.load_study(study)
    t0 = _time.perf_counter()
    df = sw.sweep(st, out, workers=workers, executor=executor, address=address, ship_traces=ship_traces,
                  progress=_progress(quiet), report=report, force=force)
    el = _time.perf_counter() - t0
    if json_out:
        print(df.to_json(orient="records"))
        return
    failed = int(df["error"].notna().sum())
    print(f"study {st.name}: {len(df):,} cells, {failed:,} failed; {df.attrs['ran']:,} run in {el:.1f} s "
          f"({len(df) - df.attrs['ran']:,} stored before this run)")
    from .studies.report import best_table

    best = best_table(df, st.baseline)
    if len(best):
        show = best.drop(columns=[c for c in ("repeat", "time_scale") if best[c].nunique() == 1])
        print(show.to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    for _, r in df[df["error"].notna()].head(10).iterrows():
        print(f"failed: {r['trace']} {r['platform']} {r['fast_capacity']} {r['timing']} {r['policy']}: {r['error']}", file=sys.stderr)
    if df.attrs["written"]:
        print(f"wrote {out}/results.parquet, results.jsonl" + (", index.html" if report else ""), file=sys.stderr)
    else:
        print(f"{out}: up to date (every cell was stored)", file=sys.stderr)


@trace_app.command("info")
def trace_info(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    format: FormatOpt = None,
    cache: CacheOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Records, accesses, reads, writes, pages, footprint, duration, allocation sites."""
    i = api.trace_info(trace, format, cache, _progress(quiet))
    s = i["summary"]
    if json_out:
        print(json.dumps({"path": str(trace), "format": i["format"], **s, "meta": i["meta"]}))
        return
    m = i["meta"]
    prov = m.get("provenance", {})
    rows = [
        ("format", i["format"] + (f" (version {m['version'][0]}.{m['version'][1]})" if i["format"] == "tkt" else "")),
        ("records", f"{s['records']:,}"),
        ("accesses", f"{s['accesses']:,} ({s['reads']:,} reads, {s['writes']:,} writes)"),
        ("pages", f"{s['pages']:,} distinct pages of {s['page_size']} B"),
        ("footprint", _fmt_bytes(s["footprint_bytes"])),
        ("duration", (f"{s['duration_insn']:,} instructions" if m.get("time_insn") else "no instruction counts") + (f", {_fmt_ns(s['duration_ns'])}" if m.get("time_ns") else "")),
        ("allocation sites", f"{s['allocation_sites']:,} ({s['allocs']:,} allocations, {s['frees']:,} frees)"),
        ("markers", f"{s['markers']:,}"),
        ("threads", f"{s['threads']:,}"),
        ("post-cache", "yes" + (f" (filtered through {m['cache_filter']})" if m.get("cache_filter") else "") if m.get("post_cache") else "no (raw accesses)"),
    ]
    if s.get("incomplete"):
        rows.append(("incomplete", s["incomplete"]))
    notes = m.get("notes") or {}
    if "sampled" in notes:  # a sampled trace (perf): its records are samples, not every access
        rows.append(("sampled", notes["sampled"] + (f"; sampling: {notes['perf.sampling']}" if notes.get("perf.sampling") else "")))
    if s.get("import_losses"):
        rows.append(("not imported", ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in s["import_losses"].items())))
    if prov.get("tool"):
        rows.append(("made by", prov["tool"] + (f" from {prov['source_file']}" if prov.get("source_file") else "")))
    if prov.get("program"):
        rows.append(("program", " ".join([prov["program"], *prov.get("args", [])])))
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")


@trace_app.command("convert")
def trace_convert(
    src: Annotated[Path, typer.Argument(help="input trace")],
    out: Annotated[Path, typer.Argument(help="output file")],
    format: FormatOpt = None,
    to: Annotated[Optional[str], typer.Option("--to", help="output format: tkt, ramulator or hex (default from the file name)")] = None,
    cache: CacheOpt = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Convert a trace to the native format, or export it for other simulators."""
    r = api.convert(src, out, format, to, cache, force, _progress(quiet))
    s = r["summary"]
    msg = f"wrote {out} ({r['output_format']}): {s['accesses']:,} accesses, {s['records']:,} records, {s['pages']:,} pages from {r['input_format']}"
    dropped = {k: v for k, v in r.get("dropped", {}).items() if v}
    if dropped:
        msg += "; not expressible in the output format: " + ", ".join(f"{v:,} {k}" for k, v in dropped.items())
    if s.get("import_losses"):
        msg += "; not imported from the input: " + ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in s["import_losses"].items())
    print(msg)
    for n in r.get("notes", []):
        print(f"note: {n}")


@trace_app.command("synth")
def trace_synth(
    kind: Annotated[str, typer.Argument(help="zipf, uniform, stream or phases")],
    accesses: Annotated[str, typer.Option("--accesses", "-n", help="number of accesses (e.g. 50M)")],
    pages: Annotated[str, typer.Option("--pages", help="number of distinct pages (e.g. 1M)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output .tkt file")],
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 1,
    write_ratio: Annotated[float, typer.Option("--write-ratio", help="share of writes, 0..1")] = 0.0,
    theta: Annotated[float, typer.Option("--theta", help="Zipf exponent (zipf)")] = 0.99,
    phases: Annotated[int, typer.Option("--phases", help="number of phases (phases)")] = 4,
    hot_fraction: Annotated[float, typer.Option("--hot-fraction", help="share of accesses to the phase's hot set (phases)")] = 0.9,
    insn_per_access: Annotated[int, typer.Option("--insn-per-access", help="mean instructions between accesses")] = 20,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Generate a synthetic trace with known structure."""
    s = api.synth(kind, out, accesses, pages, seed, write_ratio, theta, phases,
                  hot_fraction, insn_per_access, force, _progress(quiet))
    print(f"wrote {out}: {s['accesses']:,} accesses over {s['pages']:,} pages ({s['writes']:,} writes)")


@trace_app.command("record", context_settings={"allow_interspersed_args": False})
def trace_record(
    command: Annotated[List[str], typer.Argument(help="the program and its arguments, after '--': tierkit trace record -o x.tkt -- ./app --size 10", metavar="PROGRAM ARGS")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="output trace [default: PROGRAM.tkt in the current directory]")] = None,
    cache: Annotated[str, typer.Option("--cache", help="in-band cache hierarchy: 'L1:32K:8,L2:1M:16', a preset (default, small, knl, skylake-sp), or 'none' for raw loads and stores")] = "default",
    context: Annotated[int, typer.Option("--context", help="physical frames (return addresses) per allocation site (1-64)")] = 4,
    slice_insn: Annotated[Optional[str], typer.Option("--slice", help="a slice marker every N instructions (e.g. 10M)")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT")] = False,
    kill_after: Annotated[float, typer.Option("--kill-after", help="seconds the program may take to end after a SIGTERM, SIGINT or SIGHUP sent to tierkit is passed on to it; then it is killed")] = 2.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress lines while recording")] = False,
) -> None:
    """Run an unmodified program under Valgrind and record its native trace.

    Records every load and store (through the cache, by default: last-level misses and
    dirty writebacks), allocations with their call stacks, and slice markers. The program's
    output is its own; tierkit exits with the program's exit status (128 + signal if it was
    killed) and writes its own messages to stderr. Child processes are not traced.

    SIGTERM, SIGINT or SIGHUP sent to tierkit is passed on to the program; the trace of what
    ran is still written, flagged incomplete (a program that has not ended --kill-after
    seconds later, or at a second signal, is killed).
    """
    r = api.record(command[0], command[1:], out, cache, context, slice_insn, force, kill_after, progress=False if quiet else None)
    for m in r["valgrind_messages"]:
        print(f"tierkit: valgrind: {m}", file=sys.stderr)
    s = r["summary"]
    kind = "post-cache accesses" if cache.strip().lower() != "none" else "accesses"
    print(f"tierkit: wrote {r['path']}: {s['accesses']:,} {kind}, {s['allocs'] + s['reallocs']:,} allocations at "
          f"{s['allocation_sites']:,} sites, {s['markers']:,} markers, {r['instructions']:,} instructions, "
          f"{s['threads']:,} thread{'s' if s['threads'] != 1 else ''}", file=sys.stderr)
    if r["forks"]:
        print(f"tierkit: note: the program forked ({r['forks']:,} time{'s' if r['forks'] != 1 else ''}); "
              "child processes are not traced", file=sys.stderr)
    if r["incomplete"]:
        print(f"tierkit: warning: the trace is incomplete: {r['incomplete']}", file=sys.stderr)
    raise typer.Exit(r["status"])


@app.command("profile")
def profile_cmd(
    trace: Annotated[Path, typer.Argument(help="trace with allocation events (from 'tierkit trace record')")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="profile file to write [default: TRACE's name with .profile.json, in the current directory]")] = None,
    context: Annotated[Optional[int], typer.Option("--context", help="call-path depth of a site, in physical frames: 0 = the allocation's call site alone, N = it and N callers (keys of N + 1 frames) [default: every frame recorded]")] = None,
    phases: Annotated[int, typer.Option("--phases", help="at most this many phases, by clustering the slices (phase markers in the trace take precedence)")] = 8,
    slice_len: Annotated[Optional[str], typer.Option("--slice", help="slice length when the trace has no slice markers: 100M-insn, or a number of accesses [default: 64 equal slices]")] = None,
    top: Annotated[int, typer.Option("--top", help="sites to print")] = 10,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="draw cumulative capacity against cumulative accesses per depth (002 Fig. 2) to this PNG")] = None,
    format: FormatOpt = None,
    cache: CacheOpt = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT and the plot")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the profile as JSON instead of a table")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Profile a trace by allocation site: capacity, post-cache reads and writes, accesses
    per byte, per phase."""
    from . import profiling as prof

    if out is None:
        stem = trace.name
        for suffix in (".gz", ".zst", ".xz", ".tkt", ".trace", ".txt", ".out"):
            stem = stem.removesuffix(suffix)
        out = Path(stem + ".profile.json")
    # before the pass over the trace, not after it
    for f in (out, plot):
        if f is not None:
            api.check_new_file(f, force)
    p = prof.profile(trace, context, phases, slice_len, format, cache, _progress(quiet))
    prof.write(p, out, force=force)
    if plot is not None:
        prof.plot(p, plot, force=force)
    if json_out:
        print(json.dumps(p))
        return
    t = p["totals"]
    ph = p["phases"]
    print(f"trace {trace}: {t['accesses']:,} accesses, {100 * t['heap_accesses'] / max(1, t['accesses']):.1f}% to the heap; "
          f"peak live heap {_fmt_bytes(t['peak_live_bytes'])}")
    print(f"sites: {len(p['sites']):,} at depth {p['context']} ({t['raw_sites']:,} call stacks recorded); "
          f"{p['slices']['count']} slices ({p['slices']['source']}), {ph['count']} phase{'s' if ph['count'] != 1 else ''} ({ph['source']})")
    df = prof.sites_frame(p).head(top)
    if len(df):
        show = df[["site", "peak_bytes", "reads", "writes", "accesses_pct", "accesses_per_byte"]].copy()
        show["peak_bytes"] = show["peak_bytes"].map(_fmt_bytes)
        show = show.rename(columns={"peak_bytes": "capacity", "accesses_pct": "accesses %", "accesses_per_byte": "acc/byte"})
        print(show.to_string(index=False, float_format=lambda v: f"{v:,.3g}"))
    print(f"wrote {out}" + (f" and {plot}" if plot else ""), file=sys.stderr)


@app.command("guide")
def guide_cmd(
    profile_file: Annotated[Path, typer.Argument(metavar="PROFILE", help="profile file from 'tierkit profile'")],
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="knapsack, hotset or thermos")] = "thermos",
    capacity: Annotated[str, typer.Option("--capacity", "-c", help="fast-tier capacity: a fraction of the profile's peak live heap (0.125) or a size (64M); one per tier but the last, comma-separated, with --tiers")] = "0.125",
    tiers: Annotated[Optional[str], typer.Option("--tiers", help="tier names, fastest first, comma-separated [default: fast,slow]")] = None,
    per_phase: Annotated[bool, typer.Option("--per-phase", help="a tier vector per site across the profile's phases (per-phase arenas)")] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help="guidance file to write")] = Path("guidance.json"),
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Choose the tier of each allocation site from a profile (knapsack, hotset, thermos)."""
    from . import guidance as guide

    p = guide.read_profile(profile_file)
    caps = [c.strip() for c in capacity.split(",")]  # make_guidance reads fractions and sizes
    names = [t.strip() for t in tiers.split(",")] if tiers else None
    g = api.guide(p, strategy, caps, tiers=names, per_phase=per_phase, out=out, force=force)
    for w in g.get("warnings", []):
        print(w, file=sys.stderr)
    if json_out:
        print(json.dumps(g))
        return
    by_tier: dict = {}
    for site in g["sites"]:
        by_tier.setdefault(site["tier"], []).append(site)
    print(f"{g['strategy']} ({g['mode']}), capacity " + ", ".join(_fmt_bytes(b) for b in g["capacity_bytes"]) +
          f" of {_fmt_bytes(p['totals']['peak_live_bytes'])} peak live heap; {len(g['sites'])} sites, {len(g['arenas'])} arenas")
    for t, name in enumerate(g["tiers"]):
        ss = by_tier.get(t, [])
        acc = sum(x["accesses"] for x in ss)
        tot = max(1, sum(x["accesses"] for x in g["sites"]))
        print(f"  {name}: {len(ss)} sites, {_fmt_bytes(sum(x['peak_bytes'] for x in ss))}, {100 * acc / tot:.1f}% of the heap's accesses")
        for x in ss[:5]:
            bits = f"  [{x['bits']}]" if x.get("bits") else ""
            print(f"      {guide.site_label(x)}  ({_fmt_bytes(x['peak_bytes'])}, {x['accesses']:,} accesses){bits}")
        if len(ss) > 5:
            print(f"      ... {len(ss) - 5} more")
    marks = g["phases"].get("markers")
    if marks is not None:
        seen = [m for m in marks if m["alloc"] is not None]
        print(f"  phase markers: {len(seen)} of {len(marks)} phase boundaries fall next to an allocation call, "
              "which a guided run counts to switch phases")
    print(f"wrote {out}", file=sys.stderr)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


@app.command("tune")
def tune_cmd(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    scheduler: Annotated[str, typer.Option("--scheduler", help="periodic page scheduler to tune: history or oracle")] = "history",
    platform: PlatformOpt = "dram-pmem",
    fast_capacity: Annotated[str, typer.Option("--fast-capacity", "-c", help="capacity of the fast tier: a fraction of the footprint or a size")] = "0.2",
    timing: TimingOpt = "simple",
    bucket: Annotated[int, typer.Option("--bucket", help="reuse histogram bucket, in accesses (cori-sim: 1000)")] = 1000,
    grid: Annotated[int, typer.Option("--grid", help="periods in the baselines' constant-step grid (up to half the trace)")] = 50,
    patience: Annotated[int, typer.Option("--patience", help="stop after this many trials in a row without improvement")] = 1,
    within: Annotated[float, typer.Option("--within", help="a method has found the best period when within this fraction of it")] = 0.03,
    seed: Annotated[int, typer.Option("--seed", help="seed of base-random's order")] = 0,
    sweep: Annotated[bool, typer.Option("--sweep/--no-sweep", help="also run every period of the grid and the candidates, to compare with the best")] = True,
    compat: Annotated[str, typer.Option("--compat", help="the scheduler's compat parameter: none, cori-sim or cori-sim-raw (tierkit policies)")] = "none",
    bins: Annotated[Optional[int], typer.Option("--bins", help="the scheduler's bins parameter: log2 count classes, 0-32 (default: the scheduler's, 16)")] = None,
    format: FormatOpt = None,
    cache: CacheOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Cori: choose a periodic scheduler's period from the trace's data reuse (003 §3.3),
    against the insight-less baselines base-left, base-right and base-random."""
    from . import cori

    r = cori.tune(trace, scheduler, platform, fast_capacity, timing, bucket, grid, patience, within, seed, sweep,
                  format, cache, _progress(quiet), compat=compat, bins=bins)
    if json_out:
        print(json.dumps(r))
        return
    pp = ", ".join(f"{k}={v}" for k, v in r["policy_params"].items() if v is not None)
    print(f"trace {trace}: {r['accesses']:,} accesses, {r['pages']:,} pages; {scheduler} ({pp}) on {platform}, "
          f"fast capacity {fast_capacity}")
    print(f"dominant reuse period: {r['dominant_reuse']:,} accesses ({r['reuse']['kept_buckets']} reuse buckets kept)")
    print(f"candidates ({len(r['candidates'])}): " + ", ".join(f"{c:,}" for c in r["candidates"][:12]) +
          (" ..." if len(r["candidates"]) > 12 else ""))
    print("trials:")
    for t in r["trials"]:
        mark = "  <- chosen" if t["period"] == r["chosen_period"] else ""
        print(f"  period {t['period']:>12,}  runtime {_ms(t['runtime_ns']):>14}  fast hits {100 * t['fast_hit_ratio']:5.1f}%{mark}")
    print(f"Cori chose period {r['chosen_period']:,} after {len(r['trials'])} trial(s)")
    if "methods" in r:
        print(f"exhaustive sweep ({len(r['sweep'])} periods): best period {r['best_period']:,}, runtime {_ms(r['best_runtime_ns'])}")
        n_run, n_best = r["budget_cori_trials"], r["budget_cori_trials_to_best"]
        print(f"{'':<12} {'after ' + str(n_best) + ' trials (003)':>26} {'after ' + str(n_run) + ' trials':>26}")
        print(f"{'method':<12} {'period':>12} {'slowdown':>13} {'period':>12} {'slowdown':>13} {'trials to best':>15}")
        for name, m in r["methods"].items():
            ttb = "never" if m["trials_to_best"] is None else f"{m['trials_to_best']} of {m['explored']}"
            print(f"{name:<12} {m['period_at_cori_trials_to_best']:>12,} {100 * m['slowdown_at_cori_trials_to_best']:>12.1f}% "
                  f"{m['period_at_cori_trials']:>12,} {100 * m['slowdown_at_cori_trials']:>12.1f}% {ttb:>15}")
        print(f"(budgets: Cori's trials to best, {n_best}, as 003 Fig. 3.6 gives the baselines, and the {n_run} trials Cori "
              f"ran; trials to best: each method's own order run to the end, to come within {100 * within:g}% of the best)")
        for w in r.get("warnings", []):
            print(f"warning: {w}")


@app.command("advise")
def advise_cmd(
    trace: Annotated[Path, typer.Argument(help="trace file (with --program: where the recording goes)")],
    program_args: Annotated[Optional[List[str]], typer.Argument(help="with --program, after '--': the program and its arguments", metavar="[-- PROGRAM ARGS]")] = None,
    platform: PlatformOpt = "dram-pmem",
    fast_capacity: Annotated[str, typer.Option("--fast-capacity", "-c", help="capacity of the fast tier: a fraction of the footprint (0.2) or a size (512M)")] = "",
    policies: Annotated[Optional[str], typer.Option("--policies", help="candidates, comma-separated (names or specs; a spec that sets the main parameter is not tuned) [default: every deployable policy]")] = None,
    time_scale: Annotated[Optional[float], typer.Option("--time-scale", help="the policies' clock (docs/models.md); the top candidates also run at K/10 and 10K [default: 1]")] = None,
    timing: TimingOpt = "simple",
    format: FormatOpt = None,
    cache: CacheOpt = None,
    program: Annotated[bool, typer.Option("--program", help="record the program given after '--' into TRACE first (tierkit trace record; an existing TRACE is used unless --force)")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="run the top two live (tierkit run) on the --program, on a machine with a fast and a slow NUMA node")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="also write the advice as JSON to this file")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite --out; record the --program again")] = False,
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="simulations at once [default: every core]")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the advice as one JSON object")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Which tiering policy to run on a workload and a machine, what it saves, and the command
    that applies it: every deployable policy, its main parameter tuned, ranked (docs/advise.md)."""
    from . import advising as advise

    if program_args and not program:
        raise TierkitError(f"'{program_args[0]}': one trace; to record a program first, give --program -- PROGRAM ARGS")
    if program and not program_args:
        raise TierkitError("--program: give the program after '--': tierkit advise TRACE --program -- PROGRAM ARGS")
    if out is not None:
        api.check_new_file(out, force)
    df = advise.advise(trace, platform, fast_capacity, policies, time_scale, timing, format, cache,
                       program_args if program else None, verify, force, workers, progress=_progress(quiet))
    a = df.attrs["advice"]
    if out is not None:
        from .output import write_text

        write_text(out, json.dumps(a, indent=1) + "\n", force)
        print(f"wrote {out}", file=sys.stderr)
    if json_out:
        print(json.dumps(a))
        return
    print("\n".join(advise.text(a)))


def _print_study(r: dict) -> None:
    print(f"trace {r['trace']}: {r['pages']:,} pages, {r['periods']:,} periods of {r['period']:,} accesses; "
          f"{r['platform']}, fast capacity {r['fast_capacity']}")
    print(f"history {_ms(r['history_runtime_ns'])} ({100 * r['history_fast_hit_ratio']:.1f}% fast hits), "
          f"oracle {_ms(r['oracle_runtime_ns'])} ({100 * r['oracle_fast_hit_ratio']:.1f}%, FUTURE KNOWLEDGE)")
    x0 = r["rows"][0] if r["rows"] else None
    if x0 is not None:
        where = (f"held-out periods {x0['eval_start_period']:,}..{r['periods'] - 1:,} (models trained on periods "
                 f"0..{x0['train_periods'] - 1:,})" if r.get("holdout") else
                 "every period of this trace (trained on another run)" if x0["out_of_sample"] else
                 "every period: IN SAMPLE (--holdout 0)")
        print(f"scores on {where}; accessed recall: share of the periods in which a page is accessed that are "
              f"predicted accessed; a model is used in a period once it has beaten history and a constant over the "
              f"{r['trust']} periods before (online fallback)")
    pc = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    gp = lambda v: "no gap" if v is None else f"{v:+.1f}%"  # noqa: E731
    print(f"{'pages':>7} {'with models':>11} {'models':>7} {'pages/model':>11} {'train s':>8} {'accuracy':>8} "
          f"{'(history)':>9} {'acc. recall':>11} {'(history)':>9} {'used':>7} {'infer/boundary':>14} {'break-even':>12}")
    for x in r["rows"]:
        ppm = "-" if x["pages_per_model"] is None else f"{x['pages_per_model']:.2f}"
        used = pc(x["predicted_periods_used"] / x["predicted_periods"]) if x["predicted_periods"] else "-"
        be = "never" if x["break_even_period"] is None else f"{x['break_even_period']:,}"
        print(f"{100 * x['pages_fraction']:>6.1f}% {x['pages_selected']:>11,} {x['models']:>7,} {ppm:>11} "
              f"{x['train_seconds']:>8.2f} {pc(x['accuracy']):>8} {pc(x['history_accuracy']):>9} "
              f"{pc(x['accessed_recall']):>11} {pc(x['history_accessed_recall']):>9} {used:>7} "
              f"{_ms(x['inference_ns_per_boundary']):>14} {be:>12}")
    print("gap bridged (history 0%, oracle 100%):")
    print(f"{'pages':>7} {'runtime':>14} {'Kleio':>9} {'no infer.':>9} {'no fallb.':>9} {'future fb':>9} "
          f"{'hybrid':>9} {'untrained':>9} {'idle':>9} {'idle, no fb':>11}")
    for x in r["rows"]:
        print(f"{100 * x['pages_fraction']:>6.1f}% {_ms(x['runtime_ns']):>14} {gp(x['gap_bridged_pct']):>9} "
              f"{gp(x['gap_bridged_free_inference_pct']):>9} {gp(x['gap_bridged_no_fallback_pct']):>9} "
              f"{gp(x['gap_bridged_future_fallback_pct']):>9} {gp(x['gap_bridged_future_hybrid_pct']):>9} "
              f"{gp(x['gap_bridged_untrained_pct']):>9} {gp(x['gap_bridged_idle_pct']):>9} "
              f"{gp(x['gap_bridged_idle_no_fallback_pct']):>11}")
    print("Kleio: online fallback, inference charged; the other columns without inference: no infer. (the same "
          "predictions), no fallb. (every prediction), future fb (fallback judged on the scored periods: FUTURE "
          "KNOWLEDGE), hybrid (selected pages given their true classes: FUTURE KNOWLEDGE), controls with the online "
          "fallback: untrained models, idle ('no access' always), and idle without the fallback (the control of no fallb.). used: predictions used, of the scored page-periods; "
          "break-even: the period at which the gain pays for the inference")
    for w in sorted({w for x in r["rows"] for w in x.get("warnings") or []}):
        print(f"warning: {w}")


LearnOpts = dict(
    history=typer.Option("--history", help="periods of input of each model (K)"),
    hidden=typer.Option("--hidden", help="LSTM hidden units per model"),
    epochs=typer.Option("--epochs", help="training epochs"),
    seed=typer.Option("--seed", help="seed of the models' initial weights"),
    train=typer.Option("--train", help="train on this trace of the same program (pages matched by address)"),
    holdout=typer.Option("--holdout", help="share of the last periods held out: models train on the periods before and are scored and used on these only (0: in sample)"),
    weight=typer.Option("--weight", help="class weighting of training windows: none, sqrt or balanced (idle vs accessed targets)"),
    threads=typer.Option("--threads", help="PyTorch threads [default: $TIERKIT_TORCH_THREADS, else 1]"),
    device=typer.Option("--device", help="where the models train and run: auto (cuda if PyTorch sees one), cpu or cuda"),
    infer_ns=typer.Option("--infer-ns", help="one model's inference at one boundary, ns, charged in the headline gap: 'measure' (with the trained models, here) or a number"),
)


def _infer(v: str) -> Union[str, float]:
    """--infer-ns: 'measure' or a number of ns >= 0."""
    if v == "measure":
        return v
    try:
        x = float(v)
    except ValueError:
        x = -1.0
    if not (x >= 0 and x < float("inf")):
        raise TierkitError(f"--infer-ns: '{v}' is not 'measure' or a number of ns >= 0")
    return x


@app.command("kleio")
def kleio_cmd(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    pages: Annotated[str, typer.Option("--pages", help="fractions of the trace's pages given models, comma-separated")] = "0.01,0.02,0.05,0.1,0.2",
    period: Annotated[Optional[int], typer.Option("--period", help="scheduling period in accesses [default: searched on the training periods among about 400, 160 and 80 periods over the trace]")] = None,
    platform: PlatformOpt = "dram-pmem",
    fast_capacity: Annotated[str, typer.Option("--fast-capacity", "-c", help="fast tier's share of the footprint")] = "0.2",
    timing: TimingOpt = "simple",
    history: Annotated[int, LearnOpts["history"]] = 8,
    hidden: Annotated[int, LearnOpts["hidden"]] = 16,
    epochs: Annotated[int, LearnOpts["epochs"]] = 60,
    seed: Annotated[int, LearnOpts["seed"]] = 0,
    train: Annotated[Optional[Path], LearnOpts["train"]] = None,
    holdout: Annotated[float, LearnOpts["holdout"]] = 0.5,
    weight: Annotated[str, LearnOpts["weight"]] = "none",
    threads: Annotated[Optional[int], LearnOpts["threads"]] = None,
    infer_ns: Annotated[str, LearnOpts["infer_ns"]] = "measure",
    device: Annotated[str, LearnOpts["device"]] = "auto",
    format: FormatOpt = None,
    cache: CacheOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Kleio: per-page LSTMs for the pages history misplaces (003 §3.2). Prints the share of
    the history-to-oracle gap bridged against the share of pages given models, with the
    fallbacks, perfect classes and controls beside it. --json output replays (tierkit replay)."""
    r = api._learned("kleio", trace, pages, period, platform, fast_capacity, timing, history, hidden, epochs, 0.5, seed,
                     train, holdout, weight, threads, format, cache, _progress(quiet), _infer(infer_ns), device)
    if json_out:
        print(json.dumps(r))
        return
    if r.get("period_chosen"):
        print(f"period: {r['period_chosen']}")
    _print_study(r)


@app.command("kleoniki")
def kleoniki_cmd(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    pages: Annotated[str, typer.Option("--pages", help="fractions of the trace's pages managed by group models, comma-separated")] = "0.05,0.1,0.2",
    period: Annotated[Optional[int], typer.Option("--period", help="scheduling period in accesses [default: Cori's choice for history]")] = None,
    tol: Annotated[float, typer.Option("--tol", help="merge patterns whose mean per-period distance to the group's stays within this many classes (0: identical only)")] = 0.5,
    platform: PlatformOpt = "dram-pmem",
    fast_capacity: Annotated[str, typer.Option("--fast-capacity", "-c", help="fast tier's share of the footprint")] = "0.2",
    timing: TimingOpt = "simple",
    history: Annotated[int, LearnOpts["history"]] = 8,
    hidden: Annotated[int, LearnOpts["hidden"]] = 16,
    epochs: Annotated[int, LearnOpts["epochs"]] = 60,
    seed: Annotated[int, LearnOpts["seed"]] = 0,
    train: Annotated[Optional[Path], LearnOpts["train"]] = None,
    holdout: Annotated[float, LearnOpts["holdout"]] = 0.5,
    weight: Annotated[str, LearnOpts["weight"]] = "none",
    threads: Annotated[Optional[int], LearnOpts["threads"]] = None,
    infer_ns: Annotated[str, LearnOpts["infer_ns"]] = "measure",
    device: Annotated[str, LearnOpts["device"]] = "auto",
    format: FormatOpt = None,
    cache: CacheOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Kleoniki: Kleio with one model per group of pages with the same per-period pattern,
    at Cori's period (003 §4). Prints pages managed per trained model and the gap bridged."""
    r = api._kleoniki(trace, pages, period, tol, platform, fast_capacity, timing, history, hidden, epochs, seed, train,
                      holdout, weight, threads, format, cache, _progress(quiet), _infer(infer_ns), device)
    note = r["period_chosen"]
    if json_out:
        print(json.dumps(r))
        return
    if note is not None:
        print(f"period: {note}")
    _print_study(r)


@trace_app.command("heatmap")
def trace_heatmap(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    period: Annotated[Optional[int], typer.Option("--period", help="period in accesses [default: about 400 periods over the trace]")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG to write")] = Path("heatmap.png"),
    format: FormatOpt = None,
    cache: CacheOpt = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Draw the trace's heat map: pages by address x periods, accesses as colour (Cori's
    visualization, 003 §3.3)."""
    api.heatmap(trace, period, out, force=force, format=format, cache=cache, progress=_progress(quiet))
    print(f"wrote {out}", file=sys.stderr)


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
             add_help_option=False)
def run_cmd(ctx: typer.Context) -> None:
    """Run a program on a machine with a fast and a slow NUMA node, place its pages under a
    policy, and report (docs/real-linux.md): tierkit run [--policy SPEC] ... -- PROGRAM ARGS.

    The options are those of the Rust command (crates/tierkit-run; 'tierkit run --help'
    shows them). tierkit exits with the program's exit status (128 + signal if it was killed).
    """
    raise typer.Exit(_run(list(ctx.args)))


def _run(argv: List[str]) -> int:
    """tierkit run: the Rust command, after solving the guidance again for --fast-capacity."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tierkit-run-") as tmp:
        try:
            argv = resolve_guidance_args(argv, Path(tmp))
        except TierkitError as e:
            print(error_line("tierkit: error: ", e), file=sys.stderr)
            return 2
        from .installed import allocator_for_run  # an installed tierkit's allocator (docs/install.md)

        missing = allocator_for_run(argv)
        if missing:
            print(error_line("tierkit: error: ", missing), file=sys.stderr)
            return 2
        return _core_run(argv)


def _option(argv: List[str], name: str) -> Optional[tuple[int, str]]:
    """Where the last `name VALUE` or `name=VALUE` stands among tierkit run's own options
    (before `--`), and its value."""
    end = argv.index("--") if "--" in argv else len(argv)
    found = None
    for i in range(end):
        if argv[i] == name and i + 1 < end:
            found = (i, argv[i + 1])
        elif argv[i].startswith(name + "="):
            found = (i, argv[i][len(name) + 1:])
    return found


def resolve_guidance_args(argv: List[str], tmp: Path) -> List[str]:
    """`tierkit run --guidance G --fast-capacity BYTES`: G's strategy solved again on its sites'
    sizes and accesses for a fast tier of BYTES (docs/guidance.md, "Guidance for the machine's
    capacity"), written into `tmp` and run instead of G; one line on stderr says what changed.
    Other command lines are returned as they are."""
    g_at, cap_at = _option(argv, "--guidance"), _option(argv, "--fast-capacity")
    if g_at is None or cap_at is None:
        return argv
    from . import guidance

    path, cap = Path(g_at[1]), cap_at[1]
    if isinstance(guidance.parse_capacity(cap, "--fast-capacity"), float):
        raise guidance.GuidanceError(f"--fast-capacity: '{cap}' is a share of the footprint: give the fast tier's size "
                                     "on this machine (512M, 2G) to solve the guidance for")
    try:
        st = path.stat()
    except OSError:
        return argv  # the Rust command says what is wrong with it, naming the user's file
    # what the Rust command and the allocator accept (docs/guidance.md); beyond it, they refuse
    # the file, naming it
    if not path.is_file() or st.st_size > guidance.MAX_GUIDANCE_BYTES:
        return argv
    g = guidance.read_guidance(path)
    if g["version"] < 2:
        return argv
    caps: List[Union[int, float, str]] = [cap] + [int(c) for c in g["capacity_bytes"][1:]]
    r = guidance.resolve(g, caps)
    out = tmp / path.name
    guidance.write_guidance(r, out)
    old, new = r["resolved_from"], r["capacity_bytes"][0]
    fast = sum(1 for s in r["sites"] if s["tier"] == 0)
    print(f"tierkit run: {path}: {r['strategy']} solved again for a fast tier of {new:,} bytes (made for "
          f"{old['capacity_bytes'][0]:,}): {fast} of {len(r['sites'])} sites fast (were {old['fast_sites']})", file=sys.stderr)
    i = g_at[0]
    argv = list(argv)
    if argv[i] == "--guidance":
        argv[i + 1] = str(out)
    else:
        argv[i] = f"--guidance={out}"
    return argv


def _core_run(argv: List[str]) -> int:
    from ._core import run_main

    sys.stdout.flush()
    sys.stderr.flush()
    return run_main(argv)


#: how each kind of deployment reads in `tierkit policies` (the registry's `deploy`)
DEPLOY_TEXT = {
    "memory": "tierkit run --policy (a memory policy set when the program starts)",
    "kernel": "tierkit run --policy (Linux's own tiering, set up for the run and restored after)",
    "daemon": "tierkit run --policy (a daemon: the same decision code on what Linux shows of the program)",
    "allocator": "tierkit guide, then tierkit run --guidance FILE (the preloaded allocator)",
    "future_knowledge": "not deployable: it uses knowledge of the future (a bound)",
}


def deploy_line(d: dict) -> str:
    """How a policy runs on a real machine, or why it does not (`deploy` of `tierkit policies --json`)."""
    how = d.get("how", "")
    if how == "hardware":
        return f"simulation only: {d.get('why', '')}"
    if how == "not_live":
        return f"not live yet: {d.get('why', '')}"
    return DEPLOY_TEXT.get(how, how)


@app.command("setup")
def setup_command(
    prefix: Annotated[Optional[Path], typer.Option("--prefix", help="build here instead [default: $TIERKIT_DATA_DIR, else $XDG_DATA_HOME/tierkit, else ~/.local/share/tierkit]")] = None,
    parts: Annotated[Optional[str], typer.Option("--parts", help="comma-separated: tracer, workloads, alloc [default: all three]")] = None,
) -> None:
    """Build what a tierkit installed with pip needs beside Python (docs/install.md): the
    Valgrind tool of 'trace record' (needs Valgrind and gcc), the test workloads of 'workloads'
    (gcc) and the preloaded allocator of 'run --guidance' (cargo), from the sources the package
    carries, into a data folder where tierkit finds them. A clone has 'make build' instead."""
    from . import setup_cmd

    setup_cmd.setup(prefix, parts)


@app.command("policies")
def list_policies(json_out: JsonOpt = False) -> None:
    """List every policy with its parameters (type, unit, default, source)."""
    ps = json.loads(api._core.policies())
    if json_out:
        print(json.dumps(ps, indent=2))
        return
    for p in ps:
        tag = "  [oracle: uses future knowledge]" if p["future_knowledge"] else ""
        print(f"{p['name']}{tag}\n    {p['summary']}\n    source: {p['source']}\n    on Linux: {deploy_line(p['deploy'])}")
        for a in p["params"]:
            ty = a["ty"]["type"]
            if ty == "choice":
                ty = "|".join(a["ty"]["options"])
            elif ty in ("int", "float"):
                ty = f"{ty} in [{a['ty']['min']}, {a['ty']['max']}]"
            unit = f" {a['unit']}" if a["unit"] else ""
            default = a["default"] if a["default"] != "" else "(empty)"
            scaled = f"; --time-scale K: {a['time_scale']}" if a.get("time_scale") else ""
            print(f"    {a['name']} = {default}{unit}  ({ty}; default from {a['source']}{scaled})\n        {a['help']}")
        print()


def _chosen(value: Optional[str], known: Sequence[str], flag: str, default: Sequence[str], what: str, mode: str = "") -> list[str]:
    """A comma-separated --workloads/--policies/--programs value (or `default`), each name
    checked against `known`; `mode` (" for --timing") goes into the error."""
    names = [x.strip() for x in value.split(",")] if value else list(default)
    for n in names:
        if n not in known:
            raise TierkitError(f"{flag}: unknown {what} '{n}'{mode} (known: {', '.join(known)})")
    return names


def _tierkit_run_bin() -> Path:
    """target/release/tierkit-run, which the VM validations copy into the VM."""
    from .validate import ROOT

    run_bin = ROOT / "target" / "release" / "tierkit-run"
    if not run_bin.is_file():
        raise TierkitError(f"validate: {run_bin} is missing (cargo build --release -p tierkit-run)")
    return run_bin


def _repeats(repeats: int) -> int:
    if not 1 <= repeats <= 10:
        raise TierkitError(f"--repeats: {repeats} is outside [1, 10]")
    return repeats


@app.command("validate")
def validate_cmd(
    workloads: Annotated[Optional[str], typer.Option("--workloads", help="comma-separated: phases, sites, stencil, rwmix (default: all four); with --timing also the real programs xz, perl (default: all six)")] = None,
    policies: Annotated[Optional[str], typer.Option("--policies", help="comma-separated: autonuma-tiering, damon-tiering (default: both)")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="results JSON (its table goes beside it as .md)")] = Path("experiments/results/validation.json"),
    img_dir: Annotated[Optional[Path], typer.Option("--img-dir", help="write a plot per workload here (PNG)")] = None,
    work: Annotated[Optional[Path], typer.Option("--work", help="traces and platform files (default target/validation; traces are reused)")] = None,
    fast_free_mib: Annotated[int, typer.Option("--fast-free-mib", help="node 0's free memory at each program's start, MiB (the rest is reserved as hugetlb pages)")] = 64,
    scales: Annotated[str, typer.Option("--scales", help="factors on the clock alignment K to run the models at (sensitivity)")] = "0.5,1,2",
    guided: Annotated[bool, typer.Option("--guided", help="instead: guidance applied by the preloaded allocator (tierkit run --guidance) in the VM against the simulated guided run (docs/guidance.md, 'Checked in the VM'); workloads sites, bfs; --fast-free-mib default 96")] = False,
    repeats: Annotated[Optional[int], typer.Option("--repeats", help="kernel runs per workload and policy (their counts vary from run to run: the table gives mean and range); default 3, with --timing 1")] = None,
    length: Annotated[Optional[float], typer.Option("--length", help="multiply each workload's --work by this (traces are recorded at the same length); default: the length whose run lasts --min-vm-seconds in the VM")] = None,
    min_vm_seconds: Annotated[float, typer.Option("--min-vm-seconds", help="without --length: find per workload the length whose run lasts at least this long in the VM (0: length 1)")] = 8.0,
    programs: Annotated[Optional[str], typer.Option("--programs", help="with --guided: comma-separated real programs of the suite (sqlite3, xz: data/traces/real's traces, recorded when missing), run from the host's binaries in the VM; without --workloads, only these")] = None,
    vcpus: Annotated[int, typer.Option("--vcpus", help="with --timing: the VM's vCPUs (node 0's); 4 leaves the daemons' observation and the kdamonds a vCPU of their own beside the program")] = 2,
    remodel: Annotated[Optional[Path], typer.Option("--remodel", help="with --timing: no VM; the model's side again on the VM runs this earlier --timing result holds (its 'measurements')")] = None,
    slow_tier: Annotated[bool, typer.Option("--slow-tier", help="the kernel validation in VMs paced by the slow-tier plugin: the guest's clock follows its time model, not the host's speed (docs/validation.md, 'Reproducible under the slow tier')")] = False,
    timing: Annotated[bool, typer.Option("--timing", help="instead: predicted runtimes against runtimes measured in the VM with a slow tier that is really slower (docs/validation.md, 'Predicted runtimes against measured ones'); policies all-fast, all-slow, first-touch, autonuma-tiering, damon-tiering, hyplacer, history")] = False,
) -> None:
    """Validate tierkit's models of Linux's tiering policies against the kernel in the testbed
    VM, on the same programs (docs/validation.md); with --guided, the guided allocator's
    placement against the simulated guided run (docs/guidance.md); with --timing, predicted
    runtimes against measured ones."""
    from . import validate as v

    if timing:
        from . import validate_timing as vt
        from .testbed import slow_tier_unavailable

        if guided or programs is not None or slow_tier:
            raise TierkitError("--timing: not with --guided, --programs or --slow-tier (its VM always has the slow tier)")
        if remodel is not None:
            if workloads is not None or policies is not None:
                raise TierkitError("--remodel: the workloads and policies are those of the measurements")
            o = out if out != Path("experiments/results/validation.json") else Path("experiments/results/validation_timing.json")
            if o.resolve() == remodel.resolve():
                raise TierkitError(f"--remodel: --out {o} would overwrite the measurements it reads")
            try:
                res = vt.repredict(remodel, o, work, (img_dir / "validation-timing.png") if img_dir is not None else None)
            except RuntimeError as e:
                raise TierkitError(f"validate --timing --remodel: {e}") from None
            print(vt.table(res), end="")
            return
        subjects = [*vt.WORKLOADS, *vt.PROGRAMS]
        names = _chosen(workloads, subjects, "--workloads", subjects, "workload", " for --timing")
        pols = _chosen(policies, list(vt.RUNS), "--policies", vt.POLICIES, "policy", " for --timing")
        if not 16 <= fast_free_mib <= 400:
            raise TierkitError(f"--fast-free-mib: {fast_free_mib} is outside [16, 400]")
        reps = _repeats(1 if repeats is None else repeats)
        if not 1 <= vcpus <= 8:
            raise TierkitError(f"--vcpus: {vcpus} is outside [1, 8]")
        why = slow_tier_unavailable()
        if why is not None:
            raise TierkitError(f"validate --timing: the testbed's slow tier cannot run here: {why}")
        _tierkit_run_bin()
        o = out if out != Path("experiments/results/validation.json") else Path("experiments/results/validation_timing.json")
        img = (img_dir / "validation-timing.png") if img_dir is not None else None
        try:
            res = vt.validate_timing(names, pols, o, work, img, fast_free_mib, True, repeats=reps, cpus=vcpus)
        except RuntimeError as e:
            raise TierkitError(f"validate --timing: {e}") from None
        print(vt.table(res), end="")
        return

    if vcpus != 2:
        raise TierkitError("--vcpus: only with --timing")
    if guided:
        from . import guided_vm as gv
        from .testbed import availability

        progs = [x.strip() for x in programs.split(",") if x.strip()] if programs else []
        names = _chosen(workloads, list(gv.WORKLOADS), "--workloads", [] if progs else list(gv.WORKLOADS), "workload", " for --guided")
        for n in progs:
            if n not in gv.PROGRAMS:
                raise TierkitError(f"--programs: unknown program '{n}' (known: {', '.join(gv.PROGRAMS)})")
        if policies is not None:
            raise TierkitError("--policies: not used with --guided (the runs are guided, first-touch and all-slow)")
        if slow_tier or remodel is not None:
            raise TierkitError("--slow-tier, --remodel: not with --guided")
        mib = gv.FAST_FREE_MIB if fast_free_mib == 64 else fast_free_mib
        if not 16 <= mib <= 400:
            raise TierkitError(f"--fast-free-mib: {mib} is outside [16, 400]")
        why = availability()
        if why is not None:
            raise TierkitError(f"validate: the testbed VM cannot run here: {why}")
        stem = "guided_vm" if names else "guided_vm_programs"
        o = out if out != Path("experiments/results/validation.json") else Path(f"experiments/results/{stem}.json")
        img = (img_dir / f"{stem.replace('_', '-')}.png") if img_dir is not None else None
        try:
            res = gv.validate_guided(names, o, work, img, mib, programs=progs)
        except RuntimeError as e:
            raise TierkitError(f"validate --guided: {e}") from None
        print(gv.table(res), end="")
        return

    if programs is not None:
        raise TierkitError("--programs: only with --guided")
    if remodel is not None:
        raise TierkitError("--remodel: only with --timing")
    names = _chosen(workloads, list(v.WORKLOADS), "--workloads", list(v.WORKLOADS), "workload")
    pols = _chosen(policies, list(v.POLICIES), "--policies", v.POLICIES, "policy")
    try:
        fs = [float(x) for x in scales.split(",")]
    except ValueError:
        raise TierkitError(f"--scales: '{scales}' is not a comma-separated list of numbers") from None
    if 1.0 not in fs or any(not (f > 0) for f in fs):
        raise TierkitError(f"--scales: '{scales}' must hold 1 and only positive factors")
    reps = _repeats(v.REPEATS if repeats is None else repeats)
    if not 16 <= fast_free_mib <= 400:
        raise TierkitError(f"--fast-free-mib: {fast_free_mib} is outside [16, 400]")
    from .testbed import availability

    why = availability()
    if why is None and slow_tier:
        from .testbed import slow_tier_unavailable

        why = slow_tier_unavailable()
    if why is not None:
        raise TierkitError(f"validate: the testbed VM{' with the slow tier' if slow_tier else ''} cannot run here: {why}")
    _tierkit_run_bin()
    if length is not None and not 0.1 <= length <= 32:
        raise TierkitError(f"--length: {length:g} is outside [0.1, 32]")
    if not 0 <= min_vm_seconds <= 120:
        raise TierkitError(f"--min-vm-seconds: {min_vm_seconds:g} is outside [0, 120]")
    res = v.validate(names, pols, out, work, img_dir, fast_free_mib, True, fs, repeats=reps,
                     length=length, min_vm_s=min_vm_seconds, slow_tier=slow_tier)
    print(v.table(res), end="")


@app.command("platforms")
def list_platforms(
    name: Annotated[Optional[str], typer.Argument(help="show one platform (preset or file) in full")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List the preset platforms with their tiers, or show one."""
    ps = [api.platform(name)] if name else json.loads(api._core.platforms())
    if json_out:
        print(json.dumps(ps if not name else ps[0], indent=2))
        return
    for p in ps:
        print(f"{p['name']}: {p['description']}")
        for t in p["tiers"]:
            cap = t.get("capacity") or "unlimited"
            print(f"    {t['name']:<6} cap {cap!s:<10} read {t['read_latency_ns']:g} ns {t['read_bw_gb_per_s']:g} GB/s, "
                  f"write {t['write_latency_ns']:g} ns {t['write_bw_gb_per_s']:g} GB/s, "
                  f"energy r/w {t['read_energy_pj_per_bit']:g}/{t['write_energy_pj_per_bit']:g} pJ/bit")
        m = p["migration"]
        print(f"    migration: fault {m['fault_ns']:g} ns, TLB shootdown {m['tlb_shootdown_ns']:g} ns, per page {m['per_page_ns']:g} ns, "
              f"per period {m['per_period_ns']:g} ns, copy from bandwidth: {m['copy_from_bandwidth']}")
        if name:
            print(f"    cpu: {p['cpu']}\n    source: {p['source']}")
        print()


# An error is one readable line whatever the input (docs/limits.md, "Error lines"): the core elides what it quotes
# (crates/tierkit-core/src/error.rs, the same limits); here the whole line, prefix included,
# keeps at most _MAX_LINE_CHARS: room for the known names and the reason after a quoted value.
_MAX_TOKEN_CHARS = 64
_MAX_PATH_CHARS = 80
#: what a path keeps when the line is too long: its start and file name are enough to find it
_MIN_PATH_CHARS = 40
_MAX_LINE_CHARS = 480


def _elide(text: str, limit: int, head_share: float = 2 / 3) -> str:
    """``text`` with its middle replaced by an ellipsis so that it has at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    head = int((limit - 1) * head_share)
    return text[:head] + "\u2026" + text[len(text) - (limit - 1 - head):]


def _elide_path(path: str, limit: int = _MAX_PATH_CHARS) -> str:
    """A long path keeps its start and its file name (up to two thirds of ``limit``)."""
    if len(path) <= limit:
        return path
    tail = min(len(path) - path.rfind("/"), (limit - 1) * 2 // 3)
    return _elide(path, limit, (limit - 1 - tail) / (limit - 1))


def _short_token(word: str, path_limit: int = _MAX_PATH_CHARS) -> str:
    core = word.rstrip(":,;)'\"")
    rest = word[len(core):]
    if "/" in core:
        return _elide_path(core, path_limit) + rest
    # a token keeps more of its end, where a path has its file name
    return _elide(core, _MAX_TOKEN_CHARS, 1 / 3) + rest


def one_line(message: object, limit: int = _MAX_LINE_CHARS) -> str:
    """An error message as one line: whitespace runs become one space, unprintable characters
    '?', each over-long token keeps its start and end (a path its start and file name), and the
    whole keeps at most ``limit`` characters: paths give up room first (down to
    ``_MIN_PATH_CHARS``), then the middle of the line goes."""
    text = "".join(c if c.isprintable() else "?" for c in " ".join(str(message).split()))
    words = [_short_token(w) for w in text.split(" ")]
    if len(" ".join(words)) > limit:
        words = [_short_token(w, _MIN_PATH_CHARS) for w in words]
    return _elide(" ".join(words), limit)


def error_line(prefix: str, message: object, suffix: str = "") -> str:
    """``prefix``, the message as :func:`one_line` and ``suffix``: at most ``_MAX_LINE_CHARS``."""
    return prefix + one_line(message, max(40, _MAX_LINE_CHARS - len(prefix) - len(suffix))) + suffix


def _surrogates_kept() -> None:
    """Text written out keeps a non-UTF-8 file name's bytes as they were (Python reads them
    from the command line as lone surrogates, which its stdout would refuse to encode)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8":
            try:
                reconfigure(errors="surrogateescape" if stream is sys.stdout else "backslashreplace")
            except (ValueError, OSError):
                pass


def _not_utf8(e: UnicodeEncodeError) -> Optional[str]:
    """The user error for text with bytes that are not UTF-8 where tierkit needs text (a
    policy spec, a size, a platform name; file names take any bytes): None if ``e`` is not that."""
    if "surrogate" not in str(e.reason) or not isinstance(e.object, str):
        return None
    try:  # the bytes as they were on the command line (Python keeps them as surrogates)
        raw = e.object.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = e.object.encode("utf-8", "backslashreplace")
    shown = raw.decode("utf-8", "backslashreplace")
    return f"'{shown}': not UTF-8 text (file names may hold any bytes; names, specs and sizes are read as UTF-8)"


def crash_log(exc: BaseException, argv: List[str]) -> str:
    """Write the traceback of an unexpected exception to a log file (in ``crash/`` of
    tierkit's cache folder: $TIERKIT_CACHE_DIR, else $XDG_CACHE_HOME/tierkit, else
    ~/.cache/tierkit); returns its path, or a note that it could not be written."""
    import datetime
    import os
    import traceback

    from .output import cache_home

    d = os.path.join(cache_home(), "crash")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = os.path.join(d, f"{stamp}-{os.getpid()}.log")
    from . import __version__

    try:
        os.makedirs(d, exist_ok=True)
        with open(path, "x", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"tierkit {__version__}, python {sys.version.split()[0]}\n")
            f.write("argv: " + " ".join(repr(a) for a in argv) + "\n\n")
            f.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    except (OSError, RecursionError, MemoryError):
        return "no log: it could not be written"
    return path


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point: run the app, turning every user error into one line and exit status 2,
    and anything unexpected into one line, exit status 3, with the detail in a log file."""
    args = sys.argv[1:] if argv is None else list(argv)
    _surrogates_kept()
    try:
        return _main(args, argv)
    except UnicodeEncodeError as e:
        msg = _not_utf8(e)
        if msg is not None:
            print(error_line("tierkit: error: ", msg), file=sys.stderr)
            return 2
        return _internal(e, args)
    except MemoryError as e:
        return _internal(e, args, "out of memory")
    except Exception as e:  # the last barrier: never a traceback (docs/security.md)
        return _internal(e, args)


def _internal(e: BaseException, args: List[str], what: Optional[str] = None) -> int:
    log = crash_log(e, args)
    detail = what or f"{type(e).__name__}: {e}"
    print(error_line("tierkit: internal error (a bug in tierkit, please report it): ", detail, f" [{log}]"),
          file=sys.stderr)
    return 3


def _main(args: List[str], argv: Optional[List[str]]) -> int:
    # 'tierkit run' goes to the Rust command as it is: click would swallow the '--' that
    # separates tierkit's options from the program's
    if args[:1] == ["run"]:
        return _run(args[1:])
    cmd = typer.main.get_command(app)
    try:
        rc = cmd.main(args=argv, prog_name="tierkit", standalone_mode=False)
        # a command's typer.Exit(code) comes back as the return value here ('trace record'
        # passes the program's exit status on)
        return rc if isinstance(rc, int) else 0
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        print("tierkit: interrupted", file=sys.stderr)
        return 130
    except typer.TyperException as e:
        # a group run with nothing after it ('tierkit', 'tierkit trace'): its help, as --help
        # gives it (click raises that as a usage error)
        help_ctx = getattr(e, "ctx", None)
        if type(e).__name__ == "NoArgsIsHelpError" and help_ctx is not None:
            print(help_ctx.get_help())
            return 0
        # usage errors (unknown option, missing argument, bad value): one line, status 2
        ctx = getattr(e, "ctx", None)
        path = getattr(ctx, "command_path", "") or ""
        where = f" (see '{path} --help')" if path else ""
        print(error_line("tierkit: error: ", e.format_message(), where), file=sys.stderr)
        return getattr(e, "exit_code", 2) or 2
    except KeyboardInterrupt:
        print("tierkit: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        # SIGTERM while a file was written (tierkit.output): its temporary file is gone
        print("tierkit: terminated", file=sys.stderr)
        return 143
    except TierkitError as e:
        print(error_line("tierkit: error: ", e), file=sys.stderr)
        return 2
    except TierkitInternalError as e:
        return _internal(e, args)
    except TestbedError as e:
        # the testbed VM failed (a kernel panic, QEMU gone, a command past its time): not the
        # user's input, but one line all the same; the message names the kept console log
        print(error_line("tierkit: error: ", e), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
