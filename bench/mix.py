#!/usr/bin/env python3
"""Many cores sharing the tiers (docs/models.md, "Many cores"):

1. speed: aggregate accesses per second of a 16-program mix against the single-program
   engine on the same accesses (target: at least 70% of its throughput per access), at
   quanta 1, 2, 4 and 16, in wall and CPU seconds (CPU time is the figure to trust on a shared
   machine, bench/README.md), with each quantum's runtime error against quantum 1
   (``mix_q16_runtime_vs_q1``: a quantum above 1 is lax synchronization, faster and not exact);
   the same on real traces: 16 copies of a recorded program (data/traces/real/xz-train.tkt,
   git-ignored, skipped with a note when absent; ``make traces`` records it) and of the
   vendored 403.gcc.gz, against the trace alone replayed 16 times;
2. quantum: the runtime error of quanta 2, 4 and 16 against 1 on a bandwidth-bound 16-program
   mix (20 instructions per access: DCPMM's queue 64% busy at quantum 1) and on a
   latency-bound one (200 instructions per access: 22% busy), first-touch (docs/models.md,
   "Lax synchronization's error");
3. bandwidth saturation as seed 004 Fig. 2: a streaming program (reads only, or writes only)
   on 1, 2, 4, 8, 16 and 32 cores of dram-dcpmm, every page on DCPMM (all-slow) or on DRAM
   (all-fast): the bandwidth delivered and the reads' latency, plotted to
   docs/img/mix-saturation.png.

    make bench-mix        (or: python bench/mix.py [--out DIR] [--accesses N] [--only PART] [--json])

Release build; writes DIR/mix.json and prints the figures bench/README.md quotes (with
--json: one JSON object on stdout, the progress lines on stderr; its ``ratio_cpu`` is the
first-touch mix's accesses per CPU second at quantum 1 over one program's).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import tierkit
from clock import Clock

CORES = (1, 2, 4, 8, 16, 32)
#: instructions per access of the streaming program: a line per 40 instructions, so that one
#: core asks less than a tier gives (at 1 a single core saturates a tier with posted writes)
INSN = 40
#: the policies of the speed comparison
POLICIES = ("first-touch", "history:period=100K")
#: the quanta compared (1: exact interleaving)
QUANTA = (1, 2, 4, 16)
#: instructions per access of the quantum error's two mixes: bandwidth-bound, latency-bound
BOUND = {"bandwidth": 20, "latency": 200}
#: real traces of the speed comparison: recorded by `make traces` (git-ignored), vendored
REAL = (Path("data/traces/real/xz-train.tkt"), Path("data/traces/403.gcc.gz"))
PROGRAMS = 16

#: where the progress lines go (stderr with --json, so that stdout is the JSON object alone)
OUT = sys.stdout


def say(*a) -> None:
    print(*a, file=OUT, flush=True)


def timed(f):
    with Clock() as c:
        r = f()
    return r, c


def zipf_mix(d: Path, per_program: int, insn: int = 20) -> list[Path]:
    traces = []
    for s in range(1, PROGRAMS + 1):
        p = d / f"z{insn}-{s}.tkt"
        if not p.exists():
            tierkit.synth("zipf", p, accesses=per_program, pages=20_000, seed=s, write_ratio=0.3, insn_per_access=insn,
                          progress=False)
        traces.append(p)
    return traces


def mix_run(traces, pol: str, q: int) -> dict:
    return tierkit.run(traces, "dram-dcpmm", pol, 0.2, timing="detailed", progress=False, mix=True, quantum=q, alone=False)


def compare(single, traces, pol: str) -> dict:
    """One program against the mix at each quantum: accesses per wall and per CPU second, the
    ratio to one program's, and the mix's runtime against quantum 1's."""
    one, c = timed(single)
    row = {"single_accesses_per_s": one["accesses"] / c.wall_s, "single_accesses_per_cpu_s": one["accesses"] / c.cpu_s,
           "single_wall_s": c.wall_s, "single_cpu_s": c.cpu_s}
    for q in QUANTA:
        mix, c = timed(lambda: mix_run(traces, pol, q))
        row[f"mix_q{q}_wall_s"], row[f"mix_q{q}_cpu_s"] = c.wall_s, c.cpu_s
        row[f"mix_q{q}_accesses_per_s"] = mix["accesses"] / c.wall_s
        row[f"mix_q{q}_accesses_per_cpu_s"] = mix["accesses"] / c.cpu_s
        row[f"mix_q{q}_ratio"] = row[f"mix_q{q}_accesses_per_s"] / row["single_accesses_per_s"]
        row[f"mix_q{q}_ratio_cpu"] = row[f"mix_q{q}_accesses_per_cpu_s"] / row["single_accesses_per_cpu_s"]
        row[f"mix_q{q}_runtime_ns"] = mix["runtime_ns"]
        row[f"mix_q{q}_runtime_vs_q1"] = mix["runtime_ns"] / row["mix_q1_runtime_ns"]
    return row


