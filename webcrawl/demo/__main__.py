"""``python -m webcrawl.demo``: serve the bundled demo shop, crawl it with ``scrapy crawl demo``,
print what the crawl fetched.

    python -m webcrawl.demo [--fresh] [--port N] [--time-scale X]

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
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class CrawlRun:
    """A finished ``scrapy crawl demo``: exit status, wall seconds, its stats."""

    returncode: int
    seconds: float
    stats: dict[str, Any]


def start_shop(paths: Paths, port: int = 0, time_scale: float = 1.0) -> ServerProcess:
    """The demo shop on 127.0.0.2-5 in a child process; its request log starts empty."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    paths.requests.unlink(missing_ok=True)
    return start_server_process("shop", HOSTS, paths.requests, port=port, time_scale=time_scale)


def crawl_command(port: int, paths: Paths, fresh: bool) -> list[str]:
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
    command = [sys.executable, "-m", "scrapy", "crawl", SITE]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return command


def run_crawl(port: int, paths: Paths, fresh: bool = False, timeout: float = 600) -> CrawlRun:
    """Run one crawl cycle in a child process and read its stats (saved to ``stats.json``)."""
    env = dict(os.environ)
    env.setdefault("SCRAPY_SETTINGS_MODULE", "webcrawl.settings")
    started = time.monotonic()
    done = subprocess.run(crawl_command(port, paths, fresh), env=env, timeout=timeout,
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


def _family(stats: dict[str, Any], prefix: str) -> dict[str, int]:
    """``{rest: value}`` for every stats key ``prefix + rest`` without a further ``/``."""
    return {k[len(prefix):]: v for k, v in stats.items()
            if k.startswith(prefix) and "/" not in k[len(prefix):]}


def _table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in cells]
    return "\n".join(lines)


def page_type_rows(stats: dict[str, Any]) -> tuple[list[str], list[list[object]]]:
    """One row per page type: pages parsed, records, their verdicts (when the record-hash
    pipeline ran), listing items."""
    pages = _family(stats, "webcrawl/parse/page_type/")
    verdicts: dict[str, dict[str, int]] = defaultdict(dict)
    for change in ("new", "changed", "unchanged"):
        for page_type, count in _family(stats, f"webcrawl/records/{change}/").items():
            verdicts[page_type][change] = count
    listing = _family(stats, "webcrawl/spider/items/listing/")
    headers = ["page type", "pages", "records", "listing items"]
    with_verdicts = any(verdicts.values())
    if with_verdicts:
        headers[3:3] = ["new", "changed", "unchanged"]
    rows: list[list[object]] = []
    for page_type in sorted(pages, key=lambda t: (t == "none", -pages[t], t)):
        records = 0 if page_type == "none" else stats.get(f"webcrawl/spider/items/page/{page_type}", 0)
        row: list[object] = ["(no type)" if page_type == "none" else page_type, pages[page_type], records]
        if with_verdicts:
            row += [verdicts[page_type].get(c, 0) for c in ("new", "changed", "unchanged")]
        rows.append([*row, listing.get(page_type, 0)])
    return headers, rows


def _facts(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The crawl's refusals, sitemaps, link filters and odd pages, one line each."""
    filtered = _family(s, "webcrawl/parse/links/filtered/")
    filtered.update({"trap/" + k: v for k, v in _family(s, "webcrawl/parse/links/filtered/trap/").items()})
    odd = {k: v for k, v in _family(s, "webcrawl/parse/pages/").items() if k != "html"}
    for key in ("truncated", "encoding/broken"):
        if s.get("webcrawl/parse/" + key):
            odd[key] = s["webcrawl/parse/" + key]
    get = lambda key: s.get(key, 0)  # noqa: E731
    by_count = sorted(filtered.items(), key=lambda kv: -kv[1])
    return [
        ("robots.txt", f"{get('robotstxt/response_count')} fetched, "
                       f"{get('robotstxt/forbidden')} requests refused"),
        ("sitemaps", f"{get('webcrawl/sitemap/urlset')} read, {get('webcrawl/sitemap/urls')} URLs, "
                     f"{get('webcrawl/sitemap/lastmod')} with lastmod"),
        ("links kept", f"{get('webcrawl/parse/links/kept')} of {get('webcrawl/parse/links/found')} "
                       f"found; {get('webcrawl/spider/requests/discovery')} discovery requests"),
        ("links filtered", ", ".join(f"{k} {v}" for k, v in by_count) or "none"),
        ("odd pages", ", ".join(f"{k} {v}" for k, v in sorted(odd.items())) or "none"),
        ("refused (SSRF)", str(get("ssrf/refused"))),
    ]


def summary(run: CrawlRun, paths: Paths) -> str:
    """What the crawl fetched: totals, a table by page type, refusals, filters, odd pages, files."""
    s = run.stats
    codes = sorted(_family(s, "downloader/response_status_count/").items())
    statuses = ", ".join(f"{code}: {n}" for code, n in codes)
    lines = [f"crawl finished ({s.get('finish_reason', 'no stats: see the log')}) in {run.seconds:.1f} s: "
             f"{s.get('downloader/request_count', 0)} requests, responses {statuses or 'none'}", ""]
    headers, rows = page_type_rows(s)
    lines += [_table(headers, rows) if rows else
              "no pages parsed: every URL is known to the crawl state (--fresh starts over)", ""]
    facts = _facts(s)
    width = max(len(name) for name, _ in facts)
    lines += [f"{name.ljust(width)}  {text}" for name, text in facts] + [""]
    changes = sum(1 for _ in paths.changes.open()) if paths.changes.exists() else 0
    lines += [f"changes  {paths.changes}  ({changes} new or changed records)",
              f"stats    {paths.stats}", f"log      {paths.log}", f"requests {paths.requests}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webcrawl.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="start the demo crawl over")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the shop's port (default {DEFAULT_PORT}; 0: any free one). Page "
                             "URLs include it: keep it from run to run to resume the crawl")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="the shop's simulated time runs this many times faster")
    args = parser.parse_args(argv)
    paths = Paths(Path(os.environ.get("WEBCRAWL_DATA_DIR") or ".webcrawl").resolve())
    with start_shop(paths, args.port, args.time_scale) as shop:
        print(f"demo shop on {', '.join(shop.hosts)} port {shop.port} "
              f"(time scale {args.time_scale:g}); crawling it with `scrapy crawl {SITE}`, "
              f"data in {paths.data_dir}{' (fresh)' if args.fresh else ''}", flush=True)
        run = run_crawl(shop.port, paths, args.fresh)
    print(summary(run, paths))
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
