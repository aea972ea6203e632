"""SSRF guard middleware: unit checks on literal addresses, and a real crawl in a subprocess with
HTTP servers on 127.0.0.x where only 127.0.0.2/32 is allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scrapy.exceptions import CannotResolveHostError, IgnoreRequest
from scrapy.http import Request
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from webcrawl.middlewares.ssrf import SSRFGuardMiddleware


def middleware(**settings) -> SSRFGuardMiddleware:
    crawler = get_crawler(settings_dict=settings)
    return build_from_crawler(SSRFGuardMiddleware, crawler)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/admin", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("https://192.168.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "metadata"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://[fe80::1]/", "link_local"),
        ("http://0.0.0.0:6379/", "unspecified"),
        ("file:///etc/passwd", "scheme"),
        ("ftp://example.com/", "scheme"),
    ],
)
def test_literal_addresses_and_schemes_are_refused(url, reason):
    mw = middleware()
    with pytest.raises(IgnoreRequest, match=reason):
        mw.process_request(Request(url))
    assert mw.stats.get_value("ssrf/refused") == 1
    assert mw.stats.get_value(f"ssrf/refused/{reason}") == 1


def test_allowed_networks_let_literal_addresses_through():
    mw = middleware(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=["127.0.0.2/32", "10.0.0.0/8"])
    assert mw.process_request(Request("http://127.0.0.2:8080/")) is None
    assert mw.process_request(Request("http://10.200.0.1/")) is None
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request("http://127.0.0.3/"))


def test_public_addresses_pass():
    mw = middleware()
    assert mw.process_request(Request("http://93.184.215.14/")) is None
    assert mw.process_exception(Request("http://93.184.215.14/"), ValueError()) is None
    # A DNS failure the guard did not cause is left to the other middlewares (retry).
    assert mw.process_exception(Request("http://nx.invalid/"), CannotResolveHostError()) is None
    assert mw.stats.get_value("ssrf/refused") is None


def test_switch_off_and_bad_setting():
    """Off, the guard lets every address through but cloud metadata; the scope it also judges
    (the crawl's allowed domains) is not switched off with it."""
    off = middleware(WEBCRAWL_SSRF_ENABLED=False)
    assert off.process_request(Request("http://127.0.0.1:8080/admin")) is None
    assert off.process_request(Request("http://10.1.2.3/")) is None
    with pytest.raises(IgnoreRequest, match="metadata"):
        off.process_request(Request("http://169.254.169.254/latest/meta-data/"))
    assert off.guard() is None
    with pytest.raises(ValueError, match="WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"):
        middleware(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=["10.0.0.0/33"])


class Site:
    def __init__(self, host: str) -> None:
        self.routes: dict[str, tuple[int, str]] = {}
        self.log: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                site.log.append(self.path)
                status, location = site.routes.get(self.path, (200, ""))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sites() -> Iterator[dict[str, Site]]:
    started = {"allowed": Site("127.0.0.2"), "inside": Site("127.0.0.3"),
               "local": Site("127.0.0.1")}
    yield started
    for site in started.values():
        site.stop()


CRAWL = textwrap.dedent(
    """
    import json, sys
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    with open(sys.argv[1]) as source:
        config = json.load(source)

    class SSRFSpider(Spider):
        name = "ssrf_e2e"

        async def start(self):
            for url in config["urls"]:
                yield Request(url, dont_filter=True, errback=self.failed)

        def parse(self, response):
            pass

        def failed(self, failure):
            pass

    process = CrawlerProcess(settings=config["settings"])
    crawler = process.create_crawler(SSRFSpider)
    process.crawl(crawler)
    process.start()
    with open(config["stats"], "w") as out:
        json.dump(crawler.stats.get_stats(), out, default=str)
    """
)


def run_crawl(tmp_path: Path, urls: list[str], settings: dict) -> dict:
    config = {"urls": urls, "stats": str(tmp_path / "stats.json"), "settings": {
        "TWISTED_DNS_RESOLVER": "webcrawl.net.resolver.GuardedResolver",
        "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": ["127.0.0.2/32"],
        "DOWNLOADER_MIDDLEWARES": {"webcrawl.middlewares.ssrf.SSRFGuardMiddleware": 45},
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 10,
        "LOG_LEVEL": "WARNING",
        **settings,
    }}
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", CRAWL, str(config_path)], env=env,
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "DeprecationWarning" not in done.stderr, done.stderr
    return json.loads((tmp_path / "stats.json").read_text())


def test_robots_txt_redirected_inside_is_refused_and_disallows(tmp_path, sites, redis_url):
    inside = f"http://127.0.0.3:{sites['inside'].port}"
    sites["allowed"].routes = {"/robots.txt": (302, inside + "/robots.txt")}
    stats = run_crawl(tmp_path, [f"http://127.0.0.2:{sites['allowed'].port}/page"], {
        "DOWNLOADER_MIDDLEWARES": {"webcrawl.middlewares.ssrf.SSRFGuardMiddleware": 45,
                                   "webcrawl.middlewares.robots.RobotsMiddleware": 100},
        "WEBCRAWL_REDIS_URL": redis_url,
        "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
    })
    assert sites["allowed"].log == ["/robots.txt"]
    assert sites["inside"].log == []
    assert stats["ssrf/refused/loopback"] == 1
    assert stats["robotstxt/exception_count/IgnoreRequest"] == 1
    assert stats["robotstxt/forbidden"] == 1


def test_crawl_cannot_be_led_inside(tmp_path, sites):
    allowed = f"http://127.0.0.2:{sites['allowed'].port}"
    inside = f"http://127.0.0.3:{sites['inside'].port}"
    by_name = f"http://localhost:{sites['local'].port}"
    sites["allowed"].routes = {
        "/to-inside": (302, inside + "/secret"),
        "/to-name": (302, by_name + "/secret"),
        "/to-allowed": (302, allowed + "/landing"),
    }
    urls = [
        allowed + "/",  # allowed network: fetched
        allowed + "/to-allowed",  # redirect within the allowed network: followed
        inside + "/direct",  # literal loopback address outside the allowance
        allowed + "/to-inside",  # a redirect into 127.0.0.3
        by_name + "/direct",  # a name resolving to loopback: refused by the resolver
        allowed + "/to-name",  # a redirect to that name
        "http://169.254.169.254/latest/meta-data/",  # metadata, never connected to
        f"http://[::ffff:127.0.0.3]:{sites['inside'].port}/mapped",
    ]
    stats = run_crawl(tmp_path, urls, {})

    assert sorted(sites["allowed"].log) == ["/", "/landing", "/to-allowed", "/to-inside",
                                            "/to-name"]
    assert sites["inside"].log == []
    assert sites["local"].log == []
    # 127.0.0.3 direct, after a redirect, as ::ffff:127.0.0.3; localhost direct and redirected.
    assert stats["ssrf/refused/loopback"] == 5
    assert stats["ssrf/refused/metadata"] == 1
    assert stats["ssrf/refused"] == 6
    # Only the first refusal of a name reaches RetryMiddleware (as a DNS error); its retry and
    # every later request to the name are refused without another lookup.
    assert stats.get("retry/reason_count/scrapy.exceptions.CannotResolveHostError", 0) <= 1


# -- one place, failing closed ------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://127.0.0.2:0/", "https://example.com:0/x"])
def test_a_url_whose_origin_cannot_be_read_is_refused(url):
    """Port 0 is the one malformed port a Request accepts (see below): refused, not taken for
    the default port (robots.txt would have been asked at :80 for a request sent to :0)."""
    mw = middleware(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=["127.0.0.0/8"])
    with pytest.raises(IgnoreRequest, match="origin"):
        mw.process_request(Request(url))
    assert mw.stats.get_value("ssrf/refused/origin") == 1


@pytest.mark.parametrize("url", ["http://127.0.0.2:99999/", "http://example.com:x/",
                                 "https://example.com:-5/"])
def test_other_malformed_ports_never_become_requests(url):
    with pytest.raises(ValueError, match="[Pp]ort"):
        Request(url)


def test_offsite_requests_are_refused_dont_filter_and_redirect_hops_included():
    from scrapy import Spider

    from webcrawl.net.scope import OffsiteRefused

    class Shop(Spider):
        name = "shop"
        allowed_domains = ["127.0.0.2", "shop.example"]

    crawler = get_crawler(Shop, {"WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": ["127.0.0.0/8"]})
    crawler.spider = crawler._create_spider()
    mw = build_from_crawler(SSRFGuardMiddleware, crawler)
    assert mw.process_request(Request("http://www.shop.example/", dont_filter=True)) is None
    hop = Request("http://127.0.0.61/robots.txt", dont_filter=True, meta={
        "webcrawl_purpose": "robots", "redirect_urls": ["http://127.0.0.2/robots.txt"]})
    with pytest.raises(OffsiteRefused) as refused:
        mw.process_request(hop)
    assert (refused.value.host, refused.value.hops) == ("127.0.0.61", 1)
    with pytest.raises(OffsiteRefused):  # also at scheduling: not queued at all
        mw.request_scheduled(Request("http://other.example/", meta={"webcrawl_purpose": "sitemap"}))
    assert mw.stats.get_value("offsite/refused") == 2
    assert mw.stats.get_value("offsite/refused/robots") == 1
    assert mw.stats.get_value("offsite/refused/sitemap") == 1
    assert mw.stats.get_value("ssrf/refused") is None


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"DOWNLOAD_HANDLERS": {"https": "scrapy.core.downloader.handlers._httpx.HttpxDownloadHandler"}},
         "DOWNLOAD_HANDLERS: the https handler scrapy.core.downloader.handlers._httpx."
         "HttpxDownloadHandler resolves host names itself"),
        ({"DOWNLOAD_HANDLERS": {"http": "tests.test_ssrf_middleware.OwnHandler"}},
         "DOWNLOAD_HANDLERS: the http handler tests.test_ssrf_middleware.OwnHandler"),
    ],
)
def test_a_handler_that_bypasses_the_check_stops_the_crawl_at_start_up(settings, named):
    with pytest.raises(ValueError) as refused:
        middleware(**settings)
    assert str(refused.value).startswith(named)
    assert "WEBCRAWL_SSRF_ACCEPT_UNCHECKED" in str(refused.value)
    middleware(**settings, WEBCRAWL_SSRF_ACCEPT_UNCHECKED=True)  # the risk accepted


