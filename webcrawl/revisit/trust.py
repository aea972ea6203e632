"""Earned trust in a host's cheap signals (revisit-model.md section 6).

A host's validators (ETag / Last-Modified answered with 304) or its Last-Modified and sitemap
lastmod dates are used only once they have agreed with what we observed ourselves: a 304 must
mean the record did not change; a date newer than our last visit must mean it did. One
:class:`TrustTracker` per host and signal; the caller feeds it every comparison it can make.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TrustTracker:
    """Trusted after ``min_agreements`` comparisons with at most ``max_disagreement_rate`` of them
    disagreeing; the rate is exponentially weighted (``memory`` comparisons), so a host that starts
    lying loses trust within a few visits and has to earn it again."""

    min_agreements: int = 5
    max_disagreement_rate: float = 0.05
    memory: int = 50
    comparisons: int = 0
    disagreement_rate: float = 0.0
    #: Dates must also have been right both ways (at least one agreeing "changed" and one
    #: agreeing "unchanged" since trust was last lost): a date always stamped "now", or never
    #: moving, agrees by chance on pages that change at every visit, or never.
    both_ways: bool = False
    loud: int = 0  #: agreeing comparisons where the signal said "changed"
    quiet: int = 0  #: agreeing comparisons where it said "unchanged"

    def __post_init__(self) -> None:
        if self.min_agreements < 1 or not 0 <= self.max_disagreement_rate < 1 or self.memory < 1:
            raise ValueError(f"{self!r}: need min_agreements >= 1, 0 <= max_disagreement_rate < 1, memory >= 1")

    def observe(self, agrees: bool, said_changed: bool | None = None) -> None:
        """Record one comparison of the signal with our own observation of the record
        (``said_changed``: what the signal said, where it says either)."""
        self.comparisons += 1
        weight = max(1.0 / self.memory, 1.0 / self.comparisons)
        self.disagreement_rate += weight * ((0.0 if agrees else 1.0) - self.disagreement_rate)
        if agrees and said_changed is not None:
            if said_changed:
                self.loud += 1
            else:
                self.quiet += 1
        if not agrees and self.disagreement_rate > self.max_disagreement_rate:
            # Start over: trust needs a fresh run of agreements.
            self.comparisons = self.loud = self.quiet = 0

    @property
    def trusted(self) -> bool:
        if self.both_ways and (self.loud < 1 or self.quiet < 1):
            return False
        return self.comparisons >= self.min_agreements and self.disagreement_rate <= self.max_disagreement_rate
