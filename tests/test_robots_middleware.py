"""RobotsMiddleware end to end: real HTTP servers on 127.0.0.x, a real redis-server, and a real
Scrapy crawl in a subprocess whose requests are read back from the servers' logs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request

from webcrawl.middlewares.robots import RobotsMiddleware
from webcrawl.robots.cache import origin_of
from webcrawl.robots import RobotsPolicy
from webcrawl.robots.cache import RobotsCache

Route = tuple[int, dict[str, str], bytes]


class Site:
    """A threaded HTTP server on ``host``: fixed answers per path, every request path logged."""

    def __init__(self, host: str, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.log: list[str] = []
        self.times: dict[str, float] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                site.log.append(self.path)
                site.times[self.path] = time.monotonic()
                status, headers, body = site.routes.get(self.path, (200, {}, b"<html>ok</html>"))
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def robots(body: str, status: int = 200) -> dict[str, Route]:
    return {"/robots.txt": (status, {"Content-Type": "text/plain"}, body.encode())}


def redirects(hops: int, final: str) -> dict[str, Route]:
    chain = ["/robots.txt"] + [f"/r{i}" for i in range(1, hops + 1)]
    routes: dict[str, Route] = {
        path: (301, {"Location": nxt}, b"") for path, nxt in zip(chain, chain[1:], strict=False)
    }
    routes[chain[-1]] = (200, {"Content-Type": "text/plain"}, final.encode())
    return routes


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


BIG = "User-agent: *\nDisallow: /early\n" + ("#" + "x" * 1023 + "\n") * 520 + "Disallow: /late\n"

SITES: dict[str, dict[str, Route]] = {
    "rules": robots("User-agent: *\nDisallow: /private\nCrawl-delay: 30\n"),
    "missing": robots("gone", status=404),
    "broken": robots("oops", status=500),
    "throttled": robots("slow down", status=429),
    "five_redirects": redirects(5, "User-agent: *\nDisallow: /blocked\n"),
    "six_redirects": redirects(6, "User-agent: *\nAllow: /\n"),
    "big": robots(BIG),
}
PAGES = {
    "rules": ["/public", "/private"],
    "missing": ["/a", "/b", "/c"],
    "broken": ["/a"],
    "throttled": ["/a"],
    "five_redirects": ["/ok", "/blocked"],
    "six_redirects": ["/ok"],
    "big": ["/early", "/late"],
}

CRAWL = textwrap.dedent(
    """
    import json, sys
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess
    from webcrawl.middlewares.robots import RobotsMiddleware
    from webcrawl.middlewares.spacing import HostSpacingMiddleware

    with open(sys.argv[1]) as source:
        config = json.load(source)

    class RecordingRobots(RobotsMiddleware):
        @classmethod
        def from_crawler(cls, crawler):
            mw = super().from_crawler(crawler)
            applied = mw.delay_setter

            def record(domain, seconds):
                crawler.stats.set_value("test/crawl_delay/" + domain, seconds)
                applied(domain, seconds)

            mw.delay_setter = record
            return mw

    class RobotsSpider(Spider):
        name = "robots_e2e"

        async def start(self):
            for url in config["urls"]:
                yield Request(url, dont_filter=True, errback=self.failed)

        def parse(self, response):
            pass

        def failed(self, failure):
            pass

    settings = dict(config["settings"])
    # The host spacing middleware keeps requests a delay apart on the wire, the Crawl-delay
    # included from the moment robots.txt said it.
    settings["DOWNLOADER_MIDDLEWARES"] = {RecordingRobots: 100, HostSpacingMiddleware: 950}
    process = CrawlerProcess(settings=settings)
    crawler = process.create_crawler(RobotsSpider)
    process.crawl(crawler)
    process.start()
    with open(config["stats"], "w") as out:
        json.dump(crawler.stats.get_stats(), out, default=str)
    """
)


@pytest.fixture
def sites() -> Iterator[dict[str, Site]]:
    started = {
        name: Site(f"127.0.0.{11 + i}", routes) for i, (name, routes) in enumerate(SITES.items())
    }
    yield started
    for site in started.values():
        site.stop()


def crawl(tmp_path: Path, urls: list[str], redis_url: str, run: str,
          **settings: object) -> dict:
    config = {
        "urls": urls,
        "stats": str(tmp_path / f"stats-{run}.json"),
        "settings": {
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
            "REMOTE_CONTROL_ENABLED": False,
            "RETRY_ENABLED": False,
            "COOKIES_ENABLED": False,
            "DOWNLOAD_TIMEOUT": 10,
            "REDIRECT_MAX_TIMES": 10,
            "LOG_LEVEL": "WARNING",
            "WEBCRAWL_REDIS_URL": redis_url,
            "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
            "WEBCRAWL_ROBOTS_MAX_CRAWL_DELAY_SECONDS": 0.2,
            **settings,
        },
    }
    config_path = tmp_path / f"config-{run}.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", CRAWL, str(config_path)], env=env, capture_output=True,
        text=True, timeout=50,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "DeprecationWarning" not in done.stderr, done.stderr
    return json.loads(Path(config["stats"]).read_text())


def test_crawl_obeys_robots_per_rfc_9309_and_shares_answers_through_redis(
    tmp_path, sites, redis_url
):
    refused = f"http://127.0.0.30:{free_port('127.0.0.30')}"
    urls = [sites[name].base + path for name, paths in PAGES.items() for path in paths]
    urls.append(refused + "/a")

    stats = crawl(tmp_path, urls, redis_url, "first")
    logs = {name: sorted(site.log) for name, site in sites.items()}
    assert logs["rules"] == ["/public", "/robots.txt"]
    assert logs["missing"] == ["/a", "/b", "/c", "/robots.txt"]  # one robots fetch for three
    assert logs["broken"] == ["/robots.txt"]
    assert logs["throttled"] == ["/robots.txt"]
    assert logs["five_redirects"] == ["/ok", "/r1", "/r2", "/r3", "/r4", "/r5", "/robots.txt"]
    assert "/ok" not in logs["six_redirects"]
    assert logs["big"] == ["/late", "/robots.txt"]
    assert stats["robotstxt/request_count"] == 8
    assert stats["robotstxt/response_count"] == 6
    assert stats["robotstxt/response_status_count/200"] == 3
    assert stats["robotstxt/response_status_count/404"] == 1
    assert stats["robotstxt/response_status_count/500"] == 1
    assert stats["robotstxt/response_status_count/429"] == 1
    assert sum(v for k, v in stats.items() if k.startswith("robotstxt/exception_count/")) == 2
    # private, blocked, early; broken, throttled, six_redirects, refused
    assert stats["robotstxt/forbidden"] == 7
    assert stats["robotstxt/cache/miss"] == len(urls)
    assert stats["test/crawl_delay/127.0.0.11"] == 0.2
    # The robots fetch used a politeness slot: the page waited the (capped) Crawl-delay after it.
    assert sites["rules"].times["/public"] - sites["rules"].times["/robots.txt"] >= 0.19

    for site in sites.values():
        site.log.clear()
    again = crawl(tmp_path, urls, redis_url, "second")  # a new process: answers come from Redis
    assert all("/robots.txt" not in site.log for site in sites.values())
    assert "robotstxt/request_count" not in again
    assert again["robotstxt/forbidden"] == 7
    assert again["robotstxt/cache/hit"] == len(urls)
    assert sorted(sites["rules"].log) == ["/public"]
    assert again["test/crawl_delay/127.0.0.11"] == 0.2



def test_requests_waiting_for_robots_txt_are_released_one_interval_apart(tmp_path, redis_url):
    """Four requests to a host whose robots.txt is not known yet all wait for its fetch; they must
    reach the server one interval apart (the Crawl-delay, capped at 0.2 s, above the crawl's
    0.1 s delay), not together, the first one interval after robots.txt."""
    site = Site("127.0.0.40", robots("User-agent: *\nCrawl-delay: 30\n"))
    try:
        paths = [f"/page-{i}" for i in range(4)]
        crawl(tmp_path, [site.base + path for path in paths], redis_url, "waiting",
              WEBCRAWL_DOMAIN_DELAY_SECONDS=0.1)
        assert sorted(site.log) == sorted(["/robots.txt", *paths])
        times = sorted(site.times[path] for path in paths)
    finally:
        site.stop()
    interval = 0.2  # the Crawl-delay (capped), above the 0.1 s pause
    assert times[0] - site.times["/robots.txt"] >= interval
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= interval, f"page requests closer than {interval} s: {gaps}"


class Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count


def build(cache: RobotsCache, **kwargs) -> RobotsMiddleware:
    return RobotsMiddleware(cache, Stats(), user_agent=None, default_user_agent="webcrawl/1",
                            **kwargs)


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://Example.COM/a", "http://example.com:80"),
        ("https://example.com:8443/a?b", "https://example.com:8443"),
        ("http://[::1]:81/", "http://[::1]:81"),
        ("ftp://example.com/", None),
        ("data:,hello", None),
    ],
)
def test_origin_of(url, origin):
    assert origin_of(Request(url)) == origin


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"max_redirects": 4}, "WEBCRAWL_ROBOTS_MAX_REDIRECTS"),
        ({"max_redirects": 11}, "WEBCRAWL_ROBOTS_MAX_REDIRECTS"),
        ({"max_bytes": 1000}, "WEBCRAWL_ROBOTS_MAX_BYTES"),
        ({"error_ttl": 0}, "WEBCRAWL_ROBOTS_ERROR_CACHE_SECONDS"),
        ({"ttl": 2 * 86400}, "WEBCRAWL_ROBOTS_CACHE_SECONDS"),
    ],
)
def test_bad_settings_are_refused(kwargs, setting):
    with pytest.raises(ValueError, match=setting):
        build(RobotsCache(None), **kwargs)


def test_token_from_setting_or_request_header():
    mw = build(RobotsCache(None))
    assert mw.token_for(Request("http://a/")) == "webcrawl"
    assert mw.token_for(Request("http://a/", headers={"User-Agent": "Other-Bot/2"})) == "other-bot"
    mw.user_agent = "Special"
    assert mw.token_for(Request("http://a/", headers={"User-Agent": "Other-Bot/2"})) == "special"


def test_on_crawl_delay_calls_the_setter_only_when_given():
    mw = build(RobotsCache(None))
    mw.on_crawl_delay("a.example", 3.0)  # no setter: nothing happens
    calls: list[tuple[str, float]] = []
    mw.delay_setter = lambda domain, seconds: calls.append((domain, seconds))
    mw.on_crawl_delay("a.example", 3.0)
    assert calls == [("a.example", 3.0)]


def test_cached_answers_decide_without_fetching():
    from webcrawl.robots import verdict_for_response

    cache = RobotsCache(None)
    cache.put("http://a.example:80", verdict_for_response(
        200, b"User-agent: webcrawl\nDisallow: /x\n", ttl=60, error_ttl=60))
    mw = build(cache)

    def run(url: str) -> None:
        coroutine = mw.process_request(Request(url))
        try:
            coroutine.send(None)
        except StopIteration:
            return
        raise AssertionError("the middleware waited for a fetch")

    run("http://a.example/y")
    with pytest.raises(IgnoreRequest):
        run("http://a.example/x/1")
    run("http://a.example/x/1".replace("http://a.example", "ftp://a.example"))
    assert mw.stats.values == {"robotstxt/cache/hit": 2, "robotstxt/forbidden": 1}


def _drive(coroutine) -> None:
    """Run a coroutine whose awaits all complete at once (no reactor needed)."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    raise AssertionError("the coroutine waited")


