"""``python -m webcrawl.demo``: serve the bundled demo shop, crawl it with ``scrapy crawl demo``,
print what the crawl fetched.

    python -m webcrawl.demo [--fresh] [--port N] [--cycles N] [--budget B] [--time-scale X]

Several short cycles, the shop's changes sped up: the first cycle discovers the shop, the later
ones spend ``--budget`` requests each where the revisit model expects changes; the run ends with
``scrapy report demo`` (and its HTML page).

Steps, one function each so later issues can run several cycles and add a report:
:func:`start_shop` (the shop on 127.0.0.2-5 in a child process), :func:`run_crawl` (``scrapy crawl
demo`` in a child process with the embedded Redis; its data folder is ``WEBCRAWL_DATA_DIR`` from
the environment, ``.webcrawl`` in the working directory otherwise), :func:`read_stats` (the stats
Scrapy dumps at the end of the log, saved as JSON), :func:`summary` (tables by page type).

Files, under ``<data dir>/demo/``: ``changes.jsonl`` (the feed of new and changed records),
``stats.json``, ``crawl.log``, ``requests.jsonl`` (the shop's request log). ``--fresh`` starts
the demo crawl over (``WEBCRAWL_RESET=True``); without it a run resumes the crawl state of the
runs before, so pages already seen are not discovered again.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webcrawl.demo._summary import cycle_line, summary
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.items import EXPORTED_FIELDS

SITE = "demo"
HOSTS = 4
DEFAULT_PORT = 8000  # the demo site file's default for ${WEBCRAWL_DEMO_PORT}


@dataclass(frozen=True)
class Paths:
    """Where one demo run keeps its files."""

    data_dir: Path

    @property
    def folder(self) -> Path:
        return self.data_dir / SITE

    @property
    def changes(self) -> Path:
        return self.folder / "changes.jsonl"

    @property
    def stats(self) -> Path:
        return self.folder / "stats.json"

    @property
    def log(self) -> Path:
        return self.folder / "crawl.log"

    @property
    def requests(self) -> Path:
        return self.folder / "requests.jsonl"

    @property
    def report(self) -> Path:
        return self.folder / "report.html"


@dataclass(frozen=True)
class CrawlRun:
    """A finished ``scrapy crawl demo``: exit status, wall seconds, its stats."""

    returncode: int
    seconds: float
    stats: dict[str, Any]


def start_shop(paths: Paths, port: int = 0, time_scale: float = 1.0, fresh: bool = False,
               ) -> ServerProcess:
    """The demo shop on 127.0.0.2-5 in a child process; its request log starts empty. Its
    simulated clock continues from earlier runs (``shop-clock.json``) unless ``fresh``, so the
    records a resumed crawl holds are compared with the shop's later state, not its first one."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    paths.requests.unlink(missing_ok=True)
    clock = paths.folder / "shop-clock.json"
    kept = {} if fresh or not clock.exists() else json.loads(clock.read_text())
    if kept.get("time_scale") != time_scale:
        kept = {}
    options = {"clock_origin": kept["clock_origin"]} if kept else {}
    shop = start_server_process("shop", HOSTS, paths.requests, port=port, time_scale=time_scale,
                                **options)
    clock.write_text(json.dumps({"clock_origin": shop.ready["clock_origin"],
                                 "time_scale": time_scale}))
    return shop


def crawl_command(port: int, paths: Paths, fresh: bool, budget: float | None = None,
                  ) -> list[str]:
    """The ``scrapy crawl demo`` command line of one cycle."""
    feed = {str(paths.changes): {
        "format": "jsonlines", "overwrite": True, "fields": EXPORTED_FIELDS,
        # Listing summaries are change detectors for the crawl, not output.
        "item_classes": ["webcrawl.items.PageItem"],
    }}
    settings: dict[str, object] = {
        "WEBCRAWL_DEMO_PORT": port,
        "WEBCRAWL_DATA_DIR": paths.data_dir,
        "WEBCRAWL_RESET": fresh,
        "FEEDS": json.dumps(feed),
        "LOG_FILE": paths.log,
        "LOG_FILE_APPEND": False,
        "LOG_LEVEL": "INFO",
    }
    if budget is not None:
        settings["WEBCRAWL_BUDGET_PER_CYCLE"] = budget
    command = [sys.executable, "-m", "scrapy", "crawl", SITE]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return command


