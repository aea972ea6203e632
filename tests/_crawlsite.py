"""What the multi-process crawl-state tests share: a generated site served on several loopback
hosts by its own process, real ``scrapy crawl follow`` processes sharing one crawl, and the
checks read from the HTTP server's own request log (every request, robots.txt included) and from
the crawl processes' logs.

Used by tests/test_crawl_cluster.py, test_crawl_recovery.py and test_crawl_clock_skew.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from tests.crawls import REPO, crawl_command, pages, start_crawl, stats_of, wait_for
from webcrawl.demo.server import LogEntry
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.state.embedded import redis_server_binary
from webcrawl.state.layout import CrawlLayout

CRAWL = "shared"
# The test site lives on loopback, which the SSRF guard refuses unless allowed.
LOOPBACK = {"WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8"}
# What a crawl log must never show: a script run on the wrong node, a failing script, a crash.
BAD_LINES = re.compile(r"CROSSSLOT|non local key|MovedError|ResponseError|Lua|Traceback"
                       r"|Unhandled error|\] ERROR: ")


def serve_site(folder: Path, hosts: int, pages_count: int) -> ServerProcess:
    """A generated site of ``pages_count`` small pages over ``hosts`` hosts (127.0.0.2, ...),
    in its own process, logging every request with its arrival time to ``folder/server.log``."""
    return start_server_process("generated", hosts, folder / "server.log", pages=pages_count,
                                min_kb=1, max_kb=3, links=20)


def seeds(site: ServerProcess) -> str:
    return ",".join(site.base_url(h) + "/" for h in site.hosts)


def all_pages(site: ServerProcess) -> set[str]:
    """Every page (``host/path``) reachable from the seeds, from the site's own link graph."""
    return {_page(u) for u in site.site.reachable()}


def _page(url: str) -> str:
    url = url.split("#", 1)[0]  # the server never sees a fragment
    host = url.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
    return host + "/" + url.split("/", 3)[3]


def fetched(site: ServerProcess) -> Counter[str]:
    """How many times the server answered each page (robots.txt left out)."""
    return Counter(f"{e.host}/{e.path.lstrip('/')}" for e in pages(site.read_log()))


def settings(redis_url: str, delay: float, **extra: object) -> dict[str, object]:
    """Settings of a ``follow`` crawl process joining crawl :data:`CRAWL`."""
    return {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DOMAIN_DELAY_SECONDS": delay,
            "WEBCRAWL_CRAWL_NAME": CRAWL, "LOG_LEVEL": "INFO", **LOOPBACK, **extra}


@dataclass(frozen=True)
class Gap:
    """Two consecutive requests to one host, ``seconds`` apart at the server."""

    host: str
    seconds: float
    before: str
    after: str


def short_gaps(log: Iterable[LogEntry], delay: float) -> list[Gap]:
    """Every pair of consecutive requests to a host (robots.txt included) closer than ``delay``
    at their arrival at the server."""
    by_host: dict[str, list[LogEntry]] = defaultdict(list)
    for entry in log:
        by_host[entry.host].append(entry)
    short = []
    for host, entries in by_host.items():
        entries.sort(key=lambda e: e.mono)
        for a, b in zip(entries, entries[1:]):
            if b.mono - a.mono < delay:
                short.append(Gap(host, round(b.mono - a.mono, 4), a.path, b.path))
    return short


def bad_lines(log_text: str) -> list[str]:
    """Lines of a crawl log that name a Redis script failure, a cluster routing error or a crash."""
    return [line for line in log_text.splitlines() if BAD_LINES.search(line)]


# Runs Scrapy's command line with the wall clock shifted by argv[1] seconds.
_SKEWED_SCRAPY = """\
import sys, time
shift = float(sys.argv.pop(1))
wall, wall_ns = time.time, time.time_ns
time.time = lambda: wall() + shift
time.time_ns = lambda: wall_ns() + int(shift * 1e9)
sys.argv[0] = "scrapy"
from scrapy.cmdline import execute
execute()
"""


class Crawls:
    """The crawl processes of one test, each logging to ``folder/<name>.log``. :meth:`stop_all`
    kills (SIGKILL) whatever is still running: no process outlives its test."""

    def __init__(self, folder: Path, site: ServerProcess) -> None:
        self.folder, self.site = folder, site
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, config: dict[str, object], wall_skew: float = 0.0
              ) -> subprocess.Popen[bytes]:
        """Start ``scrapy crawl follow`` over the site's seeds. ``wall_skew`` shifts the
        process's wall clock (``time.time``, ``time.time_ns``) by that many seconds from its
        very first instruction, as on a machine whose clock is off; monotonic time is left as
        it is (a wrong wall clock does not change how fast time passes)."""
        args = {"seeds": seeds(self.site)}
        if not wall_skew:
            process = start_crawl("follow", config, self.folder, args, f"{name}.log")
        else:
            command = crawl_command("follow", config, args)
            # ``python -c PRELUDE crawl ...`` instead of ``python -m scrapy crawl ...``
            command[1:3] = ["-c", _SKEWED_SCRAPY, repr(float(wall_skew))]
            env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
                       PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
            with open(self.folder / f"{name}.log", "wb") as log:  # the child keeps its own
                process = subprocess.Popen(command, cwd=self.folder, env=env, stdout=log,
                                           stderr=subprocess.STDOUT)
        self.processes[name] = process
        return process

    def text(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def stats(self, name: str) -> dict[str, object]:
        return stats_of(self.text(name))

    def finish(self, name: str, timeout: float) -> int:
        """Wait for the process to exit by itself; on a timeout, kill it and fail, showing the
        end of its log."""
        process = self.processes[name]
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"crawl {name} still running after {timeout} s:\n"
                                 f"{self.text(name)[-3000:]}") from None

    def kill(self, name: str) -> None:
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        process.wait()

    def wait_pages(self, count: int, timeout: float) -> None:
        wait_for(lambda: len(pages(self.site.read_log())) >= count, timeout,
                 f"{count} pages to be fetched")

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def tail(self, name: str, chars: int = 3000) -> str:
        return f"--- {name}.log:\n{self.text(name)[-chars:]}"


def leased_pages(client: Any, shards: int) -> tuple[int, set[str]]:
    """``(leases, pages)`` held in crawl :data:`CRAWL` right now, over its ``shards`` shards: a
    lease's entry is ``owner, kind, host, member`` and a queued request's member ends with
    ``|<request JSON>`` (what precedes it, its seen-filter offsets, holds no ``{``)."""
    layout = CrawlLayout(CRAWL, shards)
    count, urls = 0, set()
    for shard in layout.all_shards:
        for entry in client.hvals(shard.leased):
            _, kind, _, member = entry.decode().split("\t", 3)
            count += 1
            if kind == "n":
                urls.add(_page(json.loads(member[member.index("|{") + 1:])["url"]))
    return count, urls


def shards_of(client: Any) -> int:
    """The shard count crawl :data:`CRAWL` was opened with."""
    return int(client.hget(CrawlLayout(CRAWL).meta, "shards"))


class OwnRedis:
    """A redis-server of one test's own, on a unix socket in ``folder``, persisting every write
    to its append-only file at once: it can be frozen (SIGSTOP), killed and started again on
    the same socket with what it held."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = folder / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=10)

    def start(self) -> OwnRedis:
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", "0", "--unixsocket", str(self.socket),
             "--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "always",
             "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        try:
            wait_for(up, 20, "the test's redis-server to start")
        finally:
            client.close()
        return self

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL (after a SIGCONT, were it frozen); idempotent."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGCONT)
                self.process.kill()
            self.process.wait()
            self.process = None
