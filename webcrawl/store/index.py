"""The URL index: a sidecar file per sealed segment, and the in-memory map built from them.

Why this shape: a sealed segment never changes, so its index is written once, atomically
(temporary file, fsync, rename), after the segment itself is fsynced; it is either absent or whole
and matches its segment, never half-written. The active segment has no sidecar: it is scanned at
open (the writer must scan its tail anyway, and it is at most one rotation size), so no index write
can ever disagree with what a crash left in it. An absent or damaged sidecar is rebuilt by scanning.

A sidecar is, little-endian: ``b"\\x89WCI"``, version u8, 3 pad, count u32, segment size u64 (the
bytes it covers; a segment of any other size makes it stale), then ``count`` entries of
url key u64, fetch time f64, offset u32, length u32 (24 bytes), then a CRC-32 of all before it.
The url key is the first 8 bytes of BLAKE2b of the URL: lookups confirm the URL in the record's
own header, so a key collision costs a read, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from webcrawl.store.pointer import Pointer
from webcrawl.store.records import RecordMeta

MAGIC = b"\x89WCI"
VERSION = 1
HEAD = struct.Struct("<4sB3xIQ")
ENTRY = struct.Struct("<QdII")
CRC = struct.Struct("<I")

Entry = tuple[int, float, Pointer]  # url key, fetch time, pointer


def url_key(url: str) -> int:
    return int.from_bytes(hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest(), "little")


def entry_of(record: RecordMeta) -> Entry:
    return url_key(record.url), record.fetch_time, record.pointer


def encode_index(entries: Iterable[Entry], covered: int) -> bytes:
    """The sidecar bytes for a segment of ``covered`` bytes holding ``entries``."""
    body = b"".join(ENTRY.pack(key, t, p.offset, p.length) for key, t, p in entries)
    data = HEAD.pack(MAGIC, VERSION, len(body) // ENTRY.size, covered) + body
    return data + CRC.pack(zlib.crc32(data))


def decode_index(data: bytes, segment: int, segment_size: int) -> list[Entry] | None:
    """The entries of a sidecar, or None when it is damaged or does not cover ``segment_size``."""
    if len(data) < HEAD.size + CRC.size:
        return None
    magic, version, count, covered = HEAD.unpack_from(data)
    if magic != MAGIC or version != VERSION or covered != segment_size:
        return None
    end = HEAD.size + count * ENTRY.size
    if len(data) != end + CRC.size or zlib.crc32(data[:end]) != CRC.unpack_from(data, end)[0]:
        return None
    return [
        (key, fetch_time, Pointer(segment, offset, length))
        for key, fetch_time, offset, length in ENTRY.iter_unpack(data[HEAD.size : end])
    ]


def load_index(path: Path, segment: int, segment_size: int) -> list[Entry] | None:
    """Read and check a sidecar; None if it is missing, damaged or stale."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_index(data, segment, segment_size)


class UrlIndex:
    """URL key -> versions (fetch time, pointer), for lookups by URL and a site's latest bodies."""

    def __init__(self) -> None:
        self._versions: dict[int, list[tuple[float, Pointer]]] = {}
        self.records = 0

    def add(self, key: int, fetch_time: float, pointer: Pointer) -> None:
        self._versions.setdefault(key, []).append((fetch_time, pointer))
        self.records += 1

    def add_all(self, entries: Iterable[Entry]) -> None:
        for key, fetch_time, pointer in entries:
            self.add(key, fetch_time, pointer)

    def versions(self, url: str, as_of: float | None = None) -> list[Pointer]:
        """Pointers of records whose key matches ``url``, fetched at or before ``as_of``, newest first.

        Equal fetch times are ordered by position: the later write is the newer version.
        """
        found = self._versions.get(url_key(url), [])
        if as_of is not None:
            found = [v for v in found if v[0] <= as_of]
        return [pointer for _, pointer in sorted(found, reverse=True)]

    def latest(self, as_of: float | None = None) -> Iterator[Pointer]:
        """For each URL key, the pointer of its newest version at or before ``as_of``."""
        for found in self._versions.values():
            eligible = found if as_of is None else [v for v in found if v[0] <= as_of]
            if eligible:
                yield max(eligible)[1]

    def __len__(self) -> int:
        return len(self._versions)
