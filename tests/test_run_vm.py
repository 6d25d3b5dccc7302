"""`tierkit run` in the testbed VM (make test-vm; docs/real-linux.md), where node 1 is a real
lower memory tier: memory policies place the program where they say, the daemon loop's
observation reads pagemap, soft-dirty bits and DAMON regions and counts pages per node, and the
kernel policies make the kernel promote and demote, are reported, and leave every setting as it
was. Seed 004 (HyPlacer) section 2 (DRAM + DCPMM as two NUMA nodes, the slow one
CPU-less) and section 4 (referenced/dirty observation); seed 002 (MemBrain) section 2 (KNL's
MCDRAM as a CPU-less node).

The VM's fast node is 512 MiB; for the kernel policies a file in /dev/shm fills all but about
100 MiB of it, so that a 128 MiB workload does not fit on the fast node.
"""
import json
from pathlib import Path

import pytest

from conftest import ROOT, require_testbed, skip_or_fail_in_ci

BIN = ROOT / "target" / "release" / "tierkit-run"
WL = ROOT / "workloads" / "build"
SETTINGS = ["/proc/sys/kernel/numa_balancing", "/sys/kernel/mm/numa/demotion_enabled",
            "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps", "/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds"]
FILL = "rm -f /dev/shm/fill; sync; echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/zero of=/dev/shm/fill bs=1M count=360 2>/dev/null; "


def need(path: Path, how: str):
    if not path.is_file():
        skip_or_fail_in_ci(f"{path} is missing ({how}; make test-vm builds it)", f"{path} is missing ({how})")


@pytest.fixture(scope="module")
def vm():
    require_testbed()
    need(BIN, "cargo build --release -p tierkit-run")
    need(WL / "rwmix", "make -C workloads")
    from tierkit.testbed import FileSet, Testbed, VMConfig

    files = FileSet().add_binary(BIN).add_binary(WL / "rwmix")
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024), files) as t:
        yield t


def run_json(vm, args: str, pre: str = "", timeout_s=150):
    r = vm.run(f"{pre}tierkit-run --json {args} > $OUT/stdout; echo $? > $OUT/rc; "
               f"for f in {' '.join(SETTINGS)}; do echo \"$f $(cat $f)\"; done > $OUT/settings", timeout_s=timeout_s)
    assert r.status == 0, r.stderr
    rc = int(r.files["rc"])
    out = r.files["stdout"].decode()
    settings = dict(l.split(" ", 1) for l in r.files["settings"].decode().splitlines())
    return rc, json.loads(out.strip().splitlines()[-1]) if rc == 0 else None, r, settings


@pytest.mark.vm
def test_memory_policies_place_the_program(vm):
    expect = {"all-fast": (1.0, 0.0), "all-slow": (0.0, 1.0), "interleave": (0.5, 0.5)}
    for policy, (fast_share, slow_share) in expect.items():
        rc, r, res, _ = run_json(vm, f"--policy {policy} --interval 300ms -- rwmix --size medium --work 0.05")
        assert rc == 0, res.stderr
        assert (r["fast_node"], r["slow_node"], r["tiers_from"]) == (0, 1, "memory_tiering")
        # at the observation with the most pages (by move_pages queries): where the policy put them
        fast, slow = r["pages"]["peak_fast"], r["pages"]["peak_slow"]
        assert fast + slow >= (128 << 20) // 4096
        assert abs(fast / (fast + slow) - fast_share) < 0.05, (policy, r["pages"])
        assert abs(slow / (fast + slow) - slow_share) < 0.05, (policy, r["pages"])


