"""A changing test web that knows the truth, for measuring a crawler's freshness from outside.

What it simulates: several shops, one per loopback host (default four on 127.0.0.2-5, about
1,130 pages). Each has a hub, category listings (about 20 products each, with name, price and
stock) and product pages (name, price, stock, description, plus noise on every load: a served-at
stamp and an ad token, so the raw HTML changes while the record does not), robots.txt and a
sitemap. Products change as Poisson processes whose mean intervals are mixed like Cho &
Garcia-Molina's measurements (23% faster than daily, 15% daily-weekly, 16% weekly-monthly, 16%
monthly-4 months, 30% slower); a change touches price or stock (visible in the listing) or only
the description. About 8% of products are linked from no category (sitemap only) and 5% appear
during the run (404 before; a few only in the sitemap). The shops differ: validators honest,
ignored or absent; sitemap lastmod accurate, bogus (the serving time) or absent; one sitemap
index; one sitemap announced only by robots.txt; one host with ``Crawl-delay: 1``; one host
answering 429 with ``Retry-After`` during a window (40-50% of the run). Values by tier: hub 1,
category 3, product 10, critical product 30 (page types and a URL rule the crawler can see).

Time axis: real seconds from the server's start (crawlers compare dates with their own clock).
One "day" of the change model is ``day_seconds`` (60 s), so a 10-minute run spans ten days: at
about 10 credits/s a page can be revisited every couple of "days", the fastest pages cannot be
kept fresh at any affordable rate, the daily-weekly band is the best buy, the slowest rarely
change.

Scoring (:mod:`bench.liveweb.evaluate`) reads only the server's request log, its header file
and the regenerated scenario. A copy is fresh while the version the crawler last fetched (a 200,
or a 304 keeping it) is the live one; pages not yet fetched, and pages born during the run from
their birth, are stale. Freshness is time-averaged and value-weighted over the window
[warm-up, end]; the warm-up (default a fifth of the run) leaves out the first discovery pass,
and the whole run is reported too. Costs: a credit per answered request (status < 500, not
429), bytes as written. The references (:mod:`bench.liveweb.oracle`): the true-rate optimum
with per-host caps, uniform and proportional, at the run's own spend rate on pages, in credits
and in full-page bytes.

With a lifecycle (``ScenarioParams.with_lifecycle()``, ``--lifecycle``; off by default, so the
plain freshness runs are the same as ever): products present from the start also die (404 or
410, unlisted; some come back at the same URL, some with a changed record), move to a new slug
(301 or 308 from the old URL, listings and sitemaps link the new one; the record may change at
the move) or answer a temporary redirect (302 or 307 to their category) for a while; two of the
four shops have no sitemap at all (every product listed), and more products are born, later.
The log's ``life`` field says which lifecycle answer a request got. A crawl's change events
(``scrapy events``) are scored by :mod:`bench.liveweb.events` against the events a correct
crawler owes for the fetches in the log (:mod:`bench.liveweb.expected_events`), and the
lifecycle's fetch costs and births found by :mod:`bench.liveweb.lifecycle_costs`.

Python API (an end-to-end test of a crawler reuses it)::

    params = ScenarioParams.small(seed=1, minutes=2)     # the same four shops, ~150 pages
    with ServerProcess(params, folder) as web:            # python -m bench.liveweb.server
        run_crawler(webcrawl_invocation(web.port, params.duration, 10.0, folder / "data"),
                    folder / "crawl", until_monotonic=web.info["origin_mono"] + params.duration)
    report = evaluate_log(web.log, budget_rate=10.0)      # a dict; markdown(report) for a table

Parts: ``params`` / ``scenario`` / ``lifecycle`` (the truth), ``site`` / ``pages`` / ``server``
(serving it), ``process`` (start and stop it from Python), ``evaluate`` (the score),
``expected_events`` / ``events_check`` / ``events`` (the change events' score),
``lifecycle_costs`` (refetches of dead and moved pages, births found), ``roundrobin/`` (the naive
baseline crawler), ``crawlers`` (how each crawler is invoked), ``sites/liveweb.toml`` (the test
web as a webcrawl site file), ``sites/newcomer.toml`` (the lifecycle web as a newcomer describes
it: product pages only). Nothing here imports webcrawl.
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use, so ``python -m bench.liveweb.server`` does not import itself twice.
_EXPORTS = {
    "DEFAULT_SHOPS": "params", "Lifecycle": "params", "ScenarioParams": "params",
    "ShopSpec": "params", "score_events": "events", "score_files": "events",
    "births_found": "lifecycle_costs", "lifecycle_costs": "lifecycle_costs",
    "TIER_VALUES": "params", "Page": "scenario", "Record": "scenario", "Scenario": "scenario",
    "ServerProcess": "process", "read_header": "process", "read_log": "process",
    "evaluate_log": "evaluate", "evaluate_entries": "evaluate", "markdown": "evaluate",
    "roundrobin_invocation": "crawlers", "run_crawler": "crawlers",
    "webcrawl_invocation": "crawlers",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
