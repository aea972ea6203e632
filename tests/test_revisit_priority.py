from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import ValuePolicy, ValueRule, freshness_gain, priority

DAY = 86400.0


def test_priority_orders_by_value_gain_per_cost() -> None:
    rates = 1 / np.array([900.0, DAY, 7 * DAY, DAY, DAY])
    value = np.array([1.0, 1.0, 1.0, 10.0, 1.0])
    cost = np.array([1.0, 1.0, 1.0, 1.0, 5.0])
    p = priority(value, freshness_gain(rates, DAY, DAY), cost)
    # The valuable day-changer first, then the plain one, then the weekly, the dear one, the 15-minute one.
    assert np.argsort(-p).tolist() == [3, 1, 2, 4, 0]
    with pytest.raises(ValueError, match="cost"):
        priority(1.0, 1.0, 0.0)


def test_value_precedence_record_then_url_then_tier() -> None:
    policy = ValuePolicy(
        page_type_tier={"product": "medium", "article": "low"},
        url_rules=(ValueRule(r"/bestsellers/", 10.0),),
        record_field="importance",
    )
    assert policy.value("article") == 1.0
    assert policy.value("product", url="https://shop.example/p/1") == 3.0
    assert policy.value("product", url="https://shop.example/bestsellers/1") == 10.0
    assert policy.value("product", url="https://shop.example/bestsellers/1", record={"importance": 7}) == 7.0
    assert policy.value("product", record={"importance": "high"}) == 10.0
    assert policy.value("product", record={"importance": None}) == 3.0
    assert policy.value("unknown-type") == 3.0  # the default tier


def test_bad_value_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="tier 'gold'"):
        ValuePolicy(page_type_tier={"product": "gold"})
    with pytest.raises(ValueError, match="value"):
        ValueRule("x", -1.0)
