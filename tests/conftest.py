import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
VENDORED = ROOT / "data" / "traces"


def run_cli(*args, cwd=None):
    """Run the tierkit command; returns (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "tierkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
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


@pytest.fixture
def shared_traces():
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is absent (fine outside the development machine)")
    return SHARED_TRACES
