"""Overhead of `tierkit run`'s daemon on the program it places: `make bench-run`.

For one workload (`rwmix`, random reads and writes over one buffer), on the same input, it
measures the program's wall time alone and under `tierkit run` (best of --repeats runs each),
and the daemon's own CPU time per second of run per GiB of the program's resident memory:

- **on this host**, only what needs no kernel setting: `tierkit run` observing its own child
  (pagemap reads, soft-dirty clearing where the kernel keeps soft-dirty bits, `move_pages`
  placement queries) under `first-touch`, at the default interval (1 s) and at 100 ms. DAMON
  is off: monitoring would change kernel state, which tierkit does only inside the testbed;
- **in the testbed VM** (docs/real-linux.md; node 0 fast, node 1 a CPU-less lower tier), the
  same observation, then with DAMON on, then the daemon policies `hyplacer` and `history`
  with a fast budget of half the program's footprint. The VM runs under software emulation
  (TCG), so every figure there is for an emulated CPU; the ratios, taken in one VM boot, are
  what carries over.

The program alone is timed the same way as under tierkit (the host: from just before the
fork to the end of `wait`; the VM: busybox `time`). Results are printed and written to
`bench/results/run_overhead.json`; bench/README.md keeps the latest figures.

Usage: python bench/run_overhead.py [--repeats N] [--host-only | --vm-only] [--work F] [--vm-work F]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from clock import Clock

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "run_overhead.json"
BIN = ROOT / "target" / "release" / "tierkit-run"
RWMIX = ROOT / "workloads" / "build" / "rwmix"
GIB = 1 << 30


def best(xs):
    return min(xs)


def host_native(args, repeats):
    """Wall seconds of each run, and CPU seconds (the program's, RUSAGE_CHILDREN)."""
    walls, cpus = [], []
    for _ in range(repeats):
        with Clock() as c:
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        walls.append(c.wall_s)
        cpus.append(c.children_cpu_s)
    return walls, cpus


def host_run(tk_args, args, repeats):
    """Each run's report, with ``cpu_s``: the CPU seconds of tierkit-run and the program
    together (RUSAGE_CHILDREN), the figure to compare with the program's alone."""
    walls, reports = [], []
    for _ in range(repeats):
        with Clock() as c:
            out = subprocess.run([str(BIN), "--json", *tk_args, "--", *args], check=True, stdout=subprocess.PIPE, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        r["cpu_s"] = c.children_cpu_s
        walls.append(r["wall_s"])
        reports.append(r)
    return walls, reports


def summary(r):
    """What the bench keeps of one tierkit run report."""
    gib = r["pages"]["peak_fast"] + r["pages"]["peak_slow"]
    return {
        "wall_s": r["wall_s"],
        "cpu_s": r.get("cpu_s"),
        "daemon_cpu_s": r["daemon_cpu_s"],
        "daemon_cpu_s_per_s_per_gib": r["daemon_cpu_s_per_s_per_gib"],
        "observations": r["observations"],
        "resident_gib": gib * r["page_bytes"] / GIB,
        "migrations_done": r["migrations"]["done"],
        "soft_dirty": r["soft_dirty"],
    }


def bench_host(work, repeats):
    prog = [str(RWMIX), "--size", "medium", "--work", str(work)]
    native, native_cpu = host_native(prog, repeats)
    rows = [{"config": "alone", "wall_s": best(native), "cpu_s": best(native_cpu), "ratio": 1.0, "cpu_ratio": 1.0}]
    for name, tk in [("first-touch, observing, 1 s (default)", ["--policy", "first-touch", "--damon", "off"]),
                     ("first-touch, observing, 100 ms", ["--policy", "first-touch", "--damon", "off", "--interval", "100ms"])]:
        walls, reports = host_run(tk, prog, repeats)
        i = walls.index(best(walls))
        rows.append({"config": name, **summary(reports[i]), "ratio": best(walls) / best(native),
                     "cpu_ratio": min(r["cpu_s"] for r in reports) / best(native_cpu)})
    return {"program": " ".join(["rwmix"] + prog[1:]), "rows": rows}


VM_CONFIGS = [
    ("first-touch, observing (no DAMON), 1 s", "--policy first-touch --damon off"),
    ("first-touch, observing with DAMON, 1 s", "--policy first-touch --damon on"),
    ("hyplacer, budget 64 MiB", "--policy hyplacer --fast-capacity 64M"),
    ("history, budget 64 MiB", "--policy history --fast-capacity 64M"),
]


def bench_vm(work, repeats):
    sys.path.insert(0, str(ROOT / "python"))
    from tierkit.testbed import FileSet, Testbed, VMConfig

    prog = f"rwmix --size medium --work {work}"
    files = FileSet().add_binary(BIN).add_binary(RWMIX)
    script = []
    for k in range(repeats):
        script.append(f"( time {prog} > /dev/null ) 2> $OUT/alone.{k}")
        for j, (_, tk) in enumerate(VM_CONFIGS):
            script.append(f"tierkit-run --json {tk} -- {prog} > $OUT/run{j}.{k} 2>/dev/null || echo failed > $OUT/run{j}.{k}.failed")
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024), files) as vm:
        res = vm.run("; ".join(script), timeout_s=580)
    if res.status != 0:
        raise SystemExit(f"bench: the VM script failed ({res.status}): {res.stderr[-500:]}")

    def real(txt):
        for line in txt.splitlines():
            if line.startswith("real"):
                parts = line.split()[1:]
                s = 0.0
                for p in parts:
                    s += float(p[:-1]) * (60 if p.endswith("m") else 1)
                return s
        raise SystemExit(f"bench: no 'real' line in {txt!r}")

    native = [real(res.files[f"alone.{k}"].decode()) for k in range(repeats)]
    rows = [{"config": "alone", "wall_s": best(native), "ratio": 1.0}]
    for j, (name, _) in enumerate(VM_CONFIGS):
        if f"run{j}.0.failed" in res.files:
            rows.append({"config": name, "error": "tierkit run failed"})
            continue
        reports = [json.loads(res.files[f"run{j}.{k}"].decode().strip().splitlines()[-1]) for k in range(repeats)]
        walls = [r["wall_s"] for r in reports]
        i = walls.index(best(walls))
        rows.append({"config": name, **summary(reports[i]), "ratio": best(walls) / best(native)})
    return {"program": prog, "vm": "testbed, TCG, 2 vCPUs, node 0 512 MiB, node 1 1024 MiB", "rows": rows}


