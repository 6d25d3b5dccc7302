"""`tierkit advise --verify` in the testbed VM (make test-vm; docs/advise.md, "--program and
--verify"): on a machine with one NUMA node the top two candidates run live in the VM, where
node 1 is a real lower memory tier, and their measured wall times are reported beside the
predicted runtimes."""
import json

import pytest

from conftest import ROOT, require_testbed, run_cli, skip_or_fail_in_ci


@pytest.mark.vm
def test_verify_runs_the_top_two_live_in_the_testbed(tmp_path):
    require_testbed()
    for p, how in ((ROOT / "target" / "release" / "tierkit-run", "cargo build --release -p tierkit-run"),
                   (ROOT / "target" / "release" / "libtierkit_alloc.so", "make alloc"),
                   (ROOT / "workloads" / "build" / "rwmix", "make -C workloads")):
        if not p.is_file():
            skip_or_fail_in_ci(f"{p} is missing ({how})", f"{p} is missing ({how})")
    from tierkit import advising

    if advising.verify_where() != "vm":
        pytest.skip("this machine has a fast and a slow node: --verify runs here, not in the VM")
    trace = tmp_path / "rwmix.tkt"
    rc, out, err = run_cli("advise", trace, "-c", "0.2", "-q", "--json", "--policies", "interleave,hyplacer",
                           "--program", "--verify", "--", ROOT / "workloads" / "build" / "rwmix", "--size", "small",
                           "--work", "1", env={"TIERKIT_CACHE": "off"})
    assert rc == 0, err[-2000:]
    a = json.loads(out)
    v = a["verify"]
    assert len(v) == 2 and all(x["where"] == "testbed VM" and x["exit_status"] == 0 for x in v), v
    assert [x["policy"] for x in v] == [r["policy"] for r in a["rows"] if r.get("role") == "candidate"][:2]
    assert all(x["measured_wall_s"] > 0 and x["predicted_runtime_ns"] > 0 for x in v)
    assert set(v[0]["ratio"]) == {"predicted", "measured", "holds"}


@pytest.mark.vm
def test_every_spec_advise_searches_is_one_tierkit_run_takes(tmp_path, zipf_trace):
    """What advise simulates is what its command runs: every candidate spec of every grid and
    Cori's period passes `tierkit run --dry-run` in the VM, where the kernel's settings and
    DAMON are there to check against."""
    require_testbed()
    run_bin = ROOT / "target" / "release" / "tierkit-run"
    if not run_bin.is_file():
        skip_or_fail_in_ci(f"{run_bin} is missing", f"{run_bin} is missing")
    import tierkit
    from tierkit.testbed import FileSet, Testbed, VMConfig

    df = tierkit.advise(zipf_trace, fast_capacity=0.1, store=False, progress=False)
    specs = set()
    for s in df.attrs["advice"]["searches"].values():
        # a period in accesses (history's Cori trials) is simulated; its time form is what runs
        specs |= {s["live_spec"]} if "live_spec" in s else {g["spec"] for g in s.get("grid", [])}
    specs |= {r["policy"] for r in df.attrs["advice"]["rows"] if r.get("role") == "candidate" and r.get("deployable")}
    specs = sorted(x for x in specs if not x.startswith("guided"))
    assert len(specs) >= 8, specs
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024), FileSet().add_binary(run_bin)) as vm:
        cmd = "".join(f"tierkit-run --dry-run --policy {s!r} > /dev/null 2>> $OUT/err || echo {s!r} >> $OUT/bad; " for s in specs)
        r = vm.run(cmd + "true", timeout_s=300)
    assert not r.files.get("bad"), (r.files.get("bad"), (r.files.get("err") or b"").decode()[-1500:])
