"""The allocator's copy of every known page: their packed records as one numpy array (and what
listings say of each: since when they show its summary, when they last listed it), kept in step
with Redis through each shard's ``dirty`` set.

:meth:`PageTable.load` reads every record once (HSCAN, shard by shard, after emptying the dirty
sets: a page changed during the scan is marked dirty again and read on the next sync);
:meth:`PageTable.sync` then reads only the pages whose records changed since. A process that
takes the allocation over from another one loads afresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np

from webcrawl.state import records

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout
    from webcrawl.state.pagestore import PageStore

__all__ = ["PageTable"]

_GROW = 1.5


class PageTable:
    """Rows of known pages: ``rows`` (records.DTYPE), ``urls``, ``host`` (index into ``hosts``)."""

    def __init__(self, pages: PageStore, layout: CrawlLayout) -> None:
        self.pages = pages
        self.layout = layout
        self.urls: list[str] = []
        self.index: dict[str, int] = {}
        self.rows = np.zeros(1024, dtype=records.DTYPE)
        self.host = np.zeros(1024, dtype=np.intp)
        self.listed = np.zeros((1024, 2))  # (since, last listed); 0 where no listing shows it
        self.hosts: list[str] = []
        self._host_ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.urls)

    @property
    def records(self) -> np.ndarray:
        return self.rows[:len(self.urls)]

    @property
    def host_of(self) -> np.ndarray:
        return self.host[:len(self.urls)]

    @property
    def listings(self) -> np.ndarray:
        """Per row: (since when listings show the page's summary, when last listed); zeros
        where none does."""
        return self.listed[:len(self.urls)]

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
        data = records.unpack_many([r for _, r in present])
        listed = self.pages.listings(index, [u for u, _ in present])
        need = len(self.urls) + len(present)
        if need > len(self.rows):
            size = max(need, int(len(self.rows) * _GROW))
            self.rows = np.resize(self.rows, size)
            self.host = np.resize(self.host, size)
            self.listed = np.resize(self.listed, (size, 2))
        for (url, _), rec, seen in zip(present, data, listed):
            row = self.index.get(url)
            if row is None:
                row = self.index[url] = len(self.urls)
                self.urls.append(url)
                self.host[row] = self._host_id(url)
            self.rows[row] = rec
            self.listed[row] = seen if seen is not None else (0.0, 0.0)
        return len(present)

    def load(self) -> int:
        """Read every record of the crawl (the dirty sets are emptied first)."""
        pipe = self.pages.client.pipeline(transaction=False)
        for shard in self.layout.all_shards:
            pipe.delete(shard.dirty)
        pipe.execute()
        self.urls, self.index = [], {}
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
        return len(self.urls)

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
