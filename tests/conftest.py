import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# A shell that starts the suite in the background (`make test &`, nohup) leaves SIGINT ignored,
# and programs inherit an ignored signal across exec: the tests that interrupt a child with
# SIGINT (Ctrl-C) need the default back, as in a terminal or on a CI runner.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
# trained predictions are cached between runs (tierkit.learned.cache_dir): not in the tests, where
# two trainings must each train (tests/test_learned_sched.py turns it on where it checks it)
os.environ.setdefault("TIERKIT_CACHE", "off")
SHARED_TRACES = ROOT.parent / "shared" / "traces"
VENDORED = ROOT / "data" / "traces"


def run_cli(*args, cwd=None, env=None):
    """Run the tierkit command (``env``: variables set beside the test's own); returns
    (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "tierkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def zipf_trace(tmp_path_factory):
    import tierkit

    p = tmp_path_factory.mktemp("traces") / "zipf.tkt"
    tierkit.synth("zipf", p, accesses=50_000, pages=2_000, seed=3, write_ratio=0.25, progress=False)
    return p


@pytest.fixture(scope="session")
def phases_trace(tmp_path_factory):
    import tierkit

    p = tmp_path_factory.mktemp("traces") / "phases.tkt"
    tierkit.synth("phases", p, accesses=80_000, pages=2_000, seed=5, phases=4, progress=False)
    return p


TRACER_PROGRAMS_SRC = Path(__file__).parent / "tracer"


@pytest.fixture(scope="session")
def progs(tmp_path_factory):
    """The tracer's test programs (tests/tracer/*.c), compiled once for the session."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the tracer's test programs need it")
    d = tmp_path_factory.mktemp("tracer-programs")
    for c in sorted(TRACER_PROGRAMS_SRC.glob("*.c")):
        subprocess.run(["gcc", "-O1", "-g", "-pthread", str(c), "-o", str(d / c.stem)], check=True)
    return d


@pytest.fixture
def shared_traces():
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is absent (fine outside the development machine)")
    return SHARED_TRACES


# --- the real-Linux testbed VM (docs/real-linux.md) ---------------------------------------------
# Tests marked `vm` boot a QEMU VM with Linux 6.12 and a lower memory tier. They run under
# `make test-vm` (pytest -m vm, TIERKIT_VM_TESTS=1) and are skipped otherwise, so that the rest of
# the suite never waits on a VM. Where the VM cannot run (no QEMU, image not built), they skip
# with one line saying why; with CI=true they fail instead.

def pytest_configure(config):
    config.addinivalue_line("markers", "vm: boots the testbed VM (run by make test-vm)")


def _vm_selected(config) -> bool:
    import re

    expr = config.getoption("markexpr", default="") or ""
    return os.environ.get("TIERKIT_VM_TESTS") == "1" or bool(re.search(r"(?<!not )\bvm\b", expr))


def pytest_runtest_setup(item):
    # raised here rather than as marks or in fixtures, so that pytest -rs folds every VM test's
    # skip into one line (same location, same reason)
    if item.get_closest_marker("vm"):
        if not _vm_selected(item.config):
            pytest.skip("boots the testbed VM: run by make test-vm (or TIERKIT_VM_TESTS=1)")
        require_testbed()


def skip_or_fail_in_ci(skip_reason: str, ci_reason: str):
    """Skip a test whose prerequisite is missing; with CI=true, where everything must run, fail."""
    if os.environ.get("CI") == "true":
        pytest.fail(ci_reason, pytrace=False)
    pytest.skip(skip_reason)


def require_testbed():
    """Skip (fail with CI=true) unless the testbed VM can boot here."""
    from tierkit import testbed

    why = testbed.availability()
    if why:
        skip_or_fail_in_ci(f"testbed VM unavailable: {why}", f"testbed VM cannot run, and CI=true requires it: {why}")


@pytest.fixture(scope="session")
def testbed_vm():
    """One VM for the whole session (default shape: 1 GiB fast node 0, 1 GiB CPU-less node 1)."""
    require_testbed()
    from tierkit.testbed import Testbed

    with Testbed() as vm:
        yield vm


@pytest.fixture(scope="session")
def threads_trace(tmp_path_factory):
    """A two-thread trace (perf's format is the text one with thread ids), one thread after
    the other as a tracer runs them: 3,000 loads and stores of thread 101 over 300 pages, then
    thread 102's over 300 others; converted to the native format."""
    import tierkit

    d = tmp_path_factory.mktemp("threads")
    lines = []
    for k, tid in enumerate((101, 102)):
        for i in range(3000):
            page = (i * 7919) % 300 + 1000 * k
            ev = "cpu/mem-stores/P" if i % 4 == 0 else "cpu/mem-loads/P"
            lines.append(f"{tid} {1 + (3000 * k + i) / 1e6:.6f}: {ev}: {0x10000000 + page * 4096 + (i % 64) * 64:x}")
    src = d / "threads.perf"
    src.write_text("\n".join(lines) + "\n")
    out = d / "threads.tkt"
    tierkit.convert(src, out, format="perf", progress=False)
    return out
