"""Where tierkit finds the parts it runs outside Python (docs/install.md): the Valgrind tool of
``tierkit trace record``, the test workloads and the preloaded allocator of ``tierkit run
--guidance``.

Two layouts. In a clone (an editable install, ``make build``), they are built in the tree:
``tracer/build/lib``, ``workloads/build``, ``target/release/libtierkit_alloc.so``. A tierkit
installed with pip carries their sources in the package (``tierkit/_sources``), and ``tierkit
setup`` builds them into the data folder, laid out as the tree: ``DATA/tracer/build/lib``,
``DATA/workloads/build``, ``DATA/lib/libtierkit_alloc.so``. DATA is ``$TIERKIT_DATA_DIR``, else
``$XDG_DATA_HOME/tierkit``, else ``~/.local/share/tierkit``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

#: the package's folder, and the tree it sits in when it runs from a clone
PACKAGE = Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE.parents[1]
#: the sources 'tierkit setup' builds, carried in the wheel (links into the tree in a clone)
SOURCES = PACKAGE / "_sources"
DATA_ENV = "TIERKIT_DATA_DIR"
ALLOC_LIB = "libtierkit_alloc.so"
SETUP_HINT = "run 'tierkit setup'"


def in_clone() -> bool:
    """Whether this package runs from a clone of the repository (``make build`` builds there)."""
    return (SOURCE_ROOT / "Cargo.toml").is_file() and (SOURCE_ROOT / "tracer" / "Makefile").is_file()


def data_dir() -> Path:
    """Where ``tierkit setup`` builds by default: ``$TIERKIT_DATA_DIR``, else
    ``$XDG_DATA_HOME/tierkit``, else ``~/.local/share/tierkit``."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    # the XDG base directory specification: a relative path is invalid and ignored
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "tierkit"


def root() -> Path:
    """The folder holding ``tracer/`` and ``workloads/``: the clone, else the data folder."""
    return SOURCE_ROOT if in_clone() else data_dir()


def tracer_lib() -> Path:
    """The Valgrind library folder ``make build`` or ``tierkit setup`` fills."""
    return root() / "tracer" / "build" / "lib"


def workloads_dir() -> Path:
    return root() / "workloads"


def alloc_lib() -> Path:
    """The allocator ``tierkit setup`` builds (in a clone, ``make alloc`` builds
    ``target/release/libtierkit_alloc.so``, which ``tierkit run`` finds by itself)."""
    return data_dir() / "lib" / ALLOC_LIB


def _guided(argv: List[str]) -> bool:
    own = argv[: argv.index("--")] if "--" in argv else argv
    return any(a == "--guidance" or a.startswith("--guidance=") for a in own)


def allocator_for_run(argv: List[str]) -> Optional[str]:
    """For ``tierkit run --guidance`` of an installed tierkit: points ``TIERKIT_ALLOC_LIB`` at
    the allocator ``tierkit setup`` built, and returns what is wrong when it is missing (None
    when nothing is: a clone, the variable already set, no ``--guidance``)."""
    if in_clone() or os.environ.get("TIERKIT_ALLOC_LIB") or not _guided(argv):
        return None
    lib = alloc_lib()
    if not lib.is_file():
        return (f"--guidance: the allocator library {ALLOC_LIB} is not built ({lib} is missing): {SETUP_HINT}, "
                f"or set TIERKIT_ALLOC_LIB to the library")
    os.environ["TIERKIT_ALLOC_LIB"] = str(lib)
    return None
