"""The reader: bodies by pointer, by URL (latest, or latest as of a time), and a site's latest set.

A reader never writes and takes no lock, so it can run beside a live writer: a record the writer
is still appending looks like a torn tail to it and is simply not seen. Its URL index is built on
first use (sidecars of sealed segments, a scan of any segment without one) and kept until
:meth:`BodyReader.refresh`; reading by pointer needs no index at all.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from webcrawl.store import _files
from webcrawl.store._format import FIXED, Head, decode_body, meta_of, parse_head, payload_ok
from webcrawl.store._scan import scan_segment
from webcrawl.store.errors import CorruptRecordError, StoreError
from webcrawl.store.index import UrlIndex, entry_of, load_index
from webcrawl.store.records import Damage, Pointer, RecordMeta, StoredBody

logger = logging.getLogger(__name__)

_OPEN_SEGMENTS = 32  # file descriptors kept open; a large store has more segments than the fd limit


class BodyReader:
    """Read the store in ``folder``. Not thread-safe for :meth:`refresh`; reads are (``pread``)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise StoreError(f"body store {self.folder} does not exist")
        self._fds: OrderedDict[int, int] = OrderedDict()
        self._index: UrlIndex | None = None
        self.damage: list[Damage] = []  # found while scanning segments that had no index

    def _segment_fd(self, segment: int) -> int:
        fd = self._fds.get(segment)
        if fd is not None:
            self._fds.move_to_end(segment)
            return fd
        try:
            fd = os.open(_files.segment_path(self.folder, segment), os.O_RDONLY)
        except FileNotFoundError:
            raise StoreError(f"body store {self.folder} has no segment {segment}") from None
        self._fds[segment] = fd
        if len(self._fds) > _OPEN_SEGMENTS:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def _open_checked(self, pointer: Pointer) -> int:
        fd = self._segment_fd(pointer.segment)
        size = os.fstat(fd).st_size
        if pointer.offset + pointer.length > size:  # checked first: a bogus length must not allocate
            path = str(_files.segment_path(self.folder, pointer.segment))
            raise CorruptRecordError(pointer, f"record runs past the segment's end ({size} bytes)", path)
        return fd

    def _fetch(self, pointer: Pointer) -> tuple[memoryview, Head]:
        fd = self._open_checked(pointer)
        path = str(_files.segment_path(self.folder, pointer.segment))
        data = memoryview(os.pread(fd, pointer.length, pointer.offset))
        if len(data) < pointer.length:
            raise CorruptRecordError(pointer, f"segment ends {len(data)} bytes into the record", path)
        head = parse_head(data, 0, len(data))
        if not isinstance(head, Head):
            raise CorruptRecordError(pointer, head, path)
        if head.record_length != pointer.length:
            raise CorruptRecordError(pointer, f"record is {head.record_length} bytes, pointer says otherwise", path)
        return data, head

    def read(self, pointer: Pointer | str) -> StoredBody:
        """The record at ``pointer``, checked (both CRCs, decompressed length).

        ``CorruptRecordError`` when any check fails: a damaged body is never returned.
        """
        if not isinstance(pointer, Pointer):
            pointer = Pointer.parse(pointer)
        data, head = self._fetch(pointer)
        path = str(_files.segment_path(self.folder, pointer.segment))
        if not payload_ok(data, 0, head):
            raise CorruptRecordError(pointer, "payload checksum mismatch", path)
        payload = data[head.payload_start : head.payload_start + head.payload_length]
        try:
            body = decode_body(payload, head)
        except ValueError as exc:
            raise CorruptRecordError(pointer, str(exc), path) from None
        m = meta_of(head, pointer)
        return StoredBody(
            m.url, m.fetch_time, m.status, m.content_hash, m.content_type, m.headers, m.body_length, pointer, body
        )

    def read_meta(self, pointer: Pointer | str) -> RecordMeta:
        """The header of the record at ``pointer`` (header CRC checked; the body is not read)."""
        if not isinstance(pointer, Pointer):
            pointer = Pointer.parse(pointer)
        # Read the fixed part, then exactly the rest of the header: bodies can be megabytes.
        fd = self._open_checked(pointer)
        fixed = os.pread(fd, FIXED.size, pointer.offset)
        meta_len = sum(FIXED.unpack(fixed)[7:]) if len(fixed) == FIXED.size else 0
        rest = max(0, min(meta_len + 4, pointer.length - len(fixed)))
        data = fixed + os.pread(fd, rest, pointer.offset + len(fixed))
        head = parse_head(data, 0, len(data))
        if not isinstance(head, Head) or head.record_length != pointer.length:
            path = str(_files.segment_path(self.folder, pointer.segment))
            raise CorruptRecordError(pointer, head if isinstance(head, str) else "length mismatch", path)
        return meta_of(head, pointer)

    @property
    def index(self) -> UrlIndex:
        """The URL index, built on first use."""
        if self._index is None:
            self._index = self._build_index()
        return self._index

    def _build_index(self) -> UrlIndex:
        index, self.damage = UrlIndex(), []
        for segment in _files.segment_ids(self.folder):
            path = _files.segment_path(self.folder, segment)
            entries = load_index(_files.index_path(self.folder, segment), segment, path.stat().st_size)
            if entries is None:
                scan = scan_segment(path, segment)
                self.damage.extend(scan.damage)
                entries = [entry_of(r) for r in scan.index_entries()]
            index.add_all(entries)
        if self.damage:
            logger.warning("body store %s: %d corrupt ranges skipped; run verify", self.folder, len(self.damage))
        return index

    def refresh(self) -> None:
        """Forget the URL index, so the next lookup sees what a writer added since."""
        self._index = None

    def lookup(self, url: str, as_of: float | None = None) -> StoredBody | None:
        """The newest body of ``url`` fetched at or before ``as_of`` (any time if None), or None.

        ``CorruptRecordError`` when that version is damaged: an older one is not served in its place.
        """
        for pointer in self.index.versions(url, as_of):
            stored = self.read(pointer)
            if stored.url == url:  # else an 8-byte key collision: try the next candidate
                return stored
        return None

    def versions(self, url: str, as_of: float | None = None) -> list[RecordMeta]:
        """Headers of every stored version of ``url``, newest first."""
        metas = (self.read_meta(p) for p in self.index.versions(url, as_of))
        return [m for m in metas if m.url == url]

    def latest(self, as_of: float | None = None) -> Iterator[Pointer]:
        """The pointer of each URL's newest version (at or before ``as_of``), in file order."""
        return iter(sorted(self.index.latest(as_of)))

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
