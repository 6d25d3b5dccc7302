"""Worker processes for runs in parallel (``compare --workers``, ``sweep``), each pinned to its
own CPU where the machine lets it, so that a worker's engine sees one CPU and decodes on its
own thread instead of starting a read-ahead thread that would compete with the other workers
(results are the same either way, bit for bit: docs/models.md).

Workers are forked from this process when that is safe (Linux, no other Python thread, no
PyTorch loaded: its thread pools do not survive a fork), so that a script needs no
``if __name__ == "__main__":`` guard; otherwise they are spawned (started afresh, importing
the script's main module again, which then needs that guard). Workers end with the process
that started them, even when it is killed (SIGKILL leaves no chance to shut a pool down)."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Optional

_cpus: Optional[list[int]] = None


def _end_with_parent(parent: int) -> None:
    """Have the kernel kill this worker when the process that started it dies (also by
    SIGKILL, where no clean-up of the parent's runs): PR_SET_PDEATHSIG, prctl(2)."""
    import signal

    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown is all there is
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _pin(counter: Any, cpus: list[int], parent: int = 0) -> None:
    if parent:
        _end_with_parent(parent)
    with counter.get_lock():
        i = counter.value
        counter.value += 1
    try:
        os.sched_setaffinity(0, {cpus[i % len(cpus)]})
    except (AttributeError, OSError):  # not Linux, or not allowed: unpinned
        pass


def pool(workers: int) -> ProcessPoolExecutor:
    """A process pool of ``workers`` pinned workers."""
    import multiprocessing as mp
    import sys
    import threading

    safe_fork = (sys.platform.startswith("linux") and threading.active_count() == 1 and "torch" not in sys.modules)
    ctx = mp.get_context("fork" if safe_fork else "spawn")
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_pin,
                               initargs=(ctx.Value("i", 0), cpus, os.getpid()))


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
