"""What a site spider reads of a page's place in the lifecycle: the pages a *lister* shows, which
known pages to recheck when it stops showing them, and how a known page's revisit was redirected.

A lister is a hub (a page without a page type linking at least one typed page), a page whose type
has listing rules, a seed, or a sitemap of at most :data:`MAX_KEPT_LINKS` typed pages. The typed
pages it shows are kept in the crawl state with its record; read again, the known pages it no
longer shows are rechecked at once (they died or moved: a move is then seen from its old URL
before the listing's link to its new URL is fetched as a new page), at most
:data:`MAX_RECHECKS` a reading and a page at most once per :data:`RECHECK_MEMORY_SECONDS` in a
process (several listers may stop showing it; one fetch tells its fate), and not at all while
this process's own revisit of it is in flight or, for :data:`FETCHED_MEMORY_SECONDS`, after that
revisit found it gone or moved (its revisit told its fate: a listing read just after a moved
page's revisit no longer shows it, and rightly so). A revisit that found the page as it was
tells nothing of a later disappearance, so the page is rechecked as usual.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from webcrawl import meta as M

if TYPE_CHECKING:
    from scrapy.http import Response

    from webcrawl.parse import PageParser, ParseResult
    from webcrawl.sites import SiteConfig

__all__ = ["FETCHED_MEMORY_SECONDS", "GONE_STATUSES", "MAX_KEPT_LINKS", "MAX_RECHECKS", "PERMANENT_REDIRECTS",
           "RECHECK_MEMORY_SECONDS", "Listers", "redirected"]

#: Answers of a known page that say it is gone (handed to ``parse``, not filtered).
GONE_STATUSES = [404, 410]
#: Redirects that move a page for good.
PERMANENT_REDIRECTS = frozenset((301, 308))
#: Known pages a lister's reading rechecks at most (those it stopped showing).
MAX_RECHECKS = 20
#: A page rechecked is not rechecked again by this process for this long.
RECHECK_MEMORY_SECONDS = 3600.0
#: A page this process revisited this recently is not rechecked: that revisit told its fate.
FETCHED_MEMORY_SECONDS = 60.0
#: Typed pages a sitemap may list and still be kept for its next reading's rechecks.
MAX_KEPT_LINKS = 10_000
#: Pages remembered as rechecked before the memory is pruned.
_RECHECK_MEMORY_SIZE = 50_000


def redirected(response: Response) -> tuple[str | None, str | None, bool]:
    """How a known page's revisit reached ``response``: ``(moved_from, moved_url, temporary)``:
    the known page (canonical, and as fetched) when only permanent redirects led here, and
    whether a temporary one did. Discovery requests and answers without redirects: nothing."""
    meta = response.meta
    urls = meta.get("redirect_urls")
    if not urls or not meta.get(M.KNOWN):
        return None, None, False
    reasons = meta.get("redirect_reasons") or []
    if not reasons or any(r not in PERMANENT_REDIRECTS for r in reasons):
        return None, None, True
    return meta.get(M.CANONICAL_URL), urls[0], False


class Listers:
    """A site's listers, for one spider (module docstring)."""

    def __init__(self, site: SiteConfig, parser: PageParser) -> None:
        self.parser = parser
        canonical = parser.canonicalizer.canonical
        self.seeds = frozenset(canonical(u) or u for u in site.seeds)
        self.listing_types = frozenset(t.name for t in site.page_types if t.listing is not None)
        self._last: tuple[Any, tuple[str, ...] | None] | None = None
        self._rechecked: dict[str, float] = {}
        self._fetched: dict[str, float] = {}  # known page -> when this process last revisited it

    def shown(self, result: ParseResult) -> tuple[str, ...] | None:
        """The typed pages ``result``'s page shows (sorted) when it is a lister, else ``None``;
        kept for the page just parsed (``parse`` and ``page_items`` both ask)."""
        if self._last is not None and self._last[0] is result:
            return self._last[1]
        shown = self._shown(result)
        self._last = (result, shown)
        return shown

    def _shown(self, result: ParseResult) -> tuple[str, ...] | None:
        rules = self.parser.rules
        seed = result.url in self.seeds
        if result.page_type is not None and result.page_type not in self.listing_types and not seed:
            return None
        if not rules.page_types:
            return () if seed else None
        typed = tuple(sorted({u for u in result.links if rules.page_type(u) is not None}))
        if typed or seed or result.page_type is not None:
            return typed
        return None

    def page_type(self, url: str) -> str | None:
        found = self.parser.rules.page_type(url)
        return found.name if found is not None else None

    def to_recheck(self, unlisted: set[str]) -> tuple[list[str], int]:
        """Which of the pages a lister stopped showing to recheck now (at most
        :data:`MAX_RECHECKS`, none rechecked by this process lately), and how many were left."""
        now = time.monotonic()
        recent, fetched = self._rechecked, self._fetched
        if len(recent) > _RECHECK_MEMORY_SIZE:
            self._rechecked = recent = {u: t for u, t in recent.items()
                                        if now - t < RECHECK_MEMORY_SECONDS}
        due = sorted(u for u in unlisted
                     if now - recent.get(u, -math.inf) >= RECHECK_MEMORY_SECONDS
                     and now - fetched.get(u, -math.inf) >= FETCHED_MEMORY_SECONDS)
        chosen = due[:MAX_RECHECKS]
        for url in chosen:
            recent[url] = now
        return chosen, len(due) - len(chosen)

    def still_there(self, url: str) -> None:
        """This process's revisit of ``url`` (canonical) found the page where it was: a lister
        that stops showing it from now on has it rechecked."""
        self._fetched.pop(url, None)

    def revisiting(self, url: str) -> None:
        """This process is revisiting the known page ``url`` now (canonical); unless the answer
        finds it :meth:`still_there`, its fate is told by that answer."""
        now = time.monotonic()
        if len(self._fetched) > _RECHECK_MEMORY_SIZE:
            self._fetched = {u: t for u, t in self._fetched.items()
                             if now - t < FETCHED_MEMORY_SECONDS}
        self._fetched[url] = now
