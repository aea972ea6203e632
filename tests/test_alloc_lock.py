"""The crawl's locks (webcrawl.state.lock.TokenLock): taken with SET NX PX, renewed and released
only by the token holding them; the allocation lock between two planners of one crawl
(webcrawl.extensions._alloc_planner). A real redis-server. A lock's expiry is stood for by
deleting its key, as Redis does when its time is up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from tests._scheduler_harness import settings_for
from webcrawl.extensions.allocator import Allocator
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import site_from_dict
from webcrawl.spiders.site import SiteSpider
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.lock import TokenLock
from webcrawl.state.pagestore import observe_op

KEY = "webcrawl:{locks}:some:lock"


class LockSpider(SiteSpider):
    name = "locked"
    site = site_from_dict({
        "name": "locked", "seeds": ["http://shop.test/"], "allowed_domains": ["shop.test"],
        "politeness": {"user_agent": "bot (ops@shop.test)"},
        "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": 3600},
        "page_types": [{"name": "product", "url_pattern": "/product/", "tier": "high"}]})


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    c, _, _ = connect(redis_url)
    yield c
    c.close()


def test_a_live_holders_lock_is_neither_taken_renewed_nor_released_by_another(client: Any) -> None:
    lock = TokenLock(client, KEY)
    assert lock.acquire("a", 60) and lock.holder() == "a"
    assert not lock.acquire("b", 60), "taken from a live holder"
    assert not lock.renew("b", 3600) and client.pttl(KEY) <= 60_000, "renewed by a non-holder"
    assert not lock.release("b") and lock.holder() == "a", "released by a non-holder"
    assert lock.renew("a", 3600) and client.pttl(KEY) > 60_000, "the holder renews it"
    assert lock.release("a") and lock.holder() is None
    assert not lock.renew("a", 60) and not client.exists(KEY), "a released lock is not renewed back"


def test_an_expired_holder_cannot_touch_the_next_holders_lock(client: Any) -> None:
    lock = TokenLock(client, KEY)
    assert lock.acquire("a", 60)
    client.delete(KEY)  # a's time is up
    assert lock.acquire("b", 60)
    assert not lock.renew("a", 3600) and not lock.release("a")
    assert lock.holder() == "b" and client.pttl(KEY) <= 60_000


def test_the_planning_lock_is_the_ledgers_token_lock(client: Any) -> None:
    ledger = LedgerStore(client, CrawlLayout("locks"))
    assert ledger.lock("a", 10) and not ledger.lock("b", 10)
    assert ledger.planning_lock.holder() == "a"
    assert not ledger.unlock("b") and ledger.unlock("a")


def _allocator(redis_url: str, tmp_path: Path) -> tuple[Allocator, CrawlRuntime]:
    crawler = get_crawler(LockSpider, settings_for(redis_url, "locked", tmp_path))
    crawler.spider = crawler._create_spider()
    runtime = CrawlRuntime.of(crawler)
    return Allocator(runtime, crawler), runtime


def test_one_planner_at_a_time_and_a_lost_lock_stays_lost(redis_url: str, tmp_path: Path) -> None:
    """Two processes of one crawl: the second plans nothing while the first holds the allocation
    lock; once the first's lock is gone the second takes it over, and the first can neither
    renew nor release the second's lock, and stops planning."""
    (one, r1), (two, r2) = _allocator(redis_url, tmp_path), _allocator(redis_url, tmp_path)
    try:
        now = r1.clock.time()
        for i in range(4):
            r1.batch.land("shop.test", observe_op(f"http://shop.test/product/{i}", full=True, time=now,
                                                  record_hash=f"{i:016x}", type_id=1, billed=1.0))
        r1.flush()
        lock = one.planner.lock
        assert one.job.plan(None, 0.0)["webcrawl/allocator/pages"] == 4 and one.holding
        assert lock.holder() == one.worker
        assert two.job.plan(None, 0.0) == {} and not two.holding, "planned under another's lock"
        r1.client.delete(lock.key)  # the first stalled: its lock's time is up
        assert two.job.plan(None, 0.0)["webcrawl/allocator/pages"] == 4, "the takeover loads afresh"
        assert two.holding and lock.holder() == two.worker
        assert one.holding, "the first has not noticed yet"
        one.planner.ttl = 3600.0
        one.planner.renew()  # what its reactor does every tick
        assert r1.client.pttl(lock.key) <= two.planner.ttl * 1000, "the first renewed the second's lock"
        one.planner.release()  # what its close does
        assert lock.holder() == two.worker, "the first released the second's lock"
        assert one.job.plan(None, 0.0) == {} and not one.holding, "the first planned on"
        two.planner.release()
        assert lock.holder() is None
    finally:
        r1.close()
        r2.close()
