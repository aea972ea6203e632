"""The packed page record (webcrawl.state.records) and the land operation that keeps it ("O" in
lua2/land.lua, sent through WriteBatch) in a real redis-server: one layout read alike by Python,
numpy and Lua; verdicts, times, validators, what the page's own fetches cost; the revisit
model's statistics (intervals, histogram bins, exact change ages) equal to its own bookkeeping;
concurrent writers."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from tests.runtimes import StateView, decoded
from webcrawl.revisit import HistoryTable, PageHistory
from webcrawl.revisit.history import interval_bin
from webcrawl.state import records
from webcrawl.state.pagestore import hash_bytes, observe_op
from webcrawl.state.records import DTYPE, SIZE, SLOTS, Record, history_table, pack, unpack, unpack_many

URL = "http://shop.example/product/1/lamp"
HOST = "shop.example"


class Pages(StateView):
    def observe(self, url: str = URL, **kwargs: object) -> list[str]:
        """One observation (:func:`observe_op` arguments), flushed at once: its answer."""
        kwargs.setdefault("full", True)
        out: list[list[object]] = []
        self.batch.land(HOST, observe_op(url, **kwargs), out.append)  # type: ignore[arg-type]
        self.batch.flush()
        return decoded(out[0])

    def get(self, url: str = URL) -> Record | None:
        return self.pages.get(url, HOST)


@pytest.fixture
def pages(redis_url: str) -> Iterator[Pages]:
    view = Pages(redis_url, "records")
    yield view
    view.close()


def full_record() -> Record:
    """A record with every field away from its default."""
    return Record(last_fetched=5.5, first_seen=1.25, last_change=4.0, due=9.0, iv=3600.0,
                  fetches=7, not_modified=2, visits=6, changes=3, exact_changes=1, seconds=4.25,
                  unchanged_seconds=1.5, exact_seconds=0.75,
                  bins=[(3, 1, 2.5), (10, 2, 70.0), (55, 1, 1e9), (0, 4, 3.0)], billed=123.5,
                  billed_n=5, last_interval=0.5, last_changed=1, type=300, tier=4, kind=1,
                  follow=1, lastmod=2.0, lastmod_read=3.0, last_tried=5.0, hash=b"\x01" * 7 + b"\xff")


def test_pack_and_unpack_keep_every_field_in_one_fixed_size() -> None:
    record = full_record()
    raw = pack(record)
    assert len(raw) == SIZE == records.PACKED_DTYPE.itemsize
    assert unpack(raw) == record
    assert unpack(raw + b"extra") == record  # only the record's own bytes are read
    row = unpack_many([raw])[0]  # numpy reads the same bytes, as the wider DTYPE
    assert row.dtype == DTYPE
    assert (row["billed"], row["type"], row["tier"], row["b2"], row["s2"], row["hash"]) == (
        123.5, 300, 4, 55, 1e9, record.hash)
    empty = pack(Record())
    assert unpack(empty) == Record() and unpack(empty).bins == []
    rows = unpack_many([raw, empty])
    assert rows["fetches"].tolist() == [7, 0] and len(unpack_many([])) == 0
    assert len(unpack(pack(Record(bins=[(i, 1, 1.0) for i in range(SLOTS + 2)]))).bins) == SLOTS


def test_an_empty_record_is_an_empty_history() -> None:
    assert Record().page_history() == PageHistory()
    assert Record().mean_cost is None and Record(billed=9.0, billed_n=3).mean_cost == 3.0


def test_lua_writes_the_bytes_python_reads(pages: Pages) -> None:
    pages.observe(time=1000.0, record_hash="ab" * 8, type_id=2, tier=3, billed=7.0)
    pages.observe(time=1100.0, record_hash="cd" * 8, change_age=30.0, billed=8.0)
    raw = pages.client.hget(pages.layout.shard(HOST).pages, URL)
    assert pack(unpack(raw)) == raw  # byte for byte
    record = unpack(raw)
    assert (record.type, record.tier, record.billed, record.exact_seconds) == (2, 3, 15.0, 30.0)
    assert "rec_read" in records.LUA and "struct.unpack" in records.LUA


def test_verdicts_times_validators_and_cost(pages: Pages) -> None:
    first = pages.observe(time=1000.0, record_hash="aa" * 8, billed=500.0, type_id=3,
                          validators=('"v1"', "Thu, 01 Jan 2026 00:00:00 GMT"))
    assert first[:2] == ["new", ""]
    assert pages.pages.validators(URL, HOST) == ('"v1"', "Thu, 01 Jan 2026 00:00:00 GMT")
    second = pages.observe(time=1600.0, record_hash="aa" * 8, billed=400.0, validators=('"v2"', None))
    assert second[0] == "unchanged" and float(second[1]) == 600.0
    assert pages.pages.validators(URL, HOST) == ('"v2"', None)  # a missing one is not kept
    assert pages.observe(time=1700.0, full=False, billed=100.0)[0] == "unchanged"  # a 304
    assert pages.pages.validators(URL, HOST) == ('"v2"', None)  # a 304 leaves them alone
    changed = pages.observe(time=2700.0, record_hash="bb" * 8, billed=450.0)
    assert changed[0] == "changed" and float(changed[1]) == 1000.0
    assert pages.pages.validators(URL, HOST) == ('"v2"', None)  # none given: none replaced
    pages.observe(time=2800.0, record_hash="bb" * 8, validators=(None, None))
    assert pages.pages.validators(URL, HOST) == (None, None)  # an answer without any
    page = pages.get()
    assert page is not None
    assert (page.first_seen, page.last_fetched, page.last_change, page.last_tried) == (1000.0, 2800.0, 2700.0, 0.0)
    assert (page.hash, page.type, page.fetches, page.not_modified) == (hash_bytes("bb" * 8), 3, 5, 1)
    assert (page.visits, page.changes, page.seconds, page.unchanged_seconds) == (4, 1, 1800.0, 800.0)
    assert (page.last_interval, page.last_changed) == (100.0, 0)
    assert (page.billed, page.billed_n, page.mean_cost) == (1450.0, 4, 362.5)  # 2800: no cost noted


def test_a_304_without_a_record_observes_nothing(pages: Pages) -> None:
    assert pages.observe(time=5.0, full=False, billed=90.0)[0] == "none"
    assert pages.get() is None and pages.get("http://shop.example/never") is None


def test_an_observation_older_than_the_last_counts_a_zero_interval(pages: Pages) -> None:
    pages.observe(time=100.0, record_hash="aa" * 8)
    assert float(pages.observe(time=40.0, record_hash="aa" * 8)[1]) == 0.0
    page = pages.get()
    assert page is not None and page.last_fetched == 100.0 and page.seconds == 0.0 and page.visits == 1


def test_type_tier_and_kind_are_kept_until_told_otherwise(pages: Pages) -> None:
    pages.observe(time=1.0, record_hash="aa" * 8, type_id=2, tier=4)
    pages.observe(time=2.0, record_hash="aa" * 8)  # no type, no tier given: both kept
    assert (pages.get().type, pages.get().tier) == (2, 4)
    pages.observe(time=3.0, record_hash="aa" * 8, tier=0)  # the override went: back to none
    assert pages.get().tier == 0 and pages.get().kind == records.KIND_PAGE
    sitemap = "http://shop.example/sitemap.xml"
    pages.observe(sitemap, time=1.0, record_hash="cc" * 8, sitemap=True, billed=2.0)
    assert pages.get(sitemap).kind == records.KIND_SITEMAP


def test_every_write_marks_the_page_for_the_allocator(pages: Pages) -> None:
    pages.observe(time=1.0, record_hash="aa" * 8)
    pages.observe(time=2.0, record_hash="aa" * 8)
    assert pages.pages.take_dirty(0) == [URL] and pages.pages.take_dirty(0) == []
    pages.observe(time=3.0, full=False)
    assert pages.pages.take_dirty(0) == [URL]


def simulate(pages: Pages, steps: list[float], rng: random.Random) -> PageHistory:
    """Observe ``URL`` at the given steps apart, changing at random (exact ages now and then);
    return the revisit model's own bookkeeping of the same visits."""
    truth = PageHistory()
    now, current = 1e9, 0
    pages.observe(time=now, record_hash=f"{current:016x}")
    for step in steps:
        interval = (now + step) - now  # what the script computes from the stored times
        now += step
        changed = rng.random() < 0.4
        age = rng.choice([None, rng.uniform(0, interval * 1.2)])
        current += changed
        pages.observe(time=now, record_hash=f"{current:016x}", change_age=age)
        truth.observe(interval, changed, age if changed else None)
    return truth


