"""Whole-crawl throughput: ``scrapy crawl <site>`` (webcrawl) against a vanilla Scrapy CrawlSpider.

Both crawl the whole of one generated site (webcrawl.demo.generated, pages of 40-150 KB, served
by ``python -m webcrawl.demo.serve`` on 127.0.0.x) at the same concurrency, alternating over
several rounds; figures are medians, ratios are webcrawl / vanilla.

- webcrawl: the generic SiteSpider on a site file (delay 0, one page type with a one-field record)
  with the project's full default stack: the Redis ready-queue scheduler on a redis-server started
  here, the robots.txt and SSRF middlewares and whatever pipelines settings.py enables (listed in
  the output).
- vanilla: ``scrapy runspider`` of a CrawlSpider with ``Rule(LinkExtractor(allow_domains=...),
  follow=True)`` and the same one-field record (``main h1``), Scrapy's in-memory scheduler,
  ``ROBOTSTXT_OBEY = False``, no project settings.

Each crawl is a child process reaped with ``os.wait4`` (its CPU time and peak RSS). Pages fetched
and completeness come from the server's own request log, against the site's link graph
(``GeneratedSite.reachable()``).

``./run bench sitecrawl``; ``BENCH_SITECRAWL_ROUNDS`` (3), ``BENCH_SITECRAWL_PAGES`` (900);
``BENCH_SITECRAWL_CONTENDERS=webcrawl`` runs one side only (no report),
``BENCH_SITECRAWL_PROFILE=1`` keeps a cProfile of each child, ``BENCH_SITECRAWL_WRITE=0`` leaves
docs/benchmarks.md alone.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from bench._report import table, write_section
from tests.crawls import REPO, stats_of
from webcrawl.demo.generated import site_file
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.state.embedded import redis_server_binary

HOSTS = 3
CONCURRENCY = {"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 16}
COMMON = {**CONCURRENCY, "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False,
          "REMOTE_CONTROL_ENABLED": False}

VANILLA = '''\
import os
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

DOMAINS = os.environ["BENCH_DOMAINS"].split(",")
# LinkExtractor compares allow_domains with the URL's netloc, port included.
NETLOCS = [f"{host}:{os.environ['BENCH_PORT']}" for host in DOMAINS]


class Vanilla(CrawlSpider):
    name = "vanilla"
    allowed_domains = DOMAINS
    start_urls = os.environ["BENCH_SEEDS"].split(",")
    rules = (Rule(LinkExtractor(allow_domains=NETLOCS), callback="parse_page", follow=True),)

    def parse_page(self, response):
        yield {"url": response.url, "title": response.css("main h1::text").get()}
'''


@dataclass
class Run:
    contender: str
    returncode: int
    wall: float
    span: float
    cpu: float
    rss_mb: float
    pages: int
    distinct: int
    reachable_found: int
    stats: dict[str, object]


def _start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], redis.Redis, str]:
    socket = folder / "redis.sock"
    process = subprocess.Popen(
        [redis_server_binary(), "--port", "0", "--unixsocket", str(socket), "--dir", str(folder),
         "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(unix_socket_path=str(socket), socket_timeout=30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if socket.exists() and client.ping():
                return process, client, f"unix://{socket}"
        except redis.RedisError:
            pass
        time.sleep(0.02)
    raise RuntimeError("the benchmark's redis-server did not start")


def _command(contender: str, folder: Path, redis_url: str, round_: int) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if contender == "webcrawl":
        env["SCRAPY_SETTINGS_MODULE"] = "webcrawl.settings"
        settings: dict[str, object] = {
            **COMMON, "WEBCRAWL_SITES_DIR": folder / "sites", "WEBCRAWL_REDIS_URL": redis_url,
            "WEBCRAWL_CRAWL_NAME": f"bench{round_}", "WEBCRAWL_DATA_DIR": folder / f"data{round_}",
            # The site file allows loopback; passing it as a setting too installs the allowance in
            # the DNS resolver at start (the SSRF middleware adds the site's only later).
            "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
        }
        command = [sys.executable, "-m", "scrapy", "crawl", "benchsite"]
    else:
        env.pop("SCRAPY_SETTINGS_MODULE", None)
        settings = {**COMMON, "ROBOTSTXT_OBEY": False}
        command = [sys.executable, "-m", "scrapy", "runspider", str(folder / "vanilla.py")]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    if os.environ.get("BENCH_SITECRAWL_PROFILE"):
        command[1:1] = ["-m", "cProfile", "-o", str(folder / f"{contender}{round_}.prof")]
    return command, env


def crawl(contender: str, server: ServerProcess, reachable: set[str], folder: Path,
          redis_url: str, round_: int) -> Run:
    """One whole crawl in a child process, measured."""
    command, env = _command(contender, folder, redis_url, round_)
    before = len(server.read_log())
    log_path = folder / f"{contender}{round_}.log"
    started = time.monotonic()
    with open(log_path, "wb") as out:
        process = subprocess.Popen(command, cwd=folder / "cwd", env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    entries = [e for e in server.read_log()[before:] if e.path != "/robots.txt"]
    fetched = {f"http://{e.host}:{server.port}{e.path}" for e in entries}
    span = (entries[-1].mono - entries[0].mono) if len(entries) > 1 else 0.0
    return Run(contender, os.waitstatus_to_exitcode(status), wall, span,
               usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, len(entries),
               len(fetched), len(fetched & reachable), stats_of(log_path.read_text(errors="replace")))


def _median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def _stack(log: str) -> str:
    """The enabled downloader middlewares and item pipelines webcrawl printed at start."""
    parts = []
    for what in ("downloader middlewares", "spider middlewares", "item pipelines"):
        block = log.split(f"Enabled {what}:\n", 1)[1].split("]", 1)[0] if f"Enabled {what}" in log else "["
        names = [n.strip(" '\n,[") for n in block.split(",") if n.strip(" '\n,[")]
        mine = [n.rsplit(".", 1)[1] for n in names if n.startswith("webcrawl.")]
        parts.append(f"{what}: {', '.join(mine) or 'none of webcrawl'} ({len(names)} in all)")
    return "; ".join(parts)


def _figures(rs: list[Run]) -> dict[str, float]:
    return {
        "pages/s wall": statistics.median(r.pages / r.wall for r in rs),
        "pages/s span": statistics.median(r.pages / r.span for r in rs if r.span),
        "cpu ms/page": statistics.median(1000 * r.cpu / r.pages for r in rs),
        "rss": _median(rs, "rss_mb"),
    }


def report(runs: list[Run], pages: int, reachable: int, folder: Path, mean_kb: float) -> str:
    by = {c: [r for r in runs if r.contender == c] for c in ("webcrawl", "vanilla")}
    fig = {name: _figures(rs) for name, rs in by.items()}
    rows: list[list[object]] = [
        [name, len(rs), _median(rs, "pages"), f"{_median(rs, 'reachable_found') / reachable:.1%}",
         _median(rs, "wall"), _median(rs, "span"), fig[name]["pages/s wall"],
         fig[name]["pages/s span"], fig[name]["cpu ms/page"], fig[name]["rss"]]
        for name, rs in by.items()
    ]
    # Each round's own ratio too: runs of one round are neighbours in time, so they share the noise.
    paired = sorted((w.pages / w.wall) / (v.pages / v.wall)
                    for w, v in zip(by["webcrawl"], by["vanilla"], strict=True))
    web, van = fig["webcrawl"], fig["vanilla"]
    ratios: list[list[object]] = [
        ["pages/s (whole process)", web["pages/s wall"] / van["pages/s wall"],
         f"{paired[0]:.2f} to {paired[-1]:.2f}"],
        ["pages/s (crawl span)", web["pages/s span"] / van["pages/s span"], ""],
        ["pages per CPU second", van["cpu ms/page"] / web["cpu ms/page"], ""],
        ["peak RSS", web["rss"] / van["rss"], ""],
    ]
    stack = _stack((folder / "webcrawl0.log").read_text(errors="replace"))
    return "\n\n".join([
        f"A generated site of {pages} pages plus {HOSTS} seeds ({reachable} reachable) on {HOSTS} "
        f"hosts, mean page {mean_kb:.0f} KB (40-150 KB, log-uniform); concurrency "
        f"{CONCURRENCY['CONCURRENT_REQUESTS']} ({CONCURRENCY['CONCURRENT_REQUESTS_PER_DOMAIN']} "
        f"per host), webcrawl delay 0; medians of {len(by['webcrawl'])} alternating runs each. "
        "Wall and CPU are whole child processes (start-up included); span is first to last "
        "request in the server's log.",
        table(["contender", "runs", "pages fetched", "completeness", "wall s", "span s",
               "pages/s (wall)", "pages/s (span)", "CPU s / 1000 pages", "peak RSS MB"], rows),
        table(["webcrawl / vanilla", "ratio of medians", "per-round ratios"], ratios),
        f"webcrawl ran with {stack}; the Redis scheduler on a local redis-server (unix socket). "
        "vanilla: CrawlSpider + LinkExtractor, in-memory scheduler, ROBOTSTXT_OBEY False.",
    ])


def main() -> None:
    rounds = int(os.environ.get("BENCH_SITECRAWL_ROUNDS", "3"))
    pages = int(os.environ.get("BENCH_SITECRAWL_PAGES", "900"))
    contenders = os.environ.get("BENCH_SITECRAWL_CONTENDERS", "webcrawl,vanilla").split(",")
    folder = Path(tempfile.mkdtemp(prefix="bench-sitecrawl-"))
    (folder / "cwd").mkdir()
    (folder / "sites").mkdir()
    (folder / "vanilla.py").write_text(VANILLA)
    redis_process, client, redis_url = _start_redis(folder)
    server = start_server_process("generated", HOSTS, folder / "server.log", pages=pages,
                                  min_kb=40, max_kb=150, links=150, timeout=120)
    try:
        seeds = [server.base_url(h) + "/" for h in range(HOSTS)]
        (folder / "sites" / "benchsite.toml").write_text(
            site_file("benchsite", seeds, server.hosts))
        os.environ["BENCH_SEEDS"], os.environ["BENCH_DOMAINS"] = ",".join(seeds), ",".join(server.hosts)
        os.environ["BENCH_PORT"] = str(server.port)
        reachable = server.site.reachable()
        runs: list[Run] = []
        for round_ in range(rounds):
            order = ("webcrawl", "vanilla") if round_ % 2 == 0 else ("vanilla", "webcrawl")
            for contender in (c for c in order if c in contenders):
                client.flushall()
                run = crawl(contender, server, reachable, folder, redis_url, round_)
                print(f"{contender} round {round_}: {run.pages} pages in {run.wall:.1f} s "
                      f"(span {run.span:.1f} s), {run.cpu:.1f} CPU s, {run.rss_mb:.0f} MB, "
                      f"rc {run.returncode}", flush=True)
                runs.append(run)
        if len(contenders) < 2:
            return
        sizes = [len(server.site.body(u)) for u in list(reachable)[:200]]
        body = report(runs, pages, len(reachable), folder, statistics.mean(sizes) / 1024)
        print(body)
        if os.environ.get("BENCH_SITECRAWL_WRITE", "1") == "1":
            write_section("sitecrawl", "Whole-crawl throughput: SiteSpider against CrawlSpider",
                          "./run bench sitecrawl", body)
    finally:
        server.stop()
        redis_process.terminate()
        redis_process.wait(10)


if __name__ == "__main__":
    main()
