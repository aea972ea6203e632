"""The demo shop: deterministic truth, noise, change rates, validators, robots, sitemaps, traps.

Real servers on 127.0.0.x; time is controlled through the shop's ``time_scale`` (tiny to freeze
it, huge to make changes happen within a test), never by sleeping.
"""

from __future__ import annotations

import http.client
import math
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from urllib.parse import urljoin, urlsplit

import pytest
from selectolax.lexbor import LexborHTMLParser

from webcrawl.demo.server import MultiHostServer
from webcrawl.demo.catalog import DAY, EPOCH, Catalog
from webcrawl.demo.shop import ShopSite

FROZEN = 1e-9  # time_scale at which no product changes during a test


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def extract(body: bytes) -> dict[str, str]:
    tree = LexborHTMLParser(body)
    return {field: tree.css_first(f"article .{css}").text(strip=True) for field, css in (
        ("name", "name"), ("price", "price"), ("stock", "stock"), ("description", "desc"),
        ("sku", "sku"), ("category", "category"))}


def as_page(record: dict[str, str | int]) -> dict[str, str]:
    return {k: str(v) for k, v in record.items()}


@pytest.fixture
def frozen_shop() -> Iterator[tuple[ShopSite, MultiHostServer]]:
    site = ShopSite(seed=7, time_scale=FROZEN, large_page_kb=256, ignore_validators=(3,),
                    lying_validators=(2,), products=120, crawl_delay=0.5)
    with MultiHostServer(site, hosts=5) as server:
        yield site, server


def test_records_are_a_function_of_seed_product_and_time() -> None:
    a, b = Catalog(seed=3), Catalog(seed=3)
    times = [EPOCH + k * 7 * DAY for k in range(6)]
    # b is queried far in the future first: lazy generation must not depend on query order.
    late = [b.record(i, times[-1]) for i in range(len(b))]
    assert [a.record(i, times[-1]) for i in range(len(a))] == late
    assert all(a.record(i, t) == b.record(i, t) for t in times for i in range(0, 200, 7))
    assert any(Catalog(seed=4).record(i, times[0]) != a.record(i, times[0]) for i in range(20))


def test_each_change_alters_the_record_and_nothing_else_does() -> None:
    catalog, end = Catalog(seed=11), EPOCH + 20 * DAY
    checked = 0
    for i in range(len(catalog)):
        for t in catalog.change_times(i, EPOCH, end)[:20]:
            before, after = catalog.record(i, math.nextafter(t, 0)), catalog.record(i, t)
            assert before != after
            assert {k for k in after if after[k] != before[k]} <= {"price", "stock", "description"}
            assert catalog.version(i, t) == catalog.version(i, math.nextafter(t, 0)) + 1
            assert catalog.last_change(i, t + 1) == t
            checked += 1
    assert checked > 500


def test_change_counts_follow_the_configured_rates() -> None:
    catalog, horizon = Catalog(seed=5), 60 * DAY
    rates = [catalog.change_rate(i) for i in range(len(catalog))]
    positive = [r for r in rates if r > 0]
    assert 0.05 * len(rates) < rates.count(0) < 0.3 * len(rates)  # some never change
    assert max(positive) / min(positive) > 300  # fast and slow products
    expected_total = observed_total = 0.0
    for i, rate in enumerate(rates):
        observed = len(catalog.change_times(i, EPOCH, EPOCH + horizon))
        expected = rate * horizon
        if rate == 0:
            assert observed == 0
        elif expected > 100:
            assert abs(observed - expected) < 5 * math.sqrt(expected), (i, observed, expected)
        expected_total += expected
        observed_total += observed
    assert abs(observed_total / expected_total - 1) < 0.05