def test_statistics_equal_the_revisit_models_page_history(pages: Pages) -> None:
    """Intervals in at most as many bins as a record keeps: the record is the model's history,
    exactly."""
    rng = random.Random(4)
    truth = simulate(pages, [rng.choice([0.0, 30.0, 61.0, 3600.0]) for _ in range(300)], rng)
    got = pages.get().page_history()
    assert (got.visits, got.changes, got.exact_changes) == (truth.visits, truth.changes, truth.exact_changes)
    assert got.changed_counts == truth.changed_counts
    for name in ("seconds", "unchanged_seconds", "exact_seconds"):
        assert getattr(got, name) == pytest.approx(getattr(truth, name), rel=1e-12)
    assert got.changed_seconds == pytest.approx(truth.changed_seconds, rel=1e-12)


def test_more_bins_than_slots_merge_into_the_nearest_kept_bin(pages: Pages) -> None:
    """A record keeps :data:`SLOTS` bins: an interval in another bin joins the nearest kept one,
    so counts and seconds stay whole and only where they sit moves, by the least possible."""
    rng = random.Random(9)
    steps = [rng.choice([10.0, 100.0, 1e3, 1e4, 1e5, 1e6]) for _ in range(200)]
    truth = simulate(pages, steps, rng)
    got = pages.get()
    assert len(got.bins) == SLOTS
    history = got.page_history()
    assert sum(history.changed_counts) == sum(truth.changed_counts)
    assert sum(history.changed_seconds) == pytest.approx(sum(truth.changed_seconds), rel=1e-12)
    kept = sorted(b for b, _, _ in got.bins)
    for b, count in enumerate(truth.changed_counts):
        if count and b not in kept:  # moved to the nearest kept bin
            nearest = min(kept, key=lambda k: abs(k - b))
            assert history.changed_counts[nearest] >= count