@pytest.mark.vm
def test_observation_counts_pages_per_node_with_soft_dirty_bits_and_damon_regions(vm):
    rc, r, res, settings = run_json(vm, "--damon on --interval 400ms --timeseries $OUT/ts.csv -- rwmix --size medium --work 0.2")
    assert rc == 0, res.stderr
    rows = [l.split(",") for l in res.files["ts.csv"].decode().splitlines()]
    rows = [dict(zip(rows[0], map(int, x))) for x in rows[1:]]
    assert len(rows) == r["observations"] >= 3
    assert r["soft_dirty"] is True  # the 6.12 cloud kernel keeps soft-dirty bits
    buffer_pages = (128 << 20) // 4096
    assert max(x["pages_fast"] + x["pages_slow"] for x in rows) >= buffer_pages
    # DAMON's regions were read, and they cover the buffer the program is hammering
    assert r["damon"]["regions_max"] >= 1 and r["damon"]["error"] is None
    assert max(x["damon_regions"] for x in rows) >= 1
    assert max(x["referenced"] for x in rows) >= buffer_pages // 2
    # rwmix writes every page of its buffer: soft-dirty sees it
    assert max(x["dirty"] for x in rows) >= buffer_pages // 2
    # DAMON is left as found: no kdamond
    assert settings["/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds"] == "0"


@pytest.mark.vm
def test_autonuma_tiering_promotes_and_demotes_and_restores_the_settings(vm):
    before = run_json(vm, "-- true")[3]
    rc, r, res, after = run_json(vm, "--policy autonuma-tiering:hot_threshold_ms=500 --interval 1s -- rwmix --size medium --work 0.6",
                                 pre=FILL)
    assert rc == 0, res.stderr
    v = r["vmstat"]
    assert v["pgpromote_success"] > 0 and v["numa_hint_faults"] > 0, v
    assert v["pgdemote_kswapd"] + v["pgdemote_direct"] > 0, v
    set_ = {k["path"]: k for k in r["kernel_settings"]}
    assert set_["/proc/sys/kernel/numa_balancing"]["set"] == "2"
    assert set_["/sys/kernel/mm/numa/demotion_enabled"]["set"] == "true"
    assert set_["/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms"]["set"] == "500"
    assert all(k["restored"] for k in r["kernel_settings"])
    # read back after the run: as before
    assert after == before
    # the program's pages moved between the nodes during the run
    assert r["pages"]["max_slow"] > 0


@pytest.mark.vm
def test_damon_tiering_migrates_hot_and_cold_pages_and_removes_its_kdamonds(vm):
    before = run_json(vm, "-- true")[3]
    rc, r, res, after = run_json(vm, "--policy damon-tiering:hot_quota=200M,cold_quota=200M --interval 1s -- rwmix --size medium --work 0.6", pre=FILL)
    assert rc == 0, res.stderr
    hot, cold = r["damon_tiering"]
    assert (hot["action"], cold["action"]) == ("migrate_hot", "migrate_cold")
    assert cold["sz_applied"] > 0 and hot["sz_applied"] > 0, r["damon_tiering"]
    # DAMON alone moves pages (NUMA balancing off for the run), and the schemes as the kernel
    # holds them are reported: 200 MiB per 1 s, young filter on migrate_cold only
    set_ = {k["path"]: k for k in r["kernel_settings"]}
    assert set_["/proc/sys/kernel/numa_balancing"]["set"] == "0" and all(k["restored"] for k in r["kernel_settings"])
    for s in (hot, cold):
        assert (s["effective"]["quota_bytes"], s["effective"]["quota_reset_interval_ms"]) == (200 << 20, 1000), s
        assert (s["effective"]["sample_us"], s["effective"]["aggr_us"]) == (5000, 100000), s
    assert [f[0] for f in cold["effective"]["filters"]] == ["young"] and hot["effective"]["min_nr_accesses"] == 1
    assert r["vmstat"]["pgmigrate_success"] > 0
    assert after == before and after["/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds"] == "0"
    # the kernel threads' CPU counts in the policy's cost: the tiering kdamonds' (started by
    # the run), and kswapd's share of the run
    k = r["kernel_threads_cpu_s"]
    assert k["kdamond_tiering"] > 0 and k["kswapd"] >= 0, k
    assert r["policy_cpu_s"] >= r["daemon_cpu_s"] + k["kdamond_tiering"] - 1e-9


