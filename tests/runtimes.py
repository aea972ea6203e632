"""Crawl state for tests: a component's real :class:`CrawlRuntime` in-process, and a view of a
crawl's state in Redis from outside (what a crawl left, land operations as the allocator sends
them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from scrapy import Spider
from scrapy.utils.test import get_crawler

from webcrawl.runtime import CrawlRuntime
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.hosts import HostStore
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import PageStore, interval_op
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.records import Record
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.types import TypeIds


def runtime_for(redis_url: str, settings: dict[str, Any] | None = None, *,
                spider: type[Spider] = Spider, name: str = "unit") -> CrawlRuntime:
    """The runtime of a crawler that is never started: components built on it write through its
    batch, which the event loop flushes (:func:`run`) or the test does (:func:`land`)."""
    crawler = get_crawler(spider, {"WEBCRAWL_REDIS_URL": redis_url, **(settings or {})})
    crawler.spider = crawler._create_spider(name)
    return CrawlRuntime.of(crawler)


async def until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    """Let the event loop turn until ``condition`` holds; fails after ``seconds``."""
    for _ in range(int(seconds * 100)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("deadline passed")


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run an async component method to its end on the reactor's event loop (the batch it
    waits for is flushed there, as in a crawl)."""
    return asyncio.get_event_loop().run_until_complete(coroutine)


def decoded(reply: list[Any]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in reply]


def land(runtime: CrawlRuntime, host: str, op: tuple[str, list[Any]]) -> list[str]:
    """One land operation through the runtime's batch, flushed now: its answer."""
    out: list[list[Any]] = []
    runtime.batch.land(host, op, out.append)
    runtime.batch.flush()
    return decoded(out[0])


def host_of(url: str) -> str:
    return url.split("/")[2].rsplit(":", 1)[0]


class StateView:
    """A crawl's state in Redis as another process sees it."""

    def __init__(self, redis_url: str, crawl: str) -> None:
        self.client, _, _ = connect(redis_url)
        shards = int(self.client.hget(CrawlLayout(crawl).meta, "shards") or 1)
        self.layout = CrawlLayout(crawl, shards)
        self.scripts = ScriptSet(self.client)
        self.queue = CrawlQueue(self.client, self.scripts, self.layout, cap=0, default_delay=0.0,
                                lease_seconds=60)
        self.batch = WriteBatch(self.client, self.scripts, self.layout, self.queue,
                                LandSettings(0.0), bloom_slices=1)
        self.pages = PageStore(self.client, self.layout)
        self.hosts = HostStore(self.client, self.layout, default_delay=0.0, cache_seconds=0.0)
        self.types = TypeIds(self.client, self.layout)

    def record(self, url: str) -> Record:
        record = self.pages.get(url, host_of(url))
        assert record is not None, f"no record of {url}"
        return record

    def server_time(self) -> float:
        seconds, micros = self.client.time()
        return float(seconds) + micros / 1e6

    def make_due(self, urls: list[str], interval: float = 1e6) -> None:
        """What the allocator does for pages it wants fetched now: an interval (long: no second
        revisit in the same run) and a due time already past."""
        now = self.server_time()
        for url in urls:
            self.batch.land(host_of(url), interval_op(url, interval, due_at=now - 1))
        self.batch.flush()

    def close(self) -> None:
        self.client.close()
