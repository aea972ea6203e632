"""Shared fixtures: a real redis-server, Redis Cluster and PostgreSQL, started by the tests
themselves."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from scrapy.utils.reactor import install_reactor

from webcrawl.state.embedded import redis_server_binary

# Components schedule timers through Scrapy's reactor helpers, which need the reactor Scrapy uses.
install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")


class RedisServer:
    """A throwaway redis-server on a unix socket in a temporary folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = folder / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                redis_server_binary(), "--port", "0", "--unixsocket", str(self.socket),
                "--dir", str(self.folder), "--save", "", "--appendonly", "no",
                "--maxmemory-policy", "noeviction",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.socket.exists() and self.client().ping():
                    return
            except redis.RedisError:
                pass
            time.sleep(0.01)
        raise RuntimeError("test redis-server did not start")

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=10)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    folder = Path(tempfile.mkdtemp(prefix="webcrawl-redis-"))
    server = RedisServer(folder)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """URL of the shared test redis-server, emptied before each test."""
    redis_server.client().flushall()
    return redis_server.url


@pytest.fixture
def redis_client(redis_server: RedisServer, redis_url: str) -> Iterator[redis.Redis]:
    client = redis_server.client()
    yield client
    client.close()


# A real Redis Cluster (tests/rediscluster.py): masters on 127.0.0.1 formed with redis-py alone.
from tests.rediscluster import LocalRedisCluster  # noqa: E402  (kept with the fixtures it serves)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalRedisCluster]:
    """Three masters, no replicas, shared by the whole session (about 2 s to form: Redis keeps
    a new master unwritable for 2 s). A generous node timeout: a node slowed down by a busy
    machine must not be voted out mid-test."""
    cluster = LocalRedisCluster(masters=3, replicas_per_master=0, node_timeout_ms=5000)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_cluster_url(redis_cluster: LocalRedisCluster) -> str:
    """URL of one node of the shared test cluster, every master emptied before each test."""
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture
def redis_cluster_with_replicas() -> Iterator[LocalRedisCluster]:
    """A cluster of its own for one test: three masters with one replica each and a 2000 ms node
    timeout, so a killed master is replaced in about 4 s."""
    cluster = LocalRedisCluster(masters=3, replicas_per_master=1, node_timeout_ms=2000)
    cluster.start()
    yield cluster
    cluster.stop()


# A real PostgreSQL (tests/pgserver.py) from Debian's package, for the database writer's tests.
from tests.pgserver import LocalPostgres, PostgresNotInstalled  # noqa: E402  (with its fixtures)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    """One server per test process (each xdist worker has its own), started when a test first
    asks for it (1 to 1.5 s, initdb most of it). A missing package fails the test: CI
    installs it, so a skip would only hide that the database tests did not run."""
    try:
        server = LocalPostgres()
    except PostgresNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: LocalPostgres) -> Iterator[str]:
    """URL of a new empty database of the shared test server, dropped after the test. A test
    may kill() or pause() the server: it is brought back afterwards for the next test."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    yield postgres_server.new_database(name)
    postgres_server.resume()
    if not postgres_server.running:
        postgres_server.restart()
    postgres_server.drop_database(name)


# -- the fast tier ---------------------------------------------------------------------------------
#: Test modules that run crawls, scrapy commands, demo servers or clusters in processes of their
#: own, or wait out real delays for seconds: the rest of the suite is the fast tier (``./run tests
#: -m fast``, well under a minute on two cores). A module that starts such things goes here.
SLOW_MODULES = frozenset({
    "test_addon", "test_allocator", "test_body_command", "test_closing", "test_commands_errors",
    "test_completeness", "test_conditional", "test_cost", "test_crawl_clock_skew",
    "test_crawl_cluster", "test_crawl_processes", "test_crawl_recovery", "test_crawl_stops",
    "test_crawlstate_clear", "test_database_outage", "test_demo_feed", "test_demo_lifecycle",
    "test_demo_main", "test_events_command", "test_events_durable", "test_events_lifecycle",
    "test_feed", "test_hostile_answers", "test_install", "test_live_freshness",
    "test_log_records", "test_pgserver", "test_pipelines_bodies", "test_pipelines_recordhash",
    "test_progress", "test_records_command", "test_rediscluster", "test_refused", "test_report",
    "test_report_browser", "test_robots_middleware", "test_scheduler", "test_scheduler_ahead",
    "test_scope_crawl", "test_scrapyd", "test_seen_filter", "test_settings_environment",
    "test_site_spider_crawl", "test_sites_checksites", "test_slow_hosts", "test_spacing",
    "test_ssrf_middleware", "test_startfeed", "test_state_cluster_errors",
})
HERE = Path(__file__).resolve().parent


#: The modules that take longest (``./run tests --durations=25``), handed out first so that no
#: worker is left running one of them alone at the end.
LONGEST_FIRST = ("test_database_outage", "test_demo_main", "test_events_durable",
                 "test_live_freshness", "test_report_browser", "test_refused", "test_crawl_recovery",
                 "test_events_lifecycle", "test_allocator")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder outside :data:`SLOW_MODULES` ``fast``; put the modules of
    :data:`LONGEST_FIRST` first."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.path).stem, len(rank)))
    gone = SLOW_MODULES - {p.stem for p in HERE.glob("test_*.py")}
    if gone:  # a renamed slow module would join the fast tier unnoticed
        raise pytest.UsageError(f"tests/conftest.py SLOW_MODULES names no module: {sorted(gone)}")
    fast = pytest.mark.fast
    for item in items:
        path = Path(item.path)
        if path.parent == HERE and path.stem not in SLOW_MODULES:
            item.add_marker(fast)
