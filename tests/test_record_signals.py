"""`tierkit trace record` interrupted (docs/limits.md, "Output files: whole or absent"): a signal
sent to the recorder is passed on to the traced program, which stops at once, and the trace of what
ran is still written, valid and flagged incomplete; a recorder killed from outside never leaves a
0-byte `.partial`. The recorded trace is the one seed 000 (Effler et al., §4.2, Fig. 2) has a
binary-instrumentation tool feed to the simulator; an interrupted run must not give a trace
that passes for a whole one.

The traced program, tests/tracer/forever.c, prints its pid and "ready" once recording runs,
then stores in a loop until stopped. Every test skips when valgrind or gcc is absent."""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tierkit

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None,
                                reason="valgrind is not installed: 'tierkit trace record' needs it")


@pytest.fixture(scope="module")
def forever(progs):
    return progs / "forever"


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "tierkit.cli", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class Recording:
    """`tierkit trace record -o OUT --cache none [OPTS] -- forever [ARGS]` (or `cmd`) started in
    the background; `ready()` waits until the program runs under the tool and gives its pid."""

    def __init__(self, forever, out, *args, opts=(), cmd=None, **popen):
        cmd = cmd or [sys.executable, "-m", "tierkit.cli", "trace", "record", "-o", str(out), "--cache", "none", *opts,
                      "--", str(forever), *args]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
        self.stdout = ""

    def ready(self, timeout_s=60.0):
        deadline = time.monotonic() + timeout_s
        fd = self.p.stdout.fileno()
        while "ready\n" not in self.stdout:
            left = deadline - time.monotonic()
            assert left > 0, f"the program did not start: {self.stdout!r}"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 4096).decode()
                assert chunk, f"the recorder ended early: {self.stdout!r} {self.p.stderr.read().decode()!r}"
                self.stdout += chunk
        return int(re.search(r"pid (\d+)", self.stdout).group(1))

    def finish(self, timeout_s=60.0):
        out, err = self.p.communicate(timeout=timeout_s)
        self.stdout += out.decode()
        return self.p.returncode, err.decode()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def alive(pid):
    """The process runs (a zombie, ended but not yet reaped by the recorder, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def seconds_until_gone(pid, limit_s=30.0):
    t0 = time.monotonic()
    while alive(pid):
        if time.monotonic() - t0 > limit_s:
            os.kill(pid, signal.SIGKILL)  # never leave the program running
            pytest.fail(f"the traced program (pid {pid}) still runs {limit_s} s after the signal")
        time.sleep(0.005)
    return time.monotonic() - t0


def assert_flagged_trace(out, stdout, reason_re, all_before=True, via_cli=False):
    """A valid trace under OUT alone (no .partial), flagged incomplete with a reason matching
    `reason_re`, holding what ran before the signal (unless `all_before` is false: SIGKILL
    loses what the tool had not yet written); `trace info` shows the reason and `simulate`
    runs with a warning quoting it (through the CLI with `via_cli`, else the API)."""
    assert out.exists() and out.stat().st_size > 0
    assert not out.with_name(out.name + ".partial").exists()
    why = tierkit.trace_info(out, progress=False)["summary"]["incomplete"]
    assert re.search(reason_re, why), why
    # the 1000 stores the program made before it said "ready" are all there
    df = tierkit.read_trace(out)
    if all_before:
        buf = int(re.search(r"buffer (\d+)", stdout).group(1))
        assert df[(df["addr"] >= buf) & (df["addr"] < buf + 8000)]["write"].sum() == 1000
    if via_cli:
        code, text, err = cli("trace", "info", out)
        assert code == 0 and re.search(r"incomplete\s+" + reason_re, text), text + err
        code, text, err = cli("simulate", out, "--json")
        assert code == 0, err
        warnings = json.loads(text)["warnings"]
    else:
        warnings = tierkit.run(out)["warnings"]
    assert any("incomplete" in w and why in w for w in warnings), warnings
    return why


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_to_the_recorder_stops_the_program_at_once_and_the_trace_is_kept_flagged(forever, tmp_path, sig):
    out = tmp_path / "x.tkt"
    rec = Recording(forever, out)
    try:
        pid = rec.ready()
        rec.p.send_signal(sig)
        took_s = seconds_until_gone(pid)
        code, err = rec.finish()
    finally:
        rec.kill()
    print(f"the traced program ended {took_s * 1000:.0f} ms after {sig.name} to the recorder")  # shown with -s
    # before: the program ran on for seconds (it was never told) and the recorder died at once
    assert took_s < 2.0, f"the program ran {took_s:.2f} s after {sig.name}"
    assert code == 128 + sig, err
    why = assert_flagged_trace(out, rec.stdout, rf"recording interrupted: tierkit got {sig.name} \(signal {int(sig)}\)",
                               via_cli=sig == signal.SIGTERM)
    assert f"the program was killed by {sig.name}" in why
    lines = err.splitlines()
    assert any(ln.startswith("tierkit: wrote ") for ln in lines) and "Traceback" not in err
    assert [ln for ln in lines if "incomplete" in ln] == [f"tierkit: warning: the trace is incomplete: {why}"]


def test_a_program_that_ignores_the_signal_is_killed_after_kill_after(forever, tmp_path):
    out = tmp_path / "x.tkt"
    rec = Recording(forever, out, "ignore", opts=("--kill-after", "0.5"))
    try:
        pid = rec.ready()
        rec.p.send_signal(signal.SIGTERM)
        took_s = seconds_until_gone(pid)
        code, err = rec.finish()
    finally:
        rec.kill()
    assert 0.45 < took_s < 2.0, took_s
    # the status of the signal tierkit was sent, as if it had been stopped by it
    assert code == 143, err
    assert_flagged_trace(out, rec.stdout, r"recording interrupted: tierkit got SIGTERM \(signal 15\) and passed it on to the "
                                          r"program, which did not end within 0\.5 s: tierkit killed it \(SIGKILL\)")


def test_a_second_signal_kills_the_program_without_waiting(forever, tmp_path):
    out = tmp_path / "x.tkt"
    rec = Recording(forever, out, "ignore", opts=("--kill-after", "60"))
    try:
        pid = rec.ready()
        rec.p.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert alive(pid)  # it ignores SIGTERM, and 60 s are allowed
        rec.p.send_signal(signal.SIGINT)
        took_s = seconds_until_gone(pid)
        code, err = rec.finish()
    finally:
        rec.kill()
    assert took_s < 2.0, took_s
    assert code == 137, err
    assert_flagged_trace(out, rec.stdout, r"recording interrupted: tierkit got SIGTERM \(signal 15\).*killed by SIGKILL")


def test_ctrl_c_from_the_terminal_is_the_programs_own(forever, tmp_path):
    """Ctrl-C at a terminal reaches the whole foreground group: the program gets it without
    tierkit, and how it handles it is its own affair. A program that ignores it runs on
    (tierkit does not take it for a request to stop), until a signal sent to tierkit."""
    import fcntl
    import termios

    master, slave = os.openpty()

    def own_terminal():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    out = tmp_path / "x.tkt"
    rec = Recording(forever, out, "ignore", opts=("--kill-after", "0.3"), stdin=slave, preexec_fn=own_terminal)
    try:
        pid = rec.ready()
        os.write(master, b"\x03")  # the terminal sends SIGINT to its foreground process group
        time.sleep(0.8)  # over --kill-after: had tierkit taken it for a request, the program would be gone
        assert alive(pid) and rec.p.poll() is None
        rec.p.send_signal(signal.SIGTERM)
        assert seconds_until_gone(pid) < 2.0
        code, err = rec.finish()
    finally:
        rec.kill()
        os.close(master)
        os.close(slave)
    assert code == 143, err
    why = assert_flagged_trace(out, rec.stdout, r"recording interrupted: tierkit got SIGTERM \(signal 15\)")
    assert "SIGINT" not in why


def test_a_terminal_hangup_ends_the_program_and_the_trace_is_kept(forever, tmp_path):
    """A terminal that hangs up sends SIGHUP to its session leader alone (a shell passes it on
    to its jobs). When the recorder is the leader (run as `ssh -t host tierkit ...` is), it
    passes it on to the program and survives it to finish the trace."""
    import fcntl
    import termios

    master, slave = os.openpty()

    def own_terminal():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    out = tmp_path / "x.tkt"
    rec = Recording(forever, out, stdin=slave, preexec_fn=own_terminal)
    try:
        pid = rec.ready()
        os.close(slave)
        os.close(master)  # the terminal hangs up
        assert seconds_until_gone(pid) < 2.0
        code, err = rec.finish()
    finally:
        rec.kill()
    assert code == 129, err
    assert_flagged_trace(out, rec.stdout, r"recording interrupted: tierkit got SIGHUP \(signal 1\) and passed it on to the "
                                          r"program; the program was killed by SIGHUP \(signal 1\)")


def test_valgrind_killed_gives_a_flagged_trace_and_no_partial(forever, tmp_path):
    out = tmp_path / "x.tkt"
    rec = Recording(forever, out)
    try:
        pid = rec.ready()
        os.kill(pid, signal.SIGKILL)
        code, err = rec.finish()
    finally:
        rec.kill()
    assert code == 137, err
    why = assert_flagged_trace(out, rec.stdout, r"the program was killed by SIGKILL \(signal 9\)", all_before=False,
                               via_cli=True)
    assert "interrupted" not in why
    lines = err.splitlines()
    assert "Traceback" not in err and [ln for ln in lines if "incomplete" in ln] == [f"tierkit: warning: the trace is incomplete: {why}"]


def test_the_recorders_own_signal_handling_is_back_after_recording(forever, tmp_path):
    """The handlers are the recorder's only while it records: Python's Ctrl-C is back after."""
    script = ("import os, signal, sys, time, tierkit\n"
              f"r = tierkit.record({str(forever)!r}, ['ignore'], {str(tmp_path / 'x.tkt')!r}, cache='none', kill_after=0.2)\n"
              "assert r['status'] == 143 and r['interrupted_by'] == 'SIGTERM' and r['killed_after_grace'], r\n"
              "try:\n"
              "    os.kill(os.getpid(), signal.SIGINT)\n"
              "    time.sleep(5)\n"
              "except KeyboardInterrupt:\n"
              "    print('keyboard interrupt', flush=True)\n")
    rec = Recording(forever, None, cmd=[sys.executable, "-c", script])
    try:
        rec.ready()  # the program shares the script's stdout
        rec.p.send_signal(signal.SIGTERM)
        code, err = rec.finish()
    finally:
        rec.kill()
    assert code == 0, err
    assert rec.stdout.splitlines()[-1] == "keyboard interrupt"


def test_a_complete_recording_is_not_flagged_and_keeps_its_status(forever, tmp_path):
    """The normal path is unchanged: no signal, no flag (forever stops itself after 120 s,
    too long here; a short program is used instead)."""
    exe = tmp_path / "short"
    src = tmp_path / "short.c"
    src.write_text("#include <stdlib.h>\nint main(void){long*b=malloc(800);for(int i=0;i<100;i++)b[i]=i;return 5;}\n")
    subprocess.run(["gcc", "-O1", "-g", str(src), "-o", str(exe)], check=True)
    r = tierkit.record(exe, [], tmp_path / "s.tkt", cache="none")
    assert r["status"] == 5 and r["incomplete"] is None and r["interrupted_by"] is None and not r["killed_after_grace"]
    assert "incomplete" not in tierkit.trace_info(tmp_path / "s.tkt", progress=False)["summary"]
    assert tierkit.run(tmp_path / "s.tkt")["warnings"] == []


def test_a_bad_kill_after_is_one_line_and_runs_nothing(forever, tmp_path):
    code, _, err = cli("trace", "record", "-o", tmp_path / "k.tkt", "--kill-after", "-1", "--", forever)
    assert code == 2 and err == "tierkit: error: --kill-after: -1 s: give 0 to 86400 seconds\n"
    assert list(tmp_path.iterdir()) == []


def test_a_recorder_killed_outright_does_not_leave_its_program_running(forever, tmp_path):
    """SIGKILL cannot be caught: the recorder cannot finish the trace (its .partial stays), but
    its program is sent SIGTERM (the parent-death signal) instead of running on untraced.
    Through the cache the tool writes rarely, so the broken pipe alone would stop it only
    seconds later."""
    rec = Recording(forever, tmp_path / "x.tkt", opts=("--cache", "default"))
    try:
        pid = rec.ready()
        rec.p.kill()
        took_s = seconds_until_gone(pid)
    finally:
        rec.kill()
    assert took_s < 2.0, took_s
    # nor is Valgrind's log left in the temporary directory (it has no name once open)
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob(f"tierkit-record-{rec.p.pid}-*"))
