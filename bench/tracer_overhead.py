"""Overhead of `tierkit trace record` (tierkit's Valgrind tool) on real programs: `make bench-tracer`.

For each program, on the same input, times (wall clock, best of --repeats runs):

- the program natively;
- under `valgrind --tool=none` (Valgrind's own cost: translation, no instrumentation);
- under `valgrind --tool=cachegrind` with the same geometry as tierkit's default cache
  (`--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64`, cache simulation on);
- under `tierkit trace record` with the default cache (L1:32K:8, L2:1M:16, L3:8M:16), end to
  end: Python start-up, the tool, decoding the raw stream and writing the compressed `.tkt`.

Target: the tracer at most 1.5 x cachegrind's time. Also reports trace sizes: bytes per
million post-cache accesses (what the trace holds) and per million raw loads and stores
(what the program made). Results are printed and written to
`bench/results/tracer_overhead.json`; bench/README.md keeps the latest figures.

The programs come from Debian packages:

    apt-get install -y valgrind xz-utils bzip2 sqlite3

The inputs are generated here, deterministically (a seeded pseudo-English text; an SQL
script that inserts, indexes and queries rows):

    xz -3 -T1 -k -f text.txt                  # 2 MB of text
    bzip2 -9 -k -f text.txt
    sqlite3 bench.db '.read bench.sql'        # 40,000 rows, an index, joins and aggregates

Usage: python bench/tracer_overhead.py [--repeats N] [--only xz,bzip2,sqlite3] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from clock import Clock

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "tracer_overhead.json"
CACHEGRIND = ["--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"]


def make_inputs(d: Path) -> None:
    rng = random.Random(42)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9, 1.5,
               1.0, 0.8, 0.15, 0.15, 0.1, 0.07]
    words = ["".join(rng.choices(letters, weights, k=rng.randint(1, 10))) for _ in range(20000)]
    zipf = [1.0 / (i + 1) for i in range(len(words))]
    text = []
    size = 0
    while size < 2_000_000:
        line = " ".join(rng.choices(words, zipf, k=12)) + ".\n"
        text.append(line)
        size += len(line)
    (d / "text.txt").write_text("".join(text))
    sql = ["PRAGMA journal_mode=OFF;", "PRAGMA synchronous=OFF;",
           "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, v REAL);",
           "CREATE TABLE u(k INTEGER PRIMARY KEY, label TEXT);", "BEGIN;"]
    for i in range(40000):
        sql.append(f"INSERT INTO t(k, name, v) VALUES ({rng.randrange(2000)}, '{rng.choice(words)}', {rng.random():.6f});")
    for k in range(2000):
        sql.append(f"INSERT INTO u VALUES ({k}, '{rng.choice(words)}');")
    sql += ["COMMIT;", "CREATE INDEX t_k ON t(k);", "CREATE INDEX t_name ON t(name);",
            "SELECT u.label, count(*), avg(t.v) FROM t JOIN u ON t.k = u.k GROUP BY u.label ORDER BY 2 DESC LIMIT 5;",
            "SELECT name, sum(v) FROM t WHERE k BETWEEN 100 AND 900 GROUP BY name ORDER BY 2 DESC LIMIT 5;",
            "SELECT count(DISTINCT name) FROM t;",
            "UPDATE t SET v = v * 2 WHERE k % 7 = 0;",
            "SELECT k, max(v) FROM t GROUP BY k ORDER BY 2 DESC LIMIT 3;"]
    (d / "bench.sql").write_text("\n".join(sql) + "\n")


PROGRAMS = {
    "xz": (["xz", "-3", "-T1", "-k", "-f", "text.txt"], ["text.txt.xz"]),
    "bzip2": (["bzip2", "-9", "-k", "-f", "text.txt"], ["text.txt.bz2"]),
    "sqlite3": (["sqlite3", "bench.db", ".read bench.sql"], ["bench.db"]),
}


def timed(cmd: list[str], cwd: Path, cleanup: list[str], env=None) -> tuple[float, float]:
    """Wall seconds and the command's CPU seconds (its processes, waited for: RUSAGE_CHILDREN)."""
    for f in cleanup:
        (cwd / f).unlink(missing_ok=True)
    with Clock() as c:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"tracer_overhead: '{' '.join(cmd)}' failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return c.wall_s, c.children_cpu_s


