"""Files written under a user's name are whole or absent (docs/limits.md).

Every writer of a user-named file (``compare --out``'s report, ``--timeseries``, ``profile``
and its ``--plot``, ``trace heatmap``, guidance and predictions files) goes through
:func:`atomic_write`: the bytes go to ``NAME.partial`` beside the target, are flushed to disk,
and only then renamed over ``NAME``. An interrupt (Ctrl-C, SIGTERM), a full disk or any
exception on the way removes ``NAME.partial`` and leaves ``NAME`` as it was, so no 0-byte or
half file is ever left under the user's name. The Rust side does the same for traces
(``crates/tierkit-core/src/outfile.rs``), with the same ``.partial`` name.

An operating-system error while writing (ENOSPC, EFBIG, EDQUOT, EROFS, EACCES...) becomes a
:class:`TierkitError` naming the user's file and the reason: one line, exit status 2.
"""
from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO, Iterator, Union

from ._core import TierkitError

PathLike = Union[str, os.PathLike]

#: the suffix of the temporary file beside the target (the same as the Rust writers')
PARTIAL_SUFFIX = ".partial"
#: the longest file name most file systems take, in bytes
_NAME_MAX_BYTES = 255
#: test hook: with this set to a file name, :func:`atomic_write` stops before renaming that
#: file into place (its bytes complete under the temporary name) and waits up to a minute,
#: so that a test can interrupt the command at a known point (tests/test_output_files.py)
STALL_ENV = "TIERKIT_TEST_STALL_BEFORE_RENAME"


class Terminated(BaseException):
    """SIGTERM arrived while a file was being written: unwinds like Ctrl-C, so that the
    temporary file is removed, and the CLI exits with status 143. (Not a KeyboardInterrupt:
    typer turns those into a silent exit status 130.)"""


def cache_home() -> str:
    """tierkit's own cache folder: $TIERKIT_CACHE_DIR, else $XDG_CACHE_HOME/tierkit, else
    ~/.cache/tierkit (trained predictions in ``predictions/``, crash logs in ``crash/``)."""
    return os.environ.get("TIERKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tierkit")


def partial_path(path: PathLike) -> Path:
    """The temporary name beside ``path`` (its name shortened if the suffix would make it too
    long for the file system)."""
    p = Path(path)
    name = p.name
    while len((name + PARTIAL_SUFFIX).encode("utf-8", "surrogateescape")) > _NAME_MAX_BYTES:
        name = name[:-1]
    return p.with_name(name + PARTIAL_SUFFIX)


def write_error(path: PathLike, e: OSError) -> TierkitError:
    """The one line for an OS error on ``path``: the file and the reason."""
    return TierkitError(f"{path}: cannot write: {e.strerror or e}")


def check_new(path: PathLike, force: bool) -> None:
    """Refuse to overwrite an existing ``path`` unless ``force``."""
    if not force and os.path.lexists(path):
        raise TierkitError(f"{path}: file exists (use --force to overwrite)")


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (where its disposition is the
    default and this is the main thread), so that cleanup code runs as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _target(path: Path) -> tuple[Path, bool]:
    """Where the bytes go, and whether by rename: a symbolic link is written through (the
    link stays); an existing special file (``/dev/null``, a FIFO) is written in place, since
    renaming over it would replace the device node."""
    try:
        st = os.stat(path)
    except OSError:
        return path, True
    if stat.S_ISDIR(st.st_mode):
        raise TierkitError(f"{path}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        return path, False
    return Path(os.path.realpath(path)) if path.is_symlink() else path, True


def _stall_for_test(path: Path) -> None:
    if os.environ.get(STALL_ENV) == path.name:
        print(f"tierkit: test: stalled before renaming {path.name}", file=sys.stderr, flush=True)
        time.sleep(60)


@contextlib.contextmanager
def atomic_write(path: PathLike, force: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s bytes to; ``path`` appears, complete, when the block
    ends without an exception, and is left as it was otherwise. ``force=False`` refuses an
    existing ``path``. OS errors name ``path`` (:func:`write_error`)."""
    path = Path(path)
    check_new(path, force)
    target, by_rename = _target(path)
    tmp = partial_path(target) if by_rename else target
    with sigterm_unwinds():
        try:
            f = open(tmp, "wb")
        except OSError as e:
            raise write_error(path, e) from None
        try:
            with f:
                yield f
                f.flush()
                if by_rename:
                    # a full disk may only show here (delayed allocation, network file systems)
                    os.fsync(f.fileno())
            if by_rename:
                _stall_for_test(path)
                os.replace(tmp, target)
        except OSError as e:
            if by_rename:
                _unlink(tmp)
            raise write_error(path, e) from None
        except BaseException:
            if by_rename:
                _unlink(tmp)
            raise


def _unlink(p: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(p)


def write_bytes(path: PathLike, data: bytes, force: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`)."""
    with atomic_write(path, force) as f:
        f.write(data)
    return Path(path)


def write_text(path: PathLike, text: str, force: bool = True) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
    return write_bytes(path, text.encode("utf-8"), force)
