"""The values the body store hands out: pointers, record metadata, stored bodies, reports."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, order=True)
class Pointer:
    """Where one record lives: segment id, byte offset in it, whole record length in bytes.

    ``str(pointer)`` is a compact ``"segment:offset:length"`` form meant for a page history in
    Redis; :meth:`parse` turns it back. Pointers order by position, which is also write order.
    """

    segment: int
    offset: int
    length: int

    def __str__(self) -> str:
        return f"{self.segment}:{self.offset}:{self.length}"

    @classmethod
    def parse(cls, text: str | bytes) -> Pointer:
        """The inverse of ``str()``; ``ValueError`` naming the text when it is not a pointer."""
        if isinstance(text, bytes):
            text = text.decode("ascii", "replace")
        parts = text.split(":")
        try:
            segment, offset, length = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"not a body-store pointer: {text!r} (expected 'segment:offset:length')") from None
        if segment < 0 or offset < 0 or length <= 0:
            raise ValueError(f"not a body-store pointer: {text!r} (negative or empty)")
        return cls(segment, offset, length)


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
    """A byte range of a segment that holds no servable record, and why."""

    segment: int
    offset: int
    length: int
    reason: str


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
