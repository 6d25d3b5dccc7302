"""The reduced kernel validation (docs/validation.md): one workload (`phases`, a moving
hot set), one policy (`autonuma-tiering`, Linux's NUMA-balancing tiering mode), run end to end by
`tierkit validate`'s harness: in the testbed VM with node 0 shrunk below the footprint, recorded
with the tracer, simulated with tierkit's model of the same policy on the VM's capacities, and
compared on the instruction-aligned clock.

What is checked, each of which can fail: the model ran with node 0's own watermarks, read from
/proc/zoneinfo at the program's start (DMA32's plus the floor the allocator leaves in the DMA
zone), and with the other programs' pages on node 0, which its kswapd demoted; both sides promote
and demote; the model's demotions are within DEMOTIONS_FACTOR of the kernel's and the mean
fast-node residency within RESIDENCY_POINTS points, against the mean of two kernel runs (one run's
hot-data residency swings: 53-77 % seen). Measured with three repeats
(`tierkit validate --policies autonuma-tiering --repeats 3`): the kernel's demotions ranged
5,038-12,639 and the model's were 180k at K (ratio 14-36 against single runs), residency 54-65 %
in the kernel's runs against 39 % in the model. The promotions are not bounded here: the model
promotes 95-190x the kernel's mean and the kernel's own runs range 12x (151-1,895), so any bound
that single runs meet would be loose; docs/validation.md, "What remains different", says why.
About two and a half minutes (VM boot, a calibration of the run's length to at least 8 s in the VM,
two runs, a recording, two simulations).
"""
import json

import pytest

from conftest import ROOT, require_testbed, skip_or_fail_in_ci

BIN = ROOT / "target" / "release" / "tierkit-run"
WL = ROOT / "workloads" / "build"
DEMOTIONS_FACTOR = 40.0
RESIDENCY_POINTS = 40.0
SPECS = {"phases": ("moving hot set", "phases", ("--size", "medium", "--work", "0.1"))}


@pytest.mark.vm
def test_autonuma_tiering_model_against_the_kernel_on_a_moving_hot_set(tmp_path):
    require_testbed()
    for path, how in ((BIN, "cargo build --release -p tierkit-run"), (WL / "phases", "make -C workloads")):
        if not path.is_file():
            skip_or_fail_in_ci(f"{path} is missing ({how}; make test-vm builds it)", f"{path} is missing ({how})")
    from tierkit import validate as v

    out = tmp_path / "validation.json"
    # runs of at least 8 s in the VM (validate's default; calibrated: on an idle host a run at
    # length 1 can end before the kernel's second NUMA scan, and then promote nothing; with 4 s
    # on a loaded host a calibrated length-1 run took 2.0 s in one repeat and 4.9 s in the next,
    # and the first had one sample of the hot data)
    # two kernel runs, judged by their mean: one run's hot-data residency swings widely (the
    # CI run of 2026-11-29 read 77 % in the kernel where runs here read 53-55 %)
    res = v.validate(["phases"], ["autonuma-tiering"], out=out, work=tmp_path, progress=False, scales=(1.0,), specs=SPECS, repeats=2,
                     min_vm_s=8.0)
    assert res["lengths"]["phases"] >= 1 and res["results"][0]["kernel"]["wall_s"] >= 6.0, (res["lengths"], res["results"][0]["kernel"]["wall_s"])
    # the harness wrote what make validate-kernel writes
    saved = json.loads(out.read_text())
    assert saved["results"][0]["promotions_ratio"] == res["results"][0]["promotions_ratio"]
    assert "| phases | autonuma-tiering |" in out.with_suffix(".md").read_text()
    r = res["results"][0]
    k, m = r["kernel"], r["model"]["x1"]
    # the fast node was smaller than the program (128 MiB): the hugetlb reservation held
    assert k["node0_free_bytes"] < 100 << 20, k["node0_free_bytes"]
    # the clock alignment is the trace's instructions over the VM's wall time
    assert r["clock"]["time_scale"] == pytest.approx(k["wall_s"] / r["clock"]["first_touch_sim_s"])
    # the model ran with node 0's own watermarks, read from /proc/zoneinfo at the program's
    # start: the largest zone's (DMA32), far
    # above the formula's few pages for a 64 MiB tier (min_free_kbytes is raised for THP)
    kp = r["model_params"]["node0"]
    dma32 = max(kp["zones"], key=lambda z: z["managed"])
    assert dma32["zone"] == "DMA32" and dma32["low"] > 4096, kp
    # (the DMA zone is the model's second zone: its own watermarks, dma_* parameters)
    for w in ("min", "low", "high", "promo"):
        assert m["watermarks"][w] == dma32[w] == kp[f"wmark_{w}_pages"], (w, m["watermarks"], kp)
    assert kp["dma_zone_pages"] > 0 and kp["dma_protection_pages"] > 0, kp
    # ... and with the other programs' pages on node 0 (the VM's rootfs), which its kswapd demoted
    assert kp["fast_other_pages"] > 1000 and 0 < m["kswapd"]["demoted_other"] <= kp["fast_other_pages"], (kp, m["kswapd"])
    # both sides promote (hint faults on node-1 pages under the threshold) and demote (kswapd)
    assert k["promotions"] > 0 and k["demotions"] > 0 and k["hint_faults"] > 0, k
    assert m["promotions"] > 0 and m["demotions"] > 0 and m["hint_faults"] > 0, m
    assert 1 / DEMOTIONS_FACTOR <= m["demotions_ratio"] <= DEMOTIONS_FACTOR, (m["demotions"], k["demotions"])
    assert abs(m["residency_diff_points"]) <= RESIDENCY_POINTS, (m["residency_mean"], k["residency_mean"])
    # the hot data (the phase's quarter of the array, named by the program as it runs): the
    # kernel's pages per node of each quarter from tierkit-run's --region-series, the model's
    # from the same arrays watched in the trace, each switching at the program's own marks
    assert [h[1] for h in k["hot_regions"]] == [["part0"], ["part1"], ["part2"], ["part3"]], k["hot_regions"]
    assert len(k["hot_residency_series"]) >= 3 and len(m["hot_residency_series"]) >= 3
    assert abs(m["hot_residency_diff_points"]) <= RESIDENCY_POINTS, (
        m["hot_residency_mean"], k["hot_residency_mean"], [x["hot_residency_mean"] for x in k["runs"]], r["clock"], res["lengths"])
