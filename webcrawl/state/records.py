"""The packed page record: one fixed-size binary value per known page (``pages`` hash of its
host's shard), read and written by the Lua scripts and by Python alike.

The layout is declared once, in :data:`FIELDS`; :data:`LUA` is the Lua code the scripts use to
read and write it (Redis scripting ships a ``struct`` library with the same format letters as
Python's :mod:`struct`), generated from the same list, so the two sides cannot drift apart.

A record holds the page's sufficient statistics for the change-rate model
(:class:`webcrawl.revisit.PageHistory`, with the changed-interval histogram reduced to its
:data:`SLOTS` busiest bins), its schedule (``iv``: the revisit interval the allocator gave it;
``due``: when it is due next, 0 when not scheduled), what its own fetches cost (``billed`` over
``billed_n`` fetches: observations a listing or sitemap made are not fetches and cost nothing
here), its latest sitemap date, whether a known change (a listing's summary, a trusted sitemap date)
makes it due at once (``follow``: the allocator sets it where a fetch right after a change is
worth its cost), and the first 8 bytes of its record hash.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from webcrawl.revisit.history import BIN_BASE_SECONDS, BINS_PER_DOUBLING, NBINS, HistoryTable, PageHistory

__all__ = ["DTYPE", "FIELDS", "KIND_PAGE", "KIND_SITEMAP", "LUA", "SLOTS", "Record", "history_table", "pack", "unpack", "unpack_many"]

SLOTS = 4
EMPTY_BIN = 255
KIND_PAGE, KIND_SITEMAP = 0, 1
#: (name, struct letter) in record order; ``b<i>``/``n<i>``/``s<i>`` are histogram slots.
FIELDS: tuple[tuple[str, str], ...] = (
    ("last_fetched", "d"), ("first_seen", "d"), ("last_change", "d"), ("due", "d"), ("iv", "d"),
    ("fetches", "I"), ("not_modified", "I"), ("visits", "I"), ("changes", "I"),
    ("exact_changes", "I"), ("seconds", "d"), ("unchanged_seconds", "d"), ("exact_seconds", "d"),
    *((name, letter) for i in range(SLOTS) for name, letter in ((f"b{i}", "B"), (f"n{i}", "I"),
                                                               (f"s{i}", "d"))),
    ("billed", "d"), ("billed_n", "I"), ("last_interval", "d"), ("last_changed", "B"),
    ("type", "H"), ("tier", "B"), ("kind", "B"), ("follow", "B"), ("lastmod", "d"), ("lastmod_read", "d"),
    ("last304", "d"), ("hash", "8s"),
)
FORMAT = "<" + "".join(letter for _, letter in FIELDS)
SIZE = struct.calcsize(FORMAT)
_LUA_FORMAT = "<" + "".join("I4" if l == "I" else ("c8" if l == "8s" else l) for _, l in FIELDS)


@dataclass
class Record:
    """A page record as Python reads it (field meanings: the module docstring)."""

    last_fetched: float = 0.0
    first_seen: float = 0.0
    last_change: float = 0.0
    due: float = 0.0
    iv: float = 0.0
    fetches: int = 0
    not_modified: int = 0
    visits: int = 0
    changes: int = 0
    exact_changes: int = 0
    seconds: float = 0.0
    unchanged_seconds: float = 0.0
    exact_seconds: float = 0.0
    bins: list[tuple[int, int, float]] = field(default_factory=list)  # (bin, count, seconds)
    billed: float = 0.0
    billed_n: int = 0
    last_interval: float = 0.0
    last_changed: int = 2  # 0 unchanged, 1 changed, 2 no interval yet
    type: int = 0
    tier: int = 0
    kind: int = KIND_PAGE
    follow: int = 0  # 1: a known change (listing, trusted sitemap date) makes the page due at once
    lastmod: float = 0.0
    lastmod_read: float = 0.0
    last304: float = 0.0
    hash: bytes = b"\0" * 8

    @property
    def mean_cost(self) -> float | None:
        """Mean cost of the page's own fetches, ``None`` before the first."""
        return self.billed / self.billed_n if self.billed_n else None

    def page_history(self) -> PageHistory:
        """The revisit model's sufficient statistics of this page."""
        page = PageHistory(visits=self.visits, changes=self.changes, seconds=self.seconds,
                           unchanged_seconds=self.unchanged_seconds,
                           exact_changes=self.exact_changes, exact_seconds=self.exact_seconds)
        for b, n, s in self.bins:
            page.changed_counts[b] += n
            page.changed_seconds[b] += s
        return page


