"""Wall and CPU time of a piece of work, for the benches under bench/ (bench/README.md, "Which
figure to trust"): on a shared machine the CPU time is the steadier figure, since wall time
also counts the time other processes held the CPUs.

- ``cpu_s``: this process, all its threads (``time.process_time``): the right figure for work
  done in the Rust extension in the same process, read-ahead thread included;
- ``children_cpu_s``: child processes that ended and were waited for during the span
  (``resource.getrusage(RUSAGE_CHILDREN)``, user + system): a command, a worker pool.

    from clock import Clock
    with Clock() as c:
        work()
    c.wall_s, c.cpu_s, c.children_cpu_s
"""
from __future__ import annotations

import resource
import time


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Clock:
    """Wall seconds, this process's CPU seconds and its waited-for children's, of a ``with`` block."""

    def __init__(self) -> None:
        self.wall_s = self.cpu_s = self.children_cpu_s = 0.0

    def __enter__(self) -> "Clock":
        self._w, self._c, self._k = time.perf_counter(), time.process_time(), children_cpu()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._w
        self.cpu_s = time.process_time() - self._c
        self.children_cpu_s = children_cpu() - self._k

    @property
    def total_cpu_s(self) -> float:
        """This process's CPU time and its children's."""
        return self.cpu_s + self.children_cpu_s

    def figures(self, prefix: str = "") -> dict:
        return {f"{prefix}wall_s": round(self.wall_s, 4), f"{prefix}cpu_s": round(self.cpu_s, 4),
                f"{prefix}children_cpu_s": round(self.children_cpu_s, 4)}
