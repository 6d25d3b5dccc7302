#!/usr/bin/env python3
"""Build the testbed VM's image into testbed/build/ (``make testbed``; docs/real-linux.md).

From Debian packages, downloaded with ``apt-get download`` and unpacked with ``dpkg-deb -x``
(nothing is installed on the host except QEMU itself, when missing):
  - the kernel: Debian's Linux 6.12 cloud image, ``linux-image-6.12.*-cloud-amd64-unsigned``
    (the version the meta-package ``linux-image-6.12-cloud-amd64`` points to; bookworm has it in
    bookworm-security; where the host's apt sources do not offer it, or TESTBED_APT_SOURCE=
    backports, bookworm-backports is used through a private apt state under testbed/build/apt,
    leaving the host's sources alone);
  - ``busybox-static``: the whole user space of the VM (/bin/sh and the tools);
  - QEMU >= 9.1 (``qemu-system-x86``, ``-common``, ``-data`` and ``seabios`` from
    bookworm-backports, through the same private apt state), unpacked into testbed/build/qemu/
    and run from there: the testbed's slow-tier plugin (testbed/slowtier.c) uses the plugin API
    of QEMU 9.0 and later (scoreboards, conditional callbacks), and bookworm ships 7.2. Where
    the unpacked binary cannot run (a library missing), the host's QEMU is used and the slow
    tier is unavailable, with the reason in the manifest.
Then an initramfs (newc cpio, gzip): busybox and its applet links, /init (testbed/init.sh), the
command agent (testbed/agent.sh), the testbed's static test programs (testbed/build/bin, from
testbed/Makefile), and any kernel module the tests need that the package builds as a module.
The kernel's config is checked for what the tests need (DAMON sysfs, NUMA balancing, memory
tiering via HMAT, soft-dirty, virtio console); a missing option is an error naming it.

Writes testbed/build/manifest.json: packages, versions, sha256 of each .deb, file names.
Stdlib only; exit 2 with one line on any failure.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import lzma
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
META_PACKAGES = ("linux-image-6.12-cloud-amd64", "linux-image-cloud-amd64")
BACKPORTS = "deb http://deb.debian.org/debian bookworm-backports main\n"

# kernel options the testbed and the real-Linux tests rely on; for each, the module that provides
# it when the package builds it as one (=m), so that the image can carry it
REQUIRED = {
    "CONFIG_NUMA": None,
    "CONFIG_MIGRATION": None,
    "CONFIG_NUMA_BALANCING": None,        # autonuma-tiering (numa_balancing=2)
    "CONFIG_ACPI_NUMA": None,
    "CONFIG_ACPI_HMAT": None,            # HMAT figures -> abstract distance -> memory tier
    "CONFIG_DAMON": None,
    "CONFIG_DAMON_SYSFS": None,          # /sys/kernel/mm/damon/admin
    "CONFIG_DAMON_VADDR": None,
    "CONFIG_DAMON_PADDR": None,          # damon-tiering (migrate_hot/cold act on physical memory)
    "CONFIG_MEM_SOFT_DIRTY": None,       # clear_refs 4 + pagemap bit 55
    "CONFIG_PROC_PAGE_MONITOR": None,    # /proc/PID/pagemap, numa_maps
    "CONFIG_BLK_DEV_INITRD": None,
    "CONFIG_RD_GZIP": None,
    "CONFIG_DEVTMPFS": None,
    "CONFIG_TMPFS": None,
    "CONFIG_SERIAL_8250_CONSOLE": None,
    "CONFIG_VIRTIO_PCI": "drivers/virtio/virtio_pci",
    "CONFIG_VIRTIO_CONSOLE": "drivers/char/virtio_console",  # the control port
}


# QEMU from bookworm-backports: the packages the system emulator needs to boot the testbed
QEMU_PACKAGES = ("qemu-system-x86", "qemu-system-common", "qemu-system-data", "seabios")
QEMU_MIN = (9, 1)


class BuildError(Exception):
    pass


def log(msg):
    print(f"testbed: {msg}", file=sys.stderr, flush=True)


def sh(cmd, **kw) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    except FileNotFoundError:
        raise BuildError(f"{cmd[0]} is not installed") from None
    if p.returncode != 0:
        last = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]
        raise BuildError(f"{' '.join(cmd[:3])}... failed: {last}")
    return p.stdout


def harness():
    """python/tierkit/testbed.py, loaded by path (it needs no compiled extension)."""
    spec = importlib.util.spec_from_file_location("tierkit_testbed", REPO / "python" / "tierkit" / "testbed.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


# --- host setup --------------------------------------------------------------------------------

def ensure_qemu(install: bool):
    if shutil.which("qemu-system-x86_64"):
        return
    if not install:
        raise BuildError("qemu-system-x86_64 is missing (apt-get install qemu-system-x86)")
    if os.geteuid() != 0:
        raise BuildError("qemu-system-x86_64 is missing and installing it needs root: apt-get install qemu-system-x86")
    log("installing qemu-system-x86 (apt-get)")
    sh(["apt-get", "install", "-y", "--no-install-recommends", "qemu-system-x86"],
       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if not shutil.which("qemu-system-x86_64"):
        raise BuildError("apt-get installed qemu-system-x86 but qemu-system-x86_64 is not on PATH")


class Apt:
    """apt-cache/apt-get, on the host's sources or on a private state with bookworm-backports."""

    def __init__(self, private: Path | None = None):
        self.opts = []
        if private is not None:
            (private / "lists" / "partial").mkdir(parents=True, exist_ok=True)
            (private / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
            (private / "sources.list").write_text(BACKPORTS)
            self.opts = ["-o", f"Dir::Etc::SourceList={private / 'sources.list'}", "-o", "Dir::Etc::SourceParts=-",
                         "-o", f"Dir::State::Lists={private / 'lists'}", "-o", f"Dir::Cache={private / 'cache'}"]

    def update(self):
        sh(["apt-get", *self.opts, "update", "-q"])

    def field(self, package, name) -> str | None:
        try:
            out = sh(["apt-cache", *self.opts, "show", "--no-all-versions", package])
        except BuildError:
            return None
        m = re.search(rf"^{name}: (.*)$", out, re.M)
        return m.group(1).strip() if m else None

    def download(self, package, dest: Path) -> Path:
        before = set(dest.glob("*.deb"))
        sh(["apt-get", *self.opts, "download", "-q", package], cwd=dest)
        new = set(dest.glob("*.deb")) - before
        found = new or {p for p in dest.glob(f"{package}_*.deb")}
        if not found:
            raise BuildError(f"apt-get download {package} left no .deb in {dest}")
        return sorted(found)[-1]


def kernel_package(apt: Apt) -> str | None:
    """The unsigned flavour of the 6.12 cloud image a meta-package depends on: bookworm-security
    has linux-image-6.12-cloud-amd64; bookworm-backports has only linux-image-cloud-amd64, which
    points to its 6.12."""
    for meta in META_PACKAGES:
        dep = apt.field(meta, "Depends")
        m = re.match(r"(linux-image-6\.12\.[^ ,]*-cloud-amd64)\b", dep or "")
        if m:
            return m.group(1) + "-unsigned"
    return None


def fetch(debs: Path, offline: bool) -> dict[str, Path]:
    """The two .deb files (reused when already downloaded)."""
    debs.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("_")[0]: p for p in debs.glob("*.deb")}
    pinned = os.environ.get("TESTBED_KERNEL_PACKAGE")
    kernel_have = [n for n in have if n.startswith("linux-image-6.12") and n.endswith("-cloud-amd64-unsigned")
                   and n == (pinned or n)]
    if kernel_have and "busybox-static" in have:
        return {"kernel": have[sorted(kernel_have)[-1]], "busybox": have["busybox-static"]}
    if offline:
        raise BuildError(f"the packages are not in {debs} and --offline was given")
    apt = Apt()
    pkg = pinned
    if not pkg and os.environ.get("TESTBED_APT_SOURCE") != "backports":
        pkg = kernel_package(apt)
    if pkg is None:
        log("no 6.12 cloud kernel from the host's apt sources; using bookworm-backports (private apt state)")
        apt = Apt(debs.parent / "apt")
        apt.update()
        pkg = kernel_package(apt)
        if pkg is None:
            raise BuildError(f"no 6.12 cloud kernel ({' or '.join(META_PACKAGES)}) in bookworm-backports either")
    log(f"downloading {pkg}")
    for old in debs.glob("linux-image-*.deb"):
        old.unlink()  # one kernel at a time: the one just chosen is the one built
    kernel = apt.download(pkg, debs)
    busybox = have.get("busybox-static") or Apt().download("busybox-static", debs)
    return {"kernel": kernel, "busybox": busybox}


