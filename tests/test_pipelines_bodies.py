"""The bodies the record-hash pipeline keeps (webcrawl.pipelines._bodies) end to end: bodies of a
real crawl of the demo shop stored only when their content changed (record hash, or body hash by
setting), before the landing, read back whole; each change event pointing at its stored body and
each page record holding its latest stored body's hash; hostile bodies (empty, huge, binary,
invalid UTF-8) stored faithfully; a crawl beside another writer of the site's store (another
process of the machine) stores its bodies in a writer folder of its own."""

from __future__ import annotations

import socket
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from tests.test_pipelines_recordhash import (  # noqa: F401
    DEMO_FIELDS,
    HONEST,
    Crawl,
    crawl,
    files_site,
    module_redis,
    module_shop,
    state,
)
from webcrawl.change import record_hash
from webcrawl.parse import PageParser, rules_for_site
from webcrawl.pipelines._bodies import BodyKeeper
from webcrawl.sites import load_site_file
from webcrawl.state.pagestore import hash_bytes
from webcrawl.store import BodyReader, Pointer, SiteBodyStore, StoredBody, bodies_folder, body_hash, verify

LIMIT = 1024 * 1024
B = "webcrawl/bodies/"
P = "webcrawl/parse/"


@dataclass
class Scenario:
    products: list[str]
    hostile: dict[str, str]
    served: dict[str, bytes]  # what the shop serves at the deterministic URLs
    crawls: list[Crawl]
    pages: dict[str, Any]
    pointers: dict[str, str]  # url -> the body pointer its "new" event recorded
    folder: Any
    site_file: str
    port: int
    aside: StoredBody  # what the other writer stored during the first crawl


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis, state) -> Scenario:
    """Three crawls: record mode twice (nothing changed between them), then body mode; before
    the second and third every page is made due. During the first, another writer (this test's
    process, as a second crawl process would) holds the site's first writer folder."""
    shop, (redis_url, _) = module_shop, module_redis
    tmp = tmp_path_factory.mktemp("bodystore")
    products = [shop.product(i) for i in shop.on_host(HONEST, 3)]
    hostile = {"binary": shop.blog("/files/report.html"), "latin": shop.blog("/legacy/latin.html"),
               "huge": shop.blog("/archive/everything.html"), "empty": shop.blog("/empty.html")}
    served = {url: urllib.request.urlopen(url, timeout=10).read() for url in hostile.values()}
    urls = products + list(hostile.values())
    store = {"WEBCRAWL_CONDITIONAL_ENABLED": False, "WEBCRAWL_BODY_STORE_MAX_BYTES": LIMIT,
             "WEBCRAWL_BODY_STORE_SEGMENT_MB": 0.1, "WEBCRAWL_BODY_STORE_FSYNC": "always"}
    site_file = files_site(tmp)
    folder = bodies_folder(tmp / "data", "demo")
    with SiteBodyStore(folder, fsync="always") as other:
        assert other.writer == "w0"
        aside = other.append("http://elsewhere.example/", b"stored by another process", fetch_time=1.0)
        crawls = [crawl(tmp, shop, redis_url, urls, "1", site_file=site_file, **store)]
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "2", site_file=site_file, **store))
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "3", site_file=site_file,
                        WEBCRAWL_BODY_STORE_CHANGE="body", **store))
    pages = {u: state.record(u) for u in urls}
    from webcrawl.state.eventlog import EventLog

    pointers = {d.event["canonical_url"]: d.fields["b"]
                for d in EventLog(state.client, state.layout).entries() if d.event["kind"] == "new"}
    with BodyReader(folder) as reader:
        stored_aside = reader.read(aside)
    return Scenario(products, hostile, served, crawls, pages, pointers, folder, str(site_file),
                    shop.server.port, stored_aside)


def test_first_bodies_are_stored_and_read_back_whole(scenario):
    first = scenario.crawls[0].stats
    assert first[B + "stored"] == 7 and B + "skipped" not in first
    assert first[B + "truncated"] == 1
    parser = PageParser(rules_for_site(load_site_file(scenario.site_file, {"WEBCRAWL_DEMO_PORT": str(scenario.port)})))
    with BodyReader(scenario.folder) as reader:
        for url in scenario.products:
            page = scenario.pages[url]
            versions = reader.versions(url)
            assert len(versions) == 2  # record mode once, body mode once
            oldest = reader.read(versions[-1].pointer)
            assert oldest.status == 200 and oldest.content_type.startswith("text/html")
            assert dict(oldest.headers)["ETag"].startswith('"p')
            # The stored body is the one whose record the page record hashed.
            result = parser.parse(oldest.body, url, encoding="utf-8")
            digest = record_hash(result.record, DEMO_FIELDS, {"served_at"})
            assert digest == oldest.content_hash and hash_bytes(digest) == page.hash


