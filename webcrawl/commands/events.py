"""``scrapy events <site> [--since T] [--kind K] [-o FILE]``: the change events of a site, as JSON lines.

Read from the crawl state's durable record of events (:mod:`webcrawl.state.eventlog`), in the
order they were recorded, one JSON object per line with exactly the fields of the event contract
(docs/events.md). ``--since T`` keeps events detected at or after T (seconds since the epoch or
an ISO 8601 date-time, UTC unless it names a zone); ``--kind`` keeps the named kinds (a comma
list, or the option repeated). The events go to stdout, or are appended to ``-o FILE``
(``-O FILE`` overwrites it), as Scrapy's own feed options do: so a crawl's ``-O`` feed cut short by
a kill -9 is completed with ``scrapy events <site> --since <its last detected_at> -o <feed>``
(events already in the file come again; their ``event_id`` tells them apart).

The crawl holding the site is the site's own (``scrapy crawl <site>``) unless ``--crawl`` or
``WEBCRAWL_CRAWL_NAME`` names another. The crawl state keeps events
``WEBCRAWL_EVENTS_RETENTION_SECONDS`` (7 days); older ones come from the crawl's database
(docs/database.md) when there is one. Mistakes end with one ``scrapy: error:`` line and exit
status 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from scrapy.commands import ScrapyCommand

from webcrawl.change.events import KINDS
from webcrawl.commands._database import command_database, database_url_of
from webcrawl.commands._errors import fail
from webcrawl.commands._oneshot import command_redis
from webcrawl.commands._times import parse_time
from webcrawl.config import StateConfig
from webcrawl.state.clearing import crawl_has_keys, known_crawls, layout_of
from webcrawl.state.eventlog import EventLog

if TYPE_CHECKING:
    import argparse

__all__ = ["Command", "write_events"]


def _kinds(values: list[str] | None) -> frozenset[str] | None:
    if not values:
        return None
    kinds = frozenset(k.strip() for v in values for k in v.split(",") if k.strip())
    unknown = sorted(kinds - set(KINDS))
    if unknown:
        fail(f"--kind {','.join(unknown)}: not an event kind", f"kinds: {', '.join(KINDS)}")
    return kinds


def write_events(events: Any, out: TextIO, *, site: str | None = None,
                 kinds: frozenset[str] | None = None) -> int:
    """Write ``events`` (dicts) as JSON lines, those of ``site`` and ``kinds`` only; the count."""
    written = 0
    for event in events:
        if site is not None and event["site"] != site:
            continue
        if kinds is not None and event["kind"] not in kinds:
            continue
        out.write(json.dumps(event, ensure_ascii=False, sort_keys=False) + "\n")
        written += 1
    return written


def _older(settings: Any, site: str, since: float | None, log: EventLog) -> Iterator[dict[str, Any]]:
    """The events the database keeps from ``since`` until the crawl state's oldest kept one
    (none when there is no database)."""
    url = database_url_of(settings)
    if "://" not in url and not Path(url).exists():
        return
    first = next(log.events(), None)
    until = first["detected_at"] if first is not None else None
    from webcrawl.database.queries import events_since

    with command_database(settings) as db, db.transaction() as tx:
        kept = list(events_since(tx, site, since, until))
    yield from kept


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<site> [--since T] [--kind K] [-o FILE]"

    def short_desc(self) -> str:
        return "Write a site's change events (new, changed, removed, moved, restored) as JSON lines"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--since", metavar="T", help="events detected at or after T (epoch "
                            "seconds or ISO 8601)")
        parser.add_argument("--kind", action="append", metavar="K",
                            help=f"only these kinds ({', '.join(KINDS)}; comma list or repeated)")
        parser.add_argument("--crawl", metavar="NAME", help="the crawl holding the site "
                            "(default: the site's own)")
        parser.add_argument("-o", "--output", metavar="FILE", help="append to FILE")
        parser.add_argument("-O", "--overwrite-output", metavar="FILE", help="write FILE anew")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            fail("name one site", "scrapy events <site> [--since T] [--kind K] [-o FILE]")
        assert self.settings is not None
        site = args[0]
        since = parse_time(opts.since, "--since") if opts.since else None
        kinds = _kinds(opts.kind)
        if opts.output and opts.overwrite_output:
            fail("-o and -O both given", "append with -o FILE or write anew with -O FILE")
        name = opts.crawl or site
        with command_redis(self.settings, name, must_exist=True) as state:
            crawl = StateConfig.from_settings(self.settings, name).crawl_name
            layout = layout_of(state.client, crawl)
            if not crawl_has_keys(state.client, layout):
                known = known_crawls(state.client)
                fail(f"no crawl {crawl!r} in {state.where}",
                     f"crawls there: {', '.join(known)}" if known else "no crawl has run there yet")
            log = EventLog(state.client, layout)
            events = chain(_older(self.settings, site, since, log), log.events(since))
            path = opts.output or opts.overwrite_output
            if path is None:
                try:
                    write_events(events, sys.stdout, site=site, kinds=kinds)
                    sys.stdout.flush()
                except BrokenPipeError:  # the reader stopped (| head): nothing more to say
                    sys.stdout = None  # type: ignore[assignment]  # no flush error at exit
                return
            try:
                with open(path, "a" if opts.output else "w", encoding="utf-8") as out:
                    write_events(events, out, site=site, kinds=kinds)
            except OSError as exc:
                fail(f"cannot write {path}: {exc.strerror or exc}")
