"""A real ``scrapy crawl <site>`` of a small hostile site: sitemaps as a sitemap index, a ``.xml.gz``
file and a sitemap sent with ``Content-Encoding: gzip``; pages that only the sitemaps list; a PDF,
a binary body sent as text/html, an empty page, broken UTF-8, a 404 and a 500. The crawl ends
normally, fetches what it should, and counts the oddities."""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.crawls import finish, start_crawl, stats_of
from webcrawl.demo.server import Headers, MultiHostServer, Response

HTML = {"Content-Type": "text/html; charset=utf-8"}
XML = {"Content-Type": "application/xml"}
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


class HostileSite:
    """One host. ``/`` links the odd pages; items 0-2 are listed only in the sitemaps."""

    def bind(self, hosts: Sequence[str], port: int) -> None:
        self.base = f"http://{hosts[0]}:{port}"

    def _urlset(self, *paths: str) -> bytes:
        urls = "".join(f"<url><loc>{self.base}{p}</loc><lastmod>2026-0{i + 1}-01</lastmod></url>"
                       for i, p in enumerate(paths))
        return f"<?xml version='1.0'?><urlset {NS}>{urls}</urlset>".encode()

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        page = lambda body: (200, HTML, f"<html><body><h1>{body}</h1></body></html>".encode())  # noqa: E731
        routes: dict[str, Response] = {
            "/robots.txt": (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /secret\n"),
            "/sitemap.xml": (200, XML, (
                f"<?xml version='1.0'?><sitemapindex {NS}><sitemap><loc>{self.base}/maps/a.xml.gz</loc>"
                f"</sitemap><sitemap><loc>{self.base}/maps/b.xml</loc></sitemap></sitemapindex>").encode()),
            "/maps/a.xml.gz": (200, {"Content-Type": "application/gzip"},
                               gzip.compress(self._urlset("/item/0", "/item/1"))),
            "/maps/b.xml": (200, {**XML, "Content-Encoding": "gzip"},
                            gzip.compress(self._urlset("/item/2", "/secret/3"))),
            "/": (200, HTML, b"<html><body><a href='/report.pdf?v=1'>pdf</a> <a href='/bin'>bin</a>"
                             b" <a href='/empty'>e</a> <a href='/latin'>l</a> <a href='/gone'>g</a>"
                             b" <a href='/boom'>b</a></body></html>"),
            "/report.pdf?v=1": (200, {"Content-Type": "application/pdf"}, b"%PDF-1.4\n" + bytes(500)),
            "/bin": (200, HTML, b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
            "/empty": (200, HTML, b""),
            "/latin": (200, HTML, b"<html><body><h1>caf\xe9 cr\xe8me \xff</h1></body></html>"),
            "/boom": (500, HTML, b"oops"),
        }
        if path.startswith("/item/"):
            return page(f"Item {path[6:]}")
        return routes.get(path, (404, HTML, b"<html><body>not found</body></html>"))


SITE_FILE = """\
name = "hostile"
seeds = ["{base}/"]
sitemaps = ["{base}/sitemap.xml"]
allowed_domains = ["{host}"]
allowed_private_networks = ["127.0.0.0/8"]
[politeness]
user_agent = "webcrawl-tests/0.1 (+https://example.org/tests; tests@example.org)"
min_delay_seconds = 0
[budget]
billing = "requests"
amount_per_cycle = 1000
cycle_seconds = 3600
[limits]
denied_extensions = ["png"]
[[page_types]]
name = "item"
url_pattern = '/item/\\d+$'
[page_types.fields]
title = "h1"
[[page_types]]
name = "other"
url_pattern = '/(bin|empty|latin|report\\.pdf)'
"""


@pytest.fixture
def server() -> Iterator[MultiHostServer]:
    with MultiHostServer(HostileSite(), hosts=1) as running:
        yield running


def test_hostile_site_crawl(server: MultiHostServer, redis_url: str, tmp_path: Path) -> None:
    sites = tmp_path / "sites"
    sites.mkdir()
    base = server.base_url(0)
    (sites / "hostile.toml").write_text(SITE_FILE.format(base=base, host=server.hosts[0]))
    crawl = start_crawl("hostile", {
        "WEBCRAWL_SITES_DIR": sites, "WEBCRAWL_REDIS_URL": redis_url,
        "WEBCRAWL_DATA_DIR": tmp_path / "data", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
        "RETRY_ENABLED": False,
    }, tmp_path)
    assert finish(crawl, 60) == 0
    log = (tmp_path / "crawl.log").read_text()
    stats = stats_of(log)
    assert stats["finish_reason"] == "finished" and "Traceback" not in log, log[-3000:]
    fetched = {e.path for e in server.log()}
    assert {"/item/0", "/item/1", "/item/2", "/maps/a.xml.gz", "/maps/b.xml"} <= fetched
    assert "/secret/3" not in fetched  # listed in a sitemap, refused by robots.txt
    assert stats["webcrawl/sitemap/sitemapindex"] == 1 and stats["webcrawl/sitemap/urlset"] == 2
    assert stats["webcrawl/sitemap/gzip"] == 1 and stats["webcrawl/sitemap/lastmod"] == 4
    assert stats["webcrawl/spider/items/page/item"] == 3
    for kind in ("pdf", "binary", "empty"):
        assert stats[f"webcrawl/parse/pages/{kind}"] == 1, kind
    assert stats["webcrawl/parse/encoding/broken"] == 1
    assert stats["robotstxt/forbidden"] == 1
    assert stats.get("spider_exceptions", 0) == 0 and "log_count/ERROR" not in stats
