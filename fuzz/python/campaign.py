"""A mutation campaign over the inputs tierkit's Python side reads: the files users are sent.

For each kind of input it makes a small valid seed with the tierkit under test, mutates it
(byte-level: flips, cuts, splices, inserted bytes; structure-level: a value of JSON or YAML
replaced by another type, a huge or negative number, deep nesting, a path that climbs out of
its folder, a decompression bomb), runs the command that reads it in a process of its own (30 s
and 2 GiB of address space beyond what the forking parent had mapped), and sorts what happened:

=========== ==========================================================================
clean        exit 2, one line ``tierkit: error: ...`` of at most 480 characters
accepted     exit 0 (or 1 from ``replay`` with figures that differ), nothing else wrong
wrong        accepted, with a result no run could give in the table (a sweep that took a
             damaged store record, e.g. ``"result": null`` or a negative runtime, for a result)
unclean      an error that breaks the one-line contract (several lines, too long, exit 1)
internal     exit 3, tierkit's "internal error" line (a bug, but no traceback)
traceback    a Python traceback
crash        killed by a signal, or a Rust panic
hang         still running after the time limit
oom          out of memory (MemoryError, a failed allocation)
overwrite    a file written or changed outside the folders the user named
=========== ==========================================================================

The kinds: ``result`` (``tierkit replay``), ``report`` (``tierkit.load`` of a compare
report), ``profile`` (``tierkit guide``), ``study`` (``tierkit sweep``), ``store`` (a sweep
store's cell records and digests memo, read by ``tierkit sweep`` again), ``regions`` (a
workload's regions file, ``validate.parse_regions``), ``predcache`` (the predictions cache,
read by ``tierkit kleio``), ``argv`` (arguments and paths with non-UTF-8 bytes, sizes past
what a command can allocate).

Each run is a child forked from one process that imported tierkit once (fast: thousands of
runs in minutes); the child sets its limits, its working directory, HOME and TMPDIR inside its
own run folder, and calls the CLI's ``main`` (or the API function) as a fresh ``tierkit``
would. ``argv`` arguments are given as Python decodes a command line (``os.fsdecode``).

    python fuzz/python/campaign.py --runs 3000 --out target/py-campaign   # table + runs.jsonl
    PYTHONPATH=OLD/python python fuzz/python/campaign.py ...                 # another tierkit

Deterministic: the same --seed makes the same mutations.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Callable

KINDS = ("result", "report", "profile", "study", "store", "regions", "predcache", "argv")
OUTCOMES = ("clean", "accepted", "wrong", "unclean", "internal", "traceback", "crash", "hang", "oom", "overwrite")
ROOT = Path(__file__).resolve().parents[2]
SITES_TRACE = ROOT / "data" / "traces" / "sqlite3-orders.tkt"


# ------------------------------------------------------------------------------ seeds


def make_seeds(d: Path) -> dict[str, Any]:
    """The valid inputs each kind mutates, made with the tierkit under test."""
    import tierkit
    from tierkit import api

    d.mkdir(parents=True, exist_ok=True)
    s: dict[str, Any] = {}
    t = d / "t.tkt"
    if not t.exists():
        tierkit.synth("zipf", t, accesses=3000, pages=300, seed=1, write_ratio=0.3, progress=False)
    s["trace"] = t
    # result: a simulate --json result, a guided one that carries its guidance, a compare's rows
    r1 = api.run(str(t), "dram-pmem", "first-touch", "0.2", None, "simple", None, None, False)
    prof_path = d / "sites.profile.json"
    if not prof_path.exists():
        from tierkit import profiling

        p = profiling.profile(SITES_TRACE, None, 8, None, None, None, False)
        profiling.write(p, prof_path, force=True)
    s["profile"] = prof_path.read_bytes()
    s["sites"] = SITES_TRACE
    r2 = api.run(str(SITES_TRACE), "dram-pmem", "guided:strategy=thermos", "0.2", None, "simple", None, None, False)
    s["results"] = [json.dumps(r1).encode(), json.dumps(r2).encode(),
                    (json.dumps(r1) + "\n" + json.dumps(r1) + "\n").encode()]
    # report: a compare --out folder
    rep = d / "report"
    if not rep.exists():
        from tierkit.cli import main

        if main(["compare", str(t), "--policies", "first-touch,history", "-c", "0.2", "--out", str(rep), "-q"]) != 0:
            raise SystemExit("campaign: the report seed could not be made")
    s["report"] = rep
    # study and store
    study = ("name: camp\ntraces:\n  - file: t.tkt\n    name: t\n  - synth: zipf\n    accesses: 2000\n    pages: 100\n"
             "    name: z\nplatforms: [dram-pmem]\ncapacities: [0.2]\ntiming: [simple]\n"
             "policies: [first-touch, history]\nbaseline: first-touch\n")
    s["study"] = study.encode()
    store = d / "store"
    if not store.exists():
        (d / "study.yaml").write_text(study)
        shutil.copy(t, d / "t.tkt.copy")
        from tierkit import studies

        cwd = os.getcwd()
        os.chdir(d)
        try:
            studies.sweep(studies.load_study("study.yaml"), store, workers=1, progress=False, report=False)
        finally:
            os.chdir(cwd)
    s["store"] = store
    # regions: as workloads/wl.h writes them
    s["regions"] = b"region hot 7f0000001000 1048576\nregion cold 7f0000200000 4194304\nhot 0.5 hot\nhot 12.25 cold hot\n"
    s["predcache"] = d / "predcache"
    return s


KLEIO_SPEC = "kleio:pages=0.1,period=50,history=4,hidden=8,epochs=2,threads=1"
KLEIO_ARGS = ["simulate", "t.tkt", "-P", KLEIO_SPEC, "-c", "0.2", "--json", "-q"]


def make_predcache(seeds: dict, d: Path) -> bool:
    """The predictions cache after one small kleio run (needs PyTorch); False without it."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    if (d / "done").exists():
        return True
    d.mkdir(parents=True, exist_ok=True)
    os.environ["TIERKIT_CACHE_DIR"] = str(d)
    try:
        from tierkit import api

        api.run(str(seeds["trace"]), "dram-pmem", KLEIO_SPEC, "0.2", None, "simple", None, None, False)
    finally:
        del os.environ["TIERKIT_CACHE_DIR"]
    if not list(d.glob("predictions/*.info.json")):
        raise SystemExit("campaign: the kleio run kept no predictions in the cache")
    (d / "done").write_text("")
    return True


