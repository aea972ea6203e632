"""Trap detection: URLs that lead into endless URL spaces (see ``TrapRules``).

A trap is judged from the canonical URL alone, so the same URL is judged the same way wherever
it is found; results are memoised by the link filter, not here.
"""

from __future__ import annotations

import re
import time

from webcrawl.parse.rules import TrapRules

__all__ = ["TrapDetector"]

# A date token: YYYY-MM or YYYY-MM-DD (with "-", "_" or "."), or YYYYMMDD; the year is group 1.
# Six-digit YYYYMM is left out: too many product numbers look like it.
_DATE_TOKEN = re.compile(
    r"(?<![0-9])((?:1[89]|2[0-9])[0-9]{2})"
    r"(?:([-_.])(?:0[1-9]|1[0-2])(?:\2(?:0[1-9]|[12][0-9]|3[01]))?|(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01]))"
    r"(?![0-9])"
)
# A bare year segment (1800-2999) counts only when a month segment follows, as in /2026/12/:
# a lone number in that range is more often an identifier than a year.
_YEAR_SEGMENT = re.compile(r"(?:1[89]|2[0-9])[0-9]{2}")
_MONTH_SEGMENT = re.compile(r"0?[1-9]|1[0-2]")
_YEAR_VALUE = re.compile(r"(?<![0-9])((?:1[89]|2[0-9])[0-9]{2})(?![0-9])")


class TrapDetector:
    """``reason(url)``: ``None`` for an ordinary URL, else the trap kind: ``repeat``, ``deep``
    or ``calendar``. ``url`` must be canonical (lower-case scheme and host, no fragment)."""

    def __init__(self, rules: TrapRules) -> None:
        self.rules = rules
        year = rules.current_year if rules.current_year is not None else time.gmtime().tm_year
        self.min_year = year - rules.years_back
        self.max_year = year + rules.years_ahead
        self.cal_min = year - rules.calendar_window_years
        self.cal_max = year + rules.calendar_window_years

    def reason(self, url: str) -> str | None:
        rules = self.rules
        start = url.find("/", url.find("//") + 2)
        if start == -1:
            return None
        path, _, query = url[start:].partition("?")
        segments = path.split("/")[1:]
        if len(segments) > rules.max_path_segments:
            return "deep"
        if len(segments) > rules.max_segment_repeats and len(set(segments)) < len(segments):
            counts: dict[str, int] = {}
            for segment in segments:
                if segment:
                    counts[segment] = counts.get(segment, 0) + 1
                    if counts[segment] > rules.max_segment_repeats:
                        return "repeat"
        if any(c.isdigit() for c in url[start:]):
            return self._calendar(segments, query)
        return None

    def _calendar(self, segments: list[str], query: str) -> str | None:
        years: list[int] = []
        dates = 0
        for depth, segment in enumerate(segments, 1):
            if (
                _YEAR_SEGMENT.fullmatch(segment)
                and depth < len(segments)
                and _MONTH_SEGMENT.fullmatch(segments[depth])
            ):
                years.append(int(segment))
                if depth > self.rules.max_date_depth:
                    return "calendar"
                continue
            for m in _DATE_TOKEN.finditer(segment):
                dates += 1
                years.append(int(m[1]))
                if depth > self.rules.max_date_depth:
                    return "calendar"
        calendar_query = False
        if query:
            for arg in query.split("&"):
                key, _, value = arg.partition("=")
                if key.lower() in self.rules.calendar_params:
                    calendar_query = True
                for m in _DATE_TOKEN.finditer(value):
                    dates += 1
                    years.append(int(m[1]))
                if key.lower() in ("year", "y", "yr") and _YEAR_VALUE.fullmatch(value):
                    years.append(int(value))
        if dates > 1:
            return "calendar"
        if any(y < self.min_year or y > self.max_year for y in years):
            return "calendar"
        if calendar_query:
            # An endless "next month" link: without a year it cannot be bounded, so refuse it;
            # with one, keep only the months near now.
            if not years or any(y < self.cal_min or y > self.cal_max for y in years):
                return "calendar"
        return None
