"""webcrawl.stats.StatsCollector keeps Scrapy's in-memory collector's behaviour."""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from webcrawl import settings as reference
from webcrawl.stats import StatsCollector


def _exercise(stats: MemoryStatsCollector) -> dict:
    stats.open_spider()
    stats.inc_value("a")
    stats.inc_value("a", 2)
    stats.inc_value("b", start=10)
    stats.set_value("c", "x")
    stats.max_value("m", 3)
    stats.max_value("m", 1)
    stats.min_value("n", 3)
    stats.min_value("n", 1)
    return {**stats.get_stats(), "missing": stats.get_value("z", "default")}


def test_the_same_values_as_scrapys_collector() -> None:
    ours = StatsCollector(get_crawler())
    theirs = MemoryStatsCollector(get_crawler())
    assert _exercise(ours) == _exercise(theirs) == {
        "a": 3, "b": 11, "c": "x", "m": 3, "n": 1, "missing": "default"}
    ours.clear_stats()
    assert ours.get_stats() == {}


def test_a_crawler_of_the_project_counts_with_it() -> None:
    crawler = get_crawler(settings_dict={"STATS_CLASS": reference.STATS_CLASS})
    assert type(crawler.stats) is StatsCollector
    assert isinstance(crawler.stats, MemoryStatsCollector)  # spider_stats kept after close
