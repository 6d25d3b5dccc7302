"""Many cores sharing the tiers from the command line and Python (docs/models.md, "Many cores"): a
mix's result per program and for the whole mix, the errors, and determinism. The models'
hand-computed cases are in crates/tierkit-core/tests/mix.rs."""
import json

import pytest

import tierkit


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("mix")
    out = []
    for s, kind in ((1, "zipf"), (2, "stream")):
        p = d / f"{kind}.tkt"
        tierkit.synth(kind, p, accesses=30_000, pages=2_000, seed=s, write_ratio=0.3, progress=False)
        out.append(p)
    return out


def test_a_mix_reports_each_program_and_the_whole(programs, cli):
    r = tierkit.run(programs, "dram-dcpmm", "history:period=5K", 0.2, timing="detailed", mix=True, progress=False)
    assert [p["trace"] for p in r["programs"]] == [str(p) for p in programs]
    assert [p["accesses"] for p in r["programs"]] == [30_000, 30_000] and r["accesses"] == 60_000
    # the run ends with its last program; each program is slower sharing the tiers than alone
    assert r["runtime_ns"] == max(p["runtime_ns"] for p in r["programs"])
    assert all(p["slowdown"] >= 1.0 for p in r["programs"])
    m = r["mix"]
    assert 0 < m["weighted_speedup"] <= 2.0
    assert m["weighted_speedup"] == pytest.approx(sum(p["runtime_alone_ns"] / p["runtime_ns"] for p in r["programs"]))
    assert m["throughput_ipc"] == pytest.approx(sum(p["ipc"] for p in r["programs"]))
    assert sum(p["migrations"] for p in r["programs"]) == r["migrations"]
    # the command line: a line per program, and the same figures with --json
    rc, out, err = cli("simulate", *programs, "--mix", "-p", "dram-dcpmm", "-P", "history:period=5K", "-c", "0.2",
                       "--timing", "detailed", "-q")
    assert rc == 0, err
    assert "weighted speedup" in out and "zipf.tkt" in out and "stream.tkt" in out
    rc, out, _ = cli("simulate", *programs, "--mix", "-p", "dram-dcpmm", "-P", "history:period=5K", "-c", "0.2",
                     "--timing", "detailed", "-q", "--json")
    j = json.loads(out)
    assert j["runtime_ns"] == r["runtime_ns"] and j["mix"]["weighted_speedup"] == m["weighted_speedup"]


def test_the_same_mix_gives_the_same_results_bit_for_bit(programs):
    a = tierkit.run(programs, "dram-dcpmm", "otf", 0.2, timing="detailed", mix=True, progress=False, alone=False)
    b = tierkit.run(programs, "dram-dcpmm", "otf", 0.2, timing="detailed", mix=True, progress=False, alone=False)
    assert json.dumps(a["stats"]) == json.dumps(b["stats"]) and a["programs"] == b["programs"]
    # a quantum of 1 interleaves strictly in time: other figures, still deterministic
    c = tierkit.run(programs, "dram-dcpmm", "otf", 0.2, timing="detailed", mix=True, progress=False, alone=False,
                    quantum=1)
    assert c["accesses"] == a["accesses"]


def test_threads_on_cores(programs):
    r = tierkit.run(programs[0], "dram-dcpmm", "first-touch", 0.2, timing="detailed", cores=2, progress=False)
    # a one-thread trace on two cores: the second has nothing to run
    assert [c["accesses"] for c in r["cores"]] == [30_000, 0]
    one = tierkit.run(programs[0], "dram-dcpmm", "first-touch", 0.2, timing="detailed", progress=False)
    assert r["runtime_ns"] == one["runtime_ns"] and "cores" not in one


@pytest.mark.parametrize("args, named", [
    (["--mix", "--timing", "simple"], "the simple timing model is one core's"),
    (["--timing", "detailed"], "give --mix"),
    (["--mix", "--timing", "detailed", "--quantum", "0"], "--quantum: 0"),
    (["--mix", "--timing", "detailed", "-P", "oracle:period=1000"], "future of the access stream"),
])
def test_mix_errors_are_one_line(programs, cli, args, named):
    rc, _, err = cli("simulate", *programs, *args, "-q")
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and named in lines[0], err


