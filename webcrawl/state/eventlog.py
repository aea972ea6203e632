"""The durable record of change events: one Redis stream per shard (``events``), written by the land
script in the same step as the verdict that makes each event (lua2/lifecycle.lua), read here as
events of the contract (:mod:`webcrawl.change.events`).

:class:`EventLog` is :class:`~webcrawl.state.streams.ShardStream` over the ``events`` streams,
handing out :class:`Delivered` events: by time (:meth:`EventLog.entries`, :meth:`EventLog.events`),
or to a consumer group that applies each once (:meth:`~EventLog.join`, :meth:`~EventLog.read`,
:meth:`~EventLog.pending`, :meth:`~EventLog.ack`; an event handed out again keeps its
``event_id``). The stream keeps each event ``WEBCRAWL_EVENTS_RETENTION_SECONDS`` (7 days) and
trims it after, whether read or not: :meth:`~EventLog.lag` tells how far behind each consumer
is, so a consumer close to the retention is warned of (webcrawl/extensions/eventwatch.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.change.events import event_from_entry, event_id
from webcrawl.state.streams import Entry, ShardStream, entry_time

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["Delivered", "EventLog", "entry_time"]

#: Events land at most this long after their fetch (a flush, a retry, a Redis outage waited out):
#: a read "since T" starts this much earlier in the stream and keeps what was detected since T.
LANDING_SLACK_SECONDS = 3600.0


@dataclass(frozen=True)
class Delivered(Entry):
    """One event handed out: its shard and entry id (what :meth:`EventLog.ack` takes), the
    entry's raw fields (``b``: the stored body's pointer) and the event."""

    event: dict[str, Any] = None  # type: ignore[assignment]


class EventLog:
    """The event streams of one crawl."""

    def __init__(self, client: Any, layout: CrawlLayout) -> None:
        self.client = client
        self.layout = layout
        self.stream = ShardStream(client, layout, "events")

    def _delivered(self, entry: Entry) -> Delivered:
        identifier = event_id(self.layout.crawl, entry.shard, entry.entry_id)
        return Delivered(entry.shard, entry.entry_id, entry.fields,
                         event_from_entry(entry.fields, identifier))

    def entries(self, since: float | None = None) -> Iterator[Delivered]:
        """Every kept event detected at or after ``since`` (all when None), in the order they were
        recorded (by entry id across shards)."""
        start = None if since is None else since - LANDING_SLACK_SECONDS
        for entry in self.stream.entries(start):
            item = self._delivered(entry)
            detected = item.event["detected_at"]
            if since is None or (detected is not None and detected >= since):
                yield item

    def events(self, since: float | None = None) -> Iterator[dict[str, Any]]:
        for item in self.entries(since):
            yield item.event

    def oldest(self) -> float | None:
        """When the oldest kept event was recorded, None when none is kept."""
        return self.stream.oldest()

    def count(self) -> int:
        return self.stream.count()

    def join(self, group: str, *, from_start: bool = True) -> None:
        self.stream.join(group, from_start=from_start)

    def read(self, group: str, consumer: str, count: int = 500,
             claim_after: float = 60.0) -> list[Delivered]:
        return [self._delivered(e) for e in self.stream.read(group, consumer, count, claim_after)]

    def pending(self, group: str, consumer: str, count: int = 500) -> list[Delivered]:
        return [self._delivered(e) for e in self.stream.pending(group, consumer, count)]

    def ack(self, group: str, delivered: Iterable[Entry]) -> int:
        return self.stream.ack(group, delivered)

    def lag(self) -> dict[str, float]:
        return self.stream.lag()
