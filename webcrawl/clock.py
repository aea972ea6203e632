"""The one clock webcrawl reads. Times are seconds since the epoch (floats).

Components never call ``time.time()`` themselves: they take a :class:`Clock`, so tests and the
policy simulator run time faster than real time without sleeping. ``Clock`` is a structural
protocol: any object with a ``time()`` method fits. This module imports nothing from webcrawl, so
every floor (the pure revisit model included) may use it.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything that tells the current time in seconds since the epoch."""

    def time(self) -> float: ...


class SystemClock:
    """Wall-clock time."""

    def time(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (tests, simulations), and never backwards."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = float(start)

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"ManualClock.advance({seconds!r}): a clock cannot go backwards")
        self.now += seconds
        return self.now

    def set(self, when: float) -> None:
        """Jump to ``when`` (not earlier than now)."""
        if when < self.now:
            raise ValueError(f"ManualClock.set({when!r}) is earlier than now ({self.now!r})")
        self.now = float(when)
