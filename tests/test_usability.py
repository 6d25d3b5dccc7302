"""What a newcomer meets first, held to what the README and docs/limits.md promise: the tour's
programs built by `make demo`, one error line (status 2) for a result file with nothing in it, a
warning when the fast tier holds the whole footprint, error lines that keep the known names and
say "did you mean", `tierkit.load`'s advice, `perf script`'s default output read, and a
recording's progress in records written."""
import re
import shutil
import subprocess

import pytest

import tierkit
from conftest import ROOT


def one_error_line(rc, err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: ") and "Traceback" not in err, (rc, err)
    return lines[0]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_builds_the_programs_the_tour_records():
    """The README's tour runs as written after `make demo`: the workloads it records
    (workloads/build/gups) are among what `make demo` builds."""
    readme = (ROOT / "README.md").read_text()
    used = set(re.findall(r"workloads/build/(\w+)", "".join(re.findall(r"```sh\n(.*?)```", readme, re.S))))
    assert used, "the tour records no workload any more: drop this test"
    names = re.search(r"^NAMES := (.*)$", (ROOT / "workloads" / "Makefile").read_text(), re.M).group(1).split()
    assert used <= set(names), used
    # what make would run (-n runs nothing, the workloads' make included)
    p = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert re.search(r"make.* -C workloads", p.stdout), p.stdout


@pytest.mark.parametrize("text", ["", "  \n\n", "[]", '{"rows": [], "results": []}'])
def test_replay_of_a_file_with_no_result_is_one_error(cli, tmp_path, text):
    f = tmp_path / "empty.json"
    f.write_text(text)
    rc, out, err = cli("replay", f)
    line = one_error_line(rc, err)
    assert "empty.json" in line and out == "", line
    from tierkit import replaying

    with pytest.raises(tierkit.TierkitError, match="empty.json"):
        replaying.load(f)
