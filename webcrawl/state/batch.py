"""Redis writes of a crawl process, batched: one pipeline per flush, one script call per shard.

Components never write to Redis one call at a time on the hot path. They add operations to the
process's :class:`WriteBatch` (a page observation, a host's health, a listing summary, a lease to
release, a request to queue, figures for the cycle ledger, a spend correction) and the batch is
flushed once per reactor turn (the owner schedules :meth:`WriteBatch.flush` through the
``schedule`` callable it gives): every shard gets at most one ``land`` script, one ``push``
script and one lease call, the crawl-wide slot one ledger call and one bucket call, all in one
pipeline, which is one round trip on a single server and one per node on a cluster.

The owner's timed flushes go *behind* (:meth:`WriteBatch.send_behind`): the pipeline is sent and
answered on the batch's own thread, so the owner's thread (the reactor) goes on meanwhile, and
the answers are applied on the owner's thread once it runs what the batch posts to it. One send
is under way at a time; :meth:`WriteBatch.flush` (a pop or a look that must see the writes)
waits for it and answers it first, so the order of writes and reads stays the order they were
made in.

A lease's ack (the fetch it leased is done) goes only after every call built with or before it
was answered, one round trip later: a pipeline is not atomic (on a cluster each node answers for
itself), and an ack applied while the push of the requests its page led to failed would lose them
if the process died before sending that push again; held back, the lease expires instead and the
page is fetched again.

Each script call carries a fresh operation id (:func:`~webcrawl.state.scripts.new_op_id`), so
the client's retry after a timeout cannot apply a batch twice. Answers come back through the
callbacks given with each operation, in the order operations were added.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from webcrawl.state.scripts import new_op_id, shard_keys_for

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout
    from webcrawl.state.queue import CrawlQueue, Entry
    from webcrawl.state.scripts import ScriptSet

__all__ = ["LandSettings", "WriteBatch"]

logger = logging.getLogger(__name__)

Callback = Callable[[list[Any]], None]
#: What a send behind calls once answered: its error (None: it went) and each rider's replies.
Done = Callable[[redis.RedisError | None, list[list[Any]]], None]
#: Arguments each land operation takes besides its code and host (see lua2/land.lua). Page
#: operations take the page's URL first and the host second; host operations the host first.
ARITY = {"O": 27, "G": 18, "C": 19, "Y": 1, "T": 1, "I": 4, "L": 3, "M": 4, "R": 2, "A": 6, "F": 1, "D": 1,
         "V": 6}
PAGE_OPS = frozenset("OGCYTILMR")
#: Values each land operation answers (lua2/land_head.lua's REPLY_WIDTH).
REPLY_WIDTH = 8


@dataclass(frozen=True)
class LandSettings:
    """Crawl-wide constants the land script needs: the default host delay, sitemap trust, how long
    change events are kept, and the page lifecycle's delays (docs/events.md)."""

    default_delay: float
    sitemap_min_agreements: int = 5
    sitemap_max_disagreement_rate: float = 0.05
    sitemap_memory: int = 50
    events_retention_seconds: float = 7 * 86400.0
    removal_confirm_seconds: float = 300.0
    removed_probe_seconds: float = 86400.0
    #: Check-log entries each shard keeps at most (0: no check log: no database takes it).
    checks_kept: int = 0


@dataclass
class _Call:
    kind: str
    index: int
    work: Any
    script: str
    keys: list[str]
    args: list[Any]


@dataclass
class _Shard:
    ops: list[Any] = field(default_factory=list)
    callbacks: list[tuple[int, Callback | None]] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    push_callbacks: list[Callable[[int], None] | None] = field(default_factory=list)
    acks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def __bool__(self) -> bool:
        return bool(self.ops or self.entries or self.acks)


@dataclass
class _Behind:
    """A send under way on the batch's thread."""

    calls: list[_Call]
    future: Future[tuple[list[Any], list[tuple[int, int]]]]
    done: Done


