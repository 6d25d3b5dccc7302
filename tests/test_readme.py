"""The README's tour runs as written: every command of its ```sh blocks and its
Python example, in order, in a fresh directory beside the repository's `data/` and
`workloads/`, as a newcomer would run them from the root after `make demo` and `make test`.
Each must exit 0; the commands that write files carry --force, so that the tour runs again
over its own outputs. About three and a half minutes (most of it the Kleio training and the
detailed-timing comparisons)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), re.S)


def commands() -> list[str]:
    """The tour's shell commands, continuation lines joined; `make` lines (the setup itself)
    left out."""
    out = []
    for body in blocks("sh"):
        for line in body.replace("\\\n", "").splitlines():
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith("make "):
                out.append(line)
    return out


def test_the_commands_that_write_files_can_run_again():
    # (a sweep's --out is its result store: it resumes there and overwrites nothing of the user's)
    writers = [c for c in commands() if re.search(r"(^|\s)(-o|--out|--timeseries)\s|trace (convert|record)\s", c)
               and not c.startswith("tierkit sweep")]
    assert len(writers) >= 15
    for c in writers:
        assert "--force" in c, c


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="the tour records programs with Valgrind")
def test_every_readme_command_runs_as_written(tmp_path):
    pytest.importorskip("torch", reason="the tour's learned schedulers need PyTorch (make test installs it)")
    from tierkit import workloads

    workloads.build()
    for d in ("data", "workloads"):
        (tmp_path / d).symlink_to(ROOT / d)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "PYTHONUNBUFFERED": "1"}
    for c in commands():
        p = subprocess.run(["bash", "-c", c], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"README command failed ({p.returncode}): {c}\n{p.stderr[-2000:]}"
    for code in blocks("python"):
        p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"README Python example failed: {p.stderr[-2000:]}"
        assert "runtime_vs_all-slow" in p.stdout
    # and again over its own outputs, for one command of each kind that writes
    again = [c for c in commands() if c.startswith(("tierkit trace convert data", "tierkit trace synth", "tierkit guide"))]
    assert len(again) == 3
    for c in again:
        p = subprocess.run(["bash", "-c", c], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"README command failed on its second run: {c}\n{p.stderr[-2000:]}"
