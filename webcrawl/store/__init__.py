"""The body store: snappy-compressed bodies in crash-safe, rotating segment files.

A plain library (no Scrapy, no Redis). A site's store on a machine is ``<data dir>/<site>/bodies``
with one writer folder per writing process: :class:`SiteBodyStore` claims one and appends,
returning a :class:`Pointer` that names the machine and the folder; :class:`BodyReader` reads
every folder of the site by pointer or by URL; :func:`verify` checks a store; :func:`export_warc`
writes a site's latest bodies to WARC. :class:`BodyWriter` is the writer of one folder.
docs/store.md has the layout and the format.
"""

from __future__ import annotations

from webcrawl.store.bodyhash import body_hash
from webcrawl.store.errors import CorruptRecordError, ForeignPointerError, StoreError, StoreLockedError
from webcrawl.store.layout import bodies_folder, machine_name
from webcrawl.store.pointer import Pointer
from webcrawl.store.reader import BodyReader
from webcrawl.store.records import Damage, RecordMeta, StoredBody, VerifyReport
from webcrawl.store.segment import DEFAULT_SEGMENT_BYTES, FSYNC_POLICIES, BodyWriter
from webcrawl.store.sitestore import SiteBodyStore
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
    "ForeignPointerError",
    "Pointer",
    "RecordMeta",
    "SiteBodyStore",
    "StoreError",
    "StoreLockedError",
    "StoredBody",
    "VerifyReport",
    "bodies_folder",
    "body_hash",
    "export_warc",
    "machine_name",
    "verify",
]
