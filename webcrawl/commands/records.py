"""``scrapy records <site> [--as-of T] [-o FILE]``: the local copy, as it stands or as it stood at T.

One line per page with a record (docs/database.md): ``site``, ``canonical_url``, ``url``,
``page_type``, ``state`` (``alive``, ``removed`` or ``moved``), ``moved_to``, ``record``,
``first_seen``, ``last_checked`` and ``last_changed`` (epoch seconds). A removed or moved page keeps
its last record; a page whose move the crawl followed is one line, at its new URL. JSON lines on
stdout, or written to ``-o FILE``: CSV when its name ends in ``.csv`` (the record as JSON in one
column). T: epoch seconds or an ISO 8601 date-time (UTC unless it names a zone).
"""

from __future__ import annotations

import csv
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from scrapy.commands import ScrapyCommand

from webcrawl.commands._database import command_database
from webcrawl.commands._errors import fail
from webcrawl.commands._times import parse_time
from webcrawl.database.queries import COPY_FIELDS, copy_as_of, copy_now

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable

__all__ = ["Command", "write_lines"]


def write_lines(lines: Iterable[dict[str, Any]], out: TextIO, *, as_csv: bool = False) -> int:
    """Write the copy's lines as JSON lines or CSV; how many."""
    count = 0
    writer = csv.DictWriter(out, COPY_FIELDS) if as_csv else None
    if writer is not None:
        writer.writeheader()
    for line in lines:
        if writer is not None:
            writer.writerow({**line, "record": json.dumps(line["record"], ensure_ascii=False,
                                                           sort_keys=True)})
        else:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
        count += 1
    return count


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<site> [--as-of T] [-o FILE]"

    def short_desc(self) -> str:
        return "Write a site's local copy (every page's record and state), now or as of a time"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--as-of", metavar="T", help="the copy as it stood at T")
        parser.add_argument("-o", "--output", metavar="FILE",
                            help="write to FILE (CSV when it ends in .csv)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            fail("name one site", "scrapy records <site> [--as-of T] [-o FILE]")
        assert self.settings is not None
        at = parse_time(opts.as_of, "--as-of") if opts.as_of else None
        with command_database(self.settings) as db, db.transaction() as tx:
            lines = copy_now(tx, args[0]) if at is None else copy_as_of(tx, args[0], at)
            if opts.output is None:
                try:
                    write_lines(lines, sys.stdout)
                    sys.stdout.flush()
                except BrokenPipeError:  # the reader stopped (| head): nothing more to say
                    sys.stdout = None  # type: ignore[assignment]  # no flush error at exit
                return
            try:
                with open(opts.output, "w", encoding="utf-8", newline="") as out:
                    write_lines(lines, out, as_csv=opts.output.lower().endswith(".csv"))
            except OSError as exc:
                fail(f"cannot write {opts.output}: {exc.strerror or exc}")
