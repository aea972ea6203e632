"""Running ``scrapy crawl follow`` under each scheduler, in child processes, and measuring them.

The three contenders share every setting but the scheduler (:func:`settings_for`). Each crawl is
a child process reaped with ``os.wait4``, which gives that child's own CPU time and peak RSS (the
whole-process figures of ``/usr/bin/time -v``). One redis-server, started here on a unix socket,
serves webcrawl and scrapy-redis alike; its CPU time is read from ``/proc``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.crawls import REPO, crawl_command, stats_of
from webcrawl.state.embedded import redis_server_binary

WEBCRAWL, VANILLA, SCRAPY_REDIS = "webcrawl", "vanilla Scrapy", "scrapy-redis"
CONTENDERS = (WEBCRAWL, VANILLA, SCRAPY_REDIS)

# Identical for every contender. webcrawl's own SSRF guard and robots.txt middleware are off (they
# would refuse 127.0.0.x, and robots.txt costs a Redis round trip per host): only the scheduler
# differs, on Scrapy's default middleware stack.
COMMON: dict[str, object] = {
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    "DOWNLOADER_MIDDLEWARES": "{}",
    "TWISTED_DNS_RESOLVER": "scrapy.resolver.CachingThreadedResolver",
    "LOG_LEVEL": "INFO",
}


def settings_for(contender: str, redis_url: str, delay: float, crawl_name: str,
                 persist: bool = False, **extra: object) -> dict[str, object]:
    """Settings of one crawl; ``delay`` is each contender's own politeness knob."""
    if contender == WEBCRAWL:
        own: dict[str, object] = {
            "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_CRAWL_NAME": crawl_name,
            "WEBCRAWL_DOMAIN_DELAY_SECONDS": delay, "DOWNLOAD_DELAY": 0,
        }
    elif contender == VANILLA:
        own = {"SCHEDULER": "scrapy.core.scheduler.Scheduler", "DOWNLOAD_DELAY": delay}
    elif contender == SCRAPY_REDIS:
        # scrapy-redis 0.9.1 runs unchanged on Scrapy 2.19 (deprecation warnings only: it passes
        # spider= to the stats collector). SCHEDULER_PERSIST=True where processes share a crawl:
        # with False the first process to finish deletes the queue and fingerprints of the other.
        own = {
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "REDIS_URL": redis_url, "SCHEDULER_PERSIST": persist, "DOWNLOAD_DELAY": delay,
        }
    else:
        raise ValueError(f"unknown contender {contender!r}")
    return {**COMMON, **own, **extra}


@dataclass
class Crawl:
    """A finished (or killed) crawl process and what it cost."""

    returncode: int
    wall: float
    cpu: float
    max_rss_mb: float
    stats: dict[str, object] = field(default_factory=dict)


class Child:
    """One ``scrapy crawl follow`` process."""

    def __init__(self, settings: dict[str, object], seeds: str, cwd: Path, log_name: str,
                 profile: Path | None = None) -> None:
        env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
                   PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        command = crawl_command("follow", settings, {"seeds": seeds})
        if profile is not None:
            command[1:1] = ["-m", "cProfile", "-o", str(profile)]
        self.log = cwd / log_name
        self.started = time.monotonic()
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                            stderr=subprocess.STDOUT)

    def running(self) -> bool:
        # WNOWAIT: look without reaping, so that wait() still gets the child's resource usage.
        return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None

    def wait(self, timeout: float = 300.0, kill: bool = False) -> Crawl:
        """Reap the child (SIGKILL it first with ``kill``, or past ``timeout``)."""
        if kill:
            self.process.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.process.send_signal(signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.02)
        wall = time.monotonic() - self.started
        self.process.returncode = os.waitstatus_to_exitcode(status)
        return Crawl(self.process.returncode, wall, usage.ru_utime + usage.ru_stime,
                     usage.ru_maxrss / 1024, stats_of(self.log.read_text(errors="replace")))


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BenchRedis:
    """The benchmark's own redis-server: unix socket only, AOF on with fsync every second (as
    webcrawl's embedded server), no RDB snapshots, noeviction."""

    def __init__(self, folder: Path) -> None:
        self.socket = folder / "redis.sock"
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", "0", "--unixsocket", str(self.socket),
             "--dir", str(folder), "--appendonly", "yes", "--appendfsync", "everysec",
             "--save", "", "--maxmemory-policy", "noeviction"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"unix://{self.socket}"
        self.client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=60)
        if not wait_until(self._up, 20):
            raise RuntimeError("the benchmark's redis-server did not start")

    def _up(self) -> bool:
        try:
            return self.socket.exists() and bool(self.client.ping())
        except redis.RedisError:
            return False

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def commands(self) -> dict[str, int]:
        """Calls per command so far (commands run inside Lua scripts included)."""
        stats = self.client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    def flush(self) -> None:
        self.client.flushall()

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(10)
