"""The cycle ledger stays bounded (webcrawl.state.ledger.LedgerStore.retain, lua2/rollup.lua, run
by the allocation lock's holder): past WEBCRAWL_CYCLE_RETENTION cycles, old ones are rolled up
into one summary that keeps their amounts (so the report's totals stay whole), their keys go,
and processes whose heartbeat expired leave the workers of the cycles kept. A real redis-server;
figures reach the ledger through the crawl's own write batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from tests._scheduler_harness import settings_for
from tests.test_alloc_lock import LockSpider
from webcrawl.commands._reportdata import figures_from_ledger, rolled_from_ledger
from webcrawl.extensions._alloc_cycles import retention_of
from webcrawl.extensions.allocator import Allocator
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet

HOUR = 3600.0
T0 = 1_800_000_000.0  # server time of cycle 1's start


class Crawl:
    """A crawl's ledger and write batch (the cost middleware books through the batch)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.layout = CrawlLayout("kept")
        self.ledger = LedgerStore(client, self.layout)
        scripts = ScriptSet(client)
        queue = CrawlQueue(client, scripts, self.layout, cap=0, default_delay=0.0, lease_seconds=30)
        self.batch = WriteBatch(client, scripts, self.layout, queue, LandSettings(0.0), bloom_slices=1)

    def cycles(self, n: int, after: int = 0) -> list[int]:
        """``n`` hourly cycles from hour ``after``, each booked and closed as a crawl does: the
        k-th fetched k products (k credits each) and a robots.txt, found k - 1 changed; budget
        100."""
        ids = []
        for k in range(1, n + 1):
            cycle = self.ledger.start_cycle(100.0, HOUR, T0 + (after + k - 1) * HOUR)
            for _ in range(k):
                self.batch.ledger(cycle.id, {"booked": k, "spent:revisit": k, "fetches:product": 1,
                                             "cost:product": k})
            self.batch.ledger(cycle.id, {"booked": 1, "fetches:-": 1, "cost:-": 1, "new:product": 1,
                                         "changed:product": k - 1})
            self.batch.flush()
            self.ledger.set(cycle.id, {"fetched": 10 * k, "waiting": 5, "known": 10 * k + 5,
                                       "idle": 100 - (k * k + 1), "freshness": 0.5 + k / 100,
                                       "freshness:product": 0.5, "pages:product": 10 * k,
                                       "alloc:gain": 1.0, "granted": 1000.0 * k})
            ids.append(cycle.id)
        return ids

    def keys(self) -> set[str]:
        return {k.decode() for k in self.client.scan_iter(match=self.layout.prefix + "cycle*")}


@pytest.fixture
def crawl(redis_url: str) -> Iterator[Crawl]:
    client, _, _ = connect(redis_url)
    yield Crawl(client)
    client.close()


def _sum(figures: list[dict[str, float]], key: str) -> float:
    return sum(f.get(key, 0.0) for f in figures)


def test_old_cycles_are_rolled_up_into_one_summary_of_their_amounts(crawl: Crawl) -> None:
    ids = crawl.cycles(6)
    before = [crawl.ledger.numbers(i) for i in ids]
    done = crawl.ledger.retain(2, now=T0 + 7 * HOUR, settle_seconds=600)
    assert done.rolled == 4
    assert crawl.ledger.cycle_ids() == ids[-2:]
    assert [crawl.ledger.numbers(i) for i in ids[-2:]] == before[-2:], "a kept cycle changed"
    p = crawl.layout.prefix
    assert crawl.keys() == {p + "cycle", p + "cycle:seq", p + "cycles", p + "cycles:rolled",
                            p + "cycle:5", p + "cycle:6"}, "a rolled-up cycle's keys stayed"
    rolled = crawl.ledger.rolled_up()
    old = before[:4]
    for key in ("budget", "booked", "idle", "spent:revisit", "fetches:product", "cost:product",
                "fetches:-", "cost:-", "new:product", "changed:product"):
        assert rolled[key] == pytest.approx(_sum(old, key)), key
    assert (rolled["cycles"], rolled["first"], rolled["last"]) == (4, 1, 4)
    assert rolled["started"] == T0 and rolled["ends"] == T0 + 4 * HOUR
    for snapshot in ("fetched", "waiting", "known", "freshness", "freshness:product",
                     "pages:product", "alloc:gain", "granted", "rate"):
        assert snapshot not in rolled, f"{snapshot} (each cycle's own) was added up"
    # Once more: what was rolled up is not added twice, and later cycles fold in.
    ids += crawl.cycles(1, after=6)  # cycle 7 (booked as cycle 1 was)
    assert crawl.ledger.retain(2, now=T0 + 9 * HOUR, settle_seconds=600).rolled == 1
    again = crawl.ledger.rolled_up()
    assert again["cycles"] == 5 and again["last"] == 5 and again["first"] == 1
    assert again["booked"] == pytest.approx(rolled["booked"] + before[4]["booked"])
    assert not crawl.ledger.roll_up(5), "rolled up twice"
    assert crawl.ledger.rolled_up() == again


