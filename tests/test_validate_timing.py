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


def test_every_touched_page_is_charged_its_first_touch_fault_under_every_policy(tmp_path):
    """The paced VM pays a page fault (allocation, zeroing) for each page a program touches,
    whatever the policy: the prediction charges the trace's pages at memlat's measured cost."""
    import json

    from tierkit import api

    pages = 100
    api.write_trace(tmp_path / "timing-w.tkt", [p * 4096 + (i % 64) * 64 for i in range(20) for p in range(pages)])
    cache = "L1:4096K:16"
    (tmp_path / "timing-w.record.json").write_text(json.dumps({"args": ["--x"], "cache": cache, "instructions": 25_000_000}))
    cal = {**CAL, "nodes": [{**n, "fault_ns_per_page": 50_000.0} for n in CAL["nodes"]]}
    run = {"wall_s": 1.0, "node0_free_bytes": 1 << 20, "node0_usable_bytes": 50 * 4096, "node0_model_params": None}
    meas = {"calibration": cal, "runs": {("w", p): [run] for p in ("all-slow", "all-fast", "first-touch")}}
    specs = {"w": ("test", "w", ("--x",))}
    pred = vt.predict(["w"], ["all-slow", "all-fast", "first-touch"], specs, meas, tmp_path, progress=False)
    for p in ("all-slow", "all-fast", "first-touch"):
        r = pred[("w", p)]
        assert r["fault_s"] == pytest.approx(pages * 50e-6)
        assert r["compute_s"] == pytest.approx(1.0)  # 25 M instructions at 25 M/s
        assert r["predicted_s"] == pytest.approx(r["memory_s"] + r["compute_s"] + r["fault_s"])
    # without the figure (an older calibration) nothing is charged
    meas["calibration"] = CAL
    assert vt.predict(["w"], ["all-slow"], specs, meas, tmp_path, progress=False)[("w", "all-slow")]["fault_s"] == 0.0


def _row(w, p, prom, rng, within, lag=0.0):
    k = {"promotions": prom, "demotions": prom / 2, "wall_s": 40.0, "repeats": 2,
         "range": {"promotions": list(rng), "demotions": [rng[0] / 2, rng[1] / 2]}, "runs": [{"lag_s": lag}]}
    return {"workload": w, "policy": p, "kernel": k, "model": {"x1": {"within_goals": within}}}


def test_two_kernel_validations_side_by_side_judge_each_row_by_the_kernels_own_spread():
    from tierkit import validate as v

    a = {"results": [_row("phases", "autonuma-tiering", 100, (80, 120), True), _row("rwmix", "damon-tiering", 100, (95, 105), False)]}
    b = {"results": [_row("phases", "autonuma-tiering", 110, (90, 130), True), _row("rwmix", "damon-tiering", 200, (190, 210), False, 2.5)]}
    md = v.side_by_side(a, b, ("idle", "loaded")).splitlines()
    assert "promotions idle" in md[0] and len(md) == 4
    assert "| phases | autonuma-tiering |" in md[2] and "| yes | yes / yes |" in md[2]
    # 200 is outside 95-105 and 100 outside 190-210: not within the spread; the host's lag shown
    assert "| no | no / no | 0.00 / 2.50 |" in md[3]


def test_the_cli_refuses_slow_tier_with_timing_or_guided(cli):
    for extra in (["--timing"], ["--guided"]):
        rc, out, err = cli("validate", "--slow-tier", *extra)
        assert rc == 2 and "--slow-tier" in err and "Traceback" not in err, err


def test_soft_dirty_tracking_costs_a_clear_per_present_page_and_a_fault_per_page_first_written_in_a_period(tmp_path):
    """tierkit-run's daemons clear the soft-dirty bits at each observation: the next write to
    a page faults once per period (not per write), and the clear walks every page present."""
    from tierkit import api

    addr, write, insn = [], [], []

    def acc(period, page, w, k):
        addr.append(page * 4096 + 64 * k)
        write.append(w)
        insn.append(period * 1000 + len(insn))

    for p in range(10):       # period 0: every page first touched (written)
        acc(0, p, True, 0)
    for p in range(5):        # period 1: pages 0-4 written twice each: one fault each
        acc(1, p, True, 1)
        acc(1, p, True, 2)
    for p in range(10):       # period 2: only reads
        acc(2, p, False, 3)
    acc(3, 9, True, 4)        # period 3: page 9 written
    t = tmp_path / "sd.tkt"
    api.write_trace(t, addr, write, insn)
    r = vt.soft_dirty_cost(t, total_s=4.0, period_s=1.0, clear_ns=100.0, wp_ns=10_000.0)
    assert r["periods"] == 4 and r["written_page_periods"] == 6 and r["present_page_periods"] == 40
    assert r["seconds"] == pytest.approx((40 * 100 + 6 * 10_000) / 1e9)


def test_remodel_refuses_a_file_without_measurements_in_one_line(cli, tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text('{"rows": []}')
    rc, out, err = cli("validate", "--timing", "--remodel", bad, "--out", tmp_path / "new.json")
    assert rc == 2 and "old.json" in err and "measurements" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "new.json").exists()
    rc, _, err = cli("validate", "--remodel", bad)
    assert rc == 2 and "only with --timing" in err
    rc, _, err = cli("validate", "--timing", "--remodel", bad, "--out", bad)
    assert rc == 2 and "overwrite" in err


def test_vcpus_is_checked_and_only_for_timing(cli):
    rc, _, err = cli("validate", "--timing", "--vcpus", "9")
    assert rc == 2 and "--vcpus: 9 is outside [1, 8]" in err
    rc, _, err = cli("validate", "--vcpus", "4")
    assert rc == 2 and "only with --timing" in err