@pytest.mark.vm
def test_a_signal_to_tierkit_ends_the_program_and_restores_the_settings(vm):
    before = run_json(vm, "-- true")[3]
    r = vm.run("tierkit-run --policy autonuma-tiering -- sleep 30 2>/dev/null & p=$!; sleep 2; "
               "cat /proc/sys/kernel/numa_balancing; kill -TERM $p; wait $p; echo rc=$?; cat /proc/sys/kernel/numa_balancing", timeout_s=60)
    lines = r.stdout.split()
    assert lines[0] == "2"  # set during the run
    assert "rc=143" in lines  # the program got the SIGTERM, and its status came back
    assert lines[-1] == before["/proc/sys/kernel/numa_balancing"]


@pytest.mark.vm
def test_errors_in_the_vm_are_one_line(vm):
    r = vm.run("tierkit-run --fast-node 5 -- true; echo rc=$?; tierkit-run --policy no-such-policy -- true; echo rc=$?")
    assert r.stdout.split() == ["rc=2", "rc=2"]
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 2 and all(e.startswith("tierkit: error: ") for e in errs)
    assert "no NUMA node 5 with memory on this machine (nodes with memory: 0, 1)" in errs[0]


# The daemon policies on a program with a known hot set (testbed/hotcold.c): 32 MiB written once
# and never again (cold), 8 MiB of random read-modify-writes (write-intensive) and 8 MiB of
# random reads (read-intensive). The program moves its hot regions to the slow node itself
# before its loop (--start-slow), and measures where each region is every 500 ms with
# move_pages queries: the daemon has to find the hot set and bring it back within a 24 MiB
# budget, which holds the hot set (16 MiB) but not the whole program (48 MiB). NUMA balancing
# is off for the run (restored after), so that the kernel moves nothing on its own. The program
# runs with transparent huge pages off (tierkit's default for daemon policies), so every move
# is a 4 KiB page: under TCG about 1-3 thousand a second, hence the small program. The program
# drops its hot regions' translations from the TLB every 20 ms, as a real TLB's misses would
# (testbed/hotcold.c, --tlb-flush-ms): without that, QEMU's TLB keeps them and DAMON sees the
# hot set as cold once the daemon's own moves (which flush) stop; in CI `history` then ended
# with 24% of the hot set on node 0, and in 1 of 4 runs here with 71%.
BUDGET_MIB = 24
HOTCOLD = "hotcold --start-slow --cold 32 --write 8 --read 8 --seconds 16 --sample-ms 500 --tlb-flush-ms 20"


# the program as tierkit-run starts it: itself, through a shell that execs it, or as a child of
# a shell that waits for it (docs/real-linux.md, "What is observed")
WRAP = {"none": HOTCOLD, "exec": f"sh -c 'exec {HOTCOLD}'", "fork": f"sh -c '{HOTCOLD}; true'",
        # the same program for 6 s, where only the moves' count matters
        "short": HOTCOLD.replace("--seconds 16", "--seconds 6")}


def run_daemon(vm, policy: str, wrap: str = "none", extra: str = ""):
    r = vm.run(f"nb=$(cat /proc/sys/kernel/numa_balancing); echo 0 > /proc/sys/kernel/numa_balancing; "
               f"tierkit-run --json --policy {policy} --fast-capacity {BUDGET_MIB}M {extra} --timeseries $OUT/ts.csv -- {WRAP[wrap]} "
               f"> $OUT/stdout; echo $? > $OUT/rc; echo $nb > /proc/sys/kernel/numa_balancing", timeout_s=150)
    assert r.status == 0, r.stderr
    assert int(r.files["rc"]) == 0, r.stderr
    lines = r.files["stdout"].decode().strip().splitlines()
    program, report = json.loads(lines[0]), json.loads(lines[-1])
    rows = [l.split(",") for l in r.files["ts.csv"].decode().splitlines()]
    rows = [dict(zip(rows[0], map(int, x))) for x in rows[1:]]
    return program, report, rows


