"""Files users are sent are untrusted (docs/security.md): results, reports, profiles, study
files, sweep stores, regions files and the predictions cache. Names that become file names are
plain names; what a result embeds inflates under a cap; sizes are checked before they are
allocated; a damaged store record is run again; a sweep writes only into its own store; its
workers end with it; anything unexpected is one line, exit status 3, and a log."""
import base64
import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

import tierkit
from tierkit import studies as sw
from tierkit import untrusted
from tierkit.cli import main


def run(argv, cwd=None):
    """``tierkit ARGV`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in argv])
    finally:
        os.chdir(old)
    return rc, out.getvalue(), err.getvalue()


def one_error(rc, err, *words):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: ") and len(lines[0]) <= 480, (rc, err)
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("untrusted") / "t.tkt"
    tierkit.synth("zipf", p, accesses=3000, pages=300, seed=1, write_ratio=0.3, progress=False)
    return p


@pytest.fixture
def guided_result(trace, tmp_path):
    """A result that carries an input file, as a guided or kleio run's does."""
    r = tierkit.run(trace, policy="first-touch", fast_capacity=0.2, progress=False)
    g = b'{"not": "used"}'
    r["config"]["policy"] = r["config"]["run"]["policy"] = "guided:guidance=g.json"
    r["config"]["inputs"] = {"guidance": {"path": "g.json", "sha256": hashlib.sha256(g).hexdigest(),
                                          "zlib_base64": base64.b64encode(zlib.compress(g)).decode()}}
    return r


def files_under(d):
    return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*"))


# ------------------------------------------------------------------------------ 1. confined names


@pytest.mark.parametrize("key", ["../../outside/pwn", "/tmp/pwn", "../pwn", ".hidden", "a/b", "guidance/../x", "x y"])
def test_replay_refuses_input_keys_that_are_not_plain_names(guided_result, tmp_path, key):
    (tmp_path / "in").mkdir()
    (tmp_path / "outside").mkdir()
    guided_result["config"]["inputs"] = {key: guided_result["config"]["inputs"]["guidance"]}
    (tmp_path / "in" / "r.json").write_text(json.dumps(guided_result))
    before = files_under(tmp_path)
    rc, _, err = run(["replay", "r.json", "-q"], cwd=tmp_path / "in")
    one_error(rc, err, "config.inputs")
    assert files_under(tmp_path) == before


def test_replay_refuses_an_input_the_policy_does_not_read(guided_result, tmp_path):
    guided_result["config"]["inputs"]["predictions"] = guided_result["config"]["inputs"]["guidance"]
    (tmp_path / "r.json").write_text(json.dumps(guided_result))
    rc, _, err = run(["replay", tmp_path / "r.json", "-q"])
    one_error(rc, err, "config.inputs.predictions", "reads no such file")


def test_replay_inflates_an_embedded_file_under_a_cap(guided_result, tmp_path, monkeypatch):
    monkeypatch.setattr(untrusted, "MAX_EMBEDDED_BYTES", 1 << 20)
    bomb = b"\0" * (3 << 20)  # 3 MiB of zeros: 3 KB compressed
    guided_result["config"]["inputs"]["guidance"] = {
        "path": "g.json", "sha256": hashlib.sha256(bomb).hexdigest(),
        "zlib_base64": base64.b64encode(zlib.compress(bomb, 9)).decode()}
    (tmp_path / "r.json").write_text(json.dumps(guided_result))
    rc, _, err = run(["replay", tmp_path / "r.json", "-q"])
    one_error(rc, err, "config.inputs.guidance.zlib_base64", "inflates past 1,048,576 bytes")


@pytest.mark.parametrize("payload,words", [
    ("!!!", "not base64"), (base64.b64encode(b"not zlib").decode(), "not zlib data"),
    (base64.b64encode(zlib.compress(b"x" * 100)[:-6]).decode(), "cut short"), (7, "not base64 text")])
def test_replay_refuses_broken_payloads(guided_result, tmp_path, payload, words):
    guided_result["config"]["inputs"]["guidance"]["zlib_base64"] = payload
    (tmp_path / "r.json").write_text(json.dumps(guided_result))
    one_error(*run(["replay", tmp_path / "r.json", "-q"])[::2], words)


@pytest.mark.parametrize("content,words", [
    (b"", ["empty"]), (b"   \n", ["empty"]), (b"\xff\xfe{}", ["byte 0", "not UTF-8"]),
    (b"[" * 5000 + b"]" * 5000, ["nested deeper"]), (b'{"config": {"policy": "first-touch"}, "x": NaN}', ["not JSON"]),
    (b"[1, 2]", ["result 0", "no 'config'"])])
