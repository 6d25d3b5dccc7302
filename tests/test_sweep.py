"""Studies at scale (docs/sweep.md): the study file as it reads (YAML and TOML), parameter grids,
the result store (resume, instant re-run, failed cells recorded), the same results whichever
executor and however many workers run them, and the report from the store."""
import json
import os
import shutil
from pathlib import Path

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
    ("traces: [a.tkt]\ngrids: [{name: g, policies: [otf], platform: [x]}]\n", "grids: g: platform: unknown key"),
    ("traces: [a.tkt]\ngrids: [{name: g, traces: [b.tkt], policies: [otf]}]\n", "grids: g: traces: b.tkt: no trace"),
    ("traces: [a.tkt]\ngrids: [{name: g, policies: [otf], guide_from: {a.tkt: x}}]\n", "guide_from: x: no trace"),
    ("traces: [a.tkt]\ngrids: [{name: g}]\n", "grids: g: policies: missing"),
    ("traces: [a.tkt]\ngrids: [{name: g, policies: [otf]}, {name: g, policies: [nimble]}]\n", "two grids are called 'g'"),
    ("traces: [a.tkt]\nkleio: {pages: [0.1, 2]}\n", "kleio: pages: [0.1, 2]: fractions of the pages"),
    ("traces: [a.tkt]\nkleio: {period: cori}\n", "kleio: period: 'cori': a number of accesses >= 1, or default or aligned"),
    ("traces: [a.tkt]\ntune: {scheduler: lru}\n", "tune: scheduler: 'lru': history or oracle"),
    ("traces: [a.tkt]\ntune: {epochs: 3}\n", "tune: epochs: unknown parameter"),
    ("traces: [{file: a.tkt, cores: 0}]\npolicies: [otf]\n", "traces: a.tkt: cores: 0: a whole number of cores >= 1"),
    ("traces: [{file: a.tkt, quantum: 4}]\npolicies: [otf]\n", "traces: a.tkt: quantum: only with cores: N"),
    ("traces: [{mix: [a.tkt, {file: a.tkt, cores: 2}]}]\npolicies: [otf]\n", "cores: a mix's program runs on one core"),
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
    assert one.query("policy == 'all-slow'")["runtime_vs_all_slow"].eq(1.0).all()
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
    cell = {c.key: c for c in sw.cells(sw.load_study(f), tmp_path / "o")}
    assert not store.done(cell[bad["key"].item()]) and store.done(cell[df["key"].iloc[0]])


