"""A site's body store shared by the processes of a machine: writer folders claimed by lock, real
OS processes appending at once, a kill -9 and a restart, the legacy layout, and pointers that say
which machine holds a body (real files in tmp_path, real processes)."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from webcrawl.store import (
    BodyReader,
    BodyWriter,
    ForeignPointerError,
    Pointer,
    SiteBodyStore,
    StoreError,
    _files,
    bodies_folder,
    export_warc,
    machine_name,
    verify,
)

REPO = Path(__file__).resolve().parent.parent

# A crawl process's writer: claims a folder and says which, appends ``count`` bodies (forever when
# negative) once told to go, then holds its folder until stdin closes. Every pointer it prints was
# returned by append() before the print. Writer "b" fetches half a second after writer "a".
WRITER = """
import sys
from webcrawl.store import SiteBodyStore

folder, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SiteBodyStore(folder, machine="box", segment_bytes=5_000, fsync="never") as store:
    print(store.writer, flush=True)
    sys.stdin.readline()
    i = 0
    while count < 0 or i < count:
        body = (b"<p>%s %d</p>" % (tag.encode(), i)) * (1 + i % 40)  # as body() below
        when = i + (0.5 if tag == "b" else 0.0)
        print(i, store.append(f"https://example.com/{i % 10}", body, fetch_time=when), flush=True)
        i += 1
    sys.stdin.readline()
