"""Listing summaries as change detectors (webcrawl.pipelines.listing): each listed item's summary
compared, in the item's shard, with the one kept from the last listing (land operation "L"),
in a real redis-server. A changed summary makes a known item due at once where the allocator
said its known changes are worth following; an unchanged one is no observation of the item."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runtimes import land, runtime_for
from webcrawl.change import record_hash
from webcrawl.items import ListingItem, PageItem
from webcrawl.pipelines.listing import ListingPipeline
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import interval_op, observe_op

LISTING = "http://shop.test/category/a/"
ITEM = "http://shop.test/product/1/x"
HOST = "shop.test"
S = "webcrawl/listing/"


def listed(price: str, when: float, item: str = ITEM) -> ListingItem:
    return ListingItem(LISTING, item, {"price": price, "stock": "3"}, "shop", when)


@pytest.fixture
def runtime(redis_url: str) -> Iterator[CrawlRuntime]:
    runtime = runtime_for(redis_url)
    yield runtime
    runtime.close()


def process(pipeline: ListingPipeline, *items: ListingItem) -> None:
    """The items of one listing page, landed with one batch."""
    for item in items:
        assert pipeline.process_item(item) is item  # it passes on
    pipeline.runtime.batch.flush()


def known(runtime: CrawlRuntime, fetched_at: float, *, follow: bool, interval: float = 86_400.0) -> None:
    """``ITEM`` as a known page fetched at ``fetched_at``, scheduled by the allocator."""
    land(runtime, HOST, observe_op(ITEM, full=True, time=fetched_at, record_hash="aa" * 8))
    land(runtime, HOST, interval_op(ITEM, interval, follow=follow))


def test_a_changed_summary_makes_a_followed_item_due_at_once(runtime: CrawlRuntime) -> None:
    pipeline = ListingPipeline(runtime, runtime.stats)
    now = runtime.clock.time()
    known(runtime, now - 60, follow=True)
    assert runtime.pages.get(ITEM, HOST).due == pytest.approx(now - 60 + 86_400.0)
    process(pipeline, listed("10", now - 30))
    assert runtime.stats.get_value(S + "first") == 1
    process(pipeline, listed("12", now))
    assert runtime.stats.get_value(S + "changed") == 1
    assert runtime.pages.get(ITEM, HOST).due <= runtime.clock.time()
    assert runtime.stats.get_value(S + "items") == 2


def test_a_changed_summary_leaves_an_item_not_followed_on_its_schedule(runtime: CrawlRuntime) -> None:
    pipeline = ListingPipeline(runtime, runtime.stats)
    now = runtime.clock.time()
    known(runtime, now - 60, follow=False)
    process(pipeline, listed("10", now - 30))
    process(pipeline, listed("12", now))
    assert runtime.stats.get_value(S + "changed") == 1
    assert runtime.pages.get(ITEM, HOST).due == pytest.approx(now - 60 + 86_400.0)


def test_an_unchanged_summary_is_no_fetch_of_the_item(runtime: CrawlRuntime) -> None:
    """It leaves the page's record (its fetches and costs) alone; the allocator reads it as
    evidence of the page's change rate (webcrawl/extensions/_alloc_plan.listing_readings)."""
    pipeline = ListingPipeline(runtime, runtime.stats)
    now = runtime.clock.time()
    known(runtime, now - 60, follow=True)
    process(pipeline, listed("10", now - 30))
    runtime.pages.take_dirty(0)
    before = runtime.client.hget(runtime.layout.shard(HOST).pages, ITEM)
    process(pipeline, listed("10", now), *(listed("10", now, f"http://shop.test/product/{k}/y")
                                          for k in range(2, 5)))
    assert runtime.stats.get_value(S + "unchanged") == 1 and runtime.stats.get_value(S + "first") == 4
    assert runtime.client.hget(runtime.layout.shard(HOST).pages, ITEM) == before  # untouched
    assert runtime.pages.take_dirty(0) == [ITEM]  # the allocator reads what listings say
    assert runtime.pages.listings(0, [ITEM, "http://shop.test/product/9/z"]) == [
        (now - 30, now), None], "shown unchanged since the first listing; never listed: nothing"
    assert runtime.pages.count() == 1  # listed items are not pages until fetched


def test_a_change_the_items_fetch_already_saw_is_not_followed_again(runtime: CrawlRuntime) -> None:
    pipeline = ListingPipeline(runtime, runtime.stats)
    now = runtime.clock.time()
    known(runtime, now - 100, follow=True)
    process(pipeline, listed("10", now - 90))
    # The item is fetched after that listing and found changed ...
    land(runtime, HOST, observe_op(ITEM, full=True, time=now - 50, record_hash="bb" * 8))
    due = runtime.pages.get(ITEM, HOST).due
    # ... so the next listing's new summary shows a change already seen.
    process(pipeline, listed("12", now))
    assert runtime.stats.get_value(S + "seen") == 1 and runtime.stats.get_value(S + "changed") is None
    assert runtime.pages.get(ITEM, HOST).due == due


def test_a_changed_summary_of_an_item_never_fetched_only_updates_the_summary(runtime: CrawlRuntime) -> None:
    pipeline = ListingPipeline(runtime, runtime.stats)
    now = runtime.clock.time()
    process(pipeline, listed("10", now - 10))
    process(pipeline, listed("12", now))
    assert runtime.stats.get_value(S + "changed") == 1 and runtime.pages.get(ITEM, HOST) is None
    kept = runtime.client.hget(runtime.layout.shard(HOST).listing, ITEM).decode().split()
    assert kept[0] == record_hash({"price": "12", "stock": "3"})
    assert float(kept[1]) == pytest.approx(now) == pytest.approx(float(kept[2]))  # changed, listed


def test_items_are_kept_in_their_own_hosts_shard(redis_url: str) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_SHARDS": 8}, name="sharded")
    pipeline = ListingPipeline(runtime, runtime.stats)
    items = [listed("1", 1.0, f"http://h{i}.shop.test/product/{i}/x") for i in range(12)]
    process(pipeline, *items)
    assert runtime.stats.get_value(S + "first") == 12
    for item in items:
        host = item.item_url.split("/")[2]
        assert runtime.client.hexists(runtime.layout.shard(host).listing, item.item_url)
    assert len({runtime.layout.shard_index(i.item_url.split("/")[2]) for i in items}) > 1
    runtime.close()


def test_pages_and_other_items_pass_through(runtime: CrawlRuntime) -> None:
    pipeline = ListingPipeline(runtime, runtime.stats)
    page = PageItem("http://a.test/", "http://a.test/", "shop", None, 200, 0.0)
    assert pipeline.process_item(page) is page
    assert len(runtime.batch) == 0 and runtime.stats.get_value(S + "items") is None
