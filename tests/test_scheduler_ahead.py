"""The scheduler's pops go behind (from the write batch's thread, with the batch), so handing out
work does not wait for Redis: on any crawl once its buffer is empty, and on a crawl with no delay
once it runs half empty; a crawl with a delay pops only when its buffer is empty. A real
redis-server, held with CLIENT PAUSE while a pop is under way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import scrapy

from tests._scheduler_harness import Harness, settings_for, wait
from webcrawl.scheduler import POP_BATCH


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest, redis_url: str) -> str:
    return redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")


@pytest.fixture
def opened() -> Iterator[list[Harness]]:
    harnesses: list[Harness] = []
    yield harnesses
    for harness in harnesses:
        harness.close()


def test_with_no_delay_the_next_pop_goes_behind_while_work_is_handed_out(
        redis_url: str, redis_client: Any, tmp_path: Path, opened: list[Harness]) -> None:
    h = Harness(settings_for(redis_url, "ahead", tmp_path), opened=opened)
    urls = [f"http://a.test/{i}" for i in range(2 * POP_BATCH + 8)]
    h.enqueue(*(scrapy.Request(u) for u in urls))
    taken = [h.take_when_ready()]  # the first pop: POP_BATCH requests
    redis_client.client_pause(60_000, all=False)
    try:
        # Redis holds every answer from now on; the buffer still hands out what it holds, and
        # the pop that went behind once it ran half empty is still under way.
        while len(taken) < POP_BATCH:
            request = h.take()
            assert request is not None, "the buffer's requests come without Redis"
            taken.append(request)
        assert h.runtime.batch.sending, "no pop went behind while the buffer ran down"
    finally:
        redis_client.client_unpause()
    wait(lambda: not h.runtime.batch.sending, 10, "the pop behind to be answered")
    for request in taken:
        h.finish(request)
    taken += h.drain()
    assert sorted(r.url for r in taken) == sorted(urls), "every request once, none lost"


def test_with_a_delay_pops_wait_for_an_empty_buffer(
        redis_url: str, tmp_path: Path, opened: list[Harness]) -> None:
    h = Harness(settings_for(redis_url, "no-ahead", tmp_path,
                             WEBCRAWL_DOMAIN_DELAY_SECONDS=0.2), opened=opened)
    urls = [f"http://h{i}.test/" for i in range(POP_BATCH + 4)]
    h.enqueue(*(scrapy.Request(u) for u in urls))
    taken = [h.take_when_ready()]
    while len(taken) < POP_BATCH:
        request = h.take()
        assert request is not None
        taken.append(request)
        assert not h.runtime.batch.sending, "a pop went out ahead on a crawl with a delay"
    for request in taken:
        h.finish(request)
    taken += h.drain()
    assert sorted(r.url for r in taken) == sorted(urls)


def test_closing_with_a_pop_under_way_puts_back_what_it_took(
        backend: str, tmp_path: Path, opened: list[Harness]) -> None:
    h = Harness(settings_for(backend, "ahead-close", tmp_path), opened=opened)
    urls = [f"http://a.test/{i}" for i in range(2 * POP_BATCH + 8)]
    h.enqueue(*(scrapy.Request(u) for u in urls))
    taken = [h.take_when_ready()]
    while not h.runtime.batch.sending:
        request = h.take()
        assert request is not None and len(taken) < POP_BATCH, "no pop went behind"
        taken.append(request)
    # Closed at once (never finished, the pop behind unanswered): all of it back in line now.
    again = h.reopen()
    assert sorted(r.url for r in again.drain(timeout=5)) == sorted(urls)


@pytest.mark.parametrize("delay", [0.0, 0.2])
def test_an_empty_buffer_is_filled_behind_and_the_engine_woken(
        delay: float, redis_url: str, redis_client: Any, tmp_path: Path,
        opened: list[Harness]) -> None:
    h = Harness(settings_for(redis_url, "ahead-empty", tmp_path,
                             WEBCRAWL_DOMAIN_DELAY_SECONDS=delay), opened=opened)
    h.enqueue(scrapy.Request("http://a.test/0"))
    h.runtime.flush()
    pokes = h.pokes
    redis_client.client_pause(5_000, all=False)  # bounded: a pop that waited would end the pause
    try:
        assert h.take() is None, "the engine was kept waiting for Redis"
        assert h.scheduler.has_pending_requests() and h.runtime.batch.sending
    finally:
        redis_client.client_unpause()
    wait(lambda: h.pokes > pokes, 10, "the engine to be woken by the pop's answer")
    request = h.take()
    assert request is not None and request.url == "http://a.test/0"


def test_with_no_delay_a_budgeted_crawl_tops_its_wallet_up_behind_and_keeps_to_the_budget(
        redis_url: str, tmp_path: Path) -> None:
    """A real crawl of the demo shop at delay 0 and a budget of 6 requests: the wallet runs dry
    and is topped up behind; the run still ends when the budget is spent, within it and what
    was in flight."""
    from tests import _shopcrawl as shop
    from webcrawl.demo.serve import start_server_process

    with start_server_process("shop", 3, tmp_path / "server.log", seed=3, time_scale=600.0,
                              products=24, categories=2, blog_posts=0) as server:
        settings = shop.settings(redis_url, tmp_path, server.port, "ahead-budget")
        shop.write_site(tmp_path, budget=6, delay=0)
        stats = shop.run(tmp_path, settings, "run.log")
    assert stats["finish_reason"] == "cycle_budget_spent"
    [cycle] = shop.cycles(redis_url, "ahead-budget")
    assert 6 <= cycle["booked"] <= 6 + 3 and cycle["waiting"] > 0