def show(name: str, row: dict) -> None:
    say(f"{name}: single {row['single_accesses_per_cpu_s'] / 1e6:.2f} M acc per CPU s "
        f"({row['single_accesses_per_s'] / 1e6:.2f} M acc/s wall); 16-program mix, per CPU s (wall ratio), runtime vs q1: "
        + "; ".join(f"q{q} {row[f'mix_q{q}_accesses_per_cpu_s'] / 1e6:.2f} M ({100 * row[f'mix_q{q}_ratio_cpu']:.0f}%, wall "
                    f"{100 * row[f'mix_q{q}_ratio']:.0f}%) runtime {row[f'mix_q{q}_runtime_vs_q1']:.2f}x" for q in QUANTA))


def speed(d: Path, per_program: int) -> dict:
    traces = zipf_mix(d, per_program)
    one = d / "one.tkt"
    tierkit.synth("zipf", one, accesses=PROGRAMS * per_program, pages=PROGRAMS * 20_000, seed=1, write_ratio=0.3,
                  progress=False)
    out: dict = {"programs": PROGRAMS, "accesses_per_program": per_program, "policies": {}, "real": {}}
    for pol in POLICIES:
        row = compare(lambda: tierkit.run(one, "dram-dcpmm", pol, 0.2, timing="detailed", progress=False), traces, pol)
        out["policies"][pol] = row
        show(pol, row)
    for t in REAL:
        if not t.exists():
            out["real"][str(t)] = {"skipped": f"{t} is absent (git-ignored; `make traces` records it)"}
            say(f"real trace {t}: absent, skipped (git-ignored; `make traces` records it)")
            continue
        # the trace alone, replayed 16 times as one run: the mix's accesses
        row = compare(lambda: tierkit.run(t, "dram-dcpmm", "first-touch", 0.2, timing="detailed", progress=False,
                                          repeat=PROGRAMS), [t] * PROGRAMS, "first-touch")
        out["real"][str(t)] = row
        show(f"first-touch, 16 x {t.name}", row)
    return out


def quantum_error(d: Path, per_program: int) -> dict:
    out = {}
    for bound, insn in BOUND.items():
        traces = zipf_mix(d, per_program, insn)
        rows = []
        for q in QUANTA:
            r, c = timed(lambda: mix_run(traces, "first-touch", q))
            dcpmm = next(x for x in r["stats"]["timing"]["tiers"] if x["name"] == "DCPMM")
            rows.append({"quantum": q, "runtime_ns": r["runtime_ns"], "runtime_vs_q1": r["runtime_ns"] / (rows[0]["runtime_ns"] if rows else r["runtime_ns"]),
                         "dcpmm_utilization": max(dcpmm["read_queue_utilization"], dcpmm["write_queue_utilization"]),
                         "wall_s": c.wall_s, "cpu_s": c.cpu_s, "accesses_per_cpu_s": r["accesses"] / c.cpu_s})
            x = rows[-1]
            say(f"{bound}-bound ({insn} insn/access) quantum {q:2}: runtime {x['runtime_ns'] / 1e6:.3f} ms "
                f"({x['runtime_vs_q1']:.2f}x quantum 1's), DCPMM {100 * x['dcpmm_utilization']:.0f}% busy, "
                f"{x['accesses_per_cpu_s'] / 1e6:.2f} M acc per CPU s")
        out[bound] = {"insn_per_access": insn, "rows": rows}
    return out