def record_cmd(argv: list[str], out: Path, report: Path) -> list[str]:
    """`tierkit trace record` through the Python API, so the report (raw access counts) can be
    kept; the program's stdout goes where the runner sends it."""
    code = ("import json, sys, tierkit; r = tierkit.record(sys.argv[3], sys.argv[4:], sys.argv[1], force=True); "
            "json.dump(r, open(sys.argv[2], 'w'))")
    return [sys.executable, "-c", code, str(out), str(report), *argv]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--only", default=",".join(PROGRAMS))
    ap.add_argument("--keep", type=Path, help="work in this directory and keep the traces")
    a = ap.parse_args()
    missing = [p for p in ["valgrind", *(PROGRAMS[n][0][0] for n in a.only.split(","))] if shutil.which(p) is None]
    if missing:
        print(f"tracer_overhead: not installed: {', '.join(missing)} (apt-get install -y valgrind xz-utils bzip2 sqlite3)",
              file=sys.stderr)
        return 2
    vg_version = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    work = a.keep or Path(tempfile.mkdtemp(prefix="tierkit-tracer-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    make_inputs(work)
    rows = []
    try:
        for name in a.only.split(","):
            argv, outputs = PROGRAMS[name]
            trace, report = work / f"{name}.tkt", work / f"{name}.report.json"
            best: dict[str, float] = {}
            best_cpu: dict[str, float] = {}
            for _ in range(a.repeats):
                runs = {
                    "native": argv,
                    "none": ["valgrind", "-q", "--tool=none", *argv],
                    "cachegrind": ["valgrind", "-q", "--tool=cachegrind", "--cachegrind-out-file=/dev/null", *CACHEGRIND, *argv],
                    "tracer": record_cmd(argv, trace, report),
                }
                for k, cmd in runs.items():
                    t, c = timed(cmd, work, outputs)
                    best[k] = min(best.get(k, t), t)
                    best_cpu[k] = min(best_cpu.get(k, c), c)
            r = json.loads(report.read_text())
            s = r["summary"]
            raw = r["raw_loads"] + r["raw_stores"]
            size = trace.stat().st_size
            row = {
                "program": name,
                "command": " ".join(argv),
                "seconds": best,
                # the CPU time of the command's processes: the figure to trust on a shared machine
                "cpu_seconds": best_cpu,
                "ratio_tracer_vs_cachegrind_cpu": best_cpu["tracer"] / best_cpu["cachegrind"],
                "ratio_none_vs_native": best["none"] / best["native"],
                "ratio_cachegrind_vs_native": best["cachegrind"] / best["native"],
                "ratio_tracer_vs_native": best["tracer"] / best["native"],
                "ratio_tracer_vs_cachegrind": best["tracer"] / best["cachegrind"],
                "instructions": r["instructions"],
                "raw_accesses": raw,
                "trace_accesses": s["accesses"],
                "trace_records": s["records"],
                "trace_bytes": size,
                "bytes_per_million_trace_accesses": size / (s["accesses"] / 1e6) if s["accesses"] else None,
                "bytes_per_million_raw_accesses": size / (raw / 1e6) if raw else None,
                "raw_stream_bytes": r["stream_bytes"],
            }
            rows.append(row)
            print(f"{name:8} native {best['native']:6.2f} s | none {best['none']:6.2f} s ({row['ratio_none_vs_native']:4.1f}x) | "
                  f"cachegrind {best['cachegrind']:6.2f} s ({row['ratio_cachegrind_vs_native']:4.1f}x) | "
                  f"tracer {best['tracer']:6.2f} s ({row['ratio_tracer_vs_native']:4.1f}x native, "
                  f"{row['ratio_tracer_vs_cachegrind']:.2f}x cachegrind; CPU {row['ratio_tracer_vs_cachegrind_cpu']:.2f}x) | trace {size / 1e6:.2f} MB, "
                  f"{row['bytes_per_million_trace_accesses'] or 0:,.0f} B per M trace accesses, "
                  f"{row['bytes_per_million_raw_accesses'] or 0:,.0f} B per M raw accesses", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    worst = max(r["ratio_tracer_vs_cachegrind"] for r in rows)
    print(f"worst tracer/cachegrind ratio: {worst:.2f} (target <= 1.5)")
    out = {"valgrind": vg_version, "repeats": a.repeats, "cpus": os.cpu_count(), "cachegrind_options": CACHEGRIND,
           "tracer_cache": "default (L1:32K:8:64,L2:1M:16:64,L3:8M:16:64)", "target_ratio_vs_cachegrind": 1.5,
           "worst_ratio_vs_cachegrind": worst, "runs": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0 if worst <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