def test_compare_a_mix_and_replay_it(programs, cli, tmp_path):
    pols = "first-touch,history:period=5K"
    df = tierkit.compare(programs, "dram-dcpmm", pols, 0.2, timing="detailed", mix=True, progress=False)
    # one thing compared: the mix, under each policy (and the all-slow baseline)
    assert df["trace"].nunique() == 1 and set(df["policy"]) == {"first-touch", "history:period=5K", "all-slow"}
    for r in df.attrs["results"]:
        want = tierkit.run(programs, "dram-dcpmm", r["policy"], 0.2, timing="detailed", mix=True, progress=False)
        assert r["runtime_ns"] == want["runtime_ns"] and r["mix"] == want["mix"]
    row = df.set_index("policy").loc["history:period=5K"]
    assert row["weighted_speedup"] == pytest.approx(
        sum(p["runtime_alone_ns"] / p["runtime_ns"] for p in df.attrs["results"][1]["programs"]))
    assert row["max_slowdown"] >= 1.0
    # the command line: the mix's columns, a report without a heat map, and replay of a row
    rc, out, err = cli("compare", *programs, "--mix", "-p", "dram-dcpmm", "--policies", pols, "-c", "0.2",
                       "--timing", "detailed", "-q", "-o", tmp_path / "rep")
    assert rc == 0, err
    assert "weighted speedup" in out and "zipf.tkt + stream.tkt" in out
    assert (tmp_path / "rep" / "index.html").exists() and not list((tmp_path / "rep").glob("heatmap-*"))
    rc, out, err = cli("compare", *programs, "--mix", "-p", "dram-dcpmm", "--policies", "first-touch", "-c", "0.2",
                       "--timing", "detailed", "-q", "--json")
    (tmp_path / "r.json").write_text(out.splitlines()[0])
    rc, out, err = cli("replay", tmp_path / "r.json")
    assert rc == 0 and "same figures, bit for bit" in out, out + err
    # a program that is not the one recorded is named (the run computes each program's digest)
    d = json.loads((tmp_path / "r.json").read_text())
    first, _ = d["config"]["trace_digest"].split("+")
    d["config"]["trace_digest"] = first + "+" + "0" * 64
    (tmp_path / "bad.json").write_text(json.dumps(d))
    rc, out, err = cli("replay", tmp_path / "bad.json")
    assert rc == 2 and err.count("\n") == 1 and "stream.tkt has digest" in err and "made from 000000000000" in err, err
    rc, out, err = cli("compare", programs[0], "--mix", "--timing", "detailed", "-q")
    assert rc == 2 and err.count("\n") == 1 and "--mix: give at least two traces" in err


def test_compare_threads_on_cores_and_replay(threads_trace, cli, tmp_path):
    df = tierkit.compare(threads_trace, "dram-dcpmm", "first-touch,history:period=2K", 0.2, timing="detailed", cores=2,
                         progress=False)
    for r in df.attrs["results"]:
        want = tierkit.run(threads_trace, "dram-dcpmm", r["policy"], 0.2, timing="detailed", cores=2, progress=False)
        assert r["runtime_ns"] == want["runtime_ns"] and [c["accesses"] for c in r["cores"]] == [3000, 3000]
    rc, out, err = cli("compare", threads_trace, "--cores", "2", "-p", "dram-dcpmm", "--policies", "history:period=2K",
                       "-c", "0.2", "--timing", "detailed", "-q", "--json")
    assert rc == 0, err
    (tmp_path / "r.json").write_text(out.splitlines()[0])
    rc, out, err = cli("replay", tmp_path / "r.json")
    assert rc == 0 and "same figures, bit for bit" in out, out + err
    d = json.loads((tmp_path / "r.json").read_text())
    d["config"]["trace_digest"] = "ab" * 32
    (tmp_path / "bad.json").write_text(json.dumps(d))
    rc, out, err = cli("replay", tmp_path / "bad.json")
    assert rc == 2 and err.count("\n") == 1 and "threads.tkt has digest" in err, err
