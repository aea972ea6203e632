"""PLACEHOLDER generic spider for site files (to be replaced by the generic SiteSpider).

Only the contract the spider loader relies on: a ``scrapy.Spider`` subclass with a class attribute
``site`` (the validated :class:`~webcrawl.sites.SiteConfig`, ``None`` on this base class) and no
``name`` of its own, so Scrapy's loader never lists the base class; the spider loader builds one
subclass per site file with ``name = site.name`` and ``site`` set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import scrapy

from webcrawl.sites import SiteConfig


class SiteSpider(scrapy.Spider):
    """The generic spider of a site file. ``site`` is set on each per-site subclass."""

    site: ClassVar[SiteConfig | None] = None

    async def start(self) -> AsyncIterator[Any]:
        if self.site is None:
            raise ValueError(f"{type(self).__name__} has no site: build it with the spider loader")
        for url in self.site.seeds:
            yield scrapy.Request(url)

    def parse(self, response: scrapy.http.Response, **kwargs: Any) -> Any:
        return None
