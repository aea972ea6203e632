"""The planner's page index (webcrawl.state.pages) and ledger additions, in a real redis-server."""

from __future__ import annotations

import numpy as np
import pytest
import redis

from webcrawl.revisit import HistoryTable, effective_data
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.pages import RECORD, SEGMENT, SLOTS, PageIndex, compact_bins

KEYS = CrawlKeys("plan")


def visit(history: HistoryStore, url: str, times: list[float], hashes: list[str]) -> None:
    for t, h in zip(times, hashes):
        history.observe(url, now=t, record_hash=h, page_type="product", cost=1000.0)


def test_compact_bins_keeps_the_busiest_and_merges_the_rest_exactly() -> None:
    counts, seconds = [0] * 48, [0.0] * 48
    for b, c in [(3, 5), (4, 1), (10, 7), (11, 2), (20, 1), (30, 3)]:
        counts[b], seconds[b] = c, 100.0 * c * (b + 1)
    slot_counts, slot_seconds = compact_bins(counts, seconds)
    assert sum(slot_counts) == sum(counts) and sum(slot_seconds) == pytest.approx(sum(seconds))
    assert len(slot_counts) == SLOTS and slot_counts[0] == 6  # bin 4 merged into bin 3


def test_records_follow_the_histories(redis_client: redis.Redis) -> None:
    history, index = HistoryStore(redis_client, KEYS), PageIndex(redis_client, KEYS)
    visit(history, "http://a.test/1", [0, 3600, 7200, 10800], ["a", "b", "b", "c"])
    visit(history, "http://a.test/2", [0, 3600], ["a", "a"])
    history.observe("http://a.test/3", now=50.0, record_hash=None, status=304)  # no history: no row
    index.mark(["http://a.test/1", "http://a.test/2", "http://a.test/3"], now=10800)
    assert index.sync(now=10800, settle=1.0) == 0  # not settled yet
    index.mark(["http://a.test/2"], now=10900)  # marked again: waits for its own settling
    assert index.sync(now=10801, settle=1.0) == 2 and index.dirty() == 1
    assert index.sync(now=10901, settle=1.0) == 1 and index.dirty() == 0
    columns = index.load()
    assert len(columns) == 2 and columns.types == {"product": 1}
    assert index.urls(columns.ids) == ["http://a.test/1", "http://a.test/2"]
    first = columns.records[0]
    assert (first["visits"], first["changes"], first["last_fetched"]) == (3, 2, 10800.0)
    stored = history.get("http://a.test/1")
    assert stored is not None
    expected = effective_data(stored.page_history())
    assert first["events"] == pytest.approx(expected.events[0])
    assert first["exposure"] == pytest.approx(expected.exposure[0])
    table = columns.history_table()
    assert isinstance(table, HistoryTable) and table.changed_counts.shape == (2, SLOTS)


def test_load_spans_segments_and_skips_unwritten_rows(redis_client: redis.Redis) -> None:
    index = PageIndex(redis_client, KEYS)
    redis_client.set(KEYS.pages_prefix + "seq", SEGMENT + 2)
    row = np.zeros(1, dtype=RECORD)
    row["last_fetched"], row["visits"] = 5.0, 1
    redis_client.setrange(KEYS.pages_prefix + "rec:1", RECORD.itemsize, row.tobytes())
    columns = index.load()
    assert list(columns.ids) == [SEGMENT + 1] and columns.records["visits"][0] == 1


def test_rebuild_marks_every_history(redis_client: redis.Redis) -> None:
    history, index = HistoryStore(redis_client, KEYS), PageIndex(redis_client, KEYS)
    for i in range(5):
        visit(history, f"http://a.test/{i}", [0, 60], ["a", "b"])
    assert index.rebuild(now=100) == 5 and index.sync(now=100) == 5 and len(index.load()) == 5


def test_planned_visits_draw_on_the_reservation(redis_client: redis.Redis) -> None:
    ledger = LedgerStore(redis_client, KEYS)
    cycle = ledger.start_cycle(budget=10.0, cycle_seconds=60, now=0.0)
    ledger.set_plan(cycle.id, reserved=8.0, fields={"planned:revisit": 8})
    assert ledger.admit(cycle.id, 2.0) and not ledger.admit(cycle.id, 1.0)  # 2 + 8 reserved
    assert ledger.admit(cycle.id, 5.0, planned=True)  # eats its reservation: 3 left reserved
    ledger.release(cycle.id, 2.0)  # never went on the wire
    assert ledger.admit(cycle.id, 2.0) and not ledger.admit(cycle.id, 0.5)
    ledger.drop_reservation(cycle.id)  # the plan is over: its share is free
    assert ledger.admit(cycle.id, 3.0)
    n = ledger.numbers(cycle.id)
    assert (n["in_flight"], n["refused"], n["planned"]) == (10.0, 2.0, 1.0)
    ledger.release(cycle.id, 50.0)
    assert ledger.numbers(cycle.id)["in_flight"] == 0.0  # never below zero


def test_lock_is_released_only_by_its_holder(redis_client: redis.Redis) -> None:
    ledger = LedgerStore(redis_client, KEYS)
    assert ledger.lock("a", 10) and not ledger.lock("b", 10)
    assert not ledger.unlock("b") and ledger.unlock("a") and ledger.lock("b", 0.001)


def test_workers_and_deferred(redis_client: redis.Redis) -> None:
    ledger = LedgerStore(redis_client, KEYS)
    cycle = ledger.start_cycle(budget=1.0, cycle_seconds=60, now=0.0)
    ledger.heartbeat(cycle.id, "w1", expires=30.0)
    ledger.heartbeat(cycle.id, "w2", expires=10.0)
    assert ledger.live_workers(cycle.id, now=20.0) == 1
    ledger.leave(cycle.id, "w1")
    assert ledger.live_workers(cycle.id, now=20.0) == 0
    ledger.defer(cycle.id, ["x", "y", "z"])
    assert ledger.peek_deferred(2) == ["x", "y"] and ledger.deferred_count() == 3
    ledger.trim_deferred(2)
    assert ledger.peek_deferred() == ["z"] and ledger.numbers(cycle.id)["deferred"] == 3