def check_budget_and_start(program, report, rows):
    budget = BUDGET_MIB << 20 >> 12
    assert report["fast_budget_pages"] == budget
    # the VM's THP setting is `always`; for a daemon policy tierkit starts the program with
    # huge pages off (move_pages would move 512 pages for one the budget counts)
    assert report["thp"] == "off" and report["pages"]["in_large_folios_max"] == 0, report["pages"]
    hot = program["pages"]["write"] + program["pages"]["read"]
    # the hot set really started on the slow node
    assert program["started_slow"] >= 0.85 * hot
    # tierkit never takes the program past the budget: at each observation, after its moves,
    # the fast node holds at most the budget, plus pages whose demotion the kernel refused
    for x in rows:
        assert x["pages_fast"] <= budget + x["moves_failed"], (x, rows)
    # and, as the program measures it itself once the daemon has had its first look: a sample
    # counts where two query passes agreed page for page (testbed/hotcold.c: one pass is not
    # atomic, so a shuffle by the daemon during it can count a page demoted after it was
    # counted and one promoted before; seen once in CI, 14 pages over); most samples must agree
    later = [x for x in program["series"] if x[0] >= 2000]
    agreed = [x for x in later if x[4] == 1]
    assert len(agreed) >= len(later) // 2, program["series"]
    for t, w, r, c, _ in agreed:
        assert w + r + c <= budget, (t, w, r, c, program["series"], rows, report["decider"].get("timeseries"))
    assert report["migrations"]["failed_by_errno"].get("over_budget", 0) == report["decider"]["live"]["mirror"]["moves_failed"].get("-1", 0)


@pytest.mark.vm
def test_hyplacer_brings_the_write_intensive_hot_set_to_the_fast_node_within_the_budget(vm):
    # seed 004 section 4.4: with DCPMM writes above the threshold, PROMOTE_INT brings
    # write-intensive DCPMM pages (dirty after the clear-then-delay window) into DRAM while it
    # has room, and once it is full SWITCH exchanges them with cold DRAM pages. The default settings: live, the write threshold is one for the soft-dirty
    # estimate, which the paper's 10 MB/s of DCPMM write bandwidth is not (docs/real-linux.md,
    # "Daemon policies")
    program, r, rows = run_daemon(vm, "hyplacer")
    check_budget_and_start(program, r, rows)
    assert r["decider"]["write_threshold_mb_per_s"] == 1.0
    assert any("write_threshold_mb_per_s=1" in n for n in r["notes"]), r["notes"]
    print("hyplacer live write estimate, MB/s (last, max):", r["decider"]["live"]["steps"]["last_write_estimate_mb_per_s"],
          r["decider"]["live"]["steps"]["max_write_estimate_mb_per_s"])
    stats = r["decider"]["stats"]
    rows_ = r["decider"]["timeseries"]["rows"]
    modes = [row[1] for row in rows_]
    # every activation's mode is 004's Table 2 for its DRAM usage and write estimate: with
    # writes above the threshold, PROMOTE_INT while DRAM has room, SWITCH once it is full
    # (which comes first depends on how far the program's first touch has got when the daemon
    # first looks: under emulation, either)
    target, thr = r["decider"]["dram_target"], r["decider"]["write_threshold_mb_per_s"]
    for _, m, usage, write_mb, _ in rows_:
        if write_mb > thr:
            assert m == ("switch" if usage >= target else "promote_int"), rows_
    # the write-hot set came in by one of the two (SWITCH finds nothing to exchange once
    # PROMOTE_INT has brought it in)
    assert "switch" in modes or "promote_int" in modes, modes
    assert stats["switch"]["switched"] + stats["promote_int"]["promoted"] > 0, (stats, rows_)
    # the write-intensive pages were classified as such (004 section 4.4: dirty in the window)
    assert stats["classified"]["write_intensive"] >= program["pages"]["write"] // 2, stats["classified"]
    # the hot set that is written ends on the fast node; the cold archive made room
    t, w, _, c, _ = program["series"][-1]
    assert w >= 0.9 * program["pages"]["write"], program["series"]
    assert c <= program["pages"]["cold"] - program["pages"]["write"] // 2, program["series"]
    assert r["migrations"]["done"] > 0 and r["daemon_cpu_s"] > 0


