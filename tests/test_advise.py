"""`tierkit advise` (docs/advise.md): the deployable policies ranked with their main parameter
tuned, the reference policies kept out of the ranking, the recommendation's command being
deploy.command's, first-touch when nothing beats it by the noise floor, the sweep store reused,
and every mistake one error line with exit status 2. The traces are small (seconds)."""
import json
import shutil

import numpy as np
import pytest

import tierkit
from tierkit import advising, api, deploy

from conftest import VENDORED

GCC = VENDORED / "403.gcc.gz"
#: a few candidates, one of each kind of search, to keep the tests short
FEW = "history,nimble,interleave,damon-tiering"


@pytest.fixture(scope="module")
def gcc_advice():
    return tierkit.advise(GCC, platform="dram-pmem", fast_capacity=0.2, time_scale=100, store=False, workers=2,
                          progress=False)


def test_the_ranking_holds_deployable_policies_only(gcc_advice):
    df = gcc_advice
    cand = df[df["role"] == "candidate"]
    assert list(cand["rank"]) == list(range(1, len(cand) + 1))
    assert cand["runtime_ns"].is_monotonic_increasing
    assert cand["deployable"].all()
    assert all(deploy.how(p) in deploy.DEPLOYABLE for p in cand["policy"])
    names = {deploy.name_of(p) for p in cand["policy"]}
    # every deployable policy but the two single-tier baselines is a candidate (guided is
    # skipped: the trace has no allocation events)
    assert names == {n for n in api.all_policies() if deploy.how(n) in deploy.DEPLOYABLE} - {"all-fast", "all-slow", "guided"}
    # hardware, future-knowledge and not-live policies are listed for reference, unranked, with why
    ref = df[df["role"] == "reference"]
    assert {deploy.name_of(p) for p in ref["policy"]} == {"oracle", "tpp", "cache-mode"}
    assert ref["rank"].isna().all() and not ref["deployable"].any() and ref["why"].str.len().gt(0).all()
    assert ref["command"].isna().all()
    # the oracle bound runs at the period Cori chose for history
    a = df.attrs["advice"]
    hist = next(s for s in a["searches"].values() if s["how"] == "cori")
    assert f"oracle:period={hist['cori']['chosen']}" in set(ref["policy"])
    assert any(s["policy"] == "guided" and "allocation" in s["why"] for s in a["skipped"])
    base = df[df["role"] == "baseline"]
    assert set(base["policy"]) == {"all-fast", "all-slow"}


def test_the_tuned_parameter_is_reported(gcc_advice):
    df = gcc_advice.set_index("policy")
    a = gcc_advice.attrs["advice"]
    by_name = {deploy.name_of(p): p for p in df.index}
    # history: Cori's period, in accesses, made the time a daemon counts (a period live is a time)
    h = df.loc[by_name["history"]]
    assert h["parameter"] == "period" and h["search"] == "cori" and "Cori" in h["tuned"]
    assert advising._time_ns(by_name["history"].split("period=")[1]) is not None
    s = next(s for s in a["searches"].values() if s["how"] == "cori")
    assert int(h["value"]) == s["cori"]["chosen"] and len(s["grid"]) >= 2
    # a time parameter: five values around the registry's default, the best one chosen
    n = df.loc[by_name["nimble"]]
    assert n["parameter"] == "period" and n["search"] == "times" and "grid of 5, default 5s" in n["tuned"]
    grid = next(s for s in a["searches"].values() if s["name"] == "nimble")["grid"]
    assert [x["value"] for x in grid] == ["500ms", "1500ms", "5s", "15s", "50s"]
    assert n["runtime_ns"] == min(x["runtime_ns"] for x in grid)
    # the daemon's live form is in the spec that runs and that the command applies
    assert "detect=interval" in by_name["clock-dwf"] and "balance=off" in by_name["memos"]


