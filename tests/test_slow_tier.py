"""The testbed's slow tier (docs/real-linux.md, "A slow tier that is really slower") and the
timing validation built on it (docs/validation.md, "Predicted runtimes against measured ones"):
the parts that need no VM. The VM side is in tests/test_slow_tier_vm.py."""
import shutil
import subprocess

import pytest

from conftest import ROOT
from tierkit import testbed as tb


def test_node1_range_follows_the_pc_machine_layout():
    # the testbed's shape: all RAM below 4 GiB, node 1 right after node 0 (the guest's own
    # memory blocks 8-15 of 128 MiB, read by calibrate(), say the same)
    assert tb.node1_ranges(1024, 1024) == [(1 << 30, 1 << 30)]
    assert tb.node1_ranges(512, 1024) == [(512 << 20, 1 << 30)]
    # 3.5 GiB or more: 3 GiB below the PCI hole, the rest from 4 GiB
    assert tb.node1_ranges(2048, 2048) == [(2 << 30, 1 << 30), (4 << 30, 1 << 30)]
    assert tb.node1_ranges(3584, 512) == [((4 << 30) + (512 << 20), 512 << 20)]


@pytest.mark.parametrize("kw, msg", [
    ({"fast_latency_ns": 3000, "slow_latency_ns": 1000}, "latency must be above"),
    ({"llc_bytes": 3 << 20}, "power of two"),
    ({"llc_ways": 0}, "ways 1..64"),
    ({"scope": "kernel"}, "scope='kernel'"),
    ({"ips": 10}, "too low"),
])
def test_slow_tier_refuses_a_model_that_cannot_work(kw, msg):
    with pytest.raises(tb.TestbedError, match=msg):
        tb.VMConfig(slow_tier=tb.SlowTier(**kw)).check()


def test_the_plugin_is_on_the_command_line_and_the_hmat_tells_its_latencies(tmp_path):
    cfg = tb.VMConfig(slow_tier=tb.SlowTier(fast_latency_ns=1000, slow_latency_ns=3000))
    cmd = tb.qemu_command(cfg, tmp_path / "k", tmp_path / "i", tmp_path / "s", tmp_path / "c", ["slow=0x40000000:0x40000000", "ips=1"])
    plugin = cmd[cmd.index("-plugin") + 1]
    assert plugin.endswith("slowtier.so,slow=0x40000000:0x40000000,ips=1")
    lat = [a for a in cmd if "data-type=access-latency" in a]
    assert "target=0" in lat[0] and "latency=1000" in lat[0] and "latency=3000" in lat[1]
    # without a slow tier: no plugin, the configured figures
    cmd = tb.qemu_command(tb.VMConfig(), tmp_path / "k", tmp_path / "i", tmp_path / "s", tmp_path / "c")
    assert "-plugin" not in cmd and any("latency=100," in a or a.endswith("latency=100") for a in cmd)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_plugin_builds_without_a_warning(tmp_path):
    so = tmp_path / "slowtier.so"
    p = subprocess.run(["cc", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden",
                        "-o", str(so), str(ROOT / "testbed" / "slowtier.c")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    nm = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
    # QEMU looks these two up; nothing else is exported
    assert {l.split()[-1] for l in nm.splitlines()} == {"qemu_plugin_install", "qemu_plugin_version"}
