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

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from . import _core, untrusted
from ._engine import FILE_KEYS, keep_inputs, sha256, spec_args, with_args  # noqa: F401

#: the most repeats a result may ask for (a run repeats its trace as one; --repeat takes any)
MAX_REPEAT = 1 << 20
#: the figures a replay must reproduce exactly
FIGURES = ("accesses", "reads", "writes", "pages", "runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes",
           "migration_time_ns", "energy_j", "ipc", "periods")










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
        # a study (tierkit kleio/kleoniki --json) carries its runs
        if isinstance(doc, dict) and "rows" in doc and "config" not in doc:
            if not isinstance(doc.get("results"), list):
                raise untrusted.fail(path, "results", "missing: a study from a tierkit that did not keep its runs "
                                                      "(run it again)")
            docs = doc["results"]
    except (ValueError, RecursionError):
        # JSON lines: each line a result
        docs = [d for _, d in untrusted.json_lines(text, path)]
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("config"), dict) or "policy" not in d["config"]:
            raise untrusted.fail(path, f"result {i}", "no 'config' with the run's policy (write results with --json "
                                                     "or compare --out)")
    if not docs:
        # an empty list or a study without runs: nothing to check is not a check that passed
        raise untrusted.fail(path, "", "holds no results (write results with --json or compare --out)")
    return docs


def _json_path(v: Any, c: untrusted.Check, where: str) -> str:
    """A path of a run spec (a string, or ``{"os_bytes_hex": ...}`` for a name that is not
    UTF-8) as Python holds it."""
    if isinstance(v, str):
        return v
    h = v.get("os_bytes_hex") if isinstance(v, dict) and len(v) == 1 else None
    if not isinstance(h, str) or len(h) % 2 or any(ch not in "0123456789abcdef" for ch in h):
        raise c.fail(where, f"{untrusted.short(v)} is not a path")
    return os.fsdecode(bytes.fromhex(h))


def _legacy_spec(cfg: Mapping[str, Any], c: untrusted.Check) -> dict:
    """The run spec of a result made before results recorded one (``config.run``): rebuilt from
    the configuration's fields, as replay read them then."""
    spec: dict[str, Any] = {"policy": c.get(cfg, "policy", "config", "str"), "timing": c.get(cfg, "timing", "config", "str")}
    plat = c.get(cfg, "platform", "config", "dict")
    spec["platform"] = c.get(plat, "platform", "config.platform", "dict")
    spec["capacity"] = _capacities(cfg, c)
    spec["repeat"] = c.get(cfg, "repeat", "config", "count", default=1)
    spec["time_scale"] = c.get(cfg, "time_scale", "config", "number", default=1.0)
    for k in ("cores", "quantum"):
        spec[k] = c.get(cfg, k, "config", "count", default=1)
    for k in ("cache", "trace_digest"):
        v = c.get(cfg, k, "config", "str", nullable=True, default=None)
        if v is not None:
            spec[k] = v
    mix = c.get(cfg, "mix", "config", "list", nullable=True, default=None)
    if mix:
        paths = [c.value(m, f"config.mix[{i}]", "str") for i, m in enumerate(mix)]
        spec["trace"], spec["mix"] = paths[0], paths[1:]
    else:
        spec["trace"] = c.get(cfg, "trace", "config", "str")
        fmt = c.get(cfg, "trace_format", "config", "str", nullable=True, default=None)
        if fmt is not None:
            spec["format"] = fmt
    return spec


