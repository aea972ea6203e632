"""The model's estimate of how fresh the crawl's copy is, as the allocator records it.

The allocator (:mod:`webcrawl.extensions.allocator`) estimates, at every allocation, each fetched
page's chance of being fresh (``exp(-rate * time since its fetch)``, its rate the posterior mean
of its own history shrunk toward its page type), counts new URLs not fetched yet as stale, and
publishes the means (crawl-wide ``alloc`` hash: ``freshness``, ``freshness_value`` weighted by the
pages' values, ``freshness:<page type id>``); at a cycle's close they go into the cycle's ledger
(``freshness``, ``freshness:<page type>``). This module reads them back for the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.state.ledger import LedgerStore

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["TOTAL", "Freshness", "current", "read_snapshot"]

TOTAL = "*"


@dataclass(frozen=True)
class Freshness:
    """Estimated freshness per page type (``TOTAL``: all pages) and when it was estimated."""

    mean: dict[str, float]
    pages: dict[str, int]
    at: float


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def read_snapshot(client: Any, layout: CrawlLayout, cycle_id: int) -> Freshness | None:
    """The estimate kept at cycle ``cycle_id``'s close, ``None`` when it has none."""
    numbers = LedgerStore(client, layout).numbers(cycle_id)
    if "freshness" not in numbers:
        return None
    mean = {TOTAL: numbers["freshness"]}
    mean.update({k.split(":", 1)[1]: v for k, v in numbers.items() if k.startswith("freshness:")})
    pages = {TOTAL: int(numbers.get("fetched", 0))}
    pages.update({k.split(":", 1)[1]: int(v) for k, v in numbers.items() if k.startswith("pages:")})
    return Freshness(mean, pages, numbers.get("ends", 0.0))


def current(client: Any, layout: CrawlLayout) -> Freshness | None:
    """The latest estimate the allocator published, ``None`` before the first."""
    raw = {_text(k): _text(v) for k, v in client.hgetall(layout.alloc).items()}
    if "freshness" not in raw:
        return None
    names = {int(v): _text(k) for k, v in client.hgetall(layout.types).items()}
    mean = {TOTAL: float(raw["freshness"])}
    pages = {TOTAL: int(float(raw.get("fetched", 0)))}
    for key, value in raw.items():
        if key.startswith("freshness:"):
            mean[names.get(int(key.split(":", 1)[1]), "-")] = float(value)
        elif key.startswith("pages:"):
            pages[names.get(int(key.split(":", 1)[1]), "-")] = int(float(value))
    return Freshness(mean, pages, float(raw.get("at", 0)))
