"""Change events and the page lifecycle in the crawl state (lua2/lifecycle.lua through the land
script, webcrawl.state.eventlog), against a real redis-server: each verdict and its event in one
step; removals confirmed, probed and restored; moves handing a page's history over, in one
shard and across shards; retention; consumer groups with redelivery and lag."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.runtimes import decoded
from webcrawl.change.events import EVENT_FIELDS, encode_record
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.eventlog import EventLog
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import (EventArgs, PageStore, give_up_op, gone_op, interval_op,
                                      observe_op, release_op, trigger_op)
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.records import ALIVE, MOVED, REMOVED, SUSPECT
from webcrawl.state.scripts import ScriptSet

HOST = "shop.example"
A = f"http://{HOST}/p/1/lamp"
B = f"http://{HOST}/p/1/lamp-v2"
CONFIRM, PROBE = 300.0, 86_400.0


class State:
    """One crawl's state, written through its land script as the pipeline writes it."""

    def __init__(self, redis_url: str, crawl: str = "events", shards: int = 1,
                 retention: float = 7 * 86_400.0) -> None:
        self.client, _, _ = connect(redis_url)
        self.layout = CrawlLayout(crawl, shards)
        scripts = ScriptSet(self.client)
        queue = CrawlQueue(self.client, scripts, self.layout, cap=0, default_delay=0.0,
                           lease_seconds=60)
        self.batch = WriteBatch(self.client, scripts, self.layout, queue,
                                LandSettings(0.0, events_retention_seconds=retention,
                                             removal_confirm_seconds=CONFIRM,
                                             removed_probe_seconds=PROBE), bloom_slices=1)
        self.pages = PageStore(self.client, self.layout)
        self.log = EventLog(self.client, self.layout)

    def land(self, host: str, op: tuple[str, list[Any]]) -> list[str]:
        out: list[list[Any]] = []
        self.batch.land(host, op, out.append)
        self.batch.flush()
        return decoded(out[0])

    def fetch(self, url: str, record: dict[str, Any], time: float, *, status: int = 200,
              moved_from: str = "", volatile: tuple[str, ...] = (), full: bool = True,
              inherit: tuple[bytes, bytes] = (b"", b"")) -> list[str]:
        from webcrawl.change import record_hash

        host = url.split("/")[2]
        event = EventArgs(site="shop", page_type="product", url=url, status=status,
                          record=encode_record(record) if full else "", volatile=volatile,
                          moved_from=moved_from, moved_url=moved_from,
                          moved_host=moved_from.split("/")[2] if moved_from else "",
                          inherit=inherit[0], inherit_record=inherit[1])
        fields = [k for k in record if k not in volatile]
        return self.land(host, observe_op(url, full=full, time=time, type_id=1,
                                          record_hash=record_hash(record, fields) if full else None,
                                          event=event))

    def gone(self, url: str, time: float, status: int = 404) -> list[str]:
        event = EventArgs(site="shop", page_type="product", url=url, status=status)
        return self.land(url.split("/")[2], gone_op(url, time=time, event=event))

    def events(self) -> list[dict[str, Any]]:
        return list(self.log.events())

    def due(self, url: str) -> float:
        record = self.pages.get(url, url.split("/")[2])
        assert record is not None
        return record.due

    def server_time(self) -> float:
        seconds, micros = self.client.time()
        return float(seconds) + micros / 1e6


@pytest.fixture
def state(redis_url: str) -> Iterator[State]:
    view = State(redis_url)
    yield view
    view.client.close()


def test_a_new_then_changed_record_makes_one_event_each_with_both_sides(state: State) -> None:
    assert state.fetch(A, {"price": "19.99", "stock": "5"}, 100.0)[3] == "new"
    assert state.fetch(A, {"price": "19.99", "stock": "5"}, 200.0)[3] == ""  # unchanged: no event
    reply = state.fetch(A, {"price": "17.49", "stock": "5"}, 300.0)
    assert reply[0] == "changed" and reply[3] == "changed"
    new, changed = state.events()
    assert list(new) == list(EVENT_FIELDS)
    assert (new["kind"], new["previous"], new["previous_fetch_at"], new["changed_fields"]) == (
        "new", None, None, {})
    assert new["record"] == {"price": "19.99", "stock": "5"} and new["detected_at"] == 100.0
    assert changed["previous"] == {"price": "19.99", "stock": "5"}
    assert changed["record"] == {"price": "17.49", "stock": "5"}
    assert changed["previous_fetch_at"] == 200.0  # the fetch the previous record came from
    assert changed["changed_fields"] == {"price": {"previous": "19.99", "current": "17.49"}}
    assert (changed["site"], changed["page_type"], changed["status"], changed["moved_to"]) == (
        "shop", "product", 200, None)
    assert len({new["event_id"], changed["event_id"]}) == 2