def qemu_version(binary: Path) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"version (\d+)\.(\d+)\.(\d+)", out.stdout)
    return tuple(int(x) for x in m.groups()) if out.returncode == 0 and m else None


def fetch_qemu(build: Path, offline: bool) -> dict:
    """QEMU >= 9.1 unpacked under build/qemu (reused when already there). Returns the manifest's
    "qemu" entry: the binary and firmware paths relative to build/, the version, the packages;
    or {"error": why} when it cannot be had (the slow tier is then unavailable)."""
    root = build / "qemu"
    binary = root / "usr" / "bin" / "qemu-system-x86_64"
    debs = build / "debs" / "qemu"
    have = sorted(debs.glob("*.deb")) if debs.is_dir() else []
    names = {p.name.split("_")[0] for p in have}
    if not set(QEMU_PACKAGES) <= names:
        if offline:
            return {"error": f"the QEMU packages are not in {debs} and --offline was given"}
        debs.mkdir(parents=True, exist_ok=True)
        apt = Apt(build / "apt")
        try:
            apt.update()
            version = apt.field("qemu-system-x86", "Version")
            if version is None:
                return {"error": "bookworm-backports offers no qemu-system-x86"}
            log(f"downloading QEMU {version} from bookworm-backports")
            for p in debs.glob("*.deb"):
                p.unlink()
            for pkg in QEMU_PACKAGES:
                apt.download(pkg, debs)
        except BuildError as e:
            return {"error": f"could not download QEMU from bookworm-backports: {e}"}
        have = sorted(debs.glob("*.deb"))
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for deb in have:
        sh(["dpkg-deb", "-x", str(deb), str(root)])
    infos = [deb_info(d) for d in have]
    v = qemu_version(binary)
    entry = {"binary": str(binary.relative_to(build)),
             "data_dirs": [str((root / "usr" / "share" / d).relative_to(build)) for d in ("qemu", "seabios")],
             "packages": infos}
    if v is None:
        missing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        lacking = [l.split()[0] for l in missing.splitlines() if "not found" in l]
        why = f"needs {', '.join(lacking)}" if lacking else "does not run"
        return {**entry, "error": f"the unpacked {binary.name} {why} (apt-get install qemu-system-x86 from bookworm-backports instead)"}
    entry["version"] = ".".join(map(str, v))
    if v[:2] < QEMU_MIN:
        entry["error"] = f"QEMU {entry['version']} is older than {'.'.join(map(str, QEMU_MIN))}"
    return entry


