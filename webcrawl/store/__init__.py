"""The body store: snappy-compressed bodies in crash-safe, rotating segment files.

A plain library (no Scrapy, no Redis): :class:`BodyWriter` appends and returns a :class:`Pointer`
for the page history; :class:`BodyReader` reads by pointer or by URL; :func:`verify` checks a
store; :func:`export_warc` writes a site's latest bodies to WARC. docs/store.md has the format.
"""

from __future__ import annotations

from webcrawl.store.bodyhash import body_hash
from webcrawl.store.errors import CorruptRecordError, StoreError, StoreLockedError
from webcrawl.store.reader import BodyReader
from webcrawl.store.records import Damage, Pointer, RecordMeta, StoredBody, VerifyReport
from webcrawl.store.segment import DEFAULT_SEGMENT_BYTES, FSYNC_POLICIES, BodyWriter
from webcrawl.store.verify import verify
from webcrawl.store.warc import ExportReport, export_warc

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "FSYNC_POLICIES",
    "BodyReader",
    "BodyWriter",
    "CorruptRecordError",
    "Damage",
    "ExportReport",
    "Pointer",
    "RecordMeta",
    "StoreError",
    "StoreLockedError",
    "StoredBody",
    "VerifyReport",
    "body_hash",
    "export_warc",
    "verify",
]
