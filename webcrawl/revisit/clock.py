"""The clock the revisit model reads, and a simulated one.

Times are seconds since the epoch (floats). The model never calls ``time.time()`` itself: every
component takes a :class:`Clock`, so tests and the policy simulator run time faster than real time
without sleeping. ``Clock`` is a structural protocol, so any object with a ``time()`` method (for
instance the crawl-wide clock of the Scrapy layer) fits.
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


class SimClock:
    """A clock that moves only when told to; never goes backwards."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"SimClock.advance({seconds!r}): a clock cannot go backwards")
        self._now += seconds
        return self._now

    def set(self, when: float) -> None:
        """Jump to ``when`` (not earlier than now)."""
        if when < self._now:
            raise ValueError(f"SimClock.set({when!r}) is earlier than now ({self._now!r})")
        self._now = float(when)
