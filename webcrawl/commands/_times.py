"""Times on the command line: seconds since the epoch, or an ISO 8601 date-time (UTC when naive)."""

from __future__ import annotations

from datetime import UTC, datetime

from webcrawl.commands._errors import fail

__all__ = ["parse_time"]


def parse_time(text: str, option: str = "--as-of") -> float:
    """Seconds since the epoch of ``text``; a text that is neither ends the command with one
    ``scrapy: error:`` line naming ``option``."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"{option} {text!r}: expected seconds since the epoch or an ISO 8601 date-time",
             "such as 2026-01-31T12:00:00Z")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