# --- the image ---------------------------------------------------------------------------------

def deb_info(deb: Path) -> dict:
    out = sh(["dpkg-deb", "-f", str(deb), "Package", "Version"])
    f = dict(l.split(": ", 1) for l in out.strip().splitlines())
    return {"package": f["Package"], "version": f["Version"], "deb": deb.name,
            "sha256": hashlib.sha256(deb.read_bytes()).hexdigest()}


def unpack(deb: Path, dest: Path):
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    sh(["dpkg-deb", "-x", str(deb), str(dest)])


def check_config(config: Path) -> list[str]:
    """Modules (paths under kernel/, no suffix) to carry for options built as =m; error for any
    option that is off."""
    values = {}
    for line in config.read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)", line)
        if m:
            values[m.group(1)] = m.group(2)
    missing = [k for k in REQUIRED if values.get(k) not in ("y", "m")]
    if missing:
        raise BuildError(f"{config.name} lacks {', '.join(missing)} (the testbed needs them)")
    modules = []
    for k, mod in REQUIRED.items():
        if values[k] == "m":
            if mod is None:
                raise BuildError(f"{config.name}: {k}=m, and the testbed does not know its module")
            modules.append(mod)
    return modules


def module_closure(moddir: Path, wanted: list[str]) -> list[Path]:
    """The module files for `wanted` and what they depend on, dependencies first. The package has
    no modules.dep (depmod writes it at install), so each module's own .modinfo "depends=" is read."""
    files = {}
    for p in (moddir / "kernel").rglob("*.ko*"):
        files[p.name.split(".ko")[0].replace("-", "_")] = p
    order: list[Path] = []

    def depends(p: Path) -> list[str]:
        m = re.search(rb"\0depends=([^\0]*)\0", b"\0" + read_module(p))
        return [d.replace("-", "_") for d in m.group(1).decode().split(",") if d] if m else []

    def visit(name, chain):
        p = files.get(name)
        if p is None:
            raise BuildError(f"module {name} (needed by {' <- '.join(chain) or 'the testbed'}) is not in the package")
        if p in order:
            return
        for d in depends(p):
            visit(d, [name, *chain])
        order.append(p)

    for w in wanted:
        visit(Path(w).name.replace("-", "_"), [])
    return order


def read_module(p: Path) -> bytes:
    # busybox insmod takes plain .ko files; the package compresses them with xz
    data = p.read_bytes()
    return lzma.decompress(data) if p.name.endswith(".xz") else data


