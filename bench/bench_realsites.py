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

Over https (``bench/_realsites_tls.py``) the same sites are served by the same nginx with a
certificate of the benchmark's own authority, on several listeners (connections kept or closed
after each answer, TLS sessions resumable or not): ``vanilla`` and ``webcrawl`` (verifying through
that authority) crawl each, and nginx's log tells how many connections each opened and how many of
their handshakes resumed a session. The https figures have a section of their own.

``./run bench realsites``. Environment: ``BENCH_REALSITES_ROUNDS`` (3),
``BENCH_REALSITES_SITES`` (python,postgres,rust-std), ``BENCH_REALSITES_SCHEMES`` (http,https),
``BENCH_REALSITES_HTTPS_SERVERS`` (keepalive,close,close-noresume; also keepalive-noresume; the
https listeners), ``BENCH_REALSITES_LATENCY_MS`` (0.5; 0 leaves out the runs on Redis over TCP,
which are http only), ``BENCH_REALSITES_WRITE`` (1; 0 leaves
docs/benchmarks.md alone), ``BENCH_REALSITES_KEEP`` (0; 1 keeps the crawl logs),
``BENCH_REALSITES_WEBCRAWL_SETTINGS`` (``NAME=value ...`` added to every webcrawl crawl, for A/B
runs), ``BENCH_REALSITES_BASELINE_SOURCE`` (another checkout of webcrawl, crawled as ``webcrawl
before``: e.g. ``git worktree add /tmp/before <commit>``; it runs in this checkout's
environment, whose ``scrapy list`` entry point names ``webcrawl/commands/list.py``: a checkout
from before that module needs a copy of it), ``BENCH_REALSITES_CLIENTS`` (download
handlers crawled as ``webcrawl <client>`` besides webcrawl's own: ``aiohttp``, ``curl-cffi``,
``pyreqwest``, ``twisted``; docs/http.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import scrapy

from bench._latency_proxy_process import ProxyProcess, measure_added_rtt
from bench._realsites_corpus import CORPORA, Corpus, reachable_files
from bench._realsites_crawl import (
    CLIENT_HANDLERS, CLIENT_PREFIX, VANILLA, WEBCRAWL, WEBCRAWL_BEFORE, WEBCRAWL_NO_DB, WEBCRAWL_TCP, WEBCRAWL_UNIX, run, site_file,
    site_name,
)
from bench._realsites_nginx import Listener, Nginx
from bench._realsites_report import Figures, https_report, report
from bench._realsites_setup import ensure_installed, package_version
from bench._realsites_tls import (
    MAIN, Certificates, connection_counts, listeners, make_certificates, resumption_probe,
)
from bench._realsites_tls import method as https_method
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


def measure(contender: str, corpus: Corpus, nginx: Nginx, listener: str, reachable: dict[str, int],
            folder: Path, tag: str, redis: BenchRedis | None, proxy: ProxyProcess | None,
            ca: Path | None) -> Figures:
    """One crawl of ``corpus`` on ``listener`` by ``contender``, and its figures."""
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
    nginx_cpu0 = nginx.cpu_seconds()
    crawl, redis_stopped, embedded_cpu = run(
        contender, corpus, nginx.base_url(corpus.name, listener), folder, tag, concurrency(), url,
        TIMEOUT, folder / f"sites-{slug(listener)}", ca)
    nginx_cpu = nginx.cpu_seconds() - nginx_cpu0
    log = nginx.read_log(corpus.name)[offset:]
    answered = [e for e in log if e.uri != "/robots.txt"]
    files = {e.file for e in answered if e.status == 200}
    redis_cpu, commands = embedded_cpu, 0
    if external:
        redis_cpu = redis.cpu_seconds() - redis_cpu0
        commands = sum(redis.commands().values())
    writes = proxy.counters()["client_writes"] if proxy is not None and contender == WEBCRAWL_TCP else 0
    figures = Figures.of(contender, crawl, answered, files, reachable, redis_cpu, commands, writes,
                         redis_stopped)
    figures.server_cpu = nginx_cpu
    figures.connections, figures.resumed, figures.protocol = connection_counts(log)
    figures.logged = len(log)
    return figures


def slug(name: str) -> str:
    return name.replace(" ", "-")


def rotated(items: list[str], r: int) -> list[str]:
    return items[r % len(items):] + items[:r % len(items)]


def contenders_of(listener: Listener, latency: float) -> list[str]:
    """Every contender over http; over https the two crawlers (and the baseline checkout and the
    other clients when asked for)."""
    contenders = [VANILLA, WEBCRAWL]
    if not listener.tls:
        contenders += [WEBCRAWL_NO_DB] + ([WEBCRAWL_UNIX, WEBCRAWL_TCP] if latency > 0 else [])
    if os.environ.get("BENCH_REALSITES_BASELINE_SOURCE"):
        contenders.append(WEBCRAWL_BEFORE)
    return contenders + [CLIENT_PREFIX + name for name in clients()]


def nginx_version() -> str:
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, check=False).stderr
    return out.strip().rpartition("/")[2]


