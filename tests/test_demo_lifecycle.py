"""The demo shop's product lifecycle: births, deaths (404/410), restores, moves (301/308) and
temporary redirects (302/307), served over real HTTP and agreeing with the shop's truth.

Real servers on 127.0.0.x. The shop's clock is frozen (``time_scale`` 1e-9) and moved from event
to event with ``site.clock.advance``; the subprocess test starts its shop at a chosen point of the
lifecycle through ``clock_origin`` instead.
"""

from __future__ import annotations

import functools
import http.client
import math
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from selectolax.lexbor import LexborHTMLParser

from webcrawl.demo import serve
from webcrawl.demo.catalog import EPOCH, Catalog
from webcrawl.demo.lifecycle import Fate, Lifecycle, State
from webcrawl.demo.serve import start_server_process
from webcrawl.demo.server import MultiHostServer
from webcrawl.demo.shop import RECORD_FIELDS, ShopSite
from webcrawl.parse import PageParser, rules_for_site
from webcrawl.sites import load_site_file

FROZEN = 1e-9  # time_scale at which the shop's time stands still but for advance()
# Fates begin 100-1100 s after the epoch; seed 7 gives every kind and status among 48 products.
LIFECYCLE = Lifecycle(start=100, span=1000, birth_share=0.1, death_share=0.25, move_share=0.15,
                      temp_share=0.1, dead_for=(200, 400), temp_for=(100, 200))
SHOP = {"seed": 7, "products": 48, "categories": 4, "large_page_kb": 16, "lifecycle": LIFECYCLE}


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


@pytest.fixture
def shop() -> Iterator[ShopSite]:
    site = ShopSite(time_scale=FROZEN, **SHOP)  # type: ignore[arg-type]
    with MultiHostServer(site, hosts=4):
        yield site


def at(site: ShopSite, t: float) -> None:
    """Move the frozen shop's time to ``t``."""
    site.clock.advance(t - site.now())
    assert abs(site.now() - t) < 1e-3


def fated(site: ShopSite, kind: str, status: int, restored: bool | None = None) -> tuple[int, Fate]:
    """The first product of a fate of ``kind`` and ``status`` (a death restored or not)."""
    for i in range(len(site.catalog)):
        fate = site.catalog.fate(i)
        if fate and fate.kind == kind and fate.status == status and \
                restored in (None, math.isfinite(fate.end)):
            return i, fate
    raise AssertionError(f"no {kind} {status} fate among the products")


def listed(site: ShopSite) -> dict[int, str]:
    """Every product the category listings show now: index -> absolute link."""
    found: dict[int, str] = {}
    for c in range(len(site.catalog.category_names)):
        url: str | None = site.category_url(c)
        while url:
            status, _, body = fetch(url)
            assert status == 200, url
            tree = LexborHTMLParser(body)
            for item in tree.css("li.item"):
                found[int(item.attributes["data-index"] or -1)] = urljoin(
                    url, item.css_first("a.name").attributes["href"] or "")
            nxt = tree.css_first("a.next")
            url = urljoin(url, nxt.attributes["href"] or "") if nxt else None
    return found


def sitemapped(site: ShopSite) -> set[str]:
    """Every URL of every host's sitemap now."""
    ns, urls = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}, set()
    for host in site.hosts:
        body = fetch(f"http://{host}:{site.port}/sitemap.xml")[2]
        urls |= {loc.text or "" for loc in ET.fromstring(body).iterfind("s:url/s:loc", ns)}
    return urls


@functools.cache
def demo_parser() -> PageParser:
    return PageParser(rules_for_site(load_site_file(files("webcrawl.sites") / "demo.toml")))


def served_record(url: str, body: bytes) -> dict[str, object] | None:
    """The record the crawler takes from a product page with the demo site file's rules."""
    return demo_parser().parse(body, url).stable_record()


@pytest.mark.parametrize("status", [404, 410])
def test_a_product_dies_and_comes_back(shop: ShopSite, status: int) -> None:
    i, fate = fated(shop, "death", status, restored=True)
    url = shop.product_url(i)
    assert shop.lifecycle_events(i) == [("died", fate.start), ("restored", fate.end)]
    at(shop, fate.start - 1)
    code, before, _ = fetch(url)
    assert code == 200 and listed(shop)[i] == url and url in sitemapped(shop)
    assert shop.product_state(i) == State("alive", 200)

    at(shop, fate.start + 1)
    assert fetch(url)[0] == status and shop.answer(url) == (status, None)
    assert shop.product_state(i) == State("dead", status)
    assert i not in listed(shop) and url not in sitemapped(shop)
    assert shop.product_url(i) == url  # a dead product keeps its URL

    at(shop, fate.end + 1)
    code, after, body = fetch(url)
    assert code == 200 and listed(shop)[i] == url and url in sitemapped(shop)
    assert served_record(url, body) == shop.page_record(i)
    # A restored page is a new resource: validators kept from before its death earn no 304.
    assert after["ETag"] != before["ETag"]
    assert fetch(url, {"If-None-Match": before["ETag"]})[0] == 200
    assert fetch(url, {"If-Modified-Since": before["Last-Modified"]})[0] == 200
    assert fetch(url, {"If-None-Match": after["ETag"]})[0] == 304


