"""The real-Linux testbed (docs/real-linux.md): a QEMU VM whose kernel sees a CPU-less, slower
second NUMA node as a lower memory tier, as Linux does for a CXL expander or Optane DCPMM in
KMEM DAX mode (seed 004, HyPlacer, section 2: DRAM + DCPMM as separate NUMA nodes; seed 002,
MemBrain, section 2: KNL's MCDRAM as a CPU-less node).

Tests marked `vm` boot the VM (make test-vm); the others check the harness on the host and run
everywhere.
"""
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile

import tempfile

import pytest
from tierkit import testbed as tb

from conftest import require_testbed

TIER_DIR = "/sys/devices/virtual/memory_tiering"


# --- host-side: the harness's pieces, no VM ---------------------------------------------------

def parse_newc(data: bytes) -> dict:
    """An independent reader of the newc format (the kernel's initramfs format) for the check."""
    out, pos = {}, 0
    while True:
        assert data[pos:pos + 6] == b"070701", f"bad magic at {pos}"
        f = [int(data[pos + 6 + 8 * i: pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = f[1], f[6], f[11]
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        pos += namesize
        pos += -pos % 4
        body = data[pos:pos + size]
        pos += size
        pos += -pos % 4
        if name == "TRAILER!!!":
            assert pos == len(data)
            return out
        out[name] = (mode, body)


def test_newc_archive_round_trips():
    fs = tb.FileSet().add_bytes("/etc/a", b"hello", 0o600).add_bytes("/usr/local/bin/x", b"\x7fELF..", 0o755)
    fs.entries["bin/sh"] = (stat.S_IFLNK | 0o777, b"", "/bin/busybox")
    got = parse_newc(fs.cpio())
    assert got["etc/a"] == (stat.S_IFREG | 0o600, b"hello")
    assert got["usr/local/bin/x"] == (stat.S_IFREG | 0o755, b"\x7fELF..")
    assert got["bin/sh"] == (stat.S_IFLNK | 0o777, b"/bin/busybox")
    # parents exist as directories, and come before what they hold
    names = list(got)
    for d in ("usr", "usr/local", "usr/local/bin"):
        assert stat.S_ISDIR(got[d][0]) and names.index(d) < names.index("usr/local/bin/x")


def test_fileset_tar_matches_cpio():
    fs = tb.FileSet().add_bytes("/opt/t/f", b"abc", 0o640)
    with tarfile.open(fileobj=io.BytesIO(fs.tar())) as t:
        m = t.getmember("opt/t/f")
        assert t.extractfile(m).read() == b"abc" and m.mode == 0o640
        assert t.getmember("opt/t").isdir()


def test_dynamic_binary_brings_its_libraries():
    host = shutil.which("ls")
    if host is None or not os.path.exists("/lib64/ld-linux-x86-64.so.2"):
        pytest.skip("no dynamically linked ls on this host")
    libs = tb.shared_libraries(host)
    assert any(p.name.startswith("libc.so") for p in libs)
    assert any("ld-linux" in p.name for p in libs)  # the loader itself, named by its absolute path
    fs = tb.FileSet().add_binary(host)
    assert "usr/local/bin/ls" in fs.entries
    assert all(str(p).lstrip("/") in fs.entries for p in libs)


def test_static_binary_needs_no_libraries(tmp_path):
    src = tmp_path / "s.c"
    src.write_text("int main(void){return 0;}\n")
    exe = tmp_path / "s"
    if subprocess.run(["cc", "-static", "-o", exe, src], capture_output=True).returncode != 0:
        pytest.skip("no static libc here")
    assert tb.shared_libraries(exe) == []


def test_qemu_command_has_two_nodes_with_worse_hmat_figures_for_node_1():
    cfg = tb.VMConfig(fast_mib=512, slow_mib=1536, accel="tcg")
    cmd = " ".join(tb.qemu_command(cfg, "vmlinuz", "initrd", "ctl.sock", "console.log"))
    assert "-machine pc,hmat=on" in cmd and "-m 2048M" in cmd and "-smp 2" in cmd
    assert "memory-backend-ram,id=m0,size=512M" in cmd and "memory-backend-ram,id=m1,size=1536M" in cmd
    assert "node,nodeid=0,cpus=0-1,memdev=m0,initiator=0" in cmd
    assert "node,nodeid=1,memdev=m1,initiator=0" in cmd  # no cpus=: node 1 is CPU-less
    assert "target=0,hierarchy=memory,data-type=access-latency,latency=100" in cmd
    assert "target=1,hierarchy=memory,data-type=access-latency,latency=300" in cmd
    assert "target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=20000M" in cmd
    assert "target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=5000M" in cmd


@pytest.mark.parametrize("kw, word", [
    ({"fast_mib": 128}, "fast_mib"), ({"slow_mib": 200}, "slow_mib"), ({"cpus": 0}, "cpus"),
    ({"accel": "hvf"}, "accel"), ({"slow_latency_ns": 50}, "slower"),
])
def test_bad_vm_shape_is_one_clear_error(kw, word):
    with pytest.raises(tb.TestbedError) as e:
        tb.VMConfig(**kw).check()
    assert word in str(e.value) and "\n" not in str(e.value)


def test_unbuilt_testbed_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERKIT_TESTBED_BUILD", str(tmp_path / "none"))
    why = tb.availability()
    assert why is not None and "\n" not in why
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "last-error.txt").write_text("apt-get download foo... failed: no network\n")
    if shutil.which("qemu-system-x86_64"):
        assert "no network" in tb.availability()
    with pytest.raises(tb.TestbedUnavailable):
        tb.Testbed().start()


@pytest.mark.parametrize("panics, boots, retried", [(1, 2, 1), (2, 2, None), (0, 1, None)])
def test_a_guest_that_panics_while_booting_is_booted_again_once(monkeypatch, capsys, panics, boots, retried):
    """A kernel panic during boot (under TCG, once in CI: an int3 oops while the initramfs
    unpacked) costs one more boot, said on stderr; a second panic, or a failure that is no
    panic, is the error it was."""
    calls = []

    def fake_start(self):
        calls.append(1)
        self._tmp = tempfile.TemporaryDirectory(prefix="tierkit-vm-test-")
        if len(calls) <= panics or (panics == 0 and len(calls) == 1):
            line = "[    1.28] Kernel panic - not syncing: Fatal exception in interrupt" if panics else "[    9.1] ready?"
            self.console_log.write_text("[    1.27] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n" * bool(panics) + line + "\n")
            raise tb.TestbedError("testbed: the VM closed its control port booting")
        return self

    monkeypatch.setattr(tb.Testbed, "_start", fake_start)
    t = tb.Testbed()
    if retried:
        assert t.start() is t and t.boot_retries == 1
        assert "panicked while booting ([    1.27] Oops: int3" in capsys.readouterr().err
        t.close()
    else:
        with pytest.raises(tb.TestbedError, match="closed its control port"):
            t.start()
    assert len(calls) == boots


def test_cli_errors_exit_2(tmp_path):
    env = {**os.environ, "TIERKIT_TESTBED_BUILD": str(tmp_path / "none")}
    p = subprocess.run([sys.executable, "-m", "tierkit.testbed", "run", "--", "true"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and p.stderr.startswith("error: testbed:") and len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run([sys.executable, "-m", "tierkit.testbed", "run", "--fast-mib", "100", "--", "true"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "fast_mib=100" in p.stderr and "Traceback" not in p.stderr


# --- in the VM --------------------------------------------------------------------------------

def tiers(vm) -> dict[int, str]:
    r = vm.run(f"for t in {TIER_DIR}/memory_tier*; do echo ${{t##*memory_tier}} $(cat $t/nodelist); done")
    assert r.status == 0, r.stderr
    return {int(line.split()[0]): line.split()[1] for line in r.stdout.split("\n") if line.strip()}


@pytest.mark.vm
def test_node_1_is_a_lower_memory_tier(testbed_vm):
    # Linux ranks tiers by abstract distance: a larger memory_tierN is slower (mm/memory-tiers.c);
    # node 1's HMAT figures (300 ns, 5 GB/s vs 100 ns, 20 GB/s) put it below node 0
    t = tiers(testbed_vm)
    by_node = {nodes: tid for tid, nodes in t.items()}
    assert set(by_node) == {"0", "1"}, t
    assert by_node["1"] > by_node["0"]
    # and the kernel exposes the figures QEMU's HMAT gave it
    r = testbed_vm.run("cd /sys/devices/system/node && cat node0/access0/initiators/read_latency node1/access0/initiators/read_latency "
                       "node0/access0/initiators/read_bandwidth node1/access0/initiators/read_bandwidth; cat has_cpu")
    lat0, lat1, bw0, bw1, has_cpu = r.stdout.split()
    assert (int(lat0), int(lat1)) == (100, 300) and (int(bw0), int(bw1)) == (20000, 5000)
    assert has_cpu == "0-1" or has_cpu == "0"  # both vCPUs on node 0; node 1 CPU-less


@pytest.mark.vm
def test_damon_sysfs_offers_vaddr_and_paddr(testbed_vm):
    # DAMON's sysfs interface, which tierkit run and damon-tiering drive (inside the VM only)
    r = testbed_vm.run("cd /sys/kernel/mm/damon/admin/kdamonds && echo 1 > nr_kdamonds && echo 1 > 0/contexts/nr_contexts "
                       "&& cat 0/contexts/0/avail_operations && echo 0 > nr_kdamonds")
    assert r.status == 0, r.stderr
    assert {"vaddr", "paddr"} <= set(r.stdout.split())


@pytest.mark.vm
def test_move_pages_moves_a_page_to_node_1_and_back(testbed_vm):
    r = testbed_vm.run("movepages 1")
    assert r.status == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got == {"initial_node": 0, "after_move_to_1": 1, "after_move_to_0": 0, "contents_intact": True}


@pytest.mark.vm
def test_output_status_and_files_come_back(testbed_vm):
    r = testbed_vm.run("echo out; echo err >&2; mkdir -p $OUT/d; printf 'x\\0y' > $OUT/d/f.bin; exit 7")
    assert (r.status, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert r.files == {"d/f.bin": b"x\0y"}
    # a fresh $OUT per command; argv lists are quoted for the shell
    r = testbed_vm.run(["sh", "-c", 'ls "$OUT"; echo "$1" "$V"', "-", "a b;c"], env={"V": "x'y"})
    assert (r.status, r.stdout, r.files) == (0, "a b;c x'y\n", {})


@pytest.mark.vm
def test_files_in_at_boot_and_later_with_libraries_timeout_kills(tmp_path):
    """Node sizes are parameters; host files and dynamic binaries (with ldd's libraries) go in
    at boot and into a running VM; a command past its timeout kills the VM with one line."""
    require_testbed()
    host_stat = shutil.which("stat")
    if host_stat is None or not tb.shared_libraries(host_stat):
        pytest.skip("no dynamically linked stat on this host")
    fs = tb.FileSet().add_binary(host_stat, "/opt/host/stat").add_bytes("/opt/data/hello", b"hello\n")
    with tb.Testbed(tb.VMConfig(fast_mib=512, slow_mib=768), fs) as vm:
        r = vm.run("/opt/host/stat --version | head -1; /opt/host/stat -c %s /opt/data/hello; "
                   "grep MemTotal /sys/devices/system/node/node*/meminfo")
        assert r.status == 0, r.stderr
        lines = r.stdout.splitlines()
        assert "GNU coreutils" in lines[0] and lines[1] == "6"
        total_kib = {int(l.split()[1]): int(l.split()[-2]) for l in lines[2:]}
        # MemTotal excludes what the kernel reserves at boot, most of it on node 0
        assert 0.75 * 512 * 1024 < total_kib[0] <= 512 * 1024
        assert 0.85 * 768 * 1024 < total_kib[1] <= 768 * 1024
        # sizes around the agent's 64 KiB read block, each checked whole on the other side
        for size in (1, 65536, 65537, 300_000):
            blob = bytes(range(256)) * (size // 256) + bytes(size % 256)
            vm.put(tb.FileSet().add_bytes("/opt/later/x", blob, 0o600))
            r = vm.run("stat -c %a /opt/later/x; cp /opt/later/x $OUT/back")
            assert r.stdout == "600\n" and r.files["back"] == blob
        with pytest.raises(tb.TestbedTimeout) as e:
            vm.run("sleep 60", timeout_s=2)
        assert "did not finish within 2 s" in str(e.value) and "\n" not in str(e.value)
        assert vm.proc.poll() is not None  # the VM is gone
        with pytest.raises(tb.TestbedError):
            vm.run("true")


@pytest.mark.vm
def test_cli_runs_a_command_and_passes_its_status_through(tmp_path):
    require_testbed()
    p = subprocess.run([sys.executable, "-m", "tierkit.testbed", "run", "--out", tmp_path / "o", "--",
                        "sh", "-c", "cat /sys/devices/virtual/memory_tiering/memory_tier*/nodelist; echo 42 > $OUT/r; exit 3"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr
    assert p.stdout.split() == ["0", "1"]
    assert (tmp_path / "o" / "r").read_text() == "42\n"
    assert p.stderr.startswith("testbed: booted in ")
