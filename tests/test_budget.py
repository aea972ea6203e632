"""Budget admission (webcrawl.middlewares.budget) against the cycle ledger in a real redis-server:
a cycle stops at its budget, what it cannot afford waits for the next one."""

from __future__ import annotations

import pytest
import redis
from scrapy import Request

from tests.test_planner import Clock, Stats, make_planner
from webcrawl.middlewares.budget import BudgetExhausted, BudgetMiddleware


def test_refused_requests_wait_for_the_next_cycle(redis_client: redis.Redis) -> None:
    clock, sent = Clock(0.0), list[Request]()
    planner = make_planner(redis_client, clock, sent, budget=2.0)
    cycle = planner.begin()
    closed: list[str] = []
    budget = BudgetMiddleware(planner.ledger, Stats(), default_cost=1.0, clock=clock, close=closed.append,
                              robots_cost=0.0)
    requests = [Request(f"http://shop.test/new/{i}", meta={"webcrawl_purpose": "discovery"}) for i in range(3)]
    for r in requests[:2]:
        budget.process_request(r)
        assert r.meta["webcrawl_cycle"] == cycle.id and r.meta["webcrawl_reserved"] == 1.0
    with pytest.raises(BudgetExhausted, match="cannot afford"):
        budget.process_request(requests[2])
    assert closed == ["cycle_budget_spent"] and planner.ledger.deferred_count() == 1
    # A later middleware refused the second one before the wire: its reservation comes back.
    budget.process_exception(requests[1], ValueError("robots.txt"))
    assert planner.ledger.numbers(cycle.id)["in_flight"] == 1.0
    planner.spider_closed()
    clock.now += 1
    make_planner(redis_client, clock, []).begin()
    assert planner.ledger.deferred_count() == 0 and planner.frontier.counts().queued == 1
    popped = planner.frontier.pop(clock.now)
    assert "http://shop.test/new/2" in popped.items[0][1]


def test_planned_visits_of_an_earlier_cycle_are_superseded(redis_client: redis.Redis) -> None:
    clock = Clock(0.0)
    planner = make_planner(redis_client, clock, [])
    cycle = planner.begin()
    budget = BudgetMiddleware(planner.ledger, Stats(), default_cost=1.0, clock=clock)
    with pytest.raises(BudgetExhausted, match="superseded"):
        budget.process_request(Request("http://shop.test/p", meta={"webcrawl_planned": cycle.id - 1}))


def test_robots_fetches_and_held_reservations_pass(redis_client: redis.Redis) -> None:
    clock = Clock(0.0)
    planner = make_planner(redis_client, clock, [], budget=0.0)
    cycle = planner.begin()
    budget = BudgetMiddleware(planner.ledger, Stats(), default_cost=1.0, clock=clock)
    budget.process_request(Request("http://shop.test/robots.txt", meta={"webcrawl_purpose": "robots"}))
    budget.process_request(Request("http://shop.test/a", meta={"webcrawl_reserved": 1.0}))
    assert planner.ledger.numbers(cycle.id)["refused"] == 0  # neither was refused


def test_the_first_request_of_an_origin_pays_for_its_robots_txt(redis_client: redis.Redis) -> None:
    clock = Clock(0.0)
    planner = make_planner(redis_client, clock, [], budget=10.0)
    cycle = planner.begin()
    budget = BudgetMiddleware(planner.ledger, Stats(), default_cost=1.0, clock=clock, robots_cost=2.0,
                              robots_cached=lambda origin: origin == "http://c.test:80")
    first, second = Request("http://a.test/1"), Request("http://a.test/2")
    other, cached = Request("http://b.test:8080/1"), Request("http://c.test/1")
    for r in (first, second, other, cached):
        budget.process_request(r)
    assert [r.meta["webcrawl_reserved"] for r in (first, second, other, cached)] == [3.0, 1.0, 3.0, 1.0]
    assert planner.ledger.numbers(cycle.id)["in_flight"] == 8.0


def test_outside_the_plan_a_refusal_defers_without_closing(redis_client: redis.Redis) -> None:
    clock = Clock(0.0)
    planner = make_planner(redis_client, clock, [], budget=3.0)
    cycle = planner.begin()
    planner.ledger.set_plan(cycle.id, reserved=3.0, fields={})
    closed: list[str] = []
    budget = BudgetMiddleware(planner.ledger, Stats(), default_cost=1.0, clock=clock, close=closed.append,
                              robots_cost=0.0)
    with pytest.raises(BudgetExhausted):
        budget.process_request(Request("http://a.test/new"))
    assert closed == [] and planner.ledger.deferred_count() == 1
    for k in range(3):
        budget.process_request(Request(f"http://a.test/p{k}", meta={"webcrawl_planned": cycle.id}))
    with pytest.raises(BudgetExhausted):
        budget.process_request(Request("http://a.test/p3", meta={"webcrawl_planned": cycle.id}))
    assert closed == ["cycle_budget_spent"]


def test_a_cycle_nobody_works_on_budgets_nothing(redis_client: redis.Redis) -> None:
    clock = Clock(0.0)
    planner = make_planner(redis_client, clock, [], budget=0.0)
    cycle = planner.begin()
    planner.spider_closed()  # the run is over: its cycle has no live worker
    stats = Stats()
    budget = BudgetMiddleware(planner.ledger, stats, default_cost=1.0, clock=clock)
    budget.process_request(Request("http://shop.test/a"))  # a crawl without the planner
    assert stats.get_value("webcrawl/budget/unbudgeted") == 1
    assert planner.ledger.numbers(cycle.id)["refused"] == 0
