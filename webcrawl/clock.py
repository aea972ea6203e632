"""The one clock webcrawl reads. Times are seconds since the epoch (floats).

Components take a :class:`Clock` so that tests and the policy simulator can run time faster than
real time without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float: ...


class SystemClock:
    """Wall-clock time."""

    def time(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (tests, simulations)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