def test_a_death_without_return(shop: ShopSite) -> None:
    i, fate = fated(shop, "death", 410, restored=False)
    assert shop.lifecycle_events(i) == [("died", fate.start)]
    at(shop, fate.start + 10 * 86_400)
    assert fetch(shop.product_url(i))[0] == 410 and i not in listed(shop)


@pytest.mark.parametrize("status", [301, 308])
def test_a_move_redirects_for_good_and_links_show_the_new_url(shop: ShopSite, status: int) -> None:
    i, fate = fated(shop, "move", status)
    old = shop.product_url(i)
    at(shop, fate.start - 1)
    assert fetch(old)[0] == 200
    etag = fetch(old)[1]["ETag"]

    at(shop, fate.start + 1)
    new = shop.product_url(i)
    assert new == old + "-" + fate.suffix and shop.lifecycle_events(i) == [("moved", fate.start)]
    code, headers, _ = fetch(old)
    assert (code, headers["Location"]) == (status, new) == shop.answer(old)
    assert shop.product_state(i) == State("moved", status, new)
    code, headers, body = fetch(new)
    assert code == 200 and served_record(new, body) == shop.page_record(i)
    assert fetch(new, {"If-None-Match": etag})[0] == 200  # validators carried over the redirect
    assert listed(shop)[i] == new
    links = sitemapped(shop)
    assert new in links and old not in links
    index = fetch(f"http://{urlsplit(new).hostname}:{shop.port}/")[2]  # the shard's own list
    assert f'{urlsplit(new).path}"'.encode() in index and f'{urlsplit(old).path}"'.encode() not in index
    # Any other slug is an old link: 301 to the product's URL, whatever the move answers.
    assert shop.answer(old + "-2025") == (301, new) == (fetch(old + "-2025")[0], new)
    assert shop.product_index(new) == i and shop.product_index(old) is None
    assert shop.product_index(old, fate.start - 1) == i


@pytest.mark.parametrize("status", [302, 307])
def test_a_temporary_redirect_lasts_its_window(shop: ShopSite, status: int) -> None:
    i, fate = fated(shop, "temp", status)
    url, target = shop.product_url(i), shop.category_url(shop.catalog.products[i].category)
    assert shop.lifecycle_events(i) == [("redirected", fate.start), ("redirect_ended", fate.end)]
    at(shop, fate.start + 1)
    code, headers, _ = fetch(url)
    assert (code, headers["Location"]) == (status, target) == shop.answer(url)
    assert shop.product_state(i) == State("temp", status, target)
    assert fetch(target)[0] == 200
    assert listed(shop)[i] == url and url in sitemapped(shop)  # not a move: still the product's URL
    at(shop, fate.end + 1)
    assert fetch(url)[0] == 200 and shop.product_state(i) == State("alive", 200)


def test_a_product_is_born(shop: ShopSite) -> None:
    i, fate = fated(shop, "birth", 404)
    url = shop.product_url(i)
    shard = f"http://{urlsplit(url).hostname}:{shop.port}/"
    assert shop.lifecycle_events(i) == [("born", fate.start)]
    at(shop, fate.start - 1)
    assert fetch(url)[0] == 404 and shop.product_state(i) == State("unborn", 404)
    assert i not in listed(shop) and url not in sitemapped(shop)
    assert urlsplit(url).path.encode() not in fetch(shard)[2]
    at(shop, fate.start + 1)
    code, _, body = fetch(url)
    assert code == 200 and served_record(url, body) == shop.page_record(i)
    assert listed(shop)[i] == url and url in sitemapped(shop)
    assert urlsplit(url).path.encode() in fetch(shard)[2]


