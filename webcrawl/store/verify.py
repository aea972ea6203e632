"""Check a whole site store: every writer folder's records (CRCs, decompression) and index sidecars."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from webcrawl.store import _files
from webcrawl.store._scan import scan_segment
from webcrawl.store.index import entry_of, load_index
from webcrawl.store.layout import writer_names, writer_path
from webcrawl.store.records import Damage, VerifyReport

logger = logging.getLogger(__name__)


def verify(folder: str | os.PathLike[str], *, decompress: bool = True) -> VerifyReport:
    """Scan every segment of the site store in ``folder``: its legacy segments and every writer
    folder. Read-only, safe beside live writers.

    The report counts whole records, lists corrupt ones (each also logged; ``Damage.writer`` names
    the folder), and counts the torn tail of each writer's active segment (what that writer's
    recovery would cut; beside a live writer this may be a record being written). A sealed
    segment that ends in a cut record is corrupt, not torn. ``index_errors`` names sidecars
    (``w0/00000003.idx``; bare for the legacy folder) that are damaged, stale, or disagree with
    their segment. ``decompress`` also decompresses each body and checks its length (the CRC
    alone proves the bytes are those written; decompressing proves the writer wrote a valid body).
    """
    folder = Path(folder)
    report = VerifyReport()
    for writer in writer_names(folder):
        report.merge(_verify_folder(writer_path(folder, writer), writer, decompress))
    for damage in report.corrupt:
        logger.warning("body store %s: corrupt %s", folder, damage)
    for problem in report.index_errors:
        logger.warning("body store %s: index %s", folder, problem)
    return report


def _verify_folder(folder: Path, writer: str, decompress: bool) -> VerifyReport:
    report = VerifyReport()
    prefix = f"{writer}/" if writer else ""
    ids = _files.segment_ids(folder)
    for segment in ids:
        path = _files.segment_path(folder, segment)
        scan = scan_segment(path, segment, decompress=decompress)
        report.segments += 1
        report.records_ok += len(scan.records)
        report.bytes_scanned += scan.size
        report.corrupt.extend(dataclasses.replace(d, writer=writer) for d in scan.damage)
        index_file = _files.index_path(folder, segment)
        sealed = index_file.exists()
        if scan.torn_bytes and (sealed or segment != ids[-1]):
            report.corrupt.append(
                Damage(segment, scan.good_end, scan.torn_bytes, "sealed segment ends in a cut record", writer)
            )
        elif scan.torn_bytes:
            report.torn_bytes += scan.torn_bytes
        if sealed:
            entries = load_index(index_file, segment, scan.size)
            if entries is None:
                report.index_errors.append(
                    f"{prefix}{index_file.name}: damaged, or stale for a {scan.size}-byte segment"
                )
                continue
            indexed = set(entries)
            good = {entry_of(r) for r in scan.records}
            # A sidecar may point into damage (the record rotted after sealing); nowhere else.
            unknown = [
                p for _, _, p in indexed - good
                if not any(d.offset <= p.offset < d.offset + d.length for d in scan.damage)
            ]
            missing = good - indexed
            if unknown or missing:
                report.index_errors.append(
                    f"{prefix}{index_file.name}: {len(unknown)} entries match no record, "
                    f"{len(missing)} records are not indexed"
                )
    return report
