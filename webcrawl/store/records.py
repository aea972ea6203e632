"""The values the body store hands out besides pointers: record metadata, stored bodies, damage, reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from webcrawl.store.pointer import Pointer


@dataclass(frozen=True, slots=True)
class RecordMeta:
    """Everything a record says about its body, without the body itself."""

    url: str
    fetch_time: float
    status: int
    content_hash: str
    content_type: str
    headers: tuple[tuple[str, str], ...]
    body_length: int
    pointer: Pointer


@dataclass(frozen=True, slots=True)
class StoredBody(RecordMeta):
    """A record read back whole: its metadata and the uncompressed body."""

    body: bytes


@dataclass(frozen=True, slots=True)
class Damage:
    """A byte range of a segment that holds no servable record, and why.

    ``writer`` names the writer folder holding the segment (empty: the legacy folder, or the one
    folder a :class:`~webcrawl.store.BodyWriter` was given).
    """

    segment: int
    offset: int
    length: int
    reason: str
    writer: str = ""

    def __str__(self) -> str:
        where = f"{self.writer}/" if self.writer else ""
        return f"{where}segment {self.segment} bytes {self.offset}..{self.offset + self.length}: {self.reason}"


@dataclass(slots=True)
class VerifyReport:
    """What a scan of a store found.

    ``torn_bytes`` counts bytes after the last whole record of the active segment: cut by a writer's
    recovery, or (from :func:`verify`, which never writes) the bytes a writer would cut.
    ``corrupt`` lists damaged records and ranges that were skipped and are never served.
    """

    segments: int = 0
    records_ok: int = 0
    bytes_scanned: int = 0
    torn_bytes: int = 0
    corrupt: list[Damage] = field(default_factory=list)
    index_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is corrupt and no index disagrees with its segment (a cut tail is fine)."""
        return not self.corrupt and not self.index_errors

    def merge(self, other: VerifyReport) -> None:
        self.segments += other.segments
        self.records_ok += other.records_ok
        self.bytes_scanned += other.bytes_scanned
        self.torn_bytes += other.torn_bytes
        self.corrupt.extend(other.corrupt)
        self.index_errors.extend(other.index_errors)
