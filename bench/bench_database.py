"""The database writer's throughput and the copy's size, on SQLite and PostgreSQL side by side.

A real redis-server (the benchmarks' own) is filled the way a crawl fills it, through the land
script: ``--pages`` product pages of a shop fetched ``--rounds`` times each, a share of them
changed at each round (each fetch one check, each change one event, with a realistic record of
six typed fields). Then the same records are written into each engine, a fresh database each
(SQLite in a temporary folder; PostgreSQL from Debian's package, started by the benchmark,
fsync on), by the crawl's own :class:`~webcrawl.database.DatabaseWriter`: entries per second,
the writer's CPU, and the database's bytes per check and per version (SQLite: the file after a
checkpoint; PostgreSQL: ``pg_total_relation_size`` of each table).

Target (the issue): the writer keeps up at twice a crawl's fetch rate. The crawl's rate is the
fastest webcrawl crawl of the real-site benchmark (``BENCH_DATABASE_CRAWL_RATE``, pages per second:
each fetch is one check; events are rarer). Also: the check log's size after a month at 100
checks a second, under the default retention (30 days of checks one by one, the older rolled up
per page and day).

``./run bench database [--pages N] [--rounds N] [--changed SHARE]``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._report import table, write_section
from bench._scheduler_redis import BenchRedis
from webcrawl.change import record_hash
from webcrawl.change.events import encode_record
from webcrawl.database import DatabaseWriter, open_database
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.eventlog import EventLog
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import EventArgs, observe_op
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.streams import ShardStream

#: The fastest webcrawl crawl of `./run bench realsites` (PostgreSQL docs), pages per second.
CRAWL_RATE = float(os.environ.get("BENCH_DATABASE_CRAWL_RATE", "300"))
MONTH_CHECKS_PER_SECOND = 100.0
RETENTION_DAYS = 30.0


def record(rng: random.Random, i: int) -> dict[str, Any]:
    return {"name": f"Product {i}", "sku": f"SKU-{i:08d}", "category": rng.choice(("Kitchen", "Garden")),
            "price": {"amount": round(rng.uniform(3, 900), 2), "currency": "EUR"},
            "availability": rng.choice(("InStock", "OutOfStock")), "rating": round(rng.uniform(1, 5), 1)}


def fill(url: str, pages: int, rounds: int, changed: float) -> tuple[int, int]:
    """Land ``rounds`` fetches of ``pages`` pages (a share ``changed`` of them changed each time):
    the events and checks a crawl leaves. Returns (events, checks)."""
    client, _, _ = connect(url)
    layout = CrawlLayout("shop", 1)
    scripts = ScriptSet(client)
    queue = CrawlQueue(client, scripts, layout, cap=0, default_delay=0.0, lease_seconds=60)
    batch = WriteBatch(client, scripts, layout, queue, LandSettings(0.0, checks_kept=10_000_000),
                       bloom_slices=1)
    rng = random.Random(7)
    records = [record(rng, i) for i in range(pages)]
    events = checks = 0
    t = time.time() - rounds * 3600.0
    for r in range(rounds):
        for i in range(pages):
            if r and rng.random() < changed:
                records[i] = {**records[i], "price": {"amount": round(rng.uniform(3, 900), 2),
                                                     "currency": "EUR"}}
                events += 1
            elif not r:
                events += 1
            url_i = f"https://shop.example/p/{i}/product-{i}"
            pointer = f"crawl-1/w0/{i // 5000}:{rng.getrandbits(28)}:{rng.randint(4_000, 60_000)}"
            batch.land("shop.example", observe_op(
                url_i, full=True, time=t + r * 3600.0 + i * 1e-3,
                record_hash=record_hash(records[i]), type_id=1, billed=1.0,
                event=EventArgs(site="shop", page_type="product", url=url_i, status=200,
                                record=encode_record(records[i]), pointer=pointer,
                                wire_bytes=rng.randint(4_000, 60_000))))
            checks += 1
            if i % 2000 == 1999:
                batch.flush()
        batch.flush()
    client.close()
    return events, checks


def write(redis_url: str, db_url: str) -> dict[str, float]:
    """Write every event and check into ``db_url``; the writer's figures."""
    client, _, _ = connect(redis_url)
    layout = CrawlLayout("shop", 1)
    db = open_database(db_url)
    writer = DatabaseWriter(db, EventLog(client, layout), ShardStream(client, layout, "checks"),
                            consumer="bench", batch=500, checks_retention=365 * 86_400.0)
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    writer.open()
    while writer.step():
        pass
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    sizes = table_bytes(db)
    db.close()
    client.close()
    counts = writer.counts
    return {"events": counts.events, "checks": counts.checks, "wall": wall, "cpu": cpu, **sizes}


