#!/usr/bin/env python3
"""The preloaded allocator's overhead (docs/guidance.md; 002 Table II: about 1% for MemBrain's
runtime, 1.61x for backtrace-based context): allocator-heavy real programs from Debian (sqlite3, xz) and
three workloads, each under glibc malloc, Debian's jemalloc (libjemalloc2 via LD_PRELOAD),
libtierkit_alloc.so without guidance, and libtierkit_alloc.so with context-4 guidance covering
every site the program allocates from (made from the library's own site log): once with the
sites' arenas alternating (so that sites sharing an inner frame are told apart by unwinding)
and once with every site in one arena (decided from the return address alone). Median wall
time of --runs runs, run in rotation; plus a malloc/free microbenchmark with 1 and 16 threads.
Writes bench/results/alloc_overhead.json. bench/README.md shows the figures.

Usage: python bench/alloc_overhead.py [--runs N] [--only NAME] [--out FILE]
"""
import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = Path(os.environ.get("TIERKIT_ALLOC_LIB", ROOT / "target" / "release" / "libtierkit_alloc.so"))
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
WL = ROOT / "workloads" / "build"

SQL = """
CREATE TABLE t(a INTEGER, b TEXT, c REAL);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 100000)
INSERT INTO t SELECT (x * 7919) % 100003, hex(randomblob(24)), x * 0.5 FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)) FROM (SELECT * FROM t ORDER BY b DESC);
SELECT a % 97 AS k, count(*), group_concat(substr(b, 1, 4)) FROM t GROUP BY k ORDER BY k LIMIT 3;
"""


def xz_input(d: Path) -> Path:
    """4 MiB of text-like data, the same bytes every time."""
    p = d / "xz-input.txt"
    words = [f"w{i:x}" for i in range(5000)]
    out, x, n = [], 12345, 0
    while n < 4 << 20:
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(" ".join(words[(x >> k) % 5000] for k in range(0, 24, 3)) + "\n")
        n += len(out[-1])
    p.write_text("".join(out))
    return p


def programs(d: Path):
    sql = d / "bench.sql"
    sql.write_text(SQL)
    progs = {}
    if shutil.which("sqlite3"):
        progs["sqlite3"] = (["sqlite3", ":memory:", f".read {sql}"], None)
    if shutil.which("xz"):
        progs["xz"] = (["xz", "-6", "-T1", "-c", str(xz_input(d))], None)
    for name, args in [("btree", ["--size", "medium", "--work", "0"]), ("bfs", ["--size", "medium", "--work", "0.2"]), ("sites", ["--size", "medium"])]:
        if (WL / name).exists():
            progs[name] = ([str(WL / name), *args], None)
    return progs


def run_once(cmd, env):
    """(wall seconds, CPU seconds (user + system), stdout) of one run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
    # the program's own CPU time: less disturbed than its wall time on a shared machine
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, p.stdout


def base_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("TIERKIT_") and k != "LD_PRELOAD"}


def make_guidance(cmd, d: Path, name: str, alternate: bool) -> tuple[Path, int]:
    """Context-4 version-2 guidance naming every site of the program's site log."""
    log = d / f"{name}.log.json"
    if not log.exists():
        env = {**base_env(), "LD_PRELOAD": str(LIB), "TIERKIT_ALLOC_LOG": str(log), "TIERKIT_ALLOC_LOG_DEPTH": "4"}
        run_once(cmd, env)
    return guidance_from_log(log, d, name, alternate)


