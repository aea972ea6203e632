"""Exceptions of the body store."""

from __future__ import annotations

from webcrawl.store.pointer import Pointer


class StoreError(Exception):
    """Base class of every body-store error."""


class CorruptRecordError(StoreError):
    """A record failed its checks (magic, lengths, checksums, decompression): it is never served.

    ``pointer`` says which record; ``reason`` says which check failed.
    """

    def __init__(self, pointer: Pointer, reason: str, path: str = "") -> None:
        self.pointer = pointer
        self.reason = reason
        where = f" in {path}" if path else ""
        super().__init__(f"corrupt body-store record {pointer}{where}: {reason}")


class StoreLockedError(StoreError):
    """Another writer holds the folder; one writer per folder keeps segments consistent.

    :class:`~webcrawl.store.SiteBodyStore` never raises it: it moves on to the next writer folder.
    """


class ForeignPointerError(StoreError):
    """The pointer names a body in another machine's store; only that machine can read it.

    ``pointer`` is the pointer, ``machine`` the machine holding the body, ``here`` this reader's.
    """

    def __init__(self, pointer: Pointer, here: str) -> None:
        self.pointer = pointer
        self.machine = pointer.machine
        self.here = here
        super().__init__(
            f"body {pointer} is stored on machine {pointer.machine!r}, not on this one ({here!r}): "
            f"read it on {pointer.machine}"
        )
