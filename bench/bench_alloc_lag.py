"""Reactor lag while the allocator plans, at 1,000,000 known pages: before and after planning
moved off the reactor thread.

A real redis-server (``bench/_scheduler_redis.py``) holds a crawl of 1,000,000 known pages over
1,000 hosts (URLs as ``bench/_state_fill.py`` makes them), written through the crawl's own land
operations in batches of 2,000: two fetches of every page (a third of them changed in between),
then a revisit interval each (``Filler.schedule_all``, what the allocator writes). An in-process
crawler of a site file with three page types owns the allocator; its reactor (Twisted's asyncio
reactor, as in a crawl) runs a timer every 10 ms, and each tick's lag is how late it fired.

Each allocation is measured twice, in the same process and on the same data:

- **before**: :meth:`Allocator.allocate` called from a reactor callback, so the whole allocation
  runs on the reactor thread, as it did before the worker thread;
- **after**: :meth:`Allocator.plan_soon`, the same allocation on the allocator's worker thread,
  as a crawl runs it now.

Two allocations each: a *takeover* (a process newly holding the allocation lock loads every
record, plans and writes the intervals that moved; the intervals are written back to the fill's
before each, so both write as many) and the *next* one (the table synced, planned again).

``./run bench alloc_lag [--pages N] [--hosts N] [--no-write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scrapy.utils.asyncio import call_later
from scrapy.utils.reactor import install_reactor
from scrapy.utils.test import get_crawler

from bench._report import table, write_section
from bench._scheduler_redis import BenchRedis
from bench._state_fill import Filler, host_of, hosts, urls
from webcrawl.extensions.allocator import Allocator
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import site_from_dict
from webcrawl.spiders.site import SiteSpider
from webcrawl.state.batch import WriteBatch
from webcrawl.state.pagestore import observe_op

TICK = 0.01
TYPES = ("product", "article", "category")


class LagSpider(SiteSpider):
    name = "lagbench"
    site = site_from_dict({
        "name": "lagbench", "seeds": ["https://www.example.org/"], "allowed_domains": ["example.org"],
        "politeness": {"user_agent": "bench (ops@example.org)"},
        "budget": {"billing": "requests", "amount_per_cycle": 33_000, "cycle_seconds": 86_400},
        "page_types": [{"name": "product", "url_pattern": "/products/", "tier": "high"},
                       {"name": "article", "url_pattern": r"\.html", "tier": "normal"},
                       {"name": "category", "url_pattern": "/category/", "tier": "low"}]})


class LagProbe:
    """A reactor timer every :data:`TICK` seconds: when each tick was due and how late it fired."""

    def __init__(self) -> None:
        self.ticks: list[tuple[float, float]] = []  # (due, lag)
        self.running = False
        self._due = 0.0

    def start(self) -> None:
        self.running = True
        self._next()

    def stop(self) -> None:
        self.running = False

    def _next(self) -> None:
        self._due = time.perf_counter() + TICK
        call_later(TICK, self._tick)

    def _tick(self) -> None:
        self.ticks.append((self._due, time.perf_counter() - self._due))
        if self.running:
            self._next()

    def between(self, start: float, end: float) -> list[float]:
        """Lags of the ticks due from ``start`` to ``end``."""
        return [lag for due, lag in self.ticks if start <= due <= end]


async def _until(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the allocation did not end in time")
        await asyncio.sleep(TICK)


async def _measure(probe: LagProbe, allocate: Any) -> dict[str, Any]:
    """One allocation started by ``allocate(done)`` from a reactor callback; ``done()`` says it ended."""
    ended: list[float] = []
    span: list[float] = []

    def begin() -> None:
        span.append(time.perf_counter())
        allocate(lambda: ended.append(time.perf_counter()))

    call_later(0, begin)
    await _until(lambda: bool(ended), 3600)
    await asyncio.sleep(5 * TICK)  # the tick the reactor owed, if it was held, fires now
    lags = probe.between(span[0], ended[0])
    return {"seconds": ended[0] - span[0], "ticks": len(lags), "max": max(lags, default=0.0),
            "p99": _p99(lags), "expected": (ended[0] - span[0]) / TICK}


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _fill(runtime: CrawlRuntime, all_urls: list[str], filler: Filler) -> float:
    """Two fetches of every page, then its interval; returns the seconds it took."""
    started = time.perf_counter()
    rng = random.Random(5)
    ids = [runtime.types.id(t) for t in TYPES]
    now = runtime.clock.time()
    batch = filler.batch
    for n, url in enumerate(all_urls, 1):
        first = f"{rng.getrandbits(64):016x}"
        second = first if rng.random() < 2 / 3 else f"{rng.getrandbits(64):016x}"
        for k, digest in enumerate((first, second)):
            batch.land(host_of(url), observe_op(
                url, full=True, time=now - (2 - k) * 86_400 * rng.uniform(0.5, 3), record_hash=digest,
                type_id=ids[n % 3], billed=float(rng.randint(1, 3))))
        if n % 1000 == 0:
            batch.flush()
    batch.flush()
    filler.schedule_all(all_urls)
    return time.perf_counter() - started


def run(pages: int, host_count: int) -> dict[str, Any]:
    # The crawl's reactor: Twisted's on asyncio, whose loop the measurement drives.
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    out: dict[str, Any] = {"pages": pages, "hosts": host_count,
                           "switch": sys.getswitchinterval()}
    loop = asyncio.get_event_loop()
    with tempfile.TemporaryDirectory() as folder:
        server = BenchRedis(Path(folder))
        server.client.config_set("appendonly", "no")
        try:
            crawler = get_crawler(LagSpider, {
                "WEBCRAWL_REDIS_URL": server.url, "WEBCRAWL_CRAWL_NAME": "lag",
                "WEBCRAWL_DATA_DIR": folder, "WEBCRAWL_DOMAIN_DELAY_SECONDS": 1.0,
                "WEBCRAWL_BLOOM_CAPACITY": 10_000, "WEBCRAWL_PLANNER_SEED": 1, "LOG_LEVEL": "WARNING"})
            crawler.spider = crawler._create_spider()
            runtime = CrawlRuntime.of(crawler)
            base = runtime.batch
            filler = Filler(runtime.queue, WriteBatch(runtime.client, runtime.scripts, runtime.layout,
                                                      runtime.queue, base.settings,
                                                      bloom_slices=base.bloom_slices), lambda u: [])
            all_urls = list(urls(pages, hosts(host_count, random.Random(3))))
            out["fill"] = _fill(runtime, all_urls, filler)
            probe = LagProbe()
            probe.start()
            loop.run_until_complete(asyncio.sleep(2.0))
            out["idle"] = probe.between(0, time.perf_counter())

            def on_reactor(allocator: Allocator) -> Any:
                def allocate(done: Any) -> None:
                    allocator.allocate(force=True)
                    done()
                return allocate

            def on_worker(allocator: Allocator) -> Any:
                def allocate(done: Any) -> None:
                    allocator.plan_soon().addBoth(lambda _: done())
                return allocate

            for name, how in (("before", on_reactor), ("after", on_worker)):
                filler.schedule_all(all_urls)  # the fill's intervals: the takeover writes as many
                allocator = Allocator(runtime, crawler)
                out[name] = [loop.run_until_complete(_measure(probe, how(allocator)))
                             for _ in ("takeover", "next")]
                out[f"{name}_stats"] = runtime.stats.get_value("webcrawl/allocator/intervals")
                allocator.planner.release()
                allocator.jobs.close()
                del allocator
                gc.collect()
            probe.stop()
            loop.run_until_complete(asyncio.sleep(3 * TICK))
            runtime.close()
        finally:
            server.process.kill()
            server.process.wait()
    return out


def report(r: dict[str, Any]) -> str:
    idle = r["idle"]
    rows = []
    for name, label in (("before", "on the reactor (before)"), ("after", "on the worker thread (after)")):
        for kind, m in zip(("takeover: load, plan, write", "next: sync, plan, write"), r[name]):
            rows.append([label, kind, m["seconds"], f"{m['ticks']:,} of {m['expected']:,.0f}",
                         m["max"] * 1000, m["p99"] * 1000])
    before, after = r["before"], r["after"]
    return (
        f"{r['pages']:,} known pages on {r['hosts']:,} hosts, one shard, written through the crawl's "
        f"land operations (two fetches a page, then its interval: {r['fill']:.0f} s). A timer on the "
        f"reactor every {TICK * 1000:.0f} ms; a tick's lag is how late it fired. Idle, before any "
        f"allocation: max {max(idle) * 1000:.1f} ms, p99 {_p99(idle) * 1000:.1f} ms over "
        f"{len(idle):,} ticks. The interpreter hands the GIL over every "
        f"{r['switch'] * 1000:.0f} ms.\n\n"
        + table(["allocation", "kind", "seconds", "ticks during it", "max lag, ms", "p99 lag, ms"], rows)
        + f"\n\nBefore, the reactor stood still for the whole allocation ({before[0]['seconds']:.1f} s "
        f"taking over, {before[1]['seconds']:.1f} s after): no download, no timer, no write went on "
        f"meanwhile. After, the same allocations ({after[0]['seconds']:.1f} s and "
        f"{after[1]['seconds']:.1f} s) leave it turning: its ticks fire at most "
        f"{max(after[0]['max'], after[1]['max']) * 1000:.0f} ms late."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench alloc_lag")
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv or [])
    body = report(run(args.pages, args.hosts))
    print(body)
    if not args.no_write:
        write_section("alloc-lag", "Reactor lag while the allocator plans, at 1,000,000 known pages",
                      "./run bench alloc_lag", body)


if __name__ == "__main__":
    main()
