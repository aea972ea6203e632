"""WARC export of a site's latest bodies, read back with warcio."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from webcrawl.store import BodyWriter, export_warc


def fill(folder: Path) -> dict[str, object]:
    with BodyWriter(folder) as writer:
        writer.append("https://example.com/", b"<html>old</html>", fetch_time=1_700_000_000.0, status=200)
        writer.append(
            "https://example.com/",
            b"<html>new</html>",
            fetch_time=1_700_000_100.0,
            status=200,
            content_type="text/html; charset=utf-8",
            headers=[
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Encoding", "gzip"),  # the stored body is decoded: must not be claimed
                ("Content-Length", "999"),
                ("ETag", '"v2"'),
            ],
        )
        writer.append("https://example.com/gone", b"", fetch_time=1_700_000_050.0, status=404)
        rotten = writer.append("https://example.com/rot", b"rotten " * 100, fetch_time=1_700_000_060.0)
        writer.append("https://example.com/logo.png", bytes(range(256)) * 40, fetch_time=1_700_000_070.0,
                      content_type="image/png")  # fmt: skip
    return {"rotten": rotten}


def read_back(data: bytes) -> tuple[list[str], dict[str, tuple[str, dict[str, str], bytes, str]]]:
    types, responses = [], {}
    for record in ArchiveIterator(io.BytesIO(data)):
        types.append(record.rec_type)
        if record.rec_type == "response":
            url = record.rec_headers.get_header("WARC-Target-URI")
            headers = dict(record.http_headers.headers)
            date = record.rec_headers.get_header("WARC-Date")
            responses[url] = (record.http_headers.get_statuscode(), headers, record.content_stream().read(), date)
    return types, responses


@pytest.mark.parametrize("gzip", [True, False])
def test_export_latest_bodies(tmp_path: Path, gzip: bool) -> None:
    store = tmp_path / "bodies"
    rotten = fill(store)["rotten"]
    # Rot the body of one record: the export must leave it out, not archive damage.
    segment = store / "00000000.seg"
    data = bytearray(segment.read_bytes())
    data[rotten.offset + rotten.length - 20] ^= 0xFF  # type: ignore[attr-defined]
    segment.write_bytes(bytes(data))

    out = tmp_path / ("site.warc.gz" if gzip else "site.warc")
    report = export_warc(store, out, gzip=gzip)
    assert (report.records, report.skipped) == (3, [rotten])
    types, responses = read_back(out.read_bytes())
    assert types == ["warcinfo", "response", "response", "response"]
    status, headers, body, date = responses["https://example.com/"]
    assert (status, body) == ("200", b"<html>new</html>")
    assert headers["Content-Type"] == "text/html; charset=utf-8" and headers["ETag"] == '"v2"'
    assert "Content-Encoding" not in headers and headers["Content-Length"] == "16"
    assert date.startswith("2023-11-14T22:15:00")  # the fetch time of the newest version
    assert responses["https://example.com/gone"][:3] == ("404", {"Content-Length": "0"}, b"")
    assert responses["https://example.com/logo.png"][1]["Content-Type"] == "image/png"
    assert responses["https://example.com/logo.png"][2] == bytes(range(256)) * 40


def test_export_as_of_to_file_object(tmp_path: Path) -> None:
    fill(tmp_path)
    buffer = io.BytesIO()
    report = export_warc(tmp_path, buffer, as_of=1_700_000_055.0)
    assert report.records == 2
    _, responses = read_back(buffer.getvalue())
    assert responses["https://example.com/"][2] == b"<html>old</html>"
    assert set(responses) == {"https://example.com/", "https://example.com/gone"}
