"""A site's body store on one machine: the ``bodies/`` folder and what it holds.

::

    <data dir>/<site>/bodies/
        w0/, w1/, ...       writer folders: one writer process each (segments, indexes, LOCK)
        MACHINES            every machine name writers have put in pointers here, one a line
        00000000.seg, ...   the legacy layout (one writer, before writer folders): read, not written

The legacy folder is ``bodies/`` itself, named ``""`` where writer folders are named ``w<n>``.
``MACHINES`` lets a store keep reading its own pointers when the name it writes under changes
(a container's host name changes with each run): a pointer naming any listed machine is local.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from webcrawl.store import _files
from webcrawl.store.pointer import is_machine_name, is_writer_name

MACHINES_NAME = "MACHINES"
LEGACY = ""  # the writer name of the legacy folder


def bodies_folder(data_dir: str | os.PathLike[str], site: str) -> Path:
    """Where a site's bodies live: ``<data dir>/<site>/bodies``; ``ValueError`` for a site name
    that cannot name a folder."""
    if not site or "/" in site or site in (".", ".."):
        raise ValueError(f"site name {site!r} cannot name a folder")
    return Path(data_dir) / site / "bodies"


def machine_name(name: str | None = None) -> str:
    """``name`` checked for use in pointers, or this host's name when ``name`` is None.

    ``ValueError`` when it is empty, not printable, or holds ``/`` or whitespace.
    """
    name = socket.gethostname() if name is None else name
    if not is_machine_name(name):
        raise ValueError(f"machine name {name!r} must be non-empty and printable, without '/' or "
                         "whitespace: it goes into body-store pointers")
    return name


def writer_name(number: int) -> str:
    return f"w{number}"


def writer_path(folder: Path, writer: str) -> Path:
    """The folder of writer ``writer`` (``LEGACY``: ``folder`` itself); ``ValueError`` for a name
    that is not a writer's, so no pointer reaches outside ``folder``."""
    if writer == LEGACY:
        return folder
    if not is_writer_name(writer):
        raise ValueError(f"{writer!r} is not a writer folder name (w0, w1, ...)")
    return folder / writer


def writer_names(folder: Path) -> list[str]:
    """The writers of the store in ``folder``: ``LEGACY`` first, then ``w0``, ``w1``, ... by number."""
    try:
        entries = [e.name for e in os.scandir(folder) if e.is_dir() and is_writer_name(e.name)]
    except FileNotFoundError:
        return []
    return [LEGACY, *sorted(entries, key=lambda name: int(name[1:]))]


def known_machines(folder: Path) -> frozenset[str]:
    """The machine names listed in ``folder``'s ``MACHINES`` (none if it has no such file)."""
    try:
        text = (folder / MACHINES_NAME).read_text("utf-8", "replace")
    except FileNotFoundError:
        return frozenset()
    return frozenset(line for line in text.splitlines() if is_machine_name(line))


def register_machine(folder: Path, name: str, *, durable: bool) -> None:
    """List ``name`` in ``folder``'s ``MACHINES`` unless it is there; before any pointer naming it
    is handed out. Concurrent writers may both append it: a duplicate line is harmless."""
    if name in known_machines(folder):
        return
    path = folder / MACHINES_NAME
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _files.write_all(fd, [f"{name}\n".encode()])
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    if durable and created:
        _files.fsync_dir(folder)
