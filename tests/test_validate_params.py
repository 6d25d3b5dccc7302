"""tierkit validate's reading of the testbed VM's node 0 for the autonuma-tiering model
(docs/validation.md, "What it does", item 2): no VM needed. The text is what
/proc/zoneinfo and node 0's meminfo showed in the VM at the start of a `phases` run (node 0 of
512 MiB shrunk to 64 MiB free with hugetlb pages; min_free_kbytes 67,584, raised by khugepaged)."""
import pytest

from tierkit import validate as v

ZONEINFO = """Node 0, zone      DMA
  pages free     3776
        boost    0
        min      176
        low      220
        high     264
        promo    308
        managed  3840
        protection: (0, 487, 487, 487, 487)
Node 0, zone    DMA32
  pages free     12334
        boost    0
        min      5725
        low      7156
        high     8587
        promo    10018
        managed  124749
        protection: (0, 0, 0, 0, 0)
Node 0, zone  Movable
  pages free     0
        boost    0
        min      32
        low      32
        high     32
        promo    32
        managed  0
        protection: (0, 0, 0, 0, 0)
Node 1, zone    DMA32
  pages free     239803
        boost    0
        min      10994
        low      13742
        high     16490
        promo    19238
        managed  248296
        protection: (0, 0, 0, 0, 0)
"""
MEMINFO = """Node 0 MemFree:           64544 kB
Node 0 Active(anon):      30100 kB
Node 0 Inactive(anon):        0 kB
Node 0 Active(file):          0 kB
Node 0 Inactive(file):        0 kB
Node 0 Shmem:             29420 kB
"""


def test_node0_zones_are_read_per_node_and_only_managed_ones_kept():
    zones = v.parse_zoneinfo(ZONEINFO, 0)
    assert [z["zone"] for z in zones] == ["DMA", "DMA32"]
    dma, dma32 = zones
    assert (dma32["free"], dma32["min"], dma32["low"], dma32["high"], dma32["promo"]) == (12334, 5725, 7156, 8587, 10018)
    assert dma["protection"] == [0, 487, 487, 487, 487]
    # node 1's DMA32 (1 GiB) has its own, larger watermarks: docs/validation.md once quoted those
    assert v.parse_zoneinfo(ZONEINFO, 1)[0]["min"] == 10994


def test_one_zone_model_watermarks_are_the_largest_zones_plus_the_floor_of_the_others():
    """mm/page_alloc.c: a movable allocation takes the DMA zone's pages only while its free
    pages exceed low (220) + lowmem_reserve[ZONE_MOVABLE] (487) = 707, so 707 of them stay
    free once the program fills node 0: the one-zone model's watermarks are DMA32's + 707.
    Its fast tier also holds the 30,100 KiB = 7,525 pages of LRU memory of other programs
    (the rootfs in tmpfs), which kswapd can demote."""
    kp = v.node0_model_params(ZONEINFO, MEMINFO, two_zones=False)
    assert kp["other_zones_floor_pages"] == 707
    assert (kp["wmark_min_pages"], kp["wmark_low_pages"], kp["wmark_high_pages"], kp["wmark_promo_pages"]) == (6432, 7863, 9294, 10725)
    assert kp["fast_other_pages"] == 7525
    assert kp["free_pages"] == 3776 + 12334
    spec = v.model_args("autonuma-tiering", kp)
    assert spec.endswith(",wmark_min_pages=6432,wmark_low_pages=7863,wmark_high_pages=9294,wmark_promo_pages=10725,fast_other_pages=7525")
    assert v.model_args("damon-tiering", kp) == v.MODEL_ARGS["damon-tiering"]


def test_a_node_without_zones_is_one_clear_error():
    with pytest.raises(RuntimeError, match="node 0 has no managed zone"):
        v.node0_model_params("Node 1, zone DMA32\n  pages free 5\n        managed  9\n", MEMINFO)


