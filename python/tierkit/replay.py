"""Results that replay: the files a run read, kept in its result, and the run made again.

A simulation result records its exact configuration (``config``: trace and digest, platform
with resolved capacities, policy spec, timing). Two policies also read files the Python
front end makes on the fly: ``guided`` its guidance, ``kleio``/``kleoniki`` their models'
predictions. Those are written to temporary directories that are gone after the run, so
:func:`keep_inputs` embeds every file the policy spec names into ``config.inputs``
(``{key: {"path", "sha256", "zlib_base64"}}``, the file's exact bytes, compressed), and
:func:`replay` writes them back, checks their digests and runs the recorded configuration
again. Same trace, same configuration, same numbers, bit for bit.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from . import _core

#: policy parameters that name an input file the result must carry
FILE_KEYS = ("guidance", "predictions")
#: the figures a replay must reproduce exactly
FIGURES = ("accesses", "reads", "writes", "pages", "runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes",
           "migration_time_ns", "energy_j", "ipc", "periods")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def spec_args(spec: str) -> list[tuple[str, str]]:
    """``name:k=v,...`` → [(k, v), ...] (values never hold commas in a canonical spec)."""
    _, _, args = spec.partition(":")
    return [tuple(kv.split("=", 1)) if "=" in kv else (kv, "") for kv in args.split(",") if kv]  # type: ignore[misc]


def with_args(spec: str, values: Mapping[str, Any], drop_empty: bool = False) -> str:
    """``spec`` with the given parameters' values replaced (those it has); ``drop_empty``
    leaves out parameters without a value (those the Python front end consumed)."""
    name, _, _ = spec.partition(":")
    args = [(k, str(values[k]) if k in values and values[k] is not None else v) for k, v in spec_args(spec)]
    if drop_empty:
        args = [(k, v) for k, v in args if v != ""]
    return name + (":" + ",".join(f"{k}={v}" for k, v in args) if args else "")


def keep_inputs(result: dict) -> dict:
    """Embed in ``result['config']['inputs']`` every file its policy spec names (guidance=,
    predictions=), with its SHA-256. Returns the result."""
    cfg = result["config"]
    inputs = {}
    for k, v in spec_args(str(cfg.get("policy", ""))):
        if k in FILE_KEYS and v:
            data = Path(v).read_bytes()
            inputs[k] = {"path": v, "sha256": sha256(data),
                         "zlib_base64": base64.b64encode(zlib.compress(data, 9)).decode("ascii")}
    if inputs:
        cfg["inputs"] = inputs
    return result


def _capacities(cfg: Mapping[str, Any]) -> dict[str, str]:
    caps = {}
    for i, c in enumerate(cfg["platform"].get("capacity") or []):
        if isinstance(c, dict) and "fraction" in c:
            caps[str(i)] = repr(float(c["fraction"]))
        elif isinstance(c, dict) and "bytes" in c:
            caps[str(i)] = f"{int(c['bytes'])}B"
        elif c in ("unlimited", "Unlimited"):
            caps[str(i)] = "unlimited"
        else:
            raise _core.TierkitError(f"replay: config.platform.capacity[{i}]: '{c}' is not a capacity tierkit records")
    return caps


def load(source: Union[str, os.PathLike, Mapping[str, Any]]) -> list[dict]:
    """Results from a dict, a JSON file (one result, or a list) or a JSON-lines file."""
    if isinstance(source, Mapping):
        return [dict(source)]
    path = os.fspath(source)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise _core.TierkitError(f"{path}: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
        docs = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        try:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            raise _core.TierkitError(f"{path}: not a result (JSON or JSON lines): line {e.lineno}: {e.msg}") from None
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("config"), dict) or "policy" not in d["config"]:
            raise _core.TierkitError(f"{path}: result {i}: no 'config' with the run's policy (write results with --json "
                                     f"or compare --out)")
    return docs


def replay(result: Mapping[str, Any], trace: Optional[Union[str, os.PathLike]] = None,
           progress: Optional[bool] = None) -> dict:
    """Run a recorded result's configuration again; returns the new result.

    ``trace``: where the trace is now (default: the recorded path); its digest must match the
    recorded one. Files the run read are taken from ``config.inputs`` (checked against their
    SHA-256); a result without them (made before they were recorded) reads the recorded paths,
    which must still exist."""
    from .api import run

    cfg = result["config"]
    several: dict[str, Any] = {}
    fmt = cfg.get("trace_format")
    cache = cfg.get("cache")
    if cfg.get("mix"):
        # a mix (docs/models.md, "Many cores"): its programs, each with its own digest
        if trace is not None:
            raise _core.TierkitError("replay: a mix's result names its programs' traces; --trace gives one trace")
        tr: Any = list(cfg["mix"])
        fmt = None  # (each program's format is found in its file)
        several = dict(mix=True, quantum=int(cfg.get("quantum", 1)),
                       alone=(result.get("mix") or {}).get("weighted_speedup") is not None)
    else:
        tr = os.fspath(trace) if trace is not None else cfg["trace"]
        if int(cfg.get("cores", 1)) > 1:
            several = dict(cores=int(cfg["cores"]), quantum=int(cfg.get("quantum", 1)))
    tmp = tempfile.mkdtemp(prefix="tierkit-replay-")
    try:
        paths = {}
        for key, emb in (cfg.get("inputs") or {}).items():
            data = zlib.decompress(base64.b64decode(emb["zlib_base64"]))
            if sha256(data) != emb["sha256"]:
                raise _core.TierkitError(f"replay: config.inputs.{key}: the embedded file does not match its SHA-256")
            p = os.path.join(tmp, f"{key}.json")
            Path(p).write_bytes(data)
            paths[key] = p
        spec = with_args(str(cfg["policy"]), paths, drop_empty=True)
        plat = os.path.join(tmp, "platform.json")
        Path(plat).write_text(json.dumps(cfg["platform"]["platform"]))
        r = run(tr, plat, spec, None, _capacities(cfg), cfg["timing"], fmt, cache, progress,
                repeat=int(cfg.get("repeat", 1)), time_scale=float(cfg.get("time_scale", 1.0)), **several)
    finally:
        shutil.rmtree(tmp, True)
    # the trace read must be the one recorded: the run computes its digest as it reads it (a
    # mix's is its programs', joined by '+')
    want, got = str(cfg.get("trace_digest") or ""), str(r["config"].get("trace_digest") or "")
    if want and got and want != got:
        names = tr if isinstance(tr, list) else [tr]
        t, w, g = next((x for x in zip(names, want.split("+"), got.split("+")) if x[1] != x[2]), (tr, want, got))
        raise _core.TierkitError(f"replay: {t} has digest {g[:12]}..., the result was made from {w[:12]}...: "
                                 f"give the trace it was made from")
    # the replay is the recorded run: keep its labels and the record of its inputs
    r["policy"] = result.get("policy", r["policy"])
    r["platform"] = result.get("platform", r["platform"])
    r["config"]["policy"] = cfg["policy"]
    for k in ("inputs", "guidance", "models", "cache", "mix", "cores", "quantum"):
        if k in cfg:
            r["config"][k] = cfg[k]
    return r


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The figures (FIGURES) that differ between two results, as 'name: a != b'."""
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in FIGURES if a.get(k) != b.get(k)]
