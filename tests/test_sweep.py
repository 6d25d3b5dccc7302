"""Studies at scale (issue 20): the study file as it reads (YAML and TOML), parameter grids,
the result store (resume, instant re-run, failed cells recorded), the same results whichever
executor and however many workers run them, and the report from the store."""
import json
import os
import shutil

import pandas as pd
import pytest

import tierkit
from tierkit import studies as sw

from conftest import VENDORED

GCC = VENDORED / "403.gcc.gz"
SQLITE = VENDORED / "sqlite3-orders.tkt"

ISSUE_EXAMPLE = """\
traces: [a.tkt]
platforms: [dram-pmem, hbm-pcm]
capacities: [0.1, 0.2]
timing: [detailed]
policies: [first-touch, history, otf]
"""


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("sw")
    tierkit.synth("zipf", d / "a.tkt", accesses=20_000, pages=1_000, seed=2, write_ratio=0.3, progress=False)
    return d / "a.tkt"


def study_file(tmp_path, text, name="study.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def results(out):
    """Each cell's result by key, from results.jsonl."""
    recs = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    return {r["key"]: r.get("result") or r.get("error") for r in recs}


def test_the_issues_example_reads_as_written_in_yaml_and_toml(tmp_path, small_trace):
    shutil.copy(small_trace, tmp_path / "a.tkt")
    y = sw.load_study(study_file(tmp_path, ISSUE_EXAMPLE))
    t = sw.load_study(study_file(tmp_path, ISSUE_EXAMPLE.replace(": ", " = ").replace("[", '["').replace("]", '"]')
                                 .replace(", ", '", "').replace('["0.1", "0.2"]', "[0.1, 0.2]"), "study.toml"))
    assert [c.key for c in sw.cells(y, tmp_path / "o")] == [c.key for c in sw.cells(t, tmp_path / "o")]
    cells = sw.cells(y, tmp_path / "o")
    # 1 trace x 2 platforms x 2 capacities x 1 timing x (3 policies + the all-slow baseline)
    assert len(cells) == 16 and len({c.key for c in cells}) == 16
    assert {c.policy for c in cells} == {"first-touch", "history", "otf", "all-slow"}


def test_trace_paths_may_name_environment_variables(tmp_path, small_trace, monkeypatch):
    monkeypatch.setenv("TIERKIT_TEST_TRACES", str(small_trace.parent))
    s = sw.load_study(study_file(tmp_path, 'traces: ["${TIERKIT_TEST_TRACES}/a.tkt"]\npolicies: [otf]\n'))
    assert [t.path for t in s.traces] == [str(small_trace)]


def test_policy_grids_expand_to_every_combination(tmp_path, small_trace):
    s = sw.load_study(study_file(tmp_path, f"""
traces: [{small_trace}]
policies:
  - otf: {{threshold: [32, 64, 128]}}
  - otf-adaptive: {{algorithm: [1, 2], ar: os}}
baseline: first-touch
"""))
    assert s.policies == ["otf:threshold=32", "otf:threshold=64", "otf:threshold=128",
                          "otf-adaptive:algorithm=1,ar=os", "otf-adaptive:algorithm=2,ar=os"]
    assert len(sw.cells(s, tmp_path / "o")) == 6


@pytest.mark.parametrize("text, named", [
    ("traces: [a.tkt]\npolicies: [otf]\nplatform: [x]\n", "platform: unknown key"),
    ("traces: [nothing-*.tkt]\npolicies: [otf]\n", "traces: nothing-*.tkt: matches no file"),
    ("traces: [a.tkt]\npolicies: [otf]\ncapacities: [2]\n", "capacities: 2: a fraction in (0, 1]"),
    ("traces: [a.tkt]\npolicies: [no-such-policy]\n", "policies: "),
    ("traces: [a.tkt]\npolicies: [otf]\nplatforms: [no-such-box]\n", "platforms: "),
    ("traces: [a.tkt]\npolicies: [otf]\ntiming: [fast]\n", "timing: 'fast': simple or detailed"),
    ("traces: [a.tkt]\npolicies: [{otf: 3}]\n", "policies: otf: give its parameters as a mapping"),
    ("traces: [a.tkt\n", "line "),
    ("traces: [\"${TIERKIT_TEST_UNSET_DIR}/a.tkt\"]\npolicies: [otf]\n", "an environment variable in it is not set"),
])
def test_a_bad_study_is_one_line_naming_the_file_and_key(tmp_path, small_trace, cli, text, named):
    shutil.copy(small_trace, tmp_path / "a.tkt")
    f = study_file(tmp_path, text)
    rc, _, err = cli("sweep", f, "--out", tmp_path / "o")
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 2 and len(lines) == 1 and str(f.name) in lines[0] and named in lines[0], err


def test_workers_store_resume_and_rerun(tmp_path, small_trace):
    text = f"""
traces: [{small_trace}, {GCC}]
platforms: [dram-pmem, hbm-pcm]
capacities: [0.1, 0.25]
policies: [first-touch, history, {{otf: {{threshold: [32, 64]}}}}]
"""
    f = study_file(tmp_path, text)
    one = sw.sweep(f, tmp_path / "one", workers=1, progress=False, report=False)
    two = sw.sweep(f, tmp_path / "two", workers=2, progress=False)
    # 2 traces x 2 platforms x 2 capacities x (4 policies + all-slow)
    assert len(one) == 40 and one["error"].isna().all()
    assert results(tmp_path / "one") == results(tmp_path / "two")  # bit for bit, whichever ran them
    pd.testing.assert_frame_equal(one, two)
    assert (one["runtime_vs_all-slow"][one["policy"] == "all-slow"] == 1.0).all()
    # interrupted: four cells lost from the store are the only ones run again
    store = sw.Store(tmp_path / "two")
    lost = list(two["key"][:4])
    for k in lost:
        store.path(k).unlink()
    mtimes = {k: store.path(k).stat().st_mtime_ns for k in two["key"][4:]}
    again = sw.sweep(f, tmp_path / "two", workers=2, progress=False)
    assert all(store.path(k).stat().st_mtime_ns == t for k, t in mtimes.items())
    assert all(store.path(k).exists() for k in lost)
    pd.testing.assert_frame_equal(again, two)
    # the report, from the store
    html = (tmp_path / "two" / "index.html").read_text()
    assert "The best policy of each cell" in html and "capacity.png" in html and "heatmap.png" in html
    assert pd.read_parquet(tmp_path / "two" / "results.parquet").shape[0] == 40


def test_a_failed_cell_records_its_error_and_the_rest_run(tmp_path, small_trace):
    f = study_file(tmp_path, f"""
traces: [{small_trace}]
policies: [first-touch, "guided:guidance=missing.json"]
""")
    df = sw.sweep(f, tmp_path / "o", workers=1, progress=False)
    bad = df[df["policy"].str.startswith("guided")]
    assert len(bad) == 1 and "missing.json" in bad["error"].item()
    assert df[~df["policy"].str.startswith("guided")]["error"].isna().all()
    assert "Failed cells" in (tmp_path / "o" / "index.html").read_text()
    # a failed cell is tried again by the next sweep, a good one is not
    store = sw.Store(tmp_path / "o")
    assert not store.done(bad["key"].item()) and store.done(df["key"].iloc[0])


def test_synthetic_and_workload_traces_are_made_once(tmp_path):
    f = study_file(tmp_path, """
traces:
  - synth: zipf
    accesses: 20K
    pages: 500
    write_ratio: 0.2
seeds: [1, 2]
policies: [first-touch]
""")
    s = sw.load_study(f)
    assert [t.name for t in s.traces] == ["zipf-s1", "zipf-s2"]
    df = sw.sweep(s, tmp_path / "o", workers=1, progress=False, report=False)
    made = sorted((tmp_path / "o" / "traces").iterdir())
    assert len(made) == 2 and df["trace_digest"].nunique() == 2
    stamps = [p.stat().st_mtime_ns for p in made]
    sw.sweep(s, tmp_path / "o", workers=1, progress=False, report=False)
    assert [p.stat().st_mtime_ns for p in sorted((tmp_path / "o" / "traces").iterdir())] == stamps


def test_the_command_prints_the_best_policy_per_cell(tmp_path, small_trace, cli):
    f = study_file(tmp_path, f"traces: [{small_trace}]\ncapacities: [0.1, 0.3]\npolicies: [first-touch, history]\n")
    rc, out, err = cli("sweep", f, "--out", tmp_path / "o", "-j", "2", "-q")
    assert rc == 0, err
    assert "study study: 6 cells, 0 failed" in out and "best" in out
    rc, out, err = cli("sweep", f, "--out", tmp_path / "o", "-q")
    assert rc == 0 and "(6 stored before this run)" in out


@pytest.fixture(scope="module")
def ray_study(tmp_path_factory, small_trace):
    d = tmp_path_factory.mktemp("ray")
    f = d / "study.yaml"
    f.write_text(f"""
traces: [{small_trace}, {SQLITE}]
capacities: [0.1, 0.2]
timing: [detailed]
policies: [first-touch, history, otf]
""")
    local = sw.sweep(f, d / "local", workers=2, progress=False, report=False)
    return f, d, local


def test_ray_gives_the_same_results_and_survives_a_killed_worker(ray_study):
    """One test, so that its two Ray instances never run at once: a local instance
    (ray.init with 2 CPUs), then a `ray start --head` cluster joined by address, whose worker
    is killed while it runs a cell: Ray runs the cell again, and the store holds every cell
    once, with the same results as the local executor's."""
    pytest.importorskip("ray", reason="the Ray executor needs Ray (make test installs tierkit[ray])")
    import signal
    import subprocess
    import sys
    import tempfile
    import threading
    import time

    import psutil
    import ray

    f, d, local = ray_study
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        df = sw.sweep(f, d / "ray", executor="ray", progress=False, report=False)
    finally:
        ray.shutdown()
    assert results(d / "ray") == results(d / "local")
    pd.testing.assert_frame_equal(df, local)

    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    port = "6391"
    temp = tempfile.mkdtemp(prefix="tkray", dir="/tmp")  # short: Ray's sockets live under it
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    # --block: the cluster's processes are this process's descendants, stopped with it (the
    # test acts on nothing else: not `ray stop`, which stops every Ray on the machine)
    head = subprocess.Popen([ray_bin, "start", "--head", "--block", "--port", port, "--num-cpus", "2",
                             "--include-dashboard=false", "--temp-dir", temp], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed = []
    try:
        def mine():
            try:
                return psutil.Process(head.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                return []

        def kill_one():
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not killed:
                for p in mine():
                    try:
                        if "ray::_task" in " ".join(p.cmdline()):
                            p.send_signal(signal.SIGKILL)
                            killed.append(p.pid)
                            break
                    except psutil.Error:
                        pass
                time.sleep(0.05)

        deadline = time.monotonic() + 60
        while True:  # the head is up when a driver can join it
            try:
                ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
                ray.shutdown()
                break
            except Exception:
                if time.monotonic() > deadline or head.poll() is not None:
                    raise
                time.sleep(1)
        t = threading.Thread(target=kill_one)
        t.start()
        df = sw.sweep(f, d / "cluster", executor="ray", address=f"127.0.0.1:{port}", ship_traces=True,
                      progress=False, report=False)
        t.join()
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            for p in psutil.Process(head.pid).children(recursive=True):
                p.kill()
            head.kill()
        shutil.rmtree(temp, ignore_errors=True)
    assert killed, "no Ray worker was seen running a cell"
    recs = [json.loads(l) for l in (d / "cluster" / "results.jsonl").read_text().splitlines()]
    assert len(recs) == len(local) == len({r["key"] for r in recs})  # nothing lost, nothing twice
    assert results(d / "cluster") == results(d / "local")
    pd.testing.assert_frame_equal(df, local)


def test_compare_runs_its_policies_in_parallel_with_the_same_results(zipf_trace):
    class Nothing(tierkit.PeriodicPolicy):  # a Python policy: runs in this process
        name = "nothing"
        period = 5000

        def decide(self, view):
            return []

    pols = ["first-touch", "history:period=5000", "otf", "clock-dwf", Nothing()]
    one = tierkit.compare([zipf_trace, GCC], "hbm-pcm", pols, 0.2, timing="detailed", progress=False, workers=1)
    two = tierkit.compare([zipf_trace, GCC], "hbm-pcm", pols, 0.2, timing="detailed", progress=False, workers=2)
    pd.testing.assert_frame_equal(one, two)
    assert [json.dumps(r, sort_keys=True) for r in one.attrs["results"]] == \
        [json.dumps(r, sort_keys=True) for r in two.attrs["results"]]
    with pytest.raises(tierkit.TierkitError, match="^workers: 0"):
        tierkit.compare(zipf_trace, policies="otf", workers=0)