def test_the_truth_is_what_the_server_serves(shop: ShopSite) -> None:
    """Around every lifecycle event, each product's first and last URL answer what
    ``answer`` says, ``product_state`` agrees with the first, and listings with ``listed``."""
    events = sorted({t for i in range(len(shop.catalog)) for _, t in shop.lifecycle_events(i)})
    assert len(events) > 20
    for t in [EPOCH, *(e + d for e in events[::4] for d in (-0.5, 0.5))]:
        at(shop, t)
        shown = listed(shop)
        assert set(shown) == {i for i in range(len(shop.catalog)) if shop.catalog.listed(i, t)}
        for i in range(len(shop.catalog)):
            first, last = shop.product_url(i, EPOCH), shop.product_url(i, math.inf)
            for url in {first, last}:
                code, headers, body = fetch(url)
                assert (code, headers["Location"]) == shop.answer(url), (i, url, t)
                if code == 200:
                    assert served_record(url, body) == shop.page_record(i), (i, t)
            state = shop.product_state(i)
            assert (state.status, state.location) == shop.answer(first), (i, t)
            if i in shown:
                assert shown[i] == shop.product_url(i)


def test_lifecycle_is_drawn_from_the_seed_and_leaves_records_alone() -> None:
    a, b, plain = Catalog(3, lifecycle=LIFECYCLE), Catalog(3, lifecycle=LIFECYCLE), Catalog(3)
    assert a.fates == b.fates and any(a.fates) and not any(plain.fates)
    assert a.fates != Catalog(4, lifecycle=LIFECYCLE).fates
    times = [EPOCH + k * 300.0 for k in range(6)]
    assert all(a.record(i, t) == plain.record(i, t) for t in times for i in range(0, 200, 3))
    # Another share changes which products meet a fate, never when theirs happens.
    other = Catalog(3, lifecycle=Lifecycle(**{**LIFECYCLE.__dict__, "temp_share": 0.2}))
    assert all(f is None or g is None or f.start == g.start for f, g in zip(a.fates, other.fates))
    big = Catalog(1, products=4000, lifecycle=LIFECYCLE)
    kinds = [f.kind for f in big.fates if f is not None]
    for kind, share in (("birth", 0.1), ("death", 0.25), ("move", 0.15), ("temp", 0.1)):
        assert abs(kinds.count(kind) / 4000 - share) < 0.03, kind
    assert all(EPOCH + 100 <= f.start < EPOCH + 1100 for f in big.fates if f is not None)


def test_a_record_at_a_version_is_the_record_at_its_time() -> None:
    site = ShopSite(seed=2, time_scale=FROZEN, products=20)
    for i in range(20):
        for t in site.change_times(i, EPOCH, EPOCH + 86_400)[:5]:
            v = site.product_version(i, t)
            assert site.catalog.record_at(i, v) == site.catalog.record(i, t)
            assert site.page_record(i, version=v) == site.page_record(i, t)
            assert site.page_record(i, version=v - 1) != site.page_record(i, version=v)
    with pytest.raises(ValueError):
        site.catalog.record_at(0, -1)
    demo = load_site_file(files("webcrawl.sites") / "demo.toml")
    product = next(p for p in demo.page_types if p.name == "product")
    assert RECORD_FIELDS == tuple(f.name for f in product.fields if f.name not in product.volatile)


def test_lifecycle_text_round_trips_and_errors_name_the_item() -> None:
    assert Lifecycle.parse("on") == Lifecycle() and Lifecycle().spec() == "on"
    assert Lifecycle.parse(LIFECYCLE.spec()) == LIFECYCLE
    assert Lifecycle.parse("start=1767225600.5,dead_for=1:2").start == 1767225600.5
    for bad, words in (("speed=3", "speed=3"), ("death_share=x", "not a number"),
                       ("dead_for=5", "low:high"), ("death_share=0.9,move_share=0.2", "exceed 1"),
                       ("dead_for=3:1", "dead_for")):
        with pytest.raises(ValueError, match=words):
            Lifecycle.parse(bad)
    with pytest.raises(SystemExit) as done:
        serve.main(["--lifecycle", "speed=3"])
    assert done.value.code == 2


def test_the_served_lifecycle_in_a_subprocess(tmp_path: Path) -> None:
    """``python -m webcrawl.demo.serve --lifecycle ...`` started 600 s into the fates' window (its
    clock running in real time): what it serves is the truth of its local copy."""
    origin = time.time() - 600
    with start_server_process("shop", 4, tmp_path / "log.jsonl", time_scale=1.0,
                              clock_origin=origin, **SHOP) as child:
        site = child.site
        assert child.ready["options"]["lifecycle"] == LIFECYCLE.spec()
        assert site.catalog.lifecycle == LIFECYCLE and site.clock.origin == origin
        checked = set()
        for i in range(len(site.catalog)):
            now = site.now()
            if any(abs(t - now) < 5 for _, t in site.lifecycle_events(i)):
                continue  # an event may fall between the truth and the request
            url = site.product_url(i, EPOCH)
            code, headers, _ = fetch(url)
            assert (code, headers["Location"]) == site.answer(url), (i, url)
            checked.add(site.product_state(i).state)
        assert checked >= {"alive", "dead", "moved"}
