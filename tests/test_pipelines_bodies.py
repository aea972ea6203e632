"""BodyStorePipeline end to end: bodies of a real crawl of the demo shop stored only when their
content changed (record hash, or body hash by setting), read back whole, the crawl state
pointing at each page's latest one (land operation "B"); hostile bodies (empty, huge, binary,
invalid UTF-8) stored faithfully."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from tests.runtimes import host_of
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
from webcrawl.pipelines.bodystore import BodyStorePipeline, bodies_folder
from webcrawl.sites import load_site_file
from webcrawl.state.pagestore import hash_bytes
from webcrawl.store import BodyReader, Pointer, body_hash, verify

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
    bodies: dict[str, tuple[str, str, float]]  # url -> (pointer, body hash, fetch time) in Redis
    folder: Any
    site_file: str
    port: int


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis, state) -> Scenario:
    """Three crawls: record mode twice (nothing changed between them), then body mode; before
    the second and third every page is made due."""
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
    crawls = [crawl(tmp, shop, redis_url, urls, "1", site_file=site_file, **store)]
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "2", site_file=site_file, **store))
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "3", site_file=site_file,
                        WEBCRAWL_BODY_STORE_CHANGE="body", **store))
    pages = {u: state.record(u) for u in urls}
    bodies = {u: state.pages.body(u, host_of(u)) for u in urls}
    return Scenario(products, hostile, served, crawls, pages, bodies,
                    bodies_folder(tmp / "data", "demo"), str(site_file), shop.server.port)


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
            pointer, digest, when = scenario.bodies[url]
            assert (pointer, digest, when) == (str(newest.pointer), newest.content_hash, newest.fetch_time)
            older = reader.lookup(url, as_of=newest.fetch_time - 1e-3)
            assert older is not None and older.fetch_time < newest.fetch_time
            assert older.body != newest.body


@pytest.mark.parametrize("kind", ["binary", "latin", "empty"])
def test_hostile_bodies_are_stored_exactly(scenario, kind):
    url = scenario.hostile[kind]
    with BodyReader(scenario.folder) as reader:
        stored = reader.lookup(url)
    assert stored is not None and stored.body == scenario.served[url]
    assert scenario.bodies[url][0] == str(stored.pointer)


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
    assert report.ok and report.records_ok == 10 and report.torn_bytes == 0
    assert report.segments >= 3  # 100 KB segments rotate
    assert Pointer.parse(scenario.bodies[scenario.hostile["huge"]][0]).length > 0


def test_bad_settings_are_refused(redis_client):
    for kwargs, name in (({"change": "html"}, "WEBCRAWL_BODY_STORE_CHANGE"),
                         ({"max_bytes": -1}, "WEBCRAWL_BODY_STORE_MAX_BYTES"),
                         ({"fsync": "sometimes"}, "WEBCRAWL_BODY_STORE_FSYNC"),
                         ({"segment_bytes": 0}, "WEBCRAWL_BODY_STORE_SEGMENT_MB")):
        with pytest.raises(ValueError, match=name):
            BodyStorePipeline(None, None, "/tmp", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot name a folder"):
        bodies_folder("/tmp", "../x")