def show(title, part):
    print(f"\n{title}: {part['program']}")
    # cpu s: the program's CPU alone, or tierkit-run's and the program's (host rows); daemon: tierkit-run's own
    print(f"{'config':44} {'wall s':>8} {'ratio':>6} {'cpu s':>7} {'cpu ratio':>9} {'daemon s':>8} {'cpu/s/GiB':>9} {'obs':>4} {'moved':>7}")
    for r in part["rows"]:
        if "error" in r:
            print(f"{r['config']:44} {r['error']}")
            continue
        cpu, cr = r.get("cpu_s"), r.get("cpu_ratio")
        print(f"{r['config']:44} {r['wall_s']:8.2f} {r['ratio']:6.3f} {'-' if cpu is None else f'{cpu:.3f}':>7} "
              f"{'-' if cr is None else f'{cr:.3f}':>9} {r.get('daemon_cpu_s', 0):8.3f} "
              f"{r.get('daemon_cpu_s_per_s_per_gib', 0):9.3f} {r.get('observations', 0):4} {r.get('migrations_done', 0):7}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", type=float, default=3.0, help="rwmix --work on the host (default 3: ~5 s)")
    ap.add_argument("--vm-work", type=float, default=0.5, help="rwmix --work in the VM (default 0.5: ~12 s emulated)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--host-only", action="store_true")
    g.add_argument("--vm-only", action="store_true")
    a = ap.parse_args()
    for p, how in [(BIN, "cargo build --release -p tierkit-run"), (RWMIX, "make -C workloads")]:
        if not p.is_file():
            raise SystemExit(f"bench: {p} is missing ({how})")
    out = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} {platform.machine()}, {platform.release()}",
           "repeats": a.repeats}
    if not a.vm_only:
        out["host"] = bench_host(a.work, a.repeats)
        show("host", out["host"])
    if not a.host_only:
        out["vm"] = bench_vm(a.vm_work, a.repeats)
        show("testbed VM", out["vm"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwritten: {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
