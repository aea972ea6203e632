"""What the downloader saw of a fetch, kept until the item made from it reaches the pipelines.

Item pipelines see items, not responses; the conditional-request middleware sees responses, not
items. A :class:`FetchNote` carries what the pipelines need from the response (its size on the
wire, whether our validators went with the request, whether it verifies a 304) across that gap,
keyed by the response URL (the item's ``url``). Both ends run in the same process for the same
response, so an in-memory map suffices. Notes whose item never comes (errors, pages the spider
makes no item of, redirects) are evicted oldest first once ``capacity`` is reached.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["FetchNote", "FetchNotes"]


@dataclass(frozen=True)
class FetchNote:
    """``wire_bytes``: bytes on the wire for this page, a verified 304 before it included;
    ``conditional``: our validators went with the request; ``verifies_304``: the fetch re-checks a
    304 without validators; ``host``: the request's host."""

    wire_bytes: int
    host: str
    conditional: bool = False
    verifies_304: bool = False


class FetchNotes:
    """A bounded map of response URL -> :class:`FetchNote` (not thread-safe: the reactor's)."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError(f"FetchNotes capacity={capacity!r}: expected >= 1")
        self.capacity = capacity
        self.evicted = 0
        self._notes: OrderedDict[str, FetchNote] = OrderedDict()

    def put(self, url: str, note: FetchNote) -> None:
        self._notes.pop(url, None)
        self._notes[url] = note
        while len(self._notes) > self.capacity:
            self._notes.popitem(last=False)
            self.evicted += 1

    def pop(self, url: str) -> FetchNote | None:
        return self._notes.pop(url, None)

    def __len__(self) -> int:
        return len(self._notes)
