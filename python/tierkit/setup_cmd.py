"""``tierkit setup``: build, for a tierkit installed with pip, what ``make build`` builds in a
clone (docs/install.md): the Valgrind tool of ``tierkit trace record``, the test workloads and
the preloaded allocator of ``tierkit run --guidance``, from the sources the package carries
(``tierkit/_sources``), into the data folder (:func:`tierkit.installed.data_dir`) or
``--prefix``.

Each part is copied, then built with its own Makefile or cargo, whose output is shown as it
goes; each ends with one line saying what was built or why it was not. A part that cannot be
built (no Valgrind headers, no cargo) does not stop the others; the command then ends with one
error line and exit status 2.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

from . import installed
from ._core import TierkitError

PARTS = ("tracer", "workloads", "alloc")


class PartError(Exception):
    """One part could not be built: the one line saying why."""


def _copy_files(src: Path, dst: Path, pattern: str = "*") -> int:
    """The regular files of ``src`` matching ``pattern`` (not its folders: a clone's ``build/``
    stays behind) into ``dst``; returns how many."""
    if not src.is_dir():
        raise PartError(f"the package carries no sources in {src} (a tierkit built without them?)")
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for f in sorted(src.glob(pattern)):
        if f.is_file():
            target = dst / f.name
            # only what changed, so that make sees the build as up to date
            if not target.is_file() or target.read_bytes() != f.read_bytes():
                shutil.copyfile(f, target)
            n += 1
    return n


def _run(cmd: List[str], env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """Run a build step with its output shown (on stderr, where tierkit's progress goes); keep
    the last lines to say why when it fails."""
    sys.stderr.flush()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                             env=env)
    except OSError as e:
        raise PartError(f"cannot run {cmd[0]}: {e.strerror or e}") from None
    tail: List[str] = []
    assert p.stdout is not None
    for line in p.stdout:
        sys.stderr.write("  " + line)
        sys.stderr.flush()
        tail = (tail + [line.strip()])[-40:]
    p.wait()
    return subprocess.CompletedProcess(cmd, p.returncode, "\n".join(tail), "")


def _why(output: str, prefix: str, rc: int) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return (next((ln.removeprefix(prefix) for ln in lines if ln.startswith(prefix)), None)
            or next((ln for ln in lines if re.search(r"\berror\b", ln, re.IGNORECASE)), None)
            or f"exited with status {rc}")


def _make() -> str:
    make = shutil.which("make")
    if make is None:
        raise PartError("'make' is not installed (Debian/Ubuntu: apt-get install make gcc)")
    return make


def build_tracer(dest: Path) -> str:
    src = dest / "tracer"
    _copy_files(installed.SOURCES / "tracer", src)
    make = _make()
    if shutil.which("valgrind") is None:
        raise PartError("Valgrind is not installed (Debian/Ubuntu: apt-get install valgrind; it brings the tool headers "
                        "and libraries the tracer is built against)")
    p = _run([make, "-C", str(src)])
    if p.returncode != 0:
        raise PartError(_why(p.stdout, "tracer: ", p.returncode))
    return f"the Valgrind tool of 'tierkit trace record' in {src / 'build' / 'lib'}"


def build_workloads(dest: Path) -> str:
    src = dest / "workloads"
    _copy_files(installed.SOURCES / "workloads", src)
    p = _run([_make(), "-C", str(src)])
    if p.returncode != 0:
        raise PartError(_why(p.stdout, "workloads: ", p.returncode))
    return f"the test workloads in {src / 'build'}"


def _alloc_workspace(src: Path) -> None:
    """The allocator crate in a workspace of its own: its manifest, the project's workspace
    manifest with only it as member (the shared versions, edition and release profile), and
    the project's Cargo.lock (the same versions of its dependencies)."""
    crate = src / "tierkit-alloc"
    _copy_files(installed.SOURCES / "tierkit-alloc", crate, "Cargo.toml")
    if _copy_files(installed.SOURCES / "tierkit-alloc" / "src", crate / "src", "*.rs") == 0:
        raise PartError(f"the package carries no allocator sources in {installed.SOURCES / 'tierkit-alloc' / 'src'}")
    ws = installed.SOURCES / "Cargo.workspace.toml"
    try:
        text = ws.read_text()
    except OSError as e:
        raise PartError(f"cannot read {ws}: {e.strerror or e}") from None
    text, n = re.subn(r"(?m)^members\s*=\s*\[[^\]]*\]", 'members = ["tierkit-alloc"]', text)
    if n != 1:
        raise PartError(f"{ws}: no workspace members list to rewrite")
    manifest = src / "Cargo.toml"
    if not manifest.is_file() or manifest.read_text() != text:
        manifest.write_text(text)
    lock = installed.SOURCES / "Cargo.lock"
    if lock.is_file() and not (src / "Cargo.lock").is_file():
        shutil.copyfile(lock, src / "Cargo.lock")


def build_alloc(dest: Path) -> str:
    src = dest / "alloc"
    cargo = shutil.which("cargo")
    if cargo is None:
        raise PartError("cargo is not installed: the allocator is Rust (install a Rust toolchain, 1.88 or newer, e.g. "
                        "with rustup), or leave it out: --parts tracer,workloads")
    _alloc_workspace(src)
    print("  cargo builds jemalloc and the allocator (about a minute on 2 cores, once)", file=sys.stderr)
    env = dict(os.environ, CARGO_TARGET_DIR=str(src / "target"))
    p = _run([cargo, "build", "--release", "-p", "tierkit-alloc", "--manifest-path", str(src / "Cargo.toml")], env=env)
    if p.returncode != 0:
        raise PartError(_why(p.stdout, "error: ", p.returncode))
    built = src / "target" / "release" / installed.ALLOC_LIB
    lib = dest / "lib" / installed.ALLOC_LIB
    lib.parent.mkdir(parents=True, exist_ok=True)
    # a new file renamed over the old: a program running with the old one keeps it
    tmp = lib.with_name(lib.name + ".new")
    shutil.copyfile(built, tmp)
    os.replace(tmp, lib)
    return f"the allocator of 'tierkit run --guidance' at {lib}"


BUILDERS: Dict[str, Callable[[Path], str]] = {"tracer": build_tracer, "workloads": build_workloads, "alloc": build_alloc}


def parse_parts(parts: Optional[str]) -> List[str]:
    if parts is None:
        return list(PARTS)
    names = [p.strip() for p in parts.split(",") if p.strip()]
    bad = [p for p in names if p not in PARTS]
    if bad or not names:
        raise TierkitError(f"--parts: unknown part '{bad[0] if bad else parts}' (give a comma-separated list of: {', '.join(PARTS)})")
    return [p for p in PARTS if p in names]


def setup(prefix: Optional[Path] = None, parts: Optional[str] = None) -> Path:
    """Build ``parts`` (all by default) into ``prefix`` (default: the data folder); returns
    the folder. Raises :class:`TierkitError` with one line when a part could not be built,
    after trying the others."""
    names = parse_parts(parts)
    dest = (prefix if prefix is not None else installed.data_dir()).expanduser().resolve()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TierkitError(f"--prefix: cannot create {dest}: {e.strerror or e}") from None
    if installed.in_clone():
        print(f"tierkit setup: this tierkit runs from the clone {installed.SOURCE_ROOT}, which uses what 'make build' "
              "builds there; what is built here serves a tierkit installed with pip", file=sys.stderr)
    failed = []
    for name in names:
        print(f"tierkit setup: building {name} in {dest}", file=sys.stderr)
        try:
            what = BUILDERS[name](dest)
        except PartError as e:
            failed.append(name)
            print(f"tierkit setup: {name}: not built: {e}", file=sys.stderr)
        except OSError as e:
            failed.append(name)
            print(f"tierkit setup: {name}: not built: {e.filename or dest}: {e.strerror or e}", file=sys.stderr)
        else:
            print(f"tierkit setup: {name}: built {what}", file=sys.stderr)
    default = installed.data_dir().expanduser().resolve()
    if dest != default and not failed:
        print(f"tierkit setup: tierkit looks in {default}; set {installed.DATA_ENV}={dest} for it to use this one", file=sys.stderr)
    if failed:
        raise TierkitError(f"setup: {', '.join(failed)} not built (the lines above say why); the others are in {dest}"
                           if len(failed) < len(names) else f"setup: nothing built in {dest} (the lines above say why)")
    return dest
