"""Politeness-bound crawls: many hosts at a per-host delay, by one and by two webcrawl processes.

A generated site of 500 hosts x 20 small pages (``bench/_polite_site.py``; hosts on
127.0.10.1-127.0.11.250), served by one asyncio process that logs every request's arrival
(``bench/_polite_server.py``), is crawled whole by ``scrapy crawl <site>`` (webcrawl's settings,
whole stack, a site file with ``min_delay_seconds`` = 1) from one process, then from two processes
sharing the crawl (same ``WEBCRAWL_CRAWL_NAME``, one redis-server started here, started together).
For reference, the crawl a Scrapy user would write: vanilla Scrapy's CrawlSpider (``bench/vanilla/``)
with every host's ``/`` as a seed, ``DOWNLOAD_DELAY`` = the delay with no jitter, and webcrawl's
``CONCURRENT_REQUESTS``. And the floor under any Scrapy crawler on this machine: vanilla Scrapy
fetching every page of the site from a list with no delay, no robots.txt and no parsing (the
``fetch`` spider, two connections per host as webcrawl's), whose rate over the bound says how
close to it Scrapy's own per-request work lets one process get; and that floor again with webcrawl's
HTTP client and garbage-collector setting (``bench/_polite_floor.py``), the parts of webcrawl that
make Scrapy's request cycle itself cheaper. The order alternates every round.

Reported per crawl, from the server's log (``bench/_polite_judge.py``): utilisation = achieved
request rate / (hosts / delay) over the busy period, gaps between two requests to one host under
the delay (must be 0) and the shortest gap; completeness; and CPU per page of the crawl processes
(``os.wait4``) and of the redis-server (/proc before and after).

``./run bench polite``. Environment: ``BENCH_POLITE_ROUNDS`` (2), ``BENCH_POLITE_HOSTS`` (500),
``BENCH_POLITE_PAGES`` (20), ``BENCH_POLITE_DELAY`` (1.0), ``BENCH_POLITE_WRITE`` (1; 0 leaves
docs/benchmarks.md alone), ``BENCH_POLITE_KEEP`` (0; 1 keeps the crawl logs),
``BENCH_POLITE_WEBCRAWL_SETTINGS`` (``NAME=value ...`` added to every webcrawl crawl, for A/B
runs), ``BENCH_POLITE_VANILLA`` (1; 0 skips the vanilla Scrapy references).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench._polite_judge import Verdict, judge
from bench._polite_server import ServerProcess
from bench._polite_site import PoliteSite, hosts_network
from bench._report import table, write_section
from bench._scheduler_process import (
    REPO,
    Child,
    Crawl,
    extra_settings,
    project_env,
    reproduce,
    scrapy_command,
)
from bench._scheduler_redis import BenchRedis, cpu_seconds

SITE = "polite-bench"
TARGET = 0.95


WEBCRAWL_CONCURRENCY = 128  # webcrawl.settings' CONCURRENT_REQUESTS, given to vanilla Scrapy too
WEBCRAWL_PER_HOST = 2  # webcrawl's WEBCRAWL_MAX_CONNECTIONS_PER_HOST, for the fetch-only floor
VANILLA = "vanilla Scrapy, 1"
FLOOR = "Scrapy fetch only (no delay), 1"
FLOOR_WC = "Scrapy fetch only, webcrawl's HTTP client (no delay), 1"
REFERENCES = (VANILLA, FLOOR, FLOOR_WC)


@dataclass
class Outcome:
    processes: int
    verdict: Verdict
    crawls: list[Crawl]
    redis_cpu: float
    server_cpu: float
    reference: str | None = None  # the reference crawl's label; None: webcrawl

    @property
    def label(self) -> str:
        return self.reference or f"webcrawl, {self.processes}"

    def problems(self) -> list[str]:
        """Exit statuses and the first ERROR line of each process that had any."""
        found = []
        for i, c in enumerate(self.crawls):
            first = next((line for line in c.log.splitlines() if " ERROR: " in line), "")
            if c.returncode != 0 or first:
                found.append(f"process {i + 1} of {self.processes}: exit {c.returncode}; "
                             f"{int(c.stat('log_count/ERROR'))} ERROR lines, first: {first[:300]}")
        return found

    @property
    def pages(self) -> int:
        return max(self.verdict.pages, 1)

    def row(self, round_: int) -> list[object]:
        v = self.verdict
        errors = sum(int(c.stat("log_count/ERROR")) for c in self.crawls)
        return [self.label, round_ + 1, f"{v.pages} of {v.reachable} ({v.requests} requests)",
                v.busy, v.rate, v.utilisation, f"{v.short_gaps} of {v.gaps}", v.shortest * 1000,
                1000 * sum(c.cpu for c in self.crawls) / self.pages,
                1000 * self.redis_cpu / self.pages if self.reference is None else "-",
                " / ".join(str(int(c.stat("downloader/response_count"))) for c in self.crawls),
                " / ".join(str(c.returncode) for c in self.crawls), errors]


def crawl(processes: int, site: PoliteSite, server: ServerProcess, redis: BenchRedis, folder: Path,
          delay: float, tag: str) -> Outcome:
    redis.flush()
    offset = len(server.log())
    redis0, server0 = redis.cpu_seconds(), cpu_seconds(server.pid)
    settings: dict[str, object] = {
        "WEBCRAWL_SITES_DIR": folder / "sites", "WEBCRAWL_REDIS_URL": redis.url,
        "WEBCRAWL_CRAWL_NAME": f"polite-{tag}", **extra_settings("polite"),
    }
    # A data folder each, as on two machines: a body store is written by one process only.
    children = [Child(scrapy_command(SITE, {**settings, "WEBCRAWL_DATA_DIR": folder / f"data-{tag}-{i}"}),
                      project_env("webcrawl"), folder / "cwd", f"{tag}-{i}.log")
                for i in range(processes)]
    crawls = [child.wait(1800) for child in children]
    log = server.log()[offset:]
    verdict = judge(log, len(site.hosts), delay, site.reachable())
    return Outcome(processes, verdict, crawls, redis.cpu_seconds() - redis0,
                   cpu_seconds(server.pid) - server0)


def crawl_reference(label: str, command: list[str], env: dict[str, str], site: PoliteSite,
                    server: ServerProcess, folder: Path, delay: float, log_name: str) -> Outcome:
    """One process of a reference crawler (no Redis), judged from the server's log."""
    offset = len(server.log())
    server0 = cpu_seconds(server.pid)
    crawled = Child(command, env, folder / "cwd", log_name).wait(1800)
    verdict = judge(server.log()[offset:], len(site.hosts), delay, site.reachable())
    return Outcome(1, verdict, [crawled], 0.0, cpu_seconds(server.pid) - server0, label)


