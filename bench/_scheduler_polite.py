"""Politeness with two processes, and kill -9 recovery, read from the demo server's own log.

- Two processes: the second starts once the first has made its first requests. webcrawl's share
  one crawl (same ``WEBCRAWL_CRAWL_NAME``, per-host delay in the ready queue); scrapy-redis's share
  one Redis queue and fingerprint set, each with ``DOWNLOAD_DELAY``; vanilla Scrapy processes
  cannot share a crawl, so each crawls the whole site with ``DOWNLOAD_DELAY``.
- Crash: one process is killed with SIGKILL after a third of the site, restarted, killed again
  after two thirds, restarted, and left to finish (two kills, two restarts).

Utilisation is the achieved rate over the bound ``H / d``, the achieved rate being the sum over
hosts of (requests to the host - 1) over the span from the first request to the last: a crawl that
keeps every host busy exactly every ``d`` seconds scores 1.0, and above 1.0 means the hosts were
hit faster than the delay allows.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench._scheduler_crawls import SCRAPY_REDIS, VANILLA, Redis, settings_for, start, wait_until
from tests.crawls import gaps_by_host, pages
from webcrawl.demo.serve import ServerProcess

LEASE_SECONDS = 3


@dataclass
class Politeness:
    requests: int
    distinct: int
    reachable: int
    utilisation: float
    short_gaps: int
    gaps: int
    shortest: float
    per_process: list[int]


def seeds_of(site: ServerProcess) -> str:
    return ",".join(site.base_url(h) + "/" for h in site.hosts)


def reachable_pages(site: ServerProcess) -> set[str]:
    """Every page (``host/path``) reachable from the seeds, from the site's own link graph."""
    return {u.split("://", 1)[1].split(":", 1)[0] + "/" + u.split("/", 3)[3]
            for u in site.site.reachable()}


def fetched_since(site: ServerProcess, offset: int) -> Counter[str]:
    return Counter(f"{e.host}/{e.path.lstrip('/')}" for e in pages(site.read_log()[offset:]))


def settle(site: ServerProcess) -> int:
    """The log's length once the server has written its last line."""
    last = -1
    while (now := len(site.read_log())) != last:
        last = now
        time.sleep(0.2)
    return now


def judge(site: ServerProcess, offset: int, delay: float, per_process: list[int]) -> Politeness:
    log = pages(site.read_log()[offset:])
    counts = fetched_since(site, offset)
    per_host = Counter(e.host for e in log)
    span = max(e.mono for e in log) - min(e.mono for e in log)
    rate = sum(n - 1 for n in per_host.values()) / span if span > 0 else float("inf")
    gaps = [g for host_gaps in gaps_by_host(log).values() for g in host_gaps]
    return Politeness(len(log), len(counts), len(reachable_pages(site)),
                      rate / (len(site.hosts) / delay), sum(g < delay for g in gaps), len(gaps),
                      min(gaps, default=float("nan")), per_process)


def two_processes(contender: str, site: ServerProcess, redis: Redis, delay: float,
                  folder: Path, tag: str) -> Politeness:
    redis.server.flush()
    offset = settle(site)
    settings = settings_for(contender, redis.url_for(contender), delay, f"polite-{tag}", persist=True)
    first = start(contender, settings, seeds_of(site), folder, f"{tag}-a.log")
    wait_until(lambda: len(site.read_log()) - offset >= 3, 60)
    second = start(contender, settings, seeds_of(site), folder, f"{tag}-b.log")
    crawls = [first.wait(300), second.wait(300)]
    settle(site)
    return judge(site, offset, delay,
                 [int(c.stats.get("downloader/response_count", 0)) for c in crawls])


@dataclass
class Crash:
    distinct: int
    reachable: int
    requests: int
    kills: int
    reclaimed: int


def crash(contender: str, site: ServerProcess, redis: Redis, delay: float, folder: Path,
          tag: str) -> Crash:
    assert contender != VANILLA, "vanilla Scrapy keeps nothing to restart from"
    redis.server.flush()
    offset = settle(site)
    total = len(reachable_pages(site))
    settings = settings_for(contender, redis.url_for(contender), delay, f"crash-{tag}", persist=True,
                            **({"WEBCRAWL_LEASE_SECONDS": LEASE_SECONDS} if contender.startswith("webcrawl") else {}))
    kills, reclaimed = 0, 0
    for step, share in enumerate((1 / 3, 2 / 3, None)):
        child = start(contender, settings, seeds_of(site), folder, f"{tag}-{step}.log")
        if share is not None and wait_until(
            lambda: not child.running() or len(site.read_log()) - offset >= share * total, 120
        ) and child.running():
            child.wait(kill=True)
            kills += 1
        else:
            crawl = child.wait(300)
            reclaimed += int(crawl.stats.get("scheduler/leases/reclaimed", 0))
    settle(site)
    counts = fetched_since(site, offset)
    if contender == SCRAPY_REDIS:
        redis.server.flush()  # persist=True keeps its keys
    return Crash(len(counts), total, sum(counts.values()), kills, reclaimed)