def test_replay_of_a_file_that_is_not_a_result_is_one_line(tmp_path, content, words):
    (tmp_path / "r.json").write_bytes(content)
    one_error(*run(["replay", tmp_path / "r.json", "-q"])[::2], *words)


@pytest.mark.parametrize("result", [{}, {"config": 5}, {"config": []}])
def test_replay_through_the_api_checks_the_result_before_reading_it(result):
    # tierkit.replay on a dict a notebook got from anywhere: the checked error, never a KeyError
    with pytest.raises(tierkit.TierkitError, match="config"):
        tierkit.replay(result)


@pytest.mark.parametrize("field,value,words", [
    ("repeat", -1, "config.run.repeat"), ("repeat", "4", "config.run.repeat"), ("time_scale", 0, "config.run.time_scale"),
    ("cores", 1e9, "config.run.cores"), ("trace", 5, "config.run.trace"), ("timing", None, "config.run.timing"),
    ("platform", [], "config.run.platform"), ("capacity", {"0": 5}, "config.run.capacity"),
    ("trace", {"os_bytes_hex": "zz"}, "config.run.trace"), ("mix", "a.tkt", "config.run.mix")])
def test_replay_checks_the_configuration_it_runs(trace, tmp_path, field, value, words):
    r = tierkit.run(trace, policy="first-touch", fast_capacity=0.2, progress=False)
    r["config"]["run"][field] = value
    (tmp_path / "r.json").write_text(json.dumps(r))
    one_error(*run(["replay", tmp_path / "r.json", "-q"])[::2], words)


def test_replay_reads_only_regular_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    one_error(*run(["replay", tmp_path / "fifo"])[::2], "not a regular file")
    one_error(*run(["replay", tmp_path])[::2], "a directory")


@pytest.mark.parametrize("name", ["../../outside/X", "/abs/X", ".hidden", "a/b", "x\ny"])
def test_a_study_names_its_traces_with_plain_names(trace, tmp_path, name):
    (tmp_path / "in").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "in" / "s.yaml").write_text(json.dumps({
        "traces": [{"synth": "zipf", "accesses": 1000, "pages": 100, "name": name}], "policies": ["first-touch"]}))
    before = files_under(tmp_path)
    rc, _, err = run(["sweep", "s.yaml", "--out", "out", "-j", "1", "-q"], cwd=tmp_path / "in")
    one_error(rc, err, "name", "not a plain name")
    assert files_under(tmp_path) == before
    (tmp_path / "in" / "s.yaml").write_text(json.dumps({"name": name, "traces": [str(trace)], "policies": ["first-touch"]}))
    one_error(*run(["sweep", "s.yaml", "--out", "out", "-j", "1", "-q"], cwd=tmp_path / "in")[::2], "not a plain name")


def test_a_workload_label_becomes_a_plain_file_name(tmp_path):
    t = sw.TraceSpec("synth", "a/../b c", synth={"kind": "zipf", "accesses": "100", "pages": "10", "seed": 1})
    f = Path(sw.materialize(t, tmp_path))
    assert f.parent == tmp_path / "traces" and f.name.startswith("a_.._b_c-")


# ------------------------------------------------------------------------------ 2. one line, always


