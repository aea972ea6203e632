"""File names in a writer folder, its writer lock, and the write and fsync helpers.

A writer folder (or the legacy ``bodies/`` itself, :mod:`webcrawl.store.layout`) holds ``<id>.seg``
segments (ids count up from 0, zero-padded so a listing sorts), ``<id>.idx`` indexes of sealed
segments, and a ``LOCK`` file its writer holds.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from webcrawl.store.errors import StoreLockedError

SEGMENT_SUFFIX = ".seg"
INDEX_SUFFIX = ".idx"
LOCK_NAME = "LOCK"


def segment_path(folder: Path, segment: int) -> Path:
    return folder / f"{segment:08d}{SEGMENT_SUFFIX}"


def index_path(folder: Path, segment: int) -> Path:
    return folder / f"{segment:08d}{INDEX_SUFFIX}"


def segment_ids(folder: Path) -> list[int]:
    """Ids of the segments in ``folder``, ascending; other files are ignored."""
    if not folder.is_dir():
        return []
    ids = []
    for entry in os.scandir(folder):
        stem, dot, suffix = entry.name.partition(".")
        if dot and "." + suffix == SEGMENT_SUFFIX and stem.isdigit():
            ids.append(int(stem))
    return sorted(ids)


def fsync_dir(folder: Path) -> None:
    """Make a file creation or rename in ``folder`` survive a power loss."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, durable: bool) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old file or the new one, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def lock_folder(folder: Path) -> int:
    """Take the folder's writer lock; the returned fd holds it until closed (or the process dies)."""
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLockedError(
            f"body store {folder} has a writer already (LOCK is held); "
            "one writer per folder: open the site's store with SiteBodyStore, which gives each "
            "process a folder of its own"
        ) from None
    return fd


def write_all(fd: int, buffers: list[bytes]) -> None:
    """``writev`` until every byte is written (a regular file may take fewer, e.g. near a full disk)."""
    views = [memoryview(b) for b in buffers if b]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if written:
            views[0] = views[0][written:]
