from __future__ import annotations

import pytest

from webcrawl.revisit import TrustTracker


def test_trust_is_earned_and_lost() -> None:
    trust = TrustTracker(min_agreements=5, max_disagreement_rate=0.05)
    for _ in range(4):
        trust.observe(True)
    assert not trust.trusted
    trust.observe(True)
    assert trust.trusted
    trust.observe(False)  # a 304 while the record changed
    assert not trust.trusted
    for _ in range(4):
        trust.observe(True)
    assert not trust.trusted
    for _ in range(10):
        trust.observe(True)
    assert trust.trusted
    with pytest.raises(ValueError):
        TrustTracker(min_agreements=0)
