"""The fast-node residency of the hot data (docs/validation.md, "Hot data"). A workload names its
arrays and, as it runs, which of them it works hardest on (WL_REGIONS, workloads/wl.h); the k-th
such mark is also the trace's user marker k (TIERKIT_MARK, tracer/tierkit.h), so that the model,
watching the same arrays in the trace, knows the same moments as the kernel run."""
import os
import shutil
import subprocess

import pytest

import tierkit
from tierkit import validate as v
from tierkit import workloads as wl


def test_regions_file_parses_and_a_cut_off_last_line_is_left_out():
    text = "region a 0x1000 8192\nregion b 0x10000 4096\nhot 1.5 a\nhot 3.25 a b\nhot 9"
    r = v.parse_regions(text)
    assert r["regions"] == [("a", 0x1000, 0x3000), ("b", 0x10000, 0x11000)]
    assert r["hot"] == [(1.5, ["a"]), (3.25, ["a", "b"])]
    assert v.parse_regions("") == {"regions": [], "hot": []}


def test_hot_residency_follows_the_latest_mark_and_skips_the_time_before_the_first():
    # (ms, region, fast, slow): a moves to the fast tier, then the hot data moves to b
    samples = [(500, "a", 0, 10), (500, "b", 0, 10),
               (1000, "a", 5, 5), (1000, "b", 0, 10),
               (1500, "a", 10, 0), (1500, "b", 2, 8),
               (2000, "a", 10, 0), (2000, "b", 6, 2)]
    hot = [(800, ["a"]), (1400, ["b"])]
    got = v.hot_residency(samples, hot)
    assert got == [(1.0, 0.5), (1.5, 0.2), (2.0, 0.75)]
    # several regions: pooled pages, not the mean of shares
    assert v.hot_residency(samples, [(0, ["a", "b"])])[1] == (1.0, 5 / 20)
    # pages never touched count nowhere; a hot set with no page yet gives no point
    assert v.hot_residency([(100, "a", 0, 0)], [(0, ["a"])]) == []
    # the time-weighted mean from the first point: 0.5 for 0.5 s, 0.2 for 0.5 s, 0.75 to the end
    assert v._mean_from(got, 2.5) == pytest.approx((0.5 * 0.5 + 0.2 * 0.5 + 0.75 * 0.5) / 1.5)


def test_the_models_marks_are_the_trace_markers_and_its_clock_is_scaled():
    r = {"watch": {"regions": ["a", "b"], "rows": [[10.0, 0, 7, 4, 0], [10.0, 1, 1, 0, 4], [20.0, 0, 0, 4, 0], [20.0, 1, 9, 1, 3]],
                   "marks": [[1, 5.0], [2, 15.0]]}}
    hot = [(1234.0, ["a"]), (5678.0, ["b"])]  # the traced run's own times do not matter
    assert v.model_hot_residency(r, hot, 100.0) == [(1.0, 1.0), (2.0, 0.25)]
    assert v.model_hot_residency({}, hot, 1.0) == []


needs_tracer = pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None,
                                  reason="valgrind and a C compiler are needed to record a workload")


@needs_tracer
def test_a_recorded_workload_gives_its_regions_and_marks_to_both_sides(tmp_path):
    prog = wl.path("phases")
    regions = tmp_path / "phases.regions"
    env = {**os.environ, "WL_REGIONS": str(regions)}
    args = ["--size", "small", "--work", "0.5"]
    # natively: stdout is the same with and without WL_REGIONS
    plain = subprocess.run([prog, *args], capture_output=True, text=True, check=True).stdout
    native = subprocess.run([prog, *args], capture_output=True, text=True, check=True, env=env).stdout
    assert plain == native
    nat = v.parse_regions(regions.read_text())
    assert [n for n, _, _ in nat["regions"]] == ["part0", "part1", "part2", "part3"]
    assert [h[1] for h in nat["hot"]] == [["part0"], ["part1"], ["part2"], ["part3"]]
    assert all(a[0] < b[0] for a, b in zip(nat["hot"], nat["hot"][1:]))
    # under the tracer: the marks are the trace's user markers 1..4, in order, between the
    # accesses of the phases they separate
    regions.unlink()
    os.environ["WL_REGIONS"] = str(regions)
    try:
        rec = tierkit.record(prog, args, tmp_path / "p.tkt", cache="none", force=True)
    finally:
        del os.environ["WL_REGIONS"]
    assert rec["status"] == 0
    traced = v.parse_regions(regions.read_text())
    df = tierkit.read_trace(tmp_path / "p.tkt")
    marks = [e for e in df.attrs["events"] if e["kind"]["kind"] == "marker" and e["kind"]["marker"] == "user"]
    assert [m["kind"]["id"] for m in marks] == [1, 2, 3, 4]
    (_, a0, b0), (_, _, b3) = traced["regions"][0], traced["regions"][3]
    # the array's accesses after marker 1 and before marker 2 are mostly in part0 (90% of the
    # phase's; the rest is the stack)
    between = df["addr"].iloc[marks[0]["at"]:marks[1]["at"]]
    in_array = between[(between >= a0) & (between < b3)]
    assert len(in_array) > 200_000 and ((in_array >= a0) & (in_array < b0)).mean() > 0.85
    # the model watches the arrays and sees the marks: part0 is hot from marker 1 on
    r = tierkit.run(tmp_path / "p.tkt", "dram-pmem", "first-touch", fast_capacity="2M",
                    watch=traced["regions"], watch_every_ns=1e5)
    assert [m[0] for m in r["watch"]["marks"]] == [1, 2, 3, 4]
    w = tierkit.api.watch_frame(r)
    assert set(w["region"]) == {"part0", "part1", "part2", "part3"}
    # first touch filled the 2 MiB fast tier with the start of the array (part0, most of part1), and
    # the last phase's hot data is on the slow tier
    series = v.model_hot_residency(r, traced["hot"], 1.0)
    assert series and series[0][1] > 0.9 and series[-1][1] < 0.1
