"""The allocator's page table (webcrawl.extensions._alloc_table.PageTable): every known page's
record loaded once, then kept in step through the shards' dirty sets. Pages are written with the
crawl's own land operations, on a single redis-server and on a real 3-master cluster; its URL
store (URL bytes in one buffer, an index of 64-bit hashes) on its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from webcrawl.extensions import _alloc_table
from webcrawl.extensions._alloc_table import PageTable, UrlStore
from webcrawl.state import records
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
    found = table.row_of(url)
    assert found is not None, url
    return table.records[found]


def table_urls(table: PageTable) -> list[str]:
    return [table.url(r) for r in range(len(table))]


def test_load_reads_every_record_of_every_shard(pages: Pages) -> None:
    known = urls(12)
    pages.fetched(known, 1000.0)
    pages.fetched(known[:3], 1600.0, version="b", cost=3.0)  # three changed, at a higher cost
    table = PageTable(pages.store, pages.layout)
    assert table.load() == 12 and len(table) == 12 and sorted(table_urls(table)) == sorted(known)
    assert sorted(table.hosts) == HOSTS
    for url in known:
        host = url.split("/")[2]
        assert table.hosts[table.host_of[table.row_of(url)]] == host
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
    assert len(table) == 11 and set(urls(3, start=8)) <= set(table_urls(table))
    assert [int(row(table, u)["changes"]) for u in known[:2]] == [1, 1]
    untouched = table.rows_of(known[2:])
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
    assert again.load() == 1500 and sorted(table_urls(again)) == sorted(table_urls(table))


def test_load_after_sync_starts_afresh(pages: Pages) -> None:
    known = urls(40)
    pages.fetched(known[:30], 1000.0)
    table = PageTable(pages.store, pages.layout)
    table.load()
    pages.fetched(known[30:], 1000.0)
    pages.fetched(known[:5], 2000.0, version="b")
    assert table.sync() == 15 and len(table) == 40
    gone = known[7]  # a page no longer in Redis is no longer in a table loaded afresh
    pages.client.hdel(pages.layout.all_shards[pages.layout.shard_index(gone.split("/")[2])].pages, gone)
    assert table.load() == 39 and len(table) == 39
    assert table.row_of(gone) is None and sorted(table_urls(table)) == sorted(set(known) - {gone})
    assert (table.rows_of(table_urls(table)) == np.arange(39)).all()
    assert [int(row(table, u)["changes"]) for u in known[:5]] == [1] * 5
    assert table.sync() == 0


def test_the_records_are_a_writable_view(pages: Pages) -> None:
    pages.fetched(urls(3), 1000.0)
    table = PageTable(pages.store, pages.layout)
    table.load()
    at = table.row_of(urls(3)[1])
    rows = table.records
    rows["iv"][at] = 3600.0  # what the allocator does with the intervals it gives
    rows["follow"][at] = 1
    assert (table.records["iv"][at], table.records["follow"][at]) == (3600.0, 1)


def test_a_url_read_twice_in_one_batch_keeps_one_row_and_its_last_reading() -> None:
    class NoListings:
        def listings(self, index: int, urls: list[str]) -> list[None]:
            return [None] * len(urls)

    table = PageTable(NoListings(), CrawlLayout("table", 1))  # type: ignore[arg-type]
    first, again = (records.pack(records.Record(last_fetched=t, visits=1)) for t in (1.0, 2.0))
    page, other = "http://a.test/1", "http://B.test/2"
    assert table._update(0, [page, other, page], [first, first, again]) == 3
    assert len(table) == 2 and [table.url(r) for r in range(2)] == [page, other]
    assert table.records["last_fetched"].tolist() == [2.0, 1.0]
    assert [table.hosts[h] for h in table.host_of] == ["a.test", "b.test"]
    assert table._update(0, [other, "http://c.test/3"], [again, None]) == 1 and len(table) == 2


def test_urls_round_trip() -> None:
    store = UrlStore()
    odd = ["http://xn--caf-dma.test/é/ü?q=ß#frag", "http://a.test/日本語/ページ",
           "http://a.test/\U0001f600", "http://a.test/" + "long/" * 2000,
           "http://a.test/raw\udcc3\udca9",  # bytes that were not UTF-8, kept by surrogateescape
           "http://a.test/é", ""]
    rows = store.add(odd)
    assert rows.tolist() == list(range(len(odd)))
    assert [store.url(r) for r in rows] == odd
    assert [store.row_of(u) for u in odd] == list(range(len(odd)))
    # "surrogateescape" would give these two the same bytes; they stay two URLs
    assert store.row_of("http://a.test/raw\udcc3\udca9") != store.row_of("http://a.test/rawé")


def test_unknown_urls_have_no_row() -> None:
    store = UrlStore()
    assert store.row_of("http://a.test/") is None and store.rows_of([]).tolist() == []
    store.add(["http://a.test/1", "http://a.test/2"])
    assert store.row_of("http://a.test/3") is None
    assert store.rows_of(["http://a.test/2", "http://a.test/3", "http://a.test/1"]).tolist() == [1, -1, 0]


def test_many_urls_across_merges_of_the_pending_index() -> None:
    store = UrlStore()
    many = urls(20_000)
    for start in range(0, len(many), 1500):
        batch = many[start:start + 1500]
        rows = store.add(batch + batch[:10])  # repeated within a batch: one row each
        assert rows.tolist() == list(range(start, start + len(batch))) + list(range(start, start + 10))
        assert len(store) == start + len(batch)
    assert len(store.keys) > 10_000, "merged at least once"
    assert len(store.keys) + len(store.pending) == len(many), "one index entry a URL"
    assert (store.rows_of(many) == np.arange(len(many))).all()
    assert (store.add(many[::-1]) == np.arange(len(many))[::-1]).all() and len(store) == len(many)
    assert store.rows_of(urls(100, start=20_000)).tolist() == [-1] * 100
    assert [store.url(r) for r in (0, 9_999, 19_999)] == [many[0], many[9_999], many[19_999]]


def test_urls_with_the_same_hash_keep_their_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _alloc_table._url_hash
    same = {b"http://a.test/x", b"http://b.test/y", b"http://c.test/z"}
    monkeypatch.setattr(_alloc_table, "_url_hash", lambda data: 7 if data in same else real(data))
    store = UrlStore()
    assert store.add(["http://a.test/x", "http://b.test/y", "http://b.test/y"]).tolist() == [0, 1, 1]
    store.add(urls(5000))  # the first one's hash is merged into the sorted arrays
    assert 7 in store.keys and not store.pending
    assert store.add(["http://c.test/z", "http://b.test/y"]).tolist() == [5002, 1]
    assert store.rows_of(["http://a.test/x", "http://b.test/y", "http://c.test/z", "http://d.test/w"]
                         ).tolist() == [0, 1, 5002, -1]
    assert [store.url(r) for r in (0, 1, 5002)] == ["http://a.test/x", "http://b.test/y", "http://c.test/z"]
