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
from scrapy.exceptions import CannotResolveHostError, IgnoreRequest, NotConfigured
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
    with pytest.raises(NotConfigured):
        middleware(WEBCRAWL_SSRF_ENABLED=False)
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
