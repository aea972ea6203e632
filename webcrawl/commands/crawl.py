"""``scrapy crawl``, with webcrawl's checks first.

Before anything starts, the crawl's settings are validated and the Redis named by
``WEBCRAWL_REDIS_URL`` must answer; any problem ends the command with one line naming the setting
or the server (exit status 2), not a traceback, and before any request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError
from scrapy.utils.misc import load_object

from webcrawl.config import StateConfig
from webcrawl.scheduler import ReadyQueueScheduler
from webcrawl.state.connection import RedisUnavailable, connect

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) == 1:
            self.preflight(args[0])
        super().run(args, opts)

    def preflight(self, spider_name: str) -> None:
        assert self.settings is not None
        scheduler = load_object(self.settings["SCHEDULER"])
        if not issubclass(scheduler, ReadyQueueScheduler):
            return
        try:
            config = StateConfig.from_settings(self.settings, spider_name)
            if config.redis_url:
                connect(config.redis_url).close()
        except (ValueError, RedisUnavailable) as exc:
            raise UsageError(str(exc), print_help=False) from exc
