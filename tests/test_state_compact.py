"""What a known page costs the crawl state, kept small without losing anything (layout 4), against a
real redis-server: the typed pages' latest records and the validators are keyed by 8 bytes of the
URL's SHA-1, due members keep the URL without its scheme and host, and change events and checks
leave the canonical URL out where it is the URL fetched. What the layout before wrote (URL keys,
whole URLs in due members) is still read, and removed with the page."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from tests.test_state_events import A, B, HOST, State
from webcrawl.change.events import encode_record
from webcrawl.database.apply import check_row
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.pagestore import EventArgs, interval_op, observe_op, page_key
from webcrawl.state.queue import CrawlQueue

VALIDATORS = ('"v1"', "Thu, 01 Jan 2026 00:00:00 GMT")


class Compact(State):
    def __init__(self, redis_url: str) -> None:
        super().__init__(redis_url, crawl="compact")
        self.shard = self.layout.all_shards[0]
        self.queue = CrawlQueue(self.client, self.batch.scripts, self.layout, cap=0,
                                default_delay=0.0, lease_seconds=60)

    def fetch_with_validators(self, url: str, record: dict[str, str], time: float) -> list[str]:
        from webcrawl.change import record_hash

        event = EventArgs(site="shop", page_type="product", url=url, status=200,
                          record=encode_record(record))
        return self.land(url.split("/")[2], observe_op(
            url, full=True, time=time, type_id=1, record_hash=record_hash(record, list(record)),
            validators=VALIDATORS, event=event))

    def to_old_layout(self, url: str) -> None:
        """Rewrite the page's latest record and validators as the layout before kept them."""
        for key in (self.shard.records, self.shard.validators):
            value = self.client.hget(key, page_key(url))
            assert value is not None
            self.client.hdel(key, page_key(url))
            self.client.hset(key, url, value)


@pytest.fixture
def state(redis_url: str) -> Iterator[Compact]:
    view = Compact(redis_url)
    yield view
    view.client.close()


def test_latest_records_and_validators_are_keyed_by_eight_bytes(state: Compact) -> None:
    assert state.fetch_with_validators(A, {"price": "1"}, 100.0)[3] == "new"
    key = hashlib.sha1(A.encode()).digest()[:8]
    assert page_key(A) == key
    assert state.client.hkeys(state.shard.records) == [key]
    assert state.client.hkeys(state.shard.validators) == [key]
    assert state.pages.validators(A, HOST) == VALIDATORS
    assert state.pages.latest_record(A, HOST) == encode_record({"price": "1"}).encode()
    assert state.client.hkeys(state.shard.pages) == [A.encode()], "the record keeps the URL"


def test_the_layout_before_still_reads_and_is_deleted_with_the_page(state: Compact) -> None:
    state.fetch_with_validators(A, {"price": "1"}, 100.0)
    state.to_old_layout(A)
    assert state.pages.validators(A, HOST) == VALIDATORS
    assert state.pages.latest_record(A, HOST) == encode_record({"price": "1"}).encode()
    # A revisit pops with the validators the layout before kept.
    now = state.server_time()
    state.land(HOST, interval_op(A, 3600.0, due_at=now - 1))
    popped = state.queue.pop(0, "me", 0, 10, "d")
    assert popped is not None and [i.item for i in popped.items] == ["p" + A]
    assert popped.items[0].validators == VALIDATORS
    # Its change event's previous is the record the layout before kept.
    assert state.fetch(A, {"price": "2"}, 200.0)[3] == "changed"
    assert state.events()[-1]["previous"] == {"price": "1"}
    # The page moves: its history, old entries included, leaves with it.
    state.fetch_with_validators(A, {"price": "3"}, 300.0)
    state.to_old_layout(A)
    state.fetch(B, {"price": "3"}, 400.0, moved_from=A)
    moved = state.events()[-1]
    assert moved["kind"] == "moved" and moved["previous"] == {"price": "3"}
    for key in (state.shard.records, state.shard.validators):
        assert state.client.hget(key, A) is None and state.client.hget(key, page_key(A)) is None