def table_bytes(db: Any) -> dict[str, float]:
    """Bytes of the checks (with their indexes) and of the versions (with their values)."""
    with db.transaction() as tx:
        if db.kind == "postgresql":
            def size(name: str) -> float:
                return float(tx.value("SELECT pg_total_relation_size(%s)", (name,)))
            return {"checks_bytes": size("checks"),
                    "versions_bytes": size("versions") + size("version_values"),
                    "pages_bytes": size("pages")}
        sizes = dict(tx.rows("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"))
        return {"checks_bytes": float(sum(v for k, v in sizes.items() if k.startswith(("checks", "sqlite_autoindex_checks")))),
                "versions_bytes": float(sum(v for k, v in sizes.items()
                                            if k.startswith(("versions", "version_values",
                                                             "sqlite_autoindex_versions",
                                                             "sqlite_autoindex_version_values")))),
                "pages_bytes": float(sum(v for k, v in sizes.items() if "pages" in k))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="./run bench database", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--changed", type=float, default=0.2)
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args(argv)
    from tests.pgserver import LocalPostgres  # the tests' own server launcher (Debian's package)

    with tempfile.TemporaryDirectory(prefix="bench-database-") as tmp:
        folder = Path(tmp)
        (folder / "redis").mkdir()
        redis = BenchRedis(folder / "redis")
        postgres = LocalPostgres({"fsync": "on", "full_page_writes": "on"})
        postgres.start()
        try:
            results = {}
            for engine, url in (("SQLite", str(folder / "copy.db")),
                                ("PostgreSQL", postgres.new_database("bench"))):
                redis.client.flushall()  # the writer trims the checks it took: fill anew
                events, checks = fill(redis.url, args.pages, args.rounds, args.changed)
                results[engine] = write(redis.url, url)
        finally:
            postgres.stop()
            redis.stop()
    body = report(args, events, checks, results)
    print(body)
    if not args.no_doc:
        write_section("database", "The database writer: throughput and bytes, SQLite and PostgreSQL",
                      "./run bench database", body)


def report(args: argparse.Namespace, events: int, checks: int, results: dict[str, dict[str, float]]) -> str:
    rows, sizes = [], []
    for engine, r in results.items():
        rate = (r["events"] + r["checks"]) / r["wall"]
        check_rate = r["checks"] / r["wall"]
        rows.append([engine, r["events"], r["checks"], r["wall"], rate, check_rate,
                     1000 * r["cpu"] / (r["events"] + r["checks"]), check_rate / (2 * CRAWL_RATE)])
        per_check = r["checks_bytes"] / max(r["checks"], 1)
        per_version = r["versions_bytes"] / max(r["events"], 1)
        month = MONTH_CHECKS_PER_SECOND * RETENTION_DAYS * 86_400.0 * per_check
        sizes.append([engine, per_check, per_version, r["pages_bytes"] / args.pages, month / 1e9])
    return "\n\n".join([
        f"{args.pages:,} product pages of one shop fetched {args.rounds} times each through the land "
        f"script (a real redis-server), {args.changed:.0%} of them changed at each later round: "
        f"{events:,} change events and {checks:,} checks (records of six typed fields). Each engine "
        "gets all of them from the start of the records, through the crawl's own writer (batches "
        "of 500 a transaction), on a fresh database: SQLite in a temporary folder (WAL), "
        "PostgreSQL 15 from Debian's package started by the benchmark (fsync on, defaults).",
        table(["engine", "events", "checks", "seconds", "entries / s", "checks / s",
               "writer CPU ms / entry", f"checks / s over 2x a crawl's {CRAWL_RATE:g} fetches / s (>= 1)"], rows),
        table(["engine", "bytes per check", "bytes per version (with its typed values)",
               "bytes per page row", f"check log after a month at {MONTH_CHECKS_PER_SECOND:g} checks/s, "
               f"{RETENTION_DAYS:g}-day retention, GB"], sizes),
        f"The crawl rate: the fastest webcrawl crawl of `./run bench realsites` (about {CRAWL_RATE:g} "
        "pages a second, each fetch one check; `BENCH_DATABASE_CRAWL_RATE` sets it). Past the "
        "retention, checks are rolled up into one row per page and day (`check_days`), a few "
        "hundredths of the size.",
    ])


if __name__ == "__main__":
    main()