# ------------------------------------------------------------------------------ mutations

INTERESTING_STR = ["", "..", "../../outside/pwn", "../../../outside/pwn", "/OUTSIDE/pwn", "a" * 5000, "\x00", "é",
                   "\udcff", "nan", "-1", "1e309", "{", "0x" + "f" * 40, "%s%n", "$HOME", "~", "*", "?"]
INTERESTING_NUM = [0, -1, 1, 2 ** 31, 2 ** 32, 2 ** 63, 2 ** 64, -2 ** 63, 10 ** 30, 1e308, float("inf"),
                   float("nan"), -0.0, 0.5, True, None]


class Deep:
    """A value nested ``n`` lists deep, written out as text by :func:`_dumps` (too deep to
    build as a Python object and walk)."""

    def __init__(self, n: int) -> None:
        self.n = n


def _walk(doc: Any):
    """(path, node) of every node, breadth first, at most 20,000 of them."""
    todo, n = [((), doc)], 0
    while todo and n < 20_000:
        path, node = todo.pop(0)
        n += 1
        yield path, node
        if isinstance(node, dict):
            todo += [(path + (k,), v) for k, v in node.items()]
        elif isinstance(node, list):
            todo += [(path + (i,), v) for i, v in enumerate(node[:200])]


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return doc


