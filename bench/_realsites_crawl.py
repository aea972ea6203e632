"""One crawl of one documentation site by one contender, measured.

Contenders:

- ``vanilla``: the ``docs`` CrawlSpider of ``bench/vanilla/`` (Scrapy's defaults, webcrawl's
  concurrency, robots.txt obeyed), restricted to the site's host and path prefix.
- ``webcrawl``: ``scrapy crawl <site>`` on a generated site file, the project's settings and
  whole stack, its embedded redis-server (unix socket) in a fresh data folder.
- with the latency mode, webcrawl on the benchmark's own redis-server: ``webcrawl unix`` on its
  unix socket, ``webcrawl tcp`` over TCP through the latency proxy. Same server, same
  configuration: the two differ by the transport and the added delay only.
- ``webcrawl no db``: webcrawl without its database (``WEBCRAWL_DATABASE_ENABLED=False``): what the
  copy in SQLite costs the crawl.
- ``webcrawl before`` (when ``BENCH_REALSITES_BASELINE_SOURCE`` names another checkout of webcrawl,
  e.g. a ``git worktree`` of an earlier commit): the same crawl with that code, for a
  before-and-after figure in one run.

Over https (``bench/_realsites_tls.py``), webcrawl verifies the server's certificate as it does by
default, trusting the benchmark's authority through ``WEBCRAWL_TLS_CA_FILE``; vanilla keeps
Scrapy's defaults, which verify nothing (``DOWNLOAD_VERIFY_CERTIFICATES = False``).

The embedded redis-server daemonizes, so the crawl's ``wait4`` figures leave it out; its CPU time
is sampled from /proc (every 20 ms, from its pid file, until it exits) and reported beside them.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from bench._realsites_corpus import Corpus
from bench._scheduler_process import Child, Crawl, extra_settings, project_env, scrapy_command
from bench._scheduler_redis import cpu_seconds

VANILLA, WEBCRAWL, WEBCRAWL_UNIX, WEBCRAWL_TCP = "vanilla", "webcrawl", "webcrawl unix", "webcrawl tcp"
WEBCRAWL_NO_DB, WEBCRAWL_BEFORE = "webcrawl no db", "webcrawl before"
#: Download handlers webcrawl can be crawled with instead of its own (``BENCH_REALSITES_CLIENTS``,
#: each a contender ``webcrawl <client>``): the libraries the HTTP client was chosen among
#: (docs/http.md), and Scrapy's own HTTP/1.1 handler.
CLIENT_HANDLERS = {
    "aiohttp": "scrapy_download_handlers_incubator.AiohttpDownloadHandler",
    "curl-cffi": "scrapy_download_handlers_incubator.CurlCffiDownloadHandler",
    "pyreqwest": "scrapy_download_handlers_incubator.PyreqwestDownloadHandler",
    "twisted": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",
}
CLIENT_PREFIX = "webcrawl "
#: The webcrawl contenders that run on the embedded redis-server of a fresh data folder.
EMBEDDED = (WEBCRAWL, WEBCRAWL_NO_DB, WEBCRAWL_BEFORE,
            *(CLIENT_PREFIX + name for name in CLIENT_HANDLERS))


def client_settings(contender: str) -> dict[str, object]:
    """The settings that make ``webcrawl <client>`` fetch with that client's handler (the SSRF
    guard's start-up check accepts it: the site's address is allowed anyway)."""
    path = CLIENT_HANDLERS[contender.removeprefix(CLIENT_PREFIX)]
    return {"DOWNLOAD_HANDLERS": json.dumps({"http": path, "https": path}, separators=(",", ":")),
            "WEBCRAWL_SSRF_ACCEPT_UNCHECKED": True}

#: Page types of each site file: (name, URL regex searched in the path part). Every page gets the
#: same record as the baseline's items: its first heading and its section headings.
PAGE_TYPES: dict[str, tuple[tuple[str, str], ...]] = {
    "python": (("library", r"/library/"), ("reference", r"/(reference|c-api)/"), ("doc", r"")),
    "postgres": (("sql_command", r"/sql-[a-z]+\.html$"), ("doc", r"")),
    "rust-std": (("item", r"/(struct|enum|trait|fn|macro|type|constant|primitive|keyword)\.[^/]+\.html$"),
                 ("module", r"")),
}

_SITE = """\
name = "{name}"
seeds = {seeds}
allowed_domains = ["{address}"]
allowed_private_networks = ["{address}"]

[politeness]
user_agent = "webcrawl-bench/0.1 (+https://example.invalid/bench; bench@example.invalid)"
min_delay_seconds = 0

