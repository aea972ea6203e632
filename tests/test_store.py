"""Body store: round trips, rotation, lookups by URL, bad inputs (real files in tmp_path)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from webcrawl.store import (
    BodyReader,
    BodyWriter,
    CorruptRecordError,
    Pointer,
    StoreError,
    StoreLockedError,
    _files,
    body_hash,
    verify,
)


def page(i: int, size: int = 30_000) -> bytes:
    """An HTML-like body: compressible text with some per-page randomness."""
    rng = random.Random(i)
    words = [b"crawl", b"fresh", b"<div class='x'>", b"</div>", b"page", b"%d" % i, b"\n"]
    out = bytearray(b"<html><body>")
    while len(out) < size:
        out += rng.choice(words) + b" "
    return bytes(out[:size])


@pytest.mark.parametrize("fsync", ["always", "batch", "never"])
def test_round_trip(tmp_path: Path, fsync: str) -> None:
    headers: list[tuple[str | bytes, str | bytes]] = [
        ("Content-Type", "text/html; charset=utf-8"),
        (b"ETag", b'"abc"'),
        ("X-Empty", ""),
    ]
    with BodyWriter(tmp_path, fsync=fsync, batch_records=3) as writer:
        pointers = [
            writer.append(
                f"https://example.com/{i}",
                page(i),
                fetch_time=1_700_000_000.5 + i,
                status=200 if i % 2 else 404,
                content_hash=body_hash(page(i)),
                content_type="text/html",
                headers=headers,
            )
            for i in range(10)
        ]
    with BodyReader(tmp_path) as reader:
        for i, pointer in enumerate(pointers):
            stored = reader.read(str(pointer))  # the form a page history keeps
            assert stored.body == page(i)
            assert stored.url == f"https://example.com/{i}"
            assert stored.fetch_time == 1_700_000_000.5 + i
            assert stored.status == (200 if i % 2 else 404)
            assert stored.content_hash == body_hash(page(i))
            assert stored.content_type == "text/html"
            assert stored.headers == (
                ("Content-Type", "text/html; charset=utf-8"),
                ("ETag", '"abc"'),
                ("X-Empty", ""),
            )
            assert stored.pointer == pointer
            assert reader.read_meta(pointer).body_length == len(page(i))
    assert verify(tmp_path).records_ok == 10


def test_non_hex_content_hash_and_unicode_url(tmp_path: Path) -> None:
    with BodyWriter(tmp_path) as writer:
        pointer = writer.append("https://example.com/ü?q=ß", b"x", fetch_time=1.0, content_hash="sha1:ABC")
    with BodyReader(tmp_path) as reader:
        stored = reader.read(pointer)
    assert (stored.url, stored.content_hash, stored.body) == ("https://example.com/ü?q=ß", "sha1:ABC", b"x")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(random.Random(7).randbytes(100_000), id="binary-incompressible"),
        pytest.param(bytes(range(256)) * 1000, id="binary-compressible"),
        pytest.param("é – 日本語 \udcff".encode("utf-8", "surrogateescape"), id="invalid-utf8"),
        pytest.param(page(3, 20 * 1024 * 1024), id="huge-20MB"),
    ],
)
def test_bad_inputs_round_trip(tmp_path: Path, body: bytes) -> None:
    with BodyWriter(tmp_path) as writer:
        pointer = writer.append("https://example.com/b", body, fetch_time=5.0)
    with BodyReader(tmp_path) as reader:
        assert reader.read(pointer).body == body
        assert reader.lookup("https://example.com/b") is not None
    # Incompressible bodies are stored as they are: snappy must not make them bigger.
    assert pointer.length < len(body) + 100


def test_rotation(tmp_path: Path) -> None:
    with BodyWriter(tmp_path, segment_bytes=40_000) as writer:
        pointers = [writer.append(f"u{i}", page(i), fetch_time=float(i)) for i in range(30)]
        big = writer.append("big", random.Random(1).randbytes(100_000), fetch_time=99.0)
    segments = _files.segment_ids(tmp_path)
    assert len(segments) > 3
    assert big.offset == 0  # a record over the size gets a segment of its own
    for segment in segments:
        size = _files.segment_path(tmp_path, segment).stat().st_size
        assert size <= 40_000 or segment == big.segment
        # Every segment but the active one is sealed with an index sidecar.
        assert _files.index_path(tmp_path, segment).exists() == (segment != segments[-1])
    assert sorted(pointers + [big]) == pointers + [big]  # pointers grow in write order
    with BodyReader(tmp_path) as reader:
        assert [reader.read(p).body for p in pointers] == [page(i) for i in range(30)]
        assert len(reader.index) == 31
    # A reopened writer carries on in the last segment.
    with BodyWriter(tmp_path, segment_bytes=10**6) as writer:
        assert writer.recovery.records_ok == 1 and writer.recovery.ok
        again = writer.append("again", b"x", fetch_time=100.0)
    assert (again.segment, again.offset) == (big.segment, big.length)
    report = verify(tmp_path)
    assert (report.records_ok, report.ok, report.torn_bytes) == (32, True, 0)


def test_lookup_latest_and_as_of(tmp_path: Path) -> None:
    url = "https://example.com/news"
    with BodyWriter(tmp_path, segment_bytes=50_000) as writer:
        for t in (100.0, 300.0, 200.0):  # written out of time order, across segments
            writer.append(url, page(int(t)), fetch_time=t)
            writer.append(f"{url}/other{t}", page(1), fetch_time=t)
        writer.append(url, b"same time, written later", fetch_time=300.0)
    with BodyReader(tmp_path) as reader:
        latest = reader.lookup(url)
        assert latest is not None and latest.body == b"same time, written later"
        assert reader.lookup(url, as_of=250.0).body == page(200)  # type: ignore[union-attr]
        assert reader.lookup(url, as_of=200.0).body == page(200)  # type: ignore[union-attr]
        assert reader.lookup(url, as_of=199.9).body == page(100)  # type: ignore[union-attr]
        assert reader.lookup(url, as_of=50.0) is None
        assert reader.lookup("https://example.com/never") is None
        assert [m.fetch_time for m in reader.versions(url)] == [300.0, 300.0, 200.0, 100.0]
        assert len(list(reader.latest())) == 4
        assert len(list(reader.latest(as_of=150.0))) == 2


def test_reader_beside_live_writer_and_refresh(tmp_path: Path) -> None:
    with BodyWriter(tmp_path) as writer:
        writer.append("a", b"1", fetch_time=1.0)
        with BodyReader(tmp_path) as reader:
            assert reader.lookup("a").body == b"1"  # type: ignore[union-attr]
            pointer = writer.append("a", b"2", fetch_time=2.0)
            assert reader.read(pointer).body == b"2"  # by pointer: no index needed
            assert reader.lookup("a").body == b"1"  # type: ignore[union-attr]
            reader.refresh()
            assert reader.lookup("a").body == b"2"  # type: ignore[union-attr]


def test_threads_append_concurrently(tmp_path: Path) -> None:
    results: dict[str, Pointer] = {}
    with BodyWriter(tmp_path, segment_bytes=100_000) as writer:

        def work(n: int) -> None:
            for i in range(25):
                url = f"t{n}/{i}"
                results[url] = writer.append(url, page(n * 100 + i, 5_000), fetch_time=float(i))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with BodyReader(tmp_path) as reader:
        for url, pointer in results.items():
            n, i = (int(x) for x in url[1:].split("/"))
            assert reader.read(pointer).body == page(n * 100 + i, 5_000)
    assert verify(tmp_path).records_ok == 100


def test_one_writer_per_folder(tmp_path: Path) -> None:
    writer = BodyWriter(tmp_path)
    with pytest.raises(StoreLockedError, match="one writer per folder"):
        BodyWriter(tmp_path)
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(StoreError, match="append after close"):
        writer.append("a", b"", fetch_time=0.0)
    BodyWriter(tmp_path).close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fsync": "sometimes"}, "fsync='sometimes'"),
        ({"segment_bytes": 0}, "segment_bytes=0"),
        ({"batch_records": 0}, "batch_records=0"),
    ],
)
def test_bad_settings(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BodyWriter(tmp_path, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "u" * 70_000}, "url of 70000 bytes"),
        ({"status": 70_000}, "status 70000"),
        ({"status": -1}, "status -1"),
        ({"content_hash": "x" * 300}, "content hash of 300 bytes"),
    ],
)
def test_unframable_values(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"url": "u", "body": b"b", "fetch_time": 1.0} | kwargs
    with BodyWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match=message):
            writer.append(**args)  # type: ignore[arg-type]
        writer.append("fine", b"after", fetch_time=2.0)
    assert verify(tmp_path).records_ok == 1


@pytest.mark.parametrize(
    ("text", "pointer"),
    [
        ("3:1024:77", Pointer(3, 1024, 77)),  # bare: the legacy folder, or a BodyWriter's own
        ("crawl-1/w0/3:1024:77", Pointer(3, 1024, 77, machine="crawl-1", writer="w0")),
        ("host.example.org/w12/0:0:1", Pointer(0, 0, 1, machine="host.example.org", writer="w12")),
        ("ü:x/w3/1:2:3", Pointer(1, 2, 3, machine="ü:x", writer="w3")),
    ],
)
def test_pointer_text_round_trip(text: str, pointer: Pointer) -> None:
    assert str(pointer) == text
    assert Pointer.parse(text) == Pointer.parse(text.encode()) == pointer
    assert pointer.bare() == Pointer(pointer.segment, pointer.offset, pointer.length)
    assert pointer.bare().located(pointer.machine, pointer.writer) == pointer
    assert pointer.is_bare == ("/" not in text)


@pytest.mark.parametrize(
    "bad",
    [
        "", "1:2", "a:b:c", "1:2:0", "-1:2:3", "1:2:3:4",
        "m/w0/1:2", "/w0/1:2:3", "m//1:2:3", "w0/1:2:3", "m/w0/x/1:2:3", "m/w0/",
        "m/x0/1:2:3", "m/w01/1:2:3", "m/../1:2:3", "two words/w0/1:2:3", "tab\t/w0/1:2:3",
    ],
)
def test_pointer_text_that_is_not_a_pointer(bad: str) -> None:
    with pytest.raises(ValueError, match="not a body-store pointer"):
        Pointer.parse(bad)


def test_pointer_order_and_half_located_pointers() -> None:
    # Within a folder, pointers order by position: write order.
    assert Pointer(0, 10, 5) < Pointer(0, 20, 1) < Pointer(1, 0, 1)
    assert Pointer(9, 0, 1) < Pointer(0, 0, 1, machine="m", writer="w0") < Pointer(0, 0, 1, machine="m", writer="w1")
    with pytest.raises(ValueError, match="both a machine and a writer"):
        Pointer(1, 2, 3, machine="m")


def test_body_hash_is_stable() -> None:
    assert body_hash(b"") == "cae66941d9efbd404e4d88758ea67670"
    assert body_hash(b"a") == body_hash(b"a") != body_hash(b"b")


def test_missing_folder_and_segment(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        BodyReader(tmp_path / "nope")
    with BodyReader(tmp_path) as reader:
        with pytest.raises(StoreError, match="no segment 4"):
            reader.read(Pointer(4, 0, 100))
        assert reader.lookup("x") is None


def test_headers_as_mapping_with_lists(tmp_path: Path) -> None:
    headers: dict[str | bytes, str | bytes | list[str]] = {
        "Set-Cookie": ["a=1", "b=2"],
        b"ETag": b'"x"',
        "Bad": "nul\0byte",
    }
    with BodyWriter(tmp_path) as writer:
        pointer = writer.append("u", b"b", fetch_time=1.0, headers=headers)  # Scrapy's Headers shape
    with BodyReader(tmp_path) as reader:
        assert reader.read(pointer).headers == (
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
            ("ETag", '"x"'),
            ("Bad", "nulbyte"),
        )


def test_bogus_pointers_fail_clearly(tmp_path: Path) -> None:
    with BodyWriter(tmp_path) as writer:
        pointer = writer.append("u", page(1), fetch_time=1.0)
        writer.append("v", page(2), fetch_time=1.0)
    with BodyReader(tmp_path) as reader:
        with pytest.raises(CorruptRecordError, match="runs past the segment's end"):
            reader.read(Pointer(0, 0, 10**12))  # must not try to allocate a terabyte
        with pytest.raises(CorruptRecordError, match="bad magic"):
            reader.read(Pointer(0, 5, pointer.length))
        with pytest.raises(CorruptRecordError, match="pointer says otherwise"):
            reader.read(Pointer(0, 0, pointer.length - 1))
        with pytest.raises(CorruptRecordError, match="bad magic"):
            reader.read_meta(Pointer(0, 7, 100))
        with pytest.raises(CorruptRecordError, match="runs past the segment's end"):
            reader.read_meta(Pointer(0, 0, 10**12))
