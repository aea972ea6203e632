"""The index of known pages the cycle planner scores: fixed-size binary records in Redis strings.

Reading a million page-history hashes takes minutes; the planner needs every known page's
statistics in seconds. So each page with a history also has a record of :data:`RECORD` bytes at
offset ``id * RECORD.itemsize`` of a segment string (``SEGMENT`` records a string), and loading
the whole index is one ``GET`` per segment and a ``numpy.frombuffer``.

A record copies the page's sufficient statistics (:class:`webcrawl.revisit.PageHistory`) from
its history hash, with two changes: the changed-interval histogram keeps its :data:`SLOTS`
busiest bins (a page revisited at a steady pace uses one or two; the others are merged into the
nearest kept bin, which moves only the grid posterior of pages whose intervals spread over more
than four bins, and only slightly), and the likelihood summary of
:func:`webcrawl.revisit.effective_data` (``events``, ``exposure``) is computed from the full
histogram when the record is written, so planning never runs the per-page solver.

The index follows the histories: :meth:`PageIndex.mark` notes a page whose history an
observation is about to change or just changed (a response, a scraped item), and
:meth:`PageIndex.sync` copies the marked histories into their records once they have settled
(marked at least ``settle`` seconds ago; a mark made again pushes that back). A record is only
ever rewritten from the history hash, so syncing twice is harmless. :meth:`PageIndex.rebuild`
re-marks every page history of the crawl (after a crash between an observation and its sync).

Keys (:mod:`webcrawl.state.keys`): ``{c}:pages:ids`` (hash url -> id), ``{c}:pages:urls`` (hash
id -> url), ``{c}:pages:seq`` (ids given), ``{c}:pages:rec:<n>`` (string: records of ids
``n * SEGMENT`` ...), ``{c}:pages:types`` (hash page type -> small id, 0 for none),
``{c}:pages:dirty`` (zset url -> time marked), ``{c}:pages:tiers`` (hash id -> tier 1..4: the
value override of a page whose history has a ``value_tier``, see below).

Value overrides: the record-hash pipeline writes ``value_tier`` into the history of a page whose
type has ``value_rules`` or a ``value_field`` (the tier they gave it at that fetch, ``0`` for
none). Records keep their fixed layout: the few overridden pages sit in ``{c}:pages:tiers``
instead, written with the record and loaded with one ``HGETALL`` into :attr:`PageColumns.tiers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from webcrawl.revisit import HistoryTable, effective_data
from webcrawl.state.history import PageRecord

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import redis
    from numpy.typing import NDArray

    from webcrawl.state.keys import CrawlKeys

__all__ = ["RECORD", "SEGMENT", "SLOTS", "PageColumns", "PageIndex", "compact_bins"]

SLOTS = 4
SEGMENT = 65_536
RECORD = np.dtype([
    ("last_fetched", "<f8"), ("type", "<i2"), ("visits", "<i4"), ("changes", "<i4"),
    ("exact_changes", "<i4"), ("seconds", "<f8"), ("unchanged_seconds", "<f8"),
    ("exact_seconds", "<f8"), ("slot_counts", "<i4", (SLOTS,)), ("slot_seconds", "<f8", (SLOTS,)),
    ("fetches", "<i4"), ("billed", "<f8"), ("events", "<f8"), ("exposure", "<f8"),
])

_ID = """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if id then return tonumber(id) end
id = redis.call('INCR', KEYS[3]) - 1
redis.call('HSET', KEYS[1], ARGV[1], id)
redis.call('HSET', KEYS[2], id, ARGV[1])
return id
"""
_TYPE = """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if id then return tonumber(id) end
id = redis.call('HLEN', KEYS[1]) + 1
redis.call('HSET', KEYS[1], ARGV[1], id)
return id
"""
# Forget marks that were not renewed since they were read (a newer mark waits for its own sync).
_UNMARK = """
local n = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= tonumber(ARGV[i + 1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def compact_bins(counts: Sequence[int], seconds: Sequence[float]) -> tuple[list[int], list[float]]:
    """The :data:`SLOTS` busiest bins of a changed-interval histogram, the others merged into the
    nearest kept bin (count and seconds added, so totals are exact)."""
    used = [b for b, c in enumerate(counts) if c]
    keep = sorted(sorted(used, key=lambda b: (-counts[b], b))[:SLOTS])
    slot_counts, slot_seconds = [0] * SLOTS, [0.0] * SLOTS
    for b in used:
        j = min(range(len(keep)), key=lambda k: abs(keep[k] - b))
        slot_counts[j] += int(counts[b])
        slot_seconds[j] += float(seconds[b])
    return slot_counts, slot_seconds


@dataclass(frozen=True)
class PageColumns:
    """Every indexed page: ``ids`` (rows of the index) and their ``records`` (:data:`RECORD`);
    ``types`` maps page type names to the ids in ``records["type"]``."""

    ids: NDArray[np.int64]
    records: NDArray[np.void]
    types: dict[str, int]
    #: per page, the tier a URL rule or record field gave it at its last fetch (0: none)
    tiers: NDArray[np.int8] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def history_table(self, rows: NDArray[np.intp] | None = None) -> HistoryTable:
        """The pages' statistics as the revisit model's table (the slots standing for bins)."""
        r = self.records if rows is None else self.records[rows]
        table = HistoryTable(0)
        for name in ("visits", "changes", "exact_changes"):
            setattr(table, name, r[name].astype(np.int64))
        for name in ("seconds", "unchanged_seconds", "exact_seconds"):
            setattr(table, name, r[name].astype(float))
        table.changed_counts = r["slot_counts"].astype(np.int64)
        table.changed_seconds = r["slot_seconds"].astype(float)
        return table


class PageIndex:
    """The known pages of one crawl (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: CrawlKeys) -> None:
        self.client = client
        self.keys = keys
        self.prefix = keys.pages_prefix
        self._id = client.register_script(_ID)
        self._type = client.register_script(_TYPE)
        self._unmark = client.register_script(_UNMARK)
        self._types: dict[str, int] = {}

    def _segment(self, n: int) -> str:
        return f"{self.prefix}rec:{n}"

    def mark(self, urls: Iterable[str], now: float) -> None:
        """Note pages (canonical URLs) whose history changed or is about to."""
        mapping = dict.fromkeys(urls, now)
        if mapping:
            self.client.zadd(self.prefix + "dirty", mapping)

    def dirty(self) -> int:
        return int(self.client.zcard(self.prefix + "dirty"))

    def sync(self, now: float, settle: float = 0.0, batch: int = 1000, limit: int | None = None) -> int:
        """Copy the histories of pages marked at least ``settle`` seconds ago into their records;
        returns how many were synced (at most ``limit`` if given)."""
        done = 0
        while limit is None or done < limit:
            size = batch if limit is None else min(batch, limit - done)
            marked: list[tuple[bytes, float]] = self.client.zrangebyscore(  # type: ignore[assignment]
                self.prefix + "dirty", "-inf", now - settle, start=0, num=size, withscores=True)
            if not marked:
                break
            pairs = [(_text(u), float(score)) for u, score in marked]
            urls = [u for u, _ in pairs]
            self.write(urls)
            args: list[str] = []
            for url, score in pairs:
                args += (url, repr(score))
            self._unmark(keys=[self.prefix + "dirty"], args=args)
            done += len(urls)
            if len(marked) < size:
                break
        return done

    def type_id(self, name: str | None) -> int:
        if not name:
            return 0
        if name not in self._types:
            self._types[name] = int(self._type(keys=[self.prefix + "types"], args=[name]))
        return self._types[name]

    def write(self, urls: Sequence[str]) -> int:
        """Rewrite the records of ``urls`` from their history hashes (pages without one are
        skipped); returns how many were written."""
        pipe = self.client.pipeline(transaction=False)
        for url in urls:
            pipe.hgetall(self.keys.page(url))
        raws = pipe.execute()
        found = [(url, raw) for url, raw in zip(urls, raws) if raw and b"last_fetched" in raw]
        if not found:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for url, _ in found:
            self._id(keys=[self.prefix + "ids", self.prefix + "urls", self.prefix + "seq"],
                     args=[url], client=pipe)
        ids = [int(i) for i in pipe.execute()]
        records = [PageRecord.from_hash(raw) for _, raw in found]
        histories = [r.page_history() for r in records]
        data = effective_data(HistoryTable.from_pages(histories))
        out = np.zeros(len(found), dtype=RECORD)
        for i, (record, history, (_, raw)) in enumerate(zip(records, histories, found)):
            row = out[i]
            row["last_fetched"], row["type"] = record.last_fetched, self.type_id(record.page_type)
            row["visits"], row["changes"] = history.visits, history.changes
            row["exact_changes"], row["seconds"] = history.exact_changes, history.seconds
            row["unchanged_seconds"], row["exact_seconds"] = history.unchanged_seconds, history.exact_seconds
            row["slot_counts"], row["slot_seconds"] = compact_bins(history.changed_counts, history.changed_seconds)
            row["fetches"] = record.fetches
            row["billed"] = float(raw.get(b"billed") or 0.0)
        out["events"], out["exposure"] = data.events, data.exposure
        pipe = self.client.pipeline(transaction=False)
        size = RECORD.itemsize
        for page_id, row in zip(ids, out):
            pipe.setrange(self._segment(page_id // SEGMENT), (page_id % SEGMENT) * size, row.tobytes())
        for page_id, (_, raw) in zip(ids, found):
            if b"value_tier" in raw:
                tier = int(raw[b"value_tier"] or 0)
                if 1 <= tier <= 4:
                    pipe.hset(self.prefix + "tiers", str(page_id), tier)
                else:
                    pipe.hdel(self.prefix + "tiers", str(page_id))
        pipe.execute()
        return len(found)

    def load(self) -> PageColumns:
        """Every record written so far (one ``GET`` per segment)."""
        count = int(self.client.get(self.prefix + "seq") or 0)
        segments = (count + SEGMENT - 1) // SEGMENT
        pipe = self.client.pipeline(transaction=False)
        for n in range(segments):
            pipe.get(self._segment(n))
        chunks = []
        for n, raw in enumerate(pipe.execute()):
            want = min(SEGMENT, count - n * SEGMENT)
            buf = np.zeros(want, dtype=RECORD)
            if raw:
                got = np.frombuffer(raw, dtype=RECORD, count=min(len(raw) // RECORD.itemsize, want))
                buf[:len(got)] = got
            chunks.append(buf)
        records = np.concatenate(chunks) if chunks else np.zeros(0, dtype=RECORD)
        ids = np.flatnonzero(records["last_fetched"] > 0)
        types = {_text(k): int(v) for k, v in self.client.hgetall(self.prefix + "types").items()}
        tiers = np.zeros(len(records), dtype=np.int8)
        for key, value in self.client.hgetall(self.prefix + "tiers").items():
            page_id = int(key)
            if 0 <= page_id < len(tiers):
                tiers[page_id] = int(value)
        return PageColumns(ids.astype(np.int64), records[ids], types, tiers[ids])

    def urls(self, ids: Sequence[int] | NDArray[np.int64]) -> list[str | None]:
        """The canonical URLs of index rows ``ids``."""
        if not len(ids):
            return []
        raw = self.client.hmget(self.prefix + "urls", [int(i) for i in ids])
        return [_text(u) if u is not None else None for u in raw]

    def ids(self, urls: Sequence[str]) -> list[int | None]:
        """The index rows of canonical ``urls`` (``None`` for pages not indexed)."""
        if not urls:
            return []
        raw = self.client.hmget(self.prefix + "ids", list(urls))
        return [int(i) if i is not None else None for i in raw]

    def rebuild(self, now: float, batch: int = 1000) -> int:
        """Mark every page history of the crawl for :meth:`sync`; returns how many."""
        marked = 0
        urls: list[str] = []
        start = len(self.keys.page_prefix)
        pattern = self.keys.pattern[:-1] + "page:*"  # the crawl's escaped prefix
        for key in self.client.scan_iter(match=pattern, count=batch):
            urls.append(_text(key)[start:])
            if len(urls) >= batch:
                self.mark(urls, now)
                marked += len(urls)
                urls = []
        self.mark(urls, now)
        return marked + len(urls)
