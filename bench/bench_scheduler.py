"""Scheduler: webcrawl's ReadyQueueScheduler against vanilla Scrapy's and scrapy-redis's.

Three measurements, side by side in one run (helpers in ``bench/_scheduler_*.py``):

1. Crawl throughput: the baseline project's ``docs`` CrawlSpider (``bench/vanilla/``, Scrapy's own
   settings) crawls a whole generated site (4 hosts x 150 pages of 20-150 KB, about 150 links
   each, most of them duplicates), and the Python docs where installed, at the same concurrency
   and no delay, under each scheduler (``bench/_scheduler_crawls.py``: only the scheduler
   differs), the order rotating every round. Figures are per whole process (``os.wait4``),
   medians over rounds; ratios are medians of per-round ratios. Every run must fetch every
   reachable page. Latency mode: webcrawl and scrapy-redis once more on the same redis-server over
   TCP through the latency proxy, reported as a ratio to their unix-socket runs.
2. Politeness with two processes (4 hosts x 25 pages at 0.5 s), and pages fetched after kill -9
   and restarts, from the demo server's own request log.
3. Seen-URL memory at 1,000,000 URLs: the bloom bitmap against scrapy-redis's fingerprint set.

``./run bench scheduler`` (or ``python -m bench scheduler``). ``BENCH_SCHEDULER_ROUNDS`` (5) sets the
throughput rounds, ``BENCH_SCHEDULER_POLITE_ROUNDS`` (1) the politeness ones,
``BENCH_SCHEDULER_LATENCY_MS`` (0.5; 0: no latency runs) the delay added each way,
``BENCH_SCHEDULER_WRITE`` (1; 0 leaves docs/benchmarks.md alone).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench._latency_proxy_process import ProxyProcess, measure_added_rtt
from bench._realsites_corpus import reachable_files
from bench._report import table, write_section
from bench._scheduler_crawls import (CONTENDERS, LATENCY_CONTENDERS, SCRAPY_REDIS, SCRAPY_REDIS_TCP, VANILLA,
                                     WEBCRAWL, WEBCRAWL_TCP, BenchRedis, Crawl, Redis, cpu_seconds,
                                     settings_for, start)
from bench._scheduler_process import reproduce, webcrawl_components
from bench._scheduler_report import METHOD, joined, throughput_tables
from bench._scheduler_polite import (LEASE_SECONDS, Crash, Politeness, crash, fetched_since, reachable_pages,
                                     seeds_of, settle, two_processes)
from bench._scheduler_seen import PROBES, URLS, measure
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.demo.static import PYTHON_DOCS

SITE = {"pages": 600, "min_kb": 20, "max_kb": 150, "links": 150}
POLITE_SITE = {"pages": 100, "min_kb": 2, "max_kb": 6, "links": 20}
HOSTS = 4
DELAY = 0.5


#: Corpora for the throughput runs: the generated site, and the Python docs where installed
#: (Debian's python3.11-doc: the corpus of the issue's own figures).
CORPORA: dict[str, tuple[str, int, dict[str, object]]] = {
    "generated site": ("generated", HOSTS, SITE),
    "Python 3.11 docs": ("static", 1, {"root": PYTHON_DOCS}),
}


def check(contender: str, crawl: Crawl) -> None:
    """Each crawl ran the scheduler it stands for (Scrapy logs the settings that differ from its
    defaults), and the baselines nothing of webcrawl."""
    expected = {WEBCRAWL: "webcrawl.scheduler.ReadyQueueScheduler",
                SCRAPY_REDIS: "scrapy_redis.scheduler.Scheduler", VANILLA: None}[contender.removesuffix(" tcp")]
    overridden = crawl.log.split("Overridden settings:", 1)[-1].split("\n20", 1)[0]
    if expected is None and ("'SCHEDULER'" in overridden or "scheduler/enqueued/memory" not in crawl.stats):
        raise RuntimeError(f"{contender}: ran another scheduler than Scrapy's")
    if expected is not None and f"'SCHEDULER': '{expected}'" not in overridden:
        raise RuntimeError(f"{contender}: did not run {expected}")
    if webcrawl_components(crawl.log):
        raise RuntimeError(f"{contender}: webcrawl components loaded: {webcrawl_components(crawl.log)}")


def truth(site: ServerProcess, site_name: str, options: dict[str, object],
          ) -> tuple[set[str], list[int], Callable[[str], str]]:
    """Pages (``host/path``) a whole crawl must fetch, their sizes, and how a fetched ``host/path``
    names its page. The generated site knows its own link graph; a folder of files is walked on
    disk (``bench/_realsites_corpus.py``: the links a LinkExtractor follows), and a URL names the
    file the server answers it with (``/`` is ``index.html``)."""
    if site_name != "static":
        return reachable_pages(site), [len(site.site.body(u)) for u in site.site.reachable()], str
    files = reachable_files(Path(str(options["root"])), "/", "/")
    host = site.hosts[0]
    return ({f"{host}/{f}" for f in files}, list(files.values()),
            lambda key: key + "index.html" if key.endswith("/") else key)


def throughput(rounds: int, redis: Redis, proxy: ProxyProcess | None, folder: Path, corpus: str,
               contenders: tuple[str, ...]) -> tuple[dict[str, list[dict[str, float]]], str, int]:
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in contenders}
    site_name, hosts, options = CORPORA[corpus]
    with start_server_process(site_name, hosts, folder / f"site-{site_name}.log", **options) as site:
        reachable, sizes, page_of = truth(site, site_name, options)
        for r in range(rounds):
            for contender in contenders[r % len(contenders):] + contenders[:r % len(contenders)]:
                redis.server.flush()
                if proxy is not None:
                    proxy.reset()
                offset, cpu0, commands0 = settle(site), redis.server.cpu_seconds(), redis.server.commands()
                server0 = cpu_seconds(site.process.pid)
                settings = settings_for(contender, redis.url_for(contender), 0,
                                        f"throughput-{site_name}-{r}")
                log_name = f"tp-{site_name}-{r}-{contender.replace(' ', '-')}.log"
                crawl = start(contender, settings, seeds_of(site), folder, log_name).wait(900)
                settle(site)
                counts = Counter(page_of(k) for k in fetched_since(site, offset).elements())
                fetched = sum(counts.values())
                if crawl.returncode != 0:
                    raise RuntimeError(f"{contender} round {r}: exit {crawl.returncode}; its log "
                                       f"ends:\n{crawl.log[-3000:]}")
                missed = sorted(reachable - set(counts))
                if missed:  # reported in the table; the figures of an incomplete crawl mislead
                    print(f"INCOMPLETE {contender}: {len(missed)} pages missed, e.g. {missed[:3]}")
                check(contender, crawl)
                writes = proxy.counters()["client_writes"] if proxy is not None else 0
                runs[contender].append({
                    "pages": fetched, "duplicates": fetched - len(counts),
                    "found": len(reachable & set(counts)),
                    "pages_s": fetched / crawl.wall, "cpu_k": crawl.cpu / fetched * 1000,
                    "rss": crawl.max_rss_mb, "busy": crawl.cpu / crawl.wall,
                    "server_cpu_k": (cpu_seconds(site.process.pid) - server0) / fetched * 1000,
                    "redis_cpu_k": (redis.server.cpu_seconds() - cpu0) / fetched * 1000,
                    **{f"cmd:{name}": (n - commands0.get(name, 0)) / fetched
                       for name, n in redis.server.commands().items() if n > commands0.get(name, 0)},
                    "calls": crawl.stat("webcrawl/redis/round_trips") / fetched,
                    "writes": writes / fetched if contender in LATENCY_CONTENDERS else 0.0,
                })
                print(f"{corpus} round {r + 1}/{rounds} {contender}: {fetched} pages in {crawl.wall:.1f} s, "
                      f"{crawl.cpu:.1f} CPU s, {crawl.max_rss_mb:.0f} MB", flush=True)
    sizes.sort()
    site_note = (f"{corpus}: {len(reachable)} reachable pages on {hosts} host(s), median "
                 f"{sizes[len(sizes) // 2] / 1024:.0f} KB, mean {sum(sizes) / len(sizes) / 1024:.0f} KB")
    return runs, site_note, len(reachable)


def politeness(rounds: int, redis: Redis, folder: Path,
               ) -> tuple[dict[str, list[Politeness]], dict[str, list[Crash]]]:
    polite: dict[str, list[Politeness]] = {c: [] for c in CONTENDERS}
    crashes: dict[str, list[Crash]] = {c: [] for c in (WEBCRAWL, SCRAPY_REDIS)}
    with start_server_process("generated", HOSTS, folder / "polite.log", **POLITE_SITE) as site:
        for r in range(rounds):
            for contender in CONTENDERS:
                tag = f"{r}-{contender.split()[0]}"
                p = two_processes(contender, site, redis, DELAY, folder, f"polite-{tag}")
                polite[contender].append(p)
                print(f"politeness round {r + 1}/{rounds} {contender}: {p}", flush=True)
            for contender in crashes:
                c = crash(contender, site, redis, DELAY, folder, f"crash-{r}-{contender.split()[0]}")
                crashes[contender].append(c)
                print(f"crash round {r + 1}/{rounds} {contender}: {c}", flush=True)
    return polite, crashes


def main() -> None:
    rounds = int(os.environ.get("BENCH_SCHEDULER_ROUNDS", "5"))
    polite_rounds = int(os.environ.get("BENCH_SCHEDULER_POLITE_ROUNDS", "1"))
    latency = float(os.environ.get("BENCH_SCHEDULER_LATENCY_MS", "0.5")) / 1000
    contenders = CONTENDERS + (LATENCY_CONTENDERS if latency > 0 else ())
    folder = Path(tempfile.mkdtemp(prefix="bench-scheduler-"))
    server = BenchRedis(folder, tcp=latency > 0)
    proxy = ProxyProcess(("127.0.0.1", server.tcp_port), latency) if latency > 0 else None
    redis = Redis(server, f"redis://127.0.0.1:{proxy.port}/0" if proxy is not None else None)
    try:
        rtt = (measure_added_rtt(("127.0.0.1", server.tcp_port), ("127.0.0.1", proxy.port))
               if proxy is not None else None)
        results = [throughput(rounds, redis, proxy, folder, corpus, contenders) for corpus in CORPORA
                   if corpus != "Python 3.11 docs" or Path(PYTHON_DOCS, "index.html").exists()]
        polite, crashes = politeness(polite_rounds, redis, folder)
        server.flush()
        seen = measure(server.client)
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)

    speed_tables = [throughput_tables(runs, note, reachable, rounds)
                    for runs, note, reachable in results]
    if len(results) < len(CORPORA):
        speed_tables.append("The Python docs run was skipped: apt-get install python3.11-doc.")
    server_k = statistics.median(r["server_cpu_k"] for runs, _, _ in results
                                 for c in contenders for r in runs[c])
    load = os.getloadavg()
    polite_rows = [[c, joined([p.utilisation for p in polite[c]], "{:.2f}"),
                    joined([f"{p.short_gaps} of {p.gaps}" for p in polite[c]]),
                    joined([p.shortest * 1000 for p in polite[c]], "{:.0f}"),
                    joined([f"{p.distinct} of {p.reachable} ({p.requests} requests)" for p in polite[c]]),
                    joined([p.per_process for p in polite[c]])] for c in CONTENDERS]
    crash_rows = [[c, joined([f"{x.distinct} of {x.reachable}" for x in crashes[c]]),
                   joined([x.requests - x.distinct for x in crashes[c]]),
                   joined([x.kills for x in crashes[c]])] for c in crashes]
    seen_rows = [
        ["webcrawl bloom bitmap, at most 1% (grown from its first generation)", f"{seen.bloom_bytes:,}", seen.bloom_bytes / URLS,
         f"{seen.false_positives / PROBES:.2%} ({seen.false_positives} of {PROBES:,})",
         f"{seen.bloom_seconds:.1f}"],
        ["scrapy-redis fingerprint set (SADD of SHA-1 hex)", f"{seen.set_bytes:,}", seen.set_bytes / URLS,
         "0 (exact)", f"{seen.set_seconds:.1f}"],
    ]
    latency_note = "" if rtt is None else (
        f"Latency mode: `{WEBCRAWL_TCP}` and `{SCRAPY_REDIS_TCP}` reach the same redis-server over "
        f"TCP through a proxy adding {latency * 1000:g} ms each way (`bench/_latency_proxy.py`); a "
        f"PING round trip took {rtt[0] * 1000:.3f} ms direct, {rtt[1] * 1000:.3f} ms through it. "
        "Its count of client writes per page approximates the round trips (never fewer).")
    body = "\n\n".join(x for x in [
        *speed_tables,
        latency_note,
        f"The demo server used {server_k:.2g} CPU s per 1,000 pages (median over all crawls): the "
        f"crawler, not the server, is the limit. Load average at the end: {load[0]:.1f} "
        "(2 cores): wall-clock figures carry other sessions' load, CPU per page much less.",
        f"Politeness, two processes, {HOSTS} hosts x {POLITE_SITE['pages'] // HOSTS} pages (+ a seed "
        f"page each) at {DELAY} s, from the server's log ({polite_rounds} round(s), one figure each):",
        table(["scheduler", "utilisation (rate / (H / d))", f"gaps < {DELAY} s", "shortest gap ms",
               "distinct pages fetched", "responses per process"], polite_rows),
        "Crash: kill -9 after a third of the site, restart, kill -9 after two thirds, restart and "
        f"finish (webcrawl with WEBCRAWL_LEASE_SECONDS={LEASE_SECONDS}):",
        table(["scheduler", "distinct pages fetched", "refetched", "kills"], crash_rows),
        f"Seen URLs at {URLS:,} URLs (MEMORY USAGE ... SAMPLES 0; bitmap STRLEN {seen.bloom_strlen:,}, "
        f"formula {seen.bloom_formula:,}):",
        table(["filter", "bytes", "bytes / URL", f"false positives on {PROBES:,} new URLs", "fill s"],
              seen_rows),
        METHOD,
    ] if x)
    print(body)
    if os.environ.get("BENCH_SCHEDULER_WRITE", "1") == "1":
        write_section("scheduler", "Scheduler: throughput, politeness, seen-URL memory",
                      reproduce("scheduler"), body)
