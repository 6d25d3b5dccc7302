"""`tierkit run` on the host (docs/real-linux.md): what needs no kernel setting — the
program's exit status passed through, placement observed with pagemap and move_pages queries,
soft-dirty bits of tierkit's own child, one-line errors — and the refusal to change the host's
kernel settings. What needs a tiered machine is in tests/test_run_vm.py (the testbed VM).

Seed 004 (HyPlacer), section 4: the referenced/dirty observation of a running program that the
daemon policies build on (here its Linux side: soft-dirty bits, page presence, page nodes).
"""
import ctypes
import json
import mmap
import os
import shutil
import struct
import subprocess

import pytest

from conftest import run_cli


def last_json(stdout: str) -> dict:
    """--json prints one object as the last line of stdout (the program's output comes first)."""
    return json.loads(stdout.strip().splitlines()[-1])


def one_error_line(rc, err):
    lines = [l for l in err.splitlines() if l.strip()]
    return rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: ") and "Traceback" not in err


def host_keeps_soft_dirty_bits() -> bool:
    """An independent probe: a page just written is soft-dirty where the kernel keeps the bits."""
    m = mmap.mmap(-1, 4096)
    m[0:1] = b"x"
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(addr // 4096 * 8)
        e = struct.unpack("<Q", f.read(8))[0]
    return bool(e >> 55 & 1)


def test_the_programs_exit_status_passes_through():
    rc, out, err = run_cli("run", "--json", "--", "sh", "-c", "echo hello; exit 3")
    assert rc == 3, err
    assert out.splitlines()[0] == "hello"  # the program's output is its own
    r = last_json(out)
    assert r["exit_status"] == 3 and r["policy"] == "first-touch" and r["kind"] == "memory policy"
    assert r["signal"] is None and r["wall_s"] > 0
    # a signal-killed program: 128 + the signal, as 'trace record' does
    rc, out, err = run_cli("run", "--json", "--", "sh", "-c", "kill -TERM $$")
    assert rc == 128 + 15 and last_json(out)["signal_name"] == "SIGTERM"
    # the table goes to stderr, leaving stdout to the program
    rc, out, err = run_cli("run", "--", "sh", "-c", "exit 0")
    assert rc == 0 and out == "" and "tierkit run:" in err and "exit status" in err


def test_first_touch_placement_and_soft_dirty_bits_of_its_own_child(tmp_path):
    from tierkit import workloads as wl

    if not (shutil.which("make") and shutil.which(os.environ.get("CC", "cc"))):
        pytest.skip("make or a C compiler is missing (the workloads are built from workloads/)")
    bindir = wl.build()
    ts = tmp_path / "ts.csv"
    # rwmix medium: a 128 MiB buffer written in order, then random reads and writes
    rc, out, err = run_cli("run", "--json", "--interval", "50ms", "--timeseries", ts, "--",
                           bindir / "rwmix", "--size", "medium", "--work", "0.5")
    assert rc == 0, err
    r = last_json(out)
    rows = [l.split(",") for l in ts.read_text().splitlines()]
    head, rows = rows[0], [list(map(int, x)) for x in rows[1:]]
    assert head[:3] == ["time_ms", "pages_fast", "pages_slow"]
    assert len(rows) == r["observations"] == r["timeseries_rows"] >= 2
    col = {k: i for i, k in enumerate(head)}
    assert [x[col["time_ms"]] for x in rows] == sorted(x[col["time_ms"]] for x in rows)
    buffer_pages = (128 << 20) // r["page_bytes"]
    # the whole buffer is seen resident on the fast node (the only node here; node 0 with two)
    assert r["pages"]["max_fast"] >= buffer_pages
    assert max(x[col["pages_fast"]] + x[col["pages_slow"]] for x in rows) >= buffer_pages
    # no daemon: nothing moved
    assert r["migrations"]["requested"] == 0
    # soft-dirty: what the report says agrees with an independent probe, and where the kernel
    # keeps the bits, the program's writes show (every page of rwmix's buffer is written)
    assert r["soft_dirty"] == host_keeps_soft_dirty_bits()
    if r["soft_dirty"]:
        assert max(x[col["dirty"]] for x in rows) >= buffer_pages // 2
    else:
        assert all(x[col["dirty"]] == 0 for x in rows)
        assert any("soft-dirty" in n for n in r["notes"])
    assert r["daemon_cpu_s"] > 0
    # the program's own resource use: it faulted in its 128 MiB buffer (4 KiB or 2 MiB pages)
    # and spent CPU time doing it
    ru = r["program_rusage"]
    assert ru["user_s"] + ru["sys_s"] > 0 and ru["minor_faults"] >= 64 and ru["major_faults"] >= 0


def test_bad_nodes_pids_and_options_are_one_line_exit_2(tmp_path):
    nodes = sorted(int(d[4:]) for d in os.listdir("/sys/devices/system/node") if d.startswith("node") and d[4:].isdigit())
    missing = max(nodes) + 7
    for args, word in [
        (["--fast-node", str(missing), "--", "true"], f"no NUMA node {missing}"),
        (["--pid", "999999999"], "no such process"),
        (["--interval", "soon", "--", "true"], "--interval"),
        (["--policy", "all-fast:x=1", "--", "true"], "unknown parameter 'x'"),
        (["--damon", "maybe", "--", "true"], "--damon"),
        ([], "no program given"),
        (["--bogus", "--", "true"], "--bogus"),
        (["--", str(tmp_path / "no-such-program")], "cannot be run"),
    ]:
        rc, out, err = run_cli("run", *args)
        assert one_error_line(rc, err), (args, rc, err)
        assert word in err, (args, err)
    if len(nodes) == 1:
        rc, out, err = run_cli("run", "--policy", "interleave", "--", "true")
        assert one_error_line(rc, err) and "needs a fast and a slow NUMA node" in err
    # an existing time series is kept unless --force
    ts = tmp_path / "ts.csv"
    ts.write_text("mine\n")
    rc, out, err = run_cli("run", "--timeseries", ts, "--", "true")
    assert one_error_line(rc, err) and "--force" in err and ts.read_text() == "mine\n"
    rc, out, err = run_cli("run", "--timeseries", ts, "--force", "--", "true")
    assert rc == 0 and ts.read_text().startswith("time_ms,")


def test_a_process_it_may_not_ptrace_is_refused():
    # pid 1 belongs to the system; where this user may read its page map (root outside a
    # container), there is nothing to refuse
    try:
        open("/proc/1/pagemap", "rb").close()
        pytest.skip("this user may read pid 1's page map")
    except OSError:
        pass
    rc, out, err = run_cli("run", "--pid", "1")
    assert one_error_line(rc, err) and "may ptrace" in err


def test_attaching_to_a_process_follows_it_to_its_end():
    p = subprocess.Popen(["sh", "-c", "x=$(head -c 4000000 /dev/zero | tr '\\0' a); sleep 1.2; echo ${#x}"], stdout=subprocess.PIPE)
    try:
        rc, out, err = run_cli("run", "--json", "--interval", "100ms", "--pid", p.pid)
    finally:
        p.wait()
    assert rc == 0, err
    r = last_json(out)
    assert r["attached"] and r["pid"] == p.pid and r["observations"] >= 3
    assert r["pages"]["max_fast"] + r["pages"]["max_slow"] >= 4_000_000 // r["page_bytes"]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def test_kernel_policies_and_damon_are_refused_on_the_host():
    """Never change the host's kernel settings (docs/real-linux.md): outside the testbed VM, without
    TIERKIT_ALLOW_KERNEL_SETTINGS=1, the kernel policies and DAMON monitoring refuse to start
    and nothing changes."""
    if os.environ.get("TIERKIT_ALLOW_KERNEL_SETTINGS") == "1" or os.path.exists("/etc/testbed-agent.sh"):
        pytest.skip("kernel settings are allowed here")
    watched = ["/proc/sys/kernel/numa_balancing", "/sys/kernel/mm/numa/demotion_enabled",
               "/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds"]
    before = {p: read(p) for p in watched}
    # (a kernel policy on a one-node host is refused for the node first: no slow tier to place on)
    for args in (["--policy", "autonuma-tiering"], ["--policy", "damon-tiering"], ["--damon", "on"]):
        rc, out, err = run_cli("run", *args, "--", "true")
        why = "needs a fast and a slow NUMA node" if one_node_host() and args[0] == "--policy" else "only inside the testbed VM"
        assert one_error_line(rc, err) and why in err, (args, err)
    assert {p: read(p) for p in watched} == before


def one_node_host() -> bool:
    """This host has one NUMA node with memory (an independent reading of sysfs)."""
    try:
        with open("/sys/devices/system/node/has_memory") as f:
            spec = f.read().strip()
    except OSError:
        return True
    return spec.isdigit()


def test_on_one_node_the_first_error_is_the_missing_slow_tier():
    """A daemon policy on a one-node host: the error names the node and the missing slow tier,
    not DAMON (on by default for daemon policies), which the user never asked for."""
    if not one_node_host():
        pytest.skip("this host has a slow NUMA node")
    with open("/sys/devices/system/node/has_memory") as f:
        node = f.read().strip()
    for policy in ("history", "hyplacer", "interleave"):
        rc, _, err = run_cli("run", "--dry-run", "--policy", policy)
        assert one_error_line(rc, err), err
        assert f"{policy} needs a fast and a slow NUMA node" in err and f"(node {node})" in err, err
        assert "DAMON" not in err and "--damon" not in err, err


def test_run_help_is_the_rust_commands():
    rc, out, err = run_cli("run", "--help")
    assert rc == 0 and "--fast-capacity" in out and "--pid" in out
    rc, out, err = run_cli("--help")
    assert rc == 0 and " run " in out


def test_interval_sets_a_daemon_policys_own_interval_once():
    # --interval is hyplacer's interval= (its clear-then-delay timing stays its own): giving
    # both is one line, exit 2, before anything starts (docs/real-linux.md, "What is observed")
    rc, out, err = run_cli("run", "--policy", "hyplacer:interval=2s", "--interval", "1s", "--", "true")
    assert one_error_line(rc, err), err
    assert "--interval" in err and "interval= already" in err
    rc, out, err = run_cli("run", "--policy", "history:period=100ms", "--interval", "1s", "--", "true")
    assert one_error_line(rc, err) and "period= already" in err, err
    # a DAMON window outside 10 ms..10 s
    rc, out, err = run_cli("run", "--damon-window", "1ms", "--", "true")
    assert one_error_line(rc, err) and "--damon-window" in err, err


def test_policies_listing_says_how_each_policy_runs_on_linux():
    # the registry's `deploy` (docs/policies.md, "Deploying a policy"): hyplacer, history,
    # nimble, clock-dwf and memos run
    # live as daemons with the simulator's decision code, the kernel's tiering as kernel
    # settings, the memory policies at exec, guided by the allocator; the rest say why not
    rc, out, err = run_cli("policies", "--json")
    ps = {p["name"]: p for p in json.loads(out)}
    how = lambda h: {n for n, p in ps.items() if p["deploy"]["how"] == h}
    assert rc == 0 and how("daemon") == {"hyplacer", "history", "nimble", "clock-dwf", "memos"}
    assert how("kernel") == {"autonuma-tiering", "damon-tiering"} and how("allocator") == {"guided"}
    assert how("memory") == {"first-touch", "all-fast", "all-slow", "interleave"} and how("future_knowledge") == {"oracle"}
    assert {n for n, p in ps.items() if p["live"]} == how("daemon") | how("kernel") | how("memory") | how("allocator")
    assert all(len(p["deploy"].get("why", "")) > 20 for p in ps.values() if p["deploy"]["how"] in ("hardware", "not_live"))
    rc, out, err = run_cli("policies")
    assert "on Linux: simulation only: a memory controller" in out and "on Linux: tierkit run --policy (a daemon" in out
    # and tierkit run refuses what cannot run, saying why
    rc, out, err = run_cli("run", "--dry-run", "--policy", "otf")
    assert one_error_line(rc, err) and "cannot run on Linux" in err and "memory controller" in err


def test_huge_pages_are_off_for_the_program_only_when_asked():
    # PR_SET_THP_DISABLE is the started program's own setting (docs/real-linux.md, "Huge
    # pages"): the program sees it in its /proc status; tierkit's default for a memory policy
    # keeps huge pages; a running process (--pid) cannot be changed
    if "THP_enabled" not in open("/proc/self/status").read():
        pytest.skip("this kernel's /proc/PID/status has no THP_enabled line")
    probe = ["--", "sh", "-c", "grep THP_enabled /proc/self/status"]
    rc, out, err = run_cli("run", "--json", "--thp", "off", *probe)
    assert rc == 0, err
    assert out.splitlines()[0].split() == ["THP_enabled:", "0"] and last_json(out)["thp"] == "off"
    rc, out, err = run_cli("run", "--json", *probe)
    assert rc == 0, err
    assert out.splitlines()[0].split() == ["THP_enabled:", "1"] and last_json(out)["thp"] == "kept"
    rc, out, err = run_cli("run", "--thp", "sometimes", "--", "true")
    assert one_error_line(rc, err) and "--thp" in err and "auto, off or keep" in err
    rc, out, err = run_cli("run", "--thp", "off", "--pid", str(os.getpid()))
    assert one_error_line(rc, err) and "--thp" in err


def test_dry_run_checks_and_starts_nothing(tmp_path):
    """--dry-run: the policy spec, the nodes, the capacity and the permissions checked, what a
    run would do printed, nothing started (no program needed)."""
    marker = tmp_path / "ran"
    rc, out, err = run_cli("run", "--dry-run", "--json", "--fast-capacity", "64M", "--", "touch", marker)
    assert rc == 0, err
    r = last_json(out)
    assert r["dry_run"] is True and r["kind"] == "memory" and r["fast_budget_bytes"] == 64 << 20
    assert not marker.exists()
    rc, out, err = run_cli("run", "--dry-run")
    assert rc == 0 and "every check passed" in err and "nothing was started" in err
    # a mistake in the spec is said first, before the machine is looked at
    assert one_error_line(*run_cli("run", "--dry-run", "--policy", "damon-tiering:hot_qouta=1M")[::2])
    rc, _, err = run_cli("run", "--dry-run", "--policy", "autonuma-tiering:pte_update_ns=5")
    assert one_error_line(rc, err) and "simulated machine" in err and "hot_threshold_ms" in err
    # a share of the footprint, as simulate reads one (docs/policies.md), is a size live
    for share in ["0.2", "50%", "1"]:
        rc, _, err = run_cli("run", "--dry-run", "--fast-capacity", share, "--", "true")
        assert one_error_line(rc, err) and "share of the footprint" in err, (share, err)


def test_kernel_policies_take_the_simulators_parameter_names():
    """One vocabulary: the names `simulate` takes are the ones `tierkit run` sets in the kernel
    (crates/tierkit-run/src/kernel_params.rs); each one the kernel has no knob for is refused
    live with a reason, never ignored."""
    import tierkit
    from tierkit import _core

    live = {"autonuma-tiering": ["hot_threshold_ms", "promote_rate_limit_mib_per_s", "scan_period_ms", "scan_period_max_ms",
                                 "scan_delay_ms", "scan_size_mb"],
            "damon-tiering": ["sample", "aggr", "min_nr_regions", "max_nr_regions", "hot_min_accesses", "cold_min_age",
                              "hot_quota", "cold_quota", "quota_reset", "hot_goal_used_bp", "cold_goal_free_bp",
                              "weight_nr_accesses", "weight_age", "apply_aggrs", "young_filter"]}
    declared = {p["name"]: [q["name"] for q in p["params"]] for p in json.loads(_core.policies())}
    for pol, names in live.items():
        assert set(names) <= set(declared[pol]), pol
        assert tierkit.policies().set_index("name").loc[pol, "live"]
