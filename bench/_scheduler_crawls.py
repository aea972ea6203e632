"""The scheduler benchmark's contenders: one spider and one settings module, three schedulers.

Every crawl is ``scrapy crawl docs`` of the plain Scrapy project in ``bench/vanilla/`` (a
CrawlSpider with a LinkExtractor; Scrapy's defaults with robots.txt obeyed, webcrawl's
concurrency, no delay), with nothing of webcrawl loaded but, in webcrawl's column, its scheduler.
Only the scheduler differs (:func:`settings_for`):

- vanilla Scrapy: the project as it is (Scrapy's scheduler, memory queues, RFPDupeFilter);
- scrapy-redis: as its README configures it, ``SCHEDULER = "scrapy_redis.scheduler.Scheduler"``,
  ``DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"``, ``REDIS_URL`` on the benchmark's
  redis-server, ``SCHEDULER_PERSIST`` off for single crawls and on where processes share one (with
  it off, the first process to finish deletes the queue and fingerprints of the others);
- webcrawl: ``SCHEDULER = "webcrawl.scheduler.ReadyQueueScheduler"`` with ``WEBCRAWL_REDIS_URL``
  on the same server, its crawl name, and its per-host delay (``WEBCRAWL_DOMAIN_DELAY_SECONDS``,
  which defaults to 1 s: 0 for throughput, as the others' ``DOWNLOAD_DELAY``).

Latency mode: ``... tcp`` contenders reach the same redis-server over TCP through the latency
proxy (``bench/_latency_proxy.py``) instead of its unix socket.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench._scheduler_process import Child, Crawl, project_env, scrapy_command
from bench._scheduler_redis import BenchRedis, cpu_seconds, wait_until
from tests.crawls import REPO

WEBCRAWL, VANILLA, SCRAPY_REDIS = "webcrawl", "vanilla Scrapy", "scrapy-redis"
WEBCRAWL_TCP, SCRAPY_REDIS_TCP = "webcrawl tcp", "scrapy-redis tcp"
CONTENDERS = (WEBCRAWL, VANILLA, SCRAPY_REDIS)
LATENCY_CONTENDERS = (WEBCRAWL_TCP, SCRAPY_REDIS_TCP)

__all__ = ["CONTENDERS", "LATENCY_CONTENDERS", "SCRAPY_REDIS", "SCRAPY_REDIS_TCP", "VANILLA",
           "WEBCRAWL", "WEBCRAWL_TCP", "BenchRedis", "Crawl", "Redis", "cpu_seconds", "start",
           "settings_for", "wait_until"]


class Redis:
    """Where the Redis-backed contenders find the benchmark's server: its unix socket, and the
    latency proxy in front of its TCP port (``proxy_url``, None without the latency mode)."""

    def __init__(self, server: BenchRedis, proxy_url: str | None = None) -> None:
        self.server, self.proxy_url = server, proxy_url

    def url_for(self, contender: str) -> str:
        if contender in LATENCY_CONTENDERS:
            if self.proxy_url is None:
                raise ValueError(f"{contender} needs the latency mode")
            return self.proxy_url
        return self.server.url


def settings_for(contender: str, redis_url: str, delay: float, crawl_name: str,
                 persist: bool = False, **extra: object) -> dict[str, object]:
    """``-s`` settings of one crawl on top of the baseline project's; ``delay`` is each
    contender's own politeness knob (Scrapy's random jitter off: a minimum delay is asked for)."""
    base = contender.removesuffix(" tcp")
    if base == WEBCRAWL:
        own: dict[str, object] = {
            "SCHEDULER": "webcrawl.scheduler.ReadyQueueScheduler",
            "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_CRAWL_NAME": crawl_name,
            "WEBCRAWL_DOMAIN_DELAY_SECONDS": delay,
        }
    elif base == VANILLA:
        own = {"DOWNLOAD_DELAY": delay, "DOWNLOAD_DELAY_JITTER": 0} if delay else {}
    elif base == SCRAPY_REDIS:
        own = {
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "REDIS_URL": redis_url, "SCHEDULER_PERSIST": persist,
            **({"DOWNLOAD_DELAY": delay, "DOWNLOAD_DELAY_JITTER": 0} if delay else {}),
        }
    else:
        raise ValueError(f"unknown contender {contender!r}")
    return {**own, **extra}


def start(contender: str, settings: dict[str, object], seeds: str, cwd: Path, log_name: str,
          profile: Path | None = None) -> Child:
    """``scrapy crawl docs`` of the baseline project; webcrawl's column can import webcrawl."""
    env = project_env("vanilla")
    if contender.startswith(WEBCRAWL):
        env["PYTHONPATH"] += os.pathsep + str(REPO)
    return Child(scrapy_command("docs", settings, {"seeds": seeds}), env, cwd, log_name, profile)
