"""Body store: write and read throughput and stored bytes, snappy against zlib level 6.

Both contenders are the same code: :class:`webcrawl.store.BodyWriter` and ``BodyReader`` with the
same framing, CRCs, index sidecars and fsync policy ("never": this measures the CPU cost of the
store, not the disk); only the codec differs, zlib-6 being what gzip WARC writers use. The corpus
is Debian's python3.11-doc HTML (530 pages, what a docs crawl stores), or generated 20-150 KB
pages when that package is missing. Contenders alternate (A B A B ...) over several rounds; the
figures are medians of MB of uncompressed body per wall second, and the ratios between them.

``./run bench store`` (or ``python -m bench store``); ``BENCH_STORE_ROUNDS`` sets the rounds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import statistics
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import snappy  # type: ignore[import-untyped]

from bench._report import table, write_section
from webcrawl.store import BodyReader, BodyWriter, Pointer, _format, body_hash, verify
from webcrawl.store._format import OVERHEAD

DOCS = Path("/usr/share/doc/python3.11/html")
ORIGIN = "https://docs.python.org/3.11/"
SEGMENT_BYTES = 16 * 1024 * 1024
Page = tuple[str, bytes]


def load_corpus() -> tuple[str, list[Page]]:
    if DOCS.is_dir():
        files = sorted(DOCS.rglob("*.html"))
        return "python3.11-doc HTML", [(ORIGIN + str(f.relative_to(DOCS)), f.read_bytes()) for f in files]
    return "generated 20-150 KB pages (python3.11-doc missing)", generated_corpus()


def generated_corpus(count: int = 400, seed: int = 11) -> list[Page]:
    rng = random.Random(seed)
    words = ["crawler", "page", "link", "index", "value", "change", "cost", "fetch", "domain", "queue", "record", "parse", "the", "of"]
    pages = []
    for i in range(count):
        target, parts, size = rng.randint(20_000, 150_000), [f"<html><body><h1>Page {i}</h1>"], 0
        while size < target:
            chunk = f'<p class="c{rng.randrange(9)}">{" ".join(rng.choices(words, k=50))} ' \
                    f'<a href="/p/{rng.randrange(count)}.html">{rng.randrange(10**6)}</a></p>\n'
            parts.append(chunk)
            size += len(chunk)
        pages.append((f"https://example.com/p/{i}.html", "".join(parts).encode()))
    return pages


@contextlib.contextmanager
def codec(name: str) -> Iterator[None]:
    """Run the store with another codec in place of snappy: same framing, same code path."""
    if name == "snappy":
        yield
        return
    shim = SimpleNamespace(
        compress=lambda b: zlib.compress(b, 6), decompress=zlib.decompress, UncompressError=zlib.error
    )
    with mock.patch.object(_format, "snappy", shim):
        yield


def headers_of(body: bytes) -> list[tuple[str, str]]:
    """The few response headers a crawl keeps with a body (realistic sizes)."""
    return [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Last-Modified", "Tue, 07 Nov 2023 09:14:52 GMT"),
        ("ETag", f'"{hashlib.md5(body).hexdigest()[:16]}-{len(body):x}"'),
    ]


def write_store(folder: Path, pages: list[Page]) -> tuple[float, float, list[Pointer]]:
    """Wall and CPU seconds to write ``pages`` (hashes and headers prepared beforehand)."""
    meta = [(url, body, body_hash(body), headers_of(body)) for url, body in pages]
    cpu, start = time.process_time(), time.perf_counter()
    with BodyWriter(folder, segment_bytes=SEGMENT_BYTES, fsync="never") as writer:
        pointers = [
            writer.append(url, body, fetch_time=1.7e9, content_hash=h, content_type="text/html", headers=hd)
            for url, body, h, hd in meta
        ]
    return time.perf_counter() - start, time.process_time() - cpu, pointers


def read_store(folder: Path, pointers: list[Pointer]) -> float:
    start = time.perf_counter()
    with BodyReader(folder) as reader:
        for pointer in pointers:
            reader.read(pointer)
    return time.perf_counter() - start


def recover(folder: Path, last: Pointer) -> tuple[float, float, int]:
    """Cut the last record in half (a torn write), then time a writer's open and a full verify."""
    os.truncate(folder / f"{last.segment:08d}.seg", last.offset + last.length // 2)
    start = time.perf_counter()
    with BodyWriter(folder, segment_bytes=SEGMENT_BYTES, fsync="never") as writer:
        opened = time.perf_counter() - start
        scanned, cut = writer.recovery.bytes_scanned, writer.recovery.torn_bytes
    assert cut == last.length // 2, (cut, last)
    start = time.perf_counter()
    report = verify(folder)
    assert report.ok and report.records_ok == last_count(folder), report
    return scanned / opened / 1e6, report.bytes_scanned / (time.perf_counter() - start) / 1e6, cut


def last_count(folder: Path) -> int:
    with BodyReader(folder) as reader:
        return reader.index.records


def file_bytes(folder: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in folder.glob(pattern))


def pieces(pages: list[Page]) -> dict[str, float]:
    """MB/s of each step alone, page by page over the whole corpus (CPU seconds)."""
    steps = {
        "snappy.compress alone": snappy.compress,
        "zlib.compress level 6 alone": lambda b: zlib.compress(b, 6),
        "CRC-32 (zlib.crc32), the record checksum": zlib.crc32,
        "body_hash (BLAKE2b-128)": body_hash,
    }
    raw = sum(len(b) for _, b in pages)
    out = {}
    for name, step in steps.items():
        start = time.process_time()
        for _, body in pages:
            step(body)
        out[name] = raw / (time.process_time() - start) / 1e6
    return out


def main() -> None:
    rounds = int(os.environ.get("BENCH_STORE_ROUNDS", "5"))
    corpus_name, pages = load_corpus()
    raw = sum(len(b) for _, b in pages)
    sizes = sorted(len(b) for _, b in pages)
    print(f"{corpus_name}: {len(pages)} pages, {raw / 1e6:.1f} MB, median {sizes[len(sizes) // 2] / 1e3:.0f} KB")
    write: dict[str, list[float]] = {"snappy": [], "zlib-6": []}
    write_cpu: dict[str, list[float]] = {"snappy": [], "zlib-6": []}
    recovery: list[float] = []
    alone: dict[str, list[float]] = {}
    verifying: list[float] = []
    read: dict[str, list[float]] = {"snappy": [], "zlib-6": []}
    stored: dict[str, int] = {}
    index_bytes = 0
    root = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        for r in range(rounds):
            order = ["snappy", "zlib-6"] if r % 2 == 0 else ["zlib-6", "snappy"]
            for name in order:
                folder = root / f"{name}-{r}"
                with codec(name):
                    seconds, cpu, pointers = write_store(folder, pages)
                    write[name].append(raw / seconds / 1e6)
                    write_cpu[name].append(raw / cpu / 1e6)
                    read[name].append(raw / read_store(folder, pointers) / 1e6)
                stored[name] = file_bytes(folder, "*.seg")
                if name == "snappy":
                    # Sealed segments have sidecars; the active one would get 24 B a record more.
                    sealed = file_bytes(folder, "*.idx")
                    active = sum(1 for p in pointers if p.segment == pointers[-1].segment)
                    index_bytes = sealed + 24 + 24 * active
                    opened, verified, _ = recover(folder, pointers[-1])
                    recovery.append(opened)
                    verifying.append(verified)
                shutil.rmtree(folder)
            for name, mbs in pieces(pages).items():
                alone.setdefault(name, []).append(mbs)
            print(f"round {r + 1}/{rounds}: " + ", ".join(
                f"{n} write {write[n][-1]:.0f} MB/s read {read[n][-1]:.0f} MB/s" for n in write
            ))  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def row(label: str, runs: dict[str, list[float]]) -> list[object]:
        # The ratio is the median of per-round ratios: each round's pair ran back to back.
        a, b = runs["snappy"], runs["zlib-6"]
        ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
        return [label, statistics.median(a), statistics.median(b), ratio]

    payload = sum(len(snappy.compress(b)) for _, b in pages)
    meta = stored["snappy"] - payload - OVERHEAD * len(pages)
    framing = OVERHEAD * len(pages)
    rows = [
        row("write, MB/s of body (wall)", write),
        row("write, MB/s of body per CPU second", write_cpu),
        row("read, MB/s of body (wall)", read),
        ["stored MB", stored["snappy"] / 1e6, stored["zlib-6"] / 1e6, stored["snappy"] / stored["zlib-6"]],
        ["compression ratio (body / stored)", raw / stored["snappy"], raw / stored["zlib-6"], ""],
    ]
    total = stored["snappy"] + index_bytes
    overhead_rows = [
        ["framing: fixed header + 2 CRCs (40 B a record)", framing, 100 * framing / total],
        ["metadata: URL, hash, type, 3 headers", meta, 100 * meta / total],
        ["index sidecars (24 B a record, 24 B a file)", index_bytes, 100 * index_bytes / total],
        ["framing + index", framing + index_bytes, 100 * (framing + index_bytes) / total],
        ["framing + metadata + index", framing + meta + index_bytes, 100 * (framing + meta + index_bytes) / total],
    ]
    parts = [[name, statistics.median(values)] for name, values in alone.items()] + [
        ["writer open after a torn write: scan + cut of the active segment", statistics.median(recovery)],
        ["verify(): both CRCs + decompression of every record", statistics.median(verifying)],
    ]
    body = (
        f"Corpus: {corpus_name}, {len(pages)} pages, {raw / 1e6:.1f} MB, median page "
        f"{sizes[len(sizes) // 2] / 1e3:.0f} KB. Both columns are the same `BodyWriter`/`BodyReader` "
        f"code and framing (fsync never, {SEGMENT_BYTES >> 20} MiB segments), only the codec differs; "
        f"medians of {rounds} alternating rounds, wall clock, on a shared 2-core machine.\n\n"
        + table(["", "snappy store", "zlib-6 store", "snappy / zlib"], rows)
        + "\n\nWhere the stored bytes go (snappy store, share of segment + index bytes):\n\n"
        + table(["", "bytes", "% of stored"], overhead_rows)
        + f"\n\nFraming and index cost a constant {OVERHEAD + 24} bytes a record, so they stay under 2% "
        f"for records stored in {(OVERHEAD + 24) * 50 / 1e3:.1f} KB or more (pages of about "
        f"{(OVERHEAD + 24) * 50 * raw / stored['snappy'] / 1e3:.0f} KB at this corpus' snappy ratio); "
        "smaller pages pay proportionally more."
        + "\n\nThe pieces alone, page by page (MB/s of body per CPU second), and recovery (MB/s of "
        "segment scanned, wall; the last record cut in half before the open):\n\n"
        + table(["", "MB/s"], parts)
        + "\n\nTargets: write at least 5x zlib-6's; stored bytes at most 1.8x zlib-6's; "
        "framing + index under 2% of stored bytes. Metadata (the record's own URL, hash and headers) "
        "is listed apart: it is data the store keeps, not framing."
    )
    print(body)
    write_section("store", "Body store: snappy against zlib-6", "./run bench store", body)


if __name__ == "__main__":
    main()
