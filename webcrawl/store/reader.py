"""The reader of a site's body store on this machine: every writer folder, as one store.

Bodies by pointer, by URL (the newest, or the newest as of a time), and a site's latest set. A
reader never writes and takes no lock, so it runs beside live writers: a record still being
appended looks like a torn tail and is not seen. Its URL index spans the legacy folder and every
writer folder; it is built on first use and kept until :meth:`BodyReader.refresh`. Reading by
pointer needs no index, and finds a writer folder created after the reader was.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from webcrawl.store._folder_reader import FolderReader
from webcrawl.store.errors import ForeignPointerError, StoreError
from webcrawl.store.index import UrlIndex
from webcrawl.store.layout import LEGACY, known_machines, machine_name, writer_names, writer_path
from webcrawl.store.pointer import Pointer
from webcrawl.store.records import Damage, RecordMeta, StoredBody

logger = logging.getLogger(__name__)


class BodyReader:
    """Read the site store in ``folder`` (``<data dir>/<site>/bodies``): its legacy segments and
    every writer folder ``w0``, ``w1``, ... A folder that one :class:`BodyWriter` wrote into
    directly reads as a store whose only writer is the legacy one.

    ``machine`` is this machine's name (this host's name when None). A pointer naming it, or
    any name listed in the store's ``MACHINES``, is read here; one naming another machine raises
    :class:`ForeignPointerError`, which says which machine holds the body. A bare pointer means
    the legacy folder. Pointers handed out name this machine and the writer folder (bare for the
    legacy folder). Not thread-safe for :meth:`refresh`; reads are.
    """

    def __init__(self, folder: str | os.PathLike[str], *, machine: str | None = None) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise StoreError(f"body store {self.folder} does not exist")
        self.machine = machine_name(machine)
        self._folders: dict[str, FolderReader] = {}
        self._machines = known_machines(self.folder)
        self._index: UrlIndex | None = None
        self.damage: list[Damage] = []  # found while scanning segments that had no index

    def _folder(self, writer: str) -> FolderReader:
        reader = self._folders.get(writer)
        if reader is None:
            try:
                path = writer_path(self.folder, writer)
            except ValueError as exc:
                raise StoreError(f"body store {self.folder}: {exc}") from None
            if not path.is_dir():
                raise StoreError(f"body store {self.folder} has no writer folder {writer}")
            reader = self._folders[writer] = FolderReader(path, writer)
        return reader

    def _resolve(self, pointer: Pointer | str | bytes) -> tuple[FolderReader, Pointer]:
        if not isinstance(pointer, Pointer):
            pointer = Pointer.parse(pointer)
        if pointer.machine and pointer.machine != self.machine and pointer.machine not in self._machines:
            self._machines = known_machines(self.folder)  # a writer may have started under a new name
            if pointer.machine not in self._machines:
                raise ForeignPointerError(pointer, self.machine)
        return self._folder(pointer.writer), pointer

    def read(self, pointer: Pointer | str | bytes) -> StoredBody:
        """The record at ``pointer`` (a :class:`Pointer` or its text), checked (both CRCs, the
        decompressed length): ``CorruptRecordError`` when any check fails, a damaged body is never
        returned. ``ValueError`` for text that is not a pointer, ``ForeignPointerError`` for a
        pointer of another machine, ``StoreError`` for a folder or segment that is not here."""
        folder, pointer = self._resolve(pointer)
        return folder.read(pointer)

    def read_meta(self, pointer: Pointer | str | bytes) -> RecordMeta:
        """The header of the record at ``pointer`` (header CRC checked; the body is not read)."""
        folder, pointer = self._resolve(pointer)
        return folder.read_meta(pointer)

    @property
    def index(self) -> UrlIndex:
        """The URL index of every writer folder, built on first use."""
        if self._index is None:
            self._index = self._build_index()
        return self._index

    def _build_index(self) -> UrlIndex:
        index, self.damage = UrlIndex(), []
        for writer in writer_names(self.folder):
            entries, damage = self._folder(writer).entries()
            if writer != LEGACY:
                entries = [(key, t, p.located(self.machine, writer)) for key, t, p in entries]
            index.add_all(entries)
            self.damage.extend(damage)
        if self.damage:
            logger.warning("body store %s: %d corrupt ranges skipped; run verify", self.folder, len(self.damage))
        return index

    def refresh(self) -> None:
        """Forget the URL index, so the next lookup sees what writers (new ones too) added since."""
        self._index = None
        self._machines = known_machines(self.folder)

    def lookup(self, url: str, as_of: float | None = None) -> StoredBody | None:
        """The newest body of ``url`` fetched at or before ``as_of`` (any time if None), or None.

        Versions from all writer folders compete by fetch time. ``CorruptRecordError`` when the
        newest is damaged: an older one is not served in its place.
        """
        for pointer in self.index.versions(url, as_of):
            stored = self.read(pointer)
            if stored.url == url:  # else an 8-byte key collision: try the next candidate
                return stored
        return None

    def versions(self, url: str, as_of: float | None = None) -> list[RecordMeta]:
        """Headers of every stored version of ``url`` in every writer folder, newest first.

        Equal fetch times in one folder are ordered by position (the later write is newer); across
        folders, by the pointers' order (writers share no clock that could say which was first).
        """
        metas = (self.read_meta(p) for p in self.index.versions(url, as_of))
        return [m for m in metas if m.url == url]

    def latest(self, as_of: float | None = None) -> Iterator[Pointer]:
        """The pointer of each URL's newest version (at or before ``as_of``), in pointer order:
        folder by folder, each in file order."""
        return iter(sorted(self.index.latest(as_of)))

    def close(self) -> None:
        for folder in self._folders.values():
            folder.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
