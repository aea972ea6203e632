"""Change events: the contract a team acts on, and how one is made from what the crawl recorded.

An event is one JSON object with exactly the fields of :data:`EVENT_FIELDS` (docs/events.md):

| field | value |
| --- | --- |
| ``event_id`` | unique and stable: the same event read twice has the same id |
| ``kind`` | ``new``, ``changed``, ``removed``, ``moved`` or ``restored`` |
| ``site``, ``page_type``, ``url``, ``canonical_url`` | where; ``url`` as fetched (for ``moved``: the old URL) |
| ``detected_at`` | the detecting fetch's time, seconds since the epoch |
| ``previous_fetch_at`` | the time of the fetch the previous record came from; ``None`` for ``new`` |
| ``record`` | the current record (volatile fields included); ``None`` for ``removed`` |
| ``previous`` | the previous record; ``None`` for ``new`` (and when the crawl never stored it) |
| ``changed_fields`` | ``{field: {"previous": v, "current": v}}`` for every non-volatile field that differs |
| ``moved_to`` | the new URL for ``moved``, else ``None`` |
| ``status`` | the HTTP status of the detecting fetch |

The crawl state records each event as a flat entry of short keys (``webcrawl/state/lua2/lifecycle.lua``
lists them); :func:`event_from_entry` turns one into the event, for the crawl's own feed and for
every reader alike, so both carry the same objects. Records are kept as compact JSON
(:func:`encode_record`). Pure: no Scrapy, no Redis.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from webcrawl.change.record import normalise

__all__ = ["EVENT_FIELDS", "KINDS", "changed_fields", "decode_record", "encode_record",
           "event_from_entry", "event_id"]

EVENT_FIELDS = ("event_id", "kind", "site", "page_type", "url", "canonical_url", "detected_at",
                "previous_fetch_at", "record", "previous", "changed_fields", "moved_to", "status")
KINDS = ("new", "changed", "removed", "moved", "restored")


def encode_record(record: Mapping[str, Any]) -> str:
    """A record as the crawl state keeps it: compact JSON, keys sorted (values as extracted)."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def decode_record(text: str | bytes | None) -> dict[str, Any] | None:
    """The record of :func:`encode_record`'s text; ``None`` for an empty or missing one."""
    if not text:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def changed_fields(previous: Mapping[str, Any] | None, current: Mapping[str, Any] | None,
                   volatile: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """Every non-volatile field whose value differs, as the record hash compares them (the
    canonical form of :func:`webcrawl.change.record.normalise`: a whitespace-only difference is
    none); empty when either side is missing."""
    if previous is None or current is None:
        return {}
    skip = frozenset(volatile)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(previous) | set(current)):
        if name in skip:
            continue
        before, after = previous.get(name), current.get(name)
        if normalise(before) != normalise(after):
            out[name] = {"previous": before, "current": after}
    return out


def event_id(crawl: str, shard: int, entry_id: str) -> str:
    """The id of the event kept as entry ``entry_id`` of shard ``shard``'s record of ``crawl``:
    24 hex digits, the same wherever and however often it is read."""
    text = f"{crawl}\0{shard}\0{entry_id}".encode("utf-8", "surrogateescape")
    return hashlib.blake2b(text, digest_size=12).hexdigest()


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return "" if value is None else str(value)


def _time(value: Any) -> float | None:
    text = _text(value)
    return float(text) if text else None


def event_from_entry(entry: Mapping[Any, Any], identifier: str) -> dict[str, Any]:
    """The event (:data:`EVENT_FIELDS`, in order) of one recorded entry (short keys, str or bytes
    keys and values) whose id is ``identifier``."""
    fields = {_text(k): v for k, v in entry.items()}
    record = decode_record(fields.get("r"))
    previous = decode_record(fields.get("p"))
    kind = _text(fields.get("k"))
    volatile = [v for v in _text(fields.get("v")).split(",") if v]
    status = _text(fields.get("h"))
    return {
        "event_id": identifier,
        "kind": kind,
        "site": _text(fields.get("s")) or None,
        "page_type": _text(fields.get("t")) or None,
        "url": _text(fields.get("u")),
        "canonical_url": _text(fields.get("c")) or _text(fields.get("u")),  # "": the same
        "detected_at": _time(fields.get("d")),
        "previous_fetch_at": None if kind == "new" else _time(fields.get("f")),
        "record": None if kind == "removed" else record,
        "previous": None if kind == "new" else previous,
        "changed_fields": changed_fields(previous, record, volatile),
        "moved_to": (_text(fields.get("m")) or None) if kind == "moved" else None,
        "status": int(status) if status.isdigit() else None,
    }
