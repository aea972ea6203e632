"""Log records nobody prints are not built.

Scrapy's root handler filters by ``LOG_LEVEL``, but Scrapy leaves the root logger at ``NOTSET``
and its own ``scrapy`` logger at ``DEBUG``: ``Logger.isEnabledFor(DEBUG)`` says yes, so every
DEBUG line (one per response, "Crawled (200) ...", and one per item, "Scraped from ..." or
"Dropped: ...") builds a ``LogRecord`` that the handlers then drop. On a crawl of small pages that
was 2% of the CPU. Once the crawl's logging is in place, :func:`skip_unprinted_records` raises
the root logger and the ``scrapy`` logger to the lowest level among the root logger's handlers
(Scrapy's own and its ``LogCount`` extension's counter, both at ``LOG_LEVEL``), when every one of
them has a level: a handler someone added without one takes every record.
"""

from __future__ import annotations

import logging

__all__ = ["skip_unprinted_records"]


def skip_unprinted_records() -> bool:
    """Raise the root and ``scrapy`` loggers to the lowest level of the root's handlers; whether
    it did."""
    from scrapy.utils import log

    handler = getattr(log, "_scrapy_root_handler", None)
    root = logging.getLogger()
    if handler is None or handler not in root.handlers:
        return False
    lowest = min(h.level for h in root.handlers)
    if lowest == logging.NOTSET:
        return False
    raised = False
    for logger in (root, logging.getLogger("scrapy")):
        if logger.level < lowest:
            logger.setLevel(lowest)
            raised = True
    return raised