[budget]
billing = "requests"
amount_per_cycle = 10000000
cycle_seconds = 86400

[limits]
max_depth = 1000
{denied}
{page_types}"""

_PAGE_TYPE = """\
[[page_types]]
name = "{name}"
url_pattern = '{pattern}'
[page_types.fields]
title = "h1"
sections = {{ css = "h2", many = true }}
"""


def site_name(corpus: Corpus) -> str:
    return f"realsites-{corpus.name}"


def site_file(corpus: Corpus, base_url: str) -> str:
    """The site file webcrawl crawls ``corpus`` with: the whole stack, delay 0, a budget no
    crawl of these sites reaches, scope = the host (its address allowed) and the path prefix."""
    origin = re.escape(base_url)
    denied = (f"denied_url_patterns = ['^{origin}/(?!{re.escape(corpus.prefix.strip('/'))}/)']"
              if corpus.prefix != "/" else "")
    page_types = "\n".join(_PAGE_TYPE.format(name=name, pattern=f"^{origin}{re.escape(corpus.prefix)}.*{rx}")
                           for name, rx in PAGE_TYPES[corpus.name])
    return _SITE.format(name=site_name(corpus), seeds=json.dumps([base_url + corpus.start]),
                        address=corpus.address, denied=denied, page_types=page_types)


def command(contender: str, corpus: Corpus, base_url: str, folder: Path, tag: str,
            concurrency: dict[str, int], redis_url: str | None, sites: Path | None = None,
            ca_file: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one crawl: webcrawl's site files are in ``sites``
    (``folder / "sites"`` by default), ``ca_file`` the authority it trusts over https."""
    if contender == VANILLA:
        args = {"seeds": base_url + corpus.start, "prefix": corpus.prefix}
        return scrapy_command("docs", dict(concurrency), args), project_env("vanilla")
    settings: dict[str, object] = {
        "WEBCRAWL_SITES_DIR": sites or folder / "sites",
        "WEBCRAWL_DATA_DIR": folder / f"data-{tag}",  # fresh: nothing known, nothing stored
        "WEBCRAWL_CRAWL_NAME": f"bench-{tag}", **extra_settings("realsites"),
    }
    if redis_url is not None:
        settings["WEBCRAWL_REDIS_URL"] = redis_url
    if ca_file is not None:
        settings["WEBCRAWL_TLS_CA_FILE"] = ca_file
    env = project_env("webcrawl")
    if contender == WEBCRAWL_NO_DB:
        settings["WEBCRAWL_DATABASE_ENABLED"] = False
    elif contender == WEBCRAWL_BEFORE:
        env["PYTHONPATH"] = os.environ["BENCH_REALSITES_BASELINE_SOURCE"]
    elif contender.removeprefix(CLIENT_PREFIX) in CLIENT_HANDLERS:
        settings.update(client_settings(contender))
    return scrapy_command(site_name(corpus), settings), env


class RedisSampler:
    """CPU seconds of the embedded redis-server of ``data_dir``, sampled until it exits."""

    def __init__(self, data_dir: Path) -> None:
        self.pid_file = data_dir / "redis.pid"
        self.pid: int | None = None
        self.cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.pid is None and self.pid_file.exists():
                text = self.pid_file.read_text().strip()
                self.pid = int(text) if text.isdigit() else None
            if self.pid is not None:
                try:
                    stat = Path(f"/proc/{self.pid}/stat").read_text()
                    self.cpu = cpu_seconds(self.pid)
                except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                    return  # gone: the last reading stands
                if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return  # exited, not yet reaped: its reading is final
            self._stop.wait(0.02)

    def finish(self, timeout: float = 10.0) -> bool:
        """Wait (after the crawl exited) for the server to exit; False if it is still running."""
        if self.pid is None and not self.pid_file.exists():
            self._stop.set()
            return True  # it never started (the crawl failed first)
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        self._stop.set()
        return stopped


def run(contender: str, corpus: Corpus, base_url: str, folder: Path, tag: str,
        concurrency: dict[str, int], redis_url: str | None, timeout: float,
        sites: Path | None = None, ca_file: Path | None = None) -> tuple[Crawl, bool, float]:
    """Run one crawl; returns it, whether its embedded redis-server exited, and that server's CPU."""
    argv, env = command(contender, corpus, base_url, folder, tag, concurrency, redis_url, sites,
                        ca_file)
    sampler = RedisSampler(folder / f"data-{tag}") if contender in EMBEDDED else None
    crawl = Child(argv, env, folder / "cwd", f"{tag}.log").wait(timeout)
    if sampler is None:
        return crawl, True, 0.0
    return crawl, sampler.finish(), sampler.cpu
