"""The cycle planner: scoring known pages, and the extension's cycle lifecycle in a real
redis-server (built from plain values, as ``from_crawler`` would)."""

from __future__ import annotations

import numpy as np
import pytest
import redis
from scrapy import Request
from scrapy.statscollectors import StatsCollector
from scrapy.utils.test import get_crawler

from webcrawl.extensions._planner_hooks import IndexHooks
from webcrawl.extensions._planner_score import Scoring, costs, score_and_plan
from webcrawl.extensions.planner import CyclePlanner
from webcrawl.revisit import Reserves, effective_data
from webcrawl.state.frontier import Frontier
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.pages import RECORD, PageColumns, PageIndex
from webcrawl.state.seen import BloomParams
from webcrawl.state.sitemaps import SitemapStore

KEYS = CrawlKeys("planner")
HOUR = 3600.0


def Stats() -> StatsCollector:  # noqa: N802 - reads like the class it stands for
    """A fresh stats collector, as a crawler has one."""
    stats = get_crawler().stats
    assert stats is not None
    return stats


def columns(n: int, rng: np.random.Generator) -> tuple[PageColumns, np.ndarray]:
    """Pages visited hourly for two days; a true rate each (a third never change)."""
    rates = np.where(rng.random(n) < 1 / 3, 0.0, 1 / rng.uniform(0.5 * HOUR, 20 * HOUR, n))
    r = np.zeros(n, dtype=RECORD)
    p_changed = -np.expm1(-rates * HOUR)
    changed = rng.binomial(48, p_changed)
    r["last_fetched"], r["type"], r["visits"], r["changes"] = 1e6, 1, 48, changed
    r["seconds"], r["unchanged_seconds"] = 48 * HOUR, (48 - changed) * HOUR
    r["slot_counts"][:, 0], r["slot_seconds"][:, 0] = changed, changed * HOUR
    r["fetches"], r["billed"] = 49, 48.0  # billed from the second observation on
    data = effective_data(PageColumns(np.arange(n), r, {"product": 1}).history_table())
    r["events"], r["exposure"] = data.events, data.exposure
    return PageColumns(np.arange(n, dtype=np.int64), r, {"product": 1}), rates


@pytest.mark.parametrize("policy", ["learned", "uniform"])
def test_plans_fit_the_budget_and_learned_picks_changing_pages(policy: str) -> None:
    cols, rates = columns(600, np.random.default_rng(3))
    scoring = Scoring(budget=100.0, cycle_seconds=HOUR, reserves=Reserves(0.0, 0.05, 0.02),
                      tiers={"product": 3}, policy=policy)
    plan, pages = score_and_plan(cols, scoring, now=1e6 + HOUR, rng=np.random.default_rng(1))
    assert plan.total <= 100.0 and len(plan.indices()) == 100  # requests billing: 1 a visit
    assert len(set(plan.indices().tolist())) == 100
    if policy == "learned":
        assert (rates[plan.revisit] > 0).mean() > 0.95  # never-changing pages are not revisits
        assert len(plan.verification) == 2 and len(plan.reestimation) == 5


def test_costs_come_from_measurements_then_page_type_then_default() -> None:
    cols, _ = columns(3, np.random.default_rng(0))
    cols.records["fetches"][1:] = 0
    cols.records["billed"][1:] = 0
    scoring = Scoring(budget=10.0, cycle_seconds=HOUR, reserves=Reserves(), default_cost=7.0,
                      type_costs={"product": 5.0})
    assert costs(cols, scoring).tolist() == [1.0, 5.0, 5.0]
    assert costs(cols, Scoring(budget=1, cycle_seconds=1, reserves=Reserves(), default_cost=7.0)).tolist() == [1.0, 7.0, 7.0]
    with pytest.raises(ValueError, match="WEBCRAWL_PLANNER_POLICY"):
        Scoring(budget=1, cycle_seconds=1, reserves=Reserves(), policy="random")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def make_planner(client: redis.Redis, clock: Clock, sent: list[Request], *, budget: float = 5.0,
                 continuous: bool = False) -> CyclePlanner:
    index = PageIndex(client, KEYS)
    history = HistoryStore(client, KEYS)
    hooks = IndexHooks(index, SitemapStore(client, KEYS), history, canonical=lambda u: u, clock=clock,
                       settle=0.0)
    frontier = Frontier(client, KEYS, BloomParams(1000, 0.01), cap=1000, default_delay=0.0, lease_seconds=60)
    scoring = Scoring(budget=budget, cycle_seconds=HOUR, reserves=Reserves(0.2, 0.0, 0.0),
                      tiers={"product": 3})
    return CyclePlanner(LedgerStore(client, KEYS), index, frontier, scoring, hooks, Stats(),
                        crawl=sent.append, clock=clock, continuous=continuous, lock_seconds=0.5, seed=1)


