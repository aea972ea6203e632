"""Scheduler throughput on a real 3-master Redis Cluster against one redis-server, same crawl,
same processes; and no script ever refused by a cluster node.

Each run is two ``scrapy crawl follow`` processes sharing one crawl of a generated site (8 hosts
on 127.0.0.2-9, 400 small pages each, 20 links a page, no per-host delay: the scheduler's own
cost shows), on one of (``bench/_cluster_run.py``):

- one server: a redis-server reached over TCP on 127.0.0.1, the crawl's defaults (one shard);
- one server, 16 shards: the same, ``WEBCRAWL_SHARDS=16`` (what sharding alone costs);
- 3-master cluster: three redis-servers formed into a cluster by ``tests/rediscluster.py``, the
  crawl's defaults there (16 shards spread over the masters, redis-py's cluster client).

Every server runs with an append-only file (fsync every second), as the crawl's embedded one.
A small untimed crawl warms the machine up first. Rounds rotate the order; each figure is the
median over rounds, and ratios are medians of each round's ratio to the one-server run. Besides
pages per second (wall clock, from the site's own log), the CPU the crawl processes and every
Redis server spent per page is compared: on a machine the crawl keeps busy, that is the
throughput it allows, and it does not move with other load on the machine. Every run must fetch every page exactly once. Target: the
cluster at least 0.9x one server; no error answered by any node (``INFO errorstats``: no
CROSSSLOT, no script error) and none in the crawl logs.

``./run bench cluster [--rounds N] [--no-write]`` (``BENCH_CLUSTER_ROUNDS``, default 3).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from bench._cluster_run import Nodes, Run, crawl
from bench._report import table, write_section
from bench._scheduler_redis import BenchRedis
from tests.rediscluster import LocalRedisCluster

HOSTS, PER_HOST = 8, 400
SINGLE, SHARDED, CLUSTER = "one server", "one server, 16 shards", "3-master cluster"
CONTENDERS = (SINGLE, SHARDED, CLUSTER)
TARGET = 0.9
SCRIPT_ERRORS = ("CROSSSLOT", "failed evalsha", "failed eval", "failed script")


def run(rounds: int) -> dict[str, list[Run]]:
    results: dict[str, list[Run]] = {name: [] for name in CONTENDERS}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "single").mkdir()
        single = BenchRedis(root / "single", tcp=True)
        cluster = LocalRedisCluster(masters=3)
        try:
            cluster.start()
            single_nodes = Nodes([single.client], [single.process.pid])
            masters = cluster.masters()
            cluster_nodes = Nodes([m.client() for m in masters], [m.process.pid for m in masters])
            crawl(root / "warm-up", single.tcp_url, single_nodes, 2, 50, {})
            for r in range(rounds):
                order = CONTENDERS[r % 3:] + CONTENDERS[:r % 3]
                for name in order:
                    if name == CLUSTER:
                        cluster.flush()
                        url, nodes, extra = cluster.url, cluster_nodes, {}
                    else:
                        single.flush()
                        url, nodes = single.tcp_url, single_nodes
                        extra = {"WEBCRAWL_SHARDS": 16} if name == SHARDED else {}
                    folder = root / f"round{r}" / name.replace(" ", "-").replace(",", "")
                    results[name].append(crawl(folder, url, nodes, HOSTS, PER_HOST, extra))
                    print(f"round {r + 1} {name}: {results[name][-1].throughput:.0f} pages/s",
                          flush=True)
        finally:
            cluster.stop()
            single.stop()
    return results


def report(results: dict[str, list[Run]]) -> tuple[str, float, int]:
    base = results[SINGLE]
    rows = []
    for name, runs in results.items():
        ratio = statistics.median(r.throughput / b.throughput for r, b in zip(runs, base))
        per_node = [statistics.median(r.calls_per_page()[i] for r in runs)
                    for i in range(len(runs[0].commands))]
        scripts = statistics.median(sum(r.calls_per_page("evalsha")) for r in runs)
        cpu_ratio = statistics.median(b.cpu_seconds / r.cpu_seconds for r, b in zip(runs, base))
        rows.append([name, statistics.median(r.throughput for r in runs), ratio, cpu_ratio,
                     statistics.median(r.crawl_cpu / r.pages * 1000 for r in runs),
                     statistics.median(r.redis_cpu / r.pages * 1000 for r in runs),
                     scripts, sum(per_node), " / ".join(f"{v:.0f}" for v in per_node)])
    cluster_ratio = rows[CONTENDERS.index(CLUSTER)][2]
    cpu_ratio_cluster = rows[CONTENDERS.index(CLUSTER)][3]
    errors: Counter[str] = Counter()
    bad = []
    for runs in results.values():
        for r in runs:
            errors.update(r.errors)
            bad += r.bad_lines
    crossslot = sum(r.errors.get("CROSSSLOT", 0) for r in results[CLUSTER])
    scripts_failed = sum(n for kind, n in errors.items() if kind in SCRIPT_ERRORS)
    cluster_runs = results[CLUSTER]
    busiest = max(statistics.median(r.calls_per_page()[i] for r in cluster_runs)
                  for i in range(len(cluster_runs[0].commands)))
    verdict = "meets" if cluster_ratio >= TARGET else "misses"
    body = (
        f"Two `scrapy crawl follow` processes sharing one crawl of {HOSTS * PER_HOST:,} pages on "
        f"{HOSTS} hosts (no per-host delay), {len(base)} rounds; every run fetched every page once. "
        f"The cluster runs at **{cluster_ratio:.2f}x** one server (target: at least {TARGET}x; "
        f"this {verdict} it). On a machine busy with the crawl itself, throughput is what the "
        "CPU allows: pages per CPU second of the crawl processes and every Redis server "
        f"together, as a ratio to one server's, is **{cpu_ratio_cluster:.2f}x**.\n\n"
        + table(["Redis", "pages/s", "ratio to one server", "pages per CPU second, ratio",
                 "crawl CPU s / 1000 pages",
                 "Redis CPU s / 1000 pages", "script calls / page", "Redis commands / page",
                 "commands / page, per node"], rows)
        + f"\n\nOn the cluster, CROSSSLOT answers: **{crossslot}**; failed or refused script calls "
        f"on any node over every run: **{scripts_failed}**; crawl log lines naming a script "
        f"failure or a routing error: **{len(bad)}**. Every error any node answered (`INFO "
        f"errorstats`, failed calls by command): {dict(errors) if errors else 'none'} (`failed "
        "client`: redis-py's CLIENT SETINFO greeting, which Redis 6.2 does not know).\n\n"
        f"Redis commands per page count those run inside the scripts. At 10,000 pages/s the "
        f"cluster's busiest master would run about {busiest * 10_000:,.0f} commands/s "
        "(this crawl's mix: new pages only, no page records)."
    )
    return body, cluster_ratio, crossslot + scripts_failed + len(bad)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench cluster")
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_CLUSTER_ROUNDS", 3)))
    parser.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv or [])
    body, _, _ = report(run(args.rounds))
    print(body)
    if not args.no_write:
        write_section("cluster", "Scheduler on a 3-master Redis Cluster against one server",
                      "./run bench cluster", body)


if __name__ == "__main__":
    main()