def test_the_store_reads_and_checks_a_record_once_while_it_is_unchanged(tmp_path, small_trace, monkeypatch):
    # a sweep asks for each record several times (done, the row, the dataset)
    from tierkit import untrusted

    f = study_file(tmp_path, f"traces: [{small_trace}]\npolicies: [first-touch]\n")
    df = sw.sweep(f, tmp_path / "o", workers=1, progress=False)
    c = next(c for c in sw.cells(sw.load_study(f), tmp_path / "o") if c.key == df["key"].iloc[0])
    reads = []
    real = untrusted.read_json
    monkeypatch.setattr(untrusted, "read_json", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    store = sw.Store(tmp_path / "o")
    assert store.done(c) and store.get(c)["result"]["policy"] == "first-touch" and store.done(c)
    assert len(reads) == 1
    # a record changed (damaged, or written again) is read again
    p = store.path(c.key)
    p.write_text(p.read_text()[:-2])
    assert not store.done(c) and len(reads) == 2


def test_grids_share_the_store_and_compare_within_their_grid(tmp_path, small_trace):
    f = study_file(tmp_path, f"""
traces: [{small_trace}, {GCC}]
capacities: [0.2]
baseline: first-touch
grids:
  - name: scales
    traces: [a.tkt]
    time_scale: [1, 1000]
    policies: &timed [nimble, "memos:period=4s"]
  - name: repeat
    repeat: [3]
    policies: [otf, *timed]
  - name: bigger
    traces: [a.tkt]
    capacities: ["125%"]
    policies: [otf]
""")
    s = sw.load_study(f)
    assert [g.name for g in s.grids] == ["scales", "repeat", "bigger"]
    assert [t.label for t in s.grids[1].tasks] == ["otf", "nimble", "memos:period=4s"]
    df = sw.sweep(s, tmp_path / "o", workers=2, progress=False)
    # scales: 1 trace x 2 scales x (2 + first-touch); repeat: 2 traces x (3 + 1); bigger: 1 x (1 + 1)
    assert len(df) == 6 + 8 + 2 and df["error"].isna().all()
    assert df["grid"].tolist() == ["scales"] * 6 + ["repeat"] * 8 + ["bigger"] * 2
    # first-touch at time scale 1 on a.tkt in grid 'scales' is one cell; the baseline is per grid
    assert df.attrs["ran"] == len(set(df["key"]))
    assert (df.loc[df["policy"] == "first-touch", "runtime_vs_first-touch"] == 1.0).all()
    rep = df[(df["grid"] == "repeat") & (df["trace"] == "a.tkt")].set_index("policy")
    assert rep.loc["otf", "runtime_vs_first-touch"] == rep.loc["otf", "runtime_ns"] / rep.loc["first-touch", "runtime_ns"]
    # a tier larger than the footprint: 125% of it (seed 004 §5.1's small footprint)
    big = df[df["grid"] == "bigger"].iloc[0]
    assert big["fast_capacity_pages"] == int(1.25 * big["pages"]) and big["fast_capacity"] == "125%"
    one = tierkit.run(small_trace, "dram-pmem", "memos:period=4s", fast_capacity=0.2, repeat=3, progress=False)
    assert rep.loc["memos:period=4s", "runtime_ns"] == one["runtime_ns"]
    html = (tmp_path / "o" / "index.html").read_text()
    assert "scales: " in html or "scales" in html


def test_guided_policies_profile_the_trace_guide_from_names(tmp_path):
    # 000 §6.2 as a study: the ref input guided by its own profile and by a training input's
    f = study_file(tmp_path, """
traces:
  - {workload: sites, size: small, cache: "L1:8K:8", name: train}
  - {workload: sites, size: small, cache: "L1:8K:8", args: [--seed, "7", --work, "2"], name: ref}
platforms: [hbm-ddr3]
capacities: [0.125]
baseline: first-touch
grids:
  - {name: own, traces: [ref], policies: ["guided:strategy=thermos"]}
  - {name: trained, traces: [ref], guide_from: {ref: train}, policies: ["guided:strategy=thermos"]}
""")
    df = sw.sweep(f, tmp_path / "o", workers=1, progress=False, report=False).set_index("grid")
    assert df["error"].isna().all() and len(df) == 4
    # first-touch does not read guidance: the two grids share its cell
    ft = df[df["policy"] == "first-touch"]
    assert ft["key"].nunique() == 1 and df.attrs["ran"] == 3
    g = df[df["policy"] != "first-touch"]
    assert g.loc["trained", "guide_from"] == "train" and pd.isna(g.loc["own", "guide_from"])
    assert g.loc["trained", "key"] != g.loc["own", "key"]
    rec = results(tmp_path / "o")[g.loc["trained", "key"]]
    train_path = next((tmp_path / "o" / "traces").glob("train-*.tkt"))
    assert rec["config"]["guidance"]["from_trace"] == str(train_path)
    assert rec["stats"]["policy"]["allocations_unmatched"] == 0
    ref_path = next((tmp_path / "o" / "traces").glob("ref-*.tkt"))
    same = tierkit.run(ref_path, "hbm-ddr3", "guided:strategy=thermos", fast_capacity=0.125, guide_from=train_path,
                       progress=False)
    assert same["runtime_ns"] == g.loc["trained", "runtime_ns"]


def test_analyses_run_as_cells_with_the_commands_results(tmp_path, small_trace):
    f = study_file(tmp_path, f"""
traces: [{small_trace}]
baseline: null
grids:
  - name: cori
    tune: {{scheduler: [history, oracle], grid: 10}}
  - name: aligned
    kleio: {{pages: [0.05, 0.2], period: aligned, epochs: 2, infer_ns: 1000}}
""")
    s = sw.load_study(f)
    assert [t.label for g in s.grids for t in g.tasks] == [
        "tune:scheduler=history,grid=10", "tune:scheduler=oracle,grid=10",
        "kleio:pages=0.05/0.2,period=aligned,epochs=2,infer_ns=1000"]
    import importlib.util

    torch = importlib.util.find_spec("torch") is not None
    if not torch:  # the lean install: Cori's cells only
        s.grids = s.grids[:1]
    df = sw.sweep(s, tmp_path / "o", workers=2, progress=False)
    assert df["error"].isna().all()
    tune = df[df["task"] == "tune"].set_index("policy")
    want = tierkit.tune(small_trace, "history", grid=10, progress=False)
    row = tune.loc["tune:scheduler=history,grid=10"]
    assert row["chosen_period"] == want["chosen_period"] and row["best_period"] == want["best_period"]
    assert row["trials_count"] == len(want["trials"])
    assert row["cori_slowdown_at_cori_trials"] == want["methods"]["cori"]["slowdown_at_cori_trials"]
    assert row["base-right_slowdown_at_cori_trials_to_best"] == want["methods"]["base-right"]["slowdown_at_cori_trials_to_best"]
    assert row["budget_cori_trials_to_best"] == want["budget_cori_trials_to_best"]
    assert "Cori: period tuning" in (tmp_path / "o" / "index.html").read_text()
    if torch:
        from tierkit import learned

        k = df[df["task"] == "kleio"]
        period = learned.aligned_period(small_trace)
        assert list(k["pages_fraction"]) == [0.05, 0.2] and (k["period"] == period).all()
        want = tierkit.kleio(small_trace, pages=[0.05, 0.2], period=period, epochs=2, progress=False, infer_ns=1000)
        assert list(k["gap_bridged_pct"]) == list(want["gap_bridged_pct"])


def test_a_mix_is_a_trace_of_the_study(tmp_path, small_trace):
    # several programs on cores of their own, sharing the tiers, as one cell
    f = study_file(tmp_path, f"""
traces:
  - {{mix: [{small_trace}, {{synth: stream, accesses: 20K, pages: 500}}], name: pair}}
  - {small_trace}
timing: [detailed]
policies: [first-touch, otf]
""")
    df = sw.sweep(f, tmp_path / "o", workers=2, progress=False, report=False)
    assert df["error"].isna().all(), df["error"].tolist()
    pair = df[df["trace"] == "pair"].set_index("policy")
    assert pair.loc["otf", "programs"] == 2 and 0 < pair.loc["otf", "weighted_speedup"] <= 2
    made = next((tmp_path / "o" / "traces").glob("stream-*.tkt"))
    want = tierkit.run([small_trace, made], "dram-pmem", "otf", 0.2, timing="detailed", mix=True, progress=False)
    assert pair.loc["otf", "runtime_ns"] == want["runtime_ns"]
    assert pair.loc["otf", "weighted_speedup"] == want["mix"]["weighted_speedup"]
    assert pair.loc["otf", "accesses"] == 40_000
    # a mix runs simulations only
    g = study_file(tmp_path, f"traces: [{{mix: [{small_trace}, {small_trace}], name: m}}]\ntune: {{scheduler: history}}\n", "g.yaml")
    with pytest.raises(tierkit.TierkitError, match="a mix runs simulations only"):
        sw.sweep(g, tmp_path / "g", workers=1, progress=False)


def test_a_traces_threads_on_cores_are_a_trace_of_the_study(tmp_path, threads_trace):
    # a trace's threads on N cores (--cores), its own cell beside the one-core run
    f = study_file(tmp_path, f"""
traces:
  - {{file: {threads_trace}, cores: 2, name: two}}
  - {{file: {threads_trace}, name: one}}
platforms: [dram-dcpmm]
timing: [detailed]
policies: [first-touch, history:period=2K]
""")
    df = sw.sweep(f, tmp_path / "o", workers=1, progress=False, report=False)
    assert df["error"].isna().all(), df["error"].tolist()
    two = df[df["trace"] == "two"].set_index("policy")
    one = df[df["trace"] == "one"].set_index("policy")
    want = tierkit.run(threads_trace, "dram-dcpmm", "history:period=2K", 0.2, timing="detailed", cores=2, progress=False)
    assert two.loc["history:period=2K", "runtime_ns"] == want["runtime_ns"] and two.loc["first-touch", "cores"] == 2
    # the two threads side by side on two cores take less time than one after the other on one
    assert two.loc["first-touch", "runtime_ns"] < 0.8 * one.loc["first-touch", "runtime_ns"]
    assert two.loc["first-touch", "key"] != one.loc["first-touch", "key"]
    g = study_file(tmp_path, f"traces: [{{file: {threads_trace}, cores: 2}}]\ntune: {{scheduler: history}}\n", "g.yaml")
    with pytest.raises(tierkit.TierkitError, match="a trace on several cores runs simulations only"):
        sw.sweep(g, tmp_path / "g", workers=1, progress=False)


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


def test_the_experiments_study_files_read(monkeypatch):
    # every study file behind a `make experiments-*` parses and expands to tasks (the SPEC
    # traces' studies where ../shared has them, the real programs' where make traces recorded
    # them; the migration study's traces are made by its make target first)
    root = Path(__file__).resolve().parent.parent
    spec = root.parent / "shared" / "traces"
    files = sorted((root / "experiments").glob("*/*.yaml"))
    read = 0
    for f in files:
        text = f.read_text()
        if "SPEC_TRACES" in text:
            if not spec.is_dir():
                continue
            monkeypatch.setenv("SPEC_TRACES", str(spec))
        if "MIGRATION_TRACES" in text:
            continue
        if "data/traces/real/" in text and not (root / "data" / "traces" / "real" / "suite.json").exists():
            continue  # the suite of real programs, recorded by make traces
        s = sw.load_study(f)
        assert s.traces and s.grids, f
        read += 1
    assert read >= 4
