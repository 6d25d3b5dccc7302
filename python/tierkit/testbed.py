"""The real-Linux testbed: a QEMU VM with Linux 6.12 and a CPU-less, slower second NUMA node.

``make testbed`` builds the image (testbed/build.py: Debian's 6.12 cloud kernel, busybox-static,
an init script and the testbed's own test programs, into testbed/build/). This module boots it
and runs commands inside it (docs/real-linux.md)::

    from tierkit.testbed import Testbed, VMConfig
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024)) as vm:
        r = vm.run("cat /sys/devices/virtual/memory_tiering/memory_tier*/nodelist")
        r.status, r.stdout, r.files          # files: what the command wrote under $OUT

or from a shell: ``python -m tierkit.testbed run -- CMD ARGS...``.

How it talks to the VM: the kernel console goes to a log file (ttyS0); commands, their output
and files travel over a virtio-serial port named ``tierkit.0`` (the kernel has no 9p, but has
virtio console built in). The guest's agent (testbed/agent.sh) reads ``RUN id nbytes`` plus the
script, runs it with ``$OUT`` set to an empty directory, and answers ``RESULT id nbytes`` plus a
tar of stdout, stderr, the exit status and ``$OUT``. Host files go in as an extra cpio archive
appended to the initramfs at boot (``files=``), or as a tar over the port later (``put``).

This module uses only the standard library, so that testbed/build.py can load it by path.
Everything that changes kernel state happens inside the VM; nothing here touches the host's.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PORT_NAME = "tierkit.0"


def build_dir() -> Path:
    """Where ``make testbed`` puts the image (TIERKIT_TESTBED_BUILD overrides)."""
    return Path(os.environ.get("TIERKIT_TESTBED_BUILD", REPO / "testbed" / "build"))


class TestbedError(Exception):
    """A failure with a one-line message meant for the user."""

    __test__ = False  # not a pytest test class


class TestbedUnavailable(TestbedError):
    """The testbed cannot run here (no QEMU, image not built)."""


class TestbedTimeout(TestbedError):
    """A command or the boot ran past its limit; the VM was killed."""


# --- cpio (newc), the initramfs format --------------------------------------------------------

def write_newc(entries) -> bytes:
    """A newc cpio archive from (name, mode, data, link_target) tuples; directories before their
    contents. Names are relative ("bin/sh"); owner root; one inode per entry."""
    out = bytearray()

    def pad():
        out.extend(b"\0" * (-len(out) % 4))

    def header(ino, mode, size, name):
        nb = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(nb), 0)
        out.extend(b"070701" + "".join("%08X" % v for v in fields).encode() + nb)
        pad()

    for ino, (name, mode, data, link) in enumerate(entries, start=1):
        body = link.encode() if link is not None else data
        header(ino, mode, len(body), name)
        out.extend(body)
        pad()
    header(0, 0, 0, "TRAILER!!!")
    return bytes(out)


class FileSet:
    """Files to put into the VM: guest path -> contents, with the directories they need."""

    def __init__(self):
        self.entries: dict[str, tuple[int, bytes, str | None]] = {}

    def _dirs(self, guest: str):
        parts = guest.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            self.entries.setdefault(d, (stat.S_IFDIR | 0o755, b"", None))

    def add_bytes(self, guest: str, data: bytes, mode: int = 0o644) -> "FileSet":
        guest = "/" + guest.strip("/")
        self._dirs(guest)
        self.entries[guest.strip("/")] = (stat.S_IFREG | mode, data, None)
        return self

    def add_file(self, host, guest: str | None = None) -> "FileSet":
        """A host file (its mode kept, symlinks followed) or a whole directory tree."""
        host = Path(host)
        guest = guest or str(host)
        if host.is_dir():
            for p in sorted(host.rglob("*")):
                if p.is_file():
                    self.add_file(p, guest.rstrip("/") + "/" + str(p.relative_to(host)))
            return self
        try:
            data = host.read_bytes()
        except OSError as e:
            raise TestbedError(f"testbed: cannot read {host}: {e.strerror}") from None
        return self.add_bytes(guest, data, host.stat().st_mode & 0o7777)

    def add_binary(self, host, guest: str | None = None) -> "FileSet":
        """A host executable and, if it is dynamically linked, the shared libraries and loader
        that ``ldd`` names, each at the same path in the VM (the VM has no libc of its own)."""
        host = Path(host)
        if not host.is_file():
            raise TestbedError(f"testbed: {host}: no such file")
        self.add_file(host, guest or f"/usr/local/bin/{host.name}")
        for lib in shared_libraries(host):
            self.add_file(lib, str(lib))
        return self

    def merge(self, other: "FileSet") -> "FileSet":
        self.entries.update(other.entries)
        return self

    def cpio(self) -> bytes:
        return write_newc([(n, m, d, l) for n, (m, d, l) in sorted(self.entries.items())])

    def tar(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
            for name, (mode, data, _link) in sorted(self.entries.items()):
                ti = tarfile.TarInfo(name)
                ti.mode = mode & 0o7777
                if stat.S_ISDIR(mode):
                    ti.type = tarfile.DIRTYPE
                    t.addfile(ti)
                else:
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))
        return buf.getvalue()


def shared_libraries(binary) -> list[Path]:
    """The shared libraries (and the dynamic loader) a host binary needs, from ``ldd``; empty for
    a static binary. A library ldd cannot find is an error naming it."""
    try:
        p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    except FileNotFoundError:
        raise TestbedError("testbed: ldd is missing (needed to copy a dynamic binary's libraries)") from None
    text = p.stdout + p.stderr
    if "not a dynamic executable" in text or "statically linked" in text:
        return []
    if p.returncode != 0:
        raise TestbedError(f"testbed: ldd {binary} failed: {text.strip().splitlines()[-1] if text.strip() else p.returncode}")
    libs = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if "=> not found" in line:
            raise TestbedError(f"testbed: {binary} needs {line.split()[0]}, which ldd cannot find")
        if "=>" in line:
            path = line.split("=>", 1)[1].split("(")[0].strip()
        else:
            path = line.split("(")[0].strip()
        if path.startswith("/"):
            libs.append(Path(path))
    return libs


# --- the VM ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SlowTier:
    """The time model the slow-tier plugin (testbed/slowtier.c) paces the VM to: each guest
    instruction costs 1/ips s, each miss of a last-level cache model costs ``fast_latency_ns``
    when the line is on node 0 and ``slow_latency_ns`` on node 1 (docs/real-linux.md, "A slow
    tier that is really slower"). The defaults describe a machine about 40 times slower than a
    real one, slow enough that this host emulates it faster than its model even under load:
    25 M instructions per second, 1 and 3 us per miss (the 100 vs 300 ns of the HMAT, scaled)."""

    ips: int = 25_000_000
    fast_latency_ns: int = 1000
    slow_latency_ns: int = 3000
    llc_bytes: int = 4 << 20
    llc_ways: int = 16
    scope: str = "user"           # whose accesses are modelled: user space, or all code
    credit_ns: int = 50_000_000   # how far behind its model a vCPU may fall and still catch up

    def check(self):
        if self.ips < 1000:
            raise TestbedError(f"testbed: slow tier ips={self.ips} is too low (at least 1000)")
        if not 0 < self.fast_latency_ns < self.slow_latency_ns:
            raise TestbedError("testbed: slow tier: node 1's latency must be above node 0's, both above 0")
        sets = self.llc_bytes // 64 // max(self.llc_ways, 1)
        if not 1 <= self.llc_ways <= 64 or self.llc_bytes % (64 * self.llc_ways) or sets & (sets - 1) or sets == 0:
            raise TestbedError(f"testbed: slow tier cache {self.llc_bytes} bytes, {self.llc_ways} ways: "
                               "the number of sets (bytes / 64 / ways) must be a power of two, ways 1..64")
        if self.scope not in ("user", "all"):
            raise TestbedError(f"testbed: slow tier scope={self.scope!r} is not user or all")

    def plugin_args(self) -> list[str]:
        return [f"ips={self.ips}", f"lat0={self.fast_latency_ns}", f"lat1={self.slow_latency_ns}",
                f"llc={self.llc_bytes}", f"ways={self.llc_ways}", f"scope={self.scope}", f"credit={self.credit_ns}"]


def node1_ranges(fast_mib: int, slow_mib: int) -> list[tuple[int, int]]:
    """Node 1's guest physical ranges (base, size) on QEMU's pc machine: RAM is laid out node by
    node, below 4 GiB up to 3 GiB when there are 3.5 GiB or more (else all of it), the rest from
    4 GiB. `calibrate` checks the answer against the guest's own view (its memory blocks)."""
    fast, total = fast_mib << 20, (fast_mib + slow_mib) << 20
    low = 0xC0000000 if total >= 0xE0000000 else total
    out = []
    if fast < low:
        out.append((fast, low - fast))
    hi_start = max(fast, low)
    if total > hi_start:
        out.append(((1 << 32) + hi_start - low, total - hi_start))
    return out


@dataclass
class VMConfig:
    """The VM's shape. Node 0 holds both vCPUs and is the fast tier; node 1 has memory only and
    worse HMAT figures, so the kernel puts it in a lower memory tier. The defaults are those of
    docs/real-linux.md: 100 vs 300 ns, 20 vs 5 GB/s (roughly DRAM vs a CXL expander)."""

    fast_mib: int = 1024
    slow_mib: int = 1024
    cpus: int = 2
    fast_latency_ns: int = 100
    slow_latency_ns: int = 300
    fast_bandwidth_mb_s: int = 20000
    slow_bandwidth_mb_s: int = 5000
    # TCG by default: on this machine kind KVM guests fail in early boot (docs/real-linux.md);
    # TIERKIT_TESTBED_ACCEL=kvm on a machine where nested KVM works
    accel: str = field(default_factory=lambda: os.environ.get("TIERKIT_TESTBED_ACCEL", "tcg"))
    kernel_args: str = ""
    # None: both nodes run at the host's speed; a SlowTier: node 1 is really slower
    slow_tier: "SlowTier | None" = None

    def check(self):
        if self.fast_mib < 256:
            raise TestbedError(f"testbed: fast_mib={self.fast_mib} is too small (node 0 holds the kernel and the initramfs; at least 256)")
        if self.slow_mib < 128:
            raise TestbedError(f"testbed: slow_mib={self.slow_mib} is too small (at least 128, one memory block)")
        for k in ("fast_mib", "slow_mib"):
            if getattr(self, k) % 128:
                raise TestbedError(f"testbed: {k}={getattr(self, k)} is not a multiple of 128 (Linux onlines memory in 128 MiB blocks)")
        if not 1 <= self.cpus <= 8:
            raise TestbedError(f"testbed: cpus={self.cpus} out of range (1..8)")
        if self.accel not in ("tcg", "kvm"):
            raise TestbedError(f"testbed: accel={self.accel!r} is not tcg or kvm")
        if not (self.fast_latency_ns < self.slow_latency_ns and self.fast_bandwidth_mb_s > self.slow_bandwidth_mb_s):
            raise TestbedError("testbed: node 1 must be slower than node 0 (higher latency, lower bandwidth)")
        if self.slow_tier is not None:
            self.slow_tier.check()
            if self.accel != "tcg":
                raise TestbedError("testbed: the slow tier is a TCG plugin; it needs accel=tcg")

    def hmat(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(latency ns, bandwidth MB/s) of node 0 and node 1 as the HMAT tells the kernel: the
        slow tier's own figures when it is on (a 64-byte line per miss latency), else the
        configured ones."""
        st = self.slow_tier
        if st is None:
            return ((self.fast_latency_ns, self.fast_bandwidth_mb_s), (self.slow_latency_ns, self.slow_bandwidth_mb_s))
        return tuple((lat, max(1, 64 * 1000 // lat)) for lat in (st.fast_latency_ns, st.slow_latency_ns))  # type: ignore[return-value]


def qemu_binary(slow_tier: bool = False) -> tuple[str, list[str]]:
    """The QEMU to run and its firmware directories. With the slow tier, the one ``make
    testbed`` unpacked from bookworm-backports (QEMU >= 9.1: the plugin needs its API); without,
    the host's (the one the kernel validation and the other VM tests were measured on), or the
    unpacked one where the host has none."""
    q = manifest().get("qemu") or {}
    if not slow_tier and shutil.which("qemu-system-x86_64") is not None:
        return "qemu-system-x86_64", []
    if q.get("binary") and "version" in q and (build_dir() / q["binary"]).is_file():
        dirs = [a for d in q.get("data_dirs", []) for a in ("-L", str(build_dir() / d))]
        return str(build_dir() / q["binary"]), dirs
    return "qemu-system-x86_64", []


def slow_tier_unavailable() -> str | None:
    """None when the slow-tier plugin can run here, else one line saying why not."""
    why = availability()
    if why:
        return why
    q = manifest().get("qemu") or {}
    if "error" in q:
        return f"no slow tier: {q['error']}"
    if not q:
        return "no slow tier: the testbed was built before it had one (run make testbed)"
    if not (build_dir() / "slowtier.so").is_file():
        return f"no slow tier: {build_dir() / 'slowtier.so'} is missing (run make testbed)"
    return None


def qemu_command(cfg: VMConfig, kernel: Path, initrd: Path, control_sock: Path, console_log: Path,
                 plugin: list[str] | None = None) -> list[str]:
    """The QEMU command line: two NUMA nodes, node 1 CPU-less with worse HMAT figures, no
    devices but a serial console (to a file) and the virtio-serial control port; with
    ``plugin`` (the slow tier's arguments after the .so path), -plugin."""
    cpus = f"0-{cfg.cpus - 1}" if cfg.cpus > 1 else "0"
    binary, data = qemu_binary(cfg.slow_tier is not None)
    cmd = [
        binary, *data, "-accel", cfg.accel, "-cpu", "max" if cfg.accel == "tcg" else "host",
        "-machine", "pc,hmat=on", "-smp", str(cfg.cpus), "-m", f"{cfg.fast_mib + cfg.slow_mib}M",
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-object", f"memory-backend-ram,id=m0,size={cfg.fast_mib}M",
        "-object", f"memory-backend-ram,id=m1,size={cfg.slow_mib}M",
        "-numa", f"node,nodeid=0,cpus={cpus},memdev=m0,initiator=0",
        "-numa", "node,nodeid=1,memdev=m1,initiator=0",
    ]
    if plugin is not None:
        cmd += ["-plugin", ",".join([str(build_dir() / "slowtier.so"), *plugin])]
    for target, (lat, bw) in enumerate(cfg.hmat()):
        cmd += ["-numa", f"hmat-lb,initiator=0,target={target},hierarchy=memory,data-type=access-latency,latency={lat}",
                "-numa", f"hmat-lb,initiator=0,target={target},hierarchy=memory,data-type=access-bandwidth,bandwidth={bw}M"]
    cmd += [
        "-chardev", f"file,id=con,path={console_log}", "-serial", "chardev:con",
        "-chardev", f"socket,id=tb,path={control_sock}",
        "-device", "virtio-serial-pci,id=vser", "-device", f"virtserialport,bus=vser.0,chardev=tb,name={PORT_NAME}",
        "-kernel", str(kernel), "-initrd", str(initrd),
        "-append", f"console=ttyS0 quiet panic=-1 rdinit=/init {cfg.kernel_args}".strip(),
    ]
    return cmd


def manifest() -> dict:
    p = build_dir() / "manifest.json"
    return json.loads(p.read_text()) if p.is_file() else {}


def availability() -> str | None:
    """None when the testbed can boot here, else one line saying why not."""
    m = manifest()
    if shutil.which(qemu_binary()[0]) is None:
        return "qemu-system-x86_64 is not installed (make testbed installs qemu-system-x86)"
    if not m:
        last = build_dir() / "last-error.txt"
        if last.is_file():
            return f"the testbed image could not be built: {last.read_text().strip()}"
        return f"the testbed image is not built ({build_dir()}/manifest.json missing; run make testbed)"
    for k in ("kernel", "initramfs"):
        if not (build_dir() / m[k]).is_file():
            return f"the testbed image is incomplete ({build_dir() / m[k]} missing; run make testbed)"
    return None


@dataclass
class Result:
    """One command's outcome. ``files`` maps paths relative to the command's $OUT to contents."""

    status: int
    stdout: str
    stderr: str
    files: dict[str, bytes]
    wall_s: float
    # with a slow tier: the plugin's counters over the command (lag_ns, misses_node1, ...)
    model: dict | None = None

    def save_files(self, dest) -> list[Path]:
        dest = Path(dest)
        written = []
        for rel, data in sorted(self.files.items()):
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            written.append(p)
        return written


_COUNTERS = ("insns", "stall_ns", "lag_ns", "accesses", "misses_node0", "misses_node1")


class Testbed:
    """One booted VM; ``run`` as many commands as needed, then ``close`` (or use ``with``)."""

    __test__ = False

    def __init__(self, config: VMConfig | None = None, files: FileSet | None = None, boot_timeout_s: float = 120.0):
        self.config = config or VMConfig()
        self.config.check()
        self.files = files or FileSet()
        self.boot_timeout_s = boot_timeout_s
        self.boot_s: float | None = None
        self.boot_retries = 0
        self.guest_uptime_s: float | None = None
        self.calibration: dict | None = None  # set by calibrate()
        self.proc: subprocess.Popen | None = None
        self.conn: socket.socket | None = None
        self._buf = b""
        self._next_id = 1
        self._tmp: tempfile.TemporaryDirectory | None = None

    # lifecycle
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def console_log(self) -> Path | None:
        return Path(self._tmp.name) / "console.log" if self._tmp else None

    def start(self):
        # A guest kernel that panics while it boots is booted again, once. Under TCG the 6.12
        # kernel died this way once in CI (2026-11-25: an int3 oops in enqueue_timer while the
        # initramfs unpacked, most likely a breakpoint the kernel plants while it patches its
        # own code); a panic after boot, or a second one, is an error. `boot_retries` says
        # whether it happened.
        for attempt in range(2):
            try:
                return self._start()
            except TestbedUnavailable:
                self.close()
                raise
            except TestbedError as e:
                panic = self._boot_panic()
                self.close()
                if attempt == 0 and panic:
                    self.boot_retries += 1
                    print(f"testbed: the guest kernel panicked while booting ({panic}); booting it again", file=sys.stderr)
                    continue
                raise e
            except BaseException:
                self.close()
                raise

    def _boot_panic(self) -> str | None:
        """The first line of a kernel panic or oops in the console log, if the guest died."""
        if self.console_log is None:
            return None
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if "Kernel panic" in line or "Oops:" in line:
                return line.strip()[:120]
        return None

    def _start(self):
        self._buf = b""
        why = availability()
        if why:
            raise TestbedUnavailable(f"testbed: {why}")
        m = manifest()
        self._tmp = tempfile.TemporaryDirectory(prefix="tierkit-vm-")
        tmp = Path(self._tmp.name)
        # the base initramfs plus, appended, a cpio of the extra files (the kernel unpacks every
        # archive in the file; the base is padded to 4 bytes so the next header is aligned)
        initrd = tmp / "initrd"
        with open(initrd, "wb") as f:
            base = (build_dir() / m["initramfs"]).read_bytes()
            f.write(base + b"\0" * (-len(base) % 4))
            if self.files.entries:
                f.write(self.files.cpio())
        sock_path = tmp / "ctl.sock"
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(sock_path))
        srv.listen(1)
        plugin = None
        st = self.config.slow_tier
        if st is not None:
            why = slow_tier_unavailable()
            if why:
                srv.close()
                raise TestbedUnavailable(f"testbed: {why}")
            # boots at the host's pace; pacing starts once the agent answers
            self._control.write_text("0")
            ranges = [f"slow={b:#x}:{n:#x}" for b, n in node1_ranges(self.config.fast_mib, self.config.slow_mib)]
            plugin = [*ranges, *st.plugin_args(), f"stats={self._stats}", f"control={self._control}"]
        cmd = qemu_command(self.config, build_dir() / m["kernel"], initrd, sock_path, self.console_log, plugin)
        t0 = time.monotonic()
        try:
            # QEMU's own messages to a file, not a pipe nobody drains while the VM runs
            with open(tmp / "qemu.log", "wb") as qlog:
                self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT,
                                             start_new_session=True)
        except OSError as e:
            srv.close()
            raise TestbedUnavailable(f"testbed: cannot start QEMU: {e}") from None
        deadline = t0 + self.boot_timeout_s
        try:
            srv.settimeout(0.2)
            while self.conn is None:
                try:
                    self.conn, _ = srv.accept()
                except socket.timeout:
                    self._check_alive("while starting")
                    if time.monotonic() > deadline:
                        self._fail_timeout(f"QEMU did not connect within {self.boot_timeout_s:.0f} s")
        finally:
            srv.close()
        line = self._readline(deadline, "booting")
        if not line.startswith("READY"):
            self.kill()
            raise TestbedError(f"testbed: unexpected first line from the VM: {line[:80]!r}")
        self.boot_s = time.monotonic() - t0
        try:
            self.guest_uptime_s = float(line.split()[1])  # the kernel's own clock at the agent's start
        except (IndexError, ValueError):
            self.guest_uptime_s = None
        if st is not None:
            self.pacing(True)
        return self

    # the slow tier
    @property
    def _stats(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name) / "slowtier-stats.json"

    @property
    def _control(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name) / "slowtier-control"

    def pacing(self, on: bool):
        """Pace the VM to the slow tier's time model (on) or let it run at the host's pace.
        The plugin reads the switch about every 50 ms; this waits until it has."""
        if self.config.slow_tier is None or self._tmp is None:
            raise TestbedError("testbed: the VM has no slow tier")
        self._control.write_text("1" if on else "0")
        time.sleep(0.15)

    def model_stats(self) -> dict | None:
        """The slow-tier plugin's counters (instructions, misses per node, stall and lag in ns,
        its parameters), or None without a slow tier. ``lag_ns`` is how far the host fell
        behind the model: time the guest saw pass that the model did not ask for."""
        if self.config.slow_tier is None or self._tmp is None:
            return None
        for _ in range(20):
            try:
                return json.loads(self._stats.read_text())
            except (OSError, ValueError):
                time.sleep(0.06)  # between the plugin's truncate and write; it rewrites every 50 ms
        raise TestbedError(f"testbed: the slow-tier plugin's counters ({self._stats}) cannot be read")

    def close(self):
        if self.proc and self.proc.poll() is None and self.conn is not None:
            try:
                self.conn.sendall(b"QUIT 0 0\n")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None

    def kill(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    # commands
    def run(self, command, timeout_s: float = 120.0, env: dict[str, str] | None = None) -> Result:
        """Run a shell command (a string, or an argv list) in the VM as root, with $OUT set to an
        empty directory whose files come back in ``Result.files`` and ``env`` exported. On
        timeout the VM is killed and TestbedTimeout raised (the session is over)."""
        if isinstance(command, (list, tuple)):
            command = shlex.join(str(c) for c in command)
        for k, v in (env or {}).items():
            if not k.isidentifier():
                raise TestbedError(f"testbed: environment variable name {k!r} is not valid")
            command = f"export {k}={shlex.quote(str(v))}\n" + command
        if self.conn is None:
            raise TestbedError("testbed: the VM is not running")
        rid = self._next_id
        self._next_id += 1
        script = command.encode()
        before = self.model_stats()
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        what = f"command {command[:60]!r}"
        self._send(f"RUN {rid} {len(script)}\n".encode() + script, deadline, what, timeout_s)
        line = self._readline(deadline, what, timeout_s)
        parts = line.split()
        if len(parts) != 3 or parts[0] != "RESULT" or parts[1] != str(rid):
            self.kill()
            raise TestbedError(f"testbed: unexpected answer from the VM: {line[:80]!r}")
        data = self._readexact(int(parts[2]), deadline, what, timeout_s)
        wall = time.monotonic() - t0
        out = {}
        files = {}
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            for m in t.getmembers():
                if not m.isfile():
                    continue
                f = t.extractfile(m)
                if f is None:
                    continue
                content = f.read()
                if m.name in ("stdout", "stderr", "status"):
                    out[m.name] = content
                elif m.name.startswith("out/"):
                    files[m.name[4:]] = content
        model = None
        if before is not None:
            time.sleep(0.06)  # one more rewrite of the counters by the plugin
            after = self.model_stats() or {}
            model = {k: (v - before.get(k, 0) if k in _COUNTERS else v) for k, v in after.items()}
        return Result(status=int(out.get("status", b"255").strip() or 255),
                      stdout=out.get("stdout", b"").decode(errors="replace"),
                      stderr=out.get("stderr", b"").decode(errors="replace"), files=files, wall_s=wall, model=model)

    def put(self, files: FileSet, timeout_s: float = 120.0):
        """Copy files into the running VM (a tar over the control port)."""
        if self.conn is None:
            raise TestbedError("testbed: the VM is not running")
        rid = self._next_id
        self._next_id += 1
        data = files.tar()
        deadline = time.monotonic() + timeout_s
        self._send(f"PUT {rid} {len(data)}\n".encode() + data, deadline, "copying files in", timeout_s)
        line = self._readline(deadline, "copying files in", timeout_s)
        if line != f"OK {rid} 0":
            raise TestbedError(f"testbed: copying files into the VM failed ({line[:80]!r})")

    # transport
    def _check_alive(self, what):
        if self.proc.poll() is not None:
            try:
                out = (Path(self._tmp.name) / "qemu.log").read_text(errors="replace").strip()
            except OSError:
                out = ""
            tail = out.splitlines()[-1] if out else self._console_tail()
            self.kill()
            raise TestbedError(f"testbed: QEMU exited ({self.proc.returncode}) {what}: {tail}")

    def _console_tail(self) -> str:
        """The console's last line, and where a copy of the whole console log is kept (the VM's
        own directory goes when it closes): a kernel panic's trace is in it."""
        if self.console_log is None:
            return "(no console log)"
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return "(no console log)"
        lines = [l for l in text.splitlines() if l.strip()]
        last = lines[-1].strip() if lines else "(no console output)"
        try:
            fd, kept = tempfile.mkstemp(prefix="tierkit-vm-console-", suffix=".log")
            with os.fdopen(fd, "w") as f:
                f.write(text)
        except OSError:
            return last
        return f"{last}; whole console log: {kept}"

    def _fail_timeout(self, msg):
        tail = self._console_tail()
        self.kill()
        raise TestbedTimeout(f"testbed: {msg}; the VM was killed (last console line: {tail})")

    def _send(self, data: bytes, deadline, what, limit_s):
        # in slices with the deadline checked between them: the guest may drain the port slowly
        view = memoryview(data)
        conn = self.conn
        if conn is None:
            raise TestbedError(f"testbed: {what}: the VM is not running")
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail_timeout(f"{what} did not finish within {limit_s:g} s")
            conn.settimeout(min(remaining, 0.5))
            try:
                n = conn.send(view[:1 << 20])
            except socket.timeout:
                self._check_alive(what)
                continue
            except OSError as e:
                self._check_alive(what)
                self.kill()
                raise TestbedError(f"testbed: lost the VM's control port {what}: {e.strerror}") from None
            view = view[n:]

    def _fill(self, deadline, what, limit_s):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self._fail_timeout(f"{what} did not finish within {limit_s:g} s")
        self.conn.settimeout(min(remaining, 0.5))
        try:
            chunk = self.conn.recv(1 << 20)
        except socket.timeout:
            self._check_alive(what)
            return
        if not chunk:
            self._check_alive(what)
            self.kill()
            raise TestbedError(f"testbed: the VM closed its control port {what} (last console line: {self._console_tail()})")
        self._buf += chunk

    def _readline(self, deadline, what, limit_s=None) -> str:
        limit_s = limit_s if limit_s is not None else self.boot_timeout_s
        while b"\n" not in self._buf:
            self._fill(deadline, what, limit_s)
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def _readexact(self, n, deadline, what, limit_s) -> bytes:
        while len(self._buf) < n:
            self._fill(deadline, what, limit_s)
        data, self._buf = self._buf[:n], self._buf[n:]
        return data


def calibrate(vm: Testbed, mib: int = 64, steps: int = 200_000) -> dict:
    """What each node costs a program in this VM, measured inside it by testbed/memlat.c (a
    dependent chase over MIB MiB, a sequential read, a move_pages of the buffer to the other
    node, the buffer's first touch): per node ``chase_ns`` (per step), ``stream_gb_per_s``,
    ``move_ns_per_page``, ``fault_ns_per_page`` (a 4 KiB page's fault, allocation and zeroing),
    ``clear_refs_ns_per_page`` and ``wp_fault_ns_per_page`` (soft-dirty tracking's two costs),
    ``on_node_fraction`` (where the pages really were); ``cache_hit_chase_ns``, the same chase
    over 1 MiB (it stays in the cache: a step's instructions alone); and the slow-tier
    plugin's counters over the measurement (``lag_ns``: how far the host fell behind the model).
    Checks that node 1's memory blocks are where the plugin was told they are."""

    def memlat(node: int, size_mib: int, n_steps: int = steps) -> dict:
        r = vm.run(["memlat", str(node), str(size_mib), str(n_steps)], timeout_s=900)
        if r.status != 0:
            raise TestbedError(f"testbed: memlat {node} {size_mib} failed ({r.status}): {(r.stderr or r.stdout).strip()[-200:]}")
        try:
            row = json.loads(r.stdout)
        except ValueError:
            raise TestbedError(f"testbed: memlat printed no JSON: {r.stdout.strip()[:120]!r}") from None
        if r.model is not None:
            row["lag_ns"] = r.model.get("lag_ns", 0)
        return row

    # a chase that stays in the cache: the cost of a step's instructions alone
    # (ten times the steps: 200,000 steps in the cache are 30 ms of guest time, within the
    # plugin's 50 ms of pacing credit, and one boot read 278 ns where others read 150-162)
    hit_ns = memlat(0, 1, steps * 10)["chase_ns"]
    nodes = [memlat(node, mib) for node in (0, 1)]
    for row in nodes:
        if row["on_node_fraction"] < 0.99:
            raise TestbedError(f"testbed: memlat's buffer was only {row['on_node_fraction']:.0%} on node {row['node']}")
    lag = sum(row.get("lag_ns", 0) for row in nodes)
    out = {"mib": mib, "steps": steps, "nodes": nodes, "cache_hit_chase_ns": hit_ns,
           "chase_ratio": round(nodes[1]["chase_ns"] / nodes[0]["chase_ns"], 4),
           "stream_ratio": round(nodes[0]["stream_gb_per_s"] / nodes[1]["stream_gb_per_s"], 4)}
    st = vm.config.slow_tier
    if st is not None:
        blocks = vm.run("cat /sys/devices/system/memory/block_size_bytes; ls /sys/devices/system/node/node1 | grep '^memory[0-9]'")
        lines = blocks.stdout.split()
        size = int(lines[0], 16)
        told = node1_ranges(vm.config.fast_mib, vm.config.slow_mib)
        for name in lines[1:]:
            base = int(name[len("memory"):]) * size
            if not any(b <= base and base + size <= b + n for b, n in told):
                raise TestbedError(f"testbed: node 1's memory block {name} ({base:#x}) is outside the range the slow-tier plugin "
                                   f"was given ({', '.join(f'{b:#x}+{n:#x}' for b, n in told)})")
        out["slow_tier"] = {k: getattr(st, k) for k in st.__dataclass_fields__}
        out["lag_ns"] = lag
        out["qemu"] = (manifest().get("qemu") or {}).get("version")
    vm.calibration = out
    return out


def run_once(command, config: VMConfig | None = None, files: FileSet | None = None, timeout_s: float = 120.0) -> Result:
    """Boot, run one command, shut down."""
    with Testbed(config, files) as vm:
        return vm.run(command, timeout_s=timeout_s)


# --- command line ------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tierkit.testbed",
                                 description="Run a command in the tiered-memory testbed VM (docs/real-linux.md).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="what is built, and whether the VM can boot here")
    r = sub.add_parser("run", help="boot the VM, run COMMAND, print its output, exit with its status")
    r.add_argument("--fast-mib", type=int, default=1024, help="node 0 (fast tier, both vCPUs) size in MiB")
    r.add_argument("--slow-mib", type=int, default=1024, help="node 1 (CPU-less lower tier) size in MiB")
    r.add_argument("--put", action="append", default=[], metavar="HOST[:GUEST]", help="copy a host file or directory in")
    r.add_argument("--bin", action="append", default=[], metavar="HOST[:GUEST]",
                   help="copy a host executable in with the shared libraries ldd names (default /usr/local/bin/NAME)")
    r.add_argument("--out", metavar="DIR", help="write the files the command left under $OUT here")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds before the VM is killed (default 300)")
    r.add_argument("command", nargs=argparse.REMAINDER)
    c = sub.add_parser("calibrate", help="boot the VM with the slow tier and measure each node (chase_ns, stream_gb_per_s)")
    c.add_argument("--json", action="store_true", help="print the whole calibration as JSON")
    c.add_argument("--mib", type=int, default=64, help="buffer per node in MiB (default 64; above the 4 MiB cache model)")
    c.add_argument("--steps", type=int, default=200_000, help="chase steps (default 200000)")
    c.add_argument("--no-slow-tier", action="store_true", help="measure without the plugin (both nodes at the host's speed)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "info":
            why = availability()
            print(json.dumps({"ready": why is None, "why_not": why, "build_dir": str(build_dir()), **manifest()}, indent=2))
            return 0 if why is None else 2
        if a.cmd == "calibrate":
            if a.mib < 1 or a.steps < 1:
                print("error: --mib and --steps must be at least 1", file=sys.stderr)
                return 2
            cfg = VMConfig(slow_tier=None if a.no_slow_tier else SlowTier())
            with Testbed(cfg, boot_timeout_s=300) as vm:
                cal = calibrate(vm, a.mib, a.steps)
                cal["boot_s"] = round(vm.boot_s or 0, 1)
            if a.json:
                print(json.dumps(cal, indent=2))
            else:
                for n in cal["nodes"]:
                    print(f"node {n['node']}: chase {n['chase_ns']:.1f} ns/step, stream {n['stream_gb_per_s']:.4f} GB/s, "
                          f"move_pages {n['move_ns_per_page'] / 1e3:.1f} us/page, first touch {n.get('fault_ns_per_page', 0) / 1e3:.1f} us/page")
                print(f"node 1 / node 0: chase {cal['chase_ratio']:.3f}x, stream {cal['stream_ratio']:.3f}x"
                      + (f"; the host fell {cal['lag_ns'] / 1e6:.1f} ms behind the model" if "lag_ns" in cal else ""))
            return 0
        command = a.command[1:] if a.command[:1] == ["--"] else a.command
        if not command:
            print("error: no command given (python -m tierkit.testbed run -- CMD ARGS...)", file=sys.stderr)
            return 2
        fs = FileSet()
        for spec in a.put:
            host, _, guest = spec.partition(":")
            fs.add_file(host, guest or None)
        for spec in a.bin:
            host, _, guest = spec.partition(":")
            fs.add_binary(host, guest or None)
        with Testbed(VMConfig(fast_mib=a.fast_mib, slow_mib=a.slow_mib), fs) as vm:
            print(f"testbed: booted in {vm.boot_s:.1f} s", file=sys.stderr)
            res = vm.run(command, timeout_s=a.timeout)
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        if a.out:
            res.save_files(a.out)
        return res.status
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