def test_served_record_is_the_truth_and_noise_changes_between_loads(frozen_shop) -> None:
    site, server = frozen_shop
    for i in (0, 1, 2, 57):
        url = site.product_url(i)
        (s1, h1, b1), (s2, h2, b2) = fetch(url), fetch(url)
        assert s1 == s2 == 200 and b1 != b2  # timestamp, ad slot, tokens
        assert extract(b1) == extract(b2) == as_page(site.catalog.record(i, site.now()))
        assert h1["ETag"] == h2["ETag"] and h1["Last-Modified"] == h2["Last-Modified"]
        assert 10_000 <= len(b1) <= 60_000
        assert "?sid=" in b1.decode()
    assert site.product_index(site.product_url(57) + "?sid=abc") == 57
    assert site.product_index(server.base_url(0) + "/product/57/x") is None
    moved = site.product_url(57).rsplit("/", 1)[0] + "/old-name"
    assert site.product_index(moved) is None
    status, headers, _ = fetch(moved)
    assert (status, headers["Location"]) == (301, site.product_url(57))


def test_listings_show_every_product_once_with_its_record(frozen_shop) -> None:
    site, server = frozen_shop
    seen: dict[int, dict[str, str]] = {}
    pages = 0
    for c in range(len(site.catalog.category_names)):
        url: str | None = site.category_url(c)
        while url:
            status, _, body = fetch(url)
            assert status == 200 and 10_000 <= len(body) <= 60_000
            pages += 1
            tree = LexborHTMLParser(body)
            for item in tree.css("li.item"):
                i = site.product_index(urljoin(url, item.css_first("a.name").attributes["href"]))
                assert i is not None and i not in seen
                seen[i] = {k: item.css_first(f".{k}").text(strip=True) for k in ("name", "price", "stock")}
            nxt = tree.css_first("a.next")
            url = urljoin(url, nxt.attributes["href"]) if nxt else None
    assert pages > len(site.catalog.category_names)  # some categories span several pages
    now = site.now()
    assert seen == {i: {k: str(v) for k, v in site.catalog.record(i, now).items()
                        if k in ("name", "price", "stock")} for i in range(len(site.catalog))}


def test_conditional_requests(frozen_shop) -> None:
    site, server = frozen_shop
    honest, lying, ignoring = (next(i for i in range(30) if site.product_url(i).startswith(
        server.base_url(h))) for h in (1, 2, 3))
    for i, answer in ((honest, 304), (lying, 304), (ignoring, 200)):
        status, headers, _ = fetch(site.product_url(i))
        assert status == 200 and headers["ETag"] == f'"p{i}-v0"'
        assert fetch(site.product_url(i), {"If-None-Match": headers["ETag"]})[0] == answer
        assert fetch(site.product_url(i), {"If-Modified-Since": headers["Last-Modified"]})[0] == answer
    assert fetch(site.product_url(honest), {"If-None-Match": '"p0-v99"'})[0] == 200
    old = "Mon, 01 Jan 2001 00:00:00 GMT"
    assert fetch(site.product_url(honest), {"If-Modified-Since": old})[0] == 200
    assert fetch(site.product_url(lying), {"If-Modified-Since": old})[0] == 304  # the lie


def test_validators_follow_changes_over_time() -> None:
    """At a day per real millisecond, a fast product changes between two requests."""
    site = ShopSite(seed=2, time_scale=86_400_000, products=40, min_change_interval=600,
                    max_change_interval=3600, never_change_share=0, lying_validators=(1,))
    with MultiHostServer(site, hosts=3):
        assert site.shards == [site.hosts[1]]
        _, headers, _ = fetch(site.product_url(0))
        # Host 1 lies: 304 although a simulated day per millisecond has changed the record.
        assert fetch(site.product_url(0), {"If-None-Match": headers["ETag"]})[0] == 304
        assert site.catalog.version(0, site.now()) > int(headers["ETag"].strip('"').split("v")[1])
    site = ShopSite(seed=2, time_scale=86_400_000, products=40, min_change_interval=600,
                    max_change_interval=3600, never_change_share=0)
    with MultiHostServer(site, hosts=3) as server:
        first = fetch(site.product_url(0))
        status, headers, body = fetch(site.product_url(0), {"If-None-Match": first[1]["ETag"]})
        assert status == 200 and headers["ETag"] != first[1]["ETag"]


