"""Resolve the links of one page against its base URL, straight to canonical form.

``urljoin`` parses both URLs and rebuilds the result on every call. Here the base is parsed once
per page, and each common reference form becomes an absolute URL by concatenation, which the
canonicaliser then normalises (resolving dot segments, as RFC 3986's merge does):

====================  ===============================
``https://h/p``        taken as it is
``//h/p``              base scheme + ``:`` + href
``/p``                 base origin + href
``?q``                 base origin + base path + href
``p``, ``../p``        base origin + base directory + href
``#f`` or empty        the base URL itself
``mailto:``, ...       ``None`` (not http or https)
====================  ===============================

Anything else (whitespace or non-ASCII inside, backslashes, ``http:p`` without slashes, an empty
authority as in ``//`` or ``https://``) goes to ``urllib.parse.urljoin`` before canonicalisation,
so odd hrefs cost more but resolve as urljoin resolves them. One deliberate difference: ``?``
gives the base with an empty query (RFC 3986, browsers), where urljoin keeps the base's query.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from webcrawl.parse.canonical import Canonicalizer

__all__ = ["Base"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# Printable ASCII that needs no special treatment when glued onto a base URL.
_PLAIN_HREF = re.compile(r"[!#-\[\]-~]*")
_HTML_SPACE = " \t\n\r\f"
_ORIGIN = re.compile(r"(https?)://([^/?#]*)([^?#]*)(?:\?([^#]*))?")


class Base:
    """The base URL of one page: ``<base href>`` resolved against the page URL, canonical.

    ``url`` is the canonical base; ``join(href)`` gives the canonical absolute URL of a link, or
    ``None`` when it is not an http(s) URL or cannot be parsed.
    """

    __slots__ = ("canon", "url", "memo", "_scheme", "_origin", "_path", "_dir")

    def __init__(self, canon: Canonicalizer, page_url: str, base_href: str | None = None) -> None:
        self.canon = canon
        base = page_url
        if base_href is not None and base_href.strip(_HTML_SPACE):
            try:
                base = urljoin(page_url, base_href.strip(_HTML_SPACE))
            except ValueError:
                base = page_url
        url = canon.canonical(base)
        if url is None and base is not page_url:
            url = canon.canonical(page_url)  # an unusable <base href> is ignored, as browsers do
        if url is None:
            raise ValueError(f"page URL {page_url!r} is not an absolute http(s) URL")
        self.url = url
        m = _ORIGIN.match(url)
        assert m is not None  # canonical URLs always match
        self._scheme = m[1]
        self._origin = f"{m[1]}://{m[2]}"
        self._path = m[3]
        self._dir = m[3][: m[3].rfind("/") + 1]
        # Raw href -> result, shared by every page in the same directory: navigation links
        # repeat across a site's pages. Callers may read it directly to skip a call.
        self.memo = canon.dir_memo(self._origin + self._dir)

    def join(self, href: str) -> str | None:
        try:
            return self.memo[href]
        except KeyError:
            pass
        url, directory_only = self._join(href)
        if directory_only:
            self.canon.remember(self.memo, href, url)
        return url

    def _join(self, href: str) -> tuple[str | None, bool]:
        """The result, and whether it depends on the base directory alone (memoisable)."""
        href = href.strip(_HTML_SPACE)
        if not href or href[0] == "#":
            return self.url, False
        if not _PLAIN_HREF.fullmatch(href):
            return self._urljoin(href), False
        canonical = self.canon.canonical
        first = href[0]
        if first == "/":
            if href[1:2] == "/":
                if href[2:3] in ("", "/", "?", "#"):
                    return self._urljoin(href), False  # empty authority: urljoin's reading
                return canonical(f"{self._scheme}:{href}"), True
            return canonical(self._origin + href), True
        if first == "?":
            return canonical(self._origin + self._path + href), False
        m = _SCHEME.match(href)
        if m is None:
            return canonical(self._origin + self._dir + href), True
        scheme = m.group().lower()
        if scheme in ("http:", "https:"):
            after = len(scheme)
            if href[after : after + 2] == "//" and href[after + 2 : after + 3] not in ("", "/", "?", "#"):
                return canonical(href), True
            # "http:g", "https://": relative to the base, as urljoin reads them.
            return self._urljoin(href), False
        return None, True

    def _urljoin(self, href: str) -> str | None:
        try:
            return self.canon.canonical(urljoin(self.url, href))
        except ValueError:
            return None