def test_two_zone_model_gets_node0s_dma_zone_as_its_own():
    """The default: node 0's two managed zones go to the model as they are (DMA32's
    watermarks; the DMA zone's free pages, low/high/promo and protection against movable
    allocations), so that its kswapd stops once either zone is balanced (mm/vmscan.c
    pgdat_balanced) and a promotion needs room in either (mm/migrate.c migrate_balanced_pgdat):
    crates/tierkit-core/tests/os_tiering.rs::autonuma_small_zone_balances_the_node_for_kswapd."""
    kp = v.node0_model_params(ZONEINFO, MEMINFO)
    assert (kp["wmark_min_pages"], kp["wmark_low_pages"], kp["wmark_high_pages"], kp["wmark_promo_pages"]) == (5725, 7156, 8587, 10018)
    assert [kp[k] for k in v.DMA_KEYS] == [3776, 220, 264, 308, 487]
    spec = v.model_args("autonuma-tiering", kp)
    assert spec.endswith(",wmark_min_pages=5725,wmark_low_pages=7156,wmark_high_pages=8587,wmark_promo_pages=10018,fast_other_pages=7525,"
                         "dma_zone_pages=3776,dma_wmark_low_pages=220,dma_wmark_high_pages=264,dma_wmark_promo_pages=308,dma_protection_pages=487")
    # a node of one managed zone has no second zone to pass
    one = "\n".join(ZONEINFO.split("\n")[9:])
    assert "dma_zone_pages" not in v.node0_model_params(one, MEMINFO)


def test_length_scales_each_workloads_work_and_nothing_else():
    s = v.length_specs(3)
    assert set(s) == set(v.WORKLOADS)
    assert s["phases"][2] == ("--size", "medium", "--work", "0.3")
    assert s["rwmix"][2] == ("--size", "medium", "--work", "0.3", "--write-ratio", "0.9")
    assert s["sites"][:2] == v.WORKLOADS["sites"][:2]
    assert v.length_specs(1) == v.WORKLOADS


def test_a_vm_that_fails_is_one_line_naming_its_console_log(monkeypatch, capsys, tmp_path):
    # a kernel panic in the testbed closes the control port: the CLI says so in one line and
    # keeps the console log (the panic's trace) where the line says
    from tierkit import cli, testbed

    def boom(*a, **k):
        raise testbed.TestbedError("testbed: the VM closed its control port command 'true' "
                                   "(last console line: Kernel Offset: 0x0; whole console log: /tmp/tierkit-vm-console-x.log)")

    monkeypatch.setattr(v, "validate", boom)
    monkeypatch.setattr(testbed, "availability", lambda: None)
    # the CLI checks that tierkit-run is built before it starts: a stand-in
    (tmp_path / "target" / "release").mkdir(parents=True)
    (tmp_path / "target" / "release" / "tierkit-run").write_text("")
    monkeypatch.setattr(v, "ROOT", tmp_path)
    assert cli.main(["validate", "--workloads", "phases", "--policies", "autonuma-tiering"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tierkit: error: testbed: the VM closed its control port")
    assert err[0].endswith("/tmp/tierkit-vm-console-x.log)")


def test_kswapd_pace_is_its_fastest_rise_between_two_vmstat_samples():
    """The autonuma-tiering model's kswapd_pages_per_s (docs/validation.md): pgdemote_kswapd's
    fastest rise over the repeats' 0.5 s samples; None where kswapd demoted nothing."""
    def series(*pts):
        return {"vmstat_series": [{"t_s": t, "pgdemote_kswapd": d} for t, d in pts]}
    reps = [series((0.0, 0), (0.5, 0), (1.0, 3000), (1.5, 3500)), series((0.0, 0), (0.4, 2000), (1.0, 2600))]
    assert v.kswapd_pace(reps) == 6000.0  # 3000 pages in 0.5 s; 2000 in 0.4 s is 5000/s
    assert v.kswapd_pace([series((0.0, 0), (0.5, 0))]) is None
    assert v.kswapd_pace([{}]) is None