class OwnHandler:
    """A download handler that resolves names by itself (as scrapy-playwright's does)."""


SCRAPYS = {"http": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",
           "https": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"}


def test_a_proxy_from_the_environment_stops_a_crawl_on_scrapys_handler(monkeypatch):
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    with pytest.raises(ValueError, match=r"^HTTPPROXY_ENABLED: .*proxy\.example:3128"):
        middleware(DOWNLOAD_HANDLERS=SCRAPYS)
    assert middleware(DOWNLOAD_HANDLERS=SCRAPYS, HTTPPROXY_ENABLED=False) is not None
    assert middleware(DOWNLOAD_HANDLERS=SCRAPYS, WEBCRAWL_SSRF_ACCEPT_UNCHECKED=True) is not None
    webcrawl = {"scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware": None}
    assert middleware(DOWNLOAD_HANDLERS=SCRAPYS, DOWNLOADER_MIDDLEWARES=webcrawl) is not None


def test_webcrawls_handler_takes_a_proxy_from_the_environment(monkeypatch):
    """Its proxied requests are judged before they are sent (tests/test_proxy_forward.py)."""
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    own = {"http": "webcrawl.net.handler.GuardedDownloadHandler",
           "https": "webcrawl.net.handler.GuardedDownloadHandler"}
    assert middleware(DOWNLOAD_HANDLERS=own) is not None


TWO_CRAWLERS = textwrap.dedent(
    """
    import json, sys
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    with open(sys.argv[1]) as source:
        config = json.load(source)

    class Probe(Spider):
        async def start(self):
            yield Request(config["url"] + "/" + self.name, dont_filter=True, errback=self.failed)

        def parse(self, response):
            pass

        def failed(self, failure):
            pass

    process = CrawlerProcess(settings=config["settings"])
    crawlers = {}
    for name, networks in config["crawlers"].items():
        spider = type(name, (Probe,), {"name": name})
        crawler = process.create_crawler(spider)
        crawler.settings.set("WEBCRAWL_ALLOWED_PRIVATE_NETWORKS", networks, priority="spider")
        crawlers[name] = crawler
        process.crawl(crawler)
    process.start()
    with open(config["stats"], "w") as out:
        json.dump({n: c.stats.get_stats() for n, c in crawlers.items()}, out, default=str)
    """
)


def test_two_crawlers_in_one_process_keep_their_own_allowances(tmp_path, sites):
    """One process, two crawlers, one name resolving to loopback (localhost): the crawler that
    allows loopback fetches it, the other is refused before connecting, although the process's
    resolver holds both allowances."""
    config = {"url": f"http://localhost:{sites['local'].port}", "stats": str(tmp_path / "s.json"),
              "crawlers": {"lab": ["127.0.0.1/32", "::1/128"], "public": ["127.0.0.2/32"]},
              "settings": {
                  "TWISTED_DNS_RESOLVER": "webcrawl.net.resolver.GuardedResolver",
                  "DOWNLOADER_MIDDLEWARES": {"webcrawl.middlewares.ssrf.SSRFGuardMiddleware": 45},
                  "DOWNLOAD_HANDLERS": {
                      "http": "webcrawl.net.handler.GuardedDownloadHandler"},
                  "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False,
                  "REMOTE_CONTROL_ENABLED": False, "DOWNLOAD_TIMEOUT": 10,
                  "RETRY_ENABLED": False, "LOG_LEVEL": "WARNING"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", TWO_CRAWLERS, str(path)], env=env,
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    assert sites["local"].log == ["/lab"]
    assert stats["lab"].get("downloader/response_count") == 1
    assert stats["public"].get("ssrf/refused/loopback") == 1, json.dumps(stats["public"])
    assert "downloader/response_count" not in stats["public"]
