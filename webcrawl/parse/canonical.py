"""Canonical absolute URLs, fast.

The canonical form is ``w3lib.url.canonicalize_url``'s (lower-case scheme and host, IDNA host,
fragment dropped, percent-encoding normalised, dot segments resolved, query arguments sorted by
key then value, blank values kept, empty query dropped), with two deliberate differences:

- the default port is removed (``http://h:80/`` and ``https://h:443/`` become ``http://h/``,
  ``https://h/``; w3lib keeps them), so one page has one canonical URL;
- session parameters are stripped: query arguments whose lower-cased key is in the configured set,
  and ``;key=value`` path parameters of the last segment likewise (``/a;jsessionid=X``).

Only ``http`` and ``https`` URLs have a canonical form here; everything else gives ``None``.

Why not just call w3lib: ``urljoin`` + ``canonicalize_url`` cost about 15 microseconds a link,
more than parsing the page. Most links on real pages are plain ASCII, so a fast path handles
URLs whose parts hold only characters that w3lib leaves unchanged, with plain string operations;
anything else (percent escapes in the path, non-ASCII, IPv6, user info, odd ports) goes through
w3lib itself. Results are memoised in a bounded dict: navigation links repeat on every page.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import quote_from_bytes, unquote_to_bytes

from w3lib.url import canonicalize_url

from webcrawl.parse.rules import DEFAULT_SESSION_PARAMS, PARSE_CACHE_SIZE

__all__ = ["Canonicalizer"]

# scheme://authority path ?query #fragment, for http(s) only; the authority without user info,
# IPv6 brackets or backslashes (those take the slow path).
_ABSOLUTE = re.compile(r"([hH][tT][tT][pP][sS]?)://([^/?#\\@\[\]]+)(?=[/?#]|\Z)([^?#]*)(?:\?([^#]*))?", re.S)
# w3lib's output: any authority (user info, IPv6), no fragment.
_CANONICAL = re.compile(r"(https?)://([^/?#]+)([^?#]*)(?:\?([^#]*))?", re.S)
_HOST_PORT = re.compile(r"([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::([1-9][0-9]{0,4})?)?")
# Characters that w3lib's path quoting leaves as they are ("%" excluded: escapes get normalised).
_PATH_PLAIN = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]*")
# Query arguments made of these survive w3lib's unquote_plus / quote_plus round trip unchanged.
_QUERY_PLAIN = re.compile(r"[A-Za-z0-9\-._~=&]*")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for a path starting with "/" (w3lib's algorithm)."""
    segments = path[1:].split("/")
    output: list[str] = []
    for segment in segments[:-1]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    last = segments[-1]
    if last == "..":
        if output:
            output.pop()
        output.append("")
    elif last == ".":
        output.append("")
    else:
        output.append(last)
    return "/" + "/".join(output)


def _quote_plus(raw: bytes) -> str:
    return quote_from_bytes(raw, safe=" ").replace(" ", "+")


