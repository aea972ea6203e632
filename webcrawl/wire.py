"""Bytes of a response as it crossed the wire: what bandwidth billing and the conditional
middleware's evidence count."""

from __future__ import annotations

from http.client import responses as http_reasons
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.http import Response

__all__ = ["wire_bytes"]


def wire_bytes(response: Response) -> int:
    """Bytes of the response as sent: status line, headers, body (still content-encoded here)."""
    size = 15 + len(http_reasons.get(response.status, ""))  # "HTTP/1.1 200 OK\r\n"
    for key, values in response.headers.items():
        size += sum(len(key) + len(v) + 4 for v in values)
    return size + 2 + len(response.body)
