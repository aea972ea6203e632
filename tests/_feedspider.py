"""A site spider for the feed tests: it logs the ``job`` a pushed entry's ``meta`` carried, so a
test can see that the meta reached the response."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import Response

from webcrawl.spiders.site import SiteSpider


class JobLoggingSpider(SiteSpider):
    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        job = response.meta.get("job")
        if job is not None:
            self.logger.info("fed page %s for job %s", response.url, job)
        yield from super().parse(response, **kwargs)
