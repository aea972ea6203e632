"""Body store crash safety: kill -9 mid-write, torn tails, flipped bytes, lost index sidecars."""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from webcrawl.store import BodyReader, BodyWriter, CorruptRecordError, Pointer, _files, verify
from webcrawl.store._format import FIXED

REPO = Path(__file__).resolve().parent.parent

# The child appends forever; every pointer it prints was returned by append() before the print.
WRITER = """
import random, sys
from webcrawl.store import BodyWriter

def body(i):
    rng = random.Random(i)
    text = (b"<p>record %d</p>" % i) * rng.randrange(1, 20_000)
    return text + rng.randbytes(rng.randrange(0, 300_000))

with BodyWriter(sys.argv[1], segment_bytes=2_000_000, fsync="never") as writer:
    i = 0
    while True:
        pointer = writer.append(f"https://example.com/{i % 50}", body(i), fetch_time=float(i))
        print(i, pointer, flush=True)
        i += 1
"""


def child_body(i: int) -> bytes:
    rng = random.Random(i)
    text = (b"<p>record %d</p>" % i) * rng.randrange(1, 20_000)
    return text + rng.randbytes(rng.randrange(0, 300_000))


def store_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.seg"))


def test_kill_9_during_writes(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, env=env, cwd=REPO
    )
    assert child.stdout is not None
    acked: dict[int, Pointer] = {}
    buffer = b""
    deadline = time.monotonic() + 20
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        # Wait (on the child's own output, no sleeping) until it has written several segments' worth.
        while len(acked) < 40 or store_bytes(tmp_path) < 5_000_000:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"writer too slow: {len(acked)} records, {store_bytes(tmp_path)} bytes"
            if selector.select(remaining):
                chunk = os.read(child.stdout.fileno(), 65536)
                assert chunk, f"writer exited early with {child.poll()}"
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    i, text = line.split()
                    acked[int(i)] = Pointer.parse(text)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    for line in (buffer + child.stdout.read()).split(b"\n")[:-1]:
        i, text = line.split()
        acked[int(i)] = Pointer.parse(text)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    before = verify(tmp_path)
    assert before.corrupt == [] and before.index_errors == []
    # The record being written when the kill landed is whole or cut, nothing else.
    assert before.records_ok in (len(acked), len(acked) + 1)
    with BodyWriter(tmp_path, segment_bytes=2_000_000) as writer:
        assert writer.recovery.corrupt == []
        assert writer.recovery.torn_bytes == before.torn_bytes
        after_crash = writer.append("https://example.com/after", b"after the crash", fetch_time=1e9)
    after = verify(tmp_path)
    assert (after.ok, after.torn_bytes) == (True, 0)
    assert after.records_ok == before.records_ok + 1
    with BodyReader(tmp_path) as reader:
        for seq, pointer in acked.items():
            assert reader.read(pointer).body == child_body(seq)
        assert reader.read(after_crash).body == b"after the crash"
        newest = max(acked)
        last = reader.lookup(f"https://example.com/{newest % 50}")
        assert last is not None and last.fetch_time >= newest  # whole unacked record may be newer
        assert last.body == child_body(int(last.fetch_time))


def write_records(folder: Path, n: int, **kwargs: object) -> list[Pointer]:
    with BodyWriter(folder, **kwargs) as writer:  # type: ignore[arg-type]
        return [
            writer.append(f"https://example.com/{i}", b"body %d " % i * 300, fetch_time=float(i))
            for i in range(n)
        ]


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda p: 10, id="in-fixed-header"),
        pytest.param(lambda p: FIXED.size + 5, id="in-url"),
        pytest.param(lambda p: p.length // 2, id="in-payload"),
        pytest.param(lambda p: p.length - 2, id="in-checksum"),
    ],
)
def test_torn_tail_is_cut(tmp_path: Path, cut: object) -> None:
    pointers = write_records(tmp_path, 5)
    last = pointers[-1]
    segment = _files.segment_path(tmp_path, last.segment)
    keep = last.offset + cut(last)  # type: ignore[operator]
    os.truncate(segment, keep)
    report = verify(tmp_path)  # read-only: says what a writer would cut
    assert (report.records_ok, report.torn_bytes, report.ok) == (4, keep - last.offset, True)
    assert segment.stat().st_size == keep
    with BodyWriter(tmp_path) as writer:
        assert writer.recovery.torn_bytes == keep - last.offset
        assert segment.stat().st_size == last.offset
        again = writer.append("https://example.com/4", b"rewritten", fetch_time=4.0)
    assert again == Pointer(last.segment, last.offset, again.length)
    with BodyReader(tmp_path) as reader:
        for i, pointer in enumerate(pointers[:-1]):
            assert reader.read(pointer).body == b"body %d " % i * 300
        assert reader.lookup("https://example.com/4").body == b"rewritten"  # type: ignore[union-attr]
        with pytest.raises(CorruptRecordError):
            reader.read(last)  # the cut record's old pointer now lands on another record's bytes
    assert verify(tmp_path).records_ok == 5


