"""Progress of long steps on stderr: a bar on a terminal, a widget in Jupyter, and plain
periodic lines otherwise (a log, a pipe, CI), so that no step longer than a few seconds is
silent. `-q` / ``progress=False`` turns it off."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional

from tqdm import tqdm

# no monitor thread (it only tunes how often a bar redraws): a process with no thread of its
# own can fork its workers safely (tierkit.pool)
tqdm.monitor_interval = 0

ProgressFn = Callable[[int, Optional[int]], Optional[bool]]

#: plain lines: the first after this many seconds, then one every LINE_EVERY_S
LINE_FIRST_S = 5.0
LINE_EVERY_S = 15.0


def in_notebook() -> bool:
    """Running in a Jupyter kernel (where stderr is no terminal but a widget can show)."""
    ip_mod = sys.modules.get("IPython")
    if ip_mod is None:
        return False
    try:
        ip = ip_mod.get_ipython()
    except Exception:
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def _amount(n: float, unit: str) -> str:
    if unit == "B":
        for u, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if n >= s:
                return f"{n / s:.1f} {u}"
        return f"{int(n)} B"
    return f"{int(n):,} {_plural(unit)}"


def _plural(unit: str) -> str:
    return unit + "s" if unit in ("model", "run", "page", "cell", "trial", "record") else unit


class Bar:
    """Progress fed by the core's (done, total) callbacks.

    Use as a context manager; ``bar.callback`` is what the core calls. ``enabled``: None
    (the default) shows a bar on a terminal, a widget in Jupyter and plain lines otherwise;
    True forces the bar; False shows nothing. ``lines_only``: plain lines wherever progress
    shows (a recording, whose program writes to the same terminal).
    """

    def __init__(self, desc: str, enabled: Optional[bool] = None, unit: str = "B", lines_only: bool = False) -> None:
        # lines_only: plain lines on a terminal too, where a program's own output shares it
        if enabled is False:
            self.mode = "off"
        elif lines_only:
            self.mode = "lines"
        elif enabled is True or sys.stderr.isatty():
            self.mode = "bar"
        elif in_notebook():
            self.mode = "notebook"
        else:
            self.mode = "lines"
        self.enabled = self.mode != "off"
        self.desc = desc
        self.unit = unit
        self._bar: Optional[tqdm] = None
        self._t0: Optional[float] = None
        self._next = LINE_FIRST_S
        self._lines = 0
        self._last: tuple[int, Optional[int]] = (0, None)

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._lines and exc[0] is None and self._t0 is not None:
            done, total = self._last
            print(f"tierkit: {self.desc}: done, {_amount(total if total else done, self.unit)} in "
                  f"{time.monotonic() - self._t0:.0f} s", file=sys.stderr, flush=True)

    def _line(self, done: int, total: Optional[int]) -> None:
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        self._last = (done, total)
        el = now - self._t0
        if el < self._next:
            return
        while self._next <= el:
            self._next += LINE_EVERY_S
        if total:
            frac = min(1.0, done / total)
            amount = (f"{_amount(done, 'B')} of {_amount(total, 'B')}" if self.unit == "B"
                      else f"{int(done):,}/{int(total):,} {_plural(self.unit)}")
            msg = f"tierkit: {self.desc}: {amount} ({100 * frac:.0f}%), {el:.0f} s"
            if 0 < frac < 1:
                msg += f", about {el * (1 - frac) / frac:.0f} s left"
        else:
            msg = f"tierkit: {self.desc}: {_amount(done, self.unit)}, {el:.0f} s"
        print(msg, file=sys.stderr, flush=True)
        self._lines += 1

    def callback(self, done: int, total: Optional[int]) -> bool:
        if self.mode == "off":
            return True
        if self.mode == "lines":
            self._line(done, total)
            return True
        if self._bar is None:
            cls: Any = tqdm
            if self.mode == "notebook":
                from tqdm.auto import tqdm as widget  # a widget where ipywidgets is installed

                cls = widget
            self._bar = cls(
                total=total, desc=self.desc, unit=self.unit, unit_scale=True,
                unit_divisor=1024 if self.unit == "B" else 1000, file=sys.stderr,
                leave=False, dynamic_ncols=True,
            )
        self._bar.update(done - self._bar.n)
        return True


class Watch:
    """Progress of a step that reports nothing itself (a recording under Valgrind): a thread
    that every second reads ``amount()`` (e.g. the size of the file being written) and feeds a
    :class:`Bar` of plain lines. A context manager; ``enabled`` as :class:`Bar`'s."""

    def __init__(self, desc: str, amount: Callable[[], int], enabled: Optional[bool] = None, unit: str = "B") -> None:
        import threading

        self.bar = Bar(desc, enabled, unit, lines_only=True)
        self.amount = amount
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True) if self.bar.enabled else None

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                n = self.amount()
            except OSError:
                continue
            self.bar.callback(n, None)

    def __enter__(self) -> "Watch":
        self.bar.callback(0, None)
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc[0] is None and self.bar.enabled:
            try:  # the closing line says the final amount, not the last second's
                self.bar.callback(self.amount(), None)
            except OSError:
                pass
        self.bar.__exit__(*exc)
