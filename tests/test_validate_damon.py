"""`tierkit validate` simulates the DAMON tiering the kernel actually ran (docs/validation.md,
"DAMON tiering"): tierkit-run reads the two schemes back from sysfs once the kdamonds
are on (`damon_tiering[].effective`), and the model is set up from that, not from mtier.c's
intent. On Linux 6.12 the quota goals (node_mem_used_bp / node_mem_free_bp, Linux 6.16+) were
refused and a filter could only reject (allow filters: 6.14+), so the model runs on the plain
200 MiB per 1 s quota with the young filter on migrate_cold alone. With the goals the model's
quotas start at 1 byte (core.c damos_set_effective_quota: max(esz_bp, 10000) / 10000) and never
reached a page in these 2-7 s runs: it moved nothing where the kernel moved thousands of pages.
No VM needed: the read-back is a recorded report."""
import numpy as np

from tierkit import api
from tierkit import validate as v


def effective(action, goals, filters, apply_us=1_000_000):
    return {"action": action, "sz_applied": 0, "effective": {
        "sample_us": 5000, "aggr_us": 100000, "min_nr_regions": 10, "max_nr_regions": 1000,
        "region_start": 0, "region_end": 1 << 29, "target_nid": 0 if action == "migrate_hot" else 1,
        "min_nr_accesses": 1 if action == "migrate_hot" else 0, "max_nr_accesses": 4294967295 if action == "migrate_hot" else 0,
        "min_age": 0, "apply_interval_us": apply_us, "quota_bytes": 200 << 20, "quota_reset_interval_ms": 1000,
        "weight_sz_permil": 0, "weight_nr_accesses_permil": 100, "weight_age_permil": 100,
        "goals": goals, "filters": filters}}


def parse(spec):
    name, _, args = spec.partition(":")
    return name, dict(kv.split("=") for kv in args.split(","))


def test_linux_612_setup_is_simulated_without_goals_and_without_a_promotion_filter(tmp_path):
    # what tierkit-run read back on the testbed's 6.12: no goals, young filter (reject, no
    # `allow` file) on migrate_cold only
    run = {"damon_tiering": [effective("migrate_hot", [], []), effective("migrate_cold", [], [["young", True, None]])]}
    name, a = parse(v.damon_model_args(run))
    assert name == "damon-tiering"
    assert (a["hot_goal_used_bp"], a["cold_goal_free_bp"]) == ("0", "0")
    assert (a["young_filter"], a["hot_young_filter"]) == ("true", "false")
    assert (a["hot_quota"], a["cold_quota"], a["quota_reset"]) == (str(200 << 20), str(200 << 20), "1000ms")
    assert (a["sample"], a["aggr"], a["apply_aggrs"]) == ("5000us", "100000us", "10")
    assert (a["hot_min_accesses"], a["weight_nr_accesses"], a["weight_age"]) == ("1", "100", "100")
    # a kernel with node goals and allow filters (6.16): mtier's setup, the model's defaults
    run16 = {"damon_tiering": [effective("migrate_hot", [["node_mem_used_bp", 9970]], [["young", True, True]]),
                               effective("migrate_cold", [["node_mem_free_bp", 50]], [["young", True, False]], apply_us=0)]}
    _, b = parse(v.damon_model_args(run16))
    assert (b["hot_goal_used_bp"], b["cold_goal_free_bp"]) == ("9970", "50")
    assert (b["young_filter"], b["hot_young_filter"]) == ("true", "true")
    # no read-back (an older tierkit-run): the model's defaults
    assert v.damon_model_args({"damon_tiering": None}) == v.MODEL_ARGS["damon-tiering"]
    # the 6.12 spec is one the simulator takes, and its schemes act where mtier's goals would
    # not yet: 64 pages in DRAM of 32 (cold half first), hot half swept repeatedly
    pages = np.concatenate([np.arange(64), np.tile(np.arange(32, 64), 2000)]).astype(np.uint64)
    tr = tmp_path / "t.tkt"
    api.write_trace(tr, pages * 4096)
    # short intervals so that a tiny trace spans many quota windows
    a.update(sample="20us", aggr="200us", quota_reset="1ms")
    spec612 = "damon-tiering:" + ",".join(f"{k}={x}" for k, x in a.items())
    r = api.run(tr, "dram-dcpmm", spec612, fast_capacity=0.5, timing="simple", progress=False)
    pol = r["stats"]["policy"]
    assert pol["schemes"]["promote"]["young_filter"] is False and pol["schemes"]["demote"]["young_filter"] is True
    assert pol["schemes"]["promote"]["goal"] is None and pol["schemes"]["demote"]["stats"]["last_esz_bytes"] == 200 << 20
    # 32 cold pages down, 32 hot pages up, on the plain quota
    assert (pol["schemes"]["demote"]["stats"]["moved_pages"], pol["schemes"]["promote"]["stats"]["moved_pages"]) == (32, 32)
    # mtier's goals on the same run (25 quota windows): DRAM full, free_bp 0, score 0, so
    # demotion's quota doubles from 1 byte and reaches a page (4096 = 2^12) at the 12th
    # window; that page leaves DRAM 312 bp free, over twice the 50 bp goal: back to 1 byte.
    # Promotion at 31/32 used (score 9716) grows x1.028 per window: ~300 windows to a page.
    goals = api.run(tr, "dram-dcpmm", "damon-tiering:sample=20us,aggr=200us,quota_reset=1ms", fast_capacity=0.5, timing="simple", progress=False)
    g = goals["stats"]["policy"]["schemes"]
    assert (g["demote"]["stats"]["moved_pages"], g["promote"]["stats"]["moved_pages"]) == (1, 0)
    assert g["demote"]["stats"]["last_esz_bytes"] == 1 and g["promote"]["stats"]["last_esz_bytes"] == 1


