"""Pointers: where one stored body is, in the text form change events, checks and the database keep.

Two text forms, both read by :meth:`Pointer.parse`:

- ``"<machine>/<writer>/<segment>:<offset>:<length>"``, e.g. ``"crawl-1/w0/3:1048576:21877"``:
  what :class:`~webcrawl.store.SiteBodyStore` hands out. The machine is the one whose store holds
  the body (a crawl may span several), the writer is the writer folder in that store's
  ``bodies/`` (``w0``, ``w1``, ...), then the record's place in that folder.
- ``"<segment>:<offset>:<length>"``: a *bare* pointer, relative to one folder. What
  :class:`~webcrawl.store.BodyWriter` hands out, and what stores written before writer folders
  existed keep in their page histories: there it means the legacy folder (segments directly in
  ``bodies/``) on this machine.

The names a pointer carries are checked here, once: a machine name is printable, not empty,
without ``/`` or whitespace; a writer name is ``w``
and a number without leading zeros, so a pointer can never name a path outside ``bodies/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_WRITER_NAME = re.compile(r"w(?:0|[1-9][0-9]*)")
_MACHINE_NAME = re.compile(r"[^\s/]+")
_SYNTAX = "expected 'machine/writer/segment:offset:length' or 'segment:offset:length'"


def is_machine_name(name: str) -> bool:
    """Whether ``name`` can name a machine in a pointer."""
    return bool(_MACHINE_NAME.fullmatch(name)) and name.isprintable()


def is_writer_name(name: str) -> bool:
    """Whether ``name`` is a writer folder's name (``w0``, ``w1``, ...)."""
    return bool(_WRITER_NAME.fullmatch(name))


@dataclass(frozen=True, slots=True, order=True)
class Pointer:
    """Where one record lives: machine and writer folder (both empty for a bare pointer), segment
    id, byte offset in the segment, whole record length in bytes.

    ``str()`` gives the text form (see the module docstring), :meth:`parse` reads it back.
    Pointers order by machine, writer, then position: within one writer folder, write order.
    Construction checks only that machine and writer are both set or both empty; the names
    themselves are checked where they enter (:meth:`parse`, the store that hands them out).
    """

    machine: str = field(default="", kw_only=True)
    writer: str = field(default="", kw_only=True)
    segment: int
    offset: int
    length: int

    def __post_init__(self) -> None:
        if bool(self.machine) != bool(self.writer):
            raise ValueError(f"body-store pointer needs both a machine and a writer, or neither: {self!r}")

    @property
    def is_bare(self) -> bool:
        """True when the pointer is relative to one folder (no machine, no writer)."""
        return not self.writer

    def located(self, machine: str, writer: str) -> Pointer:
        """This position in writer folder ``writer`` of ``machine``'s store."""
        return Pointer(self.segment, self.offset, self.length, machine=machine, writer=writer)

    def bare(self) -> Pointer:
        """This position without machine and writer: relative to its folder."""
        return Pointer(self.segment, self.offset, self.length) if self.writer else self

    def __str__(self) -> str:
        position = f"{self.segment}:{self.offset}:{self.length}"
        return f"{self.machine}/{self.writer}/{position}" if self.writer else position

    @classmethod
    def parse(cls, text: str | bytes) -> Pointer:
        """The inverse of ``str()``; ``ValueError`` naming the text when it is not a pointer."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        *location, position = text.split("/")
        machine, writer = location if len(location) == 2 else ("", "")
        if location and (len(location) != 2 or not is_machine_name(machine) or not is_writer_name(writer)):
            raise ValueError(f"not a body-store pointer: {text!r} ({_SYNTAX}; a machine name has no "
                             "whitespace, a writer is w0, w1, ...)")
        try:
            segment, offset, length = (int(p) for p in position.split(":"))
        except ValueError:
            raise ValueError(f"not a body-store pointer: {text!r} ({_SYNTAX})") from None
        if segment < 0 or offset < 0 or length <= 0:
            raise ValueError(f"not a body-store pointer: {text!r} (negative or empty)")
        return cls(segment, offset, length, machine=machine, writer=writer)