def guidance_from_log(log: Path, d: Path, name: str, alternate: bool) -> tuple[Path, int]:
    sites = [s for s in json.loads(log.read_text())["sites"] if "?" not in s["key"]]
    g = {"format": "tierkit-guidance", "version": 2, "strategy": "hotset", "mode": "static", "tiers": ["fast", "slow"],
         "context": 4, "unmatched": "last-tier",
         "phases": {"count": 1, "slice_source": "insn", "slice_length": 1, "of_slice": [0]},
         "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
         "sites": [{"key": s["key"], "frames": [], "arena": (i % 2 if alternate else 0), "tier": (i % 2 if alternate else 0)} for i, s in enumerate(sites)]}
    p = d / f"{name}.{'alt' if alternate else 'one'}.guidance.json"
    p.write_text(json.dumps(g))
    return p, len(sites)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only")
    ap.add_argument("--micro-pairs", type=int, default=4_000_000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "alloc_overhead.json"))
    a = ap.parse_args()
    if not LIB.exists():
        raise SystemExit(f"error: {LIB} is missing: run 'make alloc'")
    d = Path(tempfile.mkdtemp(prefix="tk-alloc-bench-"))
    micro = d / "micro"
    subprocess.run(["cc", "-O2", "-g", "-pthread", "-fno-optimize-sibling-calls", str(ROOT / "bench" / "alloc" / "micro.c"), "-o", str(micro)], check=True)
    progs = programs(d)
    # (the site log of the microbenchmark comes from a short run: its one site is the same)
    progs["micro-1t"] = ([str(micro), "1", str(a.micro_pairs)], [str(micro), "1", "1000"])
    progs["micro-16t"] = ([str(micro), "16", str(a.micro_pairs // 16)], [str(micro), "16", "1000"])
    if a.only:
        progs = {k: v for k, v in progs.items() if k == a.only}
    results = {}
    for name, (cmd, log_cmd) in progs.items():
        configs = {"glibc": base_env()}
        if JEMALLOC.exists():
            configs["jemalloc"] = {**base_env(), "LD_PRELOAD": str(JEMALLOC)}
        configs["tierkit-alloc"] = {**base_env(), "LD_PRELOAD": str(LIB)}
        n_sites = 0
        for alt in (True, False):
            g, n_sites = make_guidance(log_cmd or cmd, d, name, alt)
            configs[f"guided-c4-{'alternating' if alt else 'one-arena'}"] = {**base_env(), "LD_PRELOAD": str(LIB), "TIERKIT_GUIDANCE": str(g)}
        # one report run per guidance: what was classified and unwound
        reports = {}
        for k in [k for k in configs if k.startswith("guided")]:
            rp = d / f"{name}.{k}.report.json"
            run_once(cmd, {**configs[k], "TIERKIT_ALLOC_REPORT": str(rp)})
            r = json.loads(rp.read_text())
            reports[k] = {x: r.get(x) for x in ("allocations_total", "allocations_unmatched", "unwinds", "unwind", "distinct_return_addresses", "arena_fallbacks")}
        walls = {k: [] for k in configs}
        cpus = {k: [] for k in configs}
        micro_ns = {k: [] for k in configs}
        for _ in range(a.runs):
            for k, env in configs.items():
                w, c, out = run_once(cmd, env)
                walls[k].append(w)
                cpus[k].append(c)
                if name.startswith("micro"):
                    micro_ns[k].append(float(out.decode().split()[1]))
        med = {k: statistics.median(v) for k, v in walls.items()}
        cmed = {k: statistics.median(v) for k, v in cpus.items()}
        row = {"command": " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd)), "sites_in_guidance": n_sites,
               "median_wall_s": med, "runs_wall_s": walls, "median_cpu_s": cmed,
               "cpu_ratio_vs_glibc": {k: cmed[k] / cmed["glibc"] for k in cmed},
               "cpu_ratio_vs_jemalloc": {k: cmed[k] / cmed["jemalloc"] for k in cmed} if "jemalloc" in cmed else None,
               "ratio_vs_glibc": {k: med[k] / med["glibc"] for k in med},
               "ratio_vs_jemalloc": {k: med[k] / med["jemalloc"] for k in med} if "jemalloc" in med else None,
               "guided_reports": reports}
        if name.startswith("micro"):
            row["median_ns_per_pair"] = {k: statistics.median(v) for k, v in micro_ns.items()}
        results[name] = row
        print(f"{name:10s} " + "  ".join(f"{k} {med[k]:.3f}s ({med[k] / med['glibc']:.3f}, cpu {cmed[k] / cmed['glibc']:.3f})" for k in med), flush=True)
    out = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_avg_at_end": os.getloadavg()},
           "runs": a.runs, "date": time.strftime("%Y-%m-%d"), "library": str(LIB), "results": results}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