def run_crawl(port: int, paths: Paths, fresh: bool = False, timeout: float = 600,
              budget: float | None = None) -> CrawlRun:
    """Run one crawl cycle in a child process and read its stats (saved to ``stats.json``)."""
    env = dict(os.environ)
    env.setdefault("SCRAPY_SETTINGS_MODULE", "webcrawl.settings")
    started = time.monotonic()
    done = subprocess.run(crawl_command(port, paths, fresh, budget), env=env, timeout=timeout,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    seconds = time.monotonic() - started
    stats = read_stats(paths.log)
    if done.returncode != 0 and done.stderr:
        print(done.stderr.strip()[-3000:], file=sys.stderr)
    paths.stats.write_text(json.dumps(stats, indent=1, sort_keys=True, default=str) + "\n")
    return CrawlRun(done.returncode, seconds, stats)


def read_stats(log: Path) -> dict[str, Any]:
    """The stats dict Scrapy dumps at the end of the crawl log (``{}`` if there is none)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    match = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n(?:\d{4}-|$)", text, re.S)
    if match is None:
        return {}
    literal = re.sub(r"datetime\.datetime\([^)]*\)", "None", match.group(1))
    try:
        stats = ast.literal_eval(literal)
    except (SyntaxError, ValueError):
        return {}
    return stats if isinstance(stats, dict) else {}


def report(paths: Paths) -> str:
    """``scrapy report demo`` over every cycle so far; the HTML page goes to ``report.html``."""
    env = dict(os.environ)
    env.setdefault("SCRAPY_SETTINGS_MODULE", "webcrawl.settings")
    command = [sys.executable, "-m", "scrapy", "report", SITE, "--html", str(paths.report),
               "-s", f"WEBCRAWL_DATA_DIR={paths.data_dir}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else f"report failed: {done.stderr[-2000:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webcrawl.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="start the demo crawl over")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the shop's port (default {DEFAULT_PORT}; 0: any free one). Page "
                             "URLs include it: keep it from run to run to resume the crawl")
    parser.add_argument("--cycles", type=int, default=3,
                        help="crawl cycles to run (default 3); on a new crawl the first one "
                             "discovers the shop on the site file's budget")
    parser.add_argument("--budget", type=float, default=60,
                        help="requests each revisit cycle may spend (default 60)")
    parser.add_argument("--time-scale", type=float, default=3600.0,
                        help="the shop's simulated time runs this many times faster (default "
                             "3600: a real second is an hour, so records change between cycles)")
    args = parser.parse_args(argv)
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    paths = Paths(Path(os.environ.get("WEBCRAWL_DATA_DIR") or ".webcrawl").resolve())
    # A crawl the demo has not run yet starts with a discovery cycle on the site file's budget.
    discover = args.fresh or not paths.stats.exists()
    runs: list[CrawlRun] = []
    with start_shop(paths, args.port, args.time_scale, args.fresh) as shop:
        print(f"demo shop on {', '.join(shop.hosts)} port {shop.port} "
              f"(time x{args.time_scale:g}); {args.cycles} cycle(s) of `scrapy crawl {SITE}`, "
              f"data in {paths.data_dir}{' (fresh)' if args.fresh else ''}", flush=True)
        for cycle in range(args.cycles):
            first = discover and cycle == 0
            run = run_crawl(shop.port, paths, args.fresh and cycle == 0,
                            budget=None if first else args.budget)
            runs.append(run)
            print(summary(run, paths) if first else cycle_line(cycle + 1, run), flush=True)
            if run.returncode != 0:
                return 1
    print("\n" + report(paths))
    print(f"\nreport page {paths.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