def test_robots_and_sitemaps(frozen_shop) -> None:
    site, server = frozen_shop
    listed: list[str] = []
    now = site.now()
    for host in server.hosts:
        status, _, robots = fetch(server.base_url(host) + "/robots.txt")
        text = robots.decode()
        assert status == 200 and "Disallow: /cart" in text and "Disallow: /search" in text
        assert "Crawl-delay: 0.5" in text and f"Sitemap: {server.base_url(host)}/sitemap.xml" in text
        status, _, body = fetch(server.base_url(host) + "/sitemap.xml")
        ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
        for url in ET.fromstring(body).findall("s:url", ns):
            loc, lastmod = url.find("s:loc", ns).text, url.find("s:lastmod", ns)
            assert loc.startswith(server.base_url(host))
            if (i := site.product_index(loc)) is not None:
                assert lastmod.text == time.strftime(
                    "%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(site.catalog.last_change(i, now)))
            listed.append(loc)
    assert sorted(i for u in listed if (i := site.product_index(u)) is not None) == \
        list(range(len(site.catalog)))
    assert fetch(server.base_url(0) + "/cart")[0] == 200  # disallowed, not missing


def test_hostile_pages_are_linked_and_hostile(frozen_shop) -> None:
    site, server = frozen_shop
    _, _, index = fetch(server.base_url(0) + "/")
    hrefs = {a.attributes["href"] for a in LexborHTMLParser(index).css("a")}
    blog = server.base_url(4)
    for path in ("/calendar/2026/12", "/files/report.html", "/legacy/latin.html",
                 "/archive/everything.html"):
        assert blog + path in hrefs
    assert any(h.startswith(server.base_url(1) + "/product/") for h in hrefs)  # cross-host
    status, headers, binary = fetch(blog + "/files/report.html")
    assert headers["Content-Type"] == "text/html" and b"\x00" in binary
    with pytest.raises(UnicodeDecodeError):
        fetch(blog + "/legacy/latin.html")[2].decode("utf-8")
    url = blog + "/calendar/2026/12"
    for _ in range(30):  # the trap never ends
        status, _, body = fetch(url)
        assert status == 200
        url = urljoin(url, LexborHTMLParser(body).css_first("a.next").attributes["href"])
    assert url == blog + "/calendar/2029/6"
    assert len(fetch(blog + "/archive/everything.html")[2]) >= 256 * 1024


@pytest.mark.parametrize("hosts", [1, 2])
def test_few_hosts_serve_every_role(hosts: int) -> None:
    site = ShopSite(seed=1, time_scale=FROZEN, products=30, categories=3, large_page_kb=16)
    with MultiHostServer(site, hosts=hosts) as server:
        for url in (server.base_url(0) + "/", site.category_url(2), site.product_url(29),
                    server.base_url(0) + "/calendar/2026/1", server.base_url(hosts - 1) + "/sitemap.xml"):
            assert fetch(url)[0] == 200, url
        assert fetch(server.base_url(0) + "/nowhere")[0] == 404


def test_throttled_host_answers_429_with_retry_after() -> None:
    site = ShopSite(seed=1, time_scale=FROZEN, products=20, throttle_hosts=(0,), throttle_seconds=30)
    with MultiHostServer(site, hosts=3) as server:
        assert fetch(server.base_url(0) + "/")[0] == 200
        status, headers, _ = fetch(server.base_url(0) + "/")
        assert (status, headers["Retry-After"]) == (429, "30")
        assert fetch(server.base_url(0) + "/robots.txt")[0] == 200
        assert fetch(site.product_url(0))[0] == fetch(site.product_url(0))[0] == 200  # other host
        assert [e.status for e in server.log() if e.host == server.hosts[0]] == [200, 429, 200]