def seed_pages(client: redis.Redis, n: int) -> None:
    history, index = HistoryStore(client, KEYS), PageIndex(client, KEYS)
    for i in range(n):
        url = f"http://shop.test/product/{i}"
        for k in range(4):  # even pages change at every visit, odd ones never
            history.observe(url, now=k * HOUR, record_hash=f"{k if i % 2 == 0 else 0}", page_type="product")
        index.mark([url], 0.0)


def test_one_process_plans_the_others_join(redis_client: redis.Redis) -> None:
    seed_pages(redis_client, 10)
    clock, sent, other = Clock(5 * HOUR), list[Request](), list[Request]()
    first = make_planner(redis_client, clock, sent)
    cycle = first.begin()
    assert len(sent) == 5  # no discovery waiting: its 20% share flows to revisits
    assert all(r.dont_filter and r.meta["webcrawl_planned"] == cycle.id for r in sent)
    assert {r.meta["webcrawl_purpose"] for r in sent} == {"revisit"}
    assert all(int(r.url.rsplit("/", 1)[1]) % 2 == 0 for r in sent)  # the changing pages
    numbers = first.ledger.numbers(cycle.id)
    assert numbers["reserved"] == pytest.approx(5.0) and numbers["planned:revisit"] == 5
    second = make_planner(redis_client, clock, other)
    assert second.begin() == cycle and other == []  # joined: the first is still working on it
    first.spider_closed()
    second.spider_closed()
    clock.now += 60
    third = make_planner(redis_client, clock, other)
    assert third.begin().id == cycle.id + 1 and len(other) == 5
    assert third.ledger.numbers(cycle.id)["reserved"] == 0  # the old plan's share is free


def test_a_held_lock_makes_begin_wait_then_fail(redis_client: redis.Redis) -> None:
    planner = make_planner(redis_client, Clock(0.0), [])
    assert planner.ledger.lock("someone else", 30)
    with pytest.raises(RuntimeError, match="planning lock"):
        planner.begin()


def test_continuous_mode_plans_again_when_the_cycle_ends(redis_client: redis.Redis) -> None:
    seed_pages(redis_client, 4)
    clock, sent = Clock(5 * HOUR), list[Request]()
    planner = make_planner(redis_client, clock, sent, continuous=True)
    first = planner.begin()
    planner.tick()
    assert planner.cycle == first
    clock.now = first.ends
    planner.tick()
    assert planner.cycle is not None and planner.cycle.id == first.id + 1


def test_trusted_sitemap_dates_override_the_model(redis_client: redis.Redis) -> None:
    seed_pages(redis_client, 10)  # last fetched at 3 h; even pages change at every visit
    clock, sent = Clock(5 * HOUR), list[Request]()
    planner = make_planner(redis_client, clock, sent)
    planner.sitemaps = SitemapStore(redis_client, KEYS, mode=lambda host: "always")
    planner.sitemaps.note({"http://shop.test/product/1": 4 * HOUR,  # a "never changing" page changed
                           "http://shop.test/product/0": 2 * HOUR})  # a fast one did not
    planner.begin()
    urls = [r.url.rsplit("/", 1)[1] for r in sent]
    assert urls[0] == "1" and "0" not in urls and len(urls) == 5
    untrusted = make_planner(redis_client, clock, [])
    untrusted.sitemaps = SitemapStore(redis_client, KEYS)  # "learn", nothing learnt yet
    assert untrusted.trusted_dates(untrusted.index.load()) is None


def test_hooks_mark_pages_and_judge_sitemap_dates(redis_client: redis.Redis) -> None:
    from scrapy.http import HtmlResponse

    from webcrawl.items import PageItem

    clock = Clock(2 * HOUR)
    history, index = HistoryStore(redis_client, KEYS), PageIndex(redis_client, KEYS)
    sitemaps = SitemapStore(redis_client, KEYS, min_agreements=1)
    hooks = IndexHooks(index, sitemaps, history, canonical=lambda u: u, clock=clock, settle=0.0)
    url = "http://shop.test/product/1"
    history.observe(url, now=0.0, record_hash="a", page_type="product")
    history.observe(url, now=HOUR, record_hash="b", page_type="product")
    request = Request(url, meta={"webcrawl_lastmod": "1970-01-01T00:30:00Z"})
    hooks.request_scheduled(request)
    response = HtmlResponse(url, body=b"<html></html>", request=request)
    item = PageItem(url, url, "shop", "product", 200, HOUR, change="changed")
    hooks.item_done(item, response)
    hooks.response_downloaded(response, Request("http://shop.test/robots.txt", meta={"webcrawl_purpose": "robots"}))
    assert hooks.flush(clock.time()) == 1 and len(index.load()) == 1
    assert sitemaps.trusted("shop.test")  # dated after the previous fetch (0 s), and it changed
    assert sitemaps.dates([url]) == [1800.0]
