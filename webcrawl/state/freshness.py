"""The model's estimate of how fresh the crawl's copy is, from the page histories in Redis.

For each page with a fetch: its change rate λ (the posterior mean of its own history, shrunk
toward its page type's Gamma prior fitted over the crawl's pages, :func:`~webcrawl.revisit.fit_group_priors`),
and the time t since its last fetch. Its copy is still fresh with probability ``exp(-λ t)``
(revisit-model.md section 1); the estimated freshness of a page type is the mean of that over its
pages, and the total the mean over all pages.

Reading every page hash is O(pages): :func:`estimate_freshness` reads at most ``max_pages`` of
them (in SCAN order, which is unrelated to the pages' ages or rates, so a sample), in pipelined
batches. :func:`store_snapshot` keeps the figures of a cycle at its close in ``{c}:freshness:<id>``
(``<page type>`` and ``*`` -> mean, ``pages:<page type>`` / ``pages:*`` -> pages, ``at``), so the
report can plot freshness over cycles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from webcrawl.revisit import GammaPrior, HistoryTable, effective_data, estimate_rates, fit_group_priors
from webcrawl.state.history import PageRecord

if TYPE_CHECKING:
    import redis

    from webcrawl.state.keys import CrawlKeys

__all__ = ["TOTAL", "Freshness", "estimate_freshness", "read_snapshot", "store_snapshot"]

TOTAL = "*"
_BATCH = 1000


@dataclass(frozen=True)
class Freshness:
    """Estimated freshness per page type (``TOTAL``: all pages) and the pages it was taken over."""

    mean: dict[str, float]
    pages: dict[str, int]
    at: float


def _records(client: redis.Redis, keys: CrawlKeys, max_pages: int) -> list[PageRecord]:
    pattern = keys.pattern[:-1] + "page:*"
    records: list[PageRecord] = []
    batch: list[bytes] = []

    def drain() -> None:
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.hgetall(key)
        records.extend(PageRecord.from_hash(raw) for raw in pipe.execute() if raw)
        batch.clear()

    for key in client.scan_iter(match=pattern, count=_BATCH):
        batch.append(key)
        if len(batch) >= _BATCH:
            drain()
        if len(records) + len(batch) >= max_pages:
            break
    if batch:
        drain()
    return [r for r in records if r.last_fetched > 0]


def estimate_freshness(client: redis.Redis, keys: CrawlKeys, now: float, prior: GammaPrior, *,
                       max_pages: int = 200_000) -> Freshness:
    """The estimated freshness of the copy at ``now`` (see the module docstring)."""
    records = _records(client, keys, max_pages)
    if not records:
        return Freshness({}, {}, now)
    types = sorted({r.page_type or "-" for r in records})
    group = np.array([types.index(r.page_type or "-") for r in records], dtype=np.intp)
    table = HistoryTable.from_pages([r.page_history() for r in records])
    data = effective_data(table)
    priors = fit_group_priors(group, data, prior, ngroups=len(types))
    rates = estimate_rates(table, priors.shape[group], priors.rate[group], data)
    since = np.maximum(now - np.array([r.last_fetched for r in records]), 0.0)
    fresh = np.exp(-rates * since)
    counts = np.bincount(group, minlength=len(types))
    sums = np.bincount(group, fresh, minlength=len(types))
    mean = {t: float(sums[i] / counts[i]) for i, t in enumerate(types)}
    pages = {t: int(counts[i]) for i, t in enumerate(types)}
    mean[TOTAL], pages[TOTAL] = float(fresh.mean()), len(records)
    return Freshness(mean, pages, now)


def store_snapshot(client: redis.Redis, keys: CrawlKeys, cycle_id: int, freshness: Freshness) -> None:
    """Keep ``freshness`` as cycle ``cycle_id``'s figures (replacing earlier ones)."""
    mapping: dict[str, float] = {"at": freshness.at}
    mapping.update(freshness.mean)
    mapping.update({f"pages:{t}": n for t, n in freshness.pages.items()})
    pipe = client.pipeline()
    pipe.delete(keys.freshness(cycle_id))
    pipe.hset(keys.freshness(cycle_id), mapping=mapping)  # type: ignore[arg-type]
    pipe.execute()


def read_snapshot(client: redis.Redis, keys: CrawlKeys, cycle_id: int) -> Freshness | None:
    raw = {k.decode() if isinstance(k, bytes) else k: float(v)
           for k, v in client.hgetall(keys.freshness(cycle_id)).items()}
    if not raw:
        return None
    at = raw.pop("at", 0.0)
    pages = {k[6:]: int(v) for k, v in raw.items() if k.startswith("pages:")}
    mean = {k: v for k, v in raw.items() if not k.startswith("pages:")}
    return Freshness(mean, pages, at)
