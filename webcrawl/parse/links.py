"""Links of a parsed page: ``a[href]`` and ``area[href]``, canonical, deduplicated, filtered.

Counters (keys relative to the caller's stats prefix, each link counted once):

- ``links/found``: elements with an href;
- ``links/self``: resolved to the page itself (``#top``, ``""``);
- ``links/duplicate``: resolved to another URL already seen on this page (filtered or not);
- ``links/filtered/<reason>``: ``scheme`` (mailto:, javascript:, unparsable), ``depth``,
  ``length``, ``scope``, ``extension``, ``pattern``, ``trap/repeat``, ``trap/deep``,
  ``trap/calendar``;
- ``links/kept``: returned to the caller.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from webcrawl.parse.join import Base
from webcrawl.parse.rules import PARSE_CACHE_SIZE, LinkRules
from webcrawl.parse.traps import TrapDetector

__all__ = ["LinkFilter", "extract_links"]

LINK_SELECTOR = "a[href], area[href]"


class LinkFilter:
    """``reason(url)``: why a canonical http(s) URL is refused (``length``, ``scope``,
    ``extension``, ``pattern``, ``trap/<kind>``) or ``None`` to keep it. Depth is the caller's.

    Verdicts are memoised per URL and scope per host, in bounded dicts: the same navigation
    links come back on every page of a site."""

    def __init__(self, rules: LinkRules, cache_size: int = PARSE_CACHE_SIZE) -> None:
        self.rules = rules
        self.traps = TrapDetector(rules.traps)
        self.cache_size = cache_size
        self._verdicts: dict[str, str | None] = {}
        self._hosts: dict[str, bool] = {}
        self._domains = rules.allowed_domains
        self._dotted = tuple("." + d for d in rules.allowed_domains)

    def reason(self, url: str) -> str | None:
        try:
            return self._verdicts[url]
        except KeyError:
            pass
        verdict = self._judge(url)
        if len(self._verdicts) >= self.cache_size:
            self._verdicts.clear()
        self._verdicts[url] = verdict
        return verdict

    def in_scope(self, host: str) -> bool:
        """A host (lower case, without port) is in scope when it is an allowed domain or one of
        its subdomains; every host is when no domain is configured."""
        if not self._domains:
            return True
        try:
            return self._hosts[host]
        except KeyError:
            pass
        ok = host in self._domains or host.endswith(self._dotted)
        if len(self._hosts) >= self.cache_size:
            self._hosts.clear()
        self._hosts[host] = ok
        return ok

    def _judge(self, url: str) -> str | None:
        rules = self.rules
        if len(url) > rules.max_url_length:
            return "length"
        authority_start = url.find("//") + 2
        path_start = url.find("/", authority_start)
        authority = url[authority_start:path_start]
        host = authority.rpartition("@")[2]
        if not host.startswith("["):
            host = host.partition(":")[0]
        if not self.in_scope(host):
            return "scope"
        path = url[path_start:].partition("?")[0]
        last = path[path.rfind("/") + 1 :].partition(";")[0]
        dot = last.rfind(".")
        if dot > 0 and last[dot + 1 :].lower() in rules.denied_extensions:
            return "extension"
        if rules.denied_regex is not None and rules.denied_regex.search(url):
            return "pattern"
        trap = self.traps.reason(url)
        if trap is not None:
            return "trap/" + trap
        return None


def extract_links(
    tree: Any, base: Base, page_url: str, link_filter: LinkFilter, depth: int, counts: Counter[str]
) -> list[str]:
    """The kept links of ``tree`` (a selectolax parser), in document order, each once.

    ``page_url`` is the page's canonical URL (links to it are not returned); ``depth`` is the
    page's own depth. ``counts`` is incremented as described in the module docstring."""
    nodes = tree.css(LINK_SELECTOR)
    counts["links/found"] += len(nodes)
    max_depth = link_filter.rules.max_depth
    if max_depth is not None and depth + 1 > max_depth:
        if nodes:
            counts["links/filtered/depth"] += len(nodes)
        return []
    join = base.join
    reason_of = link_filter.reason
    # "#section" links are the most common kind on documentation pages: no join needed when
    # the base is the page itself. Raw hrefs repeat within a page and across the pages of a
    # directory: base.memo is looked up inline before paying for a call.
    hash_is_self = base.url == page_url
    memo = base.memo
    seen: set[str] = set()
    kept: list[str] = []
    duplicates = scheme = self_links = 0
    for node in nodes:
        href = node.attrs.get("href") or ""
        if hash_is_self and href[:1] == "#":
            self_links += 1
            continue
        try:
            url = memo[href]
        except KeyError:
            url = join(href)
        if url is None:
            scheme += 1
        elif url == page_url:
            self_links += 1
        elif url in seen:
            duplicates += 1
        else:
            seen.add(url)
            reason = reason_of(url)
            if reason is None:
                kept.append(url)
            else:
                counts["links/filtered/" + reason] += 1
    if scheme:
        counts["links/filtered/scheme"] += scheme
    if self_links:
        counts["links/self"] += self_links
    if duplicates:
        counts["links/duplicate"] += duplicates
    counts["links/kept"] += len(kept)
    return kept
