"""The allocator's copy of every known page: their packed records as one numpy array (and what
listings say of each: since when they show its summary, when they last listed it), kept in step
with Redis through each shard's ``dirty`` set.

The table is the one piece of the allocator's memory that grows with the pages of a crawl, so it
holds no Python object per page (:class:`UrlStore`). A page costs its record row
(``records.DTYPE``, 194 bytes: the plan reads the wide fields), its listing times (16), its host
id (4), its URL's UTF-8 bytes in one shared buffer (the URL's length, and up to an eighth more:
the buffer's room to grow) with an 8-byte offset, and 12 bytes of URL index (a 64-bit hash and a
row number). With URLs of 65 characters that is about 300 bytes a page once loaded (the arrays are
sized for the pages Redis holds), and up to a quarter more on the per-row arrays as the crawl
finds pages. (With a Python list of URL strings, a dict from URL to row and ``np.resize`` growth
the same table held about 560 bytes a page.)

:meth:`PageTable.load` reads every record once (HSCAN, shard by shard, after emptying the dirty
sets: a page changed during the scan is marked dirty again and read on the next sync);
:meth:`PageTable.sync` then reads only the pages whose records changed since. A process that
takes the allocation over from another one loads afresh.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from hashlib import blake2b
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np

from webcrawl.state import records

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout
    from webcrawl.state.pagestore import PageStore

__all__ = ["PageTable", "UrlStore"]

#: How much a full per-row array grows: a quarter (rather than half) leaves less unused room, at
#: the price of a few more copies while a crawl discovers pages (a copy of 194-byte rows is cheap
#: next to reading them from Redis).
_GROW = 1.25
#: The pending part of the URL index (a dict: one Python object per entry) is merged into the
#: sorted arrays once it holds more than this many URLs, or more than 1/_MERGE_SHARE of those
#: already merged: a merge copies the sorted arrays, so merging in proportion keeps its cost per
#: URL constant while the dict stays a small fraction of the table.
_MERGE_MIN = 4096
_MERGE_SHARE = 32
#: URLs read from Redis may hold lone surrogates (bytes that were not UTF-8, kept by
#: ``surrogateescape``): "surrogatepass" encodes any string, and gives distinct strings distinct
#: bytes (``surrogateescape`` would give "\udcc3\udca9" the bytes of "é").
_ERRORS = "surrogatepass"


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` with room for ``size`` rows, zeros after the old ones. Not ``np.resize``: its
    result is a view of the old array repeated (twice the old size when growing by less than
    double; ``nbytes`` counts only the view). The rows are copied as bytes: numpy copies a
    structured array field by field, about ten times slower."""
    out = np.zeros((size, *array.shape[1:]), dtype=array.dtype)
    out[:len(array)].reshape(-1).view(np.uint8)[:] = array.reshape(-1).view(np.uint8)
    return out


def _url_hash(data: bytes) -> int:
    """A stable 64-bit hash of a URL's bytes (the same in every process, unlike ``hash``)."""
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")