def crawl_vanilla(site: PoliteSite, server: ServerProcess, folder: Path, delay: float,
                  tag: str) -> Outcome:
    """The baseline project's CrawlSpider over every host, Scrapy's own per-slot delay."""
    seeds = ",".join(site.url(h, 0) for h in range(len(site.hosts)))
    settings = {"DOWNLOAD_DELAY": delay, "DOWNLOAD_DELAY_JITTER": 0,
                "CONCURRENT_REQUESTS": WEBCRAWL_CONCURRENCY}
    command = scrapy_command("docs", settings, {"seeds": seeds, "prefix": "/"})
    return crawl_reference(VANILLA, command, project_env("vanilla"), site, server, folder, delay,
                           f"{tag}-vanilla.log")


def crawl_floor(site: PoliteSite, server: ServerProcess, folder: Path, delay: float,
                tag: str, *, client: bool = False) -> Outcome:
    """Vanilla Scrapy fetching every page from a list, as fast as it can (see the docstring);
    with ``client``, through webcrawl's HTTP client and collector setting."""
    urls = folder / "urls.txt"
    if not urls.exists():
        urls.write_text("".join(f"{site.url(h, k)}\n" for h in range(len(site.hosts))
                                for k in range(site.pages)))
    settings: dict[str, object] = {"DOWNLOAD_DELAY": 0, "ROBOTSTXT_OBEY": False,
                                   "CONCURRENT_REQUESTS": WEBCRAWL_CONCURRENCY,
                                   "CONCURRENT_REQUESTS_PER_DOMAIN": WEBCRAWL_PER_HOST}
    env = project_env("vanilla")
    module = "scrapy"
    if client:
        module = "bench._polite_floor"
        settings["DOWNLOAD_HANDLERS"] = '{"http": "webcrawl.net.handler.GuardedDownloadHandler"}'
        settings["WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"] = hosts_network(len(site.hosts))
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(REPO)])
    command = scrapy_command("fetch", settings, {"urls": str(urls)}, module=module)
    return crawl_reference(FLOOR_WC if client else FLOOR, command, env, site, server, folder,
                           delay, f"{tag}-floor{'-client' if client else ''}.log")


