"""The crawl's stats collector: Scrapy's in-memory one, without its per-call wrapping.

Scrapy 2.13+ routes every attribute read of its stats collector through a ``__getattribute__``
that builds a cache key and raises and catches an ``AttributeError``, and wraps each method to warn
about a deprecated ``spider`` argument. A webcrawl page counts three dozen stats, so that came to
about 1.7 µs a call and a twentieth of a small page's CPU time. This collector keeps Scrapy's
methods, values and ``spider_stats`` as they are and reads its attributes the plain way; a
``spider`` argument is accepted and ignored, without the warning.
"""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector

__all__ = ["StatsCollector"]


class StatsCollector(MemoryStatsCollector):
    """``STATS_CLASS`` of webcrawl: :class:`scrapy.statscollectors.MemoryStatsCollector` with
    plain attribute access."""

    __getattribute__ = object.__getattribute__
