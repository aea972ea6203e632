"""The crawl state's queues (webcrawl.state.queue, lua2/*.lua): one contract, run on a single
redis-server and on a real 3-master Redis Cluster (every script's keys in one slot, shards spread
over the masters)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from webcrawl.state import records
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.hosts import delay_op, finished_op
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import (
    PageStore, interval_op, listing_op, observe_op, release_op, trigger_op,
)
from webcrawl.state.queue import EVICTED, EXCLUDED, FILTERED, PUSHED, CrawlQueue, Entry
from webcrawl.state.refused import RefusedStore
from webcrawl.state.scripts import ScriptSet, op_ttl_for
from webcrawl.state.seen import BloomParams

DELAY = 0.2
AGAIN = 4  # push.lua: pushed again, it had been noted (refused or evicted)
BLOOM = BloomParams(10_000, 0.01)


class State:
    """A crawl's queue, batch and page store over one client."""

    def __init__(self, client: Any, shards: int) -> None:
        self.client = client
        self.layout = CrawlLayout("contract", shards)
        self.scripts = ScriptSet(client)
        self.queue = CrawlQueue(client, self.scripts, self.layout, cap=3, default_delay=DELAY,
                                lease_seconds=30)
        self.queue.check_seen_filter(BLOOM)
        self.batch = WriteBatch(client, self.scripts, self.layout, self.queue,
                                LandSettings(DELAY), bloom_slices=BLOOM.num_slices)
        self.pages = PageStore(client, self.layout)
        self.offsets = BLOOM.offsets_function()

    def entry(self, url: str, priority: int = 0, filtered: bool = True) -> Entry:
        host = url.split("/")[2]
        return Entry(host, priority, '{"url": "%s"}' % url, self.offsets(url) if filtered else None)

    def push(self, *entries: Entry) -> list[int]:
        statuses: list[int] = []
        for e in entries:
            self.batch.push(e, statuses.append)
        self.batch.flush()
        return statuses

    def pop_all(self, owner: str = "me", order: str = "nd") -> list[Any]:
        items = []
        for shard in range(self.layout.shards):
            items += self.queue.pop(shard, owner, len(items), 100, order).items
        return items

    def land(self, host: str, op: tuple[str, list[Any]]) -> list[Any]:
        out: list[list[Any]] = []
        self.batch.land(host, op, out.append)
        self.batch.flush()
        return [v.decode() if isinstance(v, bytes) else v for v in out[0]]

    def server_time(self) -> float:
        seconds, micros = self.client.time()
        return seconds + micros / 1e6


@pytest.fixture(params=["single", "cluster"])
def state(request: pytest.FixtureRequest, redis_url: str) -> Iterator[State]:
    if request.param == "single":
        client, _, _ = connect(redis_url)
        yield State(client, shards=1)
    else:
        url = request.getfixturevalue("redis_cluster_url")
        client, _, cluster = connect(url)
        assert cluster, "the URL of a cluster node is detected as a cluster"
        yield State(client, shards=6)
    client.close()


def test_push_filters_seen_urls_caps_frontiers_and_refuses_excluded_hosts(state: State) -> None:
    a = [state.entry(f"http://a.test/{i}", priority=i) for i in range(4)]
    assert state.push(*a[:3]) == [PUSHED] * 3
    assert state.push(a[0]) == [FILTERED]
    assert state.push(a[3]) == [EVICTED], "the fourth request of a host capped at 3 evicts one"
    state.queue.sync_exclusions(1, ["b.test"])
    assert state.push(state.entry("http://b.test/x")) == [EXCLUDED]
    items = state.pop_all()
    assert [i.item for i in items] == ['{"url": "http://a.test/3"}'], "one per host visit, best first"
    assert state.queue.counts()[0] == 2  # a.test/1 and /2 (a.test/0, the worst, was evicted)


def test_a_request_evicted_from_a_full_frontier_is_queued_again_when_met_again(
        state: State) -> None:
    a = [state.entry(f"http://a.test/{i}", priority=i) for i in range(4)]
    assert state.push(*a) == [PUSHED] * 3 + [EVICTED]  # a.test/0, the worst, goes
    store = RefusedStore(state.client, state.scripts, state.layout, state.offsets)
    [note] = list(store.entries())
    assert (note.reason, note.url) == ("frontier:evicted", "http://a.test/0")
    assert [i.item for i in state.pop_all()] == ['{"url": "http://a.test/3"}']  # room for one
    assert state.push(a[0]) == [AGAIN], "met again, the evicted request is queued again"
    assert state.push(a[0]) == [FILTERED], "once"
    assert sum(store.counts()) == 0
    assert state.queue.counts()[0] == 3


