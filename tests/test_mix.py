"""Many cores sharing the tiers from the command line and Python (issue 19): a mix's result
per program and for the whole mix, the errors, and determinism. The models' hand-computed
cases are in crates/tierkit-core/tests/mix.rs."""
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
