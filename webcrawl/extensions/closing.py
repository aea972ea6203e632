"""Say why a crawl did nothing: one WARNING at spider close, read from the crawl's stats.

When a crawl fetched no page, or refused more requests than it fetched, it logs one WARNING
naming each reason with its count and what to do about it::

    Fetched no pages. SSRF guard refused 3 (loopback 3; allow the network with
    allowed_private_networks in the site file or WEBCRAWL_ALLOWED_PRIVATE_NETWORKS); ...

Reasons and the stats they come from (each component documents its own keys):

| reason | stats |
| --- | --- |
| SSRF guard refused | ``ssrf/refused/<reason>`` (webcrawl/middlewares/ssrf.py) |
| robots.txt unreachable | ``robotstxt/exception_count/*``, ``robotstxt/response_status_count/5xx`` and ``429`` (fetches that failed this run); ``webcrawl/refused/robots_unreachable`` and ``webcrawl/refused/robots_until`` (requests refused by an unreachable answer, and when the stored answer expires, epoch seconds: webcrawl/spiders/_refusals.py) |
| robots.txt disallowed | ``robotstxt/forbidden`` (less the unreachable ones, when known) |
| host excluded | ``scheduler/excluded`` |
| budget spent | the close reason ``cycle_budget_spent`` (a one-run cycle whose budget is spent) |
| download errors | ``downloader/exception_type_count/<type>``, refusals by middlewares left out |
| already seen | ``dupefilter/filtered`` (only when nothing was fetched) |

"Refused" counts the SSRF guard, robots.txt and excluded hosts: policies a user can change. The
budget never refuses a request: work waits for the budget's tokens, and a one-run cycle whose
budget is spent ends with its work still queued for the next cycle. So "budget spent" is named
only when it is why nothing was fetched, and never makes a crawl count as refused. A crawl with
nothing to do (no request, nothing refused) logs nothing.

A refused URL is not lost: the spiders note it (``webcrawl/refused/noted``), and the crawl queues
it again when it meets it again (a seed: at the next run), so it is fetched once the reason is
gone; the warning says so. An excluded host's URLs are never marked seen.

The crawl's exit status is not changed: a crawl that ran exits 0 even when it fetched nothing.
The extension sets the stat ``webcrawl/closing/warned`` (1) when it warned, so scripts and
scrapyd's stats can tell. ``WEBCRAWL_CLOSING_NOTE_ENABLED = False`` turns it off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["ClosingNote", "reasons", "summary"]

Stats = Mapping[str, Any]

_ALLOW = ("allow the network with allowed_private_networks in the site file or "
          "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS")
# What a user can do about each SSRF refusal reason (webcrawl.net.addresses names them).
_SSRF_FIX = {
    "metadata": "cloud metadata addresses are never fetched",
    "scheme": "only http and https URLs are fetched",
    "invalid": "the host is not a valid address",
}
# Exceptions that middlewares raise to refuse a request; counted under their own reasons.
_REFUSALS = ("IgnoreRequest",)
BUDGET_SPENT = "cycle_budget_spent"  #: the close reason of a one-run cycle whose budget is spent


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _count(stats: Stats, key: str) -> int:
    value = stats.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


def _by_suffix(stats: Stats, prefix: str) -> dict[str, int]:
    return {k[len(prefix):]: _count(stats, k) for k in stats
            if k.startswith(prefix) and "/" not in k[len(prefix):] and _count(stats, k) > 0}


def pages_fetched(stats: Stats) -> int:
    """Responses the crawl received, robots.txt fetches left out."""
    return max(0, _count(stats, "downloader/response_count")
               - _count(stats, "robotstxt/response_count"))


def refused(stats: Stats) -> int:
    """Requests refused by a policy the user can change (SSRF guard, robots.txt, exclusion)."""
    return (_count(stats, "ssrf/refused") + _count(stats, "robotstxt/forbidden")
            + _count(stats, "scheduler/excluded"))


def _robots_failures(stats: Stats) -> dict[str, int]:
    """robots.txt fetches that failed this run (unreachable: an error, a 5xx or a 429), by
    exception name or status."""
    failed = {name: n for name, n in _by_suffix(stats, "robotstxt/exception_count/").items()
              if name not in ("CancelledError", "RuntimeError")}  # the crawl was stopping
    failed.update({status: n for status, n in
                   _by_suffix(stats, "robotstxt/response_status_count/").items()
                   if status == "429" or status.startswith("5")})
    return failed


def _robots_reasons(stats: Stats, error_cache_seconds: float) -> list[str]:
    failed = sum(_robots_failures(stats).values())
    forbidden = _count(stats, "robotstxt/forbidden")
    unreachable = _count(stats, "webcrawl/refused/robots_unreachable")  # when recorded
    until = stats.get("webcrawl/refused/robots_until")
    if isinstance(until, (int, float)) and until > 0:
        retry = f"cached until {time.strftime('%H:%M', time.localtime(until))}; retried then"
    else:
        retry = (f"the answer is kept up to {error_cache_seconds:g} s, "
                 "WEBCRAWL_ROBOTS_ERROR_CACHE_SECONDS; retried then")
    hosts = f"for {_n(failed, 'host')}" if failed else "(an earlier answer)"
    out = []
    if "webcrawl/refused/robots_unreachable" in stats or unreachable:
        if unreachable or failed:
            out.append(f"robots.txt unreachable {hosts}, so {_n(unreachable, 'request')} "
                       f"refused ({retry})")
        if forbidden - unreachable > 0:
            out.append(f"robots.txt disallowed: {forbidden - unreachable}")
    elif failed:
        out.append(f"robots.txt unreachable {hosts}, so {_n(forbidden, 'request')} refused "
                   f"({retry})")
    elif forbidden:
        out.append(f"robots.txt refused {forbidden} (disallowed, or robots.txt was unreachable "
                   f"on an earlier run: {retry})")
    return out


def reasons(stats: Stats, *, error_cache_seconds: float = 300.0,
            close_reason: str | None = None) -> list[str]:
    """Each reason the crawl's requests went unfetched, with its count and fix, most important
    first; empty when nothing was held back. ``close_reason``: why the spider closed."""
    out: list[str] = []
    ssrf = _by_suffix(stats, "ssrf/refused/")
    if ssrf:
        detail = ", ".join(f"{reason} {n}" for reason, n in sorted(ssrf.items(), key=lambda i: -i[1]))
        fixes = sorted({_SSRF_FIX.get(reason, _ALLOW) for reason in ssrf})
        out.append(f"SSRF guard refused {sum(ssrf.values())} ({detail}; {'; '.join(fixes)})")
    out += _robots_reasons(stats, error_cache_seconds)
    excluded = _count(stats, "scheduler/excluded")
    if excluded:
        out.append(f"host excluded: {excluded} (scrapy exclude --list shows the list; "
                   "scrapy exclude <domain> --remove takes one off)")
    if close_reason == BUDGET_SPENT and pages_fetched(stats) == 0:
        out.append("budget spent: the cycle's budget was used up (by every process of the "
                   "cycle) before this run fetched a page; nothing was refused: what is queued "
                   "waits for the next cycle (budget.amount_per_cycle in the site file, or "
                   "WEBCRAWL_BUDGET_PER_CYCLE, sets what a cycle may spend)")
    robots_failures = _robots_failures(stats)
    errors = {}
    for name, n in _by_suffix(stats, "downloader/exception_type_count/").items():
        short = name.rsplit(".", 1)[-1]
        n -= robots_failures.get(short, 0)  # robots.txt fetches: named above
        if short not in _REFUSALS and n > 0:
            errors[short] = n
    if errors:
        detail = ", ".join(f"{name} {n}" for name, n in sorted(errors.items(), key=lambda i: -i[1]))
        out.append(f"download errors: {sum(errors.values())} ({detail}; is the site up?)")
    noted = _count(stats, "webcrawl/refused/noted")
    if noted and out:
        out.append(f"{_n(noted, 'refused URL')} noted: queued again when the crawl next meets "
                   f"{'it' if noted == 1 else 'them'} (a seed: at the next run), and fetched once "
                   "the reason is gone")
    if pages_fetched(stats) == 0:
        seen = _count(stats, "dupefilter/filtered")
        if seen:
            out.append(f"already seen: {seen} (the crawl has met these URLs before; "
                       "WEBCRAWL_RESET=True or scrapy crawlstate <crawl> --clear starts over)")
    return out


def summary(stats: Stats, *, error_cache_seconds: float = 300.0,
            close_reason: str | None = None) -> str | None:
    """The WARNING's text, or ``None`` when the crawl needs no explanation."""
    fetched, held = pages_fetched(stats), refused(stats)
    if fetched > 0 and held <= fetched:
        return None
    found = reasons(stats, error_cache_seconds=error_cache_seconds, close_reason=close_reason)
    if not found:
        return None
    head = ("Fetched no pages" if fetched == 0
            else f"Refused more requests ({held}) than it fetched ({fetched})")
    return f"{head}: {'; '.join(found)}"


class ClosingNote:
    """At spider close, log :func:`summary` as one WARNING (see the module docstring)."""

    def __init__(self, stats: StatsCollector, *, error_cache_seconds: float) -> None:
        self.stats = stats
        self.error_cache_seconds = error_cache_seconds

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("WEBCRAWL_CLOSING_NOTE_ENABLED", True):
            raise NotConfigured("the closing note is off: set WEBCRAWL_CLOSING_NOTE_ENABLED = True")
        assert crawler.stats is not None
        note = cls(crawler.stats, error_cache_seconds=crawler.settings.getfloat(
            "WEBCRAWL_ROBOTS_ERROR_CACHE_SECONDS", 300.0))
        crawler.signals.connect(note.spider_closed, signal=signals.spider_closed)
        return note

    def spider_closed(self, spider: Spider, reason: str) -> None:
        text = summary(self.stats.get_stats(), error_cache_seconds=self.error_cache_seconds,
                       close_reason=reason)
        if text is not None:
            self.stats.set_value("webcrawl/closing/warned", 1)
            logger.warning("%s", text)
