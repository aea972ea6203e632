"""Planner benchmark with Redis: one cycle planned over 1,000,000 known pages (target: <= 10 s).

What the cycle planner extension does at the start of a cycle, timed step by step on a real
redis-server (the embedded one, unix socket): load every page's record from the page index
(``PageIndex.load``), estimate every rate under refitted group priors and score, plan with
``plan_cycle`` (:func:`webcrawl.extensions._planner_score.score_and_plan`), then fetch the URLs of
the planned pages (``PageIndex.urls``). The index is filled with synthetic pages (written as
segments, the way ``PageIndex.write`` lays them out): change intervals from 15 minutes to a year,
hourly to monthly visits, a third of the pages with fewer than six unchanged visits (they take
the estimator's numerical posterior), three page types. Also timed: keeping the index in step,
``PageIndex.write`` of 10,000 page histories (records per second).

Run: ``python -m bench planner_redis``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from bench._report import table, write_section
from webcrawl.extensions._planner_score import Scoring, score_and_plan
from webcrawl.revisit import Reserves, effective_data
from webcrawl.state.embedded import EmbeddedRedis
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.pages import RECORD, SEGMENT, SLOTS, PageColumns, PageIndex

PAGES = 1_000_000
RUNS = 3
DAY = 86_400.0
KEYS = CrawlKeys("bench-planner")


def synthetic(n: int, rng: np.random.Generator) -> np.ndarray:
    rate = 1 / np.exp(rng.uniform(np.log(900), np.log(365 * DAY), n))
    interval = np.exp(rng.uniform(np.log(3600), np.log(30 * DAY), n))
    visits = np.where(rng.random(n) < 1 / 3, rng.integers(1, 6, n), rng.integers(6, 60, n))
    changed = rng.binomial(visits, -np.expm1(-rate * interval))
    r = np.zeros(n, dtype=RECORD)
    r["last_fetched"] = 1.8e9 - rng.uniform(0, 30 * DAY, n)
    r["type"] = rng.integers(1, 4, n)
    r["visits"], r["changes"] = visits, changed
    r["seconds"], r["unchanged_seconds"] = visits * interval, (visits - changed) * interval
    r["slot_counts"][:, 0], r["slot_seconds"][:, 0] = changed, changed * interval
    r["fetches"] = visits + 1
    r["billed"] = r["fetches"] * rng.lognormal(np.log(40_000), 0.7, n)
    for start in range(0, n, 100_000):  # the likelihood summary PageIndex.write stores
        rows = slice(start, start + 100_000)
        data = effective_data(PageColumns(np.arange(len(r[rows])), r[rows], {}).history_table())
        r["events"][rows], r["exposure"][rows] = data.events, data.exposure
    return r


def fill(index: PageIndex, records: np.ndarray) -> None:
    client, prefix = index.client, KEYS.pages_prefix
    for start in range(0, len(records), SEGMENT):
        client.set(f"{prefix}rec:{start // SEGMENT}", records[start:start + SEGMENT].tobytes())
        ids = range(start, min(start + SEGMENT, len(records)))
        client.hset(prefix + "urls", mapping={i: f"https://shop{i % 50}.example/product/{i}" for i in ids})
    client.set(prefix + "seq", len(records))
    client.hset(prefix + "types", mapping={"product": 1, "category": 2, "post": 3})


def main() -> None:
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(Path(folder))
        client = redis.Redis.from_url(server.start())
        client.flushall()
        index = PageIndex(client, KEYS)
        records = synthetic(PAGES, rng)
        fill(index, records)
        cost = float((records["billed"] / records["fetches"]).sum())
        scoring = Scoring(budget=cost / 30, cycle_seconds=3600.0, reserves=Reserves(),
                          tiers={"product": 3, "category": 2, "post": 1}, default_cost=40_000.0)
        steps: dict[str, list[float]] = {"load (GET per segment)": [], "estimate + score + plan_cycle": [],
                                         "planned URLs (HMGET)": [], "total": []}
        planned = 0
        for _ in range(RUNS):
            t0 = time.perf_counter()
            columns = index.load()
            t1 = time.perf_counter()
            plan, _ = score_and_plan(columns, scoring, now=1.8e9, rng=np.random.default_rng(1))
            t2 = time.perf_counter()
            urls = index.urls(columns.ids[plan.indices()])
            t3 = time.perf_counter()
            planned = len(urls)
            for name, seconds in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
                steps[name].append(seconds)
        history = HistoryStore(client, KEYS)
        synced = [f"https://sync.example/p/{i}" for i in range(10_000)]
        for k in range(3):
            for i, url in enumerate(synced):
                history.observe(url, now=1.8e9 + k * 3600, record_hash=str(k * (i % 2)), page_type="product")
        t0 = time.perf_counter()
        for start in range(0, len(synced), 1000):
            index.write(synced[start:start + 1000])
        sync_rate = len(synced) / (time.perf_counter() - t0)
        client.flushall()
        server.release(client)
    rows = [[name, statistics.median(s), min(s), max(s)] for name, s in steps.items()]
    body = (
        f"{PAGES:,} known pages in the page index of an embedded redis-server ({RECORD.itemsize} bytes a "
        f"record, {SLOTS} histogram slots), three page types, budget a thirtieth of a full recrawl "
        f"(bandwidth billing): {planned:,} visits planned. {RUNS} runs. Target (issue 5): planning at "
        "most 10 s.\n\n"
        + table(["step", "median s", "min s", "max s"], rows)
        + f"\n\nKeeping the index in step: `PageIndex.write` copies {sync_rate:,.0f} page histories a "
        "second into their records (batches of 1,000: HGETALL, effective data, SETRANGE)."
    )
    write_section("planner-redis", "Cycle planner with Redis at 1,000,000 pages",
                  "python -m bench planner_redis", body)
    print(table(["step", "median s", "min s", "max s"], rows))
    print(f"sync: {sync_rate:,.0f} pages/s")


if __name__ == "__main__":
    main()
