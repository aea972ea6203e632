"""The allocator at a million pages: reading the records into its page table, keeping the table in
step, and one allocation (:func:`webcrawl.extensions._alloc_plan.plan`).

The plan runs on the table the allocator loaded from Redis, with months of history written into
its rows (the fill lands one fetch per page; a real crawl's pages carry many): change intervals
from 15 minutes to a year, hourly to monthly visits, a third of the pages with fewer than six
visits (the estimator's numerical posterior), three page types, a sitemap per host.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from webcrawl.extensions._alloc_plan import AllocInput, plan
from webcrawl.revisit import GammaPrior
from webcrawl.revisit.history import interval_bin
from webcrawl.state.records import EMPTY_BIN, KIND_SITEMAP, SLOTS

DAY = 86_400.0
SHARES = {"discovery": 0.05, "reestimation": 0.05, "verification": 0.01, "detectors": 0.1}


def with_history(rows: np.ndarray, host: np.ndarray, now: float, seed: int = 5) -> np.ndarray:
    """A copy of ``rows`` with synthetic histories (the module docstring)."""
    rng = np.random.default_rng(seed)
    r = rows.copy()
    n = len(r)
    rate = 1 / np.exp(rng.uniform(np.log(900), np.log(365 * DAY), n))
    every = np.exp(rng.uniform(np.log(3600), np.log(30 * DAY), n))
    visits = np.where(rng.random(n) < 1 / 3, rng.integers(1, 6, n), rng.integers(6, 60, n))
    changed = rng.binomial(visits, -np.expm1(-rate * every))
    r["visits"], r["changes"], r["fetches"] = visits, changed, visits + 1
    r["seconds"], r["unchanged_seconds"] = visits * every, (visits - changed) * every
    r["b0"] = np.where(changed > 0, interval_bin(every), EMPTY_BIN)
    r["n0"], r["s0"] = changed, changed * every
    for i in range(1, SLOTS):
        r[f"b{i}"] = EMPTY_BIN
    r["last_fetched"] = now - rng.uniform(0, every)
    r["billed_n"] = visits + 1
    r["billed"] = r["billed_n"] * rng.lognormal(np.log(40_000), 0.7, n)
    r["type"] = 1 + np.arange(n) % 3
    first = np.unique(host, return_index=True)[1]  # one sitemap per host
    r["kind"][first] = KIND_SITEMAP
    return r


def alloc_input(rows: np.ndarray, host: np.ndarray, nhosts: int, now: float) -> AllocInput:
    cost = float((rows["billed"] / np.maximum(rows["billed_n"], 1)).sum())
    return AllocInput(
        rows=rows, host=host, delay=np.full(nhosts, 1.0), hold_until=np.zeros(nhosts),
        health=np.ones(nhosts), sitemap_trusted=np.arange(nhosts) % 4 == 0,
        seed=np.zeros(len(rows), dtype=bool), now=now, budget_rate=cost / (30 * DAY), period=60.0,
        cycle_seconds=DAY, sitemap_seconds=3600.0, shares=dict(SHARES),
        type_tier={1: 3, 2: 2, 3: 1}, listing_types=frozenset({3}),
        prior=GammaPrior.from_mean(1 / (7 * DAY), 0.5), default_cost=40_000.0, backlog=0.0,
        seed_rng=1)


def time_plan(table: Any, now: float, runs: int = 3) -> tuple[list[float], int]:
    """Seconds of each of ``runs`` allocations over the table, and the pages it scheduled."""
    rows = with_history(table.records, table.host_of, now)
    a = alloc_input(rows, table.host_of, len(table.hosts), now)
    seconds, scheduled = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        result = plan(a)
        seconds.append(time.perf_counter() - t0)
        scheduled = int(np.isfinite(result.interval).sum())
    return seconds, scheduled


def time_load(table: Any) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = table.load()
    return time.perf_counter() - t0, n


def time_sync(table: Any) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = table.sync()
    return time.perf_counter() - t0, n