class Canonicalizer:
    """``canonical(url)``: the canonical form of an absolute URL, or ``None`` when it is not an
    http(s) URL or cannot be parsed. Thread-compatible, not thread-safe (the memo is a dict)."""

    def __init__(self, session_params: frozenset[str] = DEFAULT_SESSION_PARAMS, cache_size: int = PARSE_CACHE_SIZE) -> None:
        self.session_params = frozenset(p.lower() for p in session_params)
        self.cache_size = cache_size
        self._cache: dict[str, str | None] = {}
        # Joined links memoised per base directory (see join.Base): one dict per directory,
        # all cleared together when their total size reaches cache_size.
        self._dir_memos: dict[str, dict[str, str | None]] = {}
        self._dir_memo_size = 0
        self.slow_count = 0  # URLs that needed w3lib: a figure for the benchmark, not a stat

    def canonical(self, url: str) -> str | None:
        try:
            return self._cache[url]
        except KeyError:
            pass
        result = self._fast(url)
        if result is False:
            self.slow_count += 1
            result = self._slow(url)
        if len(self._cache) >= self.cache_size:
            self._cache.clear()  # cheaper than LRU bookkeeping; the hot set refills in one page
        self._cache[url] = result
        return result

    def dir_memo(self, directory: str) -> dict[str, str | None]:
        """The memo of hrefs resolved against base directory ``directory`` (origin + path up
        to its last "/"). Only hrefs whose resolution depends on nothing else go in it."""
        try:
            return self._dir_memos[directory]
        except KeyError:
            memo: dict[str, str | None] = {}
            self._dir_memos[directory] = memo
            self._dir_memo_size += 1  # a directory counts too: a crawl may see millions
            return memo

    def remember(self, memo: dict[str, str | None], href: str, url: str | None) -> None:
        if self._dir_memo_size >= self.cache_size:
            for old in self._dir_memos.values():
                old.clear()  # the Base objects alive keep their (now empty) dicts valid
            self._dir_memos.clear()
            self._dir_memo_size = 0
        memo[href] = url
        self._dir_memo_size += 1

    def _fast(self, url: str) -> str | None | Literal[False]:
        """The canonical URL, or ``False`` when the URL needs the slow path."""
        m = _ABSOLUTE.match(url)
        if m is None:
            return False
        scheme, authority, path, query = m.groups()
        hp = _HOST_PORT.fullmatch(authority.lower())
        if hp is None or not _PATH_PLAIN.fullmatch(path):
            return False
        scheme = scheme.lower()
        host, port = hp.groups()
        if port is not None:
            if int(port) > 65535:
                return False
            if port != _DEFAULT_PORTS[scheme]:
                host = f"{host}:{port}"
        params = ""
        if ";" in path:
            # w3lib splits ";params" off the last segment before resolving dot segments.
            semi = path.find(";", path.rfind("/") + 1)
            if semi != -1:
                path, params = path[:semi], self._filter_params(path[semi + 1 :])
        if not path:
            path = "/"
        elif "/." in path:
            path = _remove_dot_segments(path)
        if params:
            path = f"{path};{params}"
        if query:
            if _QUERY_PLAIN.fullmatch(query):
                query = self._plain_query(query)
            else:
                query = self._query(query)
            if query:
                return f"{scheme}://{host}{path}?{query}"
        return f"{scheme}://{host}{path}"

    def _plain_query(self, query: str) -> str:
        # No "+" and no "%": each argument's bytes are its characters, so sorting the
        # (key, value) string pairs sorts them as w3lib sorts the decoded bytes.
        pairs = []
        session = self.session_params
        for arg in query.split("&"):
            if arg:
                key, _, value = arg.partition("=")
                if key.lower() not in session and not key.lower().startswith("aspsessionid"):
                    pairs.append((key, value))
        pairs.sort()
        # A value may hold "=", which quote_plus encodes.
        return "&".join(f"{k}={v}" if "=" not in v else f"{k}={v.replace('=', '%3D')}" for k, v in pairs)

    def _query(self, query: str) -> str:
        """w3lib's query rule on any text: split on "&", unquote_plus to bytes, sort, quote_plus."""
        pairs = []
        session = self.session_params
        for arg in query.split("&"):
            if arg:
                key, _, value = arg.partition("=")
                kb = unquote_to_bytes(key.replace("+", " "))
                lowered = kb.lower().decode("latin-1")
                if lowered not in session and not lowered.startswith("aspsessionid"):
                    pairs.append((kb, unquote_to_bytes(value.replace("+", " "))))
        pairs.sort()
        return "&".join(f"{_quote_plus(k)}={_quote_plus(v)}" for k, v in pairs)

    def _filter_params(self, params: str) -> str:
        """Drop session ``key=value`` items of a ``;``-separated path-parameter string."""
        items = params.split(";")
        kept = [p for p in items if p.partition("=")[0].lower() not in self.session_params]
        return params if len(kept) == len(items) else ";".join(kept)

    def _slow(self, url: str) -> str | None:
        try:
            canonical = canonicalize_url(url)
        except (ValueError, UnicodeError):
            return None
        # w3lib's output is ASCII and canonical: only the two differences remain to apply.
        m = _CANONICAL.fullmatch(canonical)
        if m is None:
            return None
        scheme, authority, path, query = m.groups()
        scheme = scheme.lower()
        default = ":" + _DEFAULT_PORTS[scheme]
        if authority.endswith(default):
            authority = authority[: -len(default)]
        semi = path.find(";", path.rfind("/") + 1)
        if semi != -1:
            params = self._filter_params(path[semi + 1 :])
            path = f"{path[:semi]};{params}" if params else path[:semi]
        if query:
            query = self._query(query)
        return f"{scheme}://{authority}{path}?{query}" if query else f"{scheme}://{authority}{path}"