@pytest.mark.parametrize("tail", [b"\0" * 5000, b"\x89WCB" + b"\xff" * 50], ids=["zero-filled", "garbage"])
def test_garbage_tail_is_cut(tmp_path: Path, tail: bytes) -> None:
    pointers = write_records(tmp_path, 3)
    with open(_files.segment_path(tmp_path, 0), "ab") as f:
        f.write(tail)
    with BodyWriter(tmp_path) as writer:
        assert writer.recovery.torn_bytes == len(tail)
    with BodyReader(tmp_path) as reader:
        assert [reader.read(p).url for p in pointers] == [f"https://example.com/{i}" for i in range(3)]


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


@pytest.mark.parametrize(
    "where",
    [
        pytest.param((lambda p: p.length - 40, True), id="payload"),
        pytest.param((lambda p: FIXED.size + 3, False), id="url"),
        pytest.param((lambda p: 9, False), id="length-field"),
        pytest.param((lambda p: 1, False), id="magic"),
        pytest.param((lambda p: p.length - 1, True), id="payload-checksum"),
    ],
)
@pytest.mark.parametrize("sealed", [False, True], ids=["active-segment", "sealed-segment"])
def test_flipped_byte_is_detected(
    tmp_path: Path, where: tuple[Callable[[Pointer], int], bool], sealed: bool
) -> None:
    offset_of, header_intact = where
    pointers = write_records(tmp_path, 9, segment_bytes=1_000 if sealed else 10**6)
    victim = pointers[4]
    if sealed:
        assert _files.index_path(tmp_path, victim.segment).exists()
    flip(_files.segment_path(tmp_path, victim.segment), victim.offset + offset_of(victim))

    report = verify(tmp_path)
    assert report.records_ok == 8 and report.torn_bytes == 0 and not report.ok
    assert [(d.segment, d.offset, d.length) for d in report.corrupt] == [
        (victim.segment, victim.offset, victim.length)
    ]
    with BodyReader(tmp_path) as reader:
        with pytest.raises(CorruptRecordError, match=f"corrupt body-store record {victim}"):
            reader.read(victim)
        if header_intact or sealed:
            with pytest.raises(CorruptRecordError):
                reader.lookup("https://example.com/4")  # never an older version in its place
        else:
            assert reader.lookup("https://example.com/4") is None  # whose record it was is unknowable
        for i, pointer in enumerate(pointers):
            if pointer != victim:
                assert reader.read(pointer).body == b"body %d " % i * 300
                assert reader.lookup(f"https://example.com/{i}").pointer == pointer  # type: ignore[union-attr]
    with BodyWriter(tmp_path) as writer:
        # Skipped and reported when it is in the segment a writer scans; never cut, never moved.
        assert len(writer.recovery.corrupt) == (0 if sealed else 1)
        assert writer.recovery.torn_bytes == 0
        writer.append("https://example.com/new", b"new", fetch_time=10.0)
    assert verify(tmp_path).records_ok == 9


def test_lost_or_damaged_index_sidecar(tmp_path: Path) -> None:
    pointers = write_records(tmp_path, 12, segment_bytes=500)
    lost = _files.index_path(tmp_path, 0)
    damaged = _files.index_path(tmp_path, 1)
    lost.unlink()  # as if the crash came between sealing a segment and writing its sidecar
    flip(damaged, 30)
    report = verify(tmp_path)
    assert report.records_ok == 12 and report.corrupt == []
    assert len(report.index_errors) == 1 and damaged.name in report.index_errors[0]
    with BodyReader(tmp_path) as reader:  # falls back to scanning both
        assert [reader.lookup(f"https://example.com/{i}").pointer for i in range(12)] == pointers  # type: ignore[union-attr]
    with BodyWriter(tmp_path, segment_bytes=500) as writer:
        assert writer.recovery.records_ok >= 2
    assert lost.exists()
    assert verify(tmp_path).ok


def test_stale_sidecar_of_last_segment_is_dropped(tmp_path: Path) -> None:
    pointers = write_records(tmp_path, 5, segment_bytes=500)
    last = pointers[-1].segment
    sealed = _files.index_path(tmp_path, last - 1)
    # A sidecar for the active segment that covers fewer bytes than it holds.
    _files.index_path(tmp_path, last).write_bytes(sealed.read_bytes())
    assert not verify(tmp_path).ok
    with BodyWriter(tmp_path, segment_bytes=500) as writer:
        assert writer.recovery.records_ok == sum(p.segment == last for p in pointers)
        assert writer.append("x", b"y", fetch_time=9.0).segment >= last
    assert verify(tmp_path).ok
    with BodyReader(tmp_path) as reader:
        assert reader.lookup("https://example.com/4").pointer == pointers[-1]  # type: ignore[union-attr]


def test_verify_catches_a_sidecar_of_the_wrong_records(tmp_path: Path) -> None:
    write_records(tmp_path, 6, segment_bytes=500)  # three segments of two same-sized records
    index0, index1 = _files.index_path(tmp_path, 0), _files.index_path(tmp_path, 1)
    index1.write_bytes(index0.read_bytes())  # right size, wrong URLs
    report = verify(tmp_path)
    assert report.corrupt == [] and report.records_ok == 6
    assert report.index_errors == [f"{index1.name}: 2 entries match no record, 2 records are not indexed"]
