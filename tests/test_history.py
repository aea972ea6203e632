"""Page histories and validator trust in a real redis-server: verdicts, the revisit model's
statistics, atomic updates from many clients at once."""

from __future__ import annotations

import random
import threading

import pytest

from webcrawl.change import TrustPolicy
from webcrawl.clock import ManualClock
from webcrawl.revisit import PageHistory
from webcrawl.state.history import HistoryStore, PageRecord
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.trust import TrustStore

URL = "http://shop.example/product/1/lamp"
KEYS = CrawlKeys("t")


@pytest.fixture
def store(redis_client) -> HistoryStore:
    return HistoryStore(redis_client, KEYS)


def test_verdicts_times_validators_and_cost(store):
    first = store.observe(URL, now=1000.0, record_hash="a", cost=500, page_type="product",
                          validators=('"v1"', "Thu, 01 Jan 2026 00:00:00 GMT"))
    assert (first.verdict, first.interval) == ("new", None)
    assert store.validators(URL) == ('"v1"', "Thu, 01 Jan 2026 00:00:00 GMT")
    assert store.observe(URL, now=1600.0, record_hash="a", cost=400,
                         validators=('"v2"', None)).verdict == "unchanged"
    assert store.validators(URL) == ('"v2"', None)  # a missing validator is deleted, not kept
    assert store.observe(URL, now=1700.0, record_hash=None, cost=100, status=304).verdict == "unchanged"
    assert store.validators(URL) == ('"v2"', None)  # a 304 leaves the validators alone
    changed = store.observe(URL, now=2700.0, record_hash="b", cost=450)
    assert (changed.verdict, changed.interval) == ("changed", 1000.0)
    page = store.get(URL)
    assert page is not None
    assert (page.first_seen, page.last_fetched, page.last_change) == (1000.0, 2700.0, 2700.0)
    assert (page.hash, page.page_type, page.fetches, page.not_modified) == ("b", "product", 4, 1)
    assert (page.visits, page.changes, page.seconds, page.unchanged_seconds) == (3, 1, 1700.0, 700.0)
    assert (page.last_interval, page.last_changed, page.cost) == (1000.0, True, 1450.0)


def test_a_304_without_history_observes_nothing_but_books_its_cost(store):
    assert store.observe(URL, now=5.0, record_hash=None, cost=90, status=304).verdict == "none"
    page = store.get(URL)
    assert page is not None and page.visits == 0 and page.cost == 90 and page.hash is None
    assert store.get("http://shop.example/never") is None


def test_an_observation_older_than_the_last_counts_a_zero_interval(store):
    store.observe(URL, now=100.0, record_hash="a")
    assert store.observe(URL, now=40.0, record_hash="a").interval == 0.0
    page = store.get(URL)
    assert page is not None and page.last_fetched == 100.0 and page.seconds == 0.0


def test_statistics_equal_the_revisit_models_page_history(store):
    rng = random.Random(4)
    truth = PageHistory()
    now, current = 1e9, "h0"
    store.observe(URL, now=now, record_hash=current)
    for i in range(300):
        step = rng.choice([0.0, 30.0, 60.0, 120.0, rng.uniform(1, 2e6)])
        interval = (now + step) - now  # what the script computes from the stored times
        now += step
        changed = rng.random() < 0.4
        age = rng.choice([None, rng.uniform(0, interval * 1.2)])
        if changed:
            current = f"h{i + 1}"
        store.observe(URL, now=now, record_hash=current, change_age=age)
        truth.observe(interval, changed, age if changed else None)
    got = store.get(URL).page_history()
    assert (got.visits, got.changes, got.exact_changes) == (truth.visits, truth.changes, truth.exact_changes)
    assert got.changed_counts == truth.changed_counts
    for name in ("seconds", "unchanged_seconds", "exact_seconds"):
        assert getattr(got, name) == pytest.approx(getattr(truth, name), rel=1e-12)
    assert got.changed_seconds == pytest.approx(truth.changed_seconds, rel=1e-12)


def test_concurrent_observations_from_many_clients_all_count(redis_server, redis_url):
    stores = [HistoryStore(redis_server.client(), KEYS) for _ in range(8)]
    stores[0].observe(URL, now=0.0, record_hash="a")

    def work(store: HistoryStore) -> None:
        for _ in range(50):
            store.observe(URL, now=10.0, record_hash="a", cost=1)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    page = stores[0].get(URL)
    assert page is not None and page.visits == 400 and page.fetches == 401 and page.cost == 400


def test_body_pointer_and_round_trip_of_an_empty_hash(store):
    store.observe(URL, now=1.0, record_hash="a")
    store.set_body(URL, "0:0:100", "ff" * 16, 1.0)
    page = store.get(URL)
    assert page is not None and (page.body, page.body_hash, page.body_time) == ("0:0:100", "ff" * 16, 1.0)
    assert store.body_hash(URL) == "ff" * 16
    assert PageRecord.from_hash({}).page_history() == PageHistory()


def test_trust_store_shares_evidence_between_processes(redis_server, redis_url):
    clock = ManualClock(1000.0)
    policy = TrustPolicy(earn_after=2, ignore_limit=2)
    a = TrustStore(redis_server.client(), KEYS, policy, clock, cache_seconds=10.0)
    b = TrustStore(redis_server.client(), KEYS, policy, clock, cache_seconds=10.0)
    assert b.get("h").state == "learning"  # cached in b for 10 s
    a.observe("h", "confirmed")
    assert a.observe("h", "confirmed")[1] == "trusted"
    assert b.get("h").state == "learning"
    clock.advance(10.0)
    assert b.get("h").state == "trusted"
    b.observe("h", "ignored")
    _, change = a.observe("h", "ignored")  # both reports count: a read-modify-write per event
    assert change == "distrusted" and a.get("h").state == "distrusted"
    assert set(a.all()) == {"h"}


def test_unreadable_trust_is_learned_again(redis_client, redis_url):
    redis_client.hset(KEYS.trust_validators, "h", "{not json")
    assert TrustStore(redis_client, KEYS, TrustPolicy(), ManualClock()).get("h").state == "learning"
