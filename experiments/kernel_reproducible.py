"""Is the kernel validation reproducible once the slow-tier plugin paces the VM? (docs/validation.md,
"Reproducible under the slow tier"). Runs `tierkit validate --slow-tier` twice on the same rows:
once on an idle host, once with LOAD busy processes of this script's own beside it (they only
spin; nothing else on the host is touched), and writes both results and the two side by side
(`validate.side_by_side`): the kernel's promotions and demotions, mean and range of its repeats,
each run's wall time in the guest, and how far the host fell behind the plugin's model.

    python experiments/kernel_reproducible.py [--workloads phases,rwmix] [--repeats 2] [--length 0.5]
        [--load 1] [--out-dir experiments/results]

About 10 minutes a run for the defaults on 2 cores (one busy process takes one of its two CPUs).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

from tierkit import validate as v


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="phases,rwmix")
    ap.add_argument("--policies", default=",".join(v.POLICIES))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--length", type=float, default=0.5, help="factor on each workload's --work (the paced guest is slow)")
    ap.add_argument("--load", type=int, default=1, help="busy processes beside the second run (0: two idle runs)")
    ap.add_argument("--out-dir", type=Path, default=v.ROOT / "experiments" / "results")
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    names = [x for x in a.workloads.split(",") if x]
    pols = [x for x in a.policies.split(",") if x]
    for n in names:
        if n not in v.WORKLOADS:
            print(f"error: --workloads: unknown workload '{n}' (known: {', '.join(v.WORKLOADS)})", file=sys.stderr)
            return 2
    for p in pols:
        if p not in v.POLICIES:
            print(f"error: --policies: unknown policy '{p}' (known: {', '.join(v.POLICIES)})", file=sys.stderr)
            return 2
    for flag, x, lo, hi in (("--repeats", a.repeats, 1, 10), ("--length", a.length, 0.1, 32), ("--load", a.load, 0, 16)):
        if not lo <= x <= hi:
            print(f"error: {flag}: {x:g} is outside [{lo:g}, {hi:g}]", file=sys.stderr)
            return 2
    a.out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for tag, load in (("idle", 0), ("loaded", a.load)):
        stop = mp.Event()
        procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(load)]
        for p in procs:
            p.start()
        try:
            t = time.time()
            res = v.validate(names, pols, None, a.work, None, progress=True, repeats=a.repeats, length=a.length, slow_tier=True)
            res["host_load_processes"] = load
            v.write_results(res, a.out_dir / f"validation_paced_{tag}.json", v.table(res))
            print(f"{tag} run ({load} busy processes beside it): {time.time() - t:.0f} s", file=sys.stderr)
        finally:
            stop.set()
            for p in procs:
                p.join()
        runs.append(res)
    md = (f"Two runs of `tierkit validate --slow-tier --workloads {a.workloads} --repeats {a.repeats} --length {a.length:g}`: "
          f"idle host, then {a.load} busy process{'es' if a.load != 1 else ''} of the script's own beside it ({time.strftime('%Y-%m-%d')}).\n\n"
          + v.side_by_side(runs[0], runs[1], ("idle", "loaded")))
    out = a.out_dir / "validation_paced_side_by_side.md"
    out.write_text(md)
    print(md, end="")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
