"""What a page's fetch tells about its host's validators and clocks, for the record-hash pipeline.

- :func:`change_age`: seconds between ``Last-Modified`` and ``Date`` (an exact change time where
  the host's validators are trusted);
- :func:`verification_event`: what a verification fetch (a re-fetch of a 304 without validators)
  says of that 304: ``confirmed``, ``lied`` or ``inconclusive``. A record that changed since is
  a lie only when the change must have come before the 304 (the answer's ``Last-Modified`` is
  not after it, and the page rarely changes within the time between the two), never merely
  because the page changed in between. Both times are read on the server's clock (the answers'
  ``Date``) where the answers carry one;
- :class:`ValidatorEvidence`: judges each observed item (a verified 304, a 200 to our
  validators) and lands the evidence in the host's trust.

Stats: ``webcrawl/conditional/evidence`` and ``webcrawl/conditional/evidence/{confirmed,lied,
ignored,inconclusive}``; ``webcrawl/conditional/trust/{learning,trusted,distrusted}`` (transitions).
"""

from __future__ import annotations

import logging
import math
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from webcrawl.state.hosts import validator_op

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from webcrawl.items import PageItem
    from webcrawl.runtime import CrawlRuntime

logger = logging.getLogger(__name__)

__all__ = ["LIE_CHANCE", "ValidatorEvidence", "change_age", "header", "verification_event"]

#: A verification fetch that finds a change calls the 304 a lie only when a change within the
#: time between the two had less than this chance (the page's own rate of change).
LIE_CHANCE = 0.05


def header(headers: dict[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _date(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def change_age(headers: dict[str, str]) -> float | None:
    """Seconds between ``Last-Modified`` and ``Date``, both by the server's clock (so neither its
    skew nor a simulated clock matters); ``None`` when either is missing or unreadable."""
    date, modified = _date(header(headers, "date")), _date(header(headers, "last-modified"))
    if date is None or modified is None:
        return None
    age = date - modified
    return age if age >= 0 else None


def verification_event(changed: bool, *, verify_304: float, fetch_time: float,
                       last_modified: float | None, page_stats: dict[str, Any] | None) -> str:
    """What a verification fetch says of the 304 it re-checks (see the module docstring):
    ``confirmed``, ``lied`` or ``inconclusive``."""
    if not changed:
        return "confirmed"
    if last_modified is not None and last_modified > verify_304:
        return "inconclusive"  # changed after the 304: the 304 told the truth then
    stats = page_stats or {}
    seconds = float(stats.get("seconds") or 0.0)
    rate = (float(stats.get("changes") or 0.0) + 0.5) / seconds if seconds > 0 else math.inf
    gap = max(fetch_time - verify_304, 0.0)
    chance = -math.expm1(-rate * gap) if math.isfinite(rate) else 1.0
    return "lied" if chance < LIE_CHANCE else "inconclusive"


class ValidatorEvidence:
    """Judges what each observed item says of its host's validators (module docstring) and lands
    that evidence in the host's trust."""

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector) -> None:
        self.runtime = runtime
        self.stats = stats
        self.policy = runtime.trust_policy()

    def judge(self, item: PageItem, host: str) -> None:
        fetch = item.fetch
        event: str | None = None
        if fetch.get("verify_304") is not None:
            # The 304's time is its Date, by the server's clock: the check is dated by the same
            # clock when its answer has a Date (a server clock off ours moves both alike).
            answered = _date(header(item.headers, "date"))
            event = verification_event(
                item.change == "changed", verify_304=float(fetch["verify_304"]),
                fetch_time=answered if answered is not None else item.fetch_time,
                last_modified=_date(header(item.headers, "last-modified")),
                page_stats=fetch.get("page_stats"))
        elif fetch.get("conditional") and item.change == "unchanged":
            event = "ignored"
        if event is None:
            return
        self.stats.inc_value("webcrawl/conditional/evidence")
        self.stats.inc_value(f"webcrawl/conditional/evidence/{event}")
        if event == "inconclusive":
            return

        def answered(reply: list[Any]) -> None:
            state = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0] or "")
            if not state:
                return
            self.stats.inc_value(f"webcrawl/conditional/trust/{state}")
            if state == "distrusted":
                logger.info("validators of %s are no longer trusted (event: %s)", host, event)
            else:
                logger.info("validators of %s are now %s", host, state)

        self.runtime.batch.land(host, validator_op(event, self.runtime.clock.time(), self.policy),
                                answered)
        self.runtime.hosts.forget_validators(host)