def test_refusal_notes_past_the_limit_drop_the_oldest(state: State) -> None:
    state.queue.cap, state.queue.refused_limit = 1, 2
    urls = [f"http://a.test/{i}" for i in range(5)]
    # Each push beats the one before (higher priority), so each evicts its predecessor; one push
    # a call, so that the notes' times (the server's) follow that order.
    statuses = [state.push(state.entry(u, priority=i))[0] for i, u in enumerate(urls)]
    assert statuses == [PUSHED] + [EVICTED] * 4
    store = RefusedStore(state.client, state.scripts, state.layout, state.offsets)
    assert sorted(n.url for n in store.entries()) == urls[2:4], "the newest two notes are kept"
    assert state.push(state.entry(urls[0])) == [FILTERED], "an aged-out note lets nothing in"


def test_an_ack_waits_until_the_pushes_made_before_it_are_applied(state: State) -> None:
    """A pipeline is not atomic: here the child's push fails in Redis before it writes anything
    (its shard's exclusion mirror holds the wrong type: a stand-in for a node that does not
    answer) while the rest of the pipeline is applied. The parent's lease must stay held, so
    that a process dying now loses nothing (the lease expires, the parent is fetched again)."""
    state.push(state.entry("http://a.test/parent"))
    [parent] = state.pop_all()
    child_shard = state.layout.shard("b.test")
    state.client.set(child_shard.excluded, "not a set")
    statuses: list[int] = []
    state.batch.push(state.entry("http://b.test/child"), statuses.append)
    state.batch.ack(parent.shard, "me", parent.lease)
    with pytest.raises(redis.ResponseError):
        state.batch.flush()
    assert state.queue.counts()[2] == 1, "the parent's lease is held while its child is not queued"
    state.client.delete(child_shard.excluded)
    assert state.batch.flush()
    assert statuses == [PUSHED]
    assert state.queue.counts()[0] == 1 and state.queue.counts()[2] == 0, "then both went"


def test_op_answers_outlive_the_longest_outage_the_crawl_waits_out(state: State) -> None:
    scripts = ScriptSet(state.client, op_ttl=op_ttl_for(600))
    queue = CrawlQueue(state.client, scripts, state.layout, cap=0, default_delay=DELAY,
                       lease_seconds=30)
    shard = state.layout.shard("a.test")
    queue.push(shard, [state.entry("http://a.test/1", filtered=False)], BLOOM.num_slices,
               op_id="outage")
    ttl = state.client.ttl(shard.op("outage"))
    assert 600 < ttl <= 660, "kept for the outage and a minute more"
    assert op_ttl_for(0) == 60


def test_an_outage_longer_than_answers_are_kept_is_refused_in_one_line() -> None:
    from scrapy.settings import Settings

    from webcrawl.runtime import outage_seconds_of
    with pytest.raises(ValueError, match=r"^WEBCRAWL_REDIS_OUTAGE_SECONDS=7200\.0: expected 0 to 3600"):
        outage_seconds_of(Settings({"WEBCRAWL_REDIS_OUTAGE_SECONDS": 7200}))


