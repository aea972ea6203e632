"""Hostile and broken answers, counted and reported in one WARNING line each, never as a crash.

A site can answer with a body over the size limit, a body cut short (a Content-Length it does not
keep, a chunked body that stops), a compressed body that does not decompress, a decompression
bomb, or a body so slow it runs into ``DOWNLOAD_TIMEOUT``. Scrapy reports most of these as
"Error downloading" at ERROR level with a traceback, which reads like a fault of the crawler.
Here each such answer, once it is final (no retry left), becomes:

- one WARNING line naming the URL and what was wrong (for over-sized bodies and bombs, the line
  Scrapy already writes; the others are written here);
- the stats ``webcrawl/hostile`` and ``webcrawl/hostile/{kind}``, kinds ``oversized``,
  ``truncated``, ``undecodable``, ``bomb`` and ``timeout``;
- an ``IgnoreRequest``, which Scrapy drops quietly (an errback still receives it).

ERROR stays for the crawler's own faults. robots.txt fetches are left to the robots middleware,
which turns any failure into its RFC 9309 answer.

Two middlewares: :class:`HostileAnswerMiddleware` (above RetryMiddleware, 550: it sees each
failure first and lets through those Retry will retry) and :class:`DecodingMiddleware`, which
replaces Scrapy's HttpCompressionMiddleware at 590 (undecodable bodies and bombs fail in its
``process_response``, where no ``process_exception`` sees them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.utils.misc import load_object
from twisted.internet.error import TimeoutError as TxTimeoutError

from webcrawl import meta as M
from webcrawl import stopping

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["DecodingMiddleware", "HostileAnswer", "HostileAnswerMiddleware"]

STATS = "webcrawl/hostile"


class HostileAnswer(IgnoreRequest):
    """A hostile or broken answer, reported and counted; ``kind`` names what was wrong."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _count(stats: StatsCollector | None, kind: str) -> None:
    if stats is not None:
        stats.inc_value(STATS)
        stats.inc_value(f"{STATS}/{kind}")


class HostileAnswerMiddleware:
    """Final failures of over-sized, cut-short and timed-out answers: one WARNING, a stat, and
    an ``IgnoreRequest`` (see the module docstring)."""

    def __init__(self, stats: StatsCollector | None, *, retry_enabled: bool = True,
                 retry_times: int = 2, retried: tuple[type[BaseException], ...] = ()) -> None:
        self.stats = stats
        self.retry_enabled = retry_enabled
        self.retry_times = retry_times
        self.retried = retried

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        retried = tuple(x if isinstance(x, type) else load_object(x)
                        for x in settings.getlist("RETRY_EXCEPTIONS"))
        return cls(crawler.stats, retry_enabled=settings.getbool("RETRY_ENABLED"),
                   retry_times=settings.getint("RETRY_TIMES"), retried=retried)

    def _will_retry(self, request: Request, exception: BaseException) -> bool:
        """What RetryMiddleware (next in line) will do with this failure."""
        meta = request.meta
        if not self.retry_enabled or meta.get("dont_retry") or not isinstance(exception, self.retried):
            return False
        return meta.get("retry_times", 0) < meta.get("max_retry_times", self.retry_times)

    def process_exception(self, request: Request, exception: BaseException) -> None:
        if request.meta.get(M.PURPOSE) == "robots" or request.meta.get(stopping.GIVEN_BACK):
            return
        if isinstance(exception, DownloadCancelledError):
            # Scrapy's HTTP/1.1 handler cancels only over-sized bodies, and says so itself.
            _count(self.stats, "oversized")
            raise HostileAnswer("oversized", f"{request.url}: body over DOWNLOAD_MAXSIZE")
        if isinstance(exception, ResponseDataLossError):
            kind, what = "truncated", "the body was cut short (fewer bytes than announced)"
        elif isinstance(exception, (DownloadTimeoutError, TxTimeoutError)):
            kind, what = "timeout", f"no whole answer within the download timeout ({exception})"
        else:
            return
        if self._will_retry(request, exception):
            return
        _count(self.stats, kind)
        tries = request.meta.get("retry_times", 0) + 1
        logger.warning("Hostile answer (%s) from %s after %d attempt(s): %s", kind, request.url,
                       tries, what)
        raise HostileAnswer(kind, f"{request.url}: {what}")


class DecodingMiddleware(HttpCompressionMiddleware):
    """Scrapy's HttpCompressionMiddleware, with undecodable bodies and bombs reported and
    counted (see the module docstring). Replace Scrapy's with it at 590."""

    def process_response(self, request: Request, response: Response) -> Request | Response:
        try:
            return super().process_response(request, response)
        except IgnoreRequest:
            _count(self.stats, "bomb")  # Scrapy logged its WARNING line
            raise
        except Exception as exc:  # whatever the decoder (gzip, zlib, brotli, zstd) raised
            encoding = b",".join(response.headers.getlist("Content-Encoding")).decode("latin-1")
            _count(self.stats, "undecodable")
            logger.warning("Hostile answer (undecodable) from %s: its %s body does not decode "
                           "(%s: %s)", response.url, encoding or "encoded", type(exc).__name__, exc)
            raise HostileAnswer("undecodable", f"{response.url}: undecodable body") from None