@pytest.mark.vm
def test_history_brings_the_hot_set_to_the_fast_node_within_the_budget(vm):
    # seed 003 (Cori's history scheduler): each period the pages with the most accesses of the
    # previous one (here DAMON's counts) get the fast tier
    program, r, rows = run_daemon(vm, "history")
    check_budget_and_start(program, r, rows)
    sched = r["decider"]["scheduler"]
    assert sched["promoted"] > 0 and r["decider"]["live"]["period_ns"] == 100_000_000
    t, w, rd, c, _ = program["series"][-1]
    assert w + rd >= 0.9 * (program["pages"]["write"] + program["pages"]["read"]), program["series"]
    assert r["migrations"]["done"] > 0


@pytest.mark.vm
def test_the_tlb_flush_of_the_daemon_tests_leaves_numa_balancing_working(vm):
    # the program and TLB flush of the daemon policies' tests, under autonuma-tiering: the
    # flush (an mprotect of a region of the program's own, testbed/hotcold.c) must not rewrite
    # the hot set's page table entries, or NUMA balancing's scan is undone (an mprotect of the
    # hot regions themselves gave 0 hint faults and 0 promotions), and kernel and daemon
    # policies would not run under the same conditions
    rc, r, res, _ = run_json(vm, f"--policy autonuma-tiering:hot_threshold_ms=500 --interval 1s -- {HOTCOLD}", pre=FILL)
    assert rc == 0, res.stderr
    v = r["vmstat"]
    assert v["numa_pte_updates"] > 0 and v["numa_hint_faults"] > 0 and v["pgpromote_success"] > 0, v


@pytest.mark.vm
@pytest.mark.parametrize("wrap", ["exec", "fork"])
def test_a_daemon_policy_follows_the_program_through_a_shell(vm, wrap):
    # the page map is opened anew at each observation (after an exec it is another address
    # space), and the program's process tree is observed and placed as one workload: the hot
    # set in the shell's child comes to the fast node, DAMON watching both processes
    program, r, rows = run_daemon(vm, "history", wrap)
    check_budget_and_start(program, r, rows)
    # the written region at least: its pages are seen written (soft-dirty) whatever DAMON makes
    # of the read-only ones under emulation (above), and under fork DAMON starts over once it
    # watches both processes
    t, w, rd, c, _ = program["series"][-1]
    assert w >= 0.9 * program["pages"]["write"], (program["series"], r["processes"], r["damon"], r["migrations"], r["decider"]["live"])
    assert r["migrations"]["done"] > 0
    assert r["empty_observations"] == 0, r["notes"]
    p = r["processes"]
    if wrap == "fork":
        assert p["max_observed"] == 2 and max(x["processes"] for x in rows) == 2, p
        # DAMON's regions told apart by process at most observations
        assert p["damon_restarts"] >= 1 and p["damon_unsplit_reads"] <= r["observations"] // 4, (p, r["observations"])
    else:
        assert p["max_observed"] == 1, p


@pytest.mark.vm
def test_a_migration_rate_paces_the_daemon_and_lowers_the_kernels_own_limit(vm):
    # 2 MiB/s: 512 pages a second, the first batch (at most 1,024 pages) at once
    program, r, rows = run_daemon(vm, "history", "short", extra="--max-migrate-rate 2")
    moved = r["migrations"]["done"] + sum(v for k, v in r["migrations"]["failed_by_errno"].items() if k not in ("over_budget", "step_time_bound"))
    assert 0 < moved <= 512 * r["wall_s"] + 1024, (moved, r["wall_s"], r["migrations"])
    rc, k, res, _ = run_json(vm, "--policy autonuma-tiering --max-migrate-rate 7 -- true")
    assert rc == 0, res.stderr
    set_ = {x["path"]: x for x in k["kernel_settings"]}
    assert set_["/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps"]["set"] == "7", set_
    assert any("--max-migrate-rate" in n for n in k["notes"]), k["notes"]


