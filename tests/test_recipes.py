"""The suite of real programs (data/recipes/record_traces.py, `make traces`): every program has
a train and a ref input that differ, the inputs are the same bytes each time they are made,
`--only` takes program and trace names and refuses others, and one small recording, where the
program and the tracer are there, gives a trace and its entry in suite.json."""
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "data" / "recipes" / "record_traces.py"


def _load():
    spec = importlib.util.spec_from_file_location("record_traces", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


rt = _load()
SUITE = rt.suite()


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_every_program_has_a_train_and_a_ref_input():
    programs = dict.fromkeys(t.program for t in SUITE)
    assert len(programs) >= 8
    for p in programs:
        assert [t.input for t in SUITE if t.program == p] == ["train", "ref"], p
    names = [t.name for t in SUITE]
    assert len(set(names)) == len(names)
    # the single-input suite's names are program names still (--only sqlite3 records both)
    assert set(rt.OLD_NAMES) <= set(programs)


def test_each_trace_names_its_programs_and_package():
    for t in SUITE:
        assert t.package and t.what, t.name
        assert t.argv[0].startswith("/usr/bin/"), t.name  # Debian's programs, not those on PATH
        assert t.argv[0] in {p for p, _ in t.needs}, t.name
        assert all(pkg for _, pkg in t.needs), t.name


@pytest.mark.parametrize("program", list(dict.fromkeys(t.program for t in SUITE)))
def test_train_and_ref_differ_and_their_inputs_are_deterministic(program, tmp_path):
    train, ref = [t for t in SUITE if t.program == program]
    made = {}
    for t in (train, ref):
        a, b = tmp_path / f"{t.name}-a", tmp_path / f"{t.name}-b"
        a.mkdir()
        b.mkdir()
        t.make(a)
        t.make(b)
        assert files(a) == files(b), f"{t.name}: its input is not the same bytes twice"
        made[t.input] = files(a)
    # other data or other arguments; where the input is data, the ref's is the larger
    assert made["train"] != made["ref"] or train.argv != ref.argv, program
    if made["train"] != made["ref"]:
        size = {k: sum(map(len, v.values())) for k, v in made.items()}
        assert size["ref"] > size["train"], (program, size)
    if train.load or ref.load:
        assert train.load != ref.load, program


def test_the_sqlite3_ref_input_is_the_demo_traces_script(tmp_path):
    ref = next(t for t in SUITE if t.name == "sqlite3-ref")
    ref.make(tmp_path)
    assert (tmp_path / "sqlite3-orders.sql").read_bytes() == (ROOT / "data" / "recipes" / "sqlite3-orders.sql").read_bytes()


def test_only_selects_programs_and_traces():
    assert [t.name for t in rt.select(SUITE, "xz")] == ["xz-train", "xz-ref"]
    assert [t.name for t in rt.select(SUITE, "perl-ref, jq")] == ["perl-ref", "jq-train", "jq-ref"]
    assert rt.select(SUITE, "") == SUITE
    with pytest.raises(ValueError, match="nosuch"):
        rt.select(SUITE, "xz,nosuch")


def test_only_rejects_unknown_names_with_exit_2(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), "--only", "xz-test", "--out", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2
    assert "xz-test" in p.stderr and p.stderr.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_a_missing_program_is_skipped_with_its_package(capsys):
    t = next(t for t in SUITE if t.program == "redis")
    gone = dataclasses.replace(t, needs=(("/usr/bin/tierkit-no-such-program", "no-such-package"),))
    assert not rt.ensure(gone, install=False)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-package" in err and "redis" in err


def _tracer_built() -> bool:
    from tierkit import api

    return any(api.tracer_dir().glob("tierkit-*-*"))  # the tool (tracer/README.md)


# the cheapest recording: bzip2 on its train input takes a few seconds under Valgrind
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
@pytest.mark.skipif(not os.path.exists("/usr/bin/bzip2"), reason="bzip2 is not installed (Debian package bzip2)")
def test_recording_the_bzip2_train_input(tmp_path):
    if not _tracer_built():
        pytest.skip("the tracer is not built (make tracer)")
    p = subprocess.run([sys.executable, str(SCRIPT), "--only", "bzip2-train", "--out", str(tmp_path)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "python")}, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "bzip2-train.tkt").is_file()
    suite = json.loads((tmp_path / "suite.json").read_text())
    (e,) = suite["traces"]
    assert e["trace"] == "bzip2-train" and e["program"] == "bzip2" and e["package"] == "bzip2" and e["status"] == "ok"
    assert e["accesses"] > 10_000 and e["pages"] > 100 and e["instructions"] > 10 ** 8
    assert "bzip2-train" in p.stdout  # the table
    # a second run keeps the trace and its entry
    p2 = subprocess.run([sys.executable, str(SCRIPT), "--only", "bzip2-train", "--out", str(tmp_path)], capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": str(ROOT / "python")}, timeout=300)
    assert p2.returncode == 0, p2.stderr
    assert "exists (kept" in p2.stderr
