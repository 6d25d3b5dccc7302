"""Output files are whole or absent, never overwritten without --force, and a failed write is
one line naming the file (docs/limits.md, "Output files: whole or absent"; a full disk under
compare --out, profile --plot, trace heatmap and --timeseries).

Full disks are made for real: RLIMIT_FSIZE in the child (writes past it fail with EFBIG, no
privilege needed) and, where user namespaces allow it, a small tmpfs (ENOSPC) or a read-only
one (EROFS). Interrupts are real signals sent while the command waits, by the test hook of
tierkit.output, just before renaming a file into place."""
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tierkit import api, report
from tierkit.output import STALL_ENV

from conftest import VENDORED

SQLITE = VENDORED / "sqlite3-orders.tkt"
CLI = [sys.executable, "-m", "tierkit.cli"]


def _env(**extra):
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **extra}


def run_limited(args, fsize_bytes=None):
    """The CLI in a child whose files may not grow past ``fsize_bytes`` (EFBIG, SIGXFSZ ignored)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))

    p = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=_env(),
                       preexec_fn=limit if fsize_bytes is not None else None)
    return p.returncode, p.stdout, p.stderr


def one_line(rc, err, *needles):
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: "), (rc, err)
    assert "Traceback" not in err and len(lines[0]) <= 480, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def leftovers(d):
    """Files a failed or interrupted write must not leave: empty ones and temporary ones."""
    return sorted(p.name for p in d.rglob("*") if p.is_file() and (p.stat().st_size == 0 or p.name.endswith(".partial")))


@pytest.fixture(scope="module", autouse=True)
def warm_matplotlib():
    # the font cache is built on first use; under a file-size limit it could not be
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.font_manager  # noqa: F401


# --------------------------------------------------------------------------- overwrites


@pytest.mark.parametrize("name", ["timeseries-1-otf.png", "heatmap-0-zipf.tkt.png", "index.html"])
def test_compare_out_refuses_every_file_it_would_write_before_the_run(cli, zipf_trace, tmp_path, name):
    # before: the heat-map and time-series PNGs were overwritten without --force
    d = tmp_path / "rep"
    d.mkdir()
    (d / name).write_bytes(b"precious")
    t0 = time.monotonic()
    rc, _, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch,otf", "--out", d)
    one_line(rc, err, name, "--force")
    assert (d / name).read_bytes() == b"precious" and sorted(p.name for p in d.iterdir()) == [name]
    assert time.monotonic() - t0 < 20


def test_every_file_of_a_report_is_planned_and_force_replaces_them(cli, zipf_trace, tmp_path):
    d = tmp_path / "rep"
    policies = "first-touch,otf"
    planned = report.planned_files(api.compare_runs([zipf_trace], policies))
    # a stale time series of an earlier report (a run index whose policy records none now)
    d.mkdir()
    (d / "timeseries-0-first-touch.png").write_bytes(b"stale")
    (d / "mine.txt").write_text("not the report's")
    rc, _, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", policies, "--out", d, "--force")
    assert rc == 0, err
    names = {p.name for p in d.iterdir()}
    assert names - {"mine.txt"} <= set(planned), names - set(planned)
    assert {"timeseries-1-otf.png", "heatmap-0-zipf.tkt.png", "index.html"} <= names
    assert "timeseries-0-first-touch.png" not in names and "mine.txt" in names
    assert report.MARKER not in names and not leftovers(d)


# ------------------------------------------------------------------------------ interrupts


def _stall_and_signal(args, stall_at, sig):
    """Run the CLI until it waits before renaming ``stall_at`` into place, then send ``sig``."""
    p = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=_env(**{STALL_ENV: stall_at}))
    err = ""
    deadline = time.monotonic() + 60
    while "stalled before renaming" not in err:
        assert time.monotonic() < deadline and p.poll() is None, err
        if select.select([p.stderr], [], [], 1)[0]:
            err += p.stderr.readline()
    p.send_signal(sig)
    rest = p.stderr.read()  # through the same buffer as the lines read above
    return p.wait(timeout=60), rest


@pytest.mark.parametrize("sig,rc,said", [(signal.SIGINT, 130, []), (signal.SIGTERM, 143, ["tierkit: terminated"])])
def test_interrupted_compare_out_is_marked_incomplete(zipf_trace, tmp_path, sig, rc, said):
    # before: an interrupted report left a complete-looking CSV/Parquet/JSONL set without
    # plots or index.html, and nothing said so
    d = tmp_path / "rep"
    got, err = _stall_and_signal(["compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d, "-q"],
                                 "migrated.png", sig)
    # Ctrl-C ends quietly with status 130 (typer's way), SIGTERM says so with 143
    assert got == rc and [l for l in err.splitlines() if l.strip()] == said, (got, err)
    names = {p.name for p in d.iterdir()}
    assert {"results.csv", "results.parquet", "results.jsonl", "hit_ratio.png", report.MARKER} <= names
    assert "migrated.png" not in names and "index.html" not in names and not leftovers(d), names
    marker = (d / report.MARKER).read_text()
    assert "INCOMPLETE" in marker and "migrated.png" in marker and "index.html" in marker and "--force" in marker
    # redone with --force: complete, unmarked
    r, _, e = tierkit_cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d, "-q", "--force")
    assert r == 0, e
    assert report.MARKER not in {p.name for p in d.iterdir()} and (d / "index.html").stat().st_size > 0


def tierkit_cli(*args):
    p = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=_env())
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("what", ["heatmap", "timeseries"])
def test_an_interrupted_write_leaves_the_old_file_or_nothing(zipf_trace, tmp_path, what):
    out = tmp_path / {"heatmap": "h.png", "timeseries": "ts.csv"}[what]
    out.write_bytes(b"precious")
    args = {"heatmap": ["trace", "heatmap", zipf_trace, "-o", out, "--force", "-q"],
            "timeseries": ["simulate", zipf_trace, "-c", "0.2", "-P", "otf", "--timeseries", out, "--force", "-q"]}
    got, err = _stall_and_signal(args[what], out.name, signal.SIGTERM)
    assert got == 143, err
    assert out.read_bytes() == b"precious" and not leftovers(tmp_path)


# ---------------------------------------------------------------------------- full disks


def test_full_disk_under_compare_out(zipf_trace, tmp_path):
    d = tmp_path / "rep"
    rc, _, err = run_limited(["compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d, "-q"], 4096)
    one_line(rc, err, "results.parquet", "File too large")
    assert not leftovers(d) and (d / report.MARKER).exists()
    assert "results.parquet" in (d / report.MARKER).read_text()


def test_full_disk_under_profile_plot(tmp_path):
    png = tmp_path / "p.png"
    # the profile itself goes to /dev/null (written in place: a device is never renamed over)
    rc, _, err = run_limited(["profile", SQLITE, "-o", "/dev/null", "--force", "--plot", png, "-q"], 4096)
    one_line(rc, err, "p.png", "File too large")
    assert not png.exists() and not leftovers(tmp_path)
    assert not os.path.isfile("/dev/null")


def test_full_disk_under_trace_heatmap(zipf_trace, tmp_path):
    out = tmp_path / "h.png"
    rc, _, err = run_limited(["trace", "heatmap", zipf_trace, "-o", out, "-q"], 4096)
    one_line(rc, err, "h.png", "File too large")
    assert not out.exists() and not leftovers(tmp_path)


def test_full_disk_under_timeseries(zipf_trace, tmp_path):
    out = tmp_path / "ts.csv"
    rc, _, err = run_limited(["simulate", zipf_trace, "-c", "0.2", "-P", "otf", "--timeseries", out, "-q"], 64)
    one_line(rc, err, "ts.csv", "File too large")
    assert not out.exists() and not leftovers(tmp_path)


@pytest.mark.parametrize("cmd", [["trace", "convert", "{src}", "{out}", "--to", "hex"],
                                 ["trace", "synth", "zipf", "-n", "200K", "--pages", "10K", "-o", "{out}"]])
def test_full_disk_under_the_rust_writers_names_the_users_file(zipf_trace, tmp_path, cmd):
    out = tmp_path / ("z.hex" if "convert" in cmd else "z.tkt")
    rc, _, err = run_limited([str(a).format(src=zipf_trace, out=out) for a in cmd], 4096)
    line = one_line(rc, err, str(out.name), "too large")
    assert ".partial" not in line  # the user's name, not the temporary one
    assert not out.exists() and not leftovers(tmp_path)


def _in_small_fs(tmp_path, size, script, ro=False):
    """Run ``script`` (sh) with a fresh tmpfs of ``size`` at ``tmp_path/fs`` (read-only with
    ``ro``), in a user and mount namespace; skip where they cannot be made."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    opts = f"size={size}" + (",ro" if ro else "")
    # the listing is made inside: the mount ends with the namespace
    sh = (f"mount -t tmpfs -o {opts} tmpfs {mnt} || exit 99; {script}; rc=$?; "
          f"find {mnt} -type f -printf '%s %f\\n' > {tmp_path}/listing; exit $rc")
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", sh], capture_output=True,
                       text=True, env=_env())
    if p.returncode == 99 or "unshare:" in p.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()[:100]}")
    listing = [l.split(" ", 1) for l in (tmp_path / "listing").read_text().splitlines()]
    return p.returncode, p.stderr, {name: int(size) for size, name in listing}


