"""One request and its answer on a connection of the asyncio HTTP/1.1 client: what Scrapy's
HTTP/1.1 handler does with an answer, kept to the same contract.

- ``DOWNLOAD_MAXSIZE`` (``download_maxsize`` in meta): an answer announcing more, or sending
  more, is cancelled with a WARNING and :class:`~scrapy.exceptions.DownloadCancelledError`;
  ``DOWNLOAD_WARNSIZE`` (``download_warnsize``) logs one WARNING.
- The ``headers_received`` and ``bytes_received`` signals are sent (when anything listens), and a
  :class:`~scrapy.exceptions.StopDownload` raised by a handler stops the download: the response
  so far is returned with the ``download_stopped`` flag, or raised with the exception when
  ``fail`` is true.
- A body cut short (the connection ends before its announced length or its last chunk) is data
  loss: :class:`~scrapy.exceptions.ResponseDataLossError`, or with ``DOWNLOAD_FAIL_ON_DATALOSS``
  off (``download_fail_on_dataloss``) the partial body with the ``dataloss`` flag.
- ``download_latency`` in meta: from the start of the download to the whole head.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from pydispatch import dispatcher
from scrapy import signals
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadFailedError,
    ResponseDataLossError,
    StopDownload,
)
from scrapy.http import Headers
from scrapy.utils._download_handlers import check_stop_download, get_maxsize_msg, get_warnsize_msg

from webcrawl.net.http1_reader import AnswerReader, BadAnswer

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from webcrawl.net.http1_pool import Connection

logger = logging.getLogger(__name__)

__all__ = ["Answer", "AnswerExchange", "Stale"]


class Stale(Exception):
    """A kept connection ended before any byte of the answer: the request may go again."""


class Answer:
    """What the exchange hands back: the head, the body and the flags."""

    __slots__ = ("status", "headers", "body", "flags", "stop")

    def __init__(self, status: int, headers: Headers, body: bytes, flags: list[str] | None,
                 stop: StopDownload | None = None) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.flags = flags
        self.stop = stop


def _listened(crawler: Crawler | None, signal: object) -> bool:
    """Whether anything listens to ``signal`` now (asked at each answer: a handler connected
    during the crawl is heard from the next answer on)."""
    if crawler is None:
        return False
    return any(True for _ in dispatcher.getAllReceivers(crawler.signals.sender, signal))


class AnswerExchange:
    """The listener of one answer's :class:`AnswerReader`; its future gets an :class:`Answer`
    or the exception that ended the download."""

    __slots__ = ("connection", "request", "crawler", "future", "reader", "maxsize", "warnsize",
                 "warned", "fail_on_dataloss", "started_at", "status", "headers", "chunks",
                 "received", "on_bytes")

    def __init__(self, connection: Connection, request: Request, crawler: Crawler | None,
                 future: asyncio.Future[Answer], *, maxsize: int, warnsize: int,
                 fail_on_dataloss: bool, started_at: float) -> None:
        self.connection = connection
        self.request = request
        self.crawler = crawler
        self.future = future
        self.reader = AnswerReader(self, head_request=request.method == "HEAD")
        self.maxsize = maxsize
        self.warnsize = warnsize
        self.warned = False
        self.fail_on_dataloss = fail_on_dataloss
        self.started_at = started_at
        self.status = 0
        self.headers: Headers | None = None
        self.chunks: list[bytes] = []
        self.received = 0
        self.on_bytes = False

    # The connection's side.

    def feed(self, data: bytes) -> None:
        if self.future.done():
            return
        try:
            self.reader.feed(data)
        except BadAnswer as exc:
            self._fail(DownloadFailedError(f"{self.request.url}: {exc}"))
        except StopDownload as stop:
            self._stopped(stop)
        except Exception as exc:  # noqa: BLE001 (maxsize, a signal handler's error): the download's end
            self._fail(exc)

    def lost(self, exc: BaseException | None) -> None:
        if self.future.done():
            return
        reader = self.reader
        if reader.closed():
            return  # a body that ran to the connection's end: done() answered
        if self.headers is None:
            if not reader.started and self.connection.answers:
                self.future.set_exception(Stale())
            else:
                reason = f": {exc}" if exc else ""
                self.future.set_exception(DownloadFailedError(
                    f"{self.request.url}: the connection closed before the whole answer head"
                    f"{reason}"))
            return
        if self.fail_on_dataloss:
            self.future.set_exception(ResponseDataLossError(
                f"{self.request.url}: the connection closed {self.received} bytes into the body, "
                f"before its end"))
            return
        self.future.set_result(Answer(self.status, self.headers, b"".join(self.chunks),
                                      ["dataloss"]))

    # The reader's side.

    def head(self, status: int, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.request.meta["download_latency"] = time.monotonic() - self.started_at
        self.status = status
        self.headers = scrapy_headers = Headers(headers)
        expected = self.reader.length  # None for chunked bodies, whatever Content-Length says
        if expected is not None:
            if self.maxsize and expected > self.maxsize:
                self._cancel(expected, expected=True)
            if self.warnsize and expected > self.warnsize:
                self._warn(expected, expected=True)
        if _listened(self.crawler, signals.headers_received):
            self._signal(signals.headers_received, headers=scrapy_headers, body_length=expected)
        self.on_bytes = _listened(self.crawler, signals.bytes_received)

    def data(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.received += len(chunk)
        if self.on_bytes:
            self._signal(signals.bytes_received, data=chunk)
        if self.maxsize and self.received > self.maxsize:
            self.chunks.clear()
            self._cancel(self.received, expected=False)
        if self.warnsize and self.received > self.warnsize:
            self._warn(self.received, expected=False)

    def done(self) -> None:
        assert self.headers is not None
        reader = self.reader
        self.connection.release(reader.keep_alive and not reader.rest)
        self.future.set_result(Answer(self.status, self.headers, b"".join(self.chunks), None))

    # Helpers.

    def _signal(self, signal: object, **kwargs: Any) -> None:
        assert self.crawler is not None
        stop = check_stop_download(signal, self.crawler, self.request, **kwargs)
        if stop is not None:
            raise stop

    def _cancel(self, size: int, *, expected: bool) -> None:
        message = get_maxsize_msg(size, self.maxsize, self.request, expected=expected)
        logger.warning(message)
        raise DownloadCancelledError(message)

    def _warn(self, size: int, *, expected: bool) -> None:
        if not self.warned:
            self.warned = True
            logger.warning(get_warnsize_msg(size, self.warnsize, self.request, expected=expected))

    def _fail(self, exc: BaseException) -> None:
        self.connection.abort()
        if not self.future.done():
            self.future.set_exception(exc)

    def _stopped(self, stop: StopDownload) -> None:
        self.connection.abort()
        if not self.future.done() and self.headers is not None:
            self.future.set_result(Answer(self.status, self.headers, b"".join(self.chunks),
                                          None, stop))