def test_a_fetch_cut_short_by_shutdown_is_not_cached():
    async def stopping(request: Request):
        raise RuntimeError("No open spider to crawl")

    cache = RobotsCache(None)
    mw = build(cache, download=stopping)
    with pytest.raises(IgnoreRequest):
        _drive(mw.process_request(Request("http://a.example/x")))
    assert cache.get("http://a.example:80") is None
    assert mw.stats.values["robotstxt/exception_count/RuntimeError"] == 1


def test_a_network_failure_is_cached_as_disallow():
    async def refused(request: Request):
        raise ConnectionRefusedError("nobody home")

    cache = RobotsCache(None)
    mw = build(cache, download=refused, error_ttl=60)
    with pytest.raises(IgnoreRequest):
        _drive(mw.process_request(Request("http://a.example/x")))
    assert cache.get("http://a.example:80") == RobotsPolicy.disallow_all()


def test_from_crawler_applies_crawl_delays_at_once_and_refuses_scrapys_middleware(
        redis_url, tmp_path):
    """A Crawl-delay raises the host's delay in this process at once, and for every process
    through the crawl state, never below the crawl's own delay."""
    from scrapy.utils.misc import build_from_crawler
    from scrapy.utils.test import get_crawler

    from webcrawl.runtime import CrawlRuntime

    settings = {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path),
                "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0.5, "USER_AGENT": "WebCrawl/1 (+x)"}
    crawler = get_crawler(settings_dict=settings)
    mw = build_from_crawler(RobotsMiddleware, crawler)
    runtime = CrawlRuntime.of(crawler)
    mw.on_crawl_delay("a.example", 2.0)
    mw.on_crawl_delay("b.example", 0.1)
    assert runtime.hosts.delay("a.example") == 2.0, "known in this process at once"
    runtime.flush()
    other = CrawlRuntime.of(get_crawler(settings_dict=settings))  # another process's view
    assert other.hosts.delay("a.example") == 2.0
    assert other.hosts.delay("b.example") == 0.5, "never below the crawl's delay"
    assert mw.token_for(Request("http://a.example/")) == "webcrawl"
    assert mw.cache.store is not None
    for r in (runtime, other):
        r.close()
    with pytest.raises(ValueError, match="ROBOTSTXT_OBEY"):
        build_from_crawler(RobotsMiddleware,
                           get_crawler(settings_dict={**settings, "ROBOTSTXT_OBEY": True}))


