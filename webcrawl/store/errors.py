"""Exceptions of the body store."""

from __future__ import annotations

from webcrawl.store.records import Pointer


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
    """Another writer holds the store folder; one writer per folder keeps segments consistent."""