def saturation(d: Path, accesses: int) -> list[dict]:
    rows: list[dict] = []
    for kind, ratio in (("read", 0.0), ("write", 1.0)):
        p = d / f"stream-{kind}.tkt"
        tierkit.synth("stream", p, accesses=accesses, pages=max(1, accesses // 64), write_ratio=ratio, insn_per_access=INSN,
                      progress=False)
        for tier, pol in (("DCPMM", "all-slow"), ("DRAM", "all-fast")):
            for n in CORES:
                if n == 1:
                    r = tierkit.run(p, "dram-dcpmm", pol, 0.5, timing="detailed", progress=False)
                else:
                    r = tierkit.run([p] * n, "dram-dcpmm", pol, 0.5, timing="detailed", progress=False, mix=True, alone=False)
                t = next(x for x in r["stats"]["timing"]["tiers"] if x["name"] == tier)
                moved = (r["reads"] if kind == "read" else r["writes"]) * 64
                rows.append({"access": kind, "tier": tier, "cores": n, "bandwidth_gb_per_s": moved / r["runtime_ns"],
                             "read_latency_ns": t["avg_read_latency_ns"] if kind == "read" else None,
                             "utilization": t["read_queue_utilization"] if kind == "read" else t["write_queue_utilization"],
                             "runtime_ns": r["runtime_ns"]})
                x = rows[-1]
                say(f"{kind:5} {tier:5} {n:2} cores: {x['bandwidth_gb_per_s']:6.2f} GB/s"
                    + (f", read latency {x['read_latency_ns']:.0f} ns" if x["read_latency_ns"] else "")
                    + f", utilization {100 * x['utilization']:.0f}%")
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plat = tierkit.platform("dram-dcpmm")
    peak = {t["name"]: (t["read_bw_gb_per_s"], t["write_bw_gb_per_s"]) for t in plat["tiers"]}
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for i, (tier, kind) in enumerate((("DCPMM", "read"), ("DCPMM", "write"), ("DRAM", "read"), ("DRAM", "write"))):
        xs = [r for r in rows if r["tier"] == tier and r["access"] == kind]
        a.plot([r["cores"] for r in xs], [r["bandwidth_gb_per_s"] for r in xs], marker="o", color=f"C{i}", label=f"{tier} {kind}s")
        a.axhline(peak[tier][0 if kind == "read" else 1], color=f"C{i}", lw=0.8, ls=":")
        if kind == "read":
            b.plot([r["cores"] for r in xs], [r["read_latency_ns"] for r in xs], marker="o", color=f"C{i}", label=f"{tier}")
    a.set_xscale("log", base=2)
    a.set_xticks(CORES, [str(c) for c in CORES])
    a.set_xlabel("cores streaming")
    a.set_ylabel("bandwidth delivered (GB/s); dotted: the tier's peak")
    a.set_title("dram-dcpmm: bandwidth against cores")
    a.legend(fontsize="small")
    b.set_xscale("log", base=2)
    b.set_xticks(CORES, [str(c) for c in CORES])
    b.set_xlabel("cores streaming (reads)")
    b.set_ylabel("mean read latency (ns)")
    b.set_title("latency climbs along the loaded-latency curve")
    b.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--accesses", type=int, default=250_000, help="accesses per program of the speed and quantum mixes")
    ap.add_argument("--img", type=Path, default=Path("docs/img/mix-saturation.png"))
    ap.add_argument("--only", choices=("speed", "quantum", "saturation"), help="run one of the three parts")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object (progress on stderr)")
    a = ap.parse_args()
    if a.json:
        OUT = sys.stderr
    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        res = {"speed": speed(d, a.accesses) if a.only in (None, "speed") else None,
               "quantum": quantum_error(d, a.accesses) if a.only in (None, "quantum") else None,
               "saturation": saturation(d, 200_000) if a.only in (None, "saturation") else None}
    if res["speed"]:
        # the headline: the mix's throughput per access over one program's, CPU time, quantum 1
        ft = res["speed"]["policies"]["first-touch"]
        res["ratio_cpu"] = ft["mix_q1_ratio_cpu"]
        res["mix_q16_runtime_vs_q1"] = ft["mix_q16_runtime_vs_q1"]
    if res["saturation"]:
        plot(res["saturation"], a.img)
    (a.out / "mix.json").write_text(json.dumps(res, indent=1))
    say(f"wrote {a.out / 'mix.json'}" + (f" and {a.img}" if res["saturation"] else ""))
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
