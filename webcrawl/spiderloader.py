"""A spider loader that makes every site file a spider, next to the project's Python spiders.

Set ``SPIDER_LOADER_CLASS = "webcrawl.spiderloader.SiteSpiderLoader"`` (webcrawl's project does;
its add-on does before any spider loader is built, :mod:`webcrawl.addon`): ``scrapy list``,
``scrapy crawl <site>`` and scrapyd's listspiders then see the Python spiders of
``SPIDER_MODULES`` (through Scrapy's own loader) and one spider per site file.

Broken site files never stop other spiders: :meth:`SiteSpiderLoader.list` leaves them out and
warns once per file (:class:`SiteConfigWarning`), and :meth:`SiteSpiderLoader.load` of a broken
site raises :class:`SiteLoadError` (a :class:`SiteConfigError` that ``scrapy`` prints as a one-line
usage error, exit status 2) before any request is made. An unknown name raises
:class:`UnknownSpiderError` (a ``KeyError``, as Scrapy's loaders raise) whose message suggests the
closest names and says where site files are looked for.
"""

from __future__ import annotations

import builtins
import difflib
import os
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError
from scrapy.spiderloader import SpiderLoader
from scrapy.utils.misc import load_object

from webcrawl.settingtypes import PATH_SEPARATOR, SettingError, get_list
from webcrawl.sites import SiteConfig, SiteConfigError, SiteFile, check_sites, sites_dirs
from webcrawl.spiders.site import SiteSpider

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.settings import BaseSettings

__all__ = [
    "SiteConfigWarning",
    "SiteLoadError",
    "SiteSpiderLoader",
    "UnknownSpiderError",
    "placeholder_lookup",
    "site_settings",
    "spider_class_for",
]


class SiteConfigWarning(UserWarning):
    """A site file is broken; its spider is left out of the list."""


class SiteLoadError(SiteConfigError, UsageError):
    """A broken site file asked for by name. Being a ``UsageError``, ``scrapy crawl`` prints its
    message alone (no traceback) and exits with status 2."""

    print_help = False  # UsageError.__init__ is not reached through ValueError's


class UnknownSpiderError(KeyError):
    """No spider of that name. A ``KeyError`` (Scrapy's loader protocol), printed as its message
    alone: ``Spider not found: x (did you mean 'y'?); site files are looked for in ...``."""

    def __init__(self, name: str, known: builtins.list[str], sites_dir: object) -> None:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        guess = (" (did you mean " + " or ".join(repr(c) for c in close) + "?)") if close else ""
        where = (f"WEBCRAWL_SITES_DIR={sites_dir!r}" if sites_dir
                 else "WEBCRAWL_SITES_DIR (not set)")
        listing = "'scrapy list' shows every name"
        # Scrapy's own wording first ("Spider not found: x"), for whoever matches on it.
        super().__init__(f"Spider not found: {name}{guess}; site files are looked for in the "
                         f"bundled webcrawl/sites/ folder and in {where}; {listing}")
        self.name, self.suggestions = name, close

    def __str__(self) -> str:  # KeyError's own str() is the repr of its argument
        return str(self.args[0])


def spider_class_for(site: SiteConfig) -> type[SiteSpider]:
    """The spider class of ``site``: a subclass of its ``spider`` class (or of
    :class:`SiteSpider`) with ``name``, ``site``, ``allowed_domains`` and the site's Scrapy
    settings attached.

    Raises :class:`SiteConfigError` (field ``spider``) when that class cannot be imported or does
    not subclass :class:`SiteSpider`.
    """
    base: Any = SiteSpider
    if site.spider is not None:
        expected = ("the dotted path of a Python class that subclasses "
                    "webcrawl.spiders.site.SiteSpider")
        try:
            base = load_object(site.spider)
        except Exception as exc:  # user code: any import-time failure is a config error
            raise SiteConfigError(site.source, "spider", site.spider, expected,
                                  problem=f"got {site.spider!r}, which cannot be imported "
                                          f"({type(exc).__name__}: {exc})") from None
        if not (isinstance(base, type) and issubclass(base, SiteSpider)):
            raise SiteConfigError(site.source, "spider", site.spider, expected,
                                  problem=f"got {site.spider!r}, which is not a SiteSpider "
                                          "subclass")
    # A subclass per site: two sites may share one Python spider class without sharing state.
    return type(base.__name__, (base,), {
        "__module__": base.__module__,
        "__qualname__": f"{base.__qualname__}[{site.name}]",
        "__doc__": f"The spider of the site {site.name!r} ({site.source}).",
        "name": site.name,
        "site": site,
        "allowed_domains": list(site.allowed_domains),
        # The site file wins over the Python class: it is where users set these.
        "custom_settings": {**(base.custom_settings or {}), **site_settings(site)},
    })


def site_settings(site: SiteConfig) -> dict[str, Any]:
    """The Scrapy settings a site file decides (applied at ``spider`` priority)."""
    timeout = site.limits.timeout_seconds
    return {
        "USER_AGENT": site.politeness.user_agent,
        "COOKIES_ENABLED": site.cookies_enabled,
        "DOWNLOAD_MAXSIZE": site.limits.max_download_bytes,
        **({"DOWNLOAD_TIMEOUT": timeout} if timeout is not None else {}),
        # The ready queue enforces the site's minimum delay per host, across processes.
        "WEBCRAWL_DOMAIN_DELAY_SECONDS": site.politeness.min_delay_seconds,
        "WEBCRAWL_FRONTIER_MAX_PER_DOMAIN": site.limits.frontier_cap,
        "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": [str(n) for n in site.allowed_private_networks],
        **site.network.settings(),  # proxies and TLS (network.* in the site file)
    }