def test_the_command_is_deploy_commands(gcc_advice):
    df = gcc_advice
    a = df.attrs["advice"]
    rec = a["recommendation"]
    i = list(df["policy"]).index(rec["policy"])
    r = df.attrs["results"][i]
    assert rec["command"] == deploy.command(rec["policy"], r, "PROGRAM", str(GCC))
    assert df["command"].iloc[i] == rec["command"]
    # time scale 100: policies act on this short trace, and one beats first-touch by far more
    # than the noise floor
    assert rec["policy"] != "first-touch" and rec["speedup_vs_first_touch"] > 1 + advising.NOISE_FLOOR
    assert rec["margin"] is not None and rec["margin"] >= 0
    sens = a["sensitivity"]
    assert [x["time_scale"] for x in sens["time_scale"]["scales"]] == [10, 1000]
    assert isinstance(sens["time_scale"]["holds"], bool)
    lines = advising.text(a)
    assert lines[-1] == f"Run: {rec['command']}"


def test_first_touch_when_the_fast_tier_holds_the_footprint(zipf_trace):
    df = tierkit.advise(zipf_trace, fast_capacity=1.0, policies=FEW, store=False, workers=1, progress=False)
    a = df.attrs["advice"]
    base = df.set_index("policy")["runtime_ns"]
    assert base["all-fast"] == pytest.approx(base["first-touch"], rel=1e-3)
    assert a["recommendation"]["policy"] == "first-touch"
    assert a["recommendation"]["command"].startswith("tierkit run --policy first-touch ")


def test_a_given_parameter_is_not_tuned_and_the_store_is_reused(zipf_trace, tmp_path):
    kw = dict(fast_capacity=0.1, policies="nimble:period=2ms,history:period=5000", time_scale=10, store=tmp_path / "s",
              workers=1, progress=False)
    df = tierkit.advise(zipf_trace, **kw)
    a = df.attrs["advice"]
    assert a["runs"]["ran"] > 0 and a["runs"]["cached"] == 0
    rows = df.set_index("policy")
    assert rows.loc["nimble:period=2ms", "search"] == "fixed"
    # a period in accesses is given as a time in the spec that runs (live, a period is a time)
    hist = [p for p in rows.index if p.startswith("history:")]
    assert len(hist) == 1 and rows.loc[hist[0], "search"] == "fixed"
    again = tierkit.advise(zipf_trace, **kw).attrs["advice"]
    assert again["runs"]["ran"] == 0 and again["runs"]["cached"] == a["runs"]["ran"]
    assert again["recommendation"] == a["recommendation"]


def test_guided_is_a_candidate_on_a_trace_with_allocations():
    df = tierkit.advise(VENDORED / "sqlite3-orders.tkt", fast_capacity=0.2, policies="guided:strategy=thermos",
                        store=False, workers=1, progress=False)
    cand = df[df["role"] == "candidate"]
    assert set(cand["policy"]) == {"guided:strategy=thermos", "first-touch"}
    g = cand.set_index("policy").loc["guided:strategy=thermos"]
    assert g["deployment"] == deploy.LABELS["allocator"]
    assert g["command"].startswith("tierkit profile ")
    assert not df.attrs["advice"]["skipped"]


def test_the_command_prints_json_and_a_run_line(cli, zipf_trace, tmp_path):
    rc, out, err = cli("advise", zipf_trace, "-c", "0.1", "--policies", "nimble,interleave", "--json", "-q",
                       "-o", tmp_path / "a.json", "-j", "1")
    assert rc == 0, err
    a = json.loads(out)
    assert a == json.loads((tmp_path / "a.json").read_text())
    assert {"recommendation", "rows", "sensitivity", "skipped", "seconds", "cpu_seconds"} <= set(a)
    rc, out, err = cli("advise", zipf_trace, "-c", "0.1", "--policies", "nimble", "-q", "-j", "1")
    assert rc == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("Run: tierkit run --policy ")
    # --out is not overwritten without --force
    rc, _, err = cli("advise", zipf_trace, "-c", "0.1", "--policies", "nimble", "-q", "-o", tmp_path / "a.json")
    assert rc == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, words", [
    (["--policies", "history,nosuch"], "unknown policy 'nosuch'"),
    (["--policies", "nimble:nosuch=1"], "nosuch"),
    (["--policies", "nimble:period=abc"], "not a period"),
    (["--policies", "memos:scan_pte_ns=5"], None),  # an old name (policy::params::RENAMED): a warning, not an error
    (["-c", "0"], "--fast-capacity"),
    (["-c", "4K", "--policies", "nimble"], None),  # one page: possible
    (["-c", "1"], None),
    (["-c", "abc"], "--fast-capacity"),
    (["--time-scale", "0"], "--time-scale"),
    (["extra.tkt"], "--program"),
    (["--program"], "--program"),
])
def test_mistakes_are_one_line_and_status_2(cli, zipf_trace, args, words):
    full = ["advise", zipf_trace, *(["-c", "0.1"] if "-c" not in args else []), "-q", "-j", "1", *args]
    if words is None:
        rc, _, err = cli(*full, *([] if "--policies" in args else ["--policies", "nimble"]))
        assert rc == 0, err
        return
    rc, out, err = cli(*full)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: ") and words in lines[0], err
    assert out == ""


