"""The Python API: pandas results, Python policies, determinism."""
import json

import numpy as np
import pytest

import tierkit

REQUIRED = ["trace", "platform", "policy", "accesses", "runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes", "energy_j"]


def test_simulate_returns_a_row_with_the_contract_columns(zipf_trace):
    df = tierkit.simulate(zipf_trace, platform="dram-pmem", policy="first-touch", fast_capacity=0.2)
    assert len(df) == 1
    for c in REQUIRED:
        assert c in df.columns
    assert df["accesses"][0] == 50_000
    r = df.attrs["results"][0]
    assert set(r["stats"]) == {"engine", "platform", "policy", "migration", "timing"}
    assert r["config"]["trace_digest"] and r["config"]["policy"] == "first-touch"


def test_same_inputs_same_results_bit_for_bit(zipf_trace):
    a = tierkit.run(zipf_trace, "dram-pmem", "interleave", fast_capacity=0.1)
    b = tierkit.run(zipf_trace, "dram-pmem", "interleave", fast_capacity=0.1)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_compare_normalizes_to_all_slow(zipf_trace):
    df = tierkit.compare(zipf_trace, "dram-pmem", "all-fast,first-touch", fast_capacity=0.2)
    assert list(df["policy"]) == ["all-fast", "first-touch", "all-slow"]
    norm = df.set_index("policy")["runtime_vs_all-slow"]
    assert norm["all-slow"] == 1.0
    assert norm["all-fast"] < norm["first-touch"] < 1.0


def test_python_policy_promotes_within_capacity(phases_trace):
    pol = tierkit.HotPromote(period=5000, top=32)
    df = tierkit.simulate(phases_trace, "dram-pmem", pol, fast_capacity=0.1)
    ft = tierkit.simulate(phases_trace, "dram-pmem", "first-touch", fast_capacity=0.1)
    r = df.attrs["results"][0]
    assert df["policy"][0] == "py-hot-promote"
    assert r["migrations"] > 0
    fast = r["stats"]["platform"]["tiers"][0]
    assert fast["used_pages"] <= fast["capacity_pages"]
    # the hot set moves between phases: promoting beats static first touch
    assert df["fast_hit_ratio"][0] > ft["fast_hit_ratio"][0]


def test_python_policy_exceptions_surface_unchanged(zipf_trace):
    class Broken(tierkit.PeriodicPolicy):
        name = "broken"
        period = 1000

        def decide(self, view):
            raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError, match="boom"):
        tierkit.simulate(zipf_trace, "dram-pmem", Broken(), fast_capacity=0.1)


def test_python_policy_bad_move_is_a_clear_error(zipf_trace):
    class Greedy(tierkit.PeriodicPolicy):
        name = "greedy"
        period = 1000

        def decide(self, view):
            # more promotions than free frames: the mechanics refuse
            return [tierkit.Migrate(int(p), 0) for p in view.pages[view.tier_of[view.pages] != 0]]

    with pytest.raises(tierkit.TierkitError, match="greedy"):
        tierkit.simulate(zipf_trace, "dram-pmem", Greedy(), fast_capacity=0.05)


def test_write_and_read_trace_round_trip(tmp_path):
    addr = np.array([0x1000, 0x2040, 0x1000, 0x9000], dtype=np.uint64)
    write = np.array([False, True, False, True])
    s = tierkit.write_trace(tmp_path / "t.tkt", addr, write, insn=[10, 20, 30, 45])
    assert s["accesses"] == 4 and s["pages"] == 3 and s["writes"] == 2
    df = tierkit.read_trace(tmp_path / "t.tkt")
    assert list(df["addr"]) == list(addr) and list(df["write"]) == list(write)
    assert list(df["insn"]) == [10, 20, 30, 45]
    info = tierkit.trace_info(tmp_path / "t.tkt")
    assert info["summary"]["footprint_bytes"] == 3 * 4096


def test_listings(zipf_trace):
    p = tierkit.policies()
    assert {"all-fast", "all-slow", "first-touch", "interleave"} <= set(p["name"])
    pl = tierkit.platforms()
    assert {"dram-pmem", "hbm-dram-cxl"} <= set(pl["platform"])
    assert (pl[pl["platform"] == "hbm-dram-cxl"]["tier"].max()) == 2
