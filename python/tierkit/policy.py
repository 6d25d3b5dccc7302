"""Python-side periodic policies: prototypes and learned models over numpy arrays.

Subclass :class:`PeriodicPolicy`, set ``name`` and ``period`` and implement
:meth:`PeriodicPolicy.decide`. The engine calls ``decide`` once per period with the last
period's per-page counts and carries out the moves it returns, with the same mechanics
(capacity checks, migration costs) as the built-in policies. Pass an instance wherever a
policy name is accepted::

    tierkit.simulate("trace.tkt", platform="dram-pmem", policy=MyPolicy(), fast_capacity=0.2)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Union

import numpy as np


@dataclass(frozen=True)
class Migrate:
    """Move ``page`` to ``tier`` (which must have a free frame)."""

    page: int
    tier: int


@dataclass(frozen=True)
class Swap:
    """Exchange the tiers of pages ``a`` and ``b``."""

    a: int
    b: int


Move = Union[Migrate, Swap]


@dataclass
class PeriodView:
    """What a periodic policy observes at a period boundary.

    Attributes:
        period: index of the period that starts now (1 at the first boundary).
        pages: ids of the pages accessed in the period just ended (uint32), in order of
            their first access in it.
        counts: their access counts in that period (uint32).
        writes: their write counts in that period (uint32).
        tier_of: current tier of every page known so far (uint8; 255 = not yet placed).
        capacity: capacity of each tier in pages (uint64).
        used: pages in each tier (uint64).
    """

    period: int
    pages: np.ndarray
    counts: np.ndarray
    writes: np.ndarray
    tier_of: np.ndarray
    capacity: np.ndarray
    used: np.ndarray

    @property
    def free(self) -> np.ndarray:
        """Free frames per tier."""
        return self.capacity - self.used


class PeriodicPolicy:
    """Base class of Python policies. Override :meth:`decide` (and :meth:`place` if the
    first-touch default does not suit)."""

    #: Name shown in results.
    name: str = "python-policy"
    #: Period, with the syntax of the built-in policies' ``period=`` (e.g. ``10000``,
    #: ``100K``, ``1M-insn``, ``10ms``).
    period: Union[int, str] = 10_000

    def place(self, page: int) -> Optional[int]:
        """Tier for a page on its first access; ``None`` = the fastest tier with room."""
        return None

    def decide(self, view: PeriodView) -> Iterable[Move]:
        raise NotImplementedError

    # called by the core; converts the view and the moves
    def _decide_raw(self, raw: dict) -> list[tuple[int, int, int]]:
        view = PeriodView(**raw)
        out: list[tuple[int, int, int]] = []
        for m in self.decide(view) or ():
            if isinstance(m, Migrate):
                out.append((0, int(m.page), int(m.tier)))
            elif isinstance(m, Swap):
                out.append((1, int(m.a), int(m.b)))
            else:
                raise TypeError(f"{self.name}: decide() must yield Migrate or Swap, not {m!r}")
        return out


class HotPromote(PeriodicPolicy):
    """Example: each period, promote the ``top`` hottest slow-tier pages of the last period
    into free fast frames, demoting the coldest fast pages (not accessed last period) to make
    room. A dozen lines of numpy; compare it with the built-in ``history``."""

    name = "py-hot-promote"

    def __init__(self, period: Union[int, str] = 10_000, top: int = 64) -> None:
        self.period = period
        self.top = top

    def decide(self, view: PeriodView) -> Iterable[Move]:
        slow = view.tier_of[view.pages] != 0
        hot = view.pages[slow][np.argsort(-view.counts[slow], kind="stable")][: self.top]
        free = int(view.free[0])
        accessed = np.zeros(len(view.tier_of), dtype=bool)
        accessed[view.pages] = True
        cold_fast = np.flatnonzero((view.tier_of == 0) & ~accessed)
        victims = iter(cold_fast)
        moves: list[Move] = []
        for page in hot:
            if free > 0:
                moves.append(Migrate(int(page), 0))
                free -= 1
                continue
            victim = next(victims, None)
            if victim is None:
                break
            moves.append(Swap(int(page), int(victim)))
        return moves
