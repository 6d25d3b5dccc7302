#!/usr/bin/env python3
"""Capture traces of real programs from Debian packages with tierkit's tracer (`make traces`).

Each recipe runs one program on an input generated here from a fixed seed and records it
with `tierkit trace record` (default cache hierarchy, allocation sites with 4 frames, a slice
marker every 100 M instructions) into `data/traces/real/NAME.tkt` (not committed). Programs:

| recipe   | Debian package | what runs |
| -------- | -------------- | --------- |
| sqlite3  | sqlite3        | `sqlite3 :memory: -init sqlite3-orders.sql .quit` (an in-memory database, joins, index) |
| xz       | xz-utils       | `xz -3 -T1 -k -f text` on 2 MiB of generated text |
| bzip2    | bzip2          | `bzip2 -9 -k -f text` on the same text |
| imagick  | imagemagick    | `convert -size 600x600 -seed 7 plasma:fractal -blur 0x3 -resize 50% out.png` (SPEC's imagick is ImageMagick) |

A missing program is installed with apt-get when `--install` is given and we are root, and
otherwise reported with the package to install. Real programs read the clock and their
environment, so two recordings may differ slightly; `data/traces/sqlite3-orders.tkt`, the
sqlite3 recipe's trace, is committed and is what `make demo` compares policies on.

Usage: record_traces.py [--install] [--force] [--only NAME,...] [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def text(path: Path, nbytes: int = 2 << 20, seed: int = 42) -> None:
    """English-like text from a fixed vocabulary (compresses like prose)."""
    rng = random.Random(seed)
    words = ("memory tier page cache line migration policy trace program data access hot cold "
             "fast slow bandwidth latency placement allocation site phase period thread").split()
    out, size = [], 0
    while size < nbytes:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + ".\n"
        out.append(line)
        size += len(line)
    path.write_text("".join(out))


def recipes(work: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (Debian package, argv run in `work`)."""
    convert = shutil.which("convert-im6.q16") or "/usr/bin/convert"
    return {
        "sqlite3": ("sqlite3", ["sqlite3", ":memory:", "-init", str(HERE / "sqlite3-orders.sql"), ".quit"]),
        "xz": ("xz-utils", ["xz", "-3", "-T1", "-k", "-f", "text"]),
        "bzip2": ("bzip2", ["bzip2", "-9", "-k", "-f", "text"]),
        "imagick": ("imagemagick", [convert, "-size", "600x600", "-seed", "7", "plasma:fractal", "-blur", "0x3", "-resize", "50%", "out.png"]),
    }


def ensure(program: str, package: str, install: bool) -> bool:
    # a real executable: ImageMagick's convert may be shadowed by a wrapper script on PATH
    if shutil.which(program) and not Path(shutil.which(program)).read_bytes()[:2] == b"#!":
        return True
    if install and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", package], check=False, stdout=subprocess.DEVNULL)
        return bool(shutil.which(program))
    print(f"traces: skipping: '{program}' is missing (Debian package {package}; make traces INSTALL=1 installs it)", file=sys.stderr)
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--install", action="store_true", help="apt-get install missing programs (as root)")
    ap.add_argument("--force", action="store_true", help="overwrite existing traces")
    ap.add_argument("--only", default="", help="comma-separated recipe names")
    ap.add_argument("--out", default=str(ROOT / "data" / "traces" / "real"), help="output directory")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "python"))
    import tierkit

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    only = {x for x in a.only.split(",") if x}
    rows = []
    with tempfile.TemporaryDirectory(prefix="tierkit-recipes-") as tmp:
        work = Path(tmp)
        text(work / "text")
        todo = recipes(work)
        unknown = only - set(todo)
        if unknown:
            print(f"traces: error: unknown recipe(s) {', '.join(sorted(unknown))} (known: {', '.join(todo)})", file=sys.stderr)
            return 2
        for name, (package, argv) in todo.items():
            if only and name not in only:
                continue
            dest = out / f"{name}.tkt"
            if dest.exists() and not a.force:
                print(f"traces: {dest} exists (use --force to record again)", file=sys.stderr)
                continue
            if not ensure(Path(argv[0]).name if "/" not in argv[0] else argv[0], package, a.install):
                continue
            cwd = os.getcwd()
            os.chdir(work)
            try:
                r = tierkit.record(argv[0], argv[1:], dest, slice="100M", force=a.force)
            finally:
                os.chdir(cwd)
            s = r["summary"]
            rows.append((name, s["accesses"], s["pages"], s["allocation_sites"], dest.stat().st_size, r["status"]))
    if rows:
        print(f"{'trace':<10} {'accesses':>12} {'pages':>8} {'sites':>6} {'bytes':>11} status")
        for name, acc, pages, sites, size, status in rows:
            print(f"{name:<10} {acc:>12,} {pages:>8,} {sites:>6} {size:>11,} {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
