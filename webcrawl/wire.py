"""Bytes of a request and of a response as they crossed the wire: what bandwidth billing and the
conditional middleware's evidence count.

Both are summed from the parts' lengths, without building the bytes: Scrapy's
``request_httprepr`` builds the request's whole text (and a ``Headers`` walk normalises every
key again), for a length asked of every fetch.
"""

from __future__ import annotations

from http.client import responses as http_reasons
from typing import TYPE_CHECKING

from scrapy.utils.httpobj import urlparse_cached

if TYPE_CHECKING:
    from scrapy.http import Request, Response
    from scrapy.http.headers import Headers

__all__ = ["request_wire_bytes", "wire_bytes"]


def _header_bytes(headers: Headers) -> int:
    """``Name: value\\r\\n`` for every value (the stored keys are normalised already)."""
    return sum(len(key) + len(value) + 4 for key, values in dict.items(headers) for value in values)


def wire_bytes(response: Response) -> int:
    """Bytes of the response as sent: status line, headers, body (still content-encoded here)."""
    size = 15 + len(http_reasons.get(response.status, ""))  # "HTTP/1.1 200 OK\r\n"
    return size + _header_bytes(response.headers) + 2 + len(response.body)


def request_wire_bytes(request: Request) -> int:
    """Bytes of the request as :func:`scrapy.utils.request.request_httprepr` writes it: request
    line, ``Host``, headers, blank line, body."""
    parts = urlparse_cached(request)
    path = len((parts.path or "/").encode())
    if parts.params:
        path += 1 + len(parts.params.encode())
    if parts.query:
        path += 1 + len(parts.query.encode())
    line = len(request.method.encode()) + 1 + path + 11  # "GET /path HTTP/1.1\r\n"
    host = 8 + len((parts.hostname or "").encode())  # "Host: h\r\n"
    return line + host + _header_bytes(request.headers) + 2 + len(request.body)