"""


def body(tag: str, i: int) -> bytes:
    return (b"<p>%s %d</p>" % (tag.encode(), i)) * (1 + i % 40)


class Writer:
    """One writer process (``WRITER``) and the pointers it acknowledged."""

    def __init__(self, folder: Path, tag: str, count: int) -> None:
        self.tag = tag
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.process = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), tag, str(count)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.acked: dict[int, Pointer] = {}

    def claimed(self) -> str:
        """The writer folder the process claimed (waits until it has)."""
        return self.stdout.readline().decode().strip()

    def go(self) -> None:
        self.stdin.write(b"go\n")
        self.stdin.flush()

    def read(self, n: int) -> dict[int, Pointer]:
        """The next ``n`` acknowledged pointers, by sequence number."""
        for _ in range(n):
            i, text = self.stdout.readline().split()
            self.acked[int(i)] = Pointer.parse(text)
        return self.acked

    def finish(self) -> None:
        """Let the process close its store and exit."""
        self.stdin.close()
        assert self.process.wait(timeout=30) == 0
        self.stdout.close()

    def kill(self) -> None:
        """SIGKILL, then collect the pointers it printed before it died."""
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=30) == -signal.SIGKILL
        for line in self.stdout.read().split(b"\n")[:-1]:  # a cut last line was never acknowledged
            i, text = line.split()
            self.acked[int(i)] = Pointer.parse(text)
        self.stdin.close()
        self.stdout.close()


def test_two_processes_append_to_one_site_store_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "bodies"
    a, b = Writer(folder, "a", 150), Writer(folder, "b", 150)
    claims = {a.claimed(): a, b.claimed(): b}
    assert set(claims) == {"w0", "w1"}  # both hold a folder now: neither was refused
    a.go()
    b.go()
    acked = {w.tag: w.read(150) for w in (a, b)}
    a.finish()
    b.finish()
    writer_of = {w.tag: name for name, w in claims.items()}
    with BodyReader(folder, machine="box") as reader:
        for tag, pointers in acked.items():
            for i, pointer in pointers.items():
                assert (pointer.machine, pointer.writer) == ("box", writer_of[tag])
                assert reader.read(str(pointer)).body == body(tag, i)
        for k in range(10):
            url = f"https://example.com/{k}"
            # Each URL has 15 versions from each process, merged by fetch time.
            times = [m.fetch_time for m in reader.versions(url)]
            assert times == sorted((i + half for i in range(k, 150, 10) for half in (0.0, 0.5)), reverse=True)
            newest = reader.lookup(url)
            assert newest is not None and newest.body == body("b", 140 + k)
            older = reader.lookup(url, as_of=140 + k + 0.25)
            assert older is not None and older.body == body("a", 140 + k)
        assert {p.writer for p in reader.latest()} == {writer_of["b"]}
        assert len(list(reader.latest(as_of=0.25))) == 1
    report = verify(folder)
    assert (report.ok, report.records_ok, report.torn_bytes) == (True, 300, 0)
    assert report.segments > 2  # both writers rotated their own segments


def test_a_writer_killed_mid_append_gets_its_folder_back_and_recovers_it(tmp_path: Path) -> None:
    folder = tmp_path / "bodies"
    steady = Writer(folder, "a", 5)
    assert steady.claimed() == "w0"
    killed = Writer(folder, "b", -1)
    assert killed.claimed() == "w1"
    steady.go()
    killed.go()
    steady.read(5)
    killed.read(200)
    killed.kill()
    # A kill inside a large writev leaves a cut record (a kill between appends, the usual case,
    # leaves none): add the first half of one to the dead writer's active segment.
    last = killed.acked[max(killed.acked)]
    newest = _files.segment_ids(folder / "w1")[-1]
    if _files.index_path(folder / "w1", newest).exists():
        # killed between sealing a segment and opening the next: the cut record goes in the next
        newest += 1
    active = _files.segment_path(folder / "w1", newest)
    record = _files.segment_path(folder / "w1", last.segment).read_bytes()[last.offset:last.offset + last.length]
    with open(active, "ab") as f:
        f.write(record[: len(record) // 2])
    before = verify(folder)
    assert before.corrupt == [] and before.torn_bytes == len(record) // 2
    assert before.records_ok - 5 in (len(killed.acked), len(killed.acked) + 1)  # + the unacknowledged one

    with SiteBodyStore(folder, machine="box", segment_bytes=5_000) as restarted:
        assert restarted.writer == "w1"  # w0 is still held; the dead process's folder is free
        assert restarted.recovery.torn_bytes == len(record) // 2 and restarted.recovery.corrupt == []
        after = restarted.append("https://example.com/after", b"after the kill", fetch_time=1e9)
        with SiteBodyStore(folder, machine="box") as third:
            assert third.writer == "w2"
    steady.finish()
    assert str(after).startswith("box/w1/")
    report = verify(folder)
    assert (report.ok, report.torn_bytes, report.records_ok) == (True, 0, before.records_ok + 1)
    with BodyReader(folder, machine="box") as reader:
        for i, pointer in killed.acked.items():
            assert reader.read(pointer).body == body("b", i)
        for i, pointer in steady.acked.items():
            assert reader.read(pointer).body == body("a", i)
        assert reader.read(after).body == b"after the kill"


def test_a_legacy_store_stays_readable_beside_writer_folders(tmp_path: Path) -> None:
    folder = tmp_path / "bodies"
    url = "https://example.com/"
    with BodyWriter(folder) as old:  # the layout before writer folders: segments in bodies/
        legacy = old.append(url, b"old", fetch_time=1.0)
        gone = old.append(url + "gone", b"only old", fetch_time=1.5)
    legacy_files = sorted(p.name for p in folder.iterdir())
    with SiteBodyStore(folder, machine="box") as store:
        assert store.writer == "w0" and store.writer_folder == folder / "w0"
        new = store.append(url, b"new", fetch_time=2.0)
    assert sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "MACHINES") == legacy_files
    assert str(legacy) == f"0:0:{legacy.length}" and str(new) == f"box/w0/0:0:{new.length}"
    with BodyReader(folder, machine="box") as reader:
        assert reader.read(str(legacy)).body == b"old"  # what an older page history holds
        assert reader.read(str(new)).body == b"new"
        assert [m.pointer for m in reader.versions(url)] == [new, legacy]
        assert reader.lookup(url, as_of=1.9).body == b"old"  # type: ignore[union-attr]
        assert sorted(reader.latest()) == [gone, new]
    report = verify(folder)
    assert (report.ok, report.segments, report.records_ok) == (True, 2, 3)
    out = io.BytesIO()
    assert export_warc(folder, out).records == 2
    bodies = {r.rec_headers.get_header("WARC-Target-URI"): r.content_stream().read()
              for r in ArchiveIterator(io.BytesIO(out.getvalue())) if r.rec_type == "response"}
    assert bodies == {url: b"new", url + "gone": b"only old"}


def test_a_pointer_of_another_machine_says_which_machine_holds_it(tmp_path: Path) -> None:
    folder = tmp_path / "bodies"
    with SiteBodyStore(folder, machine="box") as store:
        pointer = store.append("https://example.com/", b"here", fetch_time=1.0)
    elsewhere = Pointer(pointer.segment, pointer.offset, pointer.length, machine="crawl-2", writer="w0")
    with BodyReader(folder, machine="box") as reader:
        with pytest.raises(ForeignPointerError, match="stored on machine 'crawl-2', not on this one") as err:
            reader.read(str(elsewhere))
        assert (err.value.machine, err.value.here) == ("crawl-2", "box")
        with pytest.raises(ForeignPointerError):
            reader.read_meta(elsewhere)
        with pytest.raises(StoreError, match="no writer folder w7"):
            reader.read("box/w7/0:0:10")
    # Names the store has written under stay local: a host renamed, a container's new name.
    with BodyReader(folder, machine="renamed") as reader:
        assert reader.read(str(pointer)).body == b"here"
        assert reader.lookup("https://example.com/").pointer.machine == "renamed"  # type: ignore[union-attr]
    assert (folder / "MACHINES").read_text() == "box\n"


def test_writer_folders_are_claimed_first_free_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stores = [SiteBodyStore.open(data, "shop", machine="box", fsync="never") for _ in range(3)]
    assert [s.writer for s in stores] == ["w0", "w1", "w2"]
    assert stores[0].folder == bodies_folder(data, "shop")
    stores[1].close()
    with SiteBodyStore.open(data, "shop", machine="box") as again:
        assert again.writer == "w1"
    for store in stores:
        store.close()
    with SiteBodyStore.open(data, "shop") as default:
        assert default.machine == socket.gethostname() == machine_name()
        assert default.writer == "w0"
    assert (bodies_folder(data, "shop") / "MACHINES").read_text() == f"box\n{socket.gethostname()}\n"


@pytest.mark.parametrize("name", ["", "two words", "a/b", "tab\there", "bell\x07"])
def test_machine_names_that_cannot_go_in_a_pointer(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="machine name"):
        SiteBodyStore(tmp_path, machine=name)
    with pytest.raises(ValueError, match="machine name"):
        BodyReader(tmp_path, machine=name)
    assert not (tmp_path / "w0").exists()


def test_verify_names_the_writer_folder_of_a_corrupt_record(tmp_path: Path) -> None:
    folder = tmp_path / "bodies"
    with SiteBodyStore(folder, machine="box") as first, SiteBodyStore(folder, machine="box") as second:
        first.append("https://example.com/a", b"a" * 500, fetch_time=1.0)
        victim = second.append("https://example.com/b", b"b" * 500, fetch_time=1.0)
    segment = _files.segment_path(folder / "w1", victim.segment)
    data = bytearray(segment.read_bytes())
    data[victim.offset + victim.length - 10] ^= 0x01
    segment.write_bytes(bytes(data))
    report = verify(folder)
    assert report.records_ok == 1 and [d.writer for d in report.corrupt] == ["w1"]
    assert str(report.corrupt[0]).startswith(f"w1/segment 0 bytes {victim.offset}..")
    skipped = export_warc(folder, io.BytesIO()).skipped
    assert [(p.writer, p.bare()) for p in skipped] == [("w1", victim.bare())]
