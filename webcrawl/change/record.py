"""The record hash: did what we care about on a page change?

A page's record is the dict of its page type's fields as the spider extracted them. Its hash is a
128-bit BLAKE2b of the record's *canonical JSON*: only the hashed fields (volatile ones left out),
keys sorted, no insignificant whitespace, strings in Unicode NFC with runs of whitespace collapsed
to one space and the ends stripped. So two loads whose only differences are markup, layout,
whitespace or a volatile field hash alike, and any change in a hashed value changes the hash.

The value is stable across processes, machines and versions (a page history keeps it forever):
change the canonical form only together with :data:`RECORD_HASH_VERSION`.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["RECORD_HASH_VERSION", "canonical_json", "normalise", "record_hash"]

#: Bumped whenever the canonical form changes (a new version makes every page look changed once).
RECORD_HASH_VERSION = 1


def normalise(value: Any) -> Any:
    """The canonical form of one field value.

    Strings: NFC, whitespace runs collapsed, ends stripped. Mappings: keys as strings, values
    normalised. Lists and tuples: element by element (order kept: it is part of the data).
    Booleans, integers, ``None`` stay; finite floats stay (``1.0`` and ``1`` differ on purpose:
    a spider that changes types has changed its output). Bytes are decoded as UTF-8 with
    replacement; anything else becomes its ``str()``.
    """
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFC", value).split())
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, Mapping):
        return {str(k): normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return normalise(bytes(value).decode("utf-8", "replace"))
    return normalise(str(value))


def _selected(record: Mapping[str, Any], fields: Iterable[str] | None,
              volatile: Iterable[str]) -> dict[str, Any]:
    skip = frozenset(volatile)
    if fields is None:
        return {str(k): v for k, v in record.items() if k not in skip}
    # Every configured field is present in the hashed form, missing ones as null: a field that
    # disappears from the page is a change, not a smaller record.
    return {name: record.get(name) for name in fields if name not in skip}


def canonical_json(record: Mapping[str, Any] | None, fields: Iterable[str] | None = None,
                   volatile: Iterable[str] = ()) -> str:
    """The canonical JSON text of ``record``'s hashed fields.

    ``fields``: the page type's field names (all of the record's keys when ``None``);
    ``volatile``: names left out. ``None`` as a record is the empty record.
    """
    selected = normalise(_selected(record or {}, fields, volatile))
    return json.dumps(selected, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def record_hash(record: Mapping[str, Any] | None, fields: Iterable[str] | None = None,
                volatile: Iterable[str] = ()) -> str:
    """32 lower-case hex digits: BLAKE2b-128 of :func:`canonical_json` (UTF-8)."""
    text = canonical_json(record, fields, volatile)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
