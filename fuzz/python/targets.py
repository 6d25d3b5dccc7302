"""Fuzz targets for the readers of tierkit's Python side (docs/fuzzing.md, "Python readers").

Each target takes bytes, puts them where a user would have the file, runs the command or API
function that reads it in this process, and checks the contract the Rust targets check:

- the CLI exits 0 (``replay`` may exit 1: figures differ), or 2 with exactly one line on
  stderr, ``tierkit: error: ...``, of at most 480 characters; never a traceback, never the
  internal-error line (status 3);
- an API reader returns, or raises :class:`tierkit.TierkitError` with a one-line message;
- nothing is written outside the target's scratch folder.

``run.py`` runs them under atheris (coverage-guided, ``make fuzz``); ``tests/test_py_fuzz.py``
runs each on its seeds and a fixed set of mutations in ``make test``.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from campaign import make_seeds  # noqa: E402

MAX_LINE = 480


class ContractError(AssertionError):
    """A reader broke the contract: the input that did it is a bug to fix."""


class Scratch:
    """A folder per process for the targets' files; ``outside/`` beside it must not change."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tierkit-pyfuzz-"))
        self.seeds = make_seeds(self.root / "seeds")
        self.outside = self.root / "outside"
        self.outside.mkdir()
        (self.outside / "canary.json").write_text("{}")

    def fresh(self) -> Path:
        d = self.root / "in"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        return d

    def check_outside(self, what: str) -> None:
        names = sorted(p.name for p in self.outside.iterdir())
        if names != ["canary.json"] or (self.outside / "canary.json").read_text() != "{}":
            raise ContractError(f"{what}: wrote outside its folder: {names}")


_scratch: Scratch | None = None


def scratch() -> Scratch:
    global _scratch
    if _scratch is None:
        _scratch = Scratch()
    return _scratch


def cli(argv: list[str], cwd: Path, may_differ: bool = False) -> None:
    """``tierkit ARGV`` in this process, from ``cwd``; raises ContractError on a broken contract."""
    from tierkit.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    finally:
        os.chdir(old)
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("tierkit: ")]
    if "Traceback" in text or rc == 3 or any(ln.startswith("tierkit: internal error") for ln in errs):
        raise ContractError(f"{argv}: status {rc}: {text[-2000:]}")
    if rc == 0 or (rc == 1 and may_differ and not errs):
        return
    if rc != 2 or len(errs) != 1 or not errs[0].startswith("tierkit: error: ") or len(errs[0]) > MAX_LINE:
        raise ContractError(f"{argv}: status {rc}, not one error line of at most {MAX_LINE} characters: {text[-2000:]}")


def api(call: Callable[[], object], what: str) -> None:
    from tierkit import TierkitError

    try:
        call()
    except TierkitError as e:
        if "\n" in str(e) or not str(e):
            raise ContractError(f"{what}: an error of more than one line: {str(e)[:500]!r}") from None


# ------------------------------------------------------------------------------ the targets


def t_result(data: bytes) -> None:
    s = scratch()
    d = s.fresh()
    shutil.copy(s.seeds["trace"], d / "t.tkt")
    (d / "result.json").write_bytes(data)
    cli(["replay", "result.json", "-q"], d, may_differ=True)
    s.check_outside("replay")


def t_report(data: bytes) -> None:
    s = scratch()
    d = s.fresh()
    shutil.copytree(s.seeds["report"], d / "report")
    (d / "report" / "results.jsonl").write_bytes(data)
    import tierkit

    api(lambda: tierkit.load(d / "report"), "tierkit.load")


def t_profile(data: bytes) -> None:
    s = scratch()
    d = s.fresh()
    (d / "p.json").write_bytes(data)
    cli(["guide", "p.json", "-o", "g.json", "--json"], d)
    cli(["guide", "p.json", "-o", "g2.json", "--per-phase", "--strategy", "knapsack"], d)
    s.check_outside("guide")


def t_guidance(data: bytes) -> None:
    s = scratch()
    d = s.fresh()
    (d / "g.json").write_bytes(data)
    from tierkit import guidance

    api(lambda: guidance.read_guidance(d / "g.json"), "read_guidance")


def t_study(data: bytes) -> None:
    s = scratch()
    d = s.fresh()
    shutil.copy(s.seeds["trace"], d / "t.tkt")
    (d / "study.yaml").write_bytes(data)
    from campaign import sweep_argv

    cli(sweep_argv(), d)
    s.check_outside("sweep")


def t_store(data: bytes) -> None:
    """``data`` replaces one cell record of a finished store (its first byte picks which)."""
    from campaign import _store_differs, store_copy, sweep_argv

    s = scratch()
    d = s.fresh()
    recs = store_copy(s.seeds, d)
    pick = recs[data[0] % len(recs)] if data else recs[0]
    pick.write_bytes(data[1:])
    cli(sweep_argv(), d)
    # whatever the store held, the table holds results a run could give

    bad = _store_differs(d / "out" / "results.jsonl", s.seeds["store"] / "results.jsonl")
    if bad:
        raise ContractError(f"sweep took a damaged record for a result: {bad}")
    s.check_outside("sweep")


def t_regions(data: bytes) -> None:
    s = scratch()
    d = s.fresh()
    (d / "regions").write_bytes(data)
    from tierkit import validate

    api(lambda: validate.read_regions(d / "regions"), "read_regions")


def t_predcache(data: bytes) -> None:
    """``data`` is a predictions cache record (``KEY.info.json``) beside a predictions file."""
    s = scratch()
    d = s.fresh()
    cache = d / "cache" / "predictions"
    cache.mkdir(parents=True)
    (cache / ("k" * 32 + ".json")).write_text('{"format": "tierkit-predictions"}')
    (cache / ("k" * 32 + ".info.json")).write_bytes(data)
    from tierkit import learned

    old = os.environ.get("TIERKIT_CACHE_DIR")
    os.environ["TIERKIT_CACHE_DIR"] = str(d / "cache")
    try:
        made = learned._cached("k" * 32)
    finally:
        if old is None:
            os.environ.pop("TIERKIT_CACHE_DIR", None)
        else:
            os.environ["TIERKIT_CACHE_DIR"] = old
    if made is not None:
        json.dumps(made.info)  # what a result then carries must be writable


TARGETS: dict[str, Callable[[bytes], None]] = {
    "result": t_result, "report": t_report, "profile": t_profile, "guidance": t_guidance, "study": t_study,
    "store": t_store, "regions": t_regions, "predcache": t_predcache,
}


def seed_inputs(name: str) -> list[bytes]:
    """Valid inputs of each target, for its corpus."""
    s = scratch()
    sd = s.seeds
    if name == "result":
        return list(sd["results"])
    if name == "report":
        return [(sd["report"] / "results.jsonl").read_bytes()]
    if name == "profile":
        return [sd["profile"]]
    if name == "guidance":
        from tierkit import guidance

        g = guidance.make_guidance(json.loads(sd["profile"]), "thermos", 0.25)
        return [guidance.dumps(g).encode()]
    if name == "study":
        return [sd["study"]]
    if name == "store":
        recs = sorted((sd["store"] / "cells").rglob("*.json"))
        return [bytes([i]) + p.read_bytes() for i, p in enumerate(recs)]
    if name == "regions":
        return [sd["regions"]]
    if name == "predcache":
        info = {"predictions_sha256": "0" * 64, "policy": "kleio", "trace": "t.tkt", "digest": "0" * 64,
                "class_weight": "none", "scores": {}, "training": {}, "fallback": True, "out_of_sample": True}
        return [json.dumps(info).encode()]
    raise KeyError(name)
