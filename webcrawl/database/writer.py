"""The database writer: the crawl state's change events and check log, applied to the tables once.

:class:`DatabaseWriter` is a consumer (group ``db``) of two records the land script keeps in every
shard: the change events (``events``, kept for their retention) and the check log (``checks``,
kept until taken). Each :meth:`~DatabaseWriter.step` takes a batch of each, applies both in one
transaction (:mod:`webcrawl.database.apply`: idempotent, keyed by event and check ids) and only
then acknowledges them: a writer killed at any moment leaves its batch unacknowledged, and it is
handed out again (to another member of the group once ``claim_after`` seconds have passed, or to
a writer of the same name when it starts again) and applied once. Acknowledged checks are
trimmed from the crawl state.

A database that does not answer (:class:`~webcrawl.database.engine.DatabaseUnavailable`) keeps the
batch in hand: :meth:`~DatabaseWriter.run` retries it with a growing pause (at most
``MAX_PAUSE_SECONDS``), with one WARNING when the outage starts and one INFO when it ends. The crawl
never waits for it; the crawl state holds what was not written yet, within its bounds (events:
their retention; checks: ``WEBCRAWL_DATABASE_CHECKS_KEPT`` a shard).

Every ``ROLL_UP_SECONDS`` the checks older than the retention (``WEBCRAWL_DATABASE_CHECKS_RETENTION_DAYS``,
30) are rolled up into ``check_days`` (:func:`~webcrawl.database.apply.roll_up`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from webcrawl.database.apply import apply_checks, apply_events, check_row, roll_up
from webcrawl.database.engine import Database, DatabaseUnavailable
from webcrawl.database.schema import migrate
from webcrawl.state.eventlog import Delivered, EventLog
from webcrawl.state.streams import Entry, ShardStream

__all__ = ["GROUP", "DatabaseWriter", "WriterCounts"]

logger = logging.getLogger(__name__)

GROUP = "db"
MAX_PAUSE_SECONDS = 10.0
ROLL_UP_SECONDS = 600.0
TRIM_EVERY_STEPS = 20


@dataclass
class WriterCounts:
    """What a writer did so far (for stats)."""

    events: int = 0
    checks: int = 0
    batches: int = 0
    failures: int = 0
    rolled_up: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class DatabaseWriter:
    """Applies the crawl state's events and checks to a database (module docstring)."""

    def __init__(self, db: Database, events: EventLog, checks: ShardStream, *, consumer: str,
                 batch: int = 500, claim_after: float = 60.0,
                 checks_retention: float = 30 * 86_400.0,
                 clock: Callable[[], float] = time.time) -> None:
        if batch < 1:
            raise ValueError(f"WEBCRAWL_DATABASE_BATCH={batch!r}: expected at least 1")
        self.db = db
        self.events = events
        self.checks = checks
        self.crawl = events.layout.crawl
        self.consumer = consumer
        self.batch = batch
        self.claim_after = claim_after
        self.checks_retention = checks_retention
        self.clock = clock
        self.counts = WriterCounts()
        self._held: tuple[list[Delivered], list[Entry]] | None = None
        self._joined = False
        self._outage_since: float | None = None
        self._rolled_at = -float("inf")
        self._steps = 0

    def open(self) -> None:
        """Bring the schema up to date and join the records' consumer group (from the oldest
        kept entry, so a database added to a running crawl gets what the crawl state holds)."""
        migrate(self.db)
        self.events.join(GROUP)
        self.checks.join(GROUP)
        self._joined = True

    def _take(self) -> tuple[list[Delivered], list[Entry]]:
        if self._held is not None:
            return self._held
        if self._steps == 0:  # what this writer's name held when it stopped, first
            events = self.events.pending(GROUP, self.consumer, self.batch)
            checks = self.checks.pending(GROUP, self.consumer, self.batch)
            if events or checks:
                return events, checks
        return (self.events.read(GROUP, self.consumer, self.batch, self.claim_after),
                self.checks.read(GROUP, self.consumer, self.batch, self.claim_after))

    def step(self) -> int:
        """Apply one batch of events and checks; how many entries. Raises
        :class:`DatabaseUnavailable` (the batch is kept for the next step) or a Redis error."""
        if not self._joined:
            self.open()
        events, checks = self._held = self._take()
        self._steps += 1
        if not events and not checks:
            self._held = None
            self._maintain()
            return 0
        rows = [check_row(self.crawl, e.shard, e.entry_id, e.fields) for e in checks]
        with self.db.transaction() as tx:
            applied = apply_events(tx, events)
            apply_checks(tx, rows)
        self.events.ack(GROUP, events)
        self.checks.ack(GROUP, checks)
        self._held = None
        self.counts.events += applied
        self.counts.checks += len(rows)
        self.counts.batches += 1
        for item in events:
            kind = item.event["kind"]
            self.counts.by_kind[kind] = self.counts.by_kind.get(kind, 0) + 1
        if self._steps % TRIM_EVERY_STEPS == 0:
            self.checks.trim_consumed(GROUP)
        self._maintain()
        return len(events) + len(checks)

    def _maintain(self) -> None:
        now = self.clock()
        if now - self._rolled_at >= ROLL_UP_SECONDS:
            self._rolled_at = now
            with self.db.transaction() as tx:
                self.counts.rolled_up += roll_up(tx, now - self.checks_retention)
            self.checks.trim_consumed(GROUP)

    def run(self, stop: threading.Event, *, idle_seconds: float = 0.5,
            drain_seconds: float = 10.0) -> None:
        """Step until ``stop`` is set, waiting ``idle_seconds`` when nothing is new and longer
        (growing) while the database or Redis does not answer; then drain what is there for at
        most ``drain_seconds``."""
        pause = 0.0
        while not stop.is_set():
            try:
                done = self.step()
            except DatabaseUnavailable as exc:
                pause = self._failed(exc, pause)
                stop.wait(pause)
                continue
            except Exception as exc:  # noqa: BLE001 - Redis or a bug: logged, retried, never fatal to the crawl
                if _is_redis_error(exc):
                    pause = self._failed(exc, pause)
                    stop.wait(pause)
                    continue
                raise
            self._recovered()
            pause = 0.0
            if not done:
                stop.wait(idle_seconds)
        self.drain(drain_seconds)

    def drain(self, seconds: float = 10.0) -> None:
        """Apply what is there now (a closing crawl's last events), for at most ``seconds``."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and self.step():
                pass
        except Exception as exc:  # noqa: BLE001 - what is left is applied by the next writer
            logger.warning("The database writer stopped with entries left (%s); they are applied "
                           "by the next writer", exc)

    def _failed(self, exc: Exception, pause: float) -> float:
        self.counts.failures += 1
        if self._outage_since is None:
            self._outage_since = self.clock()
            logger.warning("The database writer cannot write (%s); the crawl goes on and the crawl "
                           "state keeps events and checks until it can", exc)
        return min(max(pause * 2, 0.5), MAX_PAUSE_SECONDS)

    def _recovered(self) -> None:
        if self._outage_since is not None:
            logger.info("The database writer writes again after %.0f s",
                        self.clock() - self._outage_since)
            self._outage_since = None


def _is_redis_error(exc: Exception) -> bool:
    return any(cls.__module__.startswith("redis") for cls in type(exc).__mro__)