@pytest.mark.vm
@pytest.mark.parametrize("policy", ["nimble:period=1s", "clock-dwf", "memos:period=1s"])
def test_the_generic_daemon_policies_bring_hot_pages_in_within_the_budget(vm, policy):
    # the policies the generic live driver runs (docs/real-linux.md, "Daemon policies"):
    # nimble (its slow active-list pages into free frames or exchanged with the fast inactive
    # tail), clock-dwf in its live form (written slow pages found in the soft-dirty bits every
    # 100 ms), memos in its live form (write-hot pages into DRAM, no bandwidth balance)
    program, r, rows = run_daemon(vm, policy)
    check_budget_and_start(program, r, rows)
    name = policy.split(":")[0]
    assert r["migrations"]["done"] > 0, r["migrations"]
    assert r["decider"]["live"]["periods"] > 0
    t, w, rd, c, _ = program["series"][-1]
    hot = program["pages"]["write"] + program["pages"]["read"]
    if name == "nimble":
        assert w + rd >= 0.3 * hot, program["series"]
    else:
        # both bring written pages in: the read-modify-write region ends mostly on node 0
        assert w >= 0.5 * program["pages"]["write"], program["series"]
        assert any("runs with" in n for n in r["notes"]), r["notes"]


@pytest.mark.vm
def test_first_touch_leaves_the_hot_set_where_it_is(vm):
    # the reference: no daemon, no moves; the hot set stays on the slow node it was moved to
    program, r, rows = run_daemon(vm, "first-touch")
    assert r["migrations"]["requested"] == 0
    # a memory policy keeps the program's huge pages, and the observation finds them
    assert r["thp"] == "kept" and r["pages"]["in_large_folios_max"] >= 8192, r["pages"]
    t, w, rd, c, _ = program["series"][-1]
    assert w + rd <= 0.05 * (program["pages"]["write"] + program["pages"]["read"]), program["series"]


@pytest.mark.vm
def test_dry_run_checks_every_live_policy_and_changes_nothing(vm):
    """--dry-run on a machine with two nodes: each policy tierkit run can run is checked and
    described (its kind, the budget, what a kernel policy would set, with the simulator's
    parameter names), nothing starts and no setting changes; the others say why not."""
    before = run_json(vm, "-- true")[3]
    cases = {"first-touch": "memory", "all-fast": "memory", "all-slow": "memory", "interleave": "memory",
             "hyplacer": "daemon", "history": "daemon", "nimble": "daemon", "clock-dwf": "daemon", "memos": "daemon",
             "autonuma-tiering:hot_threshold_ms=500,promote_rate_limit_mib_per_s=100": "kernel",
             "damon-tiering:hot_quota=64M,cold_quota=8M,aggr=50ms": "kernel"}
    for spec, kind in cases.items():
        rc, r, res, after = run_json(vm, f"--dry-run --fast-capacity 256M --policy {spec}")
        assert rc == 0, (spec, res.stderr)
        assert r["dry_run"] is True and r["kind"] == kind and (r["fast_node"], r["slow_node"]) == (0, 1), r
        assert r["fast_budget_bytes"] == 256 << 20
        assert after == before, spec
    _, r, _, _ = run_json(vm, "--dry-run --policy autonuma-tiering:hot_threshold_ms=500,promote_rate_limit_mib_per_s=100")
    assert (r["kernel_settings"]["hot_threshold_ms"], r["kernel_settings"]["promote_rate_limit_mib_per_s"]) == (500, 100)
    _, r, _, _ = run_json(vm, "--dry-run --policy damon-tiering:hot_quota=64M,cold_quota=8M,aggr=50ms")
    k = r["kernel_settings"]
    assert (k["hot_quota_bytes"], k["cold_quota_bytes"], k["aggr_us"], k["apply_interval_us"]) == (64 << 20, 8 << 20, 50_000, 500_000)
    for spec, why in (("otf", "memory controller"), ("autonuma-tiering:pte_update_ns=5", "simulated machine"),
                      ("oracle", "future")):
        rc, _, res, _ = run_json(vm, f"--dry-run --policy {spec}")
        assert rc == 2 and why in res.files["stdout"].decode() + res.stderr, (spec, res.stderr)