def _sites_dirs(settings: BaseSettings) -> tuple[Any, ...]:
    """The folders of ``WEBCRAWL_SITES_DIR`` (``os.pathsep``-separated, or a list, or a JSON
    list); :class:`SettingError` naming the setting's value as given if one is not a folder."""
    raw = settings.get("WEBCRAWL_SITES_DIR")
    folders = get_list(settings, "WEBCRAWL_SITES_DIR", separator=PATH_SEPARATOR)
    for folder in folders:
        if not os.path.isdir(os.path.expanduser(folder)):
            raise SettingError(f"WEBCRAWL_SITES_DIR={raw!r}: {folder!r} is not a folder; "
                               "expected folders holding site files (*.toml)")
    return sites_dirs(folders)


def placeholder_lookup(settings: BaseSettings) -> Callable[[str], str | None]:
    """Where site files' ``${NAME}`` placeholders take values: the settings (so ``-s NAME=...``
    and scrapyd's ``setting=NAME=...`` work), then the environment."""

    def lookup(name: str) -> str | None:
        value = settings.get(name)
        value = os.environ.get(name) if value is None else value
        return None if value is None else str(value)

    return lookup


class SiteSpiderLoader:
    """Scrapy's ``SpiderLoaderProtocol`` over ``SPIDER_MODULES`` and the site files.

    Site files: the bundled ones and those in ``WEBCRAWL_SITES_DIR``; ``${NAME}`` placeholders
    in them are resolved from the settings first, then the environment. All files are checked
    when the loader is built, so each outcome is in :attr:`site_files`.
    """

    def __init__(self, settings: BaseSettings) -> None:
        self._python = SpiderLoader.from_settings(settings)
        self._sites_dir = settings.get("WEBCRAWL_SITES_DIR")
        dirs = _sites_dirs(settings)
        lookup = placeholder_lookup(settings)
        self.site_files: list[SiteFile] = []
        self._sites: dict[str, type[SiteSpider]] = {}
        # Broken files by the name they declare (these shadow a Python spider of that name:
        # running the other one silently would be worse) or by stem (these shadow nothing).
        self._broken: dict[str, SiteConfigError] = {}
        self._broken_stems: dict[str, SiteConfigError] = {}
        for outcome in check_sites(dirs, lookup):
            outcome = self._to_spider(outcome)
            self.site_files.append(outcome)
            if outcome.error is not None:
                broken = self._broken if outcome.declared else self._broken_stems
                broken.setdefault(outcome.name, outcome.error)

    def _to_spider(self, outcome: SiteFile) -> SiteFile:
        if outcome.site is None:
            return outcome
        site = outcome.site
        try:
            spidercls = spider_class_for(site)
            if site.name in self._python.list():
                other = self._python.load(site.name)
                if not issubclass(spidercls, other):
                    raise SiteConfigError(
                        site.source, "name", site.name,
                        "a name that no Python spider of SPIDER_MODULES uses",
                        problem=f"{site.name!r} is also the name of the Python spider "
                                f"{other.__module__}.{other.__qualname__}")
        except SiteConfigError as error:
            return replace(outcome, site=None, error=error)
        self._sites[site.name] = spidercls
        return outcome

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        """Called by ``scrapy.spiderloader.get_spider_loader`` with the project settings."""
        return cls(settings)

    def load(self, spider_name: str) -> type[Spider]:
        """The spider class named ``spider_name``.

        Raises :class:`SiteLoadError` for a broken site file, :class:`UnknownSpiderError` (a
        ``KeyError``) for an unknown name.
        """
        if spider_name in self._sites:
            return self._sites[spider_name]
        error = self._broken.get(spider_name)
        if error is None and spider_name not in self._python.list():
            error = self._broken_stems.get(spider_name)
        if error is not None:
            raise SiteLoadError(error.source, error.field, error.value, error.expected,
                                problem=error.problem)
        if spider_name not in self._python.list():
            raise UnknownSpiderError(spider_name, self.names(), self._sites_dir)
        return self._python.load(spider_name)

    def names(self) -> builtins.list[str]:
        """What :meth:`list` returns, without warning about broken site files."""
        names = [n for n in self._python.list() if n not in self._broken and n not in self._sites]
        return names + builtins.list(self._sites)

    def list(self) -> list[str]:
        """Python spiders and valid sites; warns once per broken site file."""
        for outcome in self.site_files:
            if outcome.error is not None:
                # Attributed to the site file itself (line 0: nothing to echo), not to whichever
                # Scrapy command called list().
                warnings.warn_explicit(f"site file left out: {outcome.error}", SiteConfigWarning,
                                       filename=outcome.source, lineno=0)
        return self.names()

    def find_by_request(self, request: Request) -> builtins.list[str]:  # self.list shadows it
        """Names of the spiders whose allowed domains cover ``request``'s URL."""
        names = [n for n in self._python.find_by_request(request) if n not in self._sites]
        return names + [n for n, cls in self._sites.items() if cls.handles_request(request)]
