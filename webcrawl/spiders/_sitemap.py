"""Reading sitemaps: a fetched body in, its kind and ``(loc, lastmod)`` entries out.

No Scrapy engine here, only its gzip and sitemap readers: :func:`read_sitemap` takes the body as
the downloader left it (``Content-Encoding: gzip`` already undone by Scrapy's
HttpCompressionMiddleware) and unpacks gzip files (``.xml.gz``, recognised by the gzip magic
number whatever the URL or the Content-Type says). The XML is read by lxml with entities never
resolved and recovery on (Scrapy's :class:`~scrapy.utils.sitemap.Sitemap`), so entity bombs and
external entities do nothing and a cut-off file still yields the entries before the cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timezone
from typing import Literal

from lxml import etree
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap

__all__ = ["GZIP_MAGIC", "SitemapDocument", "SitemapError", "parse_lastmod", "read_sitemap"]

GZIP_MAGIC = b"\x1f\x8b"
#: A gzip inside a gzip is unpacked (a .xml.gz sent with Content-Encoding: gzip twice over);
#: deeper nesting is an error, not a loop.
_MAX_GZIP_LAYERS = 2
# W3C datetime, the sitemap protocol's format: YYYY, YYYY-MM, YYYY-MM-DD, then optionally
# Thh:mm[:ss[.s+]] and a zone (Z or +hh:mm). Also read: a space for the T, a zone without colon.
_W3C = re.compile(
    r"(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[T ](?P<H>\d{2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.(?P<f>\d+))?)?"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})?)?)?)?"
)

Kind = Literal["urlset", "sitemapindex"]


class SitemapError(ValueError):
    """The body is no sitemap; ``kind`` names why: ``gzip`` (corrupt), ``too_large``
    (unpacked beyond the size limit), ``xml`` (not XML at all), ``root`` (another XML root)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class SitemapDocument:
    """A read sitemap: ``kind`` and its entries as (loc, lastmod in seconds since the epoch or
    ``None``), in document order; ``invalid_lastmod`` counts lastmods that could not be read;
    ``gzipped`` tells whether the body was a gzip file."""

    kind: Kind
    entries: tuple[tuple[str, float | None], ...]
    invalid_lastmod: int = 0
    gzipped: bool = False


def parse_lastmod(text: str | None) -> float | None:
    """A W3C datetime as seconds since the epoch (no zone: UTC), ``None`` when unreadable."""
    if not text:
        return None
    match = _W3C.fullmatch(text.strip())
    if match is None:
        return None
    g = match.groupdict()
    try:
        zone = UTC
        if g["tz"] and g["tz"] != "Z":
            offset = datetime.strptime(g["tz"].replace(":", ""), "%z").utcoffset()
            zone = timezone(offset) if offset is not None else UTC
        moment = datetime(
            int(g["y"]), int(g["m"] or 1), int(g["d"] or 1), int(g["H"] or 0), int(g["M"] or 0),
            int(g["S"] or 0), int((g["f"] or "0")[:6].ljust(6, "0")), tzinfo=zone,
        )
    except ValueError:  # month 13, day 31 of a short month, hour 25, ...
        return None
    return moment.timestamp()


def _unpack(body: bytes, max_bytes: int) -> tuple[bytes, bool]:
    gzipped = False
    for _ in range(_MAX_GZIP_LAYERS):
        if not body.startswith(GZIP_MAGIC):
            break
        gzipped = True
        try:
            body = gunzip(body, max_size=max_bytes)
        except _DecompressionMaxSizeExceeded:
            raise SitemapError("too_large", f"unpacks to more than {max_bytes} bytes") from None
        except (OSError, EOFError, ValueError) as exc:
            raise SitemapError("gzip", f"corrupt gzip data ({exc})") from None
    if body.startswith(GZIP_MAGIC):
        raise SitemapError("gzip", f"gzip nested more than {_MAX_GZIP_LAYERS} deep")
    return body, gzipped


def read_sitemap(body: bytes, max_bytes: int = 0) -> SitemapDocument:
    """Read a sitemap or sitemap index. ``max_bytes`` bounds the unpacked size of gzip bodies
    (0: no bound). Raises :class:`SitemapError`; never anything else for any body."""
    body, gzipped = _unpack(body, max_bytes)
    try:
        sitemap = Sitemap(body)
        kind = sitemap.type
        raw = list(sitemap)
    except (etree.XMLSyntaxError, StopIteration, ValueError) as exc:
        raise SitemapError("xml", f"not XML ({type(exc).__name__}: {exc})") from None
    if kind not in ("urlset", "sitemapindex"):
        raise SitemapError("root", f"root element <{kind}>, expected <urlset> or <sitemapindex>")
    entries: list[tuple[str, float | None]] = []
    invalid = 0
    for entry in raw:
        loc = entry.get("loc", "").strip()
        if not loc:
            continue
        stamp = entry.get("lastmod")
        lastmod = parse_lastmod(stamp)
        if stamp and lastmod is None:
            invalid += 1
        entries.append((loc, lastmod))
    return SitemapDocument(kind, tuple(entries), invalid, gzipped)  # type: ignore[arg-type]
