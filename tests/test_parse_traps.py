"""Trap rules: repeated segments, deep paths, calendar-like endless paths."""

from __future__ import annotations

import pytest

from webcrawl.parse import TrapDetector, TrapRules

DETECT = TrapDetector(TrapRules(current_year=2026))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://a.com/", None),
        ("https://a.com/docs/library/os.html", None),
        ("https://a.com/a/b/a/b/a/b", "repeat"),
        ("https://a.com/x/x/x/", "repeat"),
        ("https://a.com/a/b/a/b/", None),  # twice is allowed (max_segment_repeats=2)
        ("https://a.com/" + "/".join(f"s{i}" for i in range(21)), "deep"),
        ("https://a.com/" + "/".join(f"s{i}" for i in range(20)), None),
        ("https://a.com/blog/2026/12/post-title", None),
        ("https://a.com/blog/2025/01/", None),
        ("https://a.com/archive/1990/01/", "calendar"),  # before current_year - years_back
        ("https://a.com/events/2031/06/", "calendar"),  # after current_year + years_ahead
        ("https://a.com/product/2345", None),  # a number in year range is not a year by itself
        ("https://a.com/item/1850", None),
        ("https://a.com/a/b/c/d/e/2026-01-02/x", "calendar"),  # a date deep in the path
        ("https://a.com/a/b/c/d/e/2026/01/x", "calendar"),
        ("https://a.com/news/2026-01-05.html", None),
        ("https://a.com/news/20260105.html", None),
        ("https://a.com/e/2026-01-01/2026-01-02", "calendar"),  # two dates: a range walker
        ("https://a.com/calendar?month=2026-12", None),
        ("https://a.com/calendar?month=2028-12", "calendar"),  # calendar query beyond +-1 year
        ("https://a.com/calendar?month=12", "calendar"),  # no year: unbounded
        ("https://a.com/calendar?month=12&year=2026", None),
        ("https://a.com/calendar?month=12&year=2050", "calendar"),
        ("https://a.com/search?q=2050", None),
        ("https://a.com/x?date=1970-01-01", "calendar"),
    ],
)
def test_trap_reasons(url: str, reason: str | None) -> None:
    assert DETECT.reason(url) == reason


def test_rules_are_configurable() -> None:
    strict = TrapDetector(TrapRules(max_segment_repeats=1, max_path_segments=3, current_year=2026))
    assert strict.reason("https://a.com/a/b/a") == "repeat"
    assert strict.reason("https://a.com/a/b/c/d") == "deep"
    lenient = TrapDetector(TrapRules(years_back=100, current_year=2026))
    assert lenient.reason("https://a.com/archive/1990/01/") is None


def test_current_year_defaults_to_now() -> None:
    import time

    year = time.gmtime().tm_year
    assert TrapDetector(TrapRules()).reason(f"https://a.com/blog/{year}/01/") is None


def test_validation() -> None:
    with pytest.raises(ValueError, match="max_segment_repeats"):
        TrapRules(max_segment_repeats=0)
