"""The benchmarks' latency proxy adds what it claims, and nothing else, on a real redis-server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bench._latency_proxy import LatencyProxy
from bench._latency_proxy_process import ProxyProcess, measure_added_rtt
from bench._scheduler_redis import BenchRedis

DELAY = 0.0005


@pytest.fixture(scope="module")
def tcp_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BenchRedis]:
    server = BenchRedis(Path(tmp_path_factory.mktemp("latency-redis")), tcp=True)
    yield server
    server.stop()


def test_a_ping_round_trip_grows_by_about_twice_the_delay(tcp_redis: BenchRedis) -> None:
    target = ("127.0.0.1", tcp_redis.tcp_port)
    with LatencyProxy(target, DELAY) as proxy:
        direct, proxied = measure_added_rtt(target, ("127.0.0.1", proxy.port), pings=150)
    added = proxied - direct
    # 1 ms is the floor by construction; relaying and timer wake-ups may add a little, not a lot.
    assert 2 * DELAY <= added < 2 * DELAY + 0.0006, f"added {added * 1000:.3f} ms"


def test_a_pipeline_pays_one_delay_and_bytes_arrive_intact(tcp_redis: BenchRedis) -> None:
    big = bytes(range(256)) * 8192  # 2 MiB: many chunks each way
    with LatencyProxy(("127.0.0.1", tcp_redis.tcp_port), 0.02) as proxy:
        client = redis.Redis(port=proxy.port, socket_timeout=10)
        client.flushall()
        client.set("latency:big", big)
        assert client.get("latency:big") == big
        pipe = client.pipeline(transaction=False)
        for i in range(200):
            pipe.incr(f"latency:n{i % 7}")
        started = time.monotonic()
        results = pipe.execute()
        elapsed = time.monotonic() - started
        client.close()
    assert results == [i // 7 + 1 for i in range(200)]  # every reply, in order
    # 200 commands, one round trip of 2 x 20 ms: latency is added per chunk, not per command.
    assert 0.04 <= elapsed < 0.5


def test_the_child_process_counts_client_writes(tcp_redis: BenchRedis) -> None:
    proxy = ProxyProcess(("127.0.0.1", tcp_redis.tcp_port), DELAY)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=10)
        client.ping()
        proxy.reset()
        for _ in range(10):
            client.ping()
        counters = proxy.counters()
        client.close()
    finally:
        proxy.stop()
    assert counters["client_writes"] == 10 and counters["bytes_down"] == 10 * len(b"+PONG\r\n")
    assert proxy.process.returncode == 0
