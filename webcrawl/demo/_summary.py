"""What one demo crawl fetched, as text: totals, a table by page type, refusals, filters, odd
pages, and a one-line digest per later cycle."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webcrawl.demo.__main__ import CrawlRun, Paths


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


def cycle_line(number: int, run: CrawlRun) -> str:
    """One later cycle in a line: what it fetched and what it found."""
    s = run.stats
    verdicts = {c: sum(_family(s, f"webcrawl/records/{c}/").values()) for c in
                ("new", "changed", "unchanged")}
    return (f"cycle {number}: {s.get('finish_reason', '?')} in {run.seconds:.1f} s, "
            f"{s.get('downloader/request_count', 0)} requests, "
            f"{s.get('downloader/response_status_count/304', 0)} answered 304 Not Modified, "
            f"records: {verdicts['new']} new, {verdicts['changed']} changed, "
            f"{verdicts['unchanged']} unchanged")
