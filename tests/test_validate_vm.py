"""The reduced kernel validation (issue 18; docs/validation.md): one workload (`phases`, a moving
hot set), one policy (`autonuma-tiering`, Linux's NUMA-balancing tiering mode), run end to end by
`tierkit validate`'s harness: in the testbed VM with node 0 shrunk below the footprint, recorded
with the tracer, simulated with tierkit's model of the same policy on the VM's capacities, and
compared on the instruction-aligned clock.

The property checked is one the model can fail: the kernel and the model both promote and
demote the phases' moving hot set, the model's promotions and demotions are within a factor of
RATIO_FACTOR of the kernel's, and the program's mean fast-node residency within
RESIDENCY_POINTS points. The factor is far wider than the issue's goal (±30%): on this run the
model promotes about 7-23x more than the kernel (the kernel's node-0 watermarks, raised by THP's
recommended min_free_kbytes, sit above the free memory the program starts with; the model derives
its watermarks from the fast tier's capacity: docs/validation.md, "What remains different").
The test keeps the model from drifting further from the kernel. About a minute (VM boot, one run of about
5 s under TCG, a 3 s recording, two simulations).
"""
import json
from pathlib import Path

import pytest

from conftest import ROOT, require_testbed, skip_or_fail_in_ci

BIN = ROOT / "target" / "release" / "tierkit-run"
WL = ROOT / "workloads" / "build"
RATIO_FACTOR = 40.0
RESIDENCY_POINTS = 15.0
SPECS = {"phases": ("moving hot set", "phases", ("--size", "medium", "--work", "0.1"))}


@pytest.mark.vm
def test_autonuma_tiering_model_against_the_kernel_on_a_moving_hot_set(tmp_path):
    require_testbed()
    for path, how in ((BIN, "cargo build --release -p tierkit-run"), (WL / "phases", "make -C workloads")):
        if not path.is_file():
            skip_or_fail_in_ci(f"{path} is missing ({how}; make test-vm builds it)", f"{path} is missing ({how})")
    from tierkit import validate as v

    out = tmp_path / "validation.json"
    res = v.validate(["phases"], ["autonuma-tiering"], out=out, work=tmp_path, progress=False, scales=(1.0,), specs=SPECS)
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
    # both sides promote (hint faults on node-1 pages under the threshold) and demote (kswapd)
    assert k["promotions"] > 0 and k["demotions"] > 0 and k["hint_faults"] > 0, k
    assert m["promotions"] > 0 and m["demotions"] > 0 and m["hint_faults"] > 0, m
    assert 1 / RATIO_FACTOR <= m["promotions_ratio"] <= RATIO_FACTOR, (m["promotions"], k["promotions"])
    assert 1 / RATIO_FACTOR <= m["demotions_ratio"] <= RATIO_FACTOR, (m["demotions"], k["demotions"])
    assert abs(m["residency_diff_points"]) <= RESIDENCY_POINTS, (m["residency_mean"], k["residency_mean"])
