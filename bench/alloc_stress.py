#!/usr/bin/env python3
"""The stress of the preloaded allocator for the full minute (make test runs 10 s of it:
tests/test_alloc_runtime.py): 16 threads allocating, reallocating across sites (so across
arenas) and freeing at six guided sites of crates/tierkit-alloc/tests/c/stress.c, a fork half
way, every 3rd extent of the guided arenas refused (TIERKIT_ALLOC_DEBUG_FAIL_EXTENT=3), arena
ranges of 512 MiB and an address-space limit, so that some requests are refused. Checks: exit
status 0 (no corrupted block, every block in its site's arena or the fallback, every refusal
NULL + ENOMEM, the forked child fine) and the arenas' ranges bounded. Writes
bench/results/alloc_stress.json.

Usage: python bench/alloc_stress.py [--seconds 60] [--threads 16]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_alloc_runtime as t  # noqa: E402  (the tests' guidance builder and runner)
from clock import Clock  # noqa: E402  (bench/clock.py, beside this script)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "alloc_stress.json"))
    a = ap.parse_args()
    lib = t.alloc_lib()
    d = Path(tempfile.mkdtemp(prefix="tk-alloc-stress-"))
    exe = d / "stress"
    subprocess.run(["gcc", "-O1", "-g", "-pthread", str(t.C_DIR / "stress.c"), "-o", str(exe), "-ldl"], check=True)
    g = t.stress_guidance(exe, lib, d)
    rep = d / "rep.json"
    with Clock() as c:
        p = t.run(exe, [a.seconds, a.threads, "rlimit"], lib, {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep),
                                                         "TIERKIT_ALLOC_DEBUG_FAIL_EXTENT": "3", "STRESS_ARENAS": "0,1,0,1,0,1",
                                                             "TIERKIT_ALLOC_RESERVE": "512M"}, timeout=a.seconds * 3 + 60)
    wall = c.wall_s
    f = p.stdout.split()
    stats = dict(zip(f[::2], map(int, f[1::2])))
    r = json.loads(rep.read_text()) if rep.exists() else {}
    ok = p.returncode == 0 and stats.get("refused", 0) > 0 and all(x["range_bytes_used"] < 1 << 30 for x in r.get("arenas", []))
    out = {"seconds": a.seconds, "threads": a.threads, "wall_s": wall, "cpu_s": c.children_cpu_s, "exit_status": p.returncode, "ok": ok, "program": stats,
           "report": {k: r.get(k) for k in ("allocations_total", "allocations_unmatched", "unwinds", "arena_fallbacks",
                                            "extent_failures", "extent_failures_injected", "explicit_tcaches")},
           "arenas": [{k: x[k] for k in ("id", "allocations", "range_bytes_used", "pages_present")} for x in r.get("arenas", [])],
           "stderr": p.stderr[-2000:], "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("ok", "wall_s", "cpu_s", "program", "report")}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
