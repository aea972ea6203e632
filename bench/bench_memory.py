"""Crawl process memory over a long crawl: RSS against pages fetched and hosts reached.

A generated site of 1,000 hosts x 100 pages (100,000 pages, 2-6 KB each; bench/_polite_site.py,
served by one asyncio process, bench/_polite_server.py) is crawled whole by ``scrapy crawl`` of a
site file, every page once: webcrawl with its full default stack on a redis-server of its own,
and, for comparison, the crawler a user would otherwise pick, a vanilla Scrapy ``CrawlSpider``
(in-memory scheduler and duplicate filter) at the same concurrency and per-host delay. Ten hosts
are seeds; each page links the next host's ``/``, so hosts are reached all along the crawl.

Every ``--sample-seconds`` the harness reads the crawl process's RSS (``/proc/<pid>/status``) and
the server's counts of pages fetched and hosts reached. A crawler whose in-process state is
bounded levels off: its RSS stops growing with pages and hosts. The report gives RSS at each
tenth of the pages, and the growth over the second half of the crawl (MB per 10,000 pages).

webcrawl's caches of URLs already seen (the spider's, the scheduler's, the duplicate filter's)
are bounded by ``WEBCRAWL_SEEN_CACHE_SIZE`` (default 500,000 URLs): more than this site has, so
they would still be filling at its end. The benchmark sets it to ``--seen-cache`` (default
20,000) so that every bound is reached within the crawl and the level RSS settles at shows.

With ``--processes 2`` two webcrawl processes share the crawl and each one's RSS is reported:
the allocator (one process at a time, the holder of the allocation lock) keeps a table of every
known page, so that process grows with the pages the crawl knows and the others do not.

``./run bench memory [--hosts N] [--pages N] [--delay S] [--seen-cache N] [--contenders
webcrawl,vanilla] [--processes N] [--no-write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench._polite_server import ServerProcess
from bench._polite_site import PoliteSite
from bench._report import table, write_section
from tests.crawls import REPO, stats_of

CONCURRENCY = {"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 2}
SEEDS = 10
VANILLA = '''\
import json, os
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

CONFIG = json.loads(os.environ["BENCH_MEMORY"])


class Vanilla(CrawlSpider):
    name = "vanilla"
    allowed_domains = CONFIG["hosts"]
    start_urls = CONFIG["seeds"]
    rules = (Rule(LinkExtractor(allow_domains=CONFIG["netlocs"]), callback="parse_page",
                  follow=True),)

    def parse_page(self, response):
        yield {"url": response.url, "title": response.css("h1::text").get()}
'''


@dataclass
class Sample:
    seconds: float
    pages: int
    hosts: int
    rss_mb: float


@dataclass
class Run:
    contender: str
    samples: list[Sample] = field(default_factory=list)
    returncode: int = 0
    wall: float = 0.0
    peak_mb: float = 0.0
    stats: dict[str, object] = field(default_factory=dict)


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def wait_for_quiet(limit: float = 1.5, timeout: float = 900.0) -> float:
    """Wait (with a deadline) for the 1-minute load to fall below ``limit``; returns it."""
    deadline = time.monotonic() + timeout
    while os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        time.sleep(10)
    return os.getloadavg()[0]


def site_file(site: PoliteSite, delay: float) -> str:
    seeds = [site.url(h * len(site.hosts) // SEEDS, 0) for h in range(SEEDS)]
    text = site.site_file("memsite", delay)
    start = text.index("seeds = ")
    end = text.index("\n", start)
    text = text[:start] + f"seeds = {json.dumps(seeds)}" + text[end:]
    # A budget no crawl of this site reaches: the hosts' delay, not the spend rate, sets the pace.
    text = text.replace("amount_per_cycle = 10000000", "amount_per_cycle = 1000000000000")
    # Hosts are chained (each links the next one's /) from SEEDS seeds: the last host of a chain
    # is len(hosts) / SEEDS hops away, and its deepest pages a few more. Every page is in reach.
    assert "max_depth = 100\n" in text
    return text.replace("max_depth = 100\n", "max_depth = 1000\n")


def command(contender: str, folder: Path, site: PoliteSite, args: argparse.Namespace
            ) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    settings: dict[str, object] = {**CONCURRENCY, "LOG_LEVEL": "INFO", "LOGSTATS_INTERVAL": 30,
                                   "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False}
    if contender == "webcrawl":
        env["SCRAPY_SETTINGS_MODULE"] = "webcrawl.settings"
        env.pop("WEBCRAWL_REDIS_URL", None)  # the embedded redis-server: a process of its own
        settings.update({"WEBCRAWL_SITES_DIR": folder / "sites",
                         "WEBCRAWL_DATA_DIR": folder / "data",
                         "WEBCRAWL_SEEN_CACHE_SIZE": args.seen_cache})
        cmd = [sys.executable, "-m", "scrapy", "crawl", "memsite"]
    else:
        env.pop("SCRAPY_SETTINGS_MODULE", None)
        seeds = [site.url(h * len(site.hosts) // SEEDS, 0) for h in range(SEEDS)]
        env["BENCH_MEMORY"] = json.dumps({"hosts": site.hosts, "seeds": seeds, "netlocs": [
            f"{h}:{site.port}" for h in site.hosts]})
        settings.update({"ROBOTSTXT_OBEY": True, "DOWNLOAD_DELAY": args.delay,
                         "RANDOMIZE_DOWNLOAD_DELAY": False, "DEPTH_LIMIT": 0})
        cmd = [sys.executable, "-m", "scrapy", "runspider", str(folder / "vanilla.py")]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd, env


def crawl(contender: str, server: ServerProcess, site: PoliteSite, folder: Path,
          args: argparse.Namespace) -> list[Run]:
    """One crawl of the site: webcrawl by ``--processes`` processes sharing it (one Run each, in
    the order they started), vanilla by one."""
    cmd, env = command(contender, folder, site, args)
    count = args.processes if contender == "webcrawl" else 1
    before = len(server.log())
    runs = [Run(contender if count == 1 else f"{contender} {i + 1}/{count}") for i in range(count)]
    logs = [folder / f"{contender}-{i + 1}.log" for i in range(count)]
    started = time.monotonic()
    processes = []
    for log_path in logs:
        with open(log_path, "wb") as out:
            processes.append(subprocess.Popen(cmd, cwd=folder, env=env, stdout=out,
                                              stderr=subprocess.STDOUT))
    running = dict(enumerate(processes))
    next_sample = started
    while running:
        for i, process in list(running.items()):
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)  # reaped here, with its rusage
            if pid:
                process.returncode = runs[i].returncode = os.waitstatus_to_exitcode(status)
                runs[i].wall = time.monotonic() - started
                runs[i].peak_mb = usage.ru_maxrss / 1024
                del running[i]
        if running and time.monotonic() >= next_sample:
            pages = [e for e in server.log()[before:] if e.path != "/robots.txt"]
            hosts = len({e.host for e in pages})
            for i, process in running.items():
                rss = rss_mb(process.pid)
                if rss is not None:
                    runs[i].samples.append(Sample(time.monotonic() - started, len(pages), hosts,
                                                  rss))
            next_sample += args.sample_seconds
        time.sleep(0.5)
    pages = [e for e in server.log()[before:] if e.path != "/robots.txt"]
    for run, log_path in zip(runs, logs):
        run.samples.append(Sample(run.wall, len(pages), len({e.host for e in pages}),
                                  run.samples[-1].rss_mb if run.samples else 0.0))
        run.stats = stats_of(log_path.read_text(errors="replace"))
        if count > 1 and int(run.stats.get("webcrawl/allocator/runs", 0) or 0):
            run.contender += " (allocator)"
    return runs


def at_share(run: Run, total: int, share: float) -> Sample:
    """The first sample at or past ``share`` of ``total`` pages (the last one otherwise)."""
    for sample in run.samples:
        if sample.pages >= share * total:
            return sample
    return run.samples[-1]


def growth(run: Run, total: int) -> float:
    """RSS growth (MB) per 10,000 pages between half and nine tenths of the pages."""
    half, late = at_share(run, total, 0.5), at_share(run, total, 0.9)
    pages = late.pages - half.pages
    return 10_000 * (late.rss_mb - half.rss_mb) / pages if pages else 0.0


def report(runs: list[Run], site: PoliteSite, args: argparse.Namespace, load: float) -> str:
    total = len(site.hosts) * site.pages
    shares = [i / 10 for i in range(1, 11)]
    rows: list[list[object]] = []
    for share in shares:
        row: list[object] = [f"{share:.0%}"]
        for run in runs:
            s = at_share(run, total, share)
            row += [f"{s.pages:,}", f"{s.hosts:,}", f"{s.seconds:.0f}", f"{s.rss_mb:.0f}"]
        rows.append(row)
    headers = ["pages"] + [f"{r.contender} {h}" for r in runs
                           for h in ("fetched", "hosts", "s", "RSS MB")]
    summary = [[r.contender, f"{r.samples[-1].pages:,}", f"{r.samples[-1].hosts:,}",
                f"{r.wall:.0f}", f"{at_share(r, total, 0.5).rss_mb:.0f}",
                f"{at_share(r, total, 0.9).rss_mb:.0f}", f"{r.peak_mb:.0f}",
                f"{growth(r, total):+.1f}"] for r in runs]
    return "\n\n".join([
        f"{len(site.hosts):,} hosts x {site.pages} pages ({total:,} pages, 2-6 KB), {SEEDS} seed "
        f"hosts, each page fetched at most once; concurrency {CONCURRENCY['CONCURRENT_REQUESTS']} "
        f"({CONCURRENCY['CONCURRENT_REQUESTS_PER_DOMAIN']} per host), {args.delay} s per host. "
        f"webcrawl: default settings, WEBCRAWL_SEEN_CACHE_SIZE={args.seen_cache:,}, its embedded "
        "redis-server (another process, not counted)"
        + (f", {args.processes} processes sharing the crawl (pages and hosts are the crawl's; "
           "the process marked allocator held the allocation lock: it keeps the allocator's "
           "table of every known page)" if args.processes > 1 else "")
        + ". vanilla: Scrapy CrawlSpider + "
        "LinkExtractor, in-memory scheduler, ROBOTSTXT_OBEY. RSS of the crawl process, sampled "
        f"every {args.sample_seconds:g} s; 1-minute load {load:.2f} when it started.",
        table(headers, rows),
        table(["contender", "pages", "hosts", "wall s", "RSS MB at 50%", "RSS MB at 90%",
               "peak RSS MB", "MB per 10,000 pages (50% to 90%)"], summary),
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench memory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per host")
    parser.add_argument("--seen-cache", type=int, default=20_000)
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--contenders", default="webcrawl,vanilla")
    parser.add_argument("--processes", type=int, default=1,
                        help="webcrawl crawl processes sharing the crawl (each one's RSS)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    # Figures written to the docs wait for a quiet machine; a trial run (--no-write) does not.
    load = os.getloadavg()[0] if args.no_write else wait_for_quiet()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        folder = Path(tmp)
        (folder / "sites").mkdir()
        (folder / "vanilla.py").write_text(VANILLA)
        with ServerProcess(args.hosts, args.pages, folder / "server.log") as server:
            site = PoliteSite(args.hosts, args.pages)
            site.bind(server.port, render=False)
            (folder / "sites" / "memsite.toml").write_text(site_file(site, args.delay))
            runs = []
            for contender in args.contenders.split(","):
                for i, run in enumerate(crawl(contender, server, site, folder, args)):
                    print(f"{run.contender}: exit {run.returncode}, {run.samples[-1].pages} pages, "
                          f"{run.wall:.0f} s, peak RSS {run.peak_mb:.0f} MB", flush=True)
                    if run.returncode != 0:
                        log = folder / f"{contender}-{i + 1}.log"
                        tail = log.read_text(errors="replace")[-3000:]
                        raise SystemExit(f"{run.contender} failed:\n{tail}")
                    runs.append(run)
    body = report(runs, site, args, load)
    print(body)
    if not args.no_write:
        write_section("memory", "Crawl process memory: 100,000 pages over 1,000 hosts",
                      "./run bench memory", body)


if __name__ == "__main__":
    main(sys.argv[1:])
