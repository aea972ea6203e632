"""Scrapy components a crawl turns off, imported only when a crawl turns them back on.

Scrapy imports every component its settings name before the component can say it is off
(``NotConfigured``), even one set to ``None`` in a project's own component setting. Two of its
defaults cost a crawl's start-up more than their weight when they are off, as they are in
webcrawl's settings: the remote control extension imports aiohttp's client and web server (about
0.1 s), and the cookies middleware imports ``tldextract`` (about 0.04 s). Each stand-in below
takes its Scrapy component's place and order in Scrapy's base lists (:func:`replace_in`, used by
``webcrawl.settings`` and the add-on), reads the component's own setting, and only when that
setting is on imports and builds Scrapy's component, which then runs exactly as it would have. A
project that turns Scrapy's component off by its class path (``None``) turns it off through its
setting instead (``COOKIES_ENABLED``, ``REMOTE_CONTROL_ENABLED``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["CookiesMiddleware", "RemoteControl", "replace_in"]


class _WhenEnabled:
    """Builds ``component`` when the boolean setting ``flag`` is on; otherwise it is off."""

    component: ClassVar[str]
    flag: ClassVar[str]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.getbool(cls.flag):
            raise NotConfigured  # off as configured: nothing to log
        return build_from_crawler(load_object(cls.component), crawler)


class RemoteControl(_WhenEnabled):
    """Scrapy's remote control extension, when ``REMOTE_CONTROL_ENABLED`` is on."""

    component = "scrapy.extensions.remote_control.RemoteControl"
    flag = "REMOTE_CONTROL_ENABLED"


class CookiesMiddleware(_WhenEnabled):
    """Scrapy's cookies middleware, when ``COOKIES_ENABLED`` is on."""

    component = "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"
    flag = "COOKIES_ENABLED"


STAND_INS: dict[str, str] = {
    RemoteControl.component: f"{__name__}.RemoteControl",
    CookiesMiddleware.component: f"{__name__}.CookiesMiddleware",
}


def replace_in(base: dict[str, int | None]) -> dict[str, int | None]:
    """``base`` (a Scrapy ``*_BASE`` component list) with each component above replaced by its
    stand-in at the same order."""
    return {STAND_INS.get(path, path): order for path, order in base.items()}
