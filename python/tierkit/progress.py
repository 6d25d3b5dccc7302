"""Progress bars on stderr for long runs (only when stderr is a terminal)."""
from __future__ import annotations

import sys
from typing import Callable, Optional

from tqdm import tqdm

ProgressFn = Callable[[int, Optional[int]], Optional[bool]]


class Bar:
    """A byte-progress bar fed by the core's (done, total) callbacks.

    Use as a context manager; ``bar.callback`` is what the core calls. Disabled (and free)
    when stderr is not a terminal unless ``force`` is set.
    """

    def __init__(self, desc: str, enabled: Optional[bool] = None, unit: str = "B") -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.desc = desc
        self.unit = unit
        self._bar: Optional[tqdm] = None

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()

    def callback(self, done: int, total: Optional[int]) -> bool:
        if not self.enabled:
            return True
        if self._bar is None:
            self._bar = tqdm(
                total=total, desc=self.desc, unit=self.unit, unit_scale=True,
                unit_divisor=1024 if self.unit == "B" else 1000, file=sys.stderr,
                leave=False, dynamic_ncols=True,
            )
        self._bar.update(done - self._bar.n)
        return True
