"""QuickMetaRefreshMiddleware (webcrawl.middlewares.refresh): the same redirects as Scrapy's
MetaRefreshMiddleware, found without decoding pages that cannot hold one."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from webcrawl.middlewares.refresh import SCANNED_BYTES, QuickMetaRefreshMiddleware, may_refresh

URL = "http://a.test/page"

BODIES = {
    "plain": b"<html><head><title>x</title></head><body><a href='/b'>b</a></body></html>",
    "refresh": b'<html><head><meta http-equiv="refresh" content="0; url=/next"></head></html>',
    "upper": b'<HTML><HEAD><META HTTP-EQUIV="REFRESH" CONTENT="1;URL=/up"></HEAD></HTML>',
    "word in text": b"<html><body><p>Press F5 to refresh</p></body></html>",
    "late": b"<html><head>" + b"<!--" + b"x" * 20_000 + b"-->"
            + b'<meta http-equiv="refresh" content="0; url=/late"></head></html>',
    "utf-16": '<html><head><meta http-equiv="refresh" content="0; url=/wide"></head></html>'
              .encode("utf-16"),
    "utf-8 text": ('<html><head><title>' + "é" * 1500 + '</title>'
                   '<meta http-equiv="refresh" content="0; url=/accent"></head></html>').encode(),
}


def outcomes(middleware: MetaRefreshMiddleware, body: bytes) -> str | None:
    request = Request(URL)
    response = HtmlResponse(URL, body=body, headers={"Content-Type": "text/html"})
    result = middleware.process_response(request, response)
    return result.url if isinstance(result, Request) else None


@pytest.mark.parametrize("name", sorted(BODIES))
def test_redirects_exactly_where_scrapys_middleware_does(name: str) -> None:
    settings = {"METAREFRESH_ENABLED": True}
    scrapys = MetaRefreshMiddleware.from_crawler(get_crawler(settings_dict=settings))
    quick = QuickMetaRefreshMiddleware.from_crawler(get_crawler(settings_dict=settings))
    assert outcomes(quick, BODIES[name]) == outcomes(scrapys, BODIES[name])


def test_only_pages_that_may_refresh_are_decoded() -> None:
    assert not may_refresh(BODIES["plain"])
    assert not may_refresh(BODIES["late"]), "past the bytes 4,096 characters can take"
    assert may_refresh(BODIES["refresh"]) and may_refresh(BODIES["upper"])
    assert may_refresh(BODIES["word in text"])  # Scrapy's parse then finds no tag
    assert may_refresh(BODIES["utf-16"]), "not ASCII-compatible: always looked at"
    assert may_refresh(b"<html>" + b" " * (SCANNED_BYTES - 20) + b"refresh")
    middleware = QuickMetaRefreshMiddleware.from_crawler(get_crawler())
    response = HtmlResponse(URL, body=BODIES["plain"], headers={"Content-Type": "text/html"})
    assert middleware.process_response(Request(URL), response) is response
    assert response._cached_ubody is None, "the page was decoded"


def test_non_html_responses_pass_as_before() -> None:
    middleware = QuickMetaRefreshMiddleware.from_crawler(get_crawler())
    response = Response(URL, body=b"refresh")
    assert middleware.process_response(Request(URL), response) is response
