"""Page histories in Redis: one hash per page (``{c}:page:<canonical url>``), updated atomically.

Each observation of a page (a whole response, or a 304 Not Modified) goes through one Lua script
(``lua/history_observe.lua``), so processes sharing a crawl never lose or double an update. The
hash keeps, per page:

| field | meaning |
| --- | --- |
| ``first_seen``, ``last_fetched``, ``last_change`` | times (seconds since the epoch): first fetch, latest observation, observation that last found a change (the first fetch counts) |
| ``hash``, ``page_type``, ``status``, ``kind`` | latest record hash, page type, HTTP status, ``fetch`` or ``304`` |
| ``etag``, ``last_modified`` | validators of the latest whole response (absent when it sent none) |
| ``fetches``, ``not_modified``, ``cost`` | observations, 304s among them, bytes on the wire so far |
| ``visits``, ``changes``, ``seconds``, ``unchanged_seconds``, ``exact_changes``, ``exact_seconds``, ``bc:<bin>``, ``bs:<bin>`` | the sufficient statistics of :class:`webcrawl.revisit.PageHistory` (a first fetch is no visit: it has no interval) |
| ``last_interval``, ``last_changed`` | the latest interval since the previous observation and whether it ended changed (``1``/``0``) |
| ``body``, ``body_hash``, ``body_time`` | pointer ``segment:offset:length`` of the latest stored body, its BLAKE2b, its fetch time |

:meth:`PageRecord.page_history` turns a read hash into the revisit model's ``PageHistory``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Literal

from webcrawl.revisit.history import BIN_BASE_SECONDS, BINS_PER_DOUBLING, NBINS, PageHistory

if TYPE_CHECKING:
    import redis

    from webcrawl.state.keys import CrawlKeys

__all__ = ["HistoryStore", "Observation", "PageRecord"]

Verdict = Literal["new", "changed", "unchanged", "none"]


@dataclass(frozen=True)
class Observation:
    """What the script answered: the verdict and the interval since the previous observation
    (``None`` for a first fetch)."""

    verdict: Verdict
    interval: float | None


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


@dataclass
class PageRecord:
    """A page's history as read from Redis (see the module docstring for the fields)."""

    first_seen: float = 0.0
    last_fetched: float = 0.0
    last_change: float = 0.0
    hash: str | None = None
    page_type: str | None = None
    status: int = 0
    kind: str = ""
    etag: str | None = None
    last_modified: str | None = None
    fetches: int = 0
    not_modified: int = 0
    cost: float = 0.0
    visits: int = 0
    changes: int = 0
    seconds: float = 0.0
    unchanged_seconds: float = 0.0
    exact_changes: int = 0
    exact_seconds: float = 0.0
    last_interval: float | None = None
    last_changed: bool | None = None
    body: str | None = None
    body_hash: str | None = None
    body_time: float | None = None
    bins: dict[int, tuple[int, float]] = field(default_factory=dict)

    @classmethod
    def from_hash(cls, raw: dict[bytes | str, bytes | str]) -> PageRecord:
        data = {_text(k) or "": _text(v) or "" for k, v in raw.items()}
        record = cls()
        for name in ("first_seen", "last_fetched", "last_change", "cost", "seconds",
                     "unchanged_seconds", "exact_seconds"):
            setattr(record, name, float(data.get(name) or 0))
        for name in ("status", "fetches", "not_modified", "visits", "changes", "exact_changes"):
            setattr(record, name, int(data.get(name) or 0))
        for name in ("hash", "page_type", "etag", "last_modified", "body", "body_hash"):
            setattr(record, name, data.get(name) or None)
        record.kind = data.get("kind", "")
        if data.get("last_interval"):
            record.last_interval = float(data["last_interval"])
            record.last_changed = data.get("last_changed") == "1"
        if data.get("body_time"):
            record.body_time = float(data["body_time"])
        for name, value in data.items():
            if name.startswith("bc:"):
                b = int(name[3:])
                record.bins[b] = (int(value), float(data.get(f"bs:{b}") or 0))
        return record

    def page_history(self) -> PageHistory:
        """The revisit model's sufficient statistics of this page."""
        page = PageHistory(
            visits=self.visits, changes=self.changes, seconds=self.seconds,
            unchanged_seconds=self.unchanged_seconds, exact_changes=self.exact_changes,
            exact_seconds=self.exact_seconds,
        )
        for b, (count, seconds) in self.bins.items():
            if 0 <= b < NBINS:
                page.changed_counts[b] = count
                page.changed_seconds[b] = seconds
        return page


class HistoryStore:
    """Read and update the page histories of one crawl."""

    def __init__(self, client: redis.Redis, keys: CrawlKeys) -> None:
        self.client = client
        self.keys = keys
        source = resources.files("webcrawl.state").joinpath("lua/history_observe.lua").read_text()
        self._observe = client.register_script(source)

    def observe(self, url: str, *, now: float, record_hash: str | None, cost: float = 0.0,
                status: int = 200, page_type: str | None = None,
                validators: tuple[str | None, str | None] | None = None,
                change_age: float | None = None) -> Observation:
        """Record one observation of the page ``url`` (canonical) at ``now``.

        ``record_hash`` is the record's hash for a whole response, ``None`` for a 304 (then the
        verdict is ``unchanged``, or ``none`` when the page has no history). ``validators``
        (etag, last-modified) replace the stored ones when given (``None`` values delete them).
        ``change_age``: seconds between the record's last change and this fetch, from a clock
        the caller trusts; used only when the record changed and the age fits the interval.
        """
        kind = "304" if record_hash is None else "fetch"
        etag, modified = validators if validators is not None else (None, None)
        args = [
            kind, repr(float(now)), record_hash or "", repr(float(cost)), str(int(status)),
            page_type or "", "1" if validators is not None else "0", etag or "", modified or "",
            "" if change_age is None else repr(float(change_age)),
            NBINS, BIN_BASE_SECONDS, BINS_PER_DOUBLING,
        ]
        verdict, interval = self._observe(keys=[self.keys.page(url)], args=args)
        interval = _text(interval)
        return Observation(_text(verdict), float(interval) if interval else None)  # type: ignore[arg-type]

    def validators(self, url: str) -> tuple[str | None, str | None]:
        """The stored (etag, last-modified) of ``url``; (None, None) without history."""
        etag, modified = self.client.hmget(self.keys.page(url), "etag", "last_modified")
        return _text(etag), _text(modified)

    def body_hash(self, url: str) -> str | None:
        return _text(self.client.hget(self.keys.page(url), "body_hash"))

    def set_body(self, url: str, pointer: str, body_hash: str, fetch_time: float) -> None:
        """Point the page's history at its newest stored body (one HSET: atomic)."""
        self.client.hset(self.keys.page(url), mapping={
            "body": pointer, "body_hash": body_hash, "body_time": repr(float(fetch_time)),
        })

    def get(self, url: str) -> PageRecord | None:
        """The page's history, or ``None`` when it has none."""
        raw = self.client.hgetall(self.keys.page(url))
        return PageRecord.from_hash(raw) if raw else None
