"""The packed page record: one fixed-size binary value per known page (``pages`` hash of its
host's shard), read and written by the Lua scripts and by Python alike.

The layout is declared once, in :data:`FIELDS`; :data:`LUA` is the Lua code the scripts use to
read and write it (with the ``struct`` library Redis scripting ships), generated from the same
list as Python's format and numpy's dtypes, so the sides cannot drift apart. Fields are stored
as small as their use allows (:data:`FIELDS` says how: 165 bytes a record; 156 before ``state`` and ``body8`` were
added, a layout still read) and read back as
wider types; a record shorter than :data:`SIZE` was written by another layout and is refused
with a message saying so.

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

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from webcrawl.revisit.history import BIN_BASE_SECONDS, BINS_PER_DOUBLING, NBINS, HistoryTable, PageHistory

__all__ = ["ALIVE", "DTYPE", "FIELDS", "KIND_HUB", "KIND_PAGE", "KIND_SITEMAP", "LUA", "MOVED",
           "OLD_SIZE", "PACKED_DTYPE", "REMOVED", "SIZE", "SLOTS", "SUSPECT", "Record",
           "history_table", "pack", "unpack", "unpack_many"]

SLOTS = 4
EMPTY_BIN = 255
KIND_PAGE, KIND_SITEMAP, KIND_HUB = 0, 1, 2
#: A page's place in its lifecycle (``state``): answering, answered 404/410 once (a confirmation
#: fetch is due), removed (confirmed gone: probed rarely), moved (retired: a 301/308 led to the
#: URL its history now lives under).
ALIVE, SUSPECT, REMOVED, MOVED = 0, 1, 2, 3
#: (name, encoding) in record order; ``b<i>``/``n<i>``/``s<i>`` are histogram slots. Encodings
#: (the bytes a record stores; Python, numpy and Lua all read them as the wider type after "->"):
#:
#: - ``t``: a time, whole milliseconds since the Unix epoch, signed 6 bytes (+-4,000 years)
#:   -> float64 seconds: the first sighting, the sitemap date and when it was read;
#: - ``d``: float64: the fetch times intervals are measured from (the model's intervals keep
#:   their microseconds, and times set from one fetch stay equal), ``due`` (never later than
#:   the time it was set to), and the model's exposure sums (``seconds``...: one small interval
#:   must still count after years of them);
#: - ``f``: float32 -> float64, where a relative precision of 6e-8 is ample: an interval, the
#:   sum of similar intervals in one histogram bin, the sum of a page's fetch costs;
#: - ``I``: uint32, ``C``: uint16 for counters nothing reads as a statistic (both saturate
#:   rather than wrap) -> uint32; ``H``: uint16 id; ``B``: uint8; ``8s``: 8 bytes.
FIELDS: tuple[tuple[str, str], ...] = (
    ("last_fetched", "d"), ("first_seen", "t"), ("last_change", "d"), ("due", "d"), ("iv", "f"),
    ("fetches", "C"), ("not_modified", "C"), ("visits", "I"), ("changes", "I"),
    ("exact_changes", "I"), ("seconds", "d"), ("unchanged_seconds", "d"), ("exact_seconds", "d"),
    *((name, letter) for i in range(SLOTS) for name, letter in ((f"b{i}", "B"), (f"n{i}", "I"),
                                                               (f"s{i}", "f"))),
    ("billed", "f"), ("billed_n", "I"), ("last_interval", "f"), ("last_changed", "B"),
    ("type", "H"), ("tier", "B"), ("kind", "B"), ("follow", "B"), ("lastmod", "t"),
    ("lastmod_read", "t"), ("last_tried", "d"), ("hash", "8s"),
    # Added in layout 3 (a record of the older, shorter layout reads with these at 0).
    ("state", "B"), ("body8", "8s"),
)
#: Fields a record of the previous layout (:data:`OLD_SIZE` bytes) lacks, read as zeros.
_ADDED = 2
_PY = {"t": "6s", "d": "d", "f": "f", "I": "I", "C": "H", "H": "H", "B": "B", "8s": "8s"}
_LUA_LETTER = {"t": "i6", "d": "d", "f": "f", "I": "I4", "C": "H", "H": "H", "B": "B", "8s": "c8"}
_CEILING = {"I": 2**32 - 1, "C": 2**16 - 1, "H": 2**16 - 1, "B": 2**8 - 1}
FORMAT = "<" + "".join(_PY[code] for _, code in FIELDS)
#: Bytes of a packed record.
SIZE = struct.calcsize(FORMAT)
#: Bytes of a record of the previous layout (before ``state`` and ``body8``): read, padded.
OLD_SIZE = struct.calcsize("<" + "".join(_PY[code] for _, code in FIELDS[:-_ADDED]))
_LUA_FORMAT = "<" + "".join(_LUA_LETTER[code] for _, code in FIELDS)


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
    #: The latest fetch of the page that landed no observation (an error answer, a redirect, a
    #: 304 handed on to its verification): a new interval counts from it or from
    #: ``last_fetched``, whichever is later.
    last_tried: float = 0.0
    hash: bytes = b"\0" * 8
    state: int = ALIVE
    #: The first 8 bytes of the BLAKE2b of the page's latest stored body (zeros: none).
    body8: bytes = b"\0" * 8

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


def _sized(raw: bytes) -> bytes:
    """``raw`` at :data:`SIZE` bytes: a record of the previous layout is padded with zeros."""
    if len(raw) == OLD_SIZE:
        return raw + b"\0" * (SIZE - OLD_SIZE)
    _check_size(raw)
    return raw


def _check_size(raw: bytes) -> None:
    if len(raw) < SIZE:
        raise ValueError(f"page record of {len(raw)} bytes, expected {SIZE}: written by another "
                         "version of webcrawl; clear the crawl (scrapy crawlstate <crawl> --clear)")


def _ms(seconds: float) -> bytes:
    # The same rounding as the Lua side (math.floor(x * 1000 + 0.5)): byte-identical records.
    return math.floor(seconds * 1000 + 0.5).to_bytes(6, "little", signed=True)


def unpack(raw: bytes) -> Record:
    raw = _sized(raw)
    values = {}
    for (name, code), value in zip(FIELDS, struct.unpack(FORMAT, raw[:SIZE])):
        values[name] = int.from_bytes(value, "little", signed=True) / 1000 if code == "t" else value
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
    out = []
    for name, code in FIELDS:
        value = values[name]
        if code == "t":
            value = _ms(value)
        elif code in _CEILING:
            value = min(max(int(value), 0), _CEILING[code])
        out.append(value)
    return struct.pack(FORMAT, *out)


_RECORD_FIELDS = frozenset(f.name for f in fields(Record))


def as_dict(record: Record) -> Mapping[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(Record)}


def _lua() -> str:
    names = [name for name, _ in FIELDS]
    codes = [code for _, code in FIELDS]
    default = ", ".join("'\\0\\0\\0\\0\\0\\0\\0\\0'" if l == "8s" else (str(EMPTY_BIN) if n.startswith("b") and n[1:].isdigit() else ("2" if n == "last_changed" else "0"))
                        for n, l in FIELDS)
    ceilings = ", ".join(str(_CEILING.get(code, 0)) for code in codes)
    return "\n".join([
        f"local REC_FORMAT, REC_SIZE, REC_OLD_SIZE = '{_LUA_FORMAT}', {SIZE}, {OLD_SIZE}",
        f"local REC_NAMES = {{{', '.join(repr(n) for n in names)}}}",
        f"local REC_TIME = {{{', '.join('true' if c == 't' else 'false' for c in codes)}}}",
        f"local REC_CEILING = {{{ceilings}}}",
        f"local REC_DEFAULT = {{{default}}}",
        f"local REC_SLOTS, REC_EMPTY_BIN = {SLOTS}, {EMPTY_BIN}",
        f"local KIND_PAGE, KIND_SITEMAP, KIND_HUB = {KIND_PAGE}, {KIND_SITEMAP}, {KIND_HUB}",
        f"local ALIVE, SUSPECT, REMOVED, MOVED = {ALIVE}, {SUSPECT}, {REMOVED}, {MOVED}",
        f"local BIN_BASE, BINS_PER_DOUBLING, NBINS = {BIN_BASE_SECONDS!r}, {BINS_PER_DOUBLING}, {NBINS}",
        "local function rec_read(raw)",
        "  local r = {}",
        "  if raw and #raw == REC_OLD_SIZE then raw = raw .. string.rep('\\0', REC_SIZE - REC_OLD_SIZE) end",
        "  if raw and #raw < REC_SIZE then",
        "    error('page record of ' .. #raw .. ' bytes, expected ' .. REC_SIZE .. ': written by '",
        "          .. 'another version of webcrawl; clear the crawl (scrapy crawlstate --clear)')",
        "  end",
        "  local values = raw and {struct.unpack(REC_FORMAT, raw)} or REC_DEFAULT",
        "  for i, name in ipairs(REC_NAMES) do",
        "    local v = values[i]",
        "    if REC_TIME[i] then v = v / 1000 end",
        "    r[name] = v",
        "  end",
        "  return r",
        "end",
        "local function rec_write(r)",
        "  local values = {}",
        "  for i, name in ipairs(REC_NAMES) do",
        "    local v = r[name]",
        "    if REC_TIME[i] then",
        "      v = math.floor(v * 1000 + 0.5)",
        "    elseif REC_CEILING[i] > 0 then",
        "      v = math.min(math.max(v, 0), REC_CEILING[i])",
        "    end",
        "    values[i] = v",
        "  end",
        "  return struct.pack(REC_FORMAT, unpack(values))",
        "end",
    ]) + "\n"


LUA = _lua()


#: What Python and numpy read each encoding as (the wider type; see :data:`FIELDS`).
_WIDE = {"t": "<f8", "d": "<f8", "f": "<f8", "I": "<u4", "C": "<u4", "H": "<u2", "B": "u1", "8s": "S8"}
_PACKED = {"t": ("u1", (6,)), "d": "<f8", "f": "<f4", "I": "<u4", "C": "<u2", "H": "<u2", "B": "u1",
           "8s": "S8"}
#: A record as the allocator's table holds it: a numpy structured dtype of the wide types.
DTYPE = np.dtype([(name, _WIDE[code]) for name, code in FIELDS])
#: The packed bytes as numpy reads them (times still raw milliseconds).
PACKED_DTYPE = np.dtype([(name, _PACKED[code]) for name, code in FIELDS])
assert PACKED_DTYPE.itemsize == SIZE


def _times(raw_ms: np.ndarray) -> np.ndarray:
    """Seconds of 6-byte little-endian signed milliseconds (an ``(n, 6)`` uint8 array)."""
    wide = np.zeros((len(raw_ms), 8), dtype=np.uint8)
    wide[:, :6] = raw_ms
    wide[:, 6:] = np.where(raw_ms[:, 5:6] >= 0x80, 0xFF, 0)[:, [0, 0]]  # sign extension
    return wide.view("<i8")[:, 0] / 1000.0


def unpack_many(raws: list[bytes]) -> np.ndarray:
    """Records as one structured array (``DTYPE``), in order."""
    out = np.zeros(len(raws), dtype=DTYPE)
    if not raws:
        return out
    packed = np.frombuffer(b"".join(_sized(r)[:SIZE] for r in raws), dtype=PACKED_DTYPE)
    for name, code in FIELDS:
        out[name] = _times(packed[name]) if code == "t" else packed[name]
    return out


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
