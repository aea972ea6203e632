"""Sitemap ``<lastmod>`` as a change signal, trusted per host only once it agreed with what we saw.

A sitemap that dates each page tells what changed without fetching anything else, if the dates
are honest. Many are not (every page "modified" at generation time, or never updated). So each
host's dates earn trust like validators do (:class:`webcrawl.revisit.TrustTracker`): whenever a
page fetched with a known ``lastmod`` is compared with its previous copy, the date agrees if it
is newer than the previous fetch exactly when the record changed.

- :meth:`SitemapStore.note` keeps the latest ``lastmod`` each page was given
  (``{c}:sitemap:lastmod``, canonical URL -> seconds);
- :meth:`SitemapStore.judge` records one comparison for a host (``{c}:trust:sitemaps``, host ->
  JSON of the tracker; read-modify-write under ``WATCH``);
- :meth:`SitemapStore.trusted` answers per host, honouring the site file's ``[trust]`` rule
  (``always`` / ``never`` / ``learn``).

The planner reads the dates of trusted hosts: a page dated after our copy has changed (it is
visited first, with certainty of a change); one dated before it has not (it is skipped this cycle).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import redis

from webcrawl.revisit import TrustTracker

if TYPE_CHECKING:
    from webcrawl.state.keys import CrawlKeys

__all__ = ["SitemapStore", "parse_lastmod"]


def parse_lastmod(value: Any) -> float | None:
    """Seconds since the epoch from a sitemap ``lastmod`` (a number, or W3C datetime text; a date
    alone is midnight UTC, a time without zone UTC); ``None`` when unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


class SitemapStore:
    """Sitemap dates and their trust per host, for one crawl. ``mode(host)`` is the site file's
    rule for the host (``learn`` when there is none)."""

    def __init__(self, client: redis.Redis, keys: CrawlKeys, *,
                 mode: Callable[[str], str] | None = None, min_agreements: int = 5,
                 max_disagreement_rate: float = 0.05) -> None:
        self.client = client
        self.keys = keys
        self.mode = mode or (lambda host: "learn")
        self.min_agreements = min_agreements
        self.max_disagreement_rate = max_disagreement_rate

    def note(self, dates: dict[str, float]) -> None:
        """Remember the latest ``lastmod`` of pages (canonical URL -> seconds)."""
        if dates:
            self.client.hset(self.keys.sitemap_lastmod, mapping={u: repr(t) for u, t in dates.items()})

    def dates(self, urls: list[str]) -> list[float | None]:
        raw = self.client.hmget(self.keys.sitemap_lastmod, urls) if urls else []
        return [float(v) if v is not None else None for v in raw]

    def all_dates(self) -> dict[str, float]:
        raw = self.client.hgetall(self.keys.sitemap_lastmod)
        return {k.decode() if isinstance(k, bytes) else k: float(v) for k, v in raw.items()}

    def tracker(self, host: str) -> TrustTracker:
        raw = self.client.hget(self.keys.trust_sitemaps, host)
        if raw is None:
            return TrustTracker(self.min_agreements, self.max_disagreement_rate)
        return TrustTracker(**json.loads(raw))

    def judge(self, host: str, lastmod: float, previous_fetch: float, changed: bool) -> TrustTracker:
        """Record one comparison: the date says "changed" iff it is after ``previous_fetch``."""
        agrees = (lastmod > previous_fetch) == changed
        with self.client.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(self.keys.trust_sitemaps)
                    tracker = self.tracker(host)
                    tracker.observe(agrees)
                    pipe.multi()
                    pipe.hset(self.keys.trust_sitemaps, host, json.dumps(asdict(tracker)))
                    pipe.execute()
                    return tracker
                except redis.WatchError:
                    continue

    def trusted(self, host: str) -> bool:
        mode = self.mode(host)
        if mode in ("always", "never"):
            return mode == "always"
        return self.tracker(host).trusted

    def trusted_hosts(self, hosts: set[str]) -> set[str]:
        return {h for h in hosts if self.trusted(h)}