def test_a_trace_without_accesses_is_one_line(cli, tmp_path):
    p = tmp_path / "empty.tkt"
    api.write_trace(p, np.array([], dtype=np.uint64))
    rc, _, err = cli("advise", p, "-c", "0.5", "-q")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "accesses" in err, err
    rc, _, err = cli("advise", tmp_path / "missing.tkt", "-c", "0.5", "-q")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err


def test_verify_needs_two_nodes(cli, zipf_trace, tmp_path):
    one = tmp_path / "node"
    one.mkdir()
    (one / "has_memory").write_text("0\n")
    assert advising.nodes_with_memory(str(one)) == [0]
    with pytest.raises(tierkit.TierkitError, match="one NUMA node with memory"):
        advising.check_two_nodes(str(one))
    (one / "has_memory").write_text("0-1\n")
    advising.check_two_nodes(str(one))
    # with one node, --verify goes to the testbed VM; with neither, one line says both
    assert advising.verify_where(str(one)) == "host"
    if len(advising.nodes_with_memory()) >= 2:
        pytest.skip("this machine has a fast and a slow node: --verify would run")
    env = {"TIERKIT_TESTBED_BUILD": str(tmp_path / "no-testbed")}
    rc, out, err = cli("advise", zipf_trace, "-c", "0.1", "-q", "--verify", "--program", "--", "true", env=env)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "NUMA" in lines[0] and "testbed VM cannot run here" in lines[0] and out == "", err


def test_verify_compares_measured_with_predicted(gcc_advice):
    """The live part with tierkit run replaced (the VM runs it for real): the top two run,
    their wall times measured and their order compared with the predicted one."""
    df = gcc_advice
    cand = df[df["role"] == "candidate"]
    calls = []

    def fake_run(program, args, **kw):
        calls.append((program, list(args), kw))
        return {"exit_status": 0, "migrations": 0}

    out = advising.verify_live(cand.to_dict("records"), df.attrs["results"], ["./app", "-n", "3"], GCC, False,
                               runner=fake_run)
    assert [o["policy"] for o in out] == list(cand["policy"][:2])
    assert all(c[0] == "./app" and c[1] == ["-n", "3"] for c in calls)
    assert calls[0][2]["fast_capacity"] is not None
    assert "ratio" in out[0] and out[0]["ratio"]["predicted"] >= 1


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("gcc") is None, reason="no valgrind or gcc")
def test_program_is_recorded_first(cli, progs, tmp_path):
    t = tmp_path / "prog.tkt"
    prog = progs / "three_sites"
    rc, out, err = cli("advise", t, "-c", "0.5", "--policies", "nimble", "-q", "-j", "1", "--json", "--program", "--", prog)
    assert rc == 0, err
    a = json.loads(out)  # the program's own output went to stderr
    assert t.exists() and a["allocations"] > 0 and "hot " in err
    assert a["recommendation"]["command"].endswith(f"-- {prog}")
    # the trace exists: advised on as it is, said on stderr
    rc, out, err = cli("advise", t, "-c", "0.5", "--policies", "nimble", "-q", "-j", "1", "--program", "--", prog)
    assert rc == 0 and "exists: advising on it" in err and out.strip().splitlines()[-1].startswith("Run: ")
