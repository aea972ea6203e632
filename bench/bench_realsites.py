"""Real documentation sites served by nginx, crawled whole: webcrawl against vanilla Scrapy.

Three Debian documentation packages (``python3.11-doc``, ``postgresql-doc-15``, ``rust-doc``'s
``/std/``), installed with apt-get when missing, each served by one nginx (a configuration
generated in a temporary folder, run as a child process) on its own 127.0.0.x address. Each site
is crawled whole by each contender (see ``bench/_realsites_crawl.py``), alternating the order
every round; figures are medians, ratios are medians of per-round ratios.

Measured per crawl: pages/s over the whole process's wall time (start-up and exit included), CPU
per page and peak RSS of the crawl process (``os.wait4``), CPU of the redis-server serving it,
Redis round trips per page (webcrawl's own stats, and the latency proxy's count of client writes),
and completeness: the files nginx answered with 200 against an independent walk of the files on
disk (``bench/_realsites_corpus.py``). Every crawl must exit 0.

``./run bench realsites``. Environment: ``BENCH_REALSITES_ROUNDS`` (3),
``BENCH_REALSITES_SITES`` (python,postgres,rust-std), ``BENCH_REALSITES_LATENCY_MS`` (0.5; 0
leaves out the runs on Redis over TCP), ``BENCH_REALSITES_WRITE`` (1; 0 leaves
docs/benchmarks.md alone), ``BENCH_REALSITES_KEEP`` (0; 1 keeps the crawl logs),
``BENCH_REALSITES_WEBCRAWL_SETTINGS`` (``NAME=value ...`` added to every webcrawl crawl, for A/B
runs), ``BENCH_REALSITES_BASELINE_SOURCE`` (another checkout of webcrawl, crawled as ``webcrawl
before``: e.g. ``git worktree add /tmp/before <commit>``), ``BENCH_REALSITES_CLIENTS`` (download
handlers crawled as ``webcrawl <client>`` besides webcrawl's own: ``aiohttp``, ``curl-cffi``,
``pyreqwest``, ``twisted``; docs/http.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bench._latency_proxy_process import ProxyProcess, measure_added_rtt
from bench._realsites_corpus import CORPORA, Corpus, reachable_files
from bench._realsites_crawl import (
    CLIENT_HANDLERS, CLIENT_PREFIX, VANILLA, WEBCRAWL, WEBCRAWL_BEFORE, WEBCRAWL_NO_DB, WEBCRAWL_TCP, WEBCRAWL_UNIX, run, site_file,
    site_name,
)
from bench._realsites_nginx import Nginx
from bench._realsites_report import Figures, report
from bench._realsites_setup import ensure_installed, package_version
from bench._report import write_section
from bench._scheduler_process import reproduce
from bench._scheduler_redis import BenchRedis

TIMEOUT = 1800.0


def concurrency() -> dict[str, int]:
    """webcrawl's concurrency settings, given to the baseline too."""
    import webcrawl.settings as project

    return {"CONCURRENT_REQUESTS": project.CONCURRENT_REQUESTS,
            "CONCURRENT_REQUESTS_PER_DOMAIN": project.CONCURRENT_REQUESTS_PER_DOMAIN}


def clients() -> list[str]:
    """``BENCH_REALSITES_CLIENTS``: the download handlers crawled as ``webcrawl <client>``."""
    names = [n for n in os.environ.get("BENCH_REALSITES_CLIENTS", "").replace(",", " ").split() if n]
    unknown = [n for n in names if n not in CLIENT_HANDLERS]
    if unknown:
        raise SystemExit(f"BENCH_REALSITES_CLIENTS: {unknown[0]!r} is not one of "
                         f"{', '.join(CLIENT_HANDLERS)}")
    return names