def test_the_event_the_landing_answers_is_the_one_recorded(state: State) -> None:
    reply = state.fetch(A, {"price": "1"}, 100.0)
    flat = json.loads(reply[5])
    recorded = state.client.xrange(state.layout.all_shards[0].events)
    assert reply[4] == recorded[0][0].decode()
    assert dict(zip(flat[::2], flat[1::2])) == {k.decode(): v.decode()
                                                for k, v in recorded[0][1].items()}


def test_volatile_fields_never_make_an_event_but_the_previous_record_is_the_latest(state: State) -> None:
    state.fetch(A, {"price": "1", "seen": "a"}, 100.0, volatile=("seen",))
    assert state.fetch(A, {"price": "1", "seen": "b"}, 200.0, volatile=("seen",))[3] == ""
    state.fetch(A, {"price": "2", "seen": "c"}, 300.0, volatile=("seen",))
    changed = state.events()[-1]
    assert changed["previous"] == {"price": "1", "seen": "b"}
    assert changed["changed_fields"] == {"price": {"previous": "1", "current": "2"}}


def test_a_removal_is_confirmed_once_then_probed_and_a_200_restores_it(state: State) -> None:
    state.fetch(A, {"price": "1"}, 100.0)
    now = state.server_time()
    assert state.gone(A, 200.0)[0] == "suspect"
    assert state.pages.get(A, HOST).state == SUSPECT
    assert now + CONFIRM <= state.due(A) <= state.server_time() + CONFIRM
    assert len(state.events()) == 1  # one 404 is no removal
    assert state.land(HOST, interval_op(A, 60.0))[0] == "1"
    assert state.due(A) >= now + CONFIRM  # the allocator does not move a confirmation
    reply = state.gone(A, 500.0, status=410)
    assert reply[0] == "removed" and reply[3] == "removed"
    removed = state.events()[-1]
    assert (removed["kind"], removed["record"], removed["previous"], removed["status"]) == (
        "removed", None, {"price": "1"}, 410)
    assert removed["previous_fetch_at"] == 100.0
    assert state.pages.get(A, HOST).state == REMOVED
    assert state.due(A) >= now + PROBE
    assert state.gone(A, 600.0)[0] == "gone"  # a probe that finds it still gone: no event
    assert len(state.events()) == 2
    reply = state.fetch(A, {"price": "3"}, 700.0)
    assert reply[3] == "restored"
    restored = state.events()[-1]
    assert restored["previous"] == {"price": "1"} and restored["record"] == {"price": "3"}
    assert restored["changed_fields"] == {"price": {"previous": "1", "current": "3"}}
    assert state.pages.get(A, HOST).state == ALIVE


def test_a_200_after_one_404_is_no_removal(state: State) -> None:
    state.fetch(A, {"price": "1"}, 100.0)
    state.gone(A, 200.0)
    assert state.fetch(A, {"price": "1"}, 300.0)[3] == ""
    assert [e["kind"] for e in state.events()] == ["new"]
    assert state.pages.get(A, HOST).state == ALIVE


def test_a_304_of_a_removed_page_restores_it_unchanged(state: State) -> None:
    state.fetch(A, {"price": "1"}, 100.0)
    state.gone(A, 200.0)
    state.gone(A, 300.0)
    assert state.fetch(A, {}, 400.0, full=False, status=304)[3] == "restored"
    restored = state.events()[-1]
    assert restored["record"] == restored["previous"] == {"price": "1"}
    assert restored["status"] == 304 and restored["changed_fields"] == {}


def test_a_removed_page_shown_again_is_probed_at_once_and_errors_keep_its_probe(state: State) -> None:
    state.fetch(A, {"price": "1"}, 100.0)
    state.gone(A, 200.0)
    state.gone(A, 300.0)
    assert state.land(HOST, trigger_op(A))[0] == "1"  # a listing shows it again
    assert state.due(A) <= state.server_time()
    record = state.pages.get(A, HOST)
    state.client.hset(state.layout.all_shards[0].pages, A, _in_flight(record))
    state.land(HOST, release_op(A, attempted=True))  # the probe failed (a timeout)
    assert state.due(A) >= state.server_time() + PROBE - 5


def _in_flight(record: Any) -> bytes:
    from webcrawl.state.records import pack

    record.due = -1
    return pack(record)