def test_no_space_left_under_compare_out(zipf_trace, tmp_path):
    cmd = " ".join([*CLI, "compare", str(zipf_trace), "-c", "0.2", "--policies", "first-touch", "--out",
                    str(tmp_path / "fs" / "rep"), "-q"])
    rc, err, files = _in_small_fs(tmp_path, "64k", cmd + " >/dev/null")
    one_line(rc, err, "No space left on device")
    assert report.MARKER in files and all(s > 0 for s in files.values()), files
    assert not [n for n in files if n.endswith(".partial")], files


def test_read_only_file_system_under_trace_heatmap(zipf_trace, tmp_path):
    cmd = " ".join([*CLI, "trace", "heatmap", str(zipf_trace), "-o", str(tmp_path / "fs" / "h.png"), "-q"])
    rc, err, files = _in_small_fs(tmp_path, "64k", cmd, ro=True)
    one_line(rc, err, "h.png", "Read-only file system")
    assert files == {}


# --------------------------------------------------------------------------- long paths


def test_error_lines_naming_a_400_character_path_stay_short(cli, zipf_trace, tmp_path):
    # before: up to ~280 characters, and the path's start was lost
    deep = tmp_path.joinpath(*["d" * 60] * 6)
    deep.mkdir(parents=True)
    target = deep / "trace-of-gcc.tkt"
    target.write_bytes(b"precious")
    assert len(str(target)) >= 400
    for args in (["simulate", deep / "missing-trace.tkt"], ["trace", "convert", zipf_trace, target],
                 ["compare", zipf_trace, "--policies", "first-touch", "--out", target],
                 ["trace", "heatmap", zipf_trace, "-o", target],
                 ["simulate", zipf_trace, "--platform", deep / "platform.toml"]):
        rc, _, err = cli(*args)
        line = one_line(rc, err)
        assert "\u2026" in line and str(tmp_path)[:20] in line, line
        assert any(n in line for n in ("missing-trace.tkt", "trace-of-gcc.tkt", "platform.toml")), line


def test_one_line_keeps_the_start_and_file_name_of_a_path():
    from tierkit.cli import error_line

    p = "/data/run-7/" + "/".join(["d" * 60] * 6) + "/trace-of-gcc.tkt"
    line = error_line("tierkit: internal error (a bug in tierkit, please report it): ", f"{p}: exploded\nbadly \x00")
    assert len(line) <= 480 and "/data/run-7/" in line and "/trace-of-gcc.tkt: exploded badly ?" in line, line