def _odd_value(rng: random.Random, outside: str) -> Any:
    r = rng.random()
    if r < 0.35:
        v = rng.choice(INTERESTING_NUM)
        return v
    if r < 0.65:
        return rng.choice(INTERESTING_STR).replace("/OUTSIDE", outside)
    if r < 0.75:
        return Deep(rng.choice([50, 1200, 100_000]))
    if r < 0.85:
        return {"": None, "a": [1, "b"]}
    if r < 0.92:
        return [rng.choice(INTERESTING_NUM) for _ in range(rng.randint(0, 5))]
    return "x" * rng.choice([1 << 10, 1 << 20])


def mutate_json_doc(doc: Any, rng: random.Random, outside: str, special: Callable | None = None) -> Any:
    grown = False  # one list grown per document: grown lists inside grown lists would not fit in memory
    for _ in range(rng.randint(1, 3)):
        nodes = list(_walk(doc))
        path, node = rng.choice(nodes)
        r = rng.random()
        if special is not None and r < 0.3:
            doc = special(doc, rng, outside)
        elif r < 0.55 or not isinstance(node, (dict, list)):
            doc = _set(doc, path, _odd_value(rng, outside))
        elif isinstance(node, dict) and node:
            k = rng.choice(list(node))
            if rng.random() < 0.5:
                del node[k]
            else:
                node[rng.choice(INTERESTING_STR).replace("/OUTSIDE", outside)] = node.pop(k)
        elif isinstance(node, list) and node:
            if rng.random() < 0.5 or grown:
                node.pop(rng.randrange(len(node)))
            else:
                node.extend(json.loads(json.dumps(node[:1], default=str)) * rng.choice([1, 100, 2000]))
                grown = True
    return doc


def _dumps(doc: Any, rng: random.Random) -> bytes:
    deep: dict[str, int] = {}

    def mark(x: Any) -> str:
        if isinstance(x, Deep):
            tag = f"__deep_{len(deep)}__"
            deep[tag] = x.n
            return tag
        raise TypeError(type(x).__name__)

    text = json.dumps(doc, allow_nan=True, default=mark)
    for tag, n in deep.items():
        text = text.replace(f'"{tag}"', "[" * n + "1" + "]" * n, 1)
    return text.encode("utf-8", "surrogatepass")


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if not b:
            b += bytes(rng.randrange(256) for _ in range(8))
            continue
        i = rng.randrange(len(b))
        if r < 0.3:
            b[i] ^= 1 << rng.randrange(8)
        elif r < 0.45:
            del b[i:i + rng.randint(1, 64)]
        elif r < 0.55:
            b = b[:i]
        elif r < 0.7:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif r < 0.8:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 256)]
        elif r < 0.9:
            b[i:i] = rng.choice([b"\xff\xfe", b"\xed\xa0\x80", b"\x00", b"\"", b"{", b"[", b"\\u0000", b"1e999",
                                 b"-", b"\n", b"!!python/object:os.system", b"&a", b"*a"])
        else:
            b[i:i + 1] = rng.choice([b"0", b"9" * 30, b"-1", b"NaN", b"Infinity"])
    return bytes(b)


def _bomb(size: int) -> dict:
    data = b"\x00" * size
    return {"path": "g.json", "sha256": hashlib.sha256(data).hexdigest(),
            "zlib_base64": base64.b64encode(zlib.compress(data, 9)).decode()}


def _result_special(doc: Any, rng: random.Random, outside: str) -> Any:
    """What a hostile result carries: input keys that climb out, big or broken payloads."""
    res = doc[0] if isinstance(doc, list) and doc else doc
    if not isinstance(res, dict):
        return doc
    cfg = res.setdefault("config", {})
    if not isinstance(cfg, dict):
        return doc
    inputs = cfg.get("inputs") if isinstance(cfg.get("inputs"), dict) else {}
    payload = next(iter(inputs.values()), None) or {"path": "g.json", "sha256": "0" * 64, "zlib_base64": ""}
    r = rng.random()
    if r < 0.4:
        key = rng.choice(["../../outside/pwn", "../../../outside/pwn", f"{outside}/pwn", "../pwn", ".hidden", "a/b",
                          "guidance/../../../outside/pwn", "\udcff"])
        inputs = {key: dict(payload) if isinstance(payload, dict) else payload}
    elif r < 0.6:
        inputs = {rng.choice(["guidance", "predictions"]): _bomb(rng.choice([1 << 20, 64 << 20, 300 << 20]))}
    elif r < 0.8:
        k = next(iter(inputs), "guidance")
        p = dict(payload) if isinstance(payload, dict) else {}
        p[rng.choice(["zlib_base64", "sha256", "path"])] = _odd_value(rng, outside)
        inputs = {k: p}
    else:
        cfg[rng.choice(["trace", "trace_format", "cache", "timing", "repeat", "time_scale", "cores", "quantum", "mix",
                        "platform", "policy", "trace_digest"])] = _odd_value(rng, outside)
        return doc
    cfg["inputs"] = inputs
    return doc


