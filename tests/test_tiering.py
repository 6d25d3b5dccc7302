"""HyPlacer and OS-level tiering from the front ends: the tiering policies of seed 004 and Linux are
listed with their sources, run from Python and the CLI on a phased trace with their periods scaled
to it, and bad values of the new parameters and platform fields are one-line errors."""
import json

import pytest

import tierkit
from test_cli_errors import one_error_line

TIERING = ("hyplacer", "autonuma-tiering", "tpp", "nimble", "memos", "clock-dwf", "damon-tiering")

# the phased trace takes a few ms of simulated time: periods of tens of µs
SCALED = [
    "hyplacer:interval=20us,delay=2us",
    # rate_window_ms: the kernel's 1 s window, scaled like the periods (task_scan_min's floor)
    "autonuma-tiering:scan_period_ms=0.02,scan_delay_ms=0.02,rate_window_ms=0.02,hot_threshold_ms=0.02,min_free_kbytes=4",
    "tpp:scan_period_ms=0.02,scan_delay_ms=0.02,rate_window_ms=0.02,min_free_kbytes=4",
    "nimble:period=50us",
    "memos:period=50us,max_pages=200",
    "clock-dwf",
    "damon-tiering:sample=1us,aggr=20us,quota_reset=100us,check_ns=0.5,hot_goal_used_bp=0",
]


def test_every_tiering_policy_is_listed_with_sources():
    df = tierkit.policies()
    for name in TIERING:
        row = df[df["name"] == name]
        assert len(row) == 1, name
        assert row["source"].iloc[0], name


def test_dynamic_policies_beat_first_touch_on_phases(phases_trace):
    """Every hot subset changes at each phase: first touch keeps the first pages in DRAM,
    the dynamic policies move the new phase's pages in (all but the partitioned clock-dwf,
    which only moves written pages, and memos, which starts from DCPMM)."""
    df = tierkit.compare(phases_trace, platform="dram-dcpmm", policies=["first-touch", *SCALED], fast_capacity=0.25,
                         timing="detailed", progress=False, baseline="first-touch")
    by = df.set_index("policy")
    for spec in SCALED:
        assert by.loc[spec, "runtime_ns"] > 0, spec
    for spec in SCALED[:4]:
        assert by.loc[spec, "migrations"] > 0, spec
        assert by.loc[spec, "fast_hit_ratio"] > by.loc["first-touch", "fast_hit_ratio"], spec


def test_hyplacer_time_series_from_the_cli(cli, phases_trace, tmp_path):
    ts = tmp_path / "h.csv"
    rc, out, err = cli("simulate", phases_trace, "-p", "dram-dcpmm", "-c", "0.25", "--policy", SCALED[0],
                       "--timeseries", ts, "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert r["stats"]["policy"]["name"] == "hyplacer"
    head = ts.read_text().splitlines()[0]
    assert head.split(",")[:3] == ["time_ms", "mode", "dram_usage"], head


@pytest.mark.parametrize(
    "policy,needle",
    [
        ("hyplacer:dram_target=1.5", "dram_target"),
        ("hyplacer:delay=2s", "delay"),
        ("autonuma-tiering:hot_threshold_ms=fast", "hot_threshold_ms"),
        ("damon-tiering:min_nr_regions=0", "min_nr_regions"),
        ("tpp:activate=never", "activate"),
    ],
)
def test_bad_tiering_parameters_are_one_line(cli, zipf_trace, policy, needle):
    line = one_error_line(*cli("simulate", zipf_trace, "-p", "dram-dcpmm", "--policy", policy))
    assert needle in line, line


def test_bad_loaded_latency_curve_names_the_file_and_key(cli, zipf_trace, tmp_path):
    p = tmp_path / "box.toml"
    p.write_text("""name = "box"
[[tiers]]
name = "DRAM"
capacity = "50%"
read_latency_ns = 100.0
write_latency_ns = 100.0
read_bw_gb_per_s = 20.0
write_bw_gb_per_s = 20.0
loaded_latency = [[0.5, 1.2], [0.4, 1.5]]
[[tiers]]
name = "SLOW"
read_latency_ns = 300.0
write_latency_ns = 300.0
read_bw_gb_per_s = 10.0
write_bw_gb_per_s = 5.0
""")
    line = one_error_line(*cli("simulate", zipf_trace, "-p", p))
    assert "box.toml" in line and "loaded_latency" in line, line
