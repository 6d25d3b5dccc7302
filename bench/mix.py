#!/usr/bin/env python3
"""Many cores sharing the tiers (docs/models.md, "Many cores"):

1. speed: aggregate accesses per second of a 16-program mix against the single-program
   engine on the same accesses (target: at least 70% of its throughput per access), at the
   default quantum (16) and at 1;
2. bandwidth saturation as seed 004 Fig. 2: a streaming program (reads only, or writes only)
   on 1, 2, 4, 8, 16 and 32 cores of dram-dcpmm, every page on DCPMM (all-slow) or on DRAM
   (all-fast): the bandwidth delivered and the reads' latency, plotted to
   docs/img/mix-saturation.png.

    make bench-mix        (or: python bench/mix.py [--out DIR] [--accesses N])

Release build; writes DIR/mix.json and prints the figures bench/README.md quotes.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import tierkit

CORES = (1, 2, 4, 8, 16, 32)
#: instructions per access of the streaming program: a line per 40 instructions, so that one
#: core asks less than a tier gives (at 1 a single core saturates a tier with posted writes)
INSN = 40
#: the policies of the speed comparison
POLICIES = ("first-touch", "history:period=100K")


def timed(f):
    t0 = time.perf_counter()
    r = f()
    return r, time.perf_counter() - t0


def speed(d: Path, per_program: int) -> dict:
    traces = []
    for s in range(1, 17):
        p = d / f"z{s}.tkt"
        tierkit.synth("zipf", p, accesses=per_program, pages=20_000, seed=s, write_ratio=0.3, progress=False)
        traces.append(p)
    one = d / "one.tkt"
    tierkit.synth("zipf", one, accesses=16 * per_program, pages=320_000, seed=1, write_ratio=0.3, progress=False)
    out = {"programs": 16, "accesses_per_program": per_program, "policies": {}}
    for pol in POLICIES:
        single, ts = timed(lambda: tierkit.run(one, "dram-dcpmm", pol, 0.2, timing="detailed", progress=False))
        row = {"single_accesses_per_s": single["accesses"] / ts}
        for q in (1, 16):
            mix, tm = timed(lambda: tierkit.run(traces, "dram-dcpmm", pol, 0.2, timing="detailed", progress=False, mix=True,
                                                quantum=q, alone=False))
            row[f"mix_q{q}_accesses_per_s"] = mix["accesses"] / tm
            row[f"mix_q{q}_ratio"] = (mix["accesses"] / tm) / row["single_accesses_per_s"]
        out["policies"][pol] = row
        print(f"{pol}: single {row['single_accesses_per_s'] / 1e6:.2f} M acc/s; 16-program mix "
              f"{row['mix_q1_accesses_per_s'] / 1e6:.2f} M acc/s ({100 * row['mix_q1_ratio']:.0f}%), quantum 16 "
              f"{row['mix_q16_accesses_per_s'] / 1e6:.2f} M acc/s ({100 * row['mix_q16_ratio']:.0f}%)", flush=True)
    return out


def saturation(d: Path, accesses: int) -> list[dict]:
    rows = []
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
                print(f"{kind:5} {tier:5} {n:2} cores: {x['bandwidth_gb_per_s']:6.2f} GB/s"
                      + (f", read latency {x['read_latency_ns']:.0f} ns" if x["read_latency_ns"] else "")
                      + f", utilization {100 * x['utilization']:.0f}%", flush=True)
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--accesses", type=int, default=250_000, help="accesses per program of the speed mix")
    ap.add_argument("--img", type=Path, default=Path("docs/img/mix-saturation.png"))
    ap.add_argument("--only", choices=("speed", "saturation"), help="run one of the two parts")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        res = {"speed": speed(d, a.accesses) if a.only != "saturation" else None,
               "saturation": saturation(d, 200_000) if a.only != "speed" else None}
    if res["saturation"]:
        plot(res["saturation"], a.img)
    (a.out / "mix.json").write_text(json.dumps(res, indent=1))
    print(f"wrote {a.out / 'mix.json'} and {a.img}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