def _checked(result: Mapping[str, Any], source: str) -> dict:
    """What replay runs, checked (a result may come from anyone): the result's one description
    of its run (``config.run``, or one rebuilt for an older result) with every field typed and
    ranged, and the files it embeds, their keys plain names of files the policy reads."""
    c = untrusted.Check(source)
    cfg = c.get(result, "config", "", "dict")
    run = c.get(cfg, "run", "config", "dict", nullable=True, default=None)
    w = "config.run" if run is not None else "config"
    spec = dict(run) if run is not None else _legacy_spec(cfg, c)
    spec["trace"] = _json_path(spec.get("trace"), c, f"{w}.trace")
    c.value(spec["policy"], f"{w}.policy", "str")
    c.value(spec.get("timing", "simple"), f"{w}.timing", "str")
    if not isinstance(spec.get("platform"), (str, dict)):
        raise c.fail(f"{w}.platform", f"{untrusted.short(spec.get('platform'))} is not a platform's name or the platform")
    caps = c.value(spec.get("capacity", {}), f"{w}.capacity", "dict")
    for k, v in caps.items():
        c.value(v, f"{w}.capacity.{untrusted.short(k, 20)}", "str")
    repeat = c.value(spec.get("repeat", 1), f"{w}.repeat", "count")
    if not 1 <= repeat <= MAX_REPEAT:
        raise c.fail(f"{w}.repeat", f"{repeat} is not in 1..{MAX_REPEAT}")
    ts = c.value(spec.get("time_scale", 1.0), f"{w}.time_scale", "number")
    if not ts > 0:
        raise c.fail(f"{w}.time_scale", f"{ts} is not > 0")
    for k in ("cores", "quantum"):
        n = c.value(spec.get(k, 1), f"{w}.{k}", "count")
        if not 1 <= n <= 1 << 16:
            raise c.fail(f"{w}.{k}", f"{n} is not in 1..65536")
    # the digest the result says it was made from (config.trace_digest) is the one its trace
    # must have; config.run records the same
    if cfg.get("trace_digest") is not None:
        spec["trace_digest"] = c.get(cfg, "trace_digest", "config", "str")
    for k in ("format", "cache", "trace_digest"):
        if spec.get(k) is not None:
            c.value(spec[k], f"{w}.{k}", "str")
    spec["mix"] = [_json_path(m, c, f"{w}.mix[{i}]") for i, m in enumerate(c.value(spec.get("mix", []), f"{w}.mix", "list"))]
    inputs = c.get(cfg, "inputs", "config", "dict", nullable=True, default=None) or {}
    files = dict(spec_args(spec["policy"]))
    data_of = {}
    for key, emb in inputs.items():
        untrusted.plain_name(key, source, "config.inputs key")
        where = f"config.inputs.{key[:40]}"
        if key not in FILE_KEYS or key not in files:
            raise c.fail(where, f"the policy {untrusted.short(spec['policy'])} reads no such file "
                                f"(files a policy reads: {', '.join(FILE_KEYS)})")
        c.value(emb, where, "dict")
        digest = untrusted.sha256_hex(emb.get("sha256"), source, f"{where}.sha256")
        data = untrusted.inflate_b64(emb.get("zlib_base64"), source, f"{where}.zlib_base64")
        if sha256(data) != digest:
            raise c.fail(where, "the embedded file does not match its SHA-256")
        data_of[key] = data
    return {"spec": spec, "inputs": data_of}


def replay(result: Mapping[str, Any], trace: Optional[Union[str, os.PathLike]] = None,
           progress: Optional[bool] = None, source: str = "result") -> dict:
    """Run a recorded result again: its one description of the run (``config.run``,
    docs/models.md), with the files it embeds; returns the new result.

    ``trace``: where the trace is now (default: the recorded path); the engine checks that its
    digest is the recorded one. Files the run read are taken from ``config.inputs`` (checked
    against their SHA-256); a result without them (made before they were recorded) reads the
    recorded paths, which must still exist. ``source`` names the result in errors (its file)."""
    from ._engine import run

    ok = _checked(result, source)
    cfg = result["config"]  # a dict: _checked says so first
    spec = ok["spec"]
    if trace is not None:
        if spec["mix"]:
            raise _core.TierkitError("replay: a mix's result names its programs' traces; --trace gives one trace")
        spec["trace"] = os.fspath(trace)
    several: dict[str, Any] = {}
    if spec["mix"]:
        # a mix (docs/models.md, "Many cores"): its programs, each with its own digest
        mixed = result.get("mix")
        several = dict(mix=True, alone=isinstance(mixed, dict) and mixed.get("weighted_speedup") is not None)
    caps = dict(spec.get("capacity", {}))
    fast = caps.pop("0", None)
    tmp = tempfile.mkdtemp(prefix="tierkit-replay-")
    try:
        # each embedded file under a name of replay's own (the key only chooses which)
        paths = {}
        for key, data in ok["inputs"].items():
            p = os.path.join(tmp, f"{FILE_KEYS.index(key)}.json")
            Path(p).write_bytes(data)
            paths[key] = p
        policy = with_args(spec["policy"], paths, drop_empty=True)
        traces = [spec["trace"], *spec["mix"]] if spec["mix"] else spec["trace"]
        r = run(traces, spec["platform"], policy, fast, caps, spec.get("timing", "simple"), spec.get("format"),
                spec.get("cache"), progress, repeat=spec.get("repeat", 1), time_scale=float(spec.get("time_scale", 1.0)),
                cores=spec.get("cores", 1), quantum=spec.get("quantum", 1), trace_digest=spec.get("trace_digest"),
                **several)
    finally:
        shutil.rmtree(tmp, True)
    # the replay is the recorded run: keep its labels and the record of its inputs
    r["policy"] = result.get("policy", r["policy"])
    r["platform"] = result.get("platform", r["platform"])
    if isinstance(cfg.get("policy"), str):
        r["config"]["policy"] = cfg["policy"]
    if isinstance(r["config"].get("run"), dict):
        r["config"]["run"]["policy"] = spec["policy"]
    for k in ("inputs", "guidance", "models", "cache", "mix", "cores", "quantum"):
        if k in cfg:
            r["config"][k] = cfg[k]
    return r


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The figures (FIGURES) that differ between two results, as 'name: a != b'."""
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in FIGURES if a.get(k) != b.get(k)]
