"""A process's writer in a site's body store: its own writer folder, claimed by lock.

Any number of processes on a machine write to one site's store at once, each in a writer folder
of its own (``bodies/w0``, ``w1``, ...). A new writer takes the first folder whose lock it can
get: the folders stay few, and a process restarted after a kill -9 takes the folder it left
(the lock died with it) and its open recovers the torn tail there. The pointers it hands out
name the machine and the folder, so a reader on this machine finds the body whichever process
wrote it, and a reader elsewhere knows which machine holds it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from webcrawl.store._format import Headers
from webcrawl.store.errors import StoreLockedError
from webcrawl.store.layout import bodies_folder, machine_name, register_machine, writer_name
from webcrawl.store.pointer import Pointer
from webcrawl.store.records import VerifyReport
from webcrawl.store.segment import DEFAULT_SEGMENT_BYTES, BodyWriter


class SiteBodyStore:
    """Append bodies to the site store in ``folder`` (``<data dir>/<site>/bodies``) from this process.

    Opening claims a writer folder (:attr:`writer`, at :attr:`writer_folder`) and recovers it
    (:attr:`recovery`); it never fails because another process writes: that one has another
    folder. ``machine`` is the name pointers carry (this host's name when None; ``ValueError``
    if it cannot go in a pointer); it is listed in ``MACHINES`` before the first append. The
    other arguments are :class:`~webcrawl.store.BodyWriter`'s. Thread-safe as that one is.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        machine: str | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: str = "batch",
        batch_records: int = 100,
        batch_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = Path(folder)
        self.machine = machine_name(machine)
        self.folder.mkdir(parents=True, exist_ok=True)
        register_machine(self.folder, self.machine, durable=fsync != "never")
        for number in itertools.count():
            self.writer = writer_name(number)
            try:
                self._writer = BodyWriter(
                    self.folder / self.writer, segment_bytes=segment_bytes, fsync=fsync,
                    batch_records=batch_records, batch_seconds=batch_seconds, clock=clock,
                )  # fmt: skip
                break
            except StoreLockedError:
                continue  # another process writes there

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        site: str,
        *,
        machine: str | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: str = "batch",
    ) -> Self:
        """The writer of ``site``'s store under ``data_dir`` (``ValueError`` for a site name that
        cannot name a folder); the options are the constructor's."""
        return cls(bodies_folder(data_dir, site), machine=machine, segment_bytes=segment_bytes, fsync=fsync)

    @property
    def writer_folder(self) -> Path:
        return self._writer.folder

    @property
    def recovery(self) -> VerifyReport:
        """What opening found in this writer's folder and cut (see :class:`BodyWriter`)."""
        return self._writer.recovery

    @property
    def records_written(self) -> int:
        return self._writer.records_written

    @property
    def body_bytes_written(self) -> int:
        """Uncompressed body bytes appended by this writer."""
        return self._writer.body_bytes_written

    @property
    def bytes_written(self) -> int:
        """Bytes appended on disk, framing included."""
        return self._writer.bytes_written

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
        """Store one body as :meth:`BodyWriter.append` does; the pointer names this machine and
        writer folder (``str()`` gives ``"<machine>/<writer>/<segment>:<offset>:<length>"``)."""
        pointer = self._writer.append(
            url, body, fetch_time=fetch_time, status=status, content_hash=content_hash,
            content_type=content_type, headers=headers,
        )  # fmt: skip
        return pointer.located(self.machine, self.writer)

    def sync(self) -> None:
        """fsync what was appended so far (whatever the policy)."""
        self._writer.sync()

    def close(self) -> None:
        """Sync (unless the policy is ``"never"``) and release the writer folder. Idempotent."""
        self._writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
