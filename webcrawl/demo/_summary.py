"""The demo's files and what its crawls fetched: where a run keeps each cycle's files, the stats
read back from a crawl's log, the change events of a cycle's feed counted by kind, and as text:
totals, a table by page type, refusals, filters, odd pages, and a one-line digest per later
cycle."""

from __future__ import annotations

import ast
import json
import re
import shutil
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from webcrawl.change.events import KINDS
from webcrawl.commands._reportdata import NO_TYPE

SITE = "demo"

@dataclass(frozen=True)
class Paths:
    """Where the demo keeps its files."""

    data_dir: Path

    @property
    def folder(self) -> Path:
        return self.data_dir / SITE

    @property
    def changes(self) -> Path:
        return self.folder / "changes.jsonl"

    @property
    def cycles(self) -> Path:
        return self.folder / "cycles"

    @property
    def running(self) -> Path:
        return self.cycles / "running"

    @property
    def requests(self) -> Path:
        return self.folder / "requests.jsonl"

    @property
    def report(self) -> Path:
        return self.folder / "report.html"

    def keep_running(self, cycle: int | None) -> Path:
        """Move the running cycle's folder to ``cycles/<cycle>`` (a suffix if a joined cycle
        already has one) and return it."""
        name = str(cycle) if cycle is not None else time.strftime("unnumbered-%Y%m%dT%H%M%S", time.gmtime())
        target, k = self.cycles / name, 1
        while target.exists():
            k += 1
            target = self.cycles / f"{name}-{k}"
        return self.running.rename(target)

    def clear(self) -> None:
        """Forget the files of earlier runs (``--fresh``); stored bodies are the crawl's."""
        shutil.rmtree(self.cycles, ignore_errors=True)
        for path in (self.changes, self.requests, self.report, self.folder / "shop-clock.json"):
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class CrawlRun:
    """A finished ``scrapy crawl demo``: exit status, wall seconds, stats, its cycle and files."""

    returncode: int
    seconds: float
    stats: dict[str, Any]
    cycle: int | None
    folder: Path

    @property
    def changes(self) -> Path:
        return self.folder / "changes.jsonl"

    @property
    def stats_file(self) -> Path:
        return self.folder / "stats.json"

    @property
    def log(self) -> Path:
        return self.folder / "crawl.log"


_DUMP = re.compile(r"Dumping Scrapy stats:\n(\{.*?\})\n(?:\d{4}-|$)", re.S)
_DATETIME = re.compile(r"datetime\.datetime\(([\d, ]+)(?:, tzinfo=datetime\.timezone\.utc)?\)")


def _iso(match: re.Match[str]) -> str:
    """A ``datetime.datetime(...)`` of the stats dump as a quoted ISO 8601 UTC time."""
    p = [int(part) for part in match.group(1).split(",")] + [0] * 7  # repr() drops zero fields
    return repr(datetime(p[0], p[1], p[2], p[3], p[4], p[5], p[6], tzinfo=timezone.utc).isoformat())


def read_stats(log: Path) -> dict[str, Any]:
    """The stats dict Scrapy dumps at the end of a crawl's log, times (``start_time``,
    ``finish_time``) as ISO 8601 UTC strings; ``{}`` if the log has no dump."""
    text = log.read_text(errors="replace") if log.exists() else ""
    match = _DUMP.search(text)
    if match is None:
        return {}
    try:
        stats = ast.literal_eval(_DATETIME.sub(_iso, match.group(1)))
    except (SyntaxError, ValueError):
        return {}
    return stats if isinstance(stats, dict) else {}


def event_counts(feed: Path) -> Counter[str]:
    """The change events of a feed file (JSON lines, one event a line) counted by ``kind``; a
    missing file counts none, a torn or foreign line is skipped."""
    counts: Counter[str] = Counter()
    if not feed.exists():
        return counts
    with feed.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("kind"), str):
                counts[event["kind"]] += 1
    return counts


def events_text(counts: Counter[str]) -> str:
    """``3 new, 40 changed, 2 removed, 1 moved, 0 restored``: every kind, known ones first."""
    kinds = list(KINDS) + sorted(set(counts) - set(KINDS))
    return ", ".join(f"{counts[kind]} {kind}" for kind in kinds)


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
        row: list[object] = [NO_TYPE if page_type == "none" else page_type, pages[page_type], records]
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


def _times(stats: dict[str, Any]) -> str:
    """``13:46:20-13:46:30 UTC`` from the stats' start and finish times."""
    times = [str(stats.get(k, "")) for k in ("start_time", "finish_time")]
    return "-".join(t[11:19] for t in times if len(t) >= 19) + " UTC" if all(times) else "times unknown"


def _number(run: CrawlRun) -> str:
    return f"cycle {run.cycle}" if run.cycle is not None else "an unnumbered cycle"


def summary(run: CrawlRun, paths: Paths) -> str:
    """What a discovery cycle fetched: totals, a table by page type, refusals, filters, odd
    pages, and where its files are."""
    s = run.stats
    codes = sorted(_family(s, "downloader/response_status_count/").items())
    statuses = ", ".join(f"{code}: {n}" for code, n in codes)
    lines = [f"{_number(run)} ({_times(s)}): crawl finished ({s.get('finish_reason', 'no stats: see the log')}) "
             f"in {run.seconds:.1f} s: {s.get('downloader/request_count', 0)} requests, "
             f"responses {statuses or 'none'}", ""]
    headers, rows = page_type_rows(s)
    lines += [_table(headers, rows) if rows else
              "no pages parsed: every URL is known to the crawl state (--fresh starts over)", ""]
    facts = _facts(s)
    width = max(len(name) for name, _ in facts)
    lines += [f"{name.ljust(width)}  {text}" for name, text in facts] + [""]
    events = event_counts(run.changes)
    lines += [f"events   {events_text(events)}",
              f"changes  {run.changes}  ({sum(events.values())} change events; all cycles: {paths.changes})",
              f"stats    {run.stats_file}", f"log      {run.log}", f"requests {paths.requests}"]
    return "\n".join(lines)


def cycle_line(run: CrawlRun) -> str:
    """A revisit cycle in a line: what it fetched and the change events of its feed, by kind
    (and the records it found unchanged, which make no event)."""
    s = run.stats
    unchanged = sum(_family(s, "webcrawl/records/unchanged/").values())
    return (f"{_number(run)} ({_times(s)}): {s.get('finish_reason', '?')} in {run.seconds:.1f} s, "
            f"{s.get('downloader/request_count', 0)} requests, "
            f"{s.get('downloader/response_status_count/304', 0)} answered 304 Not Modified, "
            f"events: {events_text(event_counts(run.changes))} ({unchanged} records unchanged); "
            f"files in {run.folder}")