def test_a_fetch_for_a_popped_request_goes_in_that_requests_turn():
    """The robots.txt fetch for a request popped from the crawl's queue (it carries a lease)
    says so: it takes the pop's turn at the host instead of claiming one of its own. For any
    other request it claims its own."""
    from scrapy.http import Response

    from webcrawl import meta as M

    fetched: list[Request] = []

    async def download(request: Request) -> Response:
        fetched.append(request)
        return Response(request.url, status=404)  # no robots.txt: all allowed

    mw = build(RobotsCache(None), download=download)
    _drive(mw.process_request(Request("http://a.example/x", meta={M.LEASE: "me:1"})))
    _drive(mw.process_request(Request("http://b.example/x")))
    assert [(r.url, r.meta[M.TURN_TAKEN]) for r in fetched] == [
        ("http://a.example:80/robots.txt", True), ("http://b.example:80/robots.txt", False)]


def test_a_miss_looks_in_redis_once_before_fetching(redis_url):
    """The origin is looked up (this process, then Redis) once; the fetch follows at once."""
    from scrapy.http import Response

    from webcrawl.state.client import connect

    client, trips, _ = connect(redis_url, retries=False)
    fetched = []

    async def download(request: Request) -> Response:
        fetched.append((request.url, trips.count))
        return Response(request.url, status=200, body=b"User-agent: *\nAllow: /\n")

    cache = RobotsCache(client)
    cache.store.delete("http://once.example:80")
    mw = build(cache, download=download)
    before = trips.count
    _drive(mw.process_request(Request("http://once.example/a")))
    assert fetched == [("http://once.example:80/robots.txt", before + 1)]
    assert trips.count == before + 2  # the lookup, then the answer stored for other processes
