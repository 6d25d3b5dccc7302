"""Trained Kleio/Kleoniki models in one versioned file, to reuse them instead of training.

The file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays; never a pickle) holding

- ``header``: a JSON document as a uint8 array of its UTF-8 bytes::

      {"format": "tierkit-models", "version": 1,
       "config": {TrainConfig's fields: history, hidden, epochs, lr, bins, seed, device, chunk, class_weight},
       "count": M, "device": "cpu" | "cuda" (the device the models were trained on),
       "arrays": {"w_gates": [M, 4*hidden, hidden + 2], "w_out": [M, bins + 1, hidden + 1]},
       "meta": {...the caller's: policy, pages, groups, period, bins, trace digest, ...}}

- ``w_gates`` float32 [M, 4·hidden, hidden + 2] and ``w_out`` float32 [M, bins + 1, hidden + 1]:
  the stacked parameters of :class:`tierkit.learned.lstm.Models`.

:func:`save` writes it atomically (a temporary file in the same folder, then a rename), never
over an existing file unless ``force``, and the same models and meta always give the same
bytes (the zip entries carry a fixed date). :func:`load` reads it as untrusted input
(docs/security.md): every way a file can be wrong is one :class:`TierkitError` line naming the
file and the key or array, checked before anything large is inflated or allocated.
"""
from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import tempfile
import zipfile
import zlib
from typing import Any, Optional

import numpy as np

from .. import untrusted
from .._core import TierkitError
from . import lstm

FORMAT = "tierkit-models"
VERSION = 1
#: the arrays of a version-1 file, in the order they are written (after ``header``)
ARRAYS = ("w_gates", "w_out")
#: a models file (1,000 models of the default size are about 5 MB)
MAX_FILE_BYTES = 2 << 30
#: the arrays once inflated, all together (checked against the zip's sizes before inflating)
MAX_ARRAY_BYTES = 4 << 30
#: the JSON header (selected page addresses and group labels of a million pages fit)
MAX_HEADER_BYTES = 64 << 20
#: zip entries' date: fixed, so that saving the same models twice gives the same bytes
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
#: TrainConfig fields that fix the arrays' shapes: required in a file (the others, missing,
#: take TrainConfig's defaults)
_SHAPE_FIELDS = ("history", "hidden", "bins")
#: bounds on the shape fields read from a file (far above anything trained; keep sizes sane)
_MAX_HIDDEN = 4096
_MAX_HISTORY = 1 << 20
_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(lstm.TrainConfig))


def shapes(config: lstm.TrainConfig, count: int) -> dict[str, tuple[int, int, int]]:
    """The shape of each array of ``count`` models of ``config``."""
    H, C = int(config.hidden), int(config.bins) + 1
    return {"w_gates": (int(count), 4 * H, H + 2), "w_out": (int(count), C, H + 1)}


# ------------------------------------------------------------------------------ saving


def _plain(x: Any) -> Any:
    """json.dumps' fallback for NumPy values in ``meta`` (page addresses, labels)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON")


def _array(models: lstm.Models, name: str, want: tuple[int, ...], source: str) -> np.ndarray:
    t = models.state.get(name) if isinstance(models.state, dict) else None
    if t is None:
        raise ValueError(f"modelfile.save: models.state has no '{name}'")
    a = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
    if tuple(a.shape) != want:
        raise ValueError(f"modelfile.save: models.state['{name}'] has shape {list(a.shape)}, not {list(want)} "
                         f"(count {models.count}, hidden {models.config.hidden}, bins {models.config.bins})")
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.isfinite(a).all():
        bad = np.argwhere(~np.isfinite(a))
        raise TierkitError(f"{source}: {name}: {len(bad):,} weights are not finite (NaN or infinite; "
                           f"first at {bad[0].tolist()}): the training diverged, nothing to save")
    return a


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=(1, 0), allow_pickle=False)
    return buf.getvalue()


def encode(models: lstm.Models, meta: Optional[dict] = None, source: str = "modelfile.encode") -> bytes:
    """The bytes of the models file of ``models`` and ``meta`` (what :func:`save` writes);
    ``source`` begins the error line of models that are not finite (save: the file's name)."""
    cfg = models.config
    cfg.check()
    if not isinstance(models.count, (int, np.integer)) or models.count < 0:
        raise ValueError(f"modelfile.save: models.count {models.count!r} is not a whole number >= 0")
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"modelfile.save: meta must be a dict, not {type(meta).__name__}")
    want = shapes(cfg, int(models.count))
    arrays = {name: _array(models, name, want[name], source) for name in ARRAYS}
    header = {
        "format": FORMAT, "version": VERSION,
        "config": {k: getattr(cfg, k) for k in _CONFIG_FIELDS},
        "count": int(models.count),
        # where they were trained (models loaded from a file keep the file's)
        "device": str(models.info.get("trained_on", models.device)),
        "arrays": {name: list(want[name]) for name in ARRAYS},
        "meta": meta if meta is not None else {},
    }
    try:
        doc = json.dumps(header, default=_plain, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"modelfile.save: meta cannot be written as JSON: {e}") from None
    hb = doc.encode("utf-8")
    if len(hb) > MAX_HEADER_BYTES:
        raise ValueError(f"modelfile.save: the header is {len(hb):,} bytes, more than a models file may hold "
                         f"({MAX_HEADER_BYTES:,})")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, a in [("header", np.frombuffer(hb, dtype=np.uint8)), *arrays.items()]:
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, _npy(a))
    return buf.getvalue()


