"""Scope on every request, in real ``scrapy crawl <site>`` runs against servers on 127.0.0.x.

The site file allows the network ``127.0.0.0/8``, as the documentation's examples do, so the SSRF
guard alone would let every loopback host through: only the site's scope (``allowed_domains``)
keeps its robots.txt and sitemap redirects at home. Each server logs every connection it gets;
the other host must get none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._hostile_server import HostileServer, iter_gaps, page, redirect, text
from tests.crawls import finish, start_crawl, stats_of

SITE = "127.0.0.81"
OTHER = "127.0.0.82"
SLOW = "127.0.0.83"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'

SITE_FILE = """\
name = "{name}"
seeds = ["{base}/"]
sitemaps = ["{base}/sitemap.xml"]
allowed_domains = ["{host}"]
allowed_private_networks = ["127.0.0.0/8"]
[politeness]
user_agent = "webcrawl-tests/0.1 (+https://example.org/tests; tests@example.org)"
min_delay_seconds = {delay}
[budget]
billing = "requests"
amount_per_cycle = 1000
cycle_seconds = 3600
[[page_types]]
name = "page"
url_pattern = '/p/'
"""


def urlset(base: str, *paths: str) -> str:
    urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    return f"<?xml version='1.0'?><urlset {NS}>{urls}</urlset>"


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer([SITE, OTHER, SLOW], {}) as running:
        other = running.url(OTHER)
        slow = running.url(SLOW).rstrip("/")
        running.routes.update({
            # Followed while on the site (hop 1), refused when it leaves it (hop 2).
            (SITE, "/robots.txt"): redirect("/moved/robots.txt", 301),
            (SITE, "/moved/robots.txt"): redirect(other + "robots.txt"),
            (SITE, "/sitemap.xml"): redirect(other + "sitemap.xml"),
            (SITE, "/"): page(["/p/1", other + "p/offsite"]),
            (SITE, "/p/1"): page(["/p/2"]),
            (SITE, "/p/2"): page([]),
            (OTHER, "/robots.txt"): text("User-agent: *\nDisallow: /\n"),
            (OTHER, "/sitemap.xml"): text(urlset(other.rstrip("/"), "/p/listed"), 200,
                                          "application/xml"),
            (SLOW, "/robots.txt"): text("User-agent: *\nCrawl-delay: 1\n"),
            (SLOW, "/sitemap.xml"): text(urlset(slow, "/p/1", "/p/2"), 200, "application/xml"),
            (SLOW, "/"): page(["/p/3"]),
            (SLOW, "/p/1"): page([]), (SLOW, "/p/2"): page([]), (SLOW, "/p/3"): page([]),
        })
        yield running


def crawl(server: HostileServer, tmp_path: Path, redis_url: str, name: str, host: str,
          delay: float) -> tuple[dict[str, object], str]:
    sites = tmp_path / "sites"
    sites.mkdir(exist_ok=True)
    (sites / f"{name}.toml").write_text(SITE_FILE.format(
        name=name, base=server.url(host).rstrip("/"), host=host, delay=delay))
    process = start_crawl(name, {"WEBCRAWL_SITES_DIR": sites, "WEBCRAWL_REDIS_URL": redis_url,
                                 "WEBCRAWL_DATA_DIR": tmp_path / "data", "RETRY_ENABLED": False},
                          tmp_path, log_name=f"{name}.log")
    assert finish(process, 60) == 0
    log = (tmp_path / f"{name}.log").read_text()
    assert "Traceback" not in log and "] ERROR:" not in log, log[-3000:]
    return stats_of(log), log


def test_robots_txt_and_sitemap_redirects_never_leave_the_site(server, tmp_path, redis_url):
    stats, log = crawl(server, tmp_path, redis_url, "scoped", SITE, 0)
    other = server.url(OTHER)
    # Nothing ever connected to the other host: not robots.txt, not the sitemap, not the link.
    assert server.log(OTHER) == []
    assert [c for c in server.connections if c.host == OTHER] == []
    # robots.txt followed one hop on the site, refused at the hop off it: unavailable, so the
    # site's pages are fetched (allow all).
    assert server.paths(SITE)[:2] == ["/robots.txt", "/moved/robots.txt"]
    assert {"/", "/p/1", "/p/2", "/sitemap.xml"} <= set(server.paths(SITE))
    assert stats["robotstxt/offsite_redirect"] == 1
    assert stats["offsite/refused/robots"] == 1
    assert stats["offsite/refused/sitemap"] == 1
    warnings = [line for line in log.splitlines() if "robots.txt of" in line and "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert f"(hop 2) to {other}robots.txt" in warnings[0]
    assert stats.get("ssrf/refused") is None  # the allowance let them through; scope did not


def test_a_crawl_delay_holds_on_every_gap_from_robots_txt_on(server, tmp_path, redis_url):
    """robots.txt says Crawl-delay: 1 on a site whose own delay is 0.1 s and which lists a
    sitemap: every request to the host, the sitemap included, comes a second after the one
    before it."""
    stats, _ = crawl(server, tmp_path, redis_url, "delayed", SLOW, 0.1)
    hits = server.log(SLOW)
    assert hits[0].path == "/robots.txt"
    assert {"/sitemap.xml", "/", "/p/1", "/p/2", "/p/3"} <= {h.path for h in hits}
    gaps = [(a.path, b.path, round(gap, 3)) for a, b, gap in iter_gaps(hits)]
    assert len(gaps) >= 5
    assert all(gap >= 1.0 for _, _, gap in gaps), gaps