def main() -> None:
    rounds = int(os.environ.get("BENCH_POLITE_ROUNDS", "2"))
    hosts = int(os.environ.get("BENCH_POLITE_HOSTS", "500"))
    pages = int(os.environ.get("BENCH_POLITE_PAGES", "20"))
    delay = float(os.environ.get("BENCH_POLITE_DELAY", "1.0"))
    vanilla = os.environ.get("BENCH_POLITE_VANILLA", "1") == "1"
    folder = Path(tempfile.mkdtemp(prefix="bench-polite-"))
    for sub in ("sites", "cwd"):
        (folder / sub).mkdir()
    redis = BenchRedis(folder)
    outcomes: dict[str, list[Outcome]] = {"webcrawl, 1": [], "webcrawl, 2": [],
                                          **{label: [] for label in REFERENCES}}
    try:
        with ServerProcess(hosts, pages, folder / "server.log") as server:
            site = PoliteSite(hosts, pages)
            site.bind(server.port, render=False)
            (folder / "sites" / f"{SITE}.toml").write_text(site.site_file(SITE, delay))
            for r in range(rounds):
                # 0: vanilla Scrapy, -1: the fetch-only floor, -2: with webcrawl's client
                order: list[int] = [1, 2, 0, -1, -2] if r % 2 == 0 else [-2, -1, 0, 2, 1]
                if not vanilla:
                    order = [n for n in order if n > 0]
                for n in order:
                    if n < 0:
                        outcome = crawl_floor(site, server, folder, delay, f"r{r}", client=n == -2)
                    elif n == 0:
                        outcome = crawl_vanilla(site, server, folder, delay, f"r{r}")
                    else:
                        outcome = crawl(n, site, server, redis, folder, delay, f"r{r}-p{n}")
                    outcomes[outcome.label].append(outcome)
                    v = outcome.verdict
                    print(f"round {r + 1}/{rounds}, {outcome.label} process(es): utilisation {v.utilisation:.3f}, "
                          f"{v.short_gaps} gaps < {delay} s (shortest {v.shortest * 1000:.0f} ms), "
                          f"{v.pages} of {v.reachable} pages in {v.busy:.1f} s, exit "
                          f"{[c.returncode for c in outcome.crawls]}", flush=True)
    finally:
        redis.stop()
        if os.environ.get("BENCH_POLITE_KEEP", "0") == "1":
            print(f"crawl logs kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    body = report(outcomes, hosts, pages, delay, rounds)
    print(body)
    if os.environ.get("BENCH_POLITE_WRITE", "1") == "1":
        write_section("polite", "Politeness-bound crawls: many hosts at a per-host delay",
                      reproduce("polite"), body)


def report(outcomes: dict[str, list[Outcome]], hosts: int, pages: int, delay: float,
           rounds: int) -> str:
    rows = [o.row(i) for n in outcomes for i, o in enumerate(outcomes[n])]
    ours = {n for n in outcomes if n not in REFERENCES}
    summary = [[n, statistics.median(o.verdict.utilisation for o in os_),
                f">= {TARGET}" if n in ours else "-",
                sum(o.verdict.short_gaps for o in os_), "0" if n in ours else "-",
                statistics.median(1000 * sum(c.cpu for c in o.crawls) / o.pages for o in os_),
                statistics.median(1000 * o.redis_cpu / o.pages for o in os_) if n in ours else "-"]
               for n, os_ in outcomes.items() if os_]
    problems = [f"- {n} process(es), round {i + 1}: {p}" for n in outcomes
                for i, o in enumerate(outcomes[n]) for p in o.problems()]
    server_ms = statistics.median(1000 * o.server_cpu / max(o.verdict.requests, 1)
                                  for os_ in outcomes.values() for o in os_)
    return "\n\n".join([
        f"{hosts} hosts x {pages} pages (2-6 KB; {hosts_network(hosts)}), delay {delay:g} s per "
        f"host: the bound is {hosts / delay:g} requests/s. {rounds} round(s): webcrawl with 1 "
        "and 2 processes, and vanilla Scrapy for reference, the order alternating. The last "
        "references, the fetch-only floors, keep no delay: their utilisation is the rate Scrapy "
        "alone reached over the bound, and their gaps are not a fault.",
        table(["crawler, processes", "median utilisation", "target", "gaps < delay, all rounds",
               "target", "crawl CPU ms / page", "redis-server CPU ms / page"], summary),
        table(["crawler, processes", "round", "pages fetched", "busy s", "requests/s", "utilisation",
               f"gaps < {delay:g} s", "shortest gap ms", "crawl CPU ms / page",
               "redis-server CPU ms / page", "responses per process", "exit", "ERROR lines"], rows),
        *(["Problems:\n" + "\n".join(problems)] if problems else []),
        "Method. webcrawl: `python -m scrapy crawl polite-bench` with "
        "`SCRAPY_SETTINGS_MODULE=webcrawl.settings` (the whole default stack) on a site file with "
        f"every host as a seed, `min_delay_seconds = {delay:g}`, a budget no crawl reaches and the "
        "hosts' network allowed; `WEBCRAWL_REDIS_URL` on one redis-server started here (unix "
        "socket, append-only file with fsync every second, as the embedded one), flushed before "
        "each crawl; two processes share the crawl name, start together and have a data folder "
        "each (as on two machines: a body store takes one writer). Vanilla Scrapy, for "
        "reference: `scrapy crawl docs` of `bench/vanilla/` (Scrapy's defaults, robots.txt "
        f"obeyed), every host's `/` a seed, `DOWNLOAD_DELAY = {delay:g}`, `DOWNLOAD_DELAY_JITTER "
        f"= 0`, `CONCURRENT_REQUESTS = {WEBCRAWL_CONCURRENCY}` as webcrawl's; no Redis. The "
        "fetch-only floor: `scrapy crawl fetch -a urls=FILE` of the same project, every page of "
        "every host from a list (no robots.txt, no delay, "
        f"`CONCURRENT_REQUESTS_PER_DOMAIN = {WEBCRAWL_PER_HOST}` as webcrawl's connections per "
        "host), each response dropped unread: Scrapy's engine, downloader, middlewares and "
        "HTTP client alone; then with `-s DOWNLOAD_HANDLERS` set to webcrawl's HTTP client and "
        "webcrawl's garbage-collector threshold (`python -m bench._polite_floor crawl fetch`). The "
        "server (one asyncio process, `bench/_polite_server.py`) stamps each request with "
        "CLOCK_MONOTONIC when its bytes reach the loop; utilisation and gaps come from those "
        "stamps, robots.txt requests included (`bench/_polite_judge.py`). The server used "
        f"{server_ms:.3f} ms CPU per request. The machine has 2 cores shared with other "
        "sessions: figures are provisional.",
    ])


if __name__ == "__main__":
    main()