def main() -> None:
    rounds = int(os.environ.get("BENCH_REALSITES_ROUNDS", "3"))
    wanted = os.environ.get("BENCH_REALSITES_SITES", ",".join(c.name for c in CORPORA)).split(",")
    latency = float(os.environ.get("BENCH_REALSITES_LATENCY_MS", "0.5")) / 1000
    corpora = tuple(c for c in CORPORA if c.name in wanted)
    if not corpora:
        raise SystemExit(f"BENCH_REALSITES_SITES names none of {[c.name for c in CORPORA]}")
    servers = listeners()
    if "http" not in servers:
        latency = 0.0  # the runs on Redis over TCP are http ones
    ensure_installed(corpora)
    contenders = {name: contenders_of(listener, latency) for name, listener in servers.items()}
    folder = Path(tempfile.mkdtemp(prefix="bench-realsites-"))
    for sub in ("cwd", "nginx", "redis", *(f"sites-{slug(s)}" for s in servers)):
        (folder / sub).mkdir()
    certificates: Certificates | None = None
    if any(listener.tls for listener in servers.values()):
        certificates = make_certificates(folder / "tls", [c.address for c in corpora])
    ca = certificates.ca if certificates is not None else None
    reachable = {c.name: reachable_files(c.root, c.start, c.prefix) for c in corpora}
    redis = BenchRedis(folder / "redis", tcp=True) if latency > 0 else None
    proxy = ProxyProcess(("127.0.0.1", redis.tcp_port), latency) if redis is not None else None
    rtt = (measure_added_rtt(("127.0.0.1", redis.tcp_port), ("127.0.0.1", proxy.port))
           if redis is not None and proxy is not None else None)
    runs: dict[str, dict[str, dict[str, list[Figures]]]] = {
        s: {c.name: {k: [] for k in contenders[s]} for c in corpora} for s in servers}
    nginx = Nginx(folder / "nginx", {c.name: (c.address, c.root) for c in corpora}, servers,
                  (certificates.chain, certificates.key) if certificates is not None else None).start()
    try:
        for server in servers:
            for corpus in corpora:
                (folder / f"sites-{slug(server)}" / f"{site_name(corpus)}.toml").write_text(
                    site_file(corpus, nginx.base_url(corpus.name, server)))
        probes = {s: resumption_probe(corpora[0].address, nginx.ports[s], ca)
                  for s, listener in servers.items() if listener.tls and ca is not None}
        for r in range(rounds):
            for corpus in corpora:
                for server in rotated(list(servers), r):
                    for contender in rotated(contenders[server], r):
                        tag = f"{corpus.name}-{r}-{slug(server)}-{slug(contender)}"
                        figures = measure(contender, corpus, nginx, server, reachable[corpus.name],
                                          folder, tag, redis, proxy, ca if servers[server].tls else None)
                        runs[server][corpus.name][contender].append(figures)
                        print(f"round {r + 1}/{rounds} {corpus.name} {server} {figures.line()}", flush=True)
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
    write = os.environ.get("BENCH_REALSITES_WRITE", "1") == "1"
    versions = {c.package: package_version(c.package) for c in corpora}
    if "http" in runs:
        http = [f for site in runs["http"].values() for fs in site.values() for f in fs]
        nginx_cpu_per_page = sum(f.server_cpu for f in http) / max(sum(f.pages for f in http), 1)
        body = report(corpora, reachable, runs["http"], rounds, concurrency(), latency, rtt,
                      nginx_cpu_per_page, versions)
        print(body)
        if write:
            write_section("realsites", "Real sites: whole crawls of documentation served by nginx",
                          reproduce("realsites"), body)
    if MAIN in runs:
        method = https_method(rounds, servers, contenders[MAIN], concurrency(), nginx_version(),
                              scrapy.__version__)
        body = https_report(corpora, runs, MAIN, probes, method)
        print(body)
        if write:
            write_section("realsites-https", "Real sites over HTTPS: the same crawls with TLS",
                          reproduce("realsites"), body)


if __name__ == "__main__":
    main()