class UrlStore:
    """URLs by row, with no Python object per URL.

    ``data`` holds every URL's UTF-8 bytes end to end; row ``r``'s are
    ``data[offsets[r]:offsets[r + 1]]``. The index from URL to row is a sorted array of 64-bit
    URL hashes (``keys``) with each hash's row (``key_rows``), searched with ``np.searchsorted``;
    URLs added since the last merge wait in ``pending`` (hash -> row). A hash names one row only:
    a URL whose hash another stored URL already has (a collision, some 1e-6 likely at ten million
    pages) is kept in ``collided`` (URL -> row), and every hash match is checked against the
    stored bytes, so two URLs never share a row.
    """

    def __init__(self) -> None:
        self.data = bytearray()
        self.offsets = np.zeros(1025, dtype=np.int64)
        self.keys = np.zeros(0, dtype=np.uint64)
        self.key_rows = np.zeros(0, dtype=np.int32)
        self.pending: dict[int, int] = {}
        self.collided: dict[str, int] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` URLs' offsets."""
        if rows + 1 > len(self.offsets):
            self.offsets = _grown(self.offsets, rows + 1)

    def url(self, row: int) -> str:
        return self.data[self.offsets[row]:self.offsets[row + 1]].decode("utf-8", _ERRORS)

    def row_of(self, url: str) -> int | None:
        """One URL's row, ``None`` if unknown."""
        row = self._lookup([url])[3][0]
        return row if row >= 0 else None

    def rows_of(self, urls: Sequence[str]) -> np.ndarray:
        """Rows of ``urls`` (int64), -1 where unknown."""
        return np.array(self._lookup(urls)[3], dtype=np.int64)

    def add(self, urls: Sequence[str]) -> np.ndarray:
        """Rows of ``urls``, appending the unknown ones (a URL repeated in ``urls`` gets one row)."""
        datas, hashes, held, rows = self._lookup(urls)
        # No merge until the end: until then every URL added here is found in ``pending``.
        for j, row in enumerate(rows):
            if row >= 0:
                continue
            url, data, h = urls[j], datas[j], hashes[j]
            holder = held[j] if held[j] >= 0 else self.pending.get(h, -1)
            if holder >= 0:  # this URL (added just now) or another one has its hash
                row = self._check(holder, url, data)
                if row < 0:
                    row = self.collided[url] = self._append(data)
            else:
                row = self.pending[h] = self._append(data)
            rows[j] = row
        if len(self.pending) > max(_MERGE_MIN, len(self.keys) // _MERGE_SHARE):
            self._merge()
        return np.array(rows, dtype=np.int64)

    def nbytes(self) -> dict[str, int]:
        """Bytes held, by part (arrays and buffer as allocated, room to grow included)."""
        pending = sys.getsizeof(self.pending) + sum(
            sys.getsizeof(h) + sys.getsizeof(r) for h, r in self.pending.items())
        collided = sys.getsizeof(self.collided) + sum(
            sys.getsizeof(u) + sys.getsizeof(r) for u, r in self.collided.items())
        return {"URL bytes": sys.getsizeof(self.data), "URL offsets": int(self.offsets.nbytes),
                "URL index": int(self.keys.nbytes + self.key_rows.nbytes) + pending + collided}

    def _lookup(self, urls: Sequence[str]) -> tuple[list[bytes], list[int], list[int], list[int]]:
        """Each URL's bytes, hash, the row holding its hash (-1: none) and its own row (-1: none)."""
        datas = [u.encode("utf-8", _ERRORS) for u in urls]
        hashes = [_url_hash(d) for d in datas]
        held = [-1] * len(urls)
        if len(self.keys) and urls:
            wanted = np.array(hashes, dtype=np.uint64)
            at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
            held = np.where(self.keys[at] == wanted, self.key_rows[at], -1).tolist()
        rows = []
        for j, (url, data, h) in enumerate(zip(urls, datas, hashes)):
            if held[j] < 0 and self.pending:
                held[j] = self.pending.get(h, -1)
            rows.append(self._check(held[j], url, data) if held[j] >= 0 else -1)
        return datas, hashes, held, rows

    def _check(self, holder: int, url: str, data: bytes) -> int:
        """Row of ``url``, given the row holding its hash: that one if it is this URL, else the
        URL's row among the collided ones (-1 if none)."""
        if self.data[self.offsets[holder]:self.offsets[holder + 1]] == data:
            return holder
        return self.collided.get(url, -1)

    def _append(self, data: bytes) -> int:
        row = self._n
        if row + 2 > len(self.offsets):
            self.reserve(max(row + 1, int(len(self.offsets) * _GROW)))
        self.data += data
        self.offsets[row + 1] = len(self.data)
        self._n += 1
        return row

    def _merge(self) -> None:
        """Move the pending hashes into the sorted arrays (one pass over them: ``np.insert``)."""
        hashes = np.fromiter(self.pending.keys(), dtype=np.uint64, count=len(self.pending))
        rows = np.fromiter(self.pending.values(), dtype=np.int32, count=len(self.pending))
        order = np.argsort(hashes)
        hashes, rows = hashes[order], rows[order]
        at = np.searchsorted(self.keys, hashes)
        self.keys = np.insert(self.keys, at, hashes)
        self.key_rows = np.insert(self.key_rows, at, rows)
        self.pending = {}


class PageTable:
    """Rows of known pages: ``records`` (records.DTYPE, writable), ``host_of`` (index into
    ``hosts``), ``listings``; :meth:`url`, :meth:`row_of` and :meth:`rows_of` map rows and URLs."""

    def __init__(self, pages: PageStore, layout: CrawlLayout) -> None:
        self.pages = pages
        self.layout = layout
        self.url_store = UrlStore()
        self.rows = np.zeros(1024, dtype=records.DTYPE)
        self.host = np.zeros(1024, dtype=np.int32)
        self.listed = np.zeros((1024, 2))  # (since, last listed); 0 where no listing shows it
        self.hosts: list[str] = []
        self._host_ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.url_store)

    @property
    def records(self) -> np.ndarray:
        return self.rows[:len(self)]

    @property
    def host_of(self) -> np.ndarray:
        return self.host[:len(self)]

    @property
    def listings(self) -> np.ndarray:
        """Per row: (since when listings show the page's summary, when last listed); zeros
        where none does."""
        return self.listed[:len(self)]

    def url(self, row: int) -> str:
        return self.url_store.url(row)

    def row_of(self, url: str) -> int | None:
        return self.url_store.row_of(url)

    def rows_of(self, urls: Sequence[str]) -> np.ndarray:
        """Rows of ``urls``, -1 where unknown."""
        return self.url_store.rows_of(urls)

    def _reserve(self, size: int) -> None:
        """Room for ``size`` rows in the per-row arrays (the URL store grows its own)."""
        if size > len(self.rows):
            self.rows = _grown(self.rows, size)
            self.host = _grown(self.host, size)
            self.listed = _grown(self.listed, size)

    def _host_id(self, url: str) -> int:
        host = (urlsplit(url).hostname or "-").lower()
        found = self._host_ids.get(host)
        if found is None:
            found = self._host_ids[host] = len(self.hosts)
            self.hosts.append(host)
        return found

    def _update(self, index: int, urls: list[str], raws: list[bytes | None]) -> int:
        present = [(u, r) for u, r in zip(urls, raws) if r]
        if not present:
            return 0
        known = [u for u, _ in present]
        data = records.unpack_many([r for _, r in present])
        listed = np.array([seen if seen is not None else (0.0, 0.0)
                           for seen in self.pages.listings(index, known)], dtype=float)
        before = len(self)
        rows = self.url_store.add(known)
        if len(self) > len(self.rows):
            self._reserve(max(len(self), int(len(self.rows) * _GROW)))
        for j in np.flatnonzero(rows >= before):
            self.host[rows[j]] = self._host_id(known[j])
        # A URL read twice in one batch (HSCAN may repeat one) keeps its last reading.
        last = len(rows) - 1 - np.unique(rows[::-1], return_index=True)[1]
        self.rows[rows[last]] = data[last]
        self.listed[rows[last]] = listed[last]
        return len(present)

    def load(self) -> int:
        """Read every record of the crawl (the dirty sets are emptied first)."""
        shards = self.layout.all_shards
        pipe = self.pages.client.pipeline(transaction=False)
        for shard in shards:
            pipe.delete(shard.dirty)
        for shard in shards:
            pipe.hlen(shard.pages)
        pages = sum(int(n) for n in pipe.execute()[len(shards):])
        # Sized for the pages there are, so that a loaded table carries no room it never uses.
        self.url_store = UrlStore()
        self.url_store.reserve(pages)
        self.rows = np.zeros(max(pages, 1024), dtype=records.DTYPE)
        self.host = np.zeros(len(self.rows), dtype=np.int32)
        self.listed = np.zeros((len(self.rows), 2))
        for index in range(self.layout.shards):
            urls: list[str] = []
            raws: list[bytes | None] = []
            for url, raw in self.pages.scan(index):
                urls.append(url)
                raws.append(raw)
                if len(urls) >= 5000:
                    self._update(index, urls, raws)
                    urls, raws = [], []
            self._update(index, urls, raws)
        return len(self)

    def sync(self, batch: int = 5000) -> int:
        """Read the records changed since the last sync; returns how many."""
        done = 0
        for index in range(self.layout.shards):
            while True:
                urls = self.pages.take_dirty(index, batch)
                if not urls:
                    break
                done += self._update(index, urls, self.pages.raw_records(index, urls))
                if len(urls) < batch:
                    break
        return done
