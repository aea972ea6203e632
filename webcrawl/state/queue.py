"""The crawl's work queues in Redis: per-host frontiers of queued requests, per-host revisits due
at set times, and the two ready queues of hosts ordered by when their turn comes.

Every process sharing a crawl pops through :meth:`CrawlQueue.pop`, one Lua script per shard: it
takes the host whose turn came first, its best request (or its earliest due revisit), sets the
host's next-allowed time to now + the host's delay by the Redis server's clock, and leases the
item to the caller. A host is never fetched more often than its delay allows, whatever the
number of processes and however their clocks differ. Leases carry the owner's token and a fresh
id per pop: only the owner can renew or acknowledge one, and an expired lease is put back by
anyone (:meth:`CrawlQueue.reclaim_expired`), so a crash loses nothing and a stalled process
cannot release work that was reclaimed and handed to another.

Request payloads are JSON (:mod:`webcrawl.requestcodec`), never pickle. Revisits are only a URL
and a kind (page, hub or sitemap); the caller builds their request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.state.layout import EXCLUDED_EVENTS
from webcrawl.state.refused import DEFAULT_LIMIT
from webcrawl.state.scripts import new_op_id

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from webcrawl.state.layout import CrawlLayout, ShardKeys
    from webcrawl.state.scripts import ScriptSet
    from webcrawl.state.seen import BloomParams

__all__ = ["EVICTED", "EXCLUDED", "FILTERED", "PUSHED", "Entry", "Look", "Popped", "PoppedItem",
           "CrawlQueue", "priority_key"]

FILTERED, PUSHED, EVICTED, EXCLUDED = 0, 1, 2, 3
#: A host busy with one kind of work gives every TURN_SHARE-th turn to the other kind.
TURN_SHARE = 4
_MAX_PRIORITY = 2**31 - 1


def priority_key(priority: int) -> str:
    """Eight hex digits that sort higher priorities first (Scrapy: higher goes first)."""
    p = max(-_MAX_PRIORITY, min(_MAX_PRIORITY, int(priority)))
    return format(_MAX_PRIORITY - p, "08x")


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Entry:
    """A request to push: its host, priority, JSON payload and, to be tested against the seen
    filter, its key there (:meth:`~webcrawl.state.seen.BloomParams.offsets_function`: three
    words, or bit offsets for a filter of the layout before; None: no test, e.g.
    ``dont_filter``)."""

    host: str
    priority: int
    payload: str
    offsets: Sequence[int] | None = None


@dataclass(frozen=True)
class PoppedItem:
    """One leased piece of work: ``kind`` "n" (a queued request: ``item`` is its payload) or "d"
    (a revisit: ``item`` is ``<kind letter><url>``, ``record`` the page's packed record and
    ``validators`` its stored ETag and Last-Modified, read in the same step)."""

    lease: str
    kind: str
    item: str
    record: bytes | None
    validators: tuple[str, str] | None
    delay: float
    host: str
    shard: int
    #: For a listing page or hub: the typed pages it showed at its latest reading.
    links: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Popped:
    """What one pop returned: the items, the server's time, the shard's queued requests, and when
    its next host turns ready for new work and for revisits (None: nothing queued)."""

    items: list[PoppedItem]
    now: float
    queued: int
    earliest_new: float | None
    earliest_due: float | None
    dropped: int

    @property
    def earliest(self) -> float | None:
        times = [t for t in (self.earliest_new, self.earliest_due) if t is not None]
        return min(times) if times else None


@dataclass(frozen=True)
class Look:
    """What the crawl has queued, from one pipeline: per shard when its first host turns ready for
    new work and for revisits (None: none) and its queued requests; revisits scheduled and leases
    over every shard; the exclusion list's version."""

    earliest: list[tuple[float | None, float | None]]
    queued: list[int]
    due: int
    leased: int
    exclusions: int

    @property
    def counts(self) -> tuple[int, int, int]:
        return sum(self.queued), self.due, self.leased


