"""``scrapy body``: the stored bodies of a real crawl, printed, looked up as of a time, verified
(also after a flipped byte) and exported to WARC, through the real command line."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from scrapy.exceptions import UsageError
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator

from tests.test_pipelines_recordhash import (  # noqa: F401
    HONEST,
    ROOT,
    crawl,
    files_site,
    module_redis,
    module_shop,
    state,
)
from webcrawl.commands._times import parse_time
from webcrawl.commands.body import Command
from webcrawl.demo.catalog import DAY
from webcrawl.store import BodyReader, BodyWriter, Pointer, SiteBodyStore, bodies_folder


@dataclass
class Scenario:
    data: Path
    urls: list[str]
    changed: list[str]
    times: list[float]  # when each crawl started


def scrapy(*args: str, data: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "scrapy", "body", *args, "-s", f"WEBCRAWL_DATA_DIR={data}"],
                          cwd=ROOT, env=env, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis, state) -> Scenario:
    shop, (redis_url, _) = module_shop, module_redis
    tmp = tmp_path_factory.mktemp("bodycommand")
    indices = shop.on_host(HONEST, 3, changing=True)
    urls = [shop.product(i) for i in indices] + [shop.blog("/files/report.html")]
    settings = {"WEBCRAWL_CONDITIONAL_ENABLED": False, "site_file": files_site(tmp)}
    times = [datetime.now(UTC).timestamp()]
    crawl(tmp, shop, redis_url, urls, "1", **settings)
    state.make_due(urls)
    before = shop.site.now()
    shop.jump(3 * DAY)
    changed = [shop.product(i) for i in indices
               if shop.site.catalog.version(i, shop.site.now()) != shop.site.catalog.version(i, before)]
    times.append(datetime.now(UTC).timestamp())
    crawl(tmp, shop, redis_url, urls, "2", **settings)
    return Scenario(tmp / "data", urls, changed, times)


def test_prints_the_latest_body_and_any_older_one_as_of_a_time(scenario, capsys):
    url = scenario.changed[0]
    with BodyReader(scenario.data / "demo" / "bodies") as reader:
        newest, oldest = reader.lookup(url), reader.lookup(url, as_of=scenario.times[1])
    assert newest is not None and oldest is not None and newest.body != oldest.body
    latest = scrapy("demo", url, data=scenario.data)
    assert latest.returncode == 0, latest.stderr
    assert latest.stdout == newest.body
    iso = datetime.fromtimestamp(scenario.times[1], UTC).isoformat()
    older = scrapy("demo", url, "--as-of", iso, data=scenario.data)
    assert older.returncode == 0 and older.stdout == oldest.body
    assert run_in_process(scenario.data, "demo", url + "#fragment", "--meta") == 0  # canonical form
    meta = capsys.readouterr().out
    assert f"url: {url}" in meta and "status: 200" in meta and 'header: ETag: "p' in meta


def test_verify_finds_a_flipped_byte(scenario, tmp_path):
    ok = scrapy("demo", "--verify", data=scenario.data)
    assert ok.returncode == 0 and b"0 corrupt ranges" in ok.stdout
    damaged = tmp_path / "data"
    shutil.copytree(scenario.data, damaged)
    segment = damaged / "demo" / "bodies" / "w0" / "00000000.seg"  # the crawls' writer folder
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    segment.write_bytes(bytes(raw))
    bad = scrapy("demo", "--verify", data=damaged)
    assert bad.returncode == 1 and b"corrupt: w0/segment 0 bytes " in bad.stdout


def test_warc_export_holds_each_urls_latest_body(scenario, tmp_path):
    out = tmp_path / "demo.warc.gz"
    done = scrapy("demo", "--warc", str(out), data=scenario.data)
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as f:
        records = [(r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
                   for r in ArchiveIterator(f) if r.rec_type == "response"]
    assert sorted(u for u, _ in records) == sorted(scenario.urls)
    with BodyReader(scenario.data / "demo" / "bodies") as reader:
        for url, body in records:
            assert body == reader.lookup(url).body


def test_an_unknown_site_is_a_usage_error(scenario):
    done = scrapy("nosuchsite", "http://x.example/", data=scenario.data)
    assert done.returncode == 2 and b"no body store for site 'nosuchsite'" in done.stderr


def run_in_process(data: Path, *argv: str) -> int:
    """The command as ``scrapy body`` runs it, without a new interpreter: its exit status."""
    command = Command()
    command.settings = Settings({"WEBCRAWL_DATA_DIR": str(data)})
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    opts, args = parser.parse_known_args(list(argv))
    command.process_options(args, opts)
    try:
        command.run(args, opts)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # a one-line error (webcrawl.commands._errors.fail)
        return int(exc.code or 0)
    return command.exitcode


@pytest.mark.parametrize(("args", "status", "message"), [
    (("demo", "http://127.0.0.3:1/never"), 1, "no stored body of http://127.0.0.3:1/never"),
    (("demo", "http://x.example/", "--verify"), 2, "exactly one of"),
    (("demo", "http://x.example/", "--pointer", "0:0:10"), 2, "exactly one of"),
    (("demo", "--pointer", "w0/0:0:10"), 2, "--pointer: not a body-store pointer: 'w0/0:0:10'"),
    (("demo", "--pointer", "0:0:10", "--as-of", "1"), 2, "--as-of does not apply to --pointer"),
    (("demo",), 2, "exactly one of"),
    (("demo", "http://x.example/", "--as-of", "yesterday"), 2, "--as-of 'yesterday'"),
    (("../etc", "--verify"), 2, "cannot name a folder"),
])
def test_errors_name_the_problem(scenario, capsys, args, status, message):
    assert run_in_process(scenario.data, *args) == status
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("text", "expected"), [
    ("1767225600", 1767225600.0),
    ("2026-01-01T00:00:00Z", 1767225600.0),
    ("2026-01-01T01:00:00+01:00", 1767225600.0),
    ("2026-01-01 00:00:00", 1767225600.0),
])
def test_parse_time(text, expected):
    assert parse_time(text) == expected


@dataclass
class TwoWriters:
    data: Path
    pointers: dict[str, Pointer]


URL = "https://shop.example/product/1"


@pytest.fixture
def two_writers(tmp_path: Path) -> TwoWriters:
    """A site store written by two crawl processes at once (two writer folders) over a store of
    the layout before writer folders (segments in bodies/, bare pointers)."""
    folder = bodies_folder(tmp_path / "data", "shop")
    with BodyWriter(folder) as legacy:
        oldest = legacy.append(URL, b"<p>legacy</p>", fetch_time=1_700_000_000.0)
    with SiteBodyStore(folder) as first, SiteBodyStore(folder) as second:
        older = first.append(URL, b"<p>first</p>", fetch_time=1_700_000_060.0)
        newest = second.append(URL, b"<p>second</p>", fetch_time=1_700_000_120.0)
        first.append(URL + "?other", b"<p>other</p>", fetch_time=1_700_000_180.0)
    assert (older.writer, newest.writer) == ("w0", "w1")
    return TwoWriters(tmp_path / "data", {"oldest": oldest, "older": older, "newest": newest})


def test_reads_every_writer_folder_of_a_site(two_writers, capsys):
    latest = scrapy("shop", URL, data=two_writers.data)
    assert latest.returncode == 0, latest.stderr
    assert latest.stdout == b"<p>second</p>"  # the newest of both writers
    for as_of, name in (("1700000090", "older"), ("1700000030", "oldest")):
        assert run_in_process(two_writers.data, "shop", URL, "--as-of", as_of, "--meta") == 0
        assert f"pointer: {two_writers.pointers[name]}\n" in capsys.readouterr().out
    assert run_in_process(two_writers.data, "shop", "--verify") == 0
    assert "3 segments, 4 records ok" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["oldest", "older", "newest"])
def test_reads_the_body_at_a_pointer(two_writers, capsys, name):
    pointer = two_writers.pointers[name]
    assert run_in_process(two_writers.data, "shop", "--pointer", str(pointer), "--meta") == 0
    out = capsys.readouterr().out
    assert f"url: {URL}\n" in out and f"pointer: {pointer}\n" in out


def test_a_pointer_of_another_machine_is_one_clear_line(two_writers):
    newest = two_writers.pointers["newest"]
    elsewhere = newest.bare().located("crawl-7", newest.writer)
    done = scrapy("shop", "--pointer", str(elsewhere), data=two_writers.data)
    assert done.returncode == 1 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert lines == [f"error: body {elsewhere} is stored on machine 'crawl-7', not on this one "
                     f"({socket.gethostname()!r}): read it on crawl-7"]
    here = scrapy("shop", "--pointer", str(newest), data=two_writers.data)
    assert here.returncode == 0 and here.stdout == b"<p>second</p>"
