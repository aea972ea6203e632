"""The writer of one folder: appends framed, snappy-compressed bodies to rotating segment files.

One writer per folder (an exclusive ``flock`` on ``LOCK`` enforces it; readers take no lock). A
site's store gives each writing process a folder of its own: :mod:`webcrawl.store.sitestore`.
Opening a writer recovers the folder first: the active segment is scanned, a torn tail is cut,
corrupt records are logged and reported in :attr:`BodyWriter.recovery`; a sealed segment whose
index sidecar is missing (a crash between sealing and writing it) gets one rebuilt.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from webcrawl.store import _files
from webcrawl.store._format import Headers, encode
from webcrawl.store._scan import scan_segment
from webcrawl.store.errors import StoreError
from webcrawl.store.index import Entry, encode_index, entry_of, load_index, url_key
from webcrawl.store.pointer import Pointer
from webcrawl.store.records import Damage, VerifyReport

logger = logging.getLogger(__name__)

FSYNC_POLICIES = ("always", "batch", "never")
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024


class BodyWriter:
    """Append bodies to the segments in ``folder`` (a writer folder, ``<data dir>/<site>/bodies/w<n>``,
    as :class:`~webcrawl.store.SiteBodyStore` claims it; or any folder of one's own). Pointers are
    bare: relative to ``folder``.

    ``segment_bytes``: a segment is sealed and a new one started before a record would take it past
    this size (a record bigger than that gets a segment of its own). ``fsync``: ``"always"`` syncs
    each record before :meth:`append` returns; ``"batch"`` syncs once ``batch_records`` records or
    ``batch_seconds`` seconds (checked at each append, and at :meth:`sync` and :meth:`close`) have
    gone unsynced; ``"never"`` leaves it to the OS. A process kill loses nothing either way (the
    data is in the page cache); the policy bounds what a power loss can take.

    Thread-safe; the compression runs outside the lock.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: str = "batch",
        batch_records: int = 100,
        batch_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= segment_bytes <= 2**32:
            raise ValueError(f"body store: segment_bytes={segment_bytes!r} must be in 1..2**32")
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"body store: fsync={fsync!r} is not one of {', '.join(FSYNC_POLICIES)}")
        if batch_records < 1 or batch_seconds < 0:
            raise ValueError(
                f"body store: batch_records={batch_records!r} must be >= 1 and "
                f"batch_seconds={batch_seconds!r} >= 0"
            )
        self.folder = Path(folder)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.batch_records = batch_records
        self.batch_seconds = batch_seconds
        self._clock = clock
        self._mutex = threading.Lock()
        self.records_written = 0
        self.body_bytes_written = 0  # uncompressed
        self.bytes_written = 0  # on disk, framing included
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _files.lock_folder(self.folder)
        self._fd: int | None = None
        self._entries: list[Entry] = []
        self._size = 0
        self._unsynced = 0
        self._last_sync = clock()
        try:
            self.recovery = self._recover()
        except BaseException:
            if self._fd is not None:
                os.close(self._fd)
            os.close(self._lock_fd)
            raise

    def _recover(self) -> VerifyReport:
        report = VerifyReport()
        ids = _files.segment_ids(self.folder)
        for segment in ids:
            path = _files.segment_path(self.folder, segment)
            size = path.stat().st_size
            if load_index(_files.index_path(self.folder, segment), segment, size) is not None:
                continue  # sealed and indexed
            scan = scan_segment(path, segment)
            report.segments += 1
            report.records_ok += len(scan.records)
            report.bytes_scanned += scan.size
            report.corrupt.extend(scan.damage)
            for damage in scan.damage:
                logger.warning(
                    "body store %s: skipping corrupt bytes %d..%d of segment %d (%s)",
                    self.folder, damage.offset, damage.offset + damage.length, segment, damage.reason,
                )  # fmt: skip
            entries = [entry_of(r) for r in scan.index_entries()]
            if segment != ids[-1]:
                if scan.torn_bytes:
                    report.corrupt.append(
                        Damage(segment, scan.good_end, scan.torn_bytes, "sealed segment ends in a cut record")
                    )
                # Sealed before a crash took its sidecar: index what is there, leave the bytes alone.
                self._write_index(segment, entries, scan.size)
                continue
            if scan.torn_bytes:
                logger.warning(
                    "body store %s: cut a torn tail of %d bytes at offset %d of segment %d",
                    self.folder, scan.torn_bytes, scan.good_end, segment,
                )  # fmt: skip
                os.truncate(path, scan.good_end)
                report.torn_bytes += scan.torn_bytes
            # A sidecar that does not cover the last segment (only tampering or a power loss that
            # reordered writes can leave one) must not outlive it: the segment stays active.
            _files.index_path(self.folder, segment).unlink(missing_ok=True)
            self._segment, self._size, self._entries = segment, scan.good_end, entries
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            if scan.torn_bytes and self.fsync != "never":
                os.fsync(self._fd)
        if self._fd is None:
            self._segment = ids[-1] + 1 if ids else 0  # the next append creates it
        return report

    def _write_index(self, segment: int, entries: list[Entry], size: int) -> None:
        data = encode_index(entries, size)
        _files.write_atomically(_files.index_path(self.folder, segment), data, self.fsync != "never")

    @property
    def segment(self) -> int:
        """Id of the segment the next record goes to (unless it rotates)."""
        return self._segment

    def append(
        self,
        url: str,
        body: bytes,
        *,
        fetch_time: float,
        status: int = 200,
        content_hash: str = "",
        content_type: str = "",
        headers: Headers | None = None,
    ) -> Pointer:
        """Store one body; return where it is. Durable per the fsync policy once this returns.

        ``content_hash`` is the caller's (record or body hash); lower-case hex is stored as bytes.
        ``headers`` are (name, value) pairs or a mapping (values may be lists, as in Scrapy's
        ``Headers``), str or bytes; they are read back as (name, value) latin-1 string pairs.
        ``ValueError`` when a field cannot be framed (see docs/store.md); ``OSError`` from the disk,
        after the partial record has been cut again so the segment stays well formed.
        """
        head, payload, trailer = encode(url, body, fetch_time, status, content_hash, content_type, headers)
        length = len(head) + len(payload) + len(trailer)
        with self._mutex:
            if self._lock_fd < 0:
                raise StoreError(f"body store {self.folder}: append after close")
            if self._fd is None or (self._size and self._size + length > self.segment_bytes):
                self._rotate()
            assert self._fd is not None
            offset = self._size
            try:
                _files.write_all(self._fd, [head, payload, trailer])
            except BaseException:
                os.ftruncate(self._fd, offset)
                raise
            self._size += length
            pointer = Pointer(self._segment, offset, length)
            self._entries.append((url_key(url), fetch_time, pointer))
            self.records_written += 1
            self.body_bytes_written += len(body)
            self.bytes_written += length
            self._unsynced += 1
            if self.fsync == "always" or (
                self.fsync == "batch"
                and (
                    self._unsynced >= self.batch_records
                    or self._clock() - self._last_sync >= self.batch_seconds
                )
            ):
                self._sync_locked()
            return pointer

    def _rotate(self) -> None:
        if self._fd is not None:
            # Seal: the segment's bytes are durable before the sidecar that vouches for them.
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            self._write_index(self._segment, self._entries, self._size)
            self._segment += 1
        path = _files.segment_path(self.folder, self._segment)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        self._size, self._entries, self._unsynced = 0, [], 0
        if self.fsync != "never":
            _files.fsync_dir(self.folder)

    def _sync_locked(self) -> None:
        if self._fd is not None and self._unsynced:
            os.fdatasync(self._fd)
        self._unsynced = 0
        self._last_sync = self._clock()

    def sync(self) -> None:
        """fsync what was appended so far (whatever the policy)."""
        with self._mutex:
            self._sync_locked()

    def close(self) -> None:
        """Sync (unless the policy is ``"never"``) and release the folder. Idempotent."""
        with self._mutex:
            if self._lock_fd < 0:
                return
            if self._fd is not None:
                if self.fsync != "never":
                    self._sync_locked()
                os.close(self._fd)
                self._fd = None
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
