"""Export a site's latest stored bodies as WARC response records (warcio), for archive users."""

from __future__ import annotations

import http
import io
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]
from warcio.timeutils import datetime_to_iso_date  # type: ignore[import-untyped]
from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

import webcrawl
from webcrawl.store.errors import CorruptRecordError
from webcrawl.store.pointer import Pointer
from webcrawl.store.reader import BodyReader
from webcrawl.store.records import StoredBody

logger = logging.getLogger(__name__)

# The stored body is the decoded one (Scrapy undoes Content-Encoding and chunking): headers that
# describe the wire form would make a replay tool decode it twice.
_WIRE_HEADERS = {"content-encoding", "transfer-encoding", "content-length"}


@dataclass(slots=True)
class ExportReport:
    """Records written, body bytes written, and pointers skipped because they were corrupt."""

    records: int = 0
    body_bytes: int = 0
    skipped: list[Pointer] = field(default_factory=list)


def _http_headers(stored: StoredBody) -> StatusAndHeaders:
    headers = [(k, v) for k, v in stored.headers if k.lower() not in _WIRE_HEADERS]
    if stored.content_type and not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", stored.content_type))
    headers.append(("Content-Length", str(len(stored.body))))
    try:
        reason = http.HTTPStatus(stored.status).phrase
    except ValueError:
        reason = "Unknown"
    return StatusAndHeaders(f"{stored.status} {reason}", headers, protocol="HTTP/1.1")


def export_warc(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str] | BinaryIO,
    *,
    as_of: float | None = None,
    gzip: bool = True,
) -> ExportReport:
    """Write each URL's newest body (at or before ``as_of``) in the site store at ``folder``, all
    its writer folders on this machine, to ``out``.

    ``out`` is a path or a binary file; records are gzipped one by one (``.warc.gz``) unless
    ``gzip`` is false. A warcinfo record comes first, then one ``response`` record per URL with
    the stored status and headers (minus the wire-only ones) and ``WARC-Date`` = fetch time. A
    corrupt record is logged, listed in the report, and left out: an archive gets no damaged body.
    """
    report = ExportReport()
    with BodyReader(folder) as reader:
        if isinstance(out, (str, os.PathLike)):
            with open(out, "wb") as f:
                _write(reader, f, as_of, gzip, report)
        else:
            _write(reader, out, as_of, gzip, report)
    return report


def _write(reader: BodyReader, out: BinaryIO, as_of: float | None, gzip: bool, report: ExportReport) -> None:
    writer = WARCWriter(out, gzip=gzip)
    info = {"software": f"webcrawl/{webcrawl.__version__}", "format": "WARC File Format 1.0"}
    name = os.path.basename(str(getattr(out, "name", "export.warc")))
    writer.write_record(writer.create_warcinfo_record(name, info))
    for pointer in reader.latest(as_of):
        try:
            stored = reader.read(pointer)
        except CorruptRecordError as exc:
            logger.warning("WARC export: %s; left out", exc)
            report.skipped.append(pointer)
            continue
        date = datetime_to_iso_date(datetime.fromtimestamp(stored.fetch_time, UTC))
        record = writer.create_warc_record(
            stored.url,
            "response",
            payload=io.BytesIO(stored.body),
            length=len(stored.body),
            warc_headers_dict={"WARC-Date": date},
            http_headers=_http_headers(stored),
        )
        writer.write_record(record)
        report.records += 1
        report.body_bytes += len(stored.body)