def test_a_host_turn_comes_once_per_delay_by_the_server_clock(state: State) -> None:
    state.push(*(state.entry(f"http://a.test/{i}") for i in range(3)))
    first = state.pop_all()
    assert len(first) == 1 and state.pop_all() == [], "the host waits for its delay"
    deadline = time.monotonic() + 5
    while not (second := state.pop_all()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(second) == 1
    assert state.queue.earliest()  # one answer per shard


def test_leases_are_acknowledged_and_renewed_by_their_owner_only(state: State) -> None:
    state.push(state.entry("http://a.test/1"))
    (item,) = state.pop_all(owner="A")
    assert int(state.queue.renew(item.shard, "B", [item.lease])) == 0
    assert int(state.queue.ack(item.shard, "B", [item.lease])) == 0
    assert state.queue.counts()[2] == 1
    assert int(state.queue.ack(item.shard, "A", [item.lease])) == 1
    assert state.queue.counts()[2] == 0


def test_a_stalled_process_cannot_release_work_another_took_over(state: State) -> None:
    """A pops, stalls past its lease; B reclaims and pops the request again; A's renew and ack
    touch nothing of B's; B dies; the request comes back again: nothing is lost."""
    state.queue.lease_seconds = 0.05
    state.push(state.entry("http://a.test/1"))
    (a,) = state.pop_all(owner="A")
    time.sleep(0.1)  # A stalls past its lease (time must pass for the lease to expire)
    assert sum(state.queue.reclaim_expired(i) for i in range(state.layout.shards)) == 1
    state.queue.lease_seconds = 30
    deadline = time.monotonic() + 5
    while not (again := state.pop_all(owner="B")) and time.monotonic() < deadline:
        time.sleep(0.01)
    (b,) = again
    assert b.lease != a.lease, "every pop gives a fresh lease id"
    assert int(state.queue.renew(a.shard, "A", [a.lease])) == 0
    assert int(state.queue.ack(a.shard, "A", [a.lease])) == 0
    state.queue.lease_seconds = 0.05
    state.queue.renew(b.shard, "B", [b.lease])  # B's lease now expires soon: B "dies"
    time.sleep(0.1)
    assert sum(state.queue.reclaim_expired(i) for i in range(state.layout.shards)) == 1
    assert state.queue.counts()[0] == 1, "the request is back in its frontier"


def test_a_retried_script_call_has_no_second_effect(state: State) -> None:
    shard = state.layout.shard("a.test")
    entries = [state.entry("http://a.test/1", filtered=False)]
    state.queue.push(shard, entries, BLOOM.num_slices, op_id="same")
    state.queue.push(shard, entries, BLOOM.num_slices, op_id="same")
    assert state.queue.counts()[0] == 1
    args = [60, DELAY, 5, 0.05, 50, 0, "F", "a.test"]
    first = state.scripts.call("land", shard, args, op_id="land-1")
    assert state.scripts.call("land", shard, args, op_id="land-1") == first


def test_a_landed_page_is_scheduled_popped_when_due_and_rescheduled(state: State) -> None:
    url, host = "http://a.test/p", "a.test"
    now = state.server_time()
    assert state.land(host, observe_op(url, full=True, time=now, record_hash="ab" * 8))[0] == "new"
    state.land(host, interval_op(url, 60.0, due_at=now - 1))
    (item,) = state.pop_all(order="dn")
    assert item.kind == "d" and item.item == "p" + url and item.record is not None
    assert records.unpack(item.record).due == -1, "in flight: the allocator leaves it alone"
    state.land(host, interval_op(url, 30.0))  # while in flight: the interval only
    verdict = state.land(host, observe_op(url, full=True, time=now + 5, record_hash="cd" * 8))
    assert verdict[0] == "changed" and float(verdict[1]) == pytest.approx(5.0)
    record = state.pages.get(url, host)
    assert record is not None and record.due == pytest.approx(now + 5 + 30.0)
    assert record.visits == 1 and record.changes == 1
    state.land(host, release_op(url))
    assert state.pages.get(url, host).due == pytest.approx(now + 35.0), "release is a no-op now"


def test_a_revisit_tried_without_an_observation_waits_an_interval_and_a_lost_one_does_not(
        state: State) -> None:
    """An answer that lands nothing (an error, a redirect, a 304 handed on to its verification)
    must not bring its page back at every turn of its host: the page is due an interval from
    the release. A lease lost before the fetch puts the page back at its own time."""
    host = "a.test"
    now = state.server_time()
    tried, lost = "http://a.test/tried", "http://a.test/lost"
    for url in (tried, lost):
        state.land(host, observe_op(url, full=True, time=now - 100, record_hash="ab" * 8))
        state.land(host, interval_op(url, 60.0, due_at=now - 40))  # overdue
    wait_until = state.server_time() + DELAY * 1.5
    popped = state.pop_all(order="d")
    while len(popped) < 2 and state.server_time() < wait_until + 5:
        time.sleep(0.05)
        popped += state.pop_all(order="d")
    assert sorted(i.item for i in popped) == ["p" + lost, "p" + tried]
    released = state.server_time()
    state.land(host, release_op(tried, attempted=True))
    state.land(host, release_op(lost))
    assert state.pages.get(tried, host).due == pytest.approx(released + 60.0, abs=1.0)
    assert state.pages.get(lost, host).due == pytest.approx(released, abs=1.0), "due at once"
    # The allocator plans again from records it read before the release: a new interval counts
    # from the try, not from the last observation (100 s ago), which would make it due at once.
    state.land(host, interval_op(tried, 30.0))
    record = state.pages.get(tried, host)
    assert record.due == pytest.approx(released + 30.0, abs=1.0)
    assert record.last_tried == pytest.approx(released, abs=1.0) and record.last_fetched == now - 100
    state.land(host, interval_op(lost, 30.0))
    assert state.pages.get(lost, host).due == pytest.approx(now - 70.0, abs=1.0), "never tried"


def test_a_page_tried_before_its_first_interval_waits_the_interval_it_then_gets(
        state: State) -> None:
    """A popped page with no interval yet (left to the allocator) whose fetch landed nothing:
    the interval the allocator gives it next counts from that try."""
    host = "a.test"
    now = state.server_time()
    url = "http://a.test/new"
    state.land(host, observe_op(url, full=True, time=now - 100, record_hash="ab" * 8))
    state.land(host, trigger_op(url))  # no interval, no follow: not due
    state.land(host, interval_op(url, 0.0, due_at=now - 1))  # due once, no interval
    [item] = state.pop_all(order="d")
    assert item.item == "p" + url
    released = state.server_time()
    state.land(host, release_op(url, attempted=True))
    assert state.pages.get(url, host).due == 0, "unscheduled: left to the allocator"
    state.land(host, interval_op(url, 20.0))
    assert state.pages.get(url, host).due == pytest.approx(released + 20.0, abs=1.0)


def test_a_due_sitemap_goes_before_revisits_its_host_is_behind_on(state: State) -> None:
    """Sitemaps find new pages: on a host whose revisits lag, one due comes out first."""
    host = "a.test"
    now = state.server_time()
    sitemap = "http://a.test/sitemap.xml"
    state.land(host, observe_op(sitemap, full=True, time=now, record_hash="aa" * 8, sitemap=True))
    pages = [f"http://a.test/p{i}" for i in range(3)]
    for i, url in enumerate(pages):
        state.land(host, observe_op(url, full=True, time=now, record_hash="ab" * 8))
        state.land(host, interval_op(url, 600.0, due_at=now - 100 + i))  # long overdue
    state.land(host, interval_op(sitemap, 600.0, due_at=now + 0.3))  # not due yet
    first = state.pop_all(order="d")
    assert [i.item for i in first] == ["p" + pages[0]], "a sitemap not yet due waits its time"
    wait_until = now + 0.5
    while state.server_time() < wait_until:
        time.sleep(0.05)
    second = state.pop_all(order="d")
    assert [i.item for i in second] == ["s" + sitemap], "the due sitemap goes first"
    wait_until = state.server_time() + DELAY * 1.5
    while state.server_time() < wait_until:
        time.sleep(0.05)
    assert [i.item for i in state.pop_all(order="d")] == ["p" + pages[1]], "then the pages, in order"


def test_revisits_due_soon_come_out_early_only_when_asked_and_on_the_hosts_turn(state: State) -> None:
    host = "a.test"
    now = state.server_time()
    soon, later = "http://a.test/soon", "http://a.test/later"
    for url, due in ((soon, now + 5), (later, now + 60)):
        state.land(host, observe_op(url, full=True, time=now, record_hash="ab" * 8))
        state.land(host, interval_op(url, 600.0, due_at=due))
    assert state.pop_all(order="d") == [], "nothing is due yet"
    shard = state.layout.shard_index(host)
    early = state.queue.pop(shard, "me", 0, 5, "d", ahead=10.0).items
    assert [i.item for i in early] == ["p" + soon], "due within the look ahead, earliest first"
    again = state.queue.pop(shard, "me", 1, 5, "d", ahead=120.0).items
    assert again == [], "the host's turn holds for early revisits too"


def test_new_urls_ready_now_go_before_early_revisits_whatever_the_order(state: State) -> None:
    """Early revisits are for money that would idle: a host with new URLs waiting gives its turn
    to them first, even when the order prefers revisits."""
    host = "a.test"
    now = state.server_time()
    soon = "http://a.test/soon"
    state.land(host, observe_op(soon, full=True, time=now, record_hash="ab" * 8))
    state.land(host, interval_op(soon, 600.0, due_at=now + 5))
    state.push(state.entry("http://a.test/new"))
    shard = state.layout.shard_index(host)
    first = state.queue.pop(shard, "me", 0, 1, "dn", ahead=10.0).items
    assert [i.kind for i in first] == ["n"], "the new URL first, though revisits are preferred"


def test_known_changes_make_a_page_due_only_where_it_follows_them(state: State) -> None:
    url, host = "http://a.test/p", "a.test"
    now = state.server_time()
    state.land(host, observe_op(url, full=True, time=now, record_hash="ab" * 8))
    state.land(host, interval_op(url, 600.0))
    assert state.land(host, trigger_op(url))[0] == "", "not followed: stays on its schedule"
    state.land(host, interval_op(url, 600.0, follow=True))
    assert state.land(host, trigger_op(url))[0] == "1"
    assert state.pages.get(url, host).due <= state.server_time()


def test_listing_summaries(state: State) -> None:
    url, host = "http://a.test/item", "a.test"
    now = state.server_time()
    assert state.land(host, listing_op(url, "h1", now))[0] == "first"
    assert state.land(host, listing_op(url, "h1", now + 1))[0] == "unchanged"
    state.land(host, observe_op(url, full=True, time=now + 2, record_hash="ab" * 8))
    state.land(host, interval_op(url, 600.0, follow=True))
    assert state.land(host, listing_op(url, "h2", now + 3))[0] == "changed"
    assert state.pages.get(url, host).due <= state.server_time() + 1


def test_claim_takes_a_host_turn_for_requests_from_outside_the_queue(state: State) -> None:
    assert state.queue.claim("c.test") == 0
    wait = state.queue.claim("c.test")
    assert 0 < wait <= DELAY


def test_a_finished_fetch_moves_its_hosts_turn_from_when_it_finished(state: State) -> None:
    state.land("d.test", delay_op(5.0))
    state.land("d.test", finished_op(state.server_time() - 2.0))  # the batch went 2 s late
    assert 2.5 < state.queue.claim("d.test") <= 3.0, "one delay after the fetch, not the batch"
    state.land("e.test", delay_op(5.0))
    state.land("e.test", finished_op(state.server_time() + 100.0))
    assert 4.5 < state.queue.claim("e.test") <= 5.0, "never from a time still to come"


def test_every_script_touches_one_slot_only(state: State) -> None:
    """On a cluster a script touching keys of two slots is refused (CROSSSLOT): every shard
    script's keys share the shard's hash tag."""
    from redis.crc import key_slot

    from webcrawl.state.scripts import KEYS, shard_keys_for

    for shard in state.layout.all_shards:
        for name in KEYS:
            slots = {key_slot(k.encode()) for k in shard_keys_for(name, shard, "x")}
            assert len(slots) == 1, f"{name} of shard {shard.index} spans slots {slots}"
    assert len({key_slot(s.frontier.encode()) for s in state.layout.all_shards}) == state.layout.shards


def test_shards_spread_over_every_master(redis_cluster_url: str, redis_cluster: Any) -> None:
    client, _, _ = connect(redis_cluster_url)
    s = State(client, shards=16)
    s.push(*(s.entry(f"http://h{i}.test/") for i in range(64)))
    owners = {redis_cluster.master_for_key(shard.frontier) for shard in s.layout.all_shards
              if client.exists(shard.frontier)}
    assert len(owners) == 3
    client.close()


def _evalsha_calls(client: Any) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_call_that_outlasts_the_client_timeout_is_not_applied_twice(redis_server: Any,
                                                                    redis_url: str) -> None:
    """A push big enough to run longer than the client's timeout: the client gives up waiting
    (timeouts are not retried inside the client), the batch keeps the call with its op id, and the
    crawl's next flush sends it again: that answers the first call's result instead of pushing
    everything again."""
    admin = redis_server.client()
    size = 20_000

    def state(client: Any, crawl: str) -> State:
        s = State(client, shards=1)
        s.layout = CrawlLayout(crawl, 1)
        s.queue.layout = s.batch.layout = s.layout
        s.queue.cap = 0
        s.queue.check_seen_filter(BLOOM)
        return s

    patient, _, _ = connect(redis_url)
    usec = int(admin.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))
    measure = state(patient, "measure")
    measure.push(*(measure.entry(f"http://a.test/{i}", filtered=False) for i in range(size)))
    took = (int(admin.info("commandstats")["cmdstat_evalsha"]["usec"]) - usec) / 1e6
    hasty, _, _ = connect(redis_url, socket_timeout=0.6 * took)
    s = state(hasty, "contract")
    statuses: list[int] = []
    for i in range(size):
        s.batch.push(s.entry(f"http://a.test/{i}", filtered=False), statuses.append)
    before = _evalsha_calls(admin)
    with pytest.raises(redis.TimeoutError):
        s.batch.flush()
    assert s.batch.unsent == 1, "the call is kept, with its op id"
    deadline = time.monotonic() + 30
    while _evalsha_calls(admin) - before < 1:  # the server finishes the call the client gave up on
        assert time.monotonic() < deadline, "the first push never finished"
        time.sleep(0.01)
    assert s.batch.flush()
    assert statuses == [PUSHED] * size
    assert _evalsha_calls(admin) - before >= 2, "the push ran, timed out at the client, ran again"
    assert CrawlQueue(patient, ScriptSet(patient), CrawlLayout("contract", 1), cap=0,
                      default_delay=DELAY, lease_seconds=30).counts()[0] == size, \
        "the retry queued nothing more"
    patient.close()
    hasty.close()
