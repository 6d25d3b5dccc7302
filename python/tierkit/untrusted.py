"""Reading files users are sent: results, reports, profiles, study files, sweep stores,
regions files, the predictions cache (docs/security.md).

Every such file is read through here: a regular file under a size limit, UTF-8 checked with
the byte offset of a bad byte, JSON or YAML parsed with its nesting bounded, embedded payloads
inflated in a stream under a cap, names that become file names checked as plain names. Each
failure is a :class:`TierkitError` of one line naming the file and the key, offset or line.

Everything here is plain Python (no compiled extension needed beyond the error type).
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import stat
import zlib
from typing import Any, Optional, Union

try:
    from ._core import TierkitError
except ImportError:  # pragma: no cover - only when the compiled extension is missing
    TierkitError = ValueError  # type: ignore[misc,assignment]

PathLike = Union[str, os.PathLike]

MIB = 1 << 20
#: a result file (``simulate --json``, ``replay --json``, compare's ``results.jsonl``):
#: a run's result is a few KB, with embedded inputs up to a few MB; a compare of every policy
#: on hundreds of traces stays well under this
MAX_RESULT_BYTES = 512 * MIB
#: a profile or guidance file (tens of thousands of sites are a few MB)
MAX_PROFILE_BYTES = 256 * MIB
#: a study file (a 100,000-cell study on paper is a few KB: grids are products)
MAX_STUDY_BYTES = 16 * MIB
#: one cell record of a sweep store, or its digests memo
MAX_RECORD_BYTES = 64 * MIB
#: a workload's regions file
MAX_REGIONS_BYTES = 16 * MIB
#: a file embedded in a result (guidance, predictions), once inflated
MAX_EMBEDDED_BYTES = 256 * MIB
#: nesting of JSON and YAML documents: tierkit's own files nest at most 6 levels
MAX_DEPTH = 64
#: a name that becomes part of a file name (config.inputs keys, study and trace names)
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def fail(source: object, where: str, what: str) -> TierkitError:
    """``SOURCE: WHERE: WHAT`` as one error line."""
    head = f"{source}: {where}: " if where else f"{source}: "
    return TierkitError((head + what).replace("\n", " "))


def short(x: Any, limit: int = 40) -> str:
    """A value as it reads in an error line, cut to ``limit`` characters."""
    try:
        t = json.dumps(x, ensure_ascii=True) if isinstance(x, (str, int, float, bool)) or x is None \
            else type(x).__name__
    except (ValueError, TypeError):
        t = type(x).__name__
    return t if len(t) <= limit else t[:limit - 3] + "..."


# ------------------------------------------------------------------------------ files


def _open_checked(p: str, what: str, limit: int) -> int:
    """An open descriptor of a regular file of at most ``limit`` bytes (a FIFO, a device or
    ``/dev/urandom`` is refused, not read forever)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise fail(p, "", f"no such {what}") from None
    except OSError as e:
        raise fail(p, "", f"cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise fail(p, "", f"a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise fail(p, "", f"not a regular file (a {what} is read from a file)")
        if st.st_size > limit:
            raise fail(p, "", f"{st.st_size:,} bytes: larger than a {what} can be ({limit:,} bytes)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_file(path: PathLike, what: str, limit: int) -> None:
    """Refuse what is not a regular file of at most ``limit`` bytes, before a library (pandas,
    pyarrow) reads it itself."""
    os.close(_open_checked(os.fspath(path), what, limit))


def read_bytes(path: PathLike, what: str, limit: int) -> bytes:
    """A regular file's bytes, refused past ``limit`` bytes (checked before reading: a FIFO, a
    device or ``/dev/urandom`` is refused, not read forever)."""
    p = os.fspath(path)
    fd = _open_checked(p, what, limit)
    try:
        chunks, total = [], 0
        while True:
            b = os.read(fd, min(8 * MIB, limit + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > limit:  # it grew while read
                raise fail(p, "", f"larger than a {what} can be ({limit:,} bytes)")
        return b"".join(chunks)
    except OSError as e:
        raise fail(p, "", f"cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def text(data: bytes, source: object) -> str:
    """UTF-8 text, or an error naming the offset of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail(source, f"byte {e.start}", "not UTF-8 text") from None


def check_depth(doc: Any, source: object, where: str = "") -> Any:
    """Refuse a parsed document nested deeper than MAX_DEPTH (walked without recursion; YAML
    anchors may make it a graph, and each path through it counts). Returns ``doc``."""
    stack = [(doc, 0)]
    seen = 0
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            items: Any = node.values()
        elif isinstance(node, (list, tuple)):
            items = node
        else:
            continue
        if d >= MAX_DEPTH:
            raise fail(source, where, f"nested deeper than {MAX_DEPTH} levels")
        seen += len(items)
        if seen > 50_000_000:
            raise fail(source, where, "more than 50,000,000 values (with its aliases expanded)")
        stack += [(v, d + 1) for v in items if isinstance(v, (dict, list, tuple))]
    return doc


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_doc(s: str, source: object, line: Optional[int] = None) -> Any:
    """One JSON document; ``line``: its line in a JSON-lines file, for the error. NaN and
    Infinity (not JSON) are refused."""
    where = f"line {line}" if line is not None else ""
    try:
        doc = json.loads(s, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        at = f"line {line if line is not None else e.lineno} column {e.colno}"
        raise fail(source, at, f"not JSON ({e.msg})") from None
    except ValueError as e:  # NaN, Infinity; ints too long for Python to read
        raise fail(source, where, f"not JSON ({e})") from None
    except RecursionError:
        raise fail(source, where, f"nested deeper than {MAX_DEPTH} levels") from None
    return check_depth(doc, source, where)


def json_lines(text: str, source: object) -> list[tuple[int, Any]]:
    """A JSON-lines file's documents, one per non-empty line, with their line numbers (errors
    name the line)."""
    return [(n, json_doc(line, source, n)) for n, line in enumerate(text.split("\n"), 1) if line.strip()]


def read_json(path: PathLike, what: str, limit: int) -> Any:
    """A JSON file: a regular file under ``limit`` bytes, UTF-8, bounded nesting."""
    return json_doc(text(read_bytes(path, what, limit), path), path)


# ------------------------------------------------------------------------------ values


def plain_name(v: Any, source: object, where: str) -> str:
    """A name that may become part of a file name: letters, digits, ``_ . -``, no leading dot
    (so never ``..``, a path, or a hidden file)."""
    if not isinstance(v, str) or not PLAIN_NAME.fullmatch(v) or v.startswith("."):
        raise fail(source, where, f"{short(v)} is not a plain name (letters, digits, '_', '.', '-'; "
                                  f"not starting with '.')")
    return v


def inflate_b64(v: Any, source: object, where: str, limit: Optional[int] = None) -> bytes:
    """Base64 of zlib-compressed bytes, inflated in a stream that stops past ``limit`` bytes
    (default ``MAX_EMBEDDED_BYTES``: a small result may not grow into gigabytes)."""
    if limit is None:
        limit = MAX_EMBEDDED_BYTES
    if not isinstance(v, str):
        raise fail(source, where, f"{short(v)} is not base64 text")
    try:
        raw = base64.b64decode(v.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise fail(source, where, "not base64") from None
    d = zlib.decompressobj()
    out = []
    total = 0
    try:
        buf = raw
        while buf:
            chunk = d.decompress(buf, MIB)
            total += len(chunk)
            if total > limit:
                raise fail(source, where, f"inflates past {limit:,} bytes")
            out.append(chunk)
            buf = d.unconsumed_tail
        tail = d.flush()
        total += len(tail)
        if total > limit:
            raise fail(source, where, f"inflates past {limit:,} bytes")
        out.append(tail)
    except zlib.error as e:
        raise fail(source, where, f"not zlib data ({e})") from None
    if not d.eof:
        raise fail(source, where, "zlib data cut short")
    return b"".join(out)


def sha256_hex(v: Any, source: object, where: str) -> str:
    if not isinstance(v, str) or not _SHA256.fullmatch(v):
        raise fail(source, where, f"{short(v)} is not a SHA-256 (64 hexadecimal digits)")
    return v


class Check:
    """Typed access to a parsed document: ``get(obj, key, where, kind)`` returns the value or
    raises one line ``SOURCE: where.key: what is wrong``. Kinds: str, int, count (whole,
    >= 0), number (finite), nonneg (finite, >= 0), fraction (in [0, 1]), bool, list, dict."""

    _WANT = {"str": "a string", "int": "a whole number", "count": "a whole number >= 0",
             "number": "a finite number", "nonneg": "a finite number >= 0", "fraction": "a number in [0, 1]",
             "bool": "true or false", "list": "a list", "dict": "an object"}
    #: the error raised (a reader of one kind of file may have its own, e.g. GuidanceError)
    error: type = TierkitError
    #: the largest count a file of this kind may hold (None: any)
    max_count: Optional[int] = None

    def __init__(self, source: object) -> None:
        self.source = source

    def fail(self, where: str, what: str) -> TierkitError:
        e = fail(self.source, where, what)
        return e if self.error is TierkitError else self.error(str(e))

    def want(self, kind: str) -> str:
        if kind == "count" and self.max_count is not None:
            return f"a whole number in 0..2**{self.max_count.bit_length() - 1}"
        return self._WANT[kind]

    def ok(self, x: Any, kind: str) -> bool:
        num = isinstance(x, (int, float)) and not isinstance(x, bool)
        return {
            "str": lambda: isinstance(x, str),
            "int": lambda: isinstance(x, int) and not isinstance(x, bool),
            "count": lambda: isinstance(x, int) and not isinstance(x, bool) and x >= 0
            and (self.max_count is None or x <= self.max_count),
            "number": lambda: num and math.isfinite(x),
            "nonneg": lambda: num and math.isfinite(x) and x >= 0,
            "fraction": lambda: num and math.isfinite(x) and 0 <= x <= 1,
            "bool": lambda: isinstance(x, bool),
            "list": lambda: isinstance(x, list),
            "dict": lambda: isinstance(x, dict),
        }[kind]()

    def value(self, x: Any, where: str, kind: str, nullable: bool = False) -> Any:
        if (x is None and nullable) or self.ok(x, kind):
            return x
        raise self.fail(where, f"{short(x)} is not {self.want(kind)}{' or null' if nullable else ''}")

    def get(self, obj: Any, key: str, where: str, kind: str, nullable: bool = False, default: Any = ...) -> Any:
        path = f"{where}.{key}" if where else key
        if not isinstance(obj, dict):
            raise self.fail(where, f"{short(obj)} is not an object")
        if key not in obj:
            if default is not ...:
                return default
            raise self.fail(path, "missing")
        return self.value(obj[key], path, kind, nullable)