@pytest.mark.parametrize("interval", [0.0, 0.5, 1.0, 1.4142, 1.4143, 2.0, 2.0 ** 1.5, 8.0, 30.0,
                                      2.0 ** 10.5, 86_400.0, 2.0 ** 27.5, 1e12])
def test_a_changed_interval_falls_in_the_models_bin(pages: Pages, interval: float) -> None:
    start = 1_000_000.0
    pages.observe(time=start, record_hash="aa" * 8)
    pages.observe(time=start + interval, record_hash="bb" * 8)
    interval = (start + interval) - start  # what the script sees
    (b, n, s), = pages.get().bins
    # A bin's sum of intervals is kept as float32 (records.FIELDS): 24 bits of precision.
    assert (b, n) == (int(interval_bin(interval)), 1) and s == pytest.approx(interval, rel=2**-24)


def test_history_table_of_records_is_the_models_table(pages: Pages) -> None:
    rng = random.Random(2)
    urls = [f"http://shop.example/p{i}" for i in range(5)]
    for i, url in enumerate(urls):
        now = 1e9
        pages.observe(url, time=now, record_hash=f"{0:016x}")
        for k in range(1, 20 + i):
            now += rng.choice([60.0, 3600.0, 86_400.0])
            pages.observe(url, time=now, record_hash=f"{k * (rng.random() < 0.5):016x}",
                          change_age=rng.choice([None, 10.0]))
    raws = pages.pages.raw_records(0, urls)
    table = history_table(unpack_many(raws))
    model = HistoryTable.from_pages([unpack(r).page_history() for r in raws])
    for name in ("visits", "changes", "exact_changes", "seconds", "unchanged_seconds",
                 "exact_seconds", "changed_counts", "changed_seconds"):
        assert np.array_equal(getattr(table, name), getattr(model, name)), name


def test_concurrent_observations_from_many_clients_all_count(redis_url: str) -> None:
    views = [Pages(redis_url, "records") for _ in range(8)]
    views[0].observe(time=0.0, record_hash="aa" * 8)

    def work(view: Pages) -> None:
        for _ in range(50):
            view.observe(time=10.0, record_hash="aa" * 8, billed=1.0)

    threads = [threading.Thread(target=work, args=(v,)) for v in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    page = views[0].get()
    assert page is not None and (page.visits, page.fetches, page.billed, page.billed_n) == (400, 401, 400.0, 400)
    for view in views:
        view.close()


def test_a_record_of_the_previous_layout_reads_with_the_new_fields_at_zero(pages: Pages) -> None:
    record = full_record()
    old = pack(record)[:records.OLD_SIZE]
    assert unpack(old) == record and unpack_many([old])[0]["fetches"] == 7
    pages.client.hset(pages.layout.shard(HOST).pages, URL, old)  # Lua reads it too
    pages.observe(time=10.0, record_hash="aa" * 8)
    page = pages.get()
    assert page is not None and page.fetches == 8 and page.state == records.ALIVE


def test_a_land_op_with_the_wrong_arguments_is_refused_before_it_is_sent(pages: Pages) -> None:
    with pytest.raises(ValueError, match="land op O takes 27 arguments, got 2"):
        pages.batch.land(HOST, ("O", [URL, "f"]))
    assert len(pages.batch) == 0
