"""Real crawls that lose a part mid-way and must lose no page: a crawl process killed (-9) and
started again, on a single server and on a 3-master cluster; a cluster master killed (-9) and
replaced by its replica; the single server frozen, or gone and back, for a few seconds; and gone
for longer than the crawl waits (WEBCRAWL_REDIS_OUTAGE_SECONDS), which ends the crawl, once,
naming the server. After a kill, pages fetched twice are allowed (a lease's refetch), only those
the dead part held; pages never fetched are not. Through an outage that expires no lease, every
page is fetched once (retried writes and pops carry op ids). Everything is read from the HTTP
server's own log and the crawl processes' logs; the last check drives one crawl's runtime
in-process against a server that is gone."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._crawlsite import (
    CRAWL, Crawls, OwnRedis, all_pages, bad_lines, fetched, leased_pages, serve_site, settings,
    shards_of,
)
from tests.crawls import pages, wait_for
from tests.runtimes import runtime_for
from webcrawl.state.errors import StateError
from webcrawl.state.layout import CrawlLayout

HOSTS = 5
PAGES = 100
LEASE = 3  # seconds: a dead process's leases come back within the test
FREEZE_SECONDS = 3
# A frozen server is noticed once a command outlasts the client's socket timeout (10 s); the
# crawl must then stop when WEBCRAWL_REDIS_OUTAGE_SECONDS (2 here) has passed: 12 s. The
# allocator's job in flight on its worker thread, if any, waits out its own socket timeout before
# the process can exit (10 s more), and room for a loaded machine.
FROZEN_STOP_WITHIN = 35


@pytest.fixture
def crawls(tmp_path: Path) -> Iterator[Crawls]:
    site = serve_site(tmp_path, HOSTS, PAGES)
    crawls = Crawls(tmp_path, site)
    yield crawls
    crawls.stop_all()
    site.stop()


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest, redis_url: str) -> Iterator[tuple[str, Any]]:
    """(URL, client) of the shared single server or the shared 3-master cluster, emptied."""
    if request.param == "single":
        client: Any = request.getfixturevalue("redis_server").client()
        url = redis_url
    else:
        url = request.getfixturevalue("redis_cluster_url")
        client = request.getfixturevalue("redis_cluster").client()
    yield url, client
    client.close()


def freeze_holding_leases(crawls: Crawls, name: str, client: Any, timeout: float
                          ) -> tuple[int, set[str]]:
    """SIGSTOP process ``name`` at a moment it holds leases and return them, read from Redis
    while it cannot change them (``(leases, pages)``); the process stays stopped."""
    process = crawls.processes[name]
    deadline = time.monotonic() + timeout
    while True:
        process.send_signal(signal.SIGSTOP)
        count, urls = leased_pages(client, shards_of(client))
        if count:
            return count, urls
        process.send_signal(signal.SIGCONT)
        assert time.monotonic() < deadline, f"{name} never held a lease"
        seen = len(pages(crawls.site.read_log()))
        wait_for(lambda: len(pages(crawls.site.read_log())) > seen, deadline - time.monotonic(),
                 f"{name} to fetch another page")


def test_a_killed_process_restarted_loses_nothing(crawls: Crawls, backend: tuple[str, Any]
                                                  ) -> None:
    url, client = backend
    config = settings(url, 0.1, WEBCRAWL_LEASE_SECONDS=LEASE, CONCURRENT_REQUESTS=8)
    crawls.start("victim", config)
    crawls.wait_pages(PAGES // 3, 30)
    leases, leased = freeze_holding_leases(crawls, "victim", client, 20)
    crawls.kill("victim")
    before = fetched(crawls.site)
    assert set(before) != all_pages(crawls.site), "the victim finished before it was killed"

    crawls.start("restarted", config)
    assert crawls.finish("restarted", 60) == 0, crawls.tail("restarted")
    stats = crawls.stats("restarted")
    assert stats.get("finish_reason") == "finished", stats
    after = fetched(crawls.site)
    missing = all_pages(crawls.site) - set(after)
    assert not missing, f"pages lost after kill -9: {sorted(missing)}; stats {stats}"
    # What the dead process held was fetched again, and only that.
    not_again = sorted(p for p in leased if after[p] <= before[p])
    assert not not_again, f"leased by the killed process, never fetched after: {not_again}"
    twice = {p for p, n in after.items() if n > 1}
    assert twice <= leased, f"fetched twice though never leased at the kill: {twice - leased}"
    assert stats.get("scheduler/leases/reclaimed", 0) >= leases, (leases, stats)
    assert not bad_lines(crawls.text("restarted")), bad_lines(crawls.text("restarted"))[:5]


def test_a_killed_master_is_replaced_and_the_crawl_loses_nothing(
        crawls: Crawls, redis_cluster_with_replicas: Any) -> None:
    cluster = redis_cluster_with_replicas
    delay = 0.25
    url = cluster.url
    crawls.start("a", settings(url, delay))
    crawls.wait_pages(PAGES // 4, 30)
    client = cluster.client()
    try:
        layout = CrawlLayout(CRAWL, shards_of(client))
    finally:
        client.close()
    # The master the crawl was pointed at: the client must find the cluster without it.
    victim = next(m for m in cluster.masters() if m.url == url)
    hosts = crawls.site.hosts
    on_victim = {h for h in hosts
                 if cluster.master_for_key(layout.shard(h).next).port == victim.port}
    assert on_victim, "no host's shard on the master to kill: pick another crawl name"
    cluster.kill(victim)
    before = fetched(crawls.site)
    heir = cluster.wait_failover(victim)
    assert crawls.finish("a", 60) == 0, crawls.tail("a")

    text = crawls.text("a")
    stats = crawls.stats("a")
    assert stats.get("finish_reason") == "finished", (stats, crawls.tail("a"))
    truth = all_pages(crawls.site)
    left = {p for p in truth - set(before) if p.split("/", 1)[0] in on_victim}
    assert left, "the killed master's hosts were done before the kill: nothing was tested"
    missing = truth - set(fetched(crawls.site))
    assert not missing, f"pages lost after the failover: {sorted(missing)}"
    assert "is not answering" in text, crawls.tail("a")
    assert "answers again" in text, crawls.tail("a")
    assert heir.port != victim.port
    # The outage's own warnings name the errors that caused it; nothing else may be wrong.
    unexpected = [line for line in bad_lines(text) if "not answering" not in line]
    assert not unexpected, unexpected[:5]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    folder = tmp_path / "redis"
    folder.mkdir()
    server = OwnRedis(folder).start()
    yield server
    server.kill()


def test_a_server_frozen_for_a_few_seconds_is_waited_for(crawls: Crawls, own_redis: OwnRedis
                                                         ) -> None:
    crawls.start("a", settings(own_redis.url, 0.1))
    crawls.wait_pages(PAGES // 3, 30)
    own_redis.signal(signal.SIGSTOP)
    frozen_at = len(pages(crawls.site.read_log()))
    try:
        # The freeze itself: a span of time the crawl must sit through, shorter than the
        # client's socket timeout (10 s), so no command fails; not a wait for a condition.
        time.sleep(FREEZE_SECONDS)
        during = len(pages(crawls.site.read_log())) - frozen_at
        assert crawls.processes["a"].poll() is None, crawls.tail("a")
    finally:
        own_redis.signal(signal.SIGCONT)
    # Each turn of the crawl talks to Redis: at most what was already on its way goes out.
    assert during <= 10, f"{during} pages fetched while Redis was frozen"
    assert crawls.finish("a", 60) == 0, crawls.tail("a")
    stats = crawls.stats("a")
    assert stats.get("finish_reason") == "finished", crawls.tail("a")
    counts = fetched(crawls.site)
    missing = all_pages(crawls.site) - set(counts)
    assert not missing, f"pages lost after the freeze: {sorted(missing)}"
    assert max(counts.values()) == 1, "a page was fetched twice: no lease had expired"


def test_a_server_gone_and_back_is_waited_out(crawls: Crawls, own_redis: OwnRedis) -> None:
    crawls.start("a", settings(own_redis.url, 0.1, WEBCRAWL_REDIS_OUTAGE_SECONDS=30))
    crawls.wait_pages(PAGES // 3, 30)
    own_redis.kill()
    wait_for(lambda: "is not answering" in crawls.text("a"), 10, "the outage warning")
    own_redis.start()  # same socket, same data (every write was on disk)
    assert crawls.finish("a", 60) == 0, crawls.tail("a")
    text = crawls.text("a")
    assert "answers again" in text, crawls.tail("a")
    assert crawls.stats("a").get("finish_reason") == "finished", crawls.tail("a")
    counts = fetched(crawls.site)
    missing = all_pages(crawls.site) - set(counts)
    assert not missing, f"pages lost after the outage: {sorted(missing)}"
    assert max(counts.values()) == 1, sorted(p for p, n in counts.items() if n > 1)


def test_an_outage_past_the_limit_stops_the_crawl_once_naming_the_server(
        crawls: Crawls, own_redis: OwnRedis) -> None:
    config = settings(own_redis.url, 0.1, WEBCRAWL_REDIS_OUTAGE_SECONDS=2,
                      WEBCRAWL_LEASE_SECONDS=LEASE)
    crawls.start("a", config)
    crawls.wait_pages(PAGES // 3, 30)
    own_redis.kill()
    assert crawls.finish("a", 30) == 0, crawls.tail("a")
    text = crawls.text("a")
    assert crawls.stats("a").get("finish_reason") == "redis_unavailable", crawls.tail("a")
    errors = [line for line in text.splitlines() if "] ERROR:" in line]
    assert len(errors) == 1 and own_redis.url in errors[0], errors
    assert "Traceback" not in text
    # What Redis held is intact: a crawl started once it is back finishes the site.
    own_redis.start()
    crawls.start("resumed", config)
    assert crawls.finish("resumed", 60) == 0, crawls.tail("resumed")
    missing = all_pages(crawls.site) - set(fetched(crawls.site))
    assert not missing, f"pages lost after the crawl stopped: {sorted(missing)}"


def test_a_server_frozen_past_the_limit_stops_the_crawl(crawls: Crawls, own_redis: OwnRedis
                                                         ) -> None:
    config = settings(own_redis.url, 0.1, WEBCRAWL_REDIS_OUTAGE_SECONDS=2,
                      WEBCRAWL_LEASE_SECONDS=LEASE)
    crawls.start("a", config)
    crawls.wait_pages(PAGES // 3, 30)
    own_redis.signal(signal.SIGSTOP)
    try:
        assert crawls.finish("a", FROZEN_STOP_WITHIN) == 0, crawls.tail("a")
    finally:
        own_redis.signal(signal.SIGCONT)
    assert crawls.stats("a").get("finish_reason") == "redis_unavailable", crawls.tail("a")
    errors = [line for line in crawls.text("a").splitlines() if "] ERROR:" in line]
    assert len(errors) == 1 and own_redis.url in errors[0], errors


def test_an_outage_ends_only_when_redis_answers(own_redis: OwnRedis) -> None:
    runtime = runtime_for(own_redis.url, {"WEBCRAWL_REDIS_OUTAGE_SECONDS": 30})
    own_redis.kill()
    with pytest.raises(StateError) as failure:
        runtime.queue.counts()  # a read every tick of a crawl makes
    runtime.fail(failure.value)
    assert runtime.in_outage and not runtime.failed
    assert len(runtime.batch) == 0 and runtime.batch.unsent == 0
    runtime.flush()  # nothing to send: Redis is not asked anything
    assert runtime.in_outage, "the outage was declared over though Redis never answered"
