"""Log records nobody prints are not built.

Scrapy's root handler filters by ``LOG_LEVEL``, but Scrapy leaves the root logger at ``NOTSET``
and its own ``scrapy`` logger at ``DEBUG``: ``Logger.isEnabledFor(DEBUG)`` says yes, so every
DEBUG line (one per response, "Crawled (200) ...", and one per item, "Scraped from ..." or
"Dropped: ...") builds a ``LogRecord`` that the handler then drops. On a crawl of small pages that
was 2% of the CPU. Once the crawl's logging is in place, :func:`skip_unprinted_records` raises
the root logger and the ``scrapy`` logger to the level of Scrapy's handler, when that handler is
the only one on the root logger (a handler someone added may want more).
"""

from __future__ import annotations

import logging

__all__ = ["skip_unprinted_records"]


def skip_unprinted_records() -> bool:
    """Raise the root and ``scrapy`` loggers to Scrapy's root handler's level; whether it did."""
    from scrapy.utils import log

    handler = getattr(log, "_scrapy_root_handler", None)
    root = logging.getLogger()
    if handler is None or root.handlers != [handler]:
        return False
    raised = False
    for logger in (root, logging.getLogger("scrapy")):
        if logger.level < handler.level:
            logger.setLevel(handler.level)
            raised = True
    return raised
