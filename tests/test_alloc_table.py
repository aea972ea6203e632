"""The allocator's page table (webcrawl.extensions._alloc_table.PageTable): every known page's
record loaded once, then kept in step through the shards' dirty sets. Pages are written with the
crawl's own land operations, on a single redis-server and on a real 3-master cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from webcrawl.extensions._alloc_table import PageTable
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import PageStore, observe_op
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet

HOSTS = ["a.test", "b.test", "c.test", "d.test"]


class Pages:
    """Land operations of one crawl, and its page store."""

    def __init__(self, client: Any, shards: int) -> None:
        self.client = client
        self.layout = CrawlLayout("table", shards)
        scripts = ScriptSet(client)
        queue = CrawlQueue(client, scripts, self.layout, cap=0, default_delay=0.0, lease_seconds=30)
        self.batch = WriteBatch(client, scripts, self.layout, queue, LandSettings(0.0), bloom_slices=7)
        self.store = PageStore(client, self.layout)

    def fetched(self, urls: list[str], time: float, version: str = "a", cost: float = 1.0) -> None:
        for url in urls:
            self.batch.land(url.split("/")[2], observe_op(
                url, full=True, time=time, record_hash=f"{version}{url}".encode().hex(), type_id=1,
                billed=cost))
        self.batch.flush()


@pytest.fixture(params=["single", "cluster"])
def pages(request: pytest.FixtureRequest, redis_url: str) -> Iterator[Pages]:
    url = redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")
    client, _, cluster = connect(url)
    assert cluster == (request.param == "cluster")
    yield Pages(client, 1 if not cluster else 6)
    client.close()


def urls(n: int, start: int = 0) -> list[str]:
    return [f"http://{HOSTS[i % len(HOSTS)]}/p/{i}" for i in range(start, start + n)]


def row(table: PageTable, url: str) -> Any:
    return table.records[table.index[url]]


def test_load_reads_every_record_of_every_shard(pages: Pages) -> None:
    known = urls(12)
    pages.fetched(known, 1000.0)
    pages.fetched(known[:3], 1600.0, version="b", cost=3.0)  # three changed, at a higher cost
    table = PageTable(pages.store, pages.layout)
    assert table.load() == 12 and len(table) == 12 and sorted(table.urls) == sorted(known)
    assert sorted(table.hosts) == HOSTS
    for url in known:
        host = url.split("/")[2]
        assert table.hosts[table.host_of[table.index[url]]] == host
        stored = pages.store.get(url, host)
        assert stored is not None
        r = row(table, url)
        assert (r["last_fetched"], r["visits"], r["changes"]) == (
            stored.last_fetched, stored.visits, stored.changes)
    first = row(table, known[0])
    assert (first["last_fetched"], first["visits"], first["changes"]) == (1600.0, 1, 1)
    assert (first["billed"], first["billed_n"]) == (4.0, 2)
    assert table.sync() == 0, "loading empties the dirty sets"


def test_sync_reads_only_the_records_changed_since(pages: Pages) -> None:
    known = urls(8)
    pages.fetched(known, 1000.0)
    table = PageTable(pages.store, pages.layout)
    table.load()
    before = table.records.copy()
    pages.fetched(known[:2], 2000.0, version="b")  # changed
    pages.fetched(urls(3, start=8), 2000.0)  # new pages
    assert table.sync() == 5
    assert len(table) == 11 and set(urls(3, start=8)) <= set(table.urls)
    assert [int(row(table, u)["changes"]) for u in known[:2]] == [1, 1]
    untouched = [table.index[u] for u in known[2:]]
    assert (table.records[untouched] == before[untouched]).all()
    assert {table.hosts[h] for h in table.host_of} == set(HOSTS)
    assert table.sync() == 0


def test_the_table_grows_past_its_first_allocation(pages: Pages) -> None:
    many = urls(1500)
    pages.fetched(many[:700], 1000.0)
    table = PageTable(pages.store, pages.layout)
    assert table.load() == 700
    pages.fetched(many[700:], 1000.0)
    assert table.sync(batch=400) == 800
    assert len(table) == 1500 and len(table.records) == 1500
    assert table.records["last_fetched"].min() == 1000.0
    again = PageTable(pages.store, pages.layout)  # another process taking the allocation over
    assert again.load() == 1500 and sorted(again.urls) == sorted(table.urls)
