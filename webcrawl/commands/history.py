"""``scrapy history <site> <url> [--json]``: every version of a page, with its field diff and the
checks made while it was current (docs/database.md).

The page is looked up by its canonical URL (as the crawl keys it; the URL as given when that
finds nothing), and followed back through its moves: a page that moved shows the versions of its
old URL first. Text by default; ``--json`` prints the versions as one JSON array.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand

from webcrawl.commands._database import command_database
from webcrawl.commands._errors import fail
from webcrawl.database.queries import history
from webcrawl.parse import Canonicalizer

if TYPE_CHECKING:
    import argparse

__all__ = ["Command", "render"]


def _when(t: float | None) -> str:
    return "now" if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def render(url: str, versions: list[dict[str, Any]]) -> str:
    lines = [f"{url}: {len(versions)} version(s)"]
    for v in versions:
        lines.append(f"{_when(v['valid_from'])} .. {_when(v['valid_to'])}  {v['kind']}"
                     + (f"  (at {v['canonical_url']})" if v["canonical_url"] != url else ""))
        for name, sides in sorted(v["changed_fields"].items()):
            lines.append(f"    {name}: {json.dumps(sides['previous'])} -> {json.dumps(sides['current'])}")
        outcomes: dict[str, int] = {}
        for check in v["checks"]:
            outcomes[check["outcome"]] = outcomes.get(check["outcome"], 0) + 1
        for day in v["rolled_up"]:
            outcomes["checks on " + day["day"]] = day["checks"]
        if outcomes:
            lines.append("    checks: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
    return "\n".join(lines)


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<site> <url> [--json]"

    def short_desc(self) -> str:
        return "Show every version of a page with its field diff, and the checks between them"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="print the versions as JSON")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 2:
            fail("name a site and a URL", "scrapy history <site> <url>")
        assert self.settings is not None
        site, given = args
        with command_database(self.settings) as db, db.transaction() as tx:
            url = Canonicalizer().canonical(given) or given
            versions = history(tx, site, url) or (history(tx, site, given) if url != given else [])
        if not versions:
            fail(f"no version of {given} for site {site!r} in the database",
                 "scrapy records <site> lists the pages it holds")
        print(json.dumps(versions, ensure_ascii=False) if opts.json else render(url, versions))
