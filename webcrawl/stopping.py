"""How a crawl ends within a bounded time: the two signals and the request mark that the stop
extension (:mod:`webcrawl.extensions.stop`) and the components that hold requests share.

When the engine starts closing the spider (``CLOSESPIDER_TIMEOUT``, a stop signal, the end of a
cycle), Scrapy waits for every request it already holds. Some of those may never end on their
own soon: one waiting for its host's turn behind a long Crawl-delay, one whose body drips a byte
now and then. So:

1. :data:`stop_started` is sent at once: components holding requests that are not on the wire
   yet (the host spacing middleware) give them back at once instead of sending them.
2. :data:`grace_over` is sent ``WEBCRAWL_STOP_GRACE_SECONDS`` later: the download handler cancels
   the downloads still running.

A request given back carries ``meta[GIVEN_BACK] = True`` and fails with :class:`Cancelled` (an
``IgnoreRequest``: no error is logged, no host is backed off). It was not fetched: its lease goes
back to the crawl's queue, so the next run fetches it.
"""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request

__all__ = ["GIVEN_BACK", "Cancelled", "give_back", "grace_over", "stop_started"]

#: Sent (no arguments) when the engine starts closing the spider.
stop_started = object()
#: Sent (no arguments) when the grace period after :data:`stop_started` is over.
grace_over = object()

#: ``Request.meta`` key: the request was not fetched because the crawl stopped.
GIVEN_BACK = "webcrawl_given_back"


class Cancelled(IgnoreRequest):
    """A request given back because the crawl is stopping."""


def give_back(request: Request) -> Request:
    """Mark ``request`` as not fetched because the crawl stopped; returns it."""
    request.meta[GIVEN_BACK] = True
    return request