def test_an_unexpected_exception_is_one_line_with_a_log(monkeypatch, tmp_path):
    monkeypatch.delenv("TIERKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from tierkit import api

    def boom(*a, **k):
        raise KeyError("a bug")

    monkeypatch.setattr(api, "trace_info", boom)
    rc, _, err = run(["trace", "info", "x.tkt"])
    lines = err.strip().splitlines()
    assert rc == 3 and len(lines) == 1 and len(lines[0]) <= 480, err
    assert lines[0].startswith("tierkit: internal error") and "KeyError" in lines[0] and "Traceback" not in err
    log = Path(lines[0].rsplit("[", 1)[1].rstrip("]"))
    assert log.parent == tmp_path / "tierkit" / "crash" and "Traceback" in log.read_text() and "boom" in log.read_text()
    # tierkit's own cache folder, when set, as for trained predictions
    monkeypatch.setenv("TIERKIT_CACHE_DIR", str(tmp_path / "tk"))
    rc, _, err = run(["trace", "info", "x.tkt"])
    assert rc == 3 and Path(err.strip().rsplit("[", 1)[1].rstrip("]")).parent == tmp_path / "tk" / "crash", err


def test_non_utf8_file_names_work_and_non_utf8_text_is_one_line(trace, tmp_path):
    odd = os.fsdecode(b"caf\xe9.tkt")
    (tmp_path / odd).write_bytes(trace.read_bytes())
    rc, out, err = run(["trace", "info", odd, "--json"], cwd=tmp_path)
    assert rc == 0 and json.loads(out)["accesses"] == 3000, err
    rc, out, err = run(["trace", "convert", odd, os.fsdecode(b"o\xff.tkt"), "-q"], cwd=tmp_path)
    assert rc == 0 and (tmp_path / os.fsdecode(b"o\xff.tkt")).is_file(), err
    one_error(*run(["simulate", odd, "-P", os.fsdecode(b"hist\xffory")], cwd=tmp_path)[::2], "'hist\\xffory'", "not UTF-8")
    # as a real command line gives them
    p = subprocess.run([sys.executable, "-m", "tierkit.cli", "simulate", b"caf\xe9.tkt", "-q"], cwd=tmp_path,
                       capture_output=True)
    assert p.returncode == 0 and b"caf\xe9.tkt" in p.stdout, p.stderr


# ------------------------------------------------------------------------------ 4. sizes before allocations


@pytest.mark.parametrize("pages", ["4294967296", "4294967297", "1G", "1T", "18446744073709551615"])
def test_synth_checks_pages_before_allocating(tmp_path, pages):
    rc, _, err = run(["trace", "synth", "zipf", "-o", tmp_path / "z.tkt", "--pages", pages, "--accesses", "10", "-q"])
    one_error(rc, err, "--pages")
    assert not (tmp_path / "z.tkt").exists()


def test_a_study_reaches_the_same_check(tmp_path):
    (tmp_path / "s.yaml").write_text(json.dumps({
        "traces": [{"synth": "zipf", "accesses": 10, "pages": 2 ** 32, "name": "z"}], "policies": ["first-touch"]}))
    one_error(*run(["sweep", tmp_path / "s.yaml", "--out", tmp_path / "o", "-j", "1", "-q"])[::2], "--pages")


def test_files_past_their_size_limit_are_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(untrusted, "MAX_STUDY_BYTES", 1000)
    (tmp_path / "s.yaml").write_text("#" * 1001)
    one_error(*run(["sweep", tmp_path / "s.yaml", "--out", tmp_path / "o"])[::2], "1,001 bytes", "larger than")
    monkeypatch.setattr(untrusted, "MAX_PROFILE_BYTES", 1000)
    (tmp_path / "p.json").write_text(" " * 1001)
    one_error(*run(["guide", tmp_path / "p.json"])[::2], "larger than")


# ------------------------------------------------------------------------------ 5. stores and outputs


STUDY = "traces:\n  - file: t.tkt\npolicies: [first-touch, history]\ncapacities: [0.2]\n"


@pytest.fixture
def store(trace, tmp_path):
    (tmp_path / "t.tkt").write_bytes(trace.read_bytes())
    (tmp_path / "s.yaml").write_text(STUDY)
    df = sw.sweep(tmp_path / "s.yaml", tmp_path / "out", workers=1, progress=False, report=False)
    return tmp_path, df


@pytest.mark.parametrize("damage", [
    lambda r: r.update(result=None), lambda r: r.update(result={}), lambda r: r["result"].update(runtime_ns=-1.0),
    lambda r: r["result"].update(runtime_ns="fast"), lambda r: r["result"].update(accesses=2.5),
    lambda r: r["result"].update(fast_hit_ratio=1.5), lambda r: r["result"].update(warnings="x"),
    lambda r: r["config"].update(policy="oracle"), lambda r: r.update(key="0" * 64),
    lambda r: r["result"]["stats"].update(some_ns=-5), lambda r: r.pop("result")])
def test_a_damaged_store_record_is_run_again(store, damage):
    d, df = store
    cells = {c.key: c for c in sw.cells(sw.load_study(d / "s.yaml"), d / "out")}
    key = df[df["policy"] == "history"]["key"].item()
    p = sw.Store(d / "out").path(key)
    rec = json.loads(p.read_text())
    want = json.loads(json.dumps(rec["result"]))
    damage(rec)
    p.write_text(json.dumps(rec))
    assert not sw.Store(d / "out").done(cells[key])
    again = sw.sweep(d / "s.yaml", d / "out", workers=1, progress=False, report=False)
    assert again.attrs["ran"] == 1
    assert json.loads(p.read_text())["result"] == want
    assert again.equals(df)


def test_sweep_out_refuses_a_folder_that_is_not_its_store(store, tmp_path):
    d, _ = store
    other = tmp_path / "mine"
    other.mkdir()
    (other / "index.html").write_text("my page")
    (other / "results.jsonl").write_text("mine")
    rc, _, err = run(["sweep", d / "s.yaml", "--out", other, "-j", "1", "-q"])
    one_error(rc, err, "not a sweep's store", "--force")
    assert (other / "index.html").read_text() == "my page" and sorted(os.listdir(other)) == ["index.html", "results.jsonl"]
    rc, _, err = run(["sweep", d / "s.yaml", "--out", other, "-j", "1", "-q", "--force"])
    assert rc == 0, err
    assert (other / sw.STORE_MARK).is_file()
    # its own store, again: fine; a new or empty folder: fine
    assert run(["sweep", d / "s.yaml", "--out", d / "out", "-j", "1", "-q"])[0] == 0
    (tmp_path / "empty").mkdir()
    assert run(["sweep", d / "s.yaml", "--out", tmp_path / "empty", "-j", "1", "-q"])[0] == 0
    (tmp_path / "file").write_text("x")
    one_error(*run(["sweep", d / "s.yaml", "--out", tmp_path / "file"])[::2], "not a folder")


def test_a_damaged_digests_memo_is_dropped(store):
    d, df = store
    for bad in ("[1]", '{"x": 5}', "\xff", "{" * 3000):
        (d / "out" / "digests.json").write_text(bad)
        again = sw.sweep(d / "s.yaml", d / "out", workers=1, progress=False, report=False)
        assert again.attrs["ran"] == 0 and again.equals(df)


def _children(pid):
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(x) for x in (task / "children").read_text().split()]
    return out


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_sweep_workers_end_when_the_sweep_is_killed(tmp_path):
    # cells long enough to be running when the sweep is killed
    (tmp_path / "s.yaml").write_text(
        "traces:\n  - {synth: zipf, accesses: 20M, pages: 200K, name: big}\n"
        "policies: [first-touch, history, oracle, otf]\ntiming: [detailed]\n")
    p = subprocess.Popen([sys.executable, "-m", "tierkit.cli", "sweep", "s.yaml", "--out", "o", "-j", "2", "-q",
                          "--no-report"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        workers = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.2)
            workers = [c for c in _children(p.pid) if Path(f"/proc/{c}").exists()]
        assert len(workers) >= 2, "the sweep started no workers"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "workers outlived the sweep"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ------------------------------------------------------------------------------ the other readers


def test_report_and_regions_and_cache_readers_are_one_line(tmp_path, trace, monkeypatch):
    from tierkit import learned, validate

    rep = tmp_path / "rep"
    assert run(["compare", trace, "--policies", "first-touch", "--out", rep, "-q"])[0] == 0
    (rep / "results.jsonl").write_bytes(b"[" * 3000)
    with pytest.raises(tierkit.TierkitError, match="nested deeper"):
        tierkit.load(rep)
    (rep / "results.jsonl").write_bytes(b"\xff")
    with pytest.raises(tierkit.TierkitError, match="not UTF-8"):
        tierkit.load(rep)
    (rep / "results.jsonl").write_bytes(b'{"a": 1}\n\n[2]\n')
    with pytest.raises(tierkit.TierkitError, match="line 3: .* is not a run's result"):
        tierkit.load(rep)
    # the table's size is checked before pyarrow reads it
    from tierkit import untrusted
    with monkeypatch.context() as m, pytest.raises(tierkit.TierkitError, match="results.parquet: .* bytes: larger than a report's results.parquet"):
        m.setattr(untrusted, "MAX_RESULT_BYTES", 100)
        tierkit.load(rep)
    (tmp_path / "regions").write_text("region a 0x1000 4096\nregion b zz 1\n")
    with pytest.raises(tierkit.TierkitError, match="line 2"):
        validate.read_regions(tmp_path / "regions")
    (tmp_path / "regions").write_bytes(b"hot nan a\n")
    with pytest.raises(tierkit.TierkitError, match="line 1"):
        validate.read_regions(tmp_path / "regions")
    # a cache record that is not what predictions() writes is a miss, not an error
    monkeypatch.setenv("TIERKIT_CACHE_DIR", str(tmp_path / "c"))
    (tmp_path / "c" / "predictions").mkdir(parents=True)
    (tmp_path / "c" / "predictions" / "k.json").write_text("{}")
    for bad in ("[]", '{"predictions_sha256": 5}', "{" * 2000, "\xff"):
        (tmp_path / "c" / "predictions" / "k.info.json").write_text(bad)
        assert learned._cached("k") is None


@pytest.mark.parametrize("field,value,words", [
    ("repeat", -1, "config.repeat"), ("time_scale", 0, "config.time_scale"), ("trace", 5, "config.trace"),
    ("platform", [], "config.platform")])
def test_replay_checks_an_older_results_configuration(trace, tmp_path, field, value, words):
    """A result made before results recorded config.run: its fields are checked as replay reads them."""
    r = tierkit.run(trace, policy="first-touch", fast_capacity=0.2, progress=False)
    del r["config"]["run"]
    r["config"][field] = value
    (tmp_path / "r.json").write_text(json.dumps(r))
    one_error(*run(["replay", tmp_path / "r.json", "-q"])[::2], words)
