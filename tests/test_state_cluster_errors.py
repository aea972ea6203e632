"""No script of the crawl state is ever refused by a Redis Cluster node, counted by the nodes
themselves: every script the crawl runs (push, pop, every land operation, leases, reclaim, claim,
exclusions, ledger, spend bucket, the dupefilter's test-and-set), through the crawl's own
components on a real 3-master cluster, and then each master's ``INFO errorstats`` and
``INFO commandstats``: no CROSSSLOT answer, no failed or refused script call, and scripts ran on
every master."""

from __future__ import annotations

from collections import Counter
from typing import Any

from scrapy import Request

from tests.runtimes import runtime_for
from webcrawl.change.trust import TrustPolicy
from webcrawl.dupefilter import BloomDupeFilter
from webcrawl.extensions._alloc_table import PageTable
from webcrawl.state.hosts import attempt_op, delay_op, finished_op, validator_op
from webcrawl.state.inspect import shard_figures
from webcrawl.state.pagestore import (
    gone_op, interval_op, lastmod_op, listing_op, observe_op, release_op, trigger_op,
)
from webcrawl.state.queue import Entry

HOSTS = [f"h{i}.example" for i in range(24)]


def counts(cluster: Any) -> dict[int, Counter[str]]:
    """Per master (by port): errors by kind, failed/refused calls and calls, by command."""
    out = {}
    for master in cluster.masters():
        client = master.client()
        seen: Counter[str] = Counter()
        for name, value in client.info("errorstats").items():
            seen[name] += int(value["count"])
        for name, value in client.info("commandstats").items():
            seen[name] += int(value["calls"])
            seen["failed:" + name] += int(value.get("failed_calls", 0)) + int(value.get("rejected_calls", 0))
        out[master.port] = seen
    return out


def crawl_traffic(runtime: Any) -> None:
    """What a crawl's processes ask of the state, at least once each."""
    batch, queue, now = runtime.batch, runtime.queue, runtime.clock.time()
    queue.check_seen_filter(runtime.bloom)
    offsets = runtime.bloom.offsets_function()
    for host in HOSTS:
        for path in ("a", "b"):
            url = f"http://{host}/{path}"
            batch.push(Entry(host, 0, '{"url": "%s"}' % url, offsets(url)))
    batch.flush()
    popped = [item for index in range(runtime.layout.shards)
              for item in queue.pop(index, runtime.owner, 0, 10, "n").items]
    assert len(popped) >= len(HOSTS)
    policy = TrustPolicy()
    for item in popped:
        url = f"http://{item.host}/a"
        batch.land(item.host, observe_op(url, full=True, time=now, record_hash="ab" * 8,
                                         validators=('"e"', None), billed=1.0))
        for op in (interval_op(url, 60.0, due_at=now - 1, follow=True), trigger_op(url),
                   listing_op(url, "h1", now), lastmod_op(url, now - 5, now, "learn"),
                   release_op(url)):
            batch.land(item.host, op)
        gone = f"http://{item.host}/gone"  # a page of its own: a 404 would keep /a from being due
        batch.land(item.host, observe_op(gone, full=True, time=now, record_hash="cd" * 8))
        batch.land(item.host, gone_op(gone, time=now))
    for host in {item.host for item in popped}:
        ok = host != HOSTS[-1]  # one host failing: held back
        for op in (attempt_op(ok, retry_after=None, base=1.0, maximum=5.0, half_life=60.0,
                              time=now), finished_op(now), validator_op("not_modified", now, policy)):
            batch.land(host, op)
    batch.flush()
    for index in range(runtime.layout.shards):
        queue.renew(index, runtime.owner, [i.lease for i in popped if i.shard == index])
    for item in popped[: len(popped) // 2]:
        batch.ack(item.shard, runtime.owner, item.lease)
    batch.flush()
    for index in range(runtime.layout.shards):
        queue.requeue_owned(index, runtime.owner, [i.lease for i in popped[len(popped) // 2:]
                                                   if i.shard == index])
        queue.reclaim_expired(index)
    revisits = [item for index in range(runtime.layout.shards)
                for item in queue.pop(index, runtime.owner, 100, 10, "d").items]
    assert revisits, "the due pages come out as revisits"
    for host in HOSTS[:3]:
        batch.land(host, delay_op(0.5))  # a Crawl-delay
        assert queue.claim(host) >= 0
    queue.sync_exclusions(1, [HOSTS[0]])
    batch.ledger(1, {"fetches": 3.0})
    batch.bucket(2.0)
    batch.flush()
    dupes = BloomDupeFilter.from_crawler(runtime.crawler)
    assert dupes.request_seen(Request(f"http://{HOSTS[1]}/a")) is True
    table = PageTable(runtime.pages, runtime.layout)
    assert table.load() == 2 * len(HOSTS) and table.sync() == 0  # two pages landed per host
    assert sum(f.pages for f in shard_figures(runtime.client, runtime.layout, now)) == 2 * len(HOSTS)


def test_no_script_is_refused_by_any_node(redis_cluster: Any, redis_cluster_url: str) -> None:
    before = counts(redis_cluster)
    runtime = runtime_for(redis_cluster_url, {"WEBCRAWL_SHARDS": 16, "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0},
                          name="slots")
    crawl_traffic(runtime)
    runtime.close()
    after = counts(redis_cluster)
    for port in after:
        delta = after[port] - before[port]
        refused = {k: n for k, n in delta.items()
                   if k == "errorstat_CROSSSLOT" or (k.startswith("failed:") and "client" not in k)}
        assert not refused, (port, refused)
        assert delta["cmdstat_evalsha"] > 0, f"no script ran on master {port}"
