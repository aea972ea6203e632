"""Walk a segment record by record: whole records, damaged ranges, and a torn tail.

The rules (docs/store.md, "Recovery"):

- a record whose header CRC holds and which ends inside the file is whole; if its payload CRC
  fails it is *corrupt*: reported, stepped over (its length is trusted), never served;
- a record whose header CRC holds but which runs past the end of the file is a *torn tail*;
- bytes where no valid header starts are searched forward for the next magic with a valid header;
  the range up to it is *corrupt*; if none follows, the range is a torn tail.

A scan only reads; cutting the tail is the writer's job (:mod:`webcrawl.store.segment`).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from webcrawl.store._format import MAGIC, Head, decode_body, meta_of, parse_head, payload_ok
from webcrawl.store.pointer import Pointer
from webcrawl.store.records import Damage, RecordMeta


@dataclass(slots=True)
class ScanResult:
    """One segment's scan. ``good_end`` is where the torn tail (``torn_bytes`` long) starts.

    ``rotten`` holds the records among ``damage`` whose header is intact: their URL is known, so
    an index can keep them and a lookup fails loudly instead of serving an older version.
    """

    segment: int
    size: int
    records: list[RecordMeta] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    rotten: list[RecordMeta] = field(default_factory=list)
    good_end: int = 0

    def index_entries(self) -> list[RecordMeta]:
        """What an index of this segment holds: whole records and rotten ones, in file order."""
        return sorted(self.records + self.rotten, key=lambda m: m.pointer)

    @property
    def torn_bytes(self) -> int:
        return self.size - self.good_end


def _resync(mm: mmap.mmap, view: memoryview, start: int, size: int) -> int | None:
    """The next offset at or after ``start`` where a record with a valid header begins."""
    at = mm.find(MAGIC, start)
    while at != -1:
        if isinstance(parse_head(view, at, size), Head):
            return at
        at = mm.find(MAGIC, at + 1)
    return None


def scan_segment(path: Path, segment: int, *, decompress: bool = False) -> ScanResult:
    """Scan ``path`` as segment ``segment``, checking both CRCs of every record.

    With ``decompress`` each payload is also decompressed and its length checked (what
    :func:`webcrawl.store.verify` does; recovery and index building skip it: the CRC already
    proves the bytes are the ones written).
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        result = ScanResult(segment, size)
        if size == 0:
            return result
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                _walk(mm, view, result, decompress)
            finally:
                view.release()
    return result


def _walk(mm: mmap.mmap, view: memoryview, result: ScanResult, decompress: bool) -> None:
    size, segment, at = result.size, result.segment, 0
    while at < size:
        head = parse_head(view, at, size)
        if isinstance(head, Head):
            end = at + head.record_length
            if end > size:
                break  # header whole, record not: the write was cut
            reason = ""
            if not payload_ok(view, at, head):
                reason = "payload checksum mismatch"
            elif decompress:
                p0 = at + head.payload_start
                try:
                    decode_body(view[p0 : p0 + head.payload_length], head)
                except ValueError as exc:
                    reason = str(exc)
            meta = meta_of(head, Pointer(segment, at, head.record_length))
            if reason:
                result.damage.append(Damage(segment, at, head.record_length, reason))
                result.rotten.append(meta)
            else:
                result.records.append(meta)
            at = result.good_end = end
            continue
        following = _resync(mm, view, at + 1, size)
        if following is None:
            break  # nothing valid after: a cut (or zero-filled) tail
        result.damage.append(Damage(segment, at, following - at, head))
        at = result.good_end = following
