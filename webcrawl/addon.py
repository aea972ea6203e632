"""webcrawl as a Scrapy add-on: one line in any Scrapy project's settings turns it on.

    ADDONS = {"webcrawl.addon.Addon": 0}

The add-on applies the settings of webcrawl's own project (:mod:`webcrawl.settings`, the one
source of the values: nothing is copied here, only which settings go where):

- before any crawler exists (:meth:`Addon.update_pre_crawler_settings`): the spider loader that
  makes site files spiders (``SPIDER_LOADER_CLASS``, with ``WEBCRAWL_SITES_DIR``) and the DNS
  resolver that checks addresses when connecting (``TWISTED_DNS_RESOLVER``). Scrapy's ``crawl``
  runs this hook; its ``list`` does not, so webcrawl's package replaces that command with one
  that does (:mod:`webcrawl.commands.list`, a ``scrapy.commands`` entry point): ``scrapy list``
  and scrapyd's ``listspiders.json`` show the site files with the add-on line alone;
- :data:`REQUIRED`: what webcrawl's components need to work as designed (its scheduler, the
  guarded download handlers, Scrapy's robots.txt middleware off because webcrawl's replaces it,
  no Scrapy per-slot delay because the crawl's ready queue paces hosts across processes). Set at
  the project's priority, so they win over the project's settings.py (a fresh ``scrapy
  startproject`` sets ``ROBOTSTXT_OBEY = True`` and ``DOWNLOAD_DELAY = 1``), not over ``-s`` or a
  spider's ``custom_settings``;
- :data:`COMPONENTS`: webcrawl's middlewares, pipelines and extensions, merged into the project's
  own component dictionaries (the Scrapy components webcrawl replaces are switched off there);
- :data:`BASES`: in Scrapy's base component lists as the project has them, Scrapy's remote
  control extension and cookies middleware replaced by stand-ins that import them only when their
  settings turn them on (:mod:`webcrawl.optional`);
- :data:`DEFAULTS`: the safe defaults (no telnet console, no remote control, no cookies, a
  download size limit, at most 10 redirects, a deadline per answer), the scheduler's concurrency,
  the feeds' fields, the stats collector (:mod:`webcrawl.stats`), and the three ``WEBCRAWL_*``
  settings read from the environment, at the add-on priority: a project that sets one of these
  keeps its value.

Translated, so that a project's intent survives: ``ROBOTSTXT_OBEY = True`` is honoured by
webcrawl's robots.txt middleware (always on unless ``WEBCRAWL_ROBOTS_ENABLED = False``); a
``DOWNLOAD_DELAY`` the project set becomes ``WEBCRAWL_DOMAIN_DELAY_SECONDS`` (the delay between
two requests to a host across every process) unless that is set too.

Left to the project (:data:`PROJECT_ONLY`): its name, spider modules, ``USER_AGENT`` (a site
file names its own), ``LOG_LEVEL``, and ``COMMANDS_MODULE``: Scrapy finds commands before any
add-on runs, so webcrawl's commands (``report``, ``crawlstate``, ``exclude``, ``body``,
``checksites`` and its ``crawl`` with one-line errors) need ``COMMANDS_MODULE =
"webcrawl.commands"`` in the project's settings.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.misc import load_object

from webcrawl import optional
from webcrawl import settings as reference

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["BASES", "COMPONENTS", "DEFAULTS", "PRE_CRAWLER", "PROJECT_ONLY", "REQUIRED", "Addon"]

logger = logging.getLogger(__name__)

#: Read before any crawler is built: the spider loader (and the site folders it reads) and the
#: reactor's resolver.
PRE_CRAWLER = ("SPIDER_LOADER_CLASS", "TWISTED_DNS_RESOLVER")
PRE_CRAWLER_DEFAULTS = ("WEBCRAWL_SITES_DIR",)
#: What webcrawl's components need; set at the project's priority.
REQUIRED = ("SCHEDULER", "ROBOTSTXT_OBEY", "DOWNLOAD_DELAY", "DOWNLOAD_DELAY_JITTER",
            "AUTOTHROTTLE_ENABLED", "DOWNLOAD_HANDLERS")
#: Component priority dictionaries, merged into the project's.
COMPONENTS = ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "EXTENSIONS", "ITEM_PIPELINES")
#: Scrapy's base component lists, with webcrawl.optional's stand-ins in place of the components
#: they replace (the rest of the project's base lists untouched).
BASES = ("EXTENSIONS_BASE", "DOWNLOADER_MIDDLEWARES_BASE")
#: Defaults a project may change; set at the add-on priority.
DEFAULTS = ("WEBCRAWL_REDIS_URL", "WEBCRAWL_DATA_DIR", "CONCURRENT_REQUESTS",
            "CONCURRENT_REQUESTS_PER_DOMAIN", "FEED_EXPORT_FIELDS", "TELNETCONSOLE_ENABLED",
            "REMOTE_CONTROL_ENABLED", "COOKIES_ENABLED", "REDIRECT_MAX_TIMES", "DOWNLOAD_MAXSIZE",
            "DOWNLOAD_WARNSIZE", "DOWNLOAD_TIMEOUT", "FEED_EXPORT_ENCODING", "STATS_CLASS")
#: webcrawl's own project settings that another project keeps for itself.
PROJECT_ONLY = ("BOT_NAME", "SPIDER_MODULES", "NEWSPIDER_MODULE", "COMMANDS_MODULE", "USER_AGENT",
                "LOG_LEVEL")

_ADDON = SETTINGS_PRIORITIES["addon"]


def _value(name: str) -> Any:
    value = getattr(reference, name)
    return dict(value) if isinstance(value, dict) else value


def _set_required(settings: BaseSettings, name: str, value: Any = None) -> None:
    """At the project's priority: replaces the project's value, never a command line's."""
    settings.set(name, _value(name) if value is None else value, priority="project")