class CrawlQueue:
    """The queues of one crawl, over all its shards (see the module docstring)."""

    def __init__(self, client: Any, scripts: ScriptSet, layout: CrawlLayout, *, cap: int,
                 default_delay: float, lease_seconds: float,
                 refused_limit: int = DEFAULT_LIMIT) -> None:
        self.client = client
        #: Notes of refused or evicted URLs a shard keeps (:mod:`webcrawl.state.refused`).
        self.refused_limit = refused_limit
        self.scripts = scripts
        self.layout = layout
        self.cap = cap
        self.default_delay = default_delay
        self.lease_seconds = lease_seconds

    # -- pushing --------------------------------------------------------------------------------

    def push_args(self, entries: Sequence[Entry], k: int = 0) -> list[Any]:
        """The push script's ARGV. ``k`` is not used any more: the words of a seen-filter key
        come with the entries (three; the ``k`` bit offsets for a filter of the layout before)."""
        words = {len(e.offsets) for e in entries if e.offsets is not None}
        if len(words) > 1:
            raise ValueError(f"seen-filter keys of different sizes in one push: {sorted(words)}")
        k = words.pop() if words else 0
        args: list[Any] = [self.cap, k, len(entries), self.scripts.op_ttl, self.refused_limit]
        for e in entries:
            args += (e.host, priority_key(e.priority), e.payload)
            if e.offsets is None:
                args.append("0")
            else:
                args.append("1")
                args += e.offsets
        return args

    def push(self, shard: ShardKeys, entries: Sequence[Entry], k: int = 0, *, pipe: Any = None,
             op_id: str | None = None) -> Any:
        """Queue ``entries`` (all of hosts of ``shard``); with ``pipe``, queued on that pipeline.
        Answers ``[queued, seen count, status...]`` (:func:`push_reply` reads it)."""
        return self.scripts.call("push", shard, self.push_args(entries, k),
                                 op_id=op_id or new_op_id(), client=pipe)

    @staticmethod
    def push_reply(reply: list[Any]) -> tuple[list[int], int, int]:
        """``(statuses, queued in the shard, URLs the shard's seen filter holds)``."""
        return [int(s) for s in reply[2:]], int(reply[0]), int(reply[1])

    # -- popping --------------------------------------------------------------------------------

    def pop(self, index: int, owner: str, first_lease: int, max_count: int, order: str,
            share: int = TURN_SHARE, op_id: str | None = None, ahead: float = 0.0, *,
            pipe: Any = None) -> Popped | None:
        """Pop up to ``max_count`` items of shard ``index``, the kinds in ``order`` of preference
        ("nd", "dn", "n", "d"); a host with both kinds ready gives every ``share``-th turn to the
        other one (0: never). With ``ahead`` > 0, revisits due within that many seconds come out
        early where nothing is due now (hosts' turns still hold). A call retried with the same
        ``op_id`` (its answer was lost) gets the same items again, not more. With ``pipe`` the
        call is queued there (returns None; :meth:`pop_reply` reads its answer)."""
        shard = self.layout.all_shards[index]
        reply = self.scripts.call("pop", shard, [owner, first_lease, max_count, order,
                                                 self.default_delay, self.lease_seconds,
                                                 self.scripts.op_ttl, share, repr(float(ahead))],
                                  op_id=op_id or new_op_id(), client=pipe)
        return None if pipe is not None else self.pop_reply(index, reply)

    @staticmethod
    def pop_reply(index: int, reply: list[Any]) -> Popped:
        items = []
        for i in range(5, len(reply), 8):
            lease, kind, item, record, validators, delay, host, links = reply[i:i + 8]
            v = None
            if validators:
                etag, _, modified = _text(validators).partition("\t")
                v = (etag, modified)
            items.append(PoppedItem(_text(lease), _text(kind), _text(item), record or None, v,
                                    float(delay), _text(host), index,
                                    tuple(_text(links).split("\n")) if links else None))
        return Popped(items, float(reply[0]), int(reply[1]),
                      float(reply[2]) if reply[2] else None, float(reply[3]) if reply[3] else None,
                      int(reply[4]))

    # -- leases ---------------------------------------------------------------------------------

    def ack(self, index: int, owner: str, leases: Iterable[str], *, pipe: Any = None) -> Any:
        ids = list(leases)
        if not ids:
            return 0
        return self.scripts.call("lease", self.layout.all_shards[index],
                                 [owner, "ack", self.lease_seconds, *ids], client=pipe)

    def renew(self, index: int, owner: str, leases: Iterable[str], *, pipe: Any = None) -> Any:
        ids = list(leases)
        if not ids:
            return 0
        return self.scripts.call("lease", self.layout.all_shards[index],
                                 [owner, "renew", self.lease_seconds, *ids], client=pipe)

    def requeue_owned(self, index: int, owner: str, leases: Iterable[str]) -> int:
        """Put this owner's leased work back in line now (a process closing early)."""
        ids = list(leases)
        if not ids:
            return 0
        return int(self.scripts.call("reclaim", self.layout.all_shards[index],
                                     ["owned", owner, 0, *ids]))

    def reclaim_expired(self, index: int, batch: int = 1000) -> int:
        """Put back work whose lease expired by the server's clock (its owner died or stalled)."""
        total = 0
        while True:
            back = int(self.scripts.call("reclaim", self.layout.all_shards[index],
                                         ["expired", "", batch]))
            total += back
            if back < batch:
                return total

    # -- politeness -----------------------------------------------------------------------------

    def claim(self, host: str) -> float:
        """Take the host's next fetch slot for a request that was not popped (robots.txt): 0 when
        taken, else the seconds to wait before asking again."""
        reply = self.scripts.call("claim", self.layout.shard(host), [host, self.default_delay])
        return float(reply)

    # -- figures --------------------------------------------------------------------------------

    def counts(self) -> tuple[int, int, int]:
        """``(queued requests, revisits scheduled, leases)`` over every shard."""
        pipe = self.client.pipeline(transaction=False)
        self.look(pipe)
        return self.look_reply(pipe.execute()).counts

    def earliest(self) -> list[tuple[float | None, float | None]]:
        """Per shard: when its first host turns ready for new work and for revisits."""
        pipe = self.client.pipeline(transaction=False)
        self.look(pipe)
        return self.look_reply(pipe.execute()).earliest

    def look(self, pipe: Any) -> None:
        """Queue on ``pipe`` the reads of a :class:`Look` (:meth:`look_reply` reads the answers)."""
        for shard in self.layout.all_shards:
            pipe.zrange(shard.ready_new, 0, 0, withscores=True)
            pipe.zrange(shard.ready_due, 0, 0, withscores=True)
            pipe.get(shard.queued)
            pipe.zcard(shard.due)
            pipe.zcard(shard.leases)
        pipe.get(EXCLUDED_EVENTS)

    @staticmethod
    def look_reply(replies: Sequence[Any]) -> Look:
        earliest, queued, due, leased = [], [], 0, 0
        for i in range(0, len(replies) - 1, 5):
            new, ready_due, q, d, leases = replies[i:i + 5]
            earliest.append((float(new[0][1]) if new else None,
                             float(ready_due[0][1]) if ready_due else None))
            queued.append(int(q or 0))
            due += int(d)
            leased += int(leases)
        return Look(earliest, queued, due, leased, int(replies[-1] or 0))

    def set_delay(self, host: str, seconds: float) -> None:
        self.client.hset(self.layout.shard(host).delay, host, repr(float(seconds)))

    def sync_exclusions(self, version: int, hosts: Iterable[str]) -> int:
        """Bring every shard's mirror of the exclusion list to ``version``; returns the queued
        requests dropped for newly excluded hosts."""
        hosts = list(hosts)
        dropped = 0
        for shard in self.layout.all_shards:
            n = int(self.scripts.call("exclude", shard, [version, *hosts]))
            dropped += max(n, 0)
        return dropped

    def check_seen_filter(self, bloom: BloomParams) -> BloomParams:
        """Open each shard's seen-filter slice: one nothing recorded yet records ``bloom`` and
        gets its first generation (a few KB). Returns the sizes the crawl's slices record, which
        win over ``bloom`` (a crawl keeps the sizes it started with; one of the layout before
        keeps its filter). Slices recording different sizes are refused: every URL's key must
        fit every slice."""
        from webcrawl.state.seen import open_filters

        recorded = open_filters(self.client, [(shard.seen, shard.seen_meta)
                                              for shard in self.layout.all_shards], bloom)
        if len(set(recorded)) > 1:
            raise ValueError(
                f"crawl {self.layout.crawl!r} has seen-filter slices of different sizes "
                f"({', '.join(sorted({_sizes(p) for p in recorded}))}): clear the crawl")
        return recorded[0]

    def seen_counts(self) -> list[int]:
        """URLs each shard's seen filter has taken in."""
        pipe = self.client.pipeline(transaction=False)
        for shard in self.layout.all_shards:
            pipe.hget(shard.seen_meta, "count")
        return [int(v or 0) for v in pipe.execute()]


def _sizes(bloom: BloomParams) -> str:
    layout = " (the layout before)" if bloom.legacy else ""
    return f"{bloom.capacity} URLs at {bloom.error_rate}{layout}"