def measure(contender: str, corpus: Corpus, nginx: Nginx, reachable: dict[str, int], folder: Path,
            tag: str, redis: BenchRedis | None, proxy: ProxyProcess | None) -> Figures:
    """One crawl of ``corpus`` by ``contender``, and its figures."""
    url = None
    if contender == WEBCRAWL_UNIX and redis is not None:
        url = redis.url
    elif contender == WEBCRAWL_TCP and proxy is not None:
        url = f"redis://127.0.0.1:{proxy.port}/0"
    external = url is not None and redis is not None
    if external:
        redis.flush()
        redis.client.config_resetstat()
        redis_cpu0 = redis.cpu_seconds()
    if proxy is not None:
        proxy.reset()
    offset = len(nginx.read_log(corpus.name))
    crawl, redis_stopped, embedded_cpu = run(contender, corpus, nginx.base_url(corpus.name), folder,
                                             tag, concurrency(), url, TIMEOUT)
    log = nginx.read_log(corpus.name)[offset:]
    answered = [e for e in log if e.uri != "/robots.txt"]
    files = {e.file for e in answered if e.status == 200}
    redis_cpu, commands = embedded_cpu, 0
    if external:
        redis_cpu = redis.cpu_seconds() - redis_cpu0
        commands = sum(redis.commands().values())
    writes = proxy.counters()["client_writes"] if proxy is not None and contender == WEBCRAWL_TCP else 0
    return Figures.of(contender, crawl, answered, files, reachable, redis_cpu, commands, writes,
                      redis_stopped)


def main() -> None:
    rounds = int(os.environ.get("BENCH_REALSITES_ROUNDS", "3"))
    wanted = os.environ.get("BENCH_REALSITES_SITES", ",".join(c.name for c in CORPORA)).split(",")
    latency = float(os.environ.get("BENCH_REALSITES_LATENCY_MS", "0.5")) / 1000
    corpora = tuple(c for c in CORPORA if c.name in wanted)
    if not corpora:
        raise SystemExit(f"BENCH_REALSITES_SITES names none of {[c.name for c in CORPORA]}")
    ensure_installed(corpora)
    contenders = [VANILLA, WEBCRAWL, WEBCRAWL_NO_DB] + ([WEBCRAWL_UNIX, WEBCRAWL_TCP] if latency > 0 else [])
    if os.environ.get("BENCH_REALSITES_BASELINE_SOURCE"):
        contenders.append(WEBCRAWL_BEFORE)
    contenders += [CLIENT_PREFIX + name for name in clients()]
    folder = Path(tempfile.mkdtemp(prefix="bench-realsites-"))
    for sub in ("sites", "cwd", "nginx", "redis"):
        (folder / sub).mkdir()
    reachable = {c.name: reachable_files(c.root, c.start, c.prefix) for c in corpora}
    redis = BenchRedis(folder / "redis", tcp=True) if latency > 0 else None
    proxy = ProxyProcess(("127.0.0.1", redis.tcp_port), latency) if redis is not None else None
    rtt = (measure_added_rtt(("127.0.0.1", redis.tcp_port), ("127.0.0.1", proxy.port))
           if redis is not None and proxy is not None else None)
    runs: dict[str, dict[str, list[Figures]]] = {c.name: {k: [] for k in contenders} for c in corpora}
    nginx = Nginx(folder / "nginx", {c.name: (c.address, c.root) for c in corpora}).start()
    try:
        for corpus in corpora:
            (folder / "sites" / f"{site_name(corpus)}.toml").write_text(
                site_file(corpus, nginx.base_url(corpus.name)))
        nginx_cpu0 = nginx.cpu_seconds()
        for r in range(rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for corpus in corpora:
                for contender in order:
                    tag = f"{corpus.name}-{r}-{contender.replace(' ', '-')}"
                    figures = measure(contender, corpus, nginx, reachable[corpus.name], folder,
                                      tag, redis, proxy)
                    runs[corpus.name][contender].append(figures)
                    print(f"round {r + 1}/{rounds} {corpus.name} {figures.line()}", flush=True)
        nginx_cpu = nginx.cpu_seconds() - nginx_cpu0
    finally:
        nginx.stop()
        if proxy is not None:
            proxy.stop()
        if redis is not None:
            redis.stop()
        if os.environ.get("BENCH_REALSITES_KEEP", "0") != "1":
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"crawl logs kept in {folder}")
    pages = sum(f.pages for site in runs.values() for fs in site.values() for f in fs)
    body = report(corpora, reachable, runs, rounds, concurrency(), latency, rtt,
                  nginx_cpu / max(pages, 1), {c.package: package_version(c.package) for c in corpora})
    print(body)
    if os.environ.get("BENCH_REALSITES_WRITE", "1") == "1":
        write_section("realsites", "Real sites: whole crawls of documentation served by nginx",
                      reproduce("realsites"), body)


if __name__ == "__main__":
    main()
