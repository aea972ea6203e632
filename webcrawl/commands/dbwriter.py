"""``scrapy dbwriter <crawl> [--until-idle]``: write the crawl state's events and checks into the
database, apart from any crawl process.

Every crawl process runs a writer already (webcrawl/extensions/database.py); this one is for a
database that was away while no crawl runs any more, for a catch-up after an outage, or to keep
the copy current from another machine. It is a member of the same consumer group, so it shares
the work with the crawls' writers, and takes over what a dead one held after
``WEBCRAWL_DATABASE_CLAIM_SECONDS``. ``--until-idle`` stops once nothing is left (what another
writer holds aside); without it, it runs until interrupted. Prints what it wrote.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand

from webcrawl.commands._database import command_database
from webcrawl.commands._errors import fail
from webcrawl.commands._oneshot import command_redis
from webcrawl.config import StateConfig
from webcrawl.database import DatabaseUnavailable, DatabaseWriter
from webcrawl.state.clearing import layout_of
from webcrawl.state.eventlog import EventLog
from webcrawl.state.streams import ShardStream

if TYPE_CHECKING:
    import argparse

__all__ = ["Command"]


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_LEVEL": "INFO"}

    def syntax(self) -> str:
        return "<crawl> [--until-idle]"

    def short_desc(self) -> str:
        return "Write a crawl's change events and checks into its database, apart from the crawl"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--until-idle", action="store_true",
                            help="stop once everything there is has been written")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            fail("name one crawl", "scrapy dbwriter <crawl> [--until-idle]")
        settings = self.settings
        assert settings is not None
        days = settings.getfloat("WEBCRAWL_DATABASE_CHECKS_RETENTION_DAYS", 30.0)
        with command_redis(settings, args[0], must_exist=True) as state, \
                command_database(settings, must_exist=False) as db:
            layout = layout_of(state.client, StateConfig.from_settings(settings, args[0]).crawl_name)
            writer = DatabaseWriter(
                db, EventLog(state.client, layout), ShardStream(state.client, layout, "checks"),
                consumer=f"dbwriter-{socket.gethostname()}-{os.getpid()}",
                batch=settings.getint("WEBCRAWL_DATABASE_BATCH", 500),
                claim_after=settings.getfloat("WEBCRAWL_DATABASE_CLAIM_SECONDS", 60.0),
                checks_retention=days * 86_400.0)
            try:
                if opts.until_idle:
                    while writer.step():
                        pass
                else:
                    writer.run(threading.Event())
            except DatabaseUnavailable as exc:
                fail(str(exc))
            except KeyboardInterrupt:
                pass
            counts = writer.counts
            print(f"wrote {counts.events} events and {counts.checks} checks of crawl "
                  f"{layout.crawl!r} in {counts.batches} transactions")
