"""The Redis server's clock, read from a process: times several machines compare must agree.

Scripts take ``now`` from Redis ``TIME`` themselves. What a process stamps on its own (a fetch's
time in a page history, a heartbeat's expiry) comes from :class:`ServerClock`: the local clock
plus an offset to the server's, measured at the midpoint of a ``TIME`` round trip and measured
again every ``refresh_seconds`` (:meth:`ServerClock.maybe_refresh`). A machine whose clock is
seconds off still writes server times. Each measurement keeps the quickest of a few round trips:
a reply held up on the way back (a busy machine, a busy server) would put the offset off by half
the delay, and processes whose offsets disagree do not wake for a host's turn together (the one
that thinks it is later takes every turn).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ServerClock"]

#: Round trips per measurement.
SAMPLES = 5


class ServerClock:
    """``time()`` in server seconds. ``skew`` shifts the local clock (tests simulate a machine
    whose clock is off; the measured offset cancels it)."""

    def __init__(self, client: Any, *, refresh_seconds: float = 60.0, skew: float = 0.0) -> None:
        self.client = client
        self.refresh_seconds = refresh_seconds
        self.skew = skew
        self.offset = 0.0
        self.uncertainty = 0.0
        self._measured_at = float("-inf")

    def local(self) -> float:
        return time.time() + self.skew

    def measure(self, samples: int = SAMPLES) -> float:
        """Measure the offset now (``samples`` round trips, the quickest kept); returns it."""
        trips = []  # (round trip, offset at its midpoint)
        for _ in range(max(1, samples)):
            before = self.local()
            seconds, micros = self.client.time()
            after = self.local()
            trips.append((after - before, seconds + micros / 1e6 - (before + after) / 2))
        quickest = min(trips)
        self.offset = quickest[1]
        #: How far off the offset may be: half the quickest round trip. A time that must not be
        #: taken for earlier than it was (when a fetch left) adds it.
        self.uncertainty = quickest[0] / 2
        self._measured_at = time.monotonic()
        return self.offset

    def maybe_refresh(self) -> None:
        if time.monotonic() - self._measured_at >= self.refresh_seconds:
            self.measure()

    def time(self) -> float:
        return self.local() + self.offset
