"""webcrawl.wire: the lengths of a request and a response as Scrapy would write them."""

from __future__ import annotations

from http.client import responses

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.utils.request import request_httprepr

from webcrawl.wire import request_wire_bytes, wire_bytes


@pytest.mark.parametrize("request_", [
    Request("http://example.test/"),
    Request("http://example.test"),
    Request("https://example.test:8443/a/b;p=1?q=2&r=%C3%A9#frag"),
    Request("http://bücher.example/ä?ö=1"),
    Request("http://example.test/x", method="POST", body=b"a=1&b=2",
            headers={"X-One": ["1", "two"], "Content-Type": "application/x-www-form-urlencoded"}),
    Request("http://127.0.0.1:8080/", headers={"If-None-Match": '"v1"', "Accept": ""}),
], ids=["root", "no-path", "params-query", "idna", "post-headers", "address"])
def test_request_wire_bytes_is_the_length_of_scrapys_http_representation(request_: Request) -> None:
    assert request_wire_bytes(request_) == len(request_httprepr(request_))


@pytest.mark.parametrize("response", [
    Response("http://example.test/", status=200, body=b"hello"),
    HtmlResponse("http://example.test/", status=404, body=b"<html></html>",
                 headers={"Content-Type": "text/html", "Set-Cookie": ["a=1", "b=2"]}),
    Response("http://example.test/", status=304, headers={"ETag": '"v"'}),
    Response("http://example.test/", status=599, body=b"x" * 1000),
], ids=["plain", "headers", "not-modified", "unknown-status"])
def test_wire_bytes_counts_status_line_headers_and_body(response: Response) -> None:
    head = f"HTTP/1.1 {response.status} {responses.get(response.status, '')}\r\n".encode()
    headers = b"".join(k + b": " + v + b"\r\n" for k, vs in response.headers.items() for v in vs)
    assert wire_bytes(response) == len(head + headers + b"\r\n" + response.body)


def test_the_downloader_stats_count_what_scrapys_count() -> None:
    from scrapy.downloadermiddlewares.stats import DownloaderStats as Scrapys
    from scrapy.settings import Settings
    from scrapy.utils.test import get_crawler

    from webcrawl import settings as webcrawl_settings
    from webcrawl.middlewares.stats import DownloaderStats

    requests = [Request("http://example.test/"), Request("http://bücher.example/ä?ö=1"),
                Request("http://example.test/x", method="POST", body=b"a=1",
                        headers={"X-One": ["1", "two"]})]
    counted = []
    for cls in (Scrapys, DownloaderStats):
        crawler = get_crawler()
        crawler.stats.open_spider()
        middleware = cls.from_crawler(crawler)
        for request in requests:
            middleware.process_request(request)
        counted.append(crawler.stats.get_stats())
    assert counted[0] == counted[1] and counted[1]["downloader/request_bytes"] > 0
    chosen = Settings(); chosen.setmodule(webcrawl_settings)
    middlewares = chosen.getdict("DOWNLOADER_MIDDLEWARES")
    assert middlewares["scrapy.downloadermiddlewares.stats.DownloaderStats"] is None
    assert middlewares["webcrawl.middlewares.stats.DownloaderStats"] == 850