class Addon:
    """The webcrawl add-on (see the module docstring)."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        for name in PRE_CRAWLER:
            _set_required(settings, name)
        for name in PRE_CRAWLER_DEFAULTS:
            settings.set(name, _value(name), priority="addon")

    def update_settings(self, settings: BaseSettings) -> None:
        self.update_pre_crawler_settings(settings)
        self._translate(settings)
        for name in REQUIRED:
            if name == "DOWNLOAD_HANDLERS":  # per scheme: the project's other schemes stay
                _set_required(settings, name, {**settings.getdict(name), **_value(name)})
            else:
                _set_required(settings, name)
        for name in COMPONENTS:
            for path, order in _value(name).items():
                settings.set_in_component_priority_dict(name, load_object(path), order)
        for name in BASES:
            settings.set(name, optional.replace_in(dict(settings.getdict(name))),
                         priority=settings.getpriority(name) or "default")
        for name in DEFAULTS:
            settings.set(name, _value(name), priority="addon")

    @staticmethod
    def _translate(settings: BaseSettings) -> None:
        """Keep what the project meant by settings webcrawl replaces."""
        delay_priority = settings.getpriority("DOWNLOAD_DELAY") or 0
        delay = settings.getfloat("DOWNLOAD_DELAY", 0.0)
        if delay > 0 and delay_priority >= _ADDON and (
                settings.getpriority("WEBCRAWL_DOMAIN_DELAY_SECONDS") or 0) < _ADDON:
            settings.set("WEBCRAWL_DOMAIN_DELAY_SECONDS", delay, priority="addon")
        if settings.getbool("ROBOTSTXT_OBEY") and not settings.getbool("WEBCRAWL_ROBOTS_ENABLED",
                                                                        True):
            logger.warning("ROBOTSTXT_OBEY is on but WEBCRAWL_ROBOTS_ENABLED = False: robots.txt "
                           "is not obeyed (webcrawl's robots.txt middleware replaces Scrapy's)")
