"""Reading one writer folder: records by position, and the entries of its URL index.

Never writes, takes no lock: a record a writer is still appending looks like a torn tail and is
not seen. :class:`~webcrawl.store.BodyReader` holds one of these per writer folder of a site.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from pathlib import Path

from webcrawl.store import _files
from webcrawl.store._format import FIXED, Head, decode_body, meta_of, parse_head, payload_ok
from webcrawl.store._scan import scan_segment
from webcrawl.store.errors import CorruptRecordError, StoreError
from webcrawl.store.index import Entry, entry_of, load_index
from webcrawl.store.pointer import Pointer
from webcrawl.store.records import Damage, RecordMeta, StoredBody

_OPEN_SEGMENTS = 32  # file descriptors kept open; a large store has more segments than the fd limit


class FolderReader:
    """Read the segments in ``folder``, the folder of writer ``writer`` (``""``: legacy).

    Only a pointer's position is used; the pointer itself is echoed in what is returned or
    raised. Reads are thread-safe (``pread``).
    """

    def __init__(self, folder: Path, writer: str) -> None:
        self.folder = folder
        self.writer = writer
        self._fds: OrderedDict[int, int] = OrderedDict()

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

    def _path(self, pointer: Pointer) -> str:
        return str(_files.segment_path(self.folder, pointer.segment))

    def _open_checked(self, pointer: Pointer) -> int:
        fd = self._segment_fd(pointer.segment)
        size = os.fstat(fd).st_size
        if pointer.offset + pointer.length > size:  # checked first: a bogus length must not allocate
            raise CorruptRecordError(pointer, f"record runs past the segment's end ({size} bytes)", self._path(pointer))
        return fd

    def _fetch(self, pointer: Pointer) -> tuple[memoryview, Head]:
        fd = self._open_checked(pointer)
        data = memoryview(os.pread(fd, pointer.length, pointer.offset))
        if len(data) < pointer.length:
            raise CorruptRecordError(pointer, f"segment ends {len(data)} bytes into the record", self._path(pointer))
        head = parse_head(data, 0, len(data))
        if not isinstance(head, Head):
            raise CorruptRecordError(pointer, head, self._path(pointer))
        if head.record_length != pointer.length:
            raise CorruptRecordError(
                pointer, f"record is {head.record_length} bytes, pointer says otherwise", self._path(pointer)
            )
        return data, head

    def read(self, pointer: Pointer) -> StoredBody:
        """The record at ``pointer``, checked (both CRCs, decompressed length); else ``CorruptRecordError``."""
        data, head = self._fetch(pointer)
        if not payload_ok(data, 0, head):
            raise CorruptRecordError(pointer, "payload checksum mismatch", self._path(pointer))
        payload = data[head.payload_start : head.payload_start + head.payload_length]
        try:
            body = decode_body(payload, head)
        except ValueError as exc:
            raise CorruptRecordError(pointer, str(exc), self._path(pointer)) from None
        m = meta_of(head, pointer)
        return StoredBody(
            m.url, m.fetch_time, m.status, m.content_hash, m.content_type, m.headers, m.body_length, pointer, body
        )

    def read_meta(self, pointer: Pointer) -> RecordMeta:
        """The header of the record at ``pointer`` (header CRC checked; the body is not read)."""
        # Read the fixed part, then exactly the rest of the header: bodies can be megabytes.
        fd = self._open_checked(pointer)
        fixed = os.pread(fd, FIXED.size, pointer.offset)
        meta_len = sum(FIXED.unpack(fixed)[7:]) if len(fixed) == FIXED.size else 0
        rest = max(0, min(meta_len + 4, pointer.length - len(fixed)))
        data = fixed + os.pread(fd, rest, pointer.offset + len(fixed))
        head = parse_head(data, 0, len(data))
        if not isinstance(head, Head) or head.record_length != pointer.length:
            reason = head if isinstance(head, str) else "length mismatch"
            raise CorruptRecordError(pointer, reason, self._path(pointer))
        return meta_of(head, pointer)

    def entries(self) -> tuple[list[Entry], list[Damage]]:
        """The URL index entries of every segment, with bare pointers (sidecars of sealed
        segments, a scan of any segment without a valid one), and the damage those scans found."""
        entries: list[Entry] = []
        damage: list[Damage] = []
        for segment in _files.segment_ids(self.folder):
            path = _files.segment_path(self.folder, segment)
            indexed = load_index(_files.index_path(self.folder, segment), segment, path.stat().st_size)
            if indexed is None:
                scan = scan_segment(path, segment)
                damage.extend(dataclasses.replace(d, writer=self.writer) for d in scan.damage)
                indexed = [entry_of(r) for r in scan.index_entries()]
            entries.extend(indexed)
        return entries, damage

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])
