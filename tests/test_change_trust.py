"""The validator-trust state machine and the fetch notes (pure)."""

from __future__ import annotations

import pytest

from webcrawl.change import TrustPolicy, ValidatorTrust

POLICY = TrustPolicy(earn_after=3, ignore_limit=3, lie_limit=1, retry_seconds=100.0, verify_share=0.1)


def test_trust_is_earned_by_confirmed_304s_and_then_only_a_share_is_verified():
    trust = ValidatorTrust()
    assert trust.sends_validators(0, POLICY) and trust.verify_share(POLICY) == 1.0
    assert [trust.observe("confirmed", t, POLICY) for t in range(3)] == [None, None, "trusted"]
    assert trust.verify_share(POLICY) == 0.1 and trust.sends_validators(3, POLICY)


@pytest.mark.parametrize("start", ["learning", "trusted"])
def test_one_lie_loses_trust_until_the_retry_time_then_learning_starts_over(start):
    trust = ValidatorTrust(state=start, confirmed=5)
    assert trust.observe("lied", 10.0, POLICY) == "distrusted"
    assert "304" in trust.reason
    assert not trust.sends_validators(109.0, POLICY)
    assert trust.observe("confirmed", 50.0, POLICY) is None  # late evidence changes nothing
    assert trust.sends_validators(110.0, POLICY)
    assert trust.observe("confirmed", 111.0, POLICY) == "learning"
    assert trust.confirmed == 1 and trust.verify_share(POLICY) == 1.0


def test_ignored_conditional_requests_in_a_row_lose_trust_and_a_304_ends_the_run():
    trust = ValidatorTrust(state="trusted")
    trust.observe("ignored", 1, POLICY)
    trust.observe("ignored", 2, POLICY)
    trust.observe("not_modified", 3, POLICY)  # the host does answer 304: the run starts over
    assert trust.ignored_run == 0 and trust.state == "trusted"
    assert [trust.observe("ignored", t, POLICY) for t in (4, 5, 6)] == [None, None, "distrusted"]
    assert "200" in trust.reason


def test_round_trip_and_bad_input():
    trust = ValidatorTrust(state="trusted", confirmed=4, not_modified=9, since=5.0)
    assert ValidatorTrust.from_dict(trust.to_dict()) == trust
    assert ValidatorTrust.from_dict({"state": "bogus", "extra": 1}).state == "learning"
    with pytest.raises(ValueError, match="unknown trust event"):
        trust.observe("maybe", 0, POLICY)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [
    {"earn_after": -1}, {"ignore_limit": 0}, {"lie_limit": 0}, {"verify_share": 1.5},
    {"retry_seconds": -1.0},
])
def test_policy_refuses_bad_thresholds(kwargs):
    with pytest.raises(ValueError):
        TrustPolicy(**kwargs)


def test_earn_after_zero_trusts_on_the_first_confirmation():
    trust = ValidatorTrust()
    assert trust.observe("confirmed", 0, TrustPolicy(earn_after=0)) == "trusted"
