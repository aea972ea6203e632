"""``scrapy exclude <domain> [--remove | --list]``: the shared exclusion list.

A domain on the list is never fetched again by any crawl on this Redis: every crawl's queued
requests and revisits for it are dropped at once, and every running process obeys within a tick. The Redis is the crawl's (``WEBCRAWL_REDIS_URL``
or the embedded server under ``WEBCRAWL_DATA_DIR``); an embedded server this command started is
stopped again when it exits.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webcrawl.commands._errors import fail
from webcrawl.commands._oneshot import command_redis
from webcrawl.state.exclusion import exclude, excluded, known_crawls, normalise, unexclude
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<domain> [--remove] | --list"

    def short_desc(self) -> str:
        return "Exclude a domain from every crawl at once (or list / remove exclusions)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--remove", action="store_true", help="take the domain off the list")
        parser.add_argument("--list", action="store_true", help="print the excluded domains")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if opts.list == bool(args) or len(args) > 1:
            raise UsageError("name one domain, or --list")
        assert self.settings is not None
        if args:
            try:
                normalise(args[0])  # a bad name fails before any server is started
            except ValueError as exc:
                fail(str(exc))
        with command_redis(self.settings, "exclude") as redis_:
            client = redis_.client
            if opts.list:
                print("\n".join(excluded(client)) or "(no excluded domains)")
                return
            scripts = ScriptSet(client)
            queues = [CrawlQueue(client, scripts, layout, cap=0, default_delay=0, lease_seconds=1)
                      for layout in known_crawls(client)]
            if opts.remove:
                found = unexclude(client, args[0], queues)
                print(f"{args[0]}: {'removed from' if found else 'was not on'} the exclusion list")
            else:
                dropped = exclude(client, args[0], queues)
                print(f"{args[0]}: excluded; {dropped} queued requests dropped")
