"""One crawl of the cluster benchmark: two ``scrapy crawl follow`` processes sharing a crawl of a
generated site, on one Redis deployment, and what the servers and the crawl did.

Throughput is the server's own: pages answered over the time from its first page request to its
last (process start-up left out, the same for every deployment). Redis figures are read from
every node that owns slots: ``INFO commandstats`` (commands run inside scripts included) and
``INFO errorstats`` (every error answered, by its first word: a script refused on a cluster would
show as ``CROSSSLOT``, or as a failed ``evalsha`` for a non-local key), both reset before the crawl, and
each server's CPU from /proc. The crawl logs are searched for the same failures
(``tests._crawlsite.bad_lines``). A crawl that misses a page, or fetches one twice, is an error.
"""

from __future__ import annotations

import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._scheduler_redis import cpu_seconds
from tests._crawlsite import Crawls, all_pages, bad_lines, fetched, settings
from tests.crawls import pages
from webcrawl.demo.serve import start_server_process

PROCESSES = ("a", "b")
TIMEOUT_SECONDS = 300.0


@dataclass
class Nodes:
    """The deployment's slot-owning nodes: a redis client and a server pid each."""

    clients: list[Any]
    pids: list[int]

    def reset(self) -> None:
        for client in self.clients:
            client.config_resetstat()

    def commands(self) -> list[dict[str, int]]:
        """Calls per command on each node since the reset."""
        return [{name.removeprefix("cmdstat_"): int(v["calls"])
                 for name, v in client.info("commandstats").items()} for client in self.clients]

    def errors(self) -> Counter[str]:
        """Errors answered since the reset, over every node: by kind (``INFO errorstats``, e.g.
        ``CROSSSLOT``) and by command (``failed <command>``: failed and rejected calls). redis-py
        greets each new connection with ``CLIENT SETINFO``, which Redis 6.2 does not know: those
        answers (``failed client``) are the client's, not the crawl's."""
        total: Counter[str] = Counter()
        for client in self.clients:
            for name, value in client.info("errorstats").items():
                total[name.removeprefix("errorstat_")] += int(value["count"])
            for name, value in client.info("commandstats").items():
                bad = int(value.get("failed_calls", 0)) + int(value.get("rejected_calls", 0))
                if bad:
                    total["failed " + name.removeprefix("cmdstat_")] += bad
        return total

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids)


@dataclass
class Run:
    """What one crawl measured."""

    pages: int
    seconds: float  #: first to last page request at the server
    wall: float  #: both processes, start to exit
    crawl_cpu: float
    redis_cpu: float
    commands: list[dict[str, int]]  #: per node
    errors: Counter[str]
    bad_lines: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.pages / self.seconds

    @property
    def cpu_seconds(self) -> float:
        """CPU of the crawl processes and of every Redis server, together."""
        return self.crawl_cpu + self.redis_cpu

    def calls_per_page(self, name: str | None = None) -> list[float]:
        """Per node: commands (all, or ``name`` only) per page fetched."""
        return [(sum(c.values()) if name is None else c.get(name, 0)) / self.pages
                for c in self.commands]


def crawl(folder: Path, redis_url: str, nodes: Nodes, hosts: int, per_host: int,
          extra: dict[str, object]) -> Run:
    folder.mkdir(parents=True)
    site = start_server_process("generated", hosts, folder / "server.log", pages=hosts * per_host,
                                min_kb=2, max_kb=6, links=20)
    crawls = Crawls(folder, site)
    try:
        config = settings(redis_url, 0.0, CONCURRENT_REQUESTS=16, **extra)
        nodes.reset()
        cpu0, children0 = nodes.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        for name in PROCESSES:
            crawls.start(name, config)
        for name in PROCESSES:
            code = crawls.finish(name, TIMEOUT_SECONDS)
            if code != 0:
                raise RuntimeError(f"crawl {name} exited {code}:\n{crawls.tail(name)}")
        wall = time.monotonic() - start
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        redis_cpu = nodes.cpu() - cpu0
        counts = fetched(site)
        missing = all_pages(site) - set(counts)
        twice = [p for p, n in counts.items() if n > 1]
        if missing or twice:
            raise RuntimeError(f"{len(missing)} pages never fetched, {len(twice)} fetched twice: "
                               f"{sorted(missing)[:5]} {twice[:5]}")
        times = [e.mono for e in pages(site.read_log())]
        return Run(pages=len(times), seconds=max(times) - min(times), wall=wall,
                   crawl_cpu=(children.ru_utime + children.ru_stime)
                   - (children0.ru_utime + children0.ru_stime),
                   redis_cpu=redis_cpu, commands=nodes.commands(), errors=nodes.errors(),
                   bad_lines=[line for name in PROCESSES for line in bad_lines(crawls.text(name))])
    finally:
        crawls.stop_all()
        site.stop()
