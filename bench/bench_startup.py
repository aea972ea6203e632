"""Start-up and exit: a one-page crawl by webcrawl against the same crawl by vanilla Scrapy.

A site of one page (no links) and a robots.txt, served by Python's ``http.server`` on 127.0.0.31
(a child process), is crawled by:

- ``webcrawl``: ``python -m scrapy crawl <site>`` with webcrawl's settings on a generated site
  file, the whole default stack, its embedded redis-server started in a fresh data folder (as the
  README's first command does), so the figure includes starting and shutting down that server;
- ``vanilla``: the ``docs`` CrawlSpider of ``bench/vanilla/`` (Scrapy's defaults, robots.txt
  obeyed), from that project's folder.

Alternating, ``BENCH_STARTUP_PAIRS`` pairs (default 15); reported: the median wall time of the
whole process (interpreter start to exit) and its CPU time (``os.wait4``), and their ratios.
Both crawls must exit 0 and fetch the page. ``./run bench startup``; ``BENCH_STARTUP_WRITE``
(1; 0 leaves docs/benchmarks.md alone).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._realsites_crawl import _PAGE_TYPE, _SITE
from bench._report import table, write_section
from bench._scheduler_process import Child, Crawl, project_env, reproduce, scrapy_command

ADDRESS = "127.0.0.31"
SITE = "startup-bench"
TARGET = 1.3

_PAGE = ("<html><head><title>One page</title></head>"
         "<body><h1>One page</h1><p>Nothing else.</p></body></html>\n")

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((ADDRESS, 0))
        return int(probe.getsockname()[1])


class Server:
    """``python -m http.server`` on ADDRESS serving ``root``."""

    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(self.port), "--bind", ADDRESS,
             "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((ADDRESS, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"the page server did not listen on {ADDRESS}:{self.port}")

    @property
    def url(self) -> str:
        return f"http://{ADDRESS}:{self.port}/index.html"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def crawl(contender: str, url: str, folder: Path, tag: str) -> Crawl:
    if contender == "vanilla":
        argv = scrapy_command("docs", {}, {"seeds": url, "prefix": "/"})
        env = project_env("vanilla")
    else:
        shutil.rmtree(folder / "data", ignore_errors=True)
        argv = scrapy_command(SITE, {"WEBCRAWL_SITES_DIR": folder / "sites",
                                     "WEBCRAWL_DATA_DIR": folder / "data"})
        env = project_env("webcrawl")
    done = Child(argv, env, folder / "cwd", f"{tag}.log").wait(120)
    if done.returncode != 0 or done.stat("response_received_count") < 2:  # robots.txt + page
        raise SystemExit(f"{contender} crawl {tag} failed (exit {done.returncode}); "
                         f"log: {folder / 'cwd' / (tag + '.log')}")
    return done


def main() -> None:
    pairs = int(os.environ.get("BENCH_STARTUP_PAIRS", "15"))
    folder = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    for sub in ("www", "sites", "cwd"):
        (folder / sub).mkdir()
    (folder / "www" / "index.html").write_text(_PAGE)
    (folder / "www" / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    server = Server(folder / "www")
    runs: dict[str, list[Crawl]] = {"webcrawl": [], "vanilla": []}
    try:
        # The real-site benchmark's site file: the whole stack, delay 0, a budget never reached.
        (folder / "sites" / f"{SITE}.toml").write_text(_SITE.format(
            name=SITE, seeds=json.dumps([server.url]), address=ADDRESS, denied="",
            page_types=_PAGE_TYPE.format(name="page", pattern=f"^http://{ADDRESS}:")))
        for i in range(pairs):
            order = ("webcrawl", "vanilla") if i % 2 == 0 else ("vanilla", "webcrawl")
            for contender in order:
                runs[contender].append(crawl(contender, server.url, folder, f"{contender}-{i}"))
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    wall = {k: statistics.median(c.wall for c in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c.cpu for c in v) for k, v in runs.items()}
    body = table(["contender", "median wall s", "median CPU s", "wall per run, s"],
                 [[k, f"{wall[k]:.3f}", f"{cpu[k]:.3f}",
                   ", ".join(f"{c.wall:.2f}" for c in runs[k])] for k in runs])
    body += "\n\n" + table(["webcrawl / vanilla", "ratio", "target"], [
        ["wall time", f"{wall['webcrawl'] / wall['vanilla']:.3f}", f"<= {TARGET}"],
        ["CPU time", f"{cpu['webcrawl'] / cpu['vanilla']:.3f}", "-"]])
    body += (f"\n\nMethod. {pairs} alternating pairs of one-page crawls (the page and robots.txt, "
             "served by `python -m http.server` on 127.0.0.31). `webcrawl`: `python -m scrapy "
             "crawl <site>` with webcrawl's settings, the whole default stack and its embedded "
             "redis-server started in a fresh data folder and shut down at exit. `vanilla`: the "
             "`docs` CrawlSpider of `bench/vanilla/` (Scrapy's defaults, robots.txt obeyed). Wall: "
             "the whole process, interpreter start to exit; CPU: the crawl process (`os.wait4`; "
             "the embedded redis-server is a daemon of its own). The machine has 2 cores shared "
             "with other sessions: figures are provisional.")
    print(body)
    if os.environ.get("BENCH_STARTUP_WRITE", "1") == "1":
        write_section("startup", "Start-up and exit: a one-page crawl", reproduce("startup"), body)


if __name__ == "__main__":
    main()