def save(path: untrusted.PathLike, models: lstm.Models, meta: Optional[dict] = None, force: bool = False) -> None:
    """Write ``models`` and the caller's ``meta`` (JSON-able; NumPy values become lists and
    numbers) to ``path``: atomically, and not over an existing file unless ``force``."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise TierkitError(f"{p}: a directory, not a models file to write")
    if not force and os.path.lexists(p):
        raise TierkitError(f"{p}: already exists: not overwritten (force it to replace the file)")
    data = encode(models, meta, source=p)
    folder = os.path.dirname(os.path.abspath(p))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(p) + ".", suffix=".tmp")
    except OSError as e:
        raise TierkitError(f"{p}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise TierkitError(f"{p}: cannot write: {e.strerror or e}") from None
        raise


# ------------------------------------------------------------------------------ loading


class _Reader(untrusted.Check):
    max_count = 1 << 40


def _peek(zf: zipfile.ZipFile, p: str, name: str, limit: int) -> tuple[tuple[int, ...], np.dtype]:
    """An entry's shape and dtype from its .npy header, after checking the zip's sizes (a
    small file may not inflate into gigabytes)."""
    info = zf.getinfo(name + ".npy")
    if info.file_size > limit:
        raise untrusted.fail(p, name, f"{info.file_size:,} bytes once inflated, more than it can be ({limit:,})")
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise untrusted.fail(p, name, f".npy format version {version[0]}.{version[1]} is not read here")
    except TierkitError:
        raise
    except Exception as e:  # zip and .npy damage: BadZipFile, zlib.error, ValueError, EOFError, ...
        raise untrusted.fail(p, name, _damage(e, "not a .npy array")) from None
    if fortran:
        raise untrusted.fail(p, name, "in Fortran order (tierkit writes C order)")
    return tuple(int(n) for n in shape), dtype


def _why(e: BaseException) -> str:
    return (str(e) or type(e).__name__).replace("\n", " ")[:160]


def _damage(e: BaseException, otherwise: str) -> str:
    """What a read error says: damaged bytes (a bad CRC, a cut deflate stream), or ``otherwise``."""
    damaged = isinstance(e, (zipfile.BadZipFile, EOFError, zlib.error))
    return f"{'damaged in the archive' if damaged else otherwise} ({_why(e)})"


def _read(npz: Any, p: str, name: str) -> np.ndarray:
    try:
        return np.asarray(npz[name])
    except Exception as e:  # a bad CRC, a cut deflate stream, an object array (a pickle: refused), ...
        raise untrusted.fail(p, name, _damage(e, "cannot be read")) from None


def _config(chk: _Reader, raw: dict) -> lstm.TrainConfig:
    for k in raw:
        if k not in _CONFIG_FIELDS:
            raise chk.fail(f"header.config.{k}", "not a training parameter of this tierkit")
    kinds = {"history": "count", "hidden": "count", "epochs": "count", "lr": "number", "bins": "count",
             "seed": "int", "device": "str", "chunk": "count", "class_weight": "str"}
    got: dict[str, Any] = {}
    for k in _CONFIG_FIELDS:
        if k in raw or k in _SHAPE_FIELDS:
            got[k] = chk.get(raw, k, "header.config", kinds.get(k, "str"))
    for k, lo, hi in (("history", 1, _MAX_HISTORY), ("hidden", 1, _MAX_HIDDEN), ("bins", 1, 255)):
        if not lo <= got[k] <= hi:
            raise chk.fail(f"header.config.{k}", f"{got[k]} is not from {lo} to {hi}")
    cfg = lstm.TrainConfig(**got)
    try:
        cfg.check()
    except ValueError as e:
        # "TrainConfig.lr: ..." -> "header.config.lr: ..."
        msg = str(e)
        key, _, what = msg.partition(": ")
        raise chk.fail("header.config." + key.rpartition(".")[2], what or msg) from None
    return cfg


def load(path: untrusted.PathLike, device: str = "cpu") -> tuple[lstm.Models, dict]:
    """The models and the caller's ``meta`` saved in ``path``, read as untrusted input.

    ``device`` ("auto", "cpu", "cuda", as :class:`~tierkit.learned.lstm.TrainConfig`'s)
    is where :func:`~tierkit.learned.lstm.predict` runs them: the returned models'
    ``config.device`` and ``device``; their weights are CPU tensors, as ``Models`` holds them
    (predict moves each batch). ``train_seconds`` is 0; ``info`` is ``{"loaded_from": path,
    "trained_on": the device the file says they were trained on}``."""
    p = os.fspath(path)
    torch = lstm._torch()
    try:
        dev = lstm._device(torch, device)
    except ValueError as e:
        raise TierkitError(str(e)) from None
    untrusted.check_file(p, "models file", MAX_FILE_BYTES)
    chk = _Reader(p)
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise untrusted.fail(p, "", f"cannot read: {e.strerror or e}") from None
    if magic != b"PK\x03\x04":
        raise untrusted.fail(p, "", "not a tierkit models file (not an .npz archive)")
    try:
        npz = np.load(p, allow_pickle=False)
    except Exception as e:  # a damaged zip: BadZipFile, EOFError, zlib.error, NotImplementedError, ...
        raise untrusted.fail(p, "", f"not a tierkit models file (not an .npz archive: {_why(e)})") from None
    with npz:
        zf: zipfile.ZipFile = npz.zip
        names = [i.filename for i in zf.infolist()]
        for n in names:
            stem = n[:-4] if n.endswith(".npy") else n
            if stem != "header" and stem not in ARRAYS:
                raise untrusted.fail(p, n, f"not an array of a {FORMAT} file (its arrays: header, {', '.join(ARRAYS)})")
            if names.count(n) > 1:
                raise untrusted.fail(p, stem, "stored twice in the archive")
        if "header.npy" not in names:
            raise untrusted.fail(p, "header", f"missing (not a {FORMAT} file?)")
        shape, dtype = _peek(zf, p, "header", MAX_HEADER_BYTES + 4096)
        if dtype != np.uint8 or len(shape) != 1:
            raise untrusted.fail(p, "header", f"dtype {dtype}, shape {list(shape)}: not the uint8 bytes of a JSON document")
        if shape[0] > MAX_HEADER_BYTES:
            raise untrusted.fail(p, "header", f"{shape[0]:,} bytes, more than a header can be ({MAX_HEADER_BYTES:,})")
        hb = _read(npz, p, "header").tobytes()
        doc = untrusted.json_doc(untrusted.text(hb, f"{p}: header"), f"{p}: header")
        if not isinstance(doc, dict):
            raise chk.fail("header", f"{untrusted.short(doc)} is not a JSON object")
        fmt = doc.get("format")
        if fmt != FORMAT:
            raise chk.fail("header.format", "missing: not a tierkit models file" if fmt is None
                           else f"{untrusted.short(fmt)}, not \"{FORMAT}\": not a tierkit models file")
        version = chk.get(doc, "version", "header", "int")
        if version != VERSION:
            raise chk.fail("header.version", f"{version} is not supported: this tierkit reads version {VERSION}"
                           + (" (written by a newer tierkit?)" if version > VERSION else ""))
        cfg = _config(chk, chk.get(doc, "config", "header", "dict"))
        count = chk.get(doc, "count", "header", "count")
        trained_on = chk.get(doc, "device", "header", "str")
        meta = chk.get(doc, "meta", "header", "dict")
        want = shapes(cfg, count)
        need = sum(math.prod(s) * 4 for s in want.values())
        if need > MAX_ARRAY_BYTES:
            raise chk.fail("header.count", f"{count:,} models of hidden {cfg.hidden}, bins {cfg.bins} would be "
                                           f"{need:,} bytes of weights, more than a models file may hold ({MAX_ARRAY_BYTES:,})")
        listed = chk.get(doc, "arrays", "header", "dict")
        for name in ARRAYS:
            if chk.get(listed, name, "header.arrays", "list") != list(want[name]):
                raise chk.fail(f"header.arrays.{name}", f"{json.dumps(listed[name])[:60]} is not {list(want[name])}, "
                                                        f"the shape the header's count and config make")
        state = {}
        for name in ARRAYS:
            if name + ".npy" not in names:
                raise untrusted.fail(p, name, "missing")
            s = want[name]
            shape, dtype = _peek(zf, p, name, math.prod(s) * 4 + 4096)
            if dtype != np.dtype("<f4"):
                raise untrusted.fail(p, name, f"{dtype} weights, not float32")
            if shape != s:
                raise untrusted.fail(p, name, f"shape {list(shape)}, but the header's count {count}, hidden {cfg.hidden} "
                                              f"and bins {cfg.bins} make it {list(s)}")
            a = _read(npz, p, name)
            if a.dtype != np.float32 or a.shape != s:  # the .npy header was read twice: same answer
                raise untrusted.fail(p, name, f"dtype {a.dtype}, shape {list(a.shape)}: not float32 {list(s)}")
            finite = np.isfinite(a)
            if not finite.all():
                bad = np.argwhere(~finite)
                raise untrusted.fail(p, name, f"{len(bad):,} weights are not finite (NaN or infinite; first at {bad[0].tolist()})")
            state[name] = torch.from_numpy(np.ascontiguousarray(a))
    cfg = dataclasses.replace(cfg, device=str(dev))
    models = lstm.Models(config=cfg, state=state, count=count, train_seconds=0.0, device=str(dev.type),
                         info={"loaded_from": p, "trained_on": trained_on})
    return models, meta
