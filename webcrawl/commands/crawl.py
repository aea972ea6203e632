"""``scrapy crawl``, with webcrawl's checks first and one-line errors.

Before the crawler process exists (so before Scrapy's start-up log), the command builds the spider
loader, finds the spider, applies its site file's settings to a copy of the settings and checks
them: the crawl-state settings (:class:`~webcrawl.config.StateConfig`), the list settings
(:data:`~webcrawl.settingtypes.LIST_SETTINGS`, which may be given as ``a,b`` or as a JSON list:
text values are turned into lists here, for every component), the stop conditions of a
continuous crawl given as settings (:mod:`webcrawl.commands._stops`: ``WEBCRAWL_STOP_AFTER_CYCLES``,
``WEBCRAWL_STOP_AFTER_SECONDS``, applied to the spider's site) and, when ``WEBCRAWL_REDIS_URL`` is
set, that its Redis answers. Any problem ends the command with one line,
``scrapy: error: <what>; <hint>``, and exit status 2, before any request.

A mistake only a component notices while the crawler is built (its ``from_crawler``, the DNS
resolver when the reactor starts) is printed the same way once the process has stopped; an
exception that is not a user's mistake (see :func:`~webcrawl.commands._errors.user_error_message`)
keeps its traceback and exit status 1.

Exit status: 0 when the crawl ran, even if it fetched nothing (the closing extension's WARNING
says why); 1 when it failed to start for another reason; 2 for a usage or setting error.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.addons import AddonManager
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader
from scrapy.utils.misc import load_object

from webcrawl.commands._errors import fail, one_line, user_error_message
from webcrawl.commands._logging import skip_unprinted_records
from webcrawl.commands._stops import stops_from, with_stops
from webcrawl.config import StateConfig
from webcrawl.heap import collect_less
from webcrawl.net.addresses import parse_networks
from webcrawl.scheduler import ReadyQueueScheduler
from webcrawl.settingtypes import LIST_SETTINGS, get_list, parse_list
from webcrawl.state.client import connect

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings, Settings

logger = logging.getLogger(__name__)


class Command(ScrapyCrawlCommand):
    def long_desc(self) -> str:
        return (
            "Run a spider: a site file (webcrawl/sites/ and the folders of WEBCRAWL_SITES_DIR) "
            "or a Python spider. A site runs one cycle, or cycle after cycle in continuous mode "
            "(budget.continuous in the site file, or -s WEBCRAWL_CYCLE_CONTINUOUS=true) until "
            "WEBCRAWL_STOP_AFTER_CYCLES or WEBCRAWL_STOP_AFTER_SECONDS (or the site file's stop "
            "conditions, or Ctrl-C). Its settings are checked before anything "
            "starts: a mistake ends the command with one 'scrapy: error:' line, exit status 2. "
            "A crawl that ran exits 0, even if it fetched nothing (a warning at the end says "
            "why); 1 if it could not start."
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        # Before the crawler's components are imported and built: start-up makes most objects.
        try:
            threshold = StateConfig.gc_threshold_of(self.settings)
        except ValueError as exc:
            fail(user_error_message(exc, self.settings) or str(exc))
        collect_less(threshold)
        _lists_from_text(self.settings)
        if len(args) == 1:
            self.preflight(args[0])

    def preflight(self, spider_name: str) -> None:
        """Check what can be checked without starting anything; exit with one line if wrong."""
        assert self.settings is not None
        settings = self.settings.copy()
        try:
            AddonManager.load_pre_crawler_settings(settings)
            loader = get_spider_loader(settings)
            spidercls = loader.load(spider_name)
        except KeyError as exc:  # the loader's "no such spider", with its hints
            fail(str(exc) if exc.args and isinstance(exc.args[0], str)
                 else f"Spider not found: {spider_name}")
        except Exception as exc:
            message = user_error_message(exc, settings)
            if message is None:
                raise
            fail(message)
        spidercls.update_settings(settings)  # the site file's settings, at spider priority
        try:
            check_settings(settings, spidercls.name or spider_name)
            with_stops(spidercls, settings)
        except Exception as exc:
            message = user_error_message(exc, settings)
            if message is None:
                raise
            fail(message)

    def _create_crawler(self, spidercls: Any) -> Any:
        """The crawler, its site carrying the stop settings (:mod:`webcrawl.commands._stops`)."""
        assert self.crawler_process is not None and self.settings is not None
        if isinstance(spidercls, str) and stops_from(self.settings):
            spidercls = with_stops(self.crawler_process.spider_loader.load(spidercls), self.settings)
        return super()._create_crawler(spidercls)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) < 1:
            raise UsageError
        if len(args) > 1:
            raise UsageError("running 'scrapy crawl' with more than one spider is not supported")
        assert self.crawler_process is not None
        try:
            crawler = self._create_crawler(args[0])
        except KeyError as exc:  # checked in preflight; kept for callers that skip it
            fail(str(exc))
        # Scrapy installs its root handler while the crawler starts: once the engine runs.
        crawler.signals.connect(skip_unprinted_records, signal=signals.engine_started)
        watch = _BootstrapWatch(self.settings)
        watch.follow(self.crawler_process.crawl(crawler, **opts.spargs))
        try:
            self.crawler_process.start()
        except Exception as exc:  # built when the reactor starts: the DNS resolver
            message = user_error_message(exc, self.settings)
            if message is None:
                raise
            fail(message)
        if watch.user_error is not None:
            fail(watch.user_error)
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1


def check_settings(settings: BaseSettings, spider_name: str) -> None:
    """Raise the first user error in ``settings`` (a ``ValueError`` naming the setting, or
    :class:`~webcrawl.state.client.RedisUnavailable`)."""
    parse_networks(get_list(settings, "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"))
    get_list(settings, "WEBCRAWL_HEALTH_HTTP_CODES", item=int)
    from webcrawl.net.handler import http_client  # the crawl imports it anyway, a moment later

    http_client(settings)
    scheduler = load_object(settings["SCHEDULER"])
    if not (isinstance(scheduler, type) and issubclass(scheduler, ReadyQueueScheduler)):
        return  # another scheduler (a baseline run): its settings are its own
    config = StateConfig.from_settings(settings, spider_name)
    if config.redis_url:
        connect(config.redis_url)[0].close()


def _lists_from_text(settings: Settings) -> None:
    """Turn list settings given as text (``a,b`` or a JSON list) into lists, at the same
    priority, so every component reads a list whichever way it reads the setting."""
    for name, separator in LIST_SETTINGS.items():
        value = settings.get(name)
        if not isinstance(value, str):
            continue
        try:
            parsed = parse_list(name, value, separator=separator)
        except ValueError as exc:
            fail(str(exc))
        settings.set(name, parsed, priority=settings.getpriority(name) or "cmdline")


class _BootstrapWatch:
    """Catches a user's mistake raised while the crawler is being built, so it can be printed
    as one line after the process stops; anything else is logged with its traceback."""

    def __init__(self, settings: BaseSettings | None) -> None:
        self.settings = settings
        self.user_error: str | None = None

    def follow(self, crawl: Any) -> None:
        if isinstance(crawl, asyncio.Future):
            crawl.add_done_callback(self._task_done)
        elif hasattr(crawl, "addErrback"):  # a Deferred (Scrapy's Twisted-only process)
            crawl.addErrback(self._failed)

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()  # retrieved: asyncio no longer reports it itself
        if exc is not None and not self._note(exc):
            logger.error("The crawl could not start", exc_info=exc)

    def _failed(self, failure: Any) -> Any:
        return None if self._note(failure.value) else failure

    def _note(self, exc: BaseException) -> bool:
        message = user_error_message(exc, self.settings)
        if message is None:
            return False
        self.user_error = one_line(message)
        return True
