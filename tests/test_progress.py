"""Long steps speak: a bar on a terminal, plain periodic lines otherwise (a log, a
pipe, CI), nothing with -q; the first line only after a few seconds, so short steps stay quiet."""
import io
import sys

import pytest

from tierkit import progress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_plain_lines_when_stderr_is_not_a_terminal(monkeypatch):
    clock, err = Clock(), io.StringIO()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Bar("kleio training", None, unit="model") as bar:
        assert bar.mode == "lines"
        for k, t in [(0, 0.0), (1, 2.0), (2, 6.0), (3, 10.0), (5, 21.0), (8, 40.0)]:
            clock.t = 100.0 + t
            bar.callback(k, 10)
    lines = err.getvalue().splitlines()
    # nothing before 5 s; then one line at 6 s, one at 21 s (the 20 s mark), one at 40 s (35 s)
    assert lines[0] == "tierkit: kleio training: 2/10 models (20%), 6 s, about 24 s left"
    assert len(lines) == 4 and "(50%), 21 s" in lines[1] and "(80%), 40 s" in lines[2]
    assert lines[3] == "tierkit: kleio training: done, 10 models in 40 s"


def test_a_short_step_and_a_quiet_one_print_nothing(monkeypatch):
    clock, err = Clock(), io.StringIO()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Bar("counts", None) as bar:
        for k in range(5):
            clock.t += 0.5
            bar.callback(k << 20, 8 << 20)
    with progress.Bar("counts", False) as bar:
        assert bar.mode == "off"
        for k in range(5):
            clock.t += 60
            bar.callback(k, 5)
    assert err.getvalue() == ""


def test_unknown_totals_and_bytes(monkeypatch):
    clock, err = Clock(), io.StringIO()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Bar("reading x.tkt", None) as bar:
        bar.callback(0, None)
        clock.t += 7
        bar.callback(3 << 20, None)
    assert err.getvalue().splitlines()[0] == "tierkit: reading x.tkt: 3.0 MiB, 7 s"


def test_a_watch_reports_what_a_silent_step_has_written(monkeypatch):
    """A recording reports nothing itself: Watch reads the size of the trace being written
    every second and prints plain lines, on a terminal too (the program shares it)."""
    import threading

    err = io.StringIO()
    err.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "LINE_FIRST_S", 0.0)
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.5)
    size = [0]
    seen = threading.Event()

    def amount():
        size[0] += 3 << 20
        if size[0] >= 6 << 20:
            seen.set()
        return size[0]

    with progress.Watch("recording app", amount) as w:
        assert w.bar.mode == "lines"
        assert seen.wait(10)
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("tierkit: recording app: 0 B, 0 s")
    assert any(l.startswith("tierkit: recording app: 3.0 MiB") for l in lines), lines
    assert lines[-1].startswith("tierkit: recording app: done")
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with progress.Watch("recording app", amount, enabled=False):
        pass
    assert quiet.getvalue() == ""


@pytest.mark.skipif(__import__("shutil").which("valgrind") is None, reason="recording needs Valgrind")
def test_a_recording_speaks_unless_quiet(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    rc, _, err = cli("trace", "record", "-o", tmp_path / "s.tkt", "--", "sleep", "6")
    assert rc == 0, err
    assert "tierkit: recording sleep (trace records written): " in err, err
    rc, _, err = cli("trace", "record", "-q", "-o", tmp_path / "q.tkt", "--", "sleep", "6")
    assert rc == 0 and "recording sleep" not in err, err