def _study_special(doc: Any, rng: random.Random, outside: str) -> Any:
    if not isinstance(doc, dict):
        return doc
    tr = doc.get("traces")
    r = rng.random()
    if r < 0.4 and isinstance(tr, list) and len(tr) > 1 and isinstance(tr[1], dict):
        tr[1]["name"] = rng.choice(["../../outside/pwn", "../../../outside/pwn", f"{outside}/pwn", "../x", ".x", "a/b"])
    elif r < 0.7 and isinstance(tr, list) and len(tr) > 1 and isinstance(tr[1], dict):
        tr[1]["pages"] = rng.choice([2 ** 32, 2 ** 40, "1G", "5G", 2 ** 64, "1T", -5, 0])
    else:
        doc["name"] = rng.choice(["../../outside/pwn", f"{outside}/pwn", "x" * 300])
    return doc


# ------------------------------------------------------------------------------ one run


class Run:
    """One mutated input, laid out in its own folder: ``in/`` (the user's folder: cwd),
    ``outside/`` (must not change), ``tmp/`` (TMPDIR: must be empty after the run),
    ``home/`` (HOME)."""

    def __init__(self, kind: str, i: int, root: Path) -> None:
        self.kind, self.i = kind, i
        self.dir = root / f"{kind}-{i:05d}"
        self.argv: list[str] = []
        self.call: str = "cli"
        self.env: dict[str, str] = {}
        self.expect = Path()  # store: the results.jsonl of the untouched store

    def layout(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        for sub in ("in", "outside", "tmp", "home"):
            (self.dir / sub).mkdir(parents=True)
        (self.dir / "outside" / "canary.json").write_text('{"canary": true}\n')

    def snapshot(self) -> dict:
        snap = {}
        for base in ("outside",):
            for p in (self.dir / base).rglob("*"):
                with contextlib.suppress(OSError):
                    st = p.lstat()
                    snap[str(p)] = (st.st_size, st.st_mtime_ns)
        # anything new next to the run's folders, or left in TMPDIR
        for p in self.dir.iterdir():
            if p.name not in ("in", "outside", "tmp", "home", "stdout", "stderr"):
                snap[str(p)] = "new"
        for p in (self.dir / "tmp").iterdir():
            # PyTorch's compile cache (torchinductor_USER) is PyTorch's, kept on purpose
            if not p.name.startswith("torchinductor_"):
                snap[str(p)] = "left in TMPDIR"
        return snap


def sweep_argv(study: str = "study.yaml") -> list[str]:
    """The sweep the study and store targets run: one worker, no report, into ``out``."""
    return ["sweep", study, "--out", "out", "-j", "1", "--no-report", "-q"]


def store_copy(seeds: dict, d: Path) -> list[Path]:
    """Lay out in ``d`` the seed study, its trace and its finished store, the store without its
    manifest so that the sweep writes its table again from what the store holds; return the
    store's records a mutation may replace (its cells and its digests memo)."""
    shutil.copy(seeds["trace"], d / "t.tkt")
    (d / "study.yaml").write_bytes(seeds["study"])
    shutil.copytree(seeds["store"], d / "out")
    (d / "out" / "manifest.json").unlink()
    return sorted((d / "out" / "cells").rglob("*.json")) + [d / "out" / "digests.json"]


def prepare(run: Run, seeds: dict, rng: random.Random) -> None:
    run.layout()
    d_in = run.dir / "in"
    outside = str(run.dir / "outside")
    structured = rng.random() < 0.6
    k = run.kind
    if k == "result":
        seed = rng.choice(seeds["results"])
        shutil.copy(seeds["trace"], d_in / "t.tkt")
        data = seed
        if structured:
            try:
                doc = json.loads(seed)
            except ValueError:
                doc = [json.loads(line) for line in seed.splitlines() if line.strip()]
            data = _dumps(mutate_json_doc(doc, rng, outside, _result_special), rng)
        else:
            data = mutate_bytes(seed, rng)
        (d_in / "result.json").write_bytes(data)
        run.argv = ["replay", "result.json", "-q"]
    elif k == "report":
        shutil.copytree(seeds["report"], d_in / "report")
        name = rng.choice(["results.jsonl", "results.jsonl", "results.parquet", "INCOMPLETE"])
        f = d_in / "report" / name
        if name == "INCOMPLETE":
            f.write_text("")
        elif structured and name == "results.jsonl":
            lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            f.write_bytes(b"\n".join(_dumps(mutate_json_doc(x, rng, outside), rng) for x in lines) + b"\n")
        else:
            f.write_bytes(mutate_bytes(f.read_bytes(), rng))
        run.call, run.argv = "load", ["report"]
    elif k == "profile":
        if structured:
            data = _dumps(mutate_json_doc(json.loads(seeds["profile"]), rng, outside), rng)
        else:
            data = mutate_bytes(seeds["profile"], rng)
        (d_in / "p.json").write_bytes(data)
        run.argv = ["guide", "p.json", "-o", "g.json", "--json", rng.choice(["--strategy=thermos", "--strategy=knapsack",
                                                                               "--strategy=hotset", "--per-phase"])]
    elif k == "study":
        shutil.copy(seeds["trace"], d_in / "t.tkt")
        if structured:
            import yaml

            data = _dumps(mutate_json_doc(yaml.safe_load(seeds["study"]), rng, outside, _study_special), rng)
        else:
            data = mutate_bytes(seeds["study"], rng)
        ext = rng.choice([".yaml", ".yaml", ".toml"])
        if ext == ".toml":
            data = mutate_bytes(b'name = "camp"\ntraces = ["t.tkt"]\nplatforms = ["dram-pmem"]\ncapacities = [0.2]\n'
                                b'timing = ["simple"]\npolicies = ["first-touch"]\n', rng)
        (d_in / f"study{ext}").write_bytes(data)
        run.argv = sweep_argv(f"study{ext}")
    elif k == "store":
        # the store was made in another folder: its digests memo names those paths
        target = rng.choice(store_copy(seeds, d_in))
        if structured and target.suffix == ".json":
            doc = json.loads(target.read_text())

            def rec_special(doc: Any, rng: random.Random, outside: str) -> Any:
                if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
                    key = rng.choice(["runtime_ns", "fast_hit_ratio", "migrations", "accesses", "warnings", "pages"])
                    doc["result"][key] = rng.choice([-1.0, "fast", None, float("nan"), 1e308, [], {}])
                elif isinstance(doc, dict):
                    doc["result"] = rng.choice([None, {}, [], 5, "x"])
                return doc

            data = _dumps(mutate_json_doc(doc, rng, outside, rec_special), rng)
        else:
            data = mutate_bytes(target.read_bytes(), rng)
        target.write_bytes(data)
        run.argv = sweep_argv()
        run.expect = seeds["store"] / "results.jsonl"
    elif k == "regions":
        (d_in / "regions").write_bytes(mutate_bytes(seeds["regions"], rng))
        run.call, run.argv = "regions", ["regions"]
    elif k == "predcache":
        shutil.copy(seeds["trace"], d_in / "t.tkt")
        cache = run.dir / "home" / "cache"
        shutil.copytree(seeds["predcache"], cache)
        run.env["TIERKIT_CACHE_DIR"] = str(cache)
        infos = sorted((cache / "predictions").glob("*.info.json"))
        info = infos[0]
        pred = Path(str(info).removesuffix(".info.json") + ".json")
        if rng.random() < 0.5:
            meta = json.loads(info.read_text())
            meta = mutate_json_doc(meta, rng, outside) if structured else meta
            data = _dumps(meta, rng) if structured else mutate_bytes(info.read_bytes(), rng)
            info.write_bytes(data)
        else:
            pred.write_bytes(mutate_bytes(pred.read_bytes(), rng))
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                meta = json.loads(info.read_text())
                meta["predictions_sha256"] = hashlib.sha256(pred.read_bytes()).hexdigest()
                info.write_text(json.dumps(meta))
        run.argv = list(KLEIO_ARGS)
    elif k == "argv":
        shutil.copy(seeds["trace"], d_in / "t.tkt")
        odd = os.fsdecode(rng.choice([b"\xff", b"\xed\xa0\x80", b"caf\xe9", b"\xc3", b"a\x80b"]))
        r = rng.random()
        if r < 0.25:
            shutil.copy(seeds["trace"], d_in / os.fsencode(odd + ".tkt").decode("utf-8", "surrogateescape"))
            run.argv = rng.choice([["trace", "info", odd + ".tkt"], ["simulate", odd + ".tkt", "-q"],
                                   ["trace", "convert", odd + ".tkt", odd + "-out.tkt"],
                                   ["compare", odd + ".tkt", "--policies", "first-touch", "-q"]])
        elif r < 0.5:
            run.argv = rng.choice([["simulate", "t.tkt", "-P", odd], ["simulate", "t.tkt", "-p", odd],
                                   ["simulate", "t.tkt", "-c", odd], ["trace", "synth", odd, "-o", "z.tkt", "--accesses", "10",
                                                                       "--pages", "10"],
                                   ["simulate", "t.tkt", "--cache", odd], ["policies", odd], ["trace", "info", odd],
                                   ["simulate", "t.tkt", "--json", "--timeseries", odd + ".csv", "-P", "history"],
                                   ["trace", "convert", "t.tkt", odd + "/x.tkt"], ["sweep", odd, "--out", odd],
                                   ["replay", odd], ["guide", odd], [odd]])
        else:
            # (a huge --accesses is a long job the user asked for, not a defect: pages are what
            # used to be allocated before they were checked)
            n = rng.choice(["4294967296", "4294967297", "1G", "5G", "1T", "18446744073709551615", "2^32", "100000000000"])
            run.argv = ["trace", "synth", rng.choice(["zipf", "uniform", "stream", "phases"]), "-o", "z.tkt", "--pages", n,
                        "--accesses", "1000", "-q"]


def child(run: Run, limit_bytes: int) -> None:
    """In the forked child: limits, folders, then the command; never returns."""
    rc = 99
    try:
        # a fresh process: none of the parent's exit handlers or temporary folders
        import atexit

        atexit._clear()
        for mod, attr in (("tierkit.learned", "_tmp_dir"), ("tierkit.api", "_guidance_dir")):
            if mod in sys.modules and hasattr(sys.modules[mod], attr):
                setattr(sys.modules[mod], attr, None)
        os.setpgid(0, 0)
        # the limit counts from what the parent had mapped (PyTorch alone reserves gigabytes
        # of address space): the run itself may map limit_bytes more
        limit = _vm_bytes() + limit_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.chdir(run.dir / "in")
        os.environ["HOME"] = str(run.dir / "home")
        os.environ["TMPDIR"] = str(run.dir / "tmp")
        os.environ["COLUMNS"] = "120"
        os.environ.update(run.env)
        import tempfile

        tempfile.tempdir = None
        out = os.open(run.dir / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(run.dir / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(err, 2)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        try:
            rc = _call(run)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException:  # what Python does at the top level: the traceback, status 1
            import traceback

            traceback.print_exc()
            rc = 1
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()  # as the interpreter does on its way out (temporary folders)
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc if isinstance(rc, int) and 0 <= rc < 256 else 1)


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _call(run: Run) -> int:
    if run.call == "cli":
        from tierkit.cli import main

        return main(list(run.argv))
    from tierkit import _core
    from tierkit.cli import error_line

    try:
        if run.call == "load":
            import tierkit

            tierkit.load(run.argv[0])
        elif run.call == "regions":
            from tierkit import validate

            raw = Path(run.argv[0]).read_bytes()
            reader = getattr(validate, "read_regions", None)
            if reader is not None:
                reader(run.argv[0])
            else:
                validate.parse_regions(raw.decode())
    except _core.TierkitError as e:
        print(error_line("tierkit: error: ", e), file=sys.stderr)
        return 2
    return 0


def classify(run: Run, status: Any, before: dict, seconds: float) -> tuple[str, str]:
    """(outcome, detail) of a finished run; ``status`` is waitpid's status, or "hang"."""
    after = run.snapshot()
    err = (run.dir / "stderr").read_bytes().decode("utf-8", "replace") if (run.dir / "stderr").exists() else ""
    changed = [p for p in set(before) | set(after) if before.get(p) != after.get(p)]
    if changed:
        return "overwrite", "; ".join(sorted(changed))[:300]
    if status == "hang":
        return "hang", f"{seconds:.0f} s"
    low = err.lower()
    if "memoryerror" in low or "memory allocation of" in low or "cannot allocate memory" in low or "out of memory" in low:
        return "oom", _last(err)
    if os.WIFSIGNALED(status):
        return "crash", f"signal {os.WTERMSIG(status)}: {_last(err)}"
    if "panicked at" in err:
        return "crash", _last(err)
    if "Traceback (most recent call last)" in err:
        return "traceback", _last(err)
    rc = os.WEXITSTATUS(status)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("tierkit: ")]
    if rc == 3:
        return "internal", _last(err)
    if rc == 2 and len(errs) == 1 and errs[0].startswith("tierkit: error: ") and len(errs[0]) <= 480 \
            and not any(ln.startswith("  ") for ln in lines):
        return "clean", errs[0]
    if rc == 0 or (rc == 1 and run.argv[:1] == ["replay"] and not errs):
        if errs:
            return "unclean", errs[0]
        if run.kind == "store":
            bad = _store_differs(run.dir / "in" / "out" / "results.jsonl", run.expect)
            if bad:
                return "wrong", bad
        return "accepted", ""
    return "unclean", f"exit {rc}: {_last(err)}"


def _results_by_key(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out[rec["key"]] = rec.get("result")
    return out


def _bad_shape(r: Any) -> str:
    """Why a stored simulation result is not one a run could give ("" if it could be)."""
    import math

    if not isinstance(r, dict):
        return f"the result is {type(r).__name__}"
    for k in ("accesses", "reads", "writes", "pages", "migrations", "migrated_bytes", "periods"):
        v = r.get(k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{k} is {v!r}"
    for k in ("runtime_ns", "migration_time_ns", "energy_j"):
        v = r.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            return f"{k} is {v!r}"
    h = r.get("fast_hit_ratio")
    if h is not None and (not isinstance(h, (int, float)) or not 0 <= h <= 1):
        return f"fast_hit_ratio is {h!r}"
    w = r.get("warnings", [])
    if not isinstance(w, list) or not all(isinstance(x, str) for x in w):
        return "warnings is not a list of strings"
    return ""


def _store_differs(path: Path, expect: Path) -> str:
    """A result in a sweep's results.jsonl that no run could give ("wrong"): one the untouched
    store does not hold and whose shape is impossible (null, {}, a negative, non-finite or
    non-numeric figure). A result of the right shape with other figures (edited by hand) is
    counted accepted: only running the cell again could tell."""
    try:
        got, want = _results_by_key(path), _results_by_key(expect)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"results.jsonl unreadable: {e}"
    for k, r in want.items():
        g = got.get(k)
        if json.dumps(g, sort_keys=True) != json.dumps(r, sort_keys=True) and _bad_shape(g):
            return f"cell {k[:12]}: {_bad_shape(g)}"
    return ""


def _last(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# ------------------------------------------------------------------------------ the campaign


def campaign(out: Path, runs: int, kinds: list[str], seed: int, workers: int, timeout: float, limit_gib: float,
             keep: bool) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    seeds = make_seeds(out / "seeds")
    if "predcache" in kinds and not make_predcache(seeds, seeds["predcache"]):
        print("campaign: no PyTorch: the predcache kind is left out", file=sys.stderr)
        kinds = [k for k in kinds if k != "predcache"]
    # tierkit and what the commands import, loaded once before forking
    import tierkit.cli  # noqa: F401
    import tierkit.studies  # noqa: F401
    import tierkit.guidance  # noqa: F401
    import importlib

    for m in ("tierkit.replaying", "tierkit.replay"):  # (the module's name before and after)
        with contextlib.suppress(ImportError):
            importlib.import_module(m)
    import pandas  # noqa: F401
    import yaml  # noqa: F401

    runs_dir = out / "runs"
    shutil.rmtree(runs_dir, ignore_errors=True)
    runs_dir.mkdir()
    per_kind = {k: runs // len(kinds) + (1 if i < runs % len(kinds) else 0) for i, k in enumerate(kinds)}
    todo = [(k, i) for k in kinds for i in range(per_kind[k])]
    log = open(out / "runs.jsonl", "w")
    table = {k: dict.fromkeys(OUTCOMES, 0) for k in kinds}
    active: dict[int, tuple[Run, float, dict]] = {}
    limit = int(limit_gib * (1 << 30))
    done = 0
    t_start = time.monotonic()
    while todo or active:
        while todo and len(active) < workers:
            k, i = todo.pop(0)
            rng = random.Random(f"{seed}-{k}-{i}")
            run = Run(k, i, runs_dir)
            prepare(run, seeds, rng)
            before = run.snapshot()
            pid = os.fork()
            if pid == 0:
                child(run, limit)
            active[pid] = (run, time.monotonic(), before)
        time.sleep(0.002)
        for pid in list(active):
            run, t0, before = active[pid]
            got, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - t0
            if got == 0 and elapsed < timeout:
                continue
            if got == 0:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = "hang"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # what it started (sweep workers)
            del active[pid]
            outcome, detail = classify(run, status, before, elapsed)
            table[run.kind][outcome] += 1
            log.write(json.dumps({"kind": run.kind, "i": run.i, "outcome": outcome, "detail": detail,
                                  "argv": run.argv, "seconds": round(elapsed, 3)}, ensure_ascii=True) + "\n")
            log.flush()
            if not keep and outcome in ("clean", "accepted"):
                shutil.rmtree(run.dir, ignore_errors=True)
            done += 1
            if done % 100 == 0:
                print(f"campaign: {done}/{runs} runs, {time.monotonic() - t_start:.0f} s", file=sys.stderr)
    log.close()
    summary = {"runs": done, "seconds": round(time.monotonic() - t_start, 1), "seed": seed, "table": table}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def markdown(summary: dict) -> str:
    rows = ["| kind | runs | " + " | ".join(OUTCOMES) + " |", "|---|---:|" + "---:|" * len(OUTCOMES)]
    total = dict.fromkeys(OUTCOMES, 0)
    for k, t in summary["table"].items():
        rows.append(f"| {k} | {sum(t.values())} | " + " | ".join(str(t[o]) for o in OUTCOMES) + " |")
        for o in OUTCOMES:
            total[o] += t[o]
    rows.append(f"| **all** | {sum(total.values())} | " + " | ".join(str(total[o]) for o in OUTCOMES) + " |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--limit-gib", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=ROOT / "target" / "py-campaign")
    ap.add_argument("--keep", action="store_true", help="keep every run's folder (default: only the failures')")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"unknown kind {bad[0]!r} (kinds: {', '.join(KINDS)})")
    s = campaign(a.out, a.runs, kinds, a.seed, a.workers, a.timeout, a.limit_gib, a.keep)
    print(markdown(s))
    print(f"\n{s['runs']} runs in {s['seconds']} s; every run in {a.out / 'runs.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
