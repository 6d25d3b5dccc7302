"""Long-period policies on short traces (docs/models.md): ``--repeat N`` and ``--time-scale K``
from the CLI and the Python API. The engine-level checks (repeat equals the concatenated
trace bit for bit, costs divided exactly) are in crates/tierkit-core/tests/time_scale.rs."""
import pytest

import tierkit
from tierkit import api


def one_error_line(rc, out, err):
    assert rc == 2, (rc, out, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("tierkit: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("args,key", [(["--time-scale", "0"], "--time-scale"), (["--time-scale", "-3"], "--time-scale"),
                                      (["--time-scale", "nan"], "--time-scale"), (["--time-scale", "x"], "--time-scale"),
                                      (["--repeat", "0"], "--repeat"), (["--repeat", "-1"], "--repeat")])
def test_bad_scales_are_one_line_exit_2(cli, zipf_trace, args, key):
    for cmd in (["simulate", zipf_trace, "-c", "0.2"], ["compare", zipf_trace, "--policies", "first-touch", "-c", "0.2"]):
        line = one_error_line(*cli(*cmd, *args))
        assert key in line, line


def test_time_scale_one_is_the_plain_run_bit_for_bit(cli, zipf_trace):
    base = ["simulate", zipf_trace, "-p", "dram-dcpmm", "-c", "0.3", "-t", "detailed", "-P", "hyplacer:interval=200us,delay=20us", "--json", "-q"]
    rc, plain, err = cli(*base)
    assert rc == 0, err
    rc, k1, err = cli(*base, "--time-scale", "1", "--repeat", "1")
    assert rc == 0, err
    assert plain == k1


def test_repeat_and_time_scale_are_recorded_and_replay(zipf_trace):
    spec = "autonuma-tiering:scan_period_ms=2,scan_delay_ms=2,scan_size_mb=1,min_free_kbytes=4"
    r = tierkit.run(zipf_trace, "dram-dcpmm", spec, 0.3, timing="detailed", progress=False, repeat=3, time_scale=10)
    one = tierkit.run(zipf_trace, "dram-dcpmm", "first-touch", 0.3, timing="detailed", progress=False)
    c = r["config"]
    assert (c["repeat"], c["time_scale"]) == (3, 10.0)
    assert r["accesses"] == 3 * one["accesses"] and r["pages"] == one["pages"]
    # the config keeps the policy as given; the scaled parameters are alongside
    assert "scan_period_ms=2," in c["policy"] and "scan_period_ms=0.2," in c["scaled_policy"]
    # replaying the recorded configuration gives the same numbers
    again = tierkit.run(zipf_trace, "dram-dcpmm", c["policy"], 0.3, timing=c["timing"], progress=False,
                        repeat=c["repeat"], time_scale=c["time_scale"])
    assert again["runtime_ns"] == r["runtime_ns"] and again["stats"] == r["stats"]
    # and so does `tierkit replay`, which reads both from the config
    from tierkit import replaying as rp

    assert rp.differences(r, rp.replay(r, progress=False)) == []


def test_compare_applies_both_to_every_run(zipf_trace):
    df = api.compare(zipf_trace, "dram-dcpmm", "first-touch,hyplacer", 0.3, progress=False, repeat=2, time_scale=1000)
    assert set(df["repeat"]) == {2} and set(df["time_scale"]) == {1000.0}
    one = api.compare(zipf_trace, "dram-dcpmm", "first-touch", 0.3, progress=False)
    ft = df[df["policy"] == "first-touch"].iloc[0]
    assert ft["accesses"] == 2 * one["accesses"].iloc[0]
    # simple model, no migration: two passes take exactly twice one pass
    assert ft["runtime_ns"] == pytest.approx(2 * one[one["policy"] == "first-touch"]["runtime_ns"].iloc[0], rel=1e-12)


def test_python_policies_replay_but_cannot_be_time_scaled(zipf_trace):
    class Nothing(tierkit.PeriodicPolicy):
        name = "nothing"
        period = 5000

        def decide(self, view):
            self.calls = getattr(self, "calls", 0) + 1
            return []

    p = Nothing()
    r = tierkit.run(zipf_trace, "dram-dcpmm", p, 0.3, progress=False, repeat=2)
    # 50,000 accesses twice, a period every 5,000: 19 boundaries
    assert r["accesses"] == 100_000 and p.calls == 19
    # from Python, the error names the parameter (the command line says --time-scale)
    with pytest.raises(tierkit.TierkitError, match="^time_scale: .*leave time_scale at 1"):
        tierkit.run(zipf_trace, "dram-dcpmm", Nothing(), 0.3, progress=False, time_scale=10)


def test_policies_list_says_what_time_scaling_does(cli):
    rc, out, err = cli("policies", "--json")
    assert rc == 0, err
    import json

    ps = {p["name"]: {a["name"]: a.get("time_scale") for a in p["params"]} for p in json.loads(out)}
    assert ps["autonuma-tiering"]["hint_fault_ns"] == "divided by K"
    assert ps["autonuma-tiering"]["promote_rate_limit_mib_per_s"] == "multiplied by K"
    assert ps["hyplacer"]["interval"] == "divided by K when given in time"
    assert ps["hyplacer"]["write_threshold_mb_per_s"] is None  # a measured bandwidth: the platform's
    assert ps["otf"]["remap_lookup_cycles"] is None  # paid per access
    assert ps["hyplacer"]["max_pages"] is None
