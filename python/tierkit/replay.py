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

from . import _core, untrusted

#: policy parameters that name an input file the result must carry
FILE_KEYS = ("guidance", "predictions")
#: the most repeats a result may ask for (a run repeats its trace as one; --repeat takes any)
MAX_REPEAT = 1 << 20
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


def _capacities(cfg: Mapping[str, Any], c: untrusted.Check) -> dict[str, str]:
    caps = {}
    for i, x in enumerate(c.get(cfg["platform"], "capacity", "config.platform", "list", default=[])):
        where = f"config.platform.capacity[{i}]"
        if isinstance(x, dict) and "fraction" in x:
            caps[str(i)] = repr(float(c.get(x, "fraction", where, "nonneg")))
        elif isinstance(x, dict) and "bytes" in x:
            caps[str(i)] = f"{c.get(x, 'bytes', where, 'count')}B"
        elif x in ("unlimited", "Unlimited"):
            caps[str(i)] = "unlimited"
        else:
            raise c.fail(where, f"{untrusted.short(x)} is not a capacity tierkit records")
    return caps


def load(source: Union[str, os.PathLike, Mapping[str, Any]]) -> list[dict]:
    """Results from a dict, a JSON file (one result, or a list) or a JSON-lines file. A file
    is untrusted (docs/security.md): a regular file under ``untrusted.MAX_RESULT_BYTES``,
    UTF-8, bounded nesting; each result's configuration is checked by :func:`replay`."""
    if isinstance(source, Mapping):
        return [dict(source)]
    path = os.fspath(source)
    text = untrusted.text(untrusted.read_bytes(path, "result file", untrusted.MAX_RESULT_BYTES), path)
    if not text.strip():
        raise untrusted.fail(path, "", "empty: not a result (write results with --json or compare --out)")
    try:
        doc = json.loads(text, parse_constant=untrusted._no_constants)
        docs = doc if isinstance(doc, list) else [doc]
        untrusted.check_depth(docs, path)
    except (ValueError, RecursionError):
        # JSON lines: each line a result
        docs = [untrusted.json_doc(line, path, n) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("config"), dict) or "policy" not in d["config"]:
            raise untrusted.fail(path, f"result {i}", "no 'config' with the run's policy (write results with --json "
                                                     "or compare --out)")
    return docs


def _checked(result: Mapping[str, Any], source: str) -> dict:
    """The fields of a result's configuration that replay reads, checked (a result may come
    from anyone): types, ranges, and the inputs' keys as plain names of files the policy reads."""
    c = untrusted.Check(source)
    cfg = c.get(result, "config", "", "dict")
    out: dict[str, Any] = {}
    out["policy"] = c.get(cfg, "policy", "config", "str")
    out["timing"] = c.get(cfg, "timing", "config", "str")
    for k in ("trace_format", "cache", "trace_digest"):
        out[k] = c.get(cfg, k, "config", "str", nullable=True, default=None)
    plat = c.get(cfg, "platform", "config", "dict")
    out["platform"] = c.get(plat, "platform", "config.platform", "dict")
    out["capacities"] = _capacities(cfg, c)
    out["repeat"] = c.get(cfg, "repeat", "config", "count", default=1)
    if not 1 <= out["repeat"] <= MAX_REPEAT:
        raise c.fail("config.repeat", f"{out['repeat']} is not in 1..{MAX_REPEAT}")
    ts = c.get(cfg, "time_scale", "config", "number", default=1.0)
    if not ts > 0:
        raise c.fail("config.time_scale", f"{ts} is not > 0")
    out["time_scale"] = float(ts)
    for k in ("cores", "quantum"):
        out[k] = c.get(cfg, k, "config", "count", default=1)
        if not 1 <= out[k] <= 1 << 16:
            raise c.fail(f"config.{k}", f"{out[k]} is not in 1..65536")
    mix = c.get(cfg, "mix", "config", "list", nullable=True, default=None)
    if mix:
        out["mix"] = [c.value(m, f"config.mix[{i}]", "str") for i, m in enumerate(mix)]
    else:
        out["trace"] = c.get(cfg, "trace", "config", "str")
    inputs = c.get(cfg, "inputs", "config", "dict", nullable=True, default=None) or {}
    files = dict(spec_args(out["policy"]))
    out["inputs"] = {}
    for key, emb in inputs.items():
        untrusted.plain_name(key, source, "config.inputs key")
        where = f"config.inputs.{key[:40]}"
        if key not in FILE_KEYS or key not in files:
            raise c.fail(where, f"the policy {untrusted.short(out['policy'])} reads no such file "
                                f"(files a policy reads: {', '.join(FILE_KEYS)})")
        c.value(emb, where, "dict")
        digest = untrusted.sha256_hex(emb.get("sha256"), source, f"{where}.sha256")
        data = untrusted.inflate_b64(emb.get("zlib_base64"), source, f"{where}.zlib_base64")
        if sha256(data) != digest:
            raise c.fail(where, "the embedded file does not match its SHA-256")
        out["inputs"][key] = data
    return out


def replay(result: Mapping[str, Any], trace: Optional[Union[str, os.PathLike]] = None,
           progress: Optional[bool] = None, source: str = "result") -> dict:
    """Run a recorded result's configuration again; returns the new result.

    ``trace``: where the trace is now (default: the recorded path); its digest must match the
    recorded one. Files the run read are taken from ``config.inputs`` (checked against their
    SHA-256); a result without them (made before they were recorded) reads the recorded paths,
    which must still exist. ``source`` names the result in errors (its file)."""
    from .api import run

    cfg = result["config"]
    ok = _checked(result, source)
    several: dict[str, Any] = {}
    fmt = ok["trace_format"]
    cache = ok["cache"]
    if "mix" in ok:
        # a mix (docs/models.md, "Many cores"): its programs, each with its own digest
        if trace is not None:
            raise _core.TierkitError("replay: a mix's result names its programs' traces; --trace gives one trace")
        tr: Any = ok["mix"]
        fmt = None  # (each program's format is found in its file)
        mixed = result.get("mix")
        several = dict(mix=True, quantum=ok["quantum"],
                       alone=isinstance(mixed, dict) and mixed.get("weighted_speedup") is not None)
    else:
        tr = os.fspath(trace) if trace is not None else ok["trace"]
        if ok["cores"] > 1:
            several = dict(cores=ok["cores"], quantum=ok["quantum"])
    tmp = tempfile.mkdtemp(prefix="tierkit-replay-")
    try:
        # each embedded file under a name of replay's own (the key only chooses which)
        paths = {}
        for key, data in ok["inputs"].items():
            p = os.path.join(tmp, f"{FILE_KEYS.index(key)}.json")
            Path(p).write_bytes(data)
            paths[key] = p
        spec = with_args(ok["policy"], paths, drop_empty=True)
        plat = os.path.join(tmp, "platform.json")
        Path(plat).write_text(json.dumps(ok["platform"]))
        r = run(tr, plat, spec, None, ok["capacities"], ok["timing"], fmt, cache, progress,
                repeat=ok["repeat"], time_scale=ok["time_scale"], **several)
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
    r["config"]["policy"] = ok["policy"]
    for k in ("inputs", "guidance", "models", "cache", "mix", "cores", "quantum"):
        if k in cfg:
            r["config"][k] = cfg[k]
    return r


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The figures (FIGURES) that differ between two results, as 'name: a != b'."""
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in FIGURES if a.get(k) != b.get(k)]