def test_the_model_runs_at_the_pace_kdamond_kept_in_the_vm():
    """Under TCG kdamond's checks run at emulation speed: the testbed counted 2-3.6
    aggregations per VM second per kdamond instead of 10 (damon_aggregated tracepoint). A run
    of 12 VM s whose kdamonds aggregated 30 and 30 times ran at a quarter of the nominal 120:
    the model's 5 ms / 100 ms become 20 ms / 400 ms (so the schemes apply every 4 s); the quota
    window stays 1 s (jiffies in the kernel)."""
    run = {"wall_s": 12.0, "damon_aggregations": {"kdamond.0-171": 30, "kdamond.1-172": 30},
           "damon_tiering": [effective("migrate_hot", [], []), effective("migrate_cold", [], [["young", True, None]])]}
    assert v.damon_pace(run) == 4.0
    _, a = parse(v.damon_model_args(run, v.damon_pace(run)))
    assert (a["sample"], a["aggr"], a["apply_aggrs"], a["quota_reset"]) == ("20000us", "400000us", "10", "1000ms")
    # never faster than nominal; no count, no pace
    assert v.damon_pace({**run, "damon_aggregations": {"kdamond.0-1": 500}}) == 1.0
    assert v.damon_pace({**run, "damon_aggregations": None}) is None


def test_each_kernel_repeat_gets_its_own_model_on_its_node0(tmp_path):
    """A fresh VM's first run finds the rootfs (about 7,500 pages of tmpfs) on node 0 and the
    later ones find it demoted, so the kernel's repeats start from different node 0s: the
    DAMON model runs once per repeat, on that repeat's free frames, first-touch floor (the low
    watermark) and other programs' pages, and its counts are their mean, as the kernel's."""
    zones = [{"zone": "DMA", "managed": 3976, "free": 3776, "min": 177, "low": 220, "high": 264, "promo": 308, "protection": [0, 0, 0, 443, 443]},
             {"zone": "DMA32", "managed": 126000, "free": 12000, "min": 5209, "low": 6511, "high": 7813, "promo": 9115, "protection": [0] * 5}]
    kp0 = v.zone_model_params(zones, 40)
    kp1 = v.zone_model_params(zones, 0)
    # the floor is the one-zone low watermark: DMA32's low plus what the DMA zone keeps
    assert v.damon_node0_args(kp0) == f",wmark_low_pages={6511 + 220 + 443},wmark_min_pages={5209 + 220 + 443},fast_other_pages=40"
    assert v.damon_node0_args(kp1).endswith(",fast_other_pages=0")
    assert v.damon_node0_args(None) == ""
    # a tiny program: 64 pages written once, then its second half swept; node 0 has 32 free
    # frames and 16 other pages in one repeat, 48 free frames in the other; low watermark 8
    pages = np.concatenate([np.arange(64), np.tile(np.arange(32, 64), 400)]).astype(np.uint64)
    tr = tmp_path / "t.tkt"
    api.write_trace(tr, pages * 4096)
    small = lambda other: {**v.zone_model_params([{**zones[1], "low": 8, "min": 4}], other)}
    st = [effective("migrate_hot", [], [], apply_us=200), effective("migrate_cold", [], [["young", True, None]], apply_us=200)]
    for s in st:
        s["effective"].update(sample_us=20, aggr_us=200)
    rep = lambda free, other, prom, dem: {
        "workload": "w", "policy": "damon-tiering", "program": "w", "wall_s": 0.002, "node0_free_bytes": free * 4096,
        "vmstat": {}, "vmstat_series": [], "timeseries": [{"time_ms": 10, "pages_fast": 20, "pages_slow": 44}],
        "node0_model_params": small(other), "damon_aggregations": None,
        "damon_tiering": [{**st[0], "sz_applied": prom * 4096}, {**st[1], "sz_applied": dem * 4096}]}
    reps = [rep(32, 16, 30, 40), rep(48, 0, 20, 10)]
    kern = {"runs": {"w/damon-tiering": {**reps[0], "repeats": reps}}}
    traces = {"w": {"path": str(tr), "instructions": 10_000_000}}
    out = v.compare(kern, traces, tmp_path, progress=False, scales=(1.0,), specs={"w": ("moving", "w", [])})
    row = out["results"][0]
    per = row["model_params"]["per_repeat"]
    assert [p["fast_capacity_bytes"] for p in per] == [(32 + 16) * 4096, 48 * 4096]
    assert per[0]["spec"].endswith(",wmark_low_pages=8,wmark_min_pages=4,fast_other_pages=16")
    assert per[1]["spec"].endswith(",wmark_low_pages=8,wmark_min_pages=4,fast_other_pages=0")
    m = row["model"]["x1"]
    each = m["per_repeat"]
    assert len(each) == 2
    # by hand: repeat 0 fills node 0 to 8 free frames beside the 16 others, so pages 0-23 (all
    # cold): 16 others + 24 demoted, then the 32 hot pages 32-63 promoted (promotion has no
    # floor); repeat 1 fills pages 0-39: the 32 cold ones demoted, hot 40-63 promoted
    assert [(e["promotions"], e["demotions"]) for e in each] == [(32, 40), (24, 32)]
    assert (m["promotions"], m["demotions"]) == (28, 36)
    assert row["kernel"]["promotions"] == 25 and row["kernel"]["demotions"] == 25
    assert m["promotions_ratio"] == m["promotions"] / 25