def unpack(raw: bytes) -> Record:
    values = dict(zip((name for name, _ in FIELDS), struct.unpack(FORMAT, raw[:SIZE])))
    bins = [(values.pop(f"b{i}"), values.pop(f"n{i}"), values.pop(f"s{i}")) for i in range(SLOTS)]
    record = Record(**{k: v for k, v in values.items() if k in _RECORD_FIELDS})
    record.bins = [(b, n, s) for b, n, s in bins if b != EMPTY_BIN]
    return record


def pack(record: Record) -> bytes:
    values: dict[str, Any] = {f.name: getattr(record, f.name) for f in fields(Record)}
    bins = list(values.pop("bins"))[:SLOTS]
    bins += [(EMPTY_BIN, 0, 0.0)] * (SLOTS - len(bins))
    for i, (b, n, s) in enumerate(bins):
        values[f"b{i}"], values[f"n{i}"], values[f"s{i}"] = b, n, s
    return struct.pack(FORMAT, *(values[name] for name, _ in FIELDS))


_RECORD_FIELDS = frozenset(f.name for f in fields(Record))


def as_dict(record: Record) -> Mapping[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(Record)}


def _lua() -> str:
    names = [name for name, _ in FIELDS]
    default = ", ".join("'\\0\\0\\0\\0\\0\\0\\0\\0'" if l == "8s" else (str(EMPTY_BIN) if n.startswith("b") and n[1:].isdigit() else ("2" if n == "last_changed" else "0"))
                        for n, l in FIELDS)
    return "\n".join([
        f"local REC_FORMAT = '{_LUA_FORMAT}'",
        f"local REC_NAMES = {{{', '.join(repr(n) for n in names)}}}",
        f"local REC_DEFAULT = {{{default}}}",
        f"local REC_SLOTS, REC_EMPTY_BIN = {SLOTS}, {EMPTY_BIN}",
        f"local BIN_BASE, BINS_PER_DOUBLING, NBINS = {BIN_BASE_SECONDS!r}, {BINS_PER_DOUBLING}, {NBINS}",
        "local function rec_read(raw)",
        "  local r = {}",
        "  local values = raw and {struct.unpack(REC_FORMAT, raw)} or REC_DEFAULT",
        "  for i, name in ipairs(REC_NAMES) do r[name] = values[i] end",
        "  return r",
        "end",
        "local function rec_write(r)",
        "  local values = {}",
        "  for i, name in ipairs(REC_NAMES) do values[i] = r[name] end",
        "  return struct.pack(REC_FORMAT, unpack(values))",
        "end",
    ]) + "\n"


LUA = _lua()


_NUMPY_LETTERS = {"d": "<f8", "I": "<u4", "B": "u1", "H": "<u2", "8s": "S8"}
#: The record layout as a numpy structured dtype (packed, little-endian: the same bytes).
DTYPE = np.dtype([(name, _NUMPY_LETTERS[letter]) for name, letter in FIELDS])
assert DTYPE.itemsize == SIZE


def unpack_many(raws: list[bytes]) -> np.ndarray:
    """Records as one structured array (``DTYPE``), in order."""
    if not raws:
        return np.zeros(0, dtype=DTYPE)
    return np.frombuffer(b"".join(r[:SIZE] for r in raws), dtype=DTYPE).copy()


def history_table(rows: np.ndarray) -> HistoryTable:
    """The revisit model's statistics table of records (``DTYPE`` rows)."""
    n = len(rows)
    table = HistoryTable(n)
    for name in ("visits", "changes", "exact_changes"):
        setattr(table, name, rows[name].astype(np.int64))
    for name in ("seconds", "unchanged_seconds", "exact_seconds"):
        setattr(table, name, rows[name].astype(float))
    for i in range(SLOTS):
        b = rows[f"b{i}"].astype(np.intp)
        used = b != EMPTY_BIN
        idx = np.flatnonzero(used)
        np.add.at(table.changed_counts, (idx, b[used]), rows[f"n{i}"][used].astype(np.int64))
        np.add.at(table.changed_seconds, (idx, b[used]), rows[f"s{i}"][used].astype(float))
    return table
