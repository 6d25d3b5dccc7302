"""One description of a run (docs/models.md, "One description of a run"): every result records
the run it was made from as ``config.run``, and replaying it is running that again. A property
test over every kind of result — a simulation, a compare's rows, a mix, a trace's threads on
cores, a guided run whose guidance was made on the fly, a Kleio run whose models were trained
on the fly — with generated platforms, capacities, timing models, repeats and time scales:
the replay gives the same result, bit for bit (every figure, the statistics tree, the run's
description), through the API and through `tierkit replay`.

Derandomized and short (a fixed set of examples); TIERKIT_FUZZ_EXAMPLES=N
TIERKIT_FUZZ_SEED=random runs more."""
import json
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tierkit  # noqa: E402
from tierkit import replaying as rp  # noqa: E402

from conftest import VENDORED, run_cli  # noqa: E402

SCALE = int(os.environ.get("TIERKIT_FUZZ_EXAMPLES", "0")) / 12 or 1
PROPS = settings(derandomize=os.environ.get("TIERKIT_FUZZ_SEED") != "random", database=None, deadline=None,
                 max_examples=int(12 * SCALE), suppress_health_check=list(HealthCheck))


def same(a: dict, b: dict) -> None:
    """Bit for bit: the figures, the statistics and the description of the run."""
    assert rp.differences(a, b) == []
    assert json.dumps(a["stats"], sort_keys=True) == json.dumps(b["stats"], sort_keys=True)
    assert json.dumps(a["config"]["run"], sort_keys=True) == json.dumps(b["config"]["run"], sort_keys=True)
    assert a.get("warnings") == b.get("warnings")


def replayed(r: dict, tmp_path, name: str) -> dict:
    """The replay through the API, checked against the one `tierkit replay` makes of the file."""
    new = rp.replay(json.loads(json.dumps(r)), progress=False)
    f = tmp_path / f"{name}.json"
    f.write_text(json.dumps(r))
    rc, out, err = run_cli("replay", f, "--json", "-q")
    assert rc == 0, err
    same(new, json.loads(out.splitlines()[0]))
    return new


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    out = {}
    for s, kind in ((1, "zipf"), (2, "phases")):
        p = d / f"{kind}.tkt"
        tierkit.synth(kind, p, accesses=12_000, pages=600, seed=s, write_ratio=0.3, progress=False)
        out[kind] = p
    return out


POLICIES = ["first-touch", "history:period=1K", "hyplacer:interval=50us,delay=10us", "otf:threshold=8",
            "autonuma-tiering:scan_period_ms=0.05,scan_delay_ms=0", "interleave:weights=4/4", "memos:period=100us"]


@PROPS
@given(policy=st.sampled_from(POLICIES), platform=st.sampled_from(["dram-pmem", "hbm-pcm", "dram-dcpmm", "hbm-dram-cxl"]),
       cap=st.sampled_from([0.1, 0.25, "64K", "50%", "125%"]), timing=st.sampled_from(["simple", "detailed"]),
       repeat=st.sampled_from([1, 2]), time_scale=st.sampled_from([1.0, 10.0]), kind=st.sampled_from(["zipf", "phases"]))
def test_a_simulation_replays_bit_for_bit(traces, tmp_path_factory, policy, platform, cap, timing, repeat, time_scale, kind):
    r = tierkit.run(traces[kind], platform, policy, cap, timing=timing, repeat=repeat, time_scale=time_scale, progress=False)
    assert r["config"]["run"]["policy"] == policy and r["config"]["run"]["platform"]["name"] == platform
    same(r, replayed(r, tmp_path_factory.mktemp("sim"), "r"))


def test_compare_rows_a_mix_and_threads_on_cores_replay_bit_for_bit(traces, threads_trace, tmp_path):
    df = tierkit.compare([traces["zipf"], traces["phases"]], "dram-dcpmm", "first-touch,history:period=2K,clock-dwf", 0.2,
                         timing="detailed", progress=False)
    for i, r in enumerate(df.attrs["results"]):
        same(r, replayed(r, tmp_path, f"row{i}"))
    mix = tierkit.run([traces["zipf"], traces["phases"]], "dram-dcpmm", "history:period=2K", 0.2, timing="detailed",
                      mix=True, quantum=2, progress=False)
    assert [os.path.basename(m) for m in mix["config"]["run"]["mix"]] == ["phases.tkt"]
    new = replayed(mix, tmp_path, "mix")
    same(mix, new)
    assert new["mix"]["weighted_speedup"] == mix["mix"]["weighted_speedup"]
    cores = tierkit.run(threads_trace, "dram-dcpmm", "history:period=2K", 0.2, timing="detailed", cores=2, progress=False)
    assert cores["config"]["run"]["cores"] == 2
    same(cores, replayed(cores, tmp_path, "cores"))


def test_a_guided_run_made_on_the_fly_replays_from_the_guidance_it_carries(tmp_path):
    r = tierkit.run(VENDORED / "sqlite3-orders.tkt", "hbm-ddr4", "guided:strategy=thermos,mode=per-phase", 0.25,
                    progress=False)
    assert "guidance=" in r["config"]["run"]["policy"] and "guidance" in r["config"]["inputs"]
    same(r, replayed(r, tmp_path, "guided"))


def test_a_kleio_run_replays_from_the_predictions_it_carries(traces, tmp_path):
    pytest.importorskip("torch")
    r = tierkit.run(traces["phases"], "dram-pmem", "kleio:pages=0.1,period=200,history=4,hidden=8,epochs=2,threads=1", 0.2,
                    progress=False)
    assert "predictions=" in r["config"]["run"]["policy"] and "predictions" in r["config"]["inputs"]
    same(r, replayed(r, tmp_path, "kleio"))


def test_the_description_is_the_run_whatever_the_front_end(traces, tmp_path):
    """The CLI, the API and a sweep write the same description for the same run."""
    t = traces["zipf"]
    api = tierkit.run(t, "dram-pmem", "history:period=1K", 0.2, progress=False)
    rc, out, err = run_cli("simulate", t, "-p", "dram-pmem", "-P", "history:period=1K", "-c", "0.2", "--json", "-q")
    assert rc == 0, err
    cli = json.loads(out)
    assert json.dumps(api["config"]["run"], sort_keys=True) == json.dumps(cli["config"]["run"], sort_keys=True)
    (tmp_path / "s.yaml").write_text(f"traces: [{t}]\npolicies: ['history:period=1K']\ncapacities: [0.2]\nbaseline: null\n")
    tierkit.sweep(tmp_path / "s.yaml", tmp_path / "o", workers=1, progress=False, report=False)
    rec = json.loads((tmp_path / "o" / "results.jsonl").read_text().splitlines()[0])["result"]
    run = dict(rec["config"]["run"])
    assert run.pop("capacity") == {"0": "0.2"} and api["config"]["run"]["capacity"] == {"0": "0.2"}
    assert {k: v for k, v in api["config"]["run"].items() if k != "capacity"} == run


def test_a_result_made_before_results_recorded_their_run_still_replays(traces, tmp_path):
    r = tierkit.run(traces["phases"], "hbm-pcm", "otf:threshold=8", 0.25, timing="detailed", repeat=2, progress=False)
    old = json.loads(json.dumps(r))
    del old["config"]["run"]
    new = rp.replay(old, progress=False)
    assert rp.differences(r, new) == [] and json.dumps(r["stats"], sort_keys=True) == json.dumps(new["stats"], sort_keys=True)