class WriteBatch:
    """Operations waiting for the next flush (see the module docstring)."""

    def __init__(self, client: Any, scripts: ScriptSet, layout: CrawlLayout, queue: CrawlQueue,
                 settings: LandSettings, *, bloom_slices: int,
                 schedule: Callable[[Callable[[], None]], Any] | None = None,
                 on_push: Callable[[int, int, int], None] | None = None) -> None:
        self.client = client
        self.scripts = scripts
        self.layout = layout
        self.queue = queue
        self.settings = settings
        #: No fetch makes its page due again before this server time (a one-run cycle's end: a
        #: page is fetched at most once per run); 0 for none.
        self.not_before = 0.0
        self.bloom_slices = bloom_slices
        self.schedule = schedule
        #: called after each shard's push with (shard, queued in it, its seen-filter count)
        self.on_push = on_push
        self._shards: dict[int, _Shard] = defaultdict(_Shard)
        self._ledger: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._bucket = 0.0
        self._scheduled = False
        self._unsent: list[_Call] = []
        #: Lease acks waiting for the calls built with or before them to be answered.
        self._held: list[_Call] = []
        self._behind: _Behind | None = None
        self._sender: ThreadPoolExecutor | None = None
        self.flushes = 0

    def __len__(self) -> int:
        return sum(len(s.callbacks) + len(s.entries) + sum(map(len, s.acks.values()))
                   for s in self._shards.values()) + len(self._ledger) + (self._bucket != 0) + len(
            self._unsent) + len(self._held)

    def _soon(self) -> None:
        if not self._scheduled and self.schedule is not None:
            self._scheduled = True
            self.schedule(self.flush)

    # -- adding operations ----------------------------------------------------------------------

    def land(self, host: str, op: tuple[str, list[Any]], callback: Callback | None = None) -> None:
        """A land operation ``(code, arguments)`` (:mod:`webcrawl.state.pagestore` builds the
        page ones; lua2/land.lua lists them all) about ``host`` or one of its pages."""
        code, args = op
        if len(args) != ARITY[code]:
            raise ValueError(f"land op {code} takes {ARITY[code]} arguments, got {len(args)}")
        shard = self._shards[self.layout.shard_index(host)]
        shard.callbacks.append((len(shard.callbacks), callback))
        shard.ops.append(code)
        if code in PAGE_OPS:
            shard.ops.extend((args[0], host, *args[1:]))
        else:
            shard.ops.extend((host, *args))
        self._soon()

    def push(self, entry: Entry, callback: Callable[[int], None] | None = None) -> None:
        shard = self._shards[self.layout.shard_index(entry.host)]
        shard.entries.append(entry)
        shard.push_callbacks.append(callback)
        self._soon()

    def ack(self, shard_index: int, owner: str, lease: str) -> None:
        self._shards[shard_index].acks[owner].append(lease)
        self._soon()

    def ledger(self, cycle_id: int, figures: dict[str, float]) -> None:
        """Add ``figures`` (field -> amount) to cycle ``cycle_id``'s ledger."""
        book = self._ledger[cycle_id]
        for key, amount in figures.items():
            book[key] += amount
        self._soon()

    def bucket(self, amount: float) -> None:
        """Give ``amount`` back to the spend bucket (negative: charge it)."""
        self._bucket += amount
        self._soon()

    # -- flushing -------------------------------------------------------------------------------

    def _build(self) -> None:
        """Turn what waits into script calls, each with its op id, queued for sending."""
        shards, self._shards = self._shards, defaultdict(_Shard)
        ledger, self._ledger = self._ledger, defaultdict(lambda: defaultdict(float))
        bucket, self._bucket = self._bucket, 0.0
        s = self.settings
        head = [self.scripts.op_ttl, s.default_delay, s.sitemap_min_agreements,
                s.sitemap_max_disagreement_rate, s.sitemap_memory, repr(float(self.not_before)),
                repr(float(s.events_retention_seconds)), repr(float(s.removal_confirm_seconds)),
                repr(float(s.removed_probe_seconds)), int(s.checks_kept)]
        # Acks held from earlier builds go once every call built before them was answered.
        answered = not self._unsent
        ready, self._held = (self._held, []) if answered else ([], self._held)
        writes = len(self._unsent)
        for index, work in shards.items():
            keys = self.layout.all_shards[index]
            # Lands first: a pipeline is not atomic, and another process's pop between a push and
            # the land moving the pushed URLs' host's turn (a fetch finished) could take one
            # of them in the turn that fetch had.
            if work.ops:
                self._unsent.append(_Call("land", index, work, "land",
                                          shard_keys_for("land", keys, new_op_id()),
                                          head + work.ops))
            if work.entries:
                args = self.queue.push_args(work.entries, self.bloom_slices)
                self._unsent.append(_Call("push", index, work, "push",
                                          shard_keys_for("push", keys, new_op_id()), args))
            for owner, leases in work.acks.items():
                self._held.append(_Call("ack", index, work, "lease", shard_keys_for("lease", keys),
                                        [owner, "ack", self.queue.lease_seconds, *leases]))
        for cycle_id, figures in ledger.items():
            args: list[Any] = [self.scripts.op_ttl]
            for key, amount in figures.items():
                args += (key, repr(float(amount)))
            self._unsent.append(_Call("ledger", 0, _Shard(), "ledger",
                                      [self.layout.key(f"cycle:{cycle_id}"),
                                       self.layout.op(new_op_id())], args))
        if bucket:
            self._unsent.append(_Call("bucket", 0, _Shard(), "bucket",
                                      [self.layout.bucket, self.layout.op(new_op_id())],
                                      ["give", repr(float(bucket)), self.scripts.op_ttl]))
        if answered and len(self._unsent) == writes:  # nothing else goes: this build's acks too
            ready, self._held = ready + self._held, []
        self._unsent += ready

    def flush(self) -> bool:
        """Send everything waiting, in one pipeline; answers go to the callbacks. Returns whether
        anything was sent (and answered). A send under way behind (:meth:`send_behind`) is
        waited for and answered first.

        Raises :class:`redis.RedisError` when Redis fails. Nothing is lost then: the calls stay
        queued, with their op ids, and the next flush sends them again first; a call that the
        server applied although the client saw an error answers its kept result the second
        time, with no second effect."""
        self.settle()
        sent = False
        while calls := self._take():  # a second round when acks were held for this one
            self._answer(calls, self._send_all(calls, self.client)[0])
            sent = True
        return sent

    def send_behind(self, post: Callable[[Callable[[], None]], Any], done: Done,
                    riders: Sequence[Callable[[Any], None]] = ()) -> bool:
        """Send everything waiting from the batch's own thread, so the caller's thread does not
        wait for Redis; returns whether anything went. ``riders`` queue commands of their own on
        the same pipeline, after the batch's calls (a pop that must see them). When the answer is
        in, ``post`` is called from that thread with a function that must run on the caller's
        thread: it answers the callbacks (as :meth:`flush` does) and then calls ``done`` with
        the error, if Redis failed (the calls stay queued, as after a failed :meth:`flush`), and
        each rider's replies.

        One send at a time: :meth:`flush` and :meth:`settle` wait for this one first."""
        self.settle()
        calls = self._take()
        if not calls and not riders:
            return False
        if self._sender is None:
            self._sender = ThreadPoolExecutor(1, thread_name_prefix="webcrawl-batch")
        # The plain client: the caller's own flushes carry its riders, never this one.
        client = getattr(self.client, "unwrapped", self.client)
        behind = _Behind(calls, self._sender.submit(self._send_all, calls, client, list(riders)),
                         done)
        self._behind = behind
        behind.future.add_done_callback(lambda _: post(lambda: self._settle(behind)))
        return True

    @property
    def sending(self) -> bool:
        """Whether a send behind is under way or unanswered."""
        return self._behind is not None

    def settle(self) -> None:
        """Wait for the send behind, if one is under way, and answer it (see
        :meth:`send_behind`)."""
        if self._behind is not None:
            self._settle(self._behind)

    def _settle(self, behind: _Behind) -> None:
        if self._behind is not behind:
            return  # answered already
        self._behind = None
        try:
            replies, spans = behind.future.result()
        except redis.RedisError as exc:
            behind.done(exc, [])
            return
        if behind.calls:
            self._answer(behind.calls, replies)
        behind.done(None, [replies[start:end] for start, end in spans])

    def close(self) -> None:
        """Answer the send behind, if any, and stop the batch's thread."""
        self.settle()
        if self._sender is not None:
            self._sender.shutdown()
            self._sender = None

    def _take(self) -> list[_Call]:
        self._scheduled = False
        self._build()
        return list(self._unsent)

    def _send_all(self, calls: list[_Call], client: Any, riders: Sequence[Callable[[Any], None]] = (),
                  ) -> tuple[list[Any], list[tuple[int, int]]]:
        try:
            return self._send(calls, client, riders)
        except redis.exceptions.NoScriptError:
            # A restarted or promoted server lost its script cache: load the scripts and send
            # the same calls again (their op ids make what did run answer without running twice).
            self.scripts.load()
            return self._send(calls, client, riders)

    def _answer(self, calls: list[_Call], replies: list[Any]) -> None:
        del self._unsent[:len(calls)]
        self.flushes += 1
        if self._held:
            self._soon()  # the acks held for these calls go next
        for call, reply in zip(calls, replies):
            work = call.work
            if call.kind == "push":
                statuses, queued, seen = self.queue.push_reply(reply)
                for status, callback in zip(statuses, work.push_callbacks):
                    if callback is not None:
                        callback(status)
                if self.on_push is not None:
                    self.on_push(call.index, queued, seen)
            elif call.kind == "land":
                for n, callback in work.callbacks:
                    if callback is not None:
                        callback(list(reply[REPLY_WIDTH * n:REPLY_WIDTH * (n + 1)]))

    def _send(self, calls: list[_Call], client: Any, riders: Sequence[Callable[[Any], None]] = (),
              ) -> tuple[list[Any], list[tuple[int, int]]]:
        """The replies of one pipeline: ``calls``, then each rider's commands (their spans)."""
        pipe = client.pipeline(transaction=False)
        for call in calls:
            self.scripts.call_keys(call.script, call.keys, call.args, client=pipe)
        spans = []
        for build in riders:
            start = len(pipe)
            build(pipe)
            spans.append((start, len(pipe)))
        return pipe.execute(), spans

    @property
    def unsent(self) -> int:
        """Script calls built but not yet answered (a failed flush keeps them)."""
        return len(self._unsent)

    def flush_safely(self, on_error: Callable[[redis.RedisError], None]) -> None:
        try:
            self.flush()
        except redis.RedisError as exc:
            on_error(exc)
