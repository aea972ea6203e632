"""A cycle's spending ledger (revisit-model.md section 5, step 4): the rules, without storage.

The Scrapy layer keeps the numbers in Redis (shared by every process of a crawl) and applies these
rules atomically; this class is their reference and what the simulator and tests use.

A fetch is *admitted* only if the spend already booked, plus the expected cost of the fetches in
flight, plus its own expected cost fits the budget. When it lands its actual cost is booked and
its expected cost leaves the in-flight sum. So the cycle can end above its budget only by the
amount its in-flight fetches cost more than expected: never by a fetch started after the budget
was spent.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CycleLedger:
    budget: float
    booked: float = 0.0  #: actual cost of the fetches that landed
    in_flight: float = 0.0  #: expected cost of the fetches started and not landed
    refused: int = 0  #: fetches not admitted (they wait for the next cycle)

    def __post_init__(self) -> None:
        if not self.budget >= 0:
            raise ValueError(f"CycleLedger(budget={self.budget!r}): expected a cost >= 0")

    @property
    def committed(self) -> float:
        return self.booked + self.in_flight

    @property
    def remaining(self) -> float:
        """What new fetches may still be admitted for (never negative)."""
        return max(self.budget - self.committed, 0.0)

    def admit(self, expected: float) -> bool:
        """Start a fetch of this expected cost if it fits; False (and counted) if it does not."""
        if expected < 0:
            raise ValueError(f"expected cost {expected!r} < 0")
        if self.committed + expected > self.budget * (1 + 1e-12):
            self.refused += 1
            return False
        self.in_flight += expected
        return True

    def land(self, expected: float, actual: float) -> None:
        """Book a fetch admitted with ``expected`` that cost ``actual`` (0 for a free failure)."""
        if actual < 0:
            raise ValueError(f"actual cost {actual!r} < 0")
        self.in_flight = max(self.in_flight - expected, 0.0)
        self.booked += actual

    @property
    def overshoot(self) -> float:
        return max(self.booked - self.budget, 0.0)