def test_a_move_hands_the_history_over_and_retires_the_old_url(state: State) -> None:
    state.fetch(A, {"price": "1"}, 100.0)
    state.fetch(A, {"price": "1"}, 200.0)
    state.land(HOST, interval_op(A, 60.0))
    assert state.due(A) > 0
    reply = state.fetch(B, {"price": "2"}, 300.0, moved_from=A)
    assert reply[0] == "changed" and reply[3] == "moved"  # B continues A's history
    moved = state.events()[-1]
    assert (moved["kind"], moved["url"], moved["canonical_url"], moved["moved_to"]) == (
        "moved", A, A, B)
    assert moved["previous"] == {"price": "1"} and moved["record"] == {"price": "2"}
    assert moved["previous_fetch_at"] == 200.0
    old, new = state.pages.get(A, HOST), state.pages.get(B, HOST)
    assert old.state == MOVED and old.due == 0
    assert new.visits == 2 and new.first_seen == 100.0
    assert state.pages.latest_record(A, HOST) is None
    assert state.fetch(A, {"price": "9"}, 400.0)[0] == "none"  # the old URL is retired
    assert state.fetch(B, {"price": "2"}, 500.0)[3] == ""
    assert [e["kind"] for e in state.events()] == ["new", "moved"]


def test_a_move_from_an_unknown_page_is_a_new_page(state: State) -> None:
    assert state.fetch(B, {"price": "2"}, 300.0, moved_from=A)[3] == "new"


def test_a_move_across_shards_goes_through_a_give_up(redis_url: str) -> None:
    state = State(redis_url, crawl="moves", shards=8)
    a = "http://old.example/p/1"
    other = next(f"new{i}.example" for i in range(100)
                 if state.layout.shard_index(f"new{i}.example") != state.layout.shard_index("old.example"))
    b = f"http://{other}/p/1"
    state.fetch(a, {"price": "1"}, 100.0)
    raw: list[list[Any]] = []
    state.batch.land("old.example", give_up_op(a), raw.append)
    state.batch.land("old.example", give_up_op(a), raw.append)
    state.batch.flush()
    (record, latest, *_), (again, *_) = raw
    assert latest == encode_record({"price": "1"}).encode() and again == b""  # once only
    assert state.pages.get(a, "old.example").state == MOVED
    assert state.fetch(a, {"price": "1"}, 150.0)[0] == "none"  # retired there
    reply = state.fetch(b, {"price": "2"}, 300.0, moved_from=a, inherit=(record, latest))
    assert reply[3] == "moved"
    event = state.events()[-1]
    assert (event["canonical_url"], event["moved_to"], event["previous"]) == (a, b, {"price": "1"})
    assert state.pages.get(b, other).visits == 1  # the history went along
    state.client.close()


def test_events_are_kept_for_the_retention_then_trimmed(redis_url: str) -> None:
    state = State(redis_url, crawl="short", retention=60.0)
    key = state.layout.all_shards[0].events
    state.client.xadd(key, {"k": "new"}, id=f"{int((state.server_time() - 120) * 1000)}-0")
    state.fetch(A, {"price": "1"}, 100.0)
    assert [e["kind"] for e in state.events()] == ["new"] and state.client.xlen(key) == 1
    state.client.close()


def test_a_consumer_gets_each_event_until_it_acknowledges_and_its_lag_shows(state: State) -> None:
    state.log.join("db")
    for i in range(3):
        state.fetch(f"http://{HOST}/p/{i}", {"price": str(i)}, 100.0 + i)
    first = state.log.read("db", "writer-1", count=2)
    assert [d.event["canonical_url"] for d in first] == [f"http://{HOST}/p/{i}" for i in (0, 1)]
    assert state.log.lag()["db"] >= 0.0
    # writer-1 dies holding two events: another member takes them over once they are stale.
    again = state.log.read("db", "writer-2", count=10, claim_after=0.0)
    assert [d.event["event_id"] for d in again[:2]] == [d.event["event_id"] for d in first]
    assert len(again) == 3
    assert state.log.pending("db", "writer-2") == again
    assert state.log.ack("db", again) == 3
    assert state.log.read("db", "writer-2", claim_after=0.0) == []
    assert state.log.lag() == {"db": 0.0}


def test_reading_since_a_time_keeps_events_detected_from_then(state: State) -> None:
    for t in (100.0, 200.0, 300.0):
        state.fetch(A, {"price": str(t)}, t)
    assert [e["detected_at"] for e in state.log.events(since=200.0)] == [200.0, 300.0]


def test_a_hub_is_due_before_the_pages_of_its_host(state: State) -> None:
    """Hubs find new pages: like sitemaps, they are read on time on a host that lags behind its
    revisits (due members of class 0)."""
    from webcrawl.state.pagestore import observe_op as op

    hub = f"http://{HOST}/category/lamps/"
    state.fetch(A, {"price": "1"}, 100.0)
    state.land(HOST, op(hub, full=True, time=100.0, record_hash="aa" * 16, hub=True))
    now = state.server_time()
    state.land(HOST, interval_op(A, 1.0, due_at=now - 50))
    state.land(HOST, interval_op(hub, 1.0, due_at=now - 10))
    first = state.client.zrange(state.layout.all_shards[0].due, 0, 0)[0]
    assert first.endswith(b"\0h^/category/lamps/")  # before A, due 40 s earlier (http://<host> cut)