def test_due_members_keep_the_url_without_its_scheme_and_host(state: Compact) -> None:
    state.fetch(A, {"price": "1"}, 100.0)
    now = state.server_time()
    state.land(HOST, interval_op(A, 3600.0, due_at=now + 100))
    (member,) = state.client.zrange(state.shard.due, 0, -1)
    assert member.startswith(HOST.encode() + b"\0") and member.endswith(b"\0p^/p/1/lamp")
    # A member of the layout before (the whole URL) is replaced when the page is rescheduled...
    legacy = member[:-len(b"^/p/1/lamp")] + A.encode()
    state.client.zrem(state.shard.due, member)
    state.client.zadd(state.shard.due, {legacy: 0})
    state.land(HOST, interval_op(A, 3600.0, due_at=now + 200))
    (member,) = state.client.zrange(state.shard.due, 0, -1)
    assert member.endswith(b"\0p^/p/1/lamp")
    # ... and popped as the page it names.
    state.client.zrem(state.shard.due, member)
    state.client.zadd(state.shard.due, {member.replace(b"^/p/1/lamp", A.encode()): 0})
    state.land(HOST, interval_op(A, 3600.0, due_at=now - 1))
    assert len(state.client.zrange(state.shard.due, 0, -1)) == 1
    popped = state.queue.pop(0, "me", 0, 10, "d")
    assert popped is not None and [i.item for i in popped.items] == ["p" + A]
    # An https page, and one whose URL names another host than its member (kept whole).
    for url in (f"https://{HOST}:8443/x?y=1", "https://other.example/z"):
        state.land(HOST, observe_op(url, full=True, time=100.0, record_hash="ab" * 8))
        state.land(HOST, interval_op(url, 3600.0, due_at=now - 1))
    members = state.client.zrange(state.shard.due, 0, -1)
    assert any(m.endswith(b"\0p~:8443/x?y=1") for m in members)
    assert any(m.endswith(b"\0phttps://other.example/z") for m in members)
    popped = state.queue.pop(0, "me", 10, 10, "d")
    assert popped is not None
    assert sorted(i.item for i in popped.items) == sorted(
        ["p" + f"https://{HOST}:8443/x?y=1", "phttps://other.example/z"])


def test_events_and_checks_leave_out_a_canonical_url_that_is_the_url_fetched(redis_url: str) -> None:
    state = Compact(redis_url)
    state.batch = WriteBatch(state.client, state.batch.scripts, state.layout, state.queue,
                             LandSettings(0.0, checks_kept=100), bloom_slices=1)
    try:
        state.fetch(A, {"price": "1"}, 100.0)
        state.fetch(B, {"price": "1"}, 200.0, moved_from=A)
        entries = state.client.xrange(state.shard.events)
        assert [e[1][b"c"] for e in entries] == [b"", b""]  # the move's: its old URL, as fetched
        new, moved = state.events()
        assert (new["url"], new["canonical_url"]) == (A, A)
        assert (moved["url"], moved["canonical_url"]) == (A, A) and moved["moved_to"] == B
        checks = state.client.xrange(state.shard.checks)
        assert checks and all(c[1][b"c"] == b"" for c in checks)
        fields = {k.decode(): v.decode() for k, v in checks[0][1].items()}
        row = check_row("compact", 0, checks[0][0].decode(), fields)
        assert row[2] == row[3] == A  # canonical URL, URL
        # Fetched under another URL than its canonical one: both kept.
        other = f"http://{HOST}/p/9"
        event = EventArgs(site="shop", page_type="product", url=other + "?ref=x", status=200,
                          record=encode_record({"price": "9"}))
        state.land(HOST, observe_op(other, full=True, time=300.0, type_id=1,
                                    record_hash="cd" * 8, event=event))
        assert state.client.xrange(state.shard.events)[-1][1][b"c"] == other.encode()
        last = state.events()[-1]
        assert (last["url"], last["canonical_url"]) == (other + "?ref=x", other)
        fields = {k.decode(): v.decode() for k, v in state.client.xrange(state.shard.checks)[-1][1].items()}
        assert check_row("compact", 0, "1-0", fields)[2:4] == (other, other + "?ref=x")
    finally:
        state.client.close()