def test_a_crawl_beside_another_writer_stores_in_a_folder_of_its_own(scenario):
    assert scenario.crawls[0].stats[B + "stored"] == 7 and B + "errors" not in scenario.crawls[0].stats
    assert scenario.aside.body == b"stored by another process"
    # The first bodies went to w1 (w0 was held); the third crawl's to w0 (free again by then).
    # Each pointer names this machine, and each "new" event points at its page's first body.
    with BodyReader(scenario.folder) as reader:
        for url, pointer in scenario.pointers.items():
            parsed = Pointer.parse(pointer)
            assert parsed.machine == socket.gethostname() and parsed.writer == "w1"
            assert reader.read(parsed).url == url
        for url in scenario.products:  # versions merged across both writer folders
            assert [m.pointer.writer for m in reader.versions(url)] == ["w0", "w1"]
    assert set(scenario.pointers) == set(scenario.products) | set(scenario.hostile.values())


def test_unchanged_content_is_not_stored_again(scenario):
    second = scenario.crawls[1].stats
    assert second["webcrawl/records/unchanged"] == 7
    assert second[B + "skipped"] == 7 and B + "stored" not in second


def test_body_mode_stores_what_differs_byte_for_byte(scenario):
    third = scenario.crawls[2].stats
    # Product pages differ by their noise on every load; the hostile pages are byte-identical.
    assert third[B + "stored"] == 3 and third[B + "skipped"] == 4
    with BodyReader(scenario.folder) as reader:
        for url in scenario.products:
            newest = reader.lookup(url)
            assert newest is not None and newest.content_hash == body_hash(newest.body)
            # The page record keeps the latest stored body's hash: the next body-mode test.
            assert scenario.pages[url].body8.hex() == newest.content_hash[:16]
            older = reader.lookup(url, as_of=newest.fetch_time - 1e-3)
            assert older is not None and older.fetch_time < newest.fetch_time
            assert older.body != newest.body


@pytest.mark.parametrize("kind", ["binary", "latin", "empty"])
def test_hostile_bodies_are_stored_exactly(scenario, kind):
    url = scenario.hostile[kind]
    with BodyReader(scenario.folder) as reader:
        stored = reader.lookup(url)
    assert stored is not None and stored.body == scenario.served[url]
    assert scenario.pointers[url] == str(stored.pointer)
    assert scenario.pages[url].body8.hex() == body_hash(stored.body)[:16]


def test_a_huge_body_is_truncated_for_parsing_and_stored_within_the_limit(scenario):
    url = scenario.hostile["huge"]
    assert len(scenario.served[url]) > 3 * LIMIT
    with BodyReader(scenario.folder) as reader:
        stored = reader.lookup(url)
    assert stored is not None and stored.body == scenario.served[url][:LIMIT]
    stats = scenario.crawls[0].stats
    assert stats[P + "truncated"] == 1  # the parser saw its first parse_bytes only
    assert stats[P + "pages/binary"] == 1 and stats[P + "encoding/broken"] == 1
    assert stats[P + "pages/empty"] == 1


def test_the_store_verifies_and_rotated_segments(scenario):
    report = verify(scenario.folder)
    assert report.ok and report.records_ok == 11 and report.torn_bytes == 0  # 10 and the other writer's
    assert report.segments >= 3  # 100 KB segments rotate
    assert Pointer.parse(scenario.pointers[scenario.hostile["huge"]]).length > 0


def test_bad_settings_are_refused(redis_client):
    for kwargs, name in (({"change": "html"}, "WEBCRAWL_BODY_STORE_CHANGE"),
                         ({"max_bytes": -1}, "WEBCRAWL_BODY_STORE_MAX_BYTES"),
                         ({"fsync": "sometimes"}, "WEBCRAWL_BODY_STORE_FSYNC"),
                         ({"segment_bytes": 0}, "WEBCRAWL_BODY_STORE_SEGMENT_MB"),
                         ({"machine": "two words"}, "WEBCRAWL_MACHINE_NAME: machine name 'two words'")):
        with pytest.raises(ValueError, match=name):
            BodyKeeper(None, "/tmp", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot name a folder"):
        bodies_folder("/tmp", "../x")
