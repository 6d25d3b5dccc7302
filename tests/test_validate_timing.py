"""tierkit validate --timing (docs/validation.md, "Predicted runtimes against measured ones"):
the parts that need no VM. The VM side is in tests/test_slow_tier_vm.py."""
import pytest

from tierkit import validate_timing as vt

CAL = {"cache_hit_chase_ns": 150.0,
       "nodes": [{"node": 0, "chase_ns": 1150.0, "stream_gb_per_s": 0.027, "move_ns_per_page": 80000.0},
                 {"node": 1, "chase_ns": 3150.0, "stream_gb_per_s": 0.0145, "move_ns_per_page": 100000.0}],
       "slow_tier": {"ips": 25_000_000, "llc_bytes": 4 << 20, "llc_ways": 16}}


def test_the_platform_is_written_from_the_calibration(tmp_path):
    from tierkit import api

    p = tmp_path / "vm.toml"
    p.write_text(vt.platform_toml(CAL, 64 << 20))
    info = api.platform(str(p))  # it loads: every field in range
    text = p.read_text()
    # a tier's latency is its chase step less a step in the cache
    assert "read_latency_ns = 1000.00" in text and "read_latency_ns = 3000.00" in text
    assert 'capacity = "65536K"' in text
    # one 64-byte line per latency, and the mean move_pages cost per page
    assert "read_bw_gb_per_s = 0.064000" in text and "per_page_ns = 90000.0" in text
    assert [t["read_latency_ns"] for t in info["tiers"]] == [1000.0, 3000.0]
    # the all-fast reference: node 0 unlimited
    assert "capacity" not in vt.platform_toml(CAL, None)


def test_kendall_tau():
    assert vt.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert vt.kendall_tau([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0
    assert vt.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert vt.kendall_tau([1], [1]) is None


def test_validate_timing_refuses_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        vt.validate_timing(["nope"], ["first-touch"], work=tmp_path)
    with pytest.raises(ValueError, match="unknown policy 'oracle'"):
        vt.validate_timing(["rwmix"], ["oracle"], work=tmp_path)