def test_the_reports_totals_are_the_same_before_and_after_a_rollup(crawl: Crawl) -> None:
    """What ``scrapy report`` adds up over all cycles (webcrawl/commands/report.py): the rows by
    page type, spent and budget."""
    ids = crawl.cycles(5)

    def totals() -> tuple[dict[str, tuple[float, ...]], float, float, int]:
        cycles = [figures_from_ledger(i, crawl.ledger.numbers(i), None)
                  for i in crawl.ledger.cycle_ids()]
        rolled = rolled_from_ledger(crawl.ledger.rolled_up())
        if rolled is not None:
            cycles.append(rolled.figures)
        rows: dict[str, tuple[float, ...]] = {}
        for c in cycles:
            for name, r in c.rows.items():
                old = rows.get(name, (0.0,) * 5)
                rows[name] = tuple(a + b for a, b in zip(old, (r.fetches, r.cost, r.new, r.changed,
                                                               r.unchanged)))
        count = len(crawl.ledger.cycle_ids()) + (rolled.count if rolled else 0)
        return rows, sum(c.spent or 0 for c in cycles), sum(c.budget or 0 for c in cycles), count

    before = totals()
    assert crawl.ledger.retain(1, now=T0 + 6 * HOUR, settle_seconds=0).rolled == 4
    assert totals() == before and before[3] == len(ids)


def test_a_cycle_still_in_use_is_not_rolled_up(crawl: Crawl) -> None:
    ids = crawl.cycles(5)
    now = T0 + 5 * HOUR + 60  # cycle 5 ended a minute ago
    crawl.ledger.heartbeat(ids[1], "alive", now + 30)  # a process still books into cycle 2
    done = crawl.ledger.retain(1, now=now, settle_seconds=120, current=ids[2])
    assert done.rolled == 2 and crawl.ledger.cycle_ids() == ids[1:3] + ids[4:], (
        "cycle 2 has a live worker, 3 is current, 4 ended too recently for late bookings")
    assert crawl.ledger.live_workers(ids[1], now) == 1


def test_dead_workers_leave_the_cycles_kept(crawl: Crawl) -> None:
    ids = crawl.cycles(2)
    now = T0 + 2 * HOUR
    for worker, expires in (("died", now - 1), ("alive", now + 30), ("left-long-ago", now - HOUR)):
        crawl.ledger.heartbeat(ids[1], worker, expires)
    crawl.ledger.heartbeat(ids[0], "died-too", now - 5)
    done = crawl.ledger.retain(10, now=now, settle_seconds=600)
    assert (done.rolled, done.dead_workers) == (0, 3)
    assert crawl.ledger.workers(ids[1]) == {"alive": now + 30}
    assert crawl.ledger.workers(ids[0]) == {}
    assert not crawl.client.exists(crawl.ledger.cycle_key(ids[0]) + ":workers")


def test_the_allocation_lock_holder_keeps_the_ledger_bounded(redis_url: str, tmp_path: Path) -> None:
    """A crawl whose ledger holds yesterday's cycles: its allocator (retention 2) rolls all but
    the newest two up at its first allocation, and drops a dead process from a kept cycle."""
    crawler = get_crawler(LockSpider, settings_for(redis_url, "kept", tmp_path,
                                                   WEBCRAWL_CYCLE_RETENTION=2))
    crawler.spider = crawler._create_spider()
    runtime = CrawlRuntime.of(crawler)
    try:
        ledger = runtime.ledger
        now = runtime.clock.time()
        old = [ledger.start_cycle(100.0, HOUR, now - 2 * 86_400 + k * HOUR).id for k in range(5)]
        ledger.heartbeat(old[-1], "crashed", now - 86_400)
        allocator = Allocator(runtime, crawler)
        cycle = allocator.begin()  # the last cycle has no live worker: a new one starts
        assert cycle.id == old[-1] + 1
        allocator.allocate(force=True)
        assert ledger.cycle_ids() == [old[-1], cycle.id]
        assert ledger.rolled_up()["cycles"] == 4
        assert ledger.workers(old[-1]) == {}
        assert runtime.stats.get_value("webcrawl/cycles/rolled_up") == 4
        assert runtime.stats.get_value("webcrawl/cycles/dead_workers") == 1
        allocator.spider_closed()
        assert ledger.workers(cycle.id) == {}, "the process left its cycle"
    finally:
        runtime.close()


@pytest.mark.parametrize("value", [0, -3, 2.5, "x", ""])
def test_the_retention_is_a_whole_number_of_cycles(value: object) -> None:
    with pytest.raises(ValueError, match="WEBCRAWL_CYCLE_RETENTION"):
        retention_of({"WEBCRAWL_CYCLE_RETENTION": value})
    assert retention_of({"WEBCRAWL_CYCLE_RETENTION": "7"}) == 7 and retention_of({}) == 1000