def build(args) -> dict:
    out = Path(args.build_dir)
    out.mkdir(parents=True, exist_ok=True)
    ensure_qemu(install=not args.no_install)
    debs = fetch(out / "debs", args.offline)
    kinfo, binfo = deb_info(debs["kernel"]), deb_info(debs["busybox"])
    unpack(debs["kernel"], out / "kernel-pkg")
    unpack(debs["busybox"], out / "busybox-pkg")
    vmlinuz = sorted((out / "kernel-pkg" / "boot").glob("vmlinuz-*"))
    if not vmlinuz:
        raise BuildError(f"no vmlinuz in {debs['kernel'].name}")
    release = vmlinuz[-1].name[len("vmlinuz-"):]
    modules = check_config(out / "kernel-pkg" / "boot" / f"config-{release}") + list(args.module)
    shutil.copyfile(vmlinuz[-1], out / "vmlinuz")

    tb = harness()
    fs = tb.FileSet()
    for d in ("proc", "sys", "dev", "tmp", "run", "root", "etc", "usr/bin", "usr/sbin", "sbin", "mnt"):
        fs._dirs(f"/{d}/x")
    fs.add_file(out / "busybox-pkg" / "bin" / "busybox", "/bin/busybox")
    applets = sh([str(out / "busybox-pkg" / "bin" / "busybox"), "--list-full"]).split()
    for a in applets:
        if a != "bin/busybox" and a.strip("/") not in fs.entries:
            fs._dirs("/" + a)
            fs.entries[a.strip("/")] = (stat.S_IFLNK | 0o777, b"", "/bin/busybox")
    fs.add_bytes("/init", (HERE / "init.sh").read_bytes(), 0o755)
    fs.add_file(HERE / "agent.sh", "/etc/testbed-agent.sh")
    fs.add_bytes("/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    fs.add_bytes("/etc/group", b"root:x:0:\n")
    load = []
    for ko in module_closure(out / "kernel-pkg" / "lib" / "modules" / release, modules) if modules else []:
        guest = f"/lib/modules/{ko.name.removesuffix('.xz')}"
        fs.add_bytes(guest, read_module(ko))
        load.append(guest)
    if load:
        fs.add_bytes("/etc/testbed-modules", ("\n".join(load) + "\n").encode())
    programs = sorted(p.name for p in (out / "bin").glob("*") if p.is_file()) if (out / "bin").is_dir() else []
    for name in programs:
        fs.add_file(out / "bin" / name, f"/usr/local/bin/{name}")
    qemu = fetch_qemu(out, args.offline)
    if "error" in qemu:
        log(f"no slow tier: {qemu['error']}")
    elif not (out / "slowtier.so").is_file():
        qemu["error"] = f"the slow-tier plugin is not built ({out / 'slowtier.so'}; make -C testbed plugin)"
    data = gzip.compress(fs.cpio(), compresslevel=6, mtime=0)
    data += b"\0" * (-len(data) % 4)
    (out / "initramfs.cpio.gz").write_bytes(data)
    m = {"kernel": "vmlinuz", "initramfs": "initramfs.cpio.gz", "kernel_release": release,
         "packages": [kinfo, binfo], "modules": load, "programs": programs, "qemu": qemu,
         "initramfs_bytes": len(data)}
    (out / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
    # the unpacked packages are only needed while building
    shutil.rmtree(out / "kernel-pkg")
    shutil.rmtree(out / "busybox-pkg")
    return m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("TIERKIT_TESTBED_BUILD", HERE / "build"))
    ap.add_argument("--offline", action="store_true", help="use only .deb files already in BUILD/debs")
    ap.add_argument("--no-install", action="store_true", help="never apt-get install QEMU")
    ap.add_argument("--module", action="append", default=[], metavar="PATH",
                    help="also carry this kernel module and its dependencies, loaded at boot (path under kernel/, no suffix, "
                         "e.g. drivers/dax/kmem)")
    args = ap.parse_args(argv)
    status = Path(args.build_dir) / "last-error.txt"
    try:
        m = build(args)
    except BuildError as e:
        print(f"error: testbed: {e}", file=sys.stderr)
        # python/tierkit/testbed.py quotes it when the VM tests skip for want of an image
        Path(args.build_dir).mkdir(parents=True, exist_ok=True)
        status.write_text(f"{e}\n")
        return 2
    status.unlink(missing_ok=True)
    pk = ", ".join(f"{p['package']} {p['version']}" for p in m["packages"])
    log(f"built {args.build_dir}/{m['initramfs']} ({m['initramfs_bytes']} bytes) for {m['kernel_release']} from {pk}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
