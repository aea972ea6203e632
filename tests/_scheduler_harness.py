"""Driving webcrawl's scheduler the way Scrapy's engine drives it, inside a test.

:class:`Harness` holds a real Scrapy crawler, spider and execution engine, and gives the engine a
real slot (Scrapy's own ``_Slot`` with a ``CallLaterOnce`` wake-up) whose requests in progress are
the ones the test has taken and not yet finished. The scheduler's timers (maintenance, wake-ups)
run on the reactor's asyncio loop whenever the test waits (:meth:`Harness.wait`), as they would
in a crawl; nothing else runs it, so nothing happens behind the test's back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import scrapy
from scrapy.core.engine import _Slot
from scrapy.utils.reactor import CallLaterOnce
from scrapy.utils.test import get_crawler

from webcrawl.runtime import CrawlRuntime
from webcrawl.scheduler import ReadyQueueScheduler


class ContractSpider(scrapy.Spider):
    name = "contract"

    def parse(self, response: object) -> None:
        pass

    def parse_item(self, response: object) -> None:
        pass

    def on_error(self, failure: object) -> None:
        pass


def pump(seconds: float) -> None:
    """Let the reactor's loop run for ``seconds`` (timers due in that time fire)."""
    asyncio.get_event_loop().run_until_complete(asyncio.sleep(seconds))


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Run the loop until ``condition`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        pump(0.01)


def settings_for(url: str, crawl: str, data_dir: Path, **overrides: Any) -> dict[str, Any]:
    return {"WEBCRAWL_REDIS_URL": url, "WEBCRAWL_CRAWL_NAME": crawl,
            "WEBCRAWL_DATA_DIR": str(data_dir), "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0.0,
            "WEBCRAWL_BLOOM_CAPACITY": 10_000, **overrides}


class Harness:
    """One crawl process's scheduler, opened (see the module docstring)."""

    def __init__(self, settings: dict[str, Any], *, opened: list[Harness] | None = None) -> None:
        """``opened``: a list this harness (and those reopening it) joins, for the test to close
        them all: an open scheduler keeps working on the loop (a process left running)."""
        self.settings = settings
        self.opened = opened if opened is not None else []
        self.opened.append(self)
        self.crawler = get_crawler(ContractSpider, settings)
        self.crawler.spider = self.spider = self.crawler._create_spider()
        self.crawler.engine = self.crawler._create_engine()
        self.runtime = CrawlRuntime.of(self.crawler)
        self.scheduler = ReadyQueueScheduler.from_crawler(self.crawler)
        self.pokes = 0
        self.slot = _Slot(True, CallLaterOnce(self._poked), self.scheduler)
        self.crawler.engine._slot = self.slot
        self.closed = False
        self.scheduler.open(self.spider)

    @property
    def stats(self) -> Any:
        return self.crawler.stats

    def _poked(self) -> None:
        self.pokes += 1

    def enqueue(self, *requests: scrapy.Request) -> list[bool]:
        return [self.scheduler.enqueue_request(r) for r in requests]

    def take(self) -> scrapy.Request | None:
        """What the engine does when it asks for work: the request goes in progress."""
        request = self.scheduler.next_request()
        if request is not None:
            self.slot.add_request(request)
        return request

    def take_answered(self) -> scrapy.Request | None:
        """Ask for work; each time that sends a pop behind (one shard after another), ask
        again once it has answered. None: no pop due now gave anything."""
        request = self.take()
        while request is None and self.runtime.batch.sending:
            self.runtime.batch.settle()
            request = self.take()
        return request

    def finish(self, request: scrapy.Request) -> None:
        """The spider and the pipelines are done with the request's response."""
        self.slot.remove_request(request)

    def take_when_ready(self, timeout: float = 5.0) -> scrapy.Request:
        """Ask for work each time the scheduler wakes the engine, until some comes."""
        got: list[scrapy.Request] = []

        def ready() -> bool:
            request = self.take()
            if request is not None:
                got.append(request)
            return bool(got)

        wait(ready, timeout, "the scheduler to hand out a request")
        return got[0]

    def drain(self, timeout: float = 10.0) -> list[scrapy.Request]:
        """Take and finish everything until the scheduler has nothing pending."""
        out: list[scrapy.Request] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            request = self.take()
            if request is not None:
                out.append(request)
                self.finish(request)
            elif not self.scheduler.has_pending_requests():
                return out
            else:
                pokes = self.pokes
                try:  # as the engine: ask again when woken (its heartbeat would, after a while)
                    wait(lambda: self.pokes > pokes, 1.0, "a wake-up")
                except AssertionError:
                    pass
        raise AssertionError(f"the scheduler did not drain in {timeout} s; got {out}")

    def close(self, reason: str = "finished") -> None:
        if not self.closed:
            self.closed = True
            self.scheduler.close(reason)
            self.runtime.close()

    def reopen(self, **overrides: Any) -> Harness:
        """Close this process's scheduler and open a new one on the same crawl (a restart)."""
        self.close("shutdown")
        return Harness({**self.settings, **overrides}, opened=self.opened)
