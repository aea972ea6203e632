"""The HTTP edge-case suite: a raw-socket server on 127.0.0.1 answers each case byte by byte
(:mod:`tests._raw_http`), and the download handler must read it as RFC 9112 says.

The suite runs against webcrawl's download handler. ``WEBCRAWL_TEST_HTTP_CLIENTS`` (a comma list
of :data:`CLIENTS` names) runs it against others too: that is how the library handlers were
compared before one was chosen (docs/http.md has the table); a client whose library is not
installed is skipped.

Each case states what a correct client does; "fails" means a Scrapy download exception (or a
response flagged ``dataloss``, where the case says so), never a response that passes for whole.
"""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from tests._raw_http import Peer, RawHttpServer, Seen

#: Client name -> download handler class path.
CLIENTS = {
    "webcrawl": "webcrawl.net.handler.GuardedDownloadHandler",
    "aiohttp": "scrapy_download_handlers_incubator.AiohttpDownloadHandler",
    "curl-cffi": "scrapy_download_handlers_incubator.CurlCffiDownloadHandler",
    "pyreqwest": "scrapy_download_handlers_incubator.PyreqwestDownloadHandler",
    "twisted": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",
}
SELECTED = [c.strip() for c in os.environ.get("WEBCRAWL_TEST_HTTP_CLIENTS", "webcrawl").split(",")
            if c.strip()]
TEXT = b"<html><body>" + b"a page of text " * 40 + b"</body></html>"
TIMEOUT = 20.0  # a deadline for a loaded machine; a case that waits it out has failed


def run(coroutine: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coroutine)


# -- What the server answers ---------------------------------------------------------------------


def head(status: str, *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n").encode("latin-1")


def sized(body: bytes = TEXT, *headers: str, status: str = "200 OK") -> Callable[[Peer, Seen], bool]:
    def route(peer: Peer, seen: Seen) -> bool:
        peer.send(head(status, f"Content-Length: {len(body)}", *headers)
                  + (b"" if seen.method == "HEAD" else body))
        return True
    return route


def chunks(body: bytes, size: int = 100) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
                    for i in range(0, len(body), size))


def script(*parts: bytes, end: str = "keep") -> Callable[[Peer, Seen], bool]:
    """Send ``parts``, then keep the connection (``keep``), close it (``close``: FIN) or reset
    it (``reset``: RST)."""
    def route(peer: Peer, seen: Seen) -> bool:
        for part in parts:
            peer.send(part)
        if end == "close":
            peer.close()
        elif end == "reset":
            peer.reset()
        return end == "keep"
    return route


def close_after_answer(peer: Peer, seen: Seen) -> bool:
    """Answer as if keeping the connection, then close it at once (no ``Connection: close``)."""
    peer.send(head("200 OK", f"Content-Length: {len(TEXT)}") + TEXT)
    peer.close()
    return False


def drop_second_request(peer: Peer, seen: Seen) -> bool:
    """Answer the first request of a connection; close it unanswered when the next one comes."""
    if len(peer.requests) > 1:
        peer.close()
        return False
    peer.send(head("200 OK", f"Content-Length: {len(TEXT)}") + TEXT)
    return True


GZIPPED = gzip.compress(TEXT)
BOMB = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in about 64 KiB
ROUTES: dict[str, Callable[[Peer, Seen], bool]] = {
    "/ok": sized(),
    "/close-delimited": script(head("200 OK", "Connection: close") + TEXT, end="close"),
    "/close-delimited-reset": script(head("200 OK", "Connection: close") + TEXT[:200],
                                     end="reset"),
    "/cut-length": script(head("200 OK", f"Content-Length: {len(TEXT)}") + TEXT[:200],
                          end="close"),
    "/cut-chunked": script(head("200 OK", "Transfer-Encoding: chunked") + chunks(TEXT)[:300],
                           end="close"),
    "/te-and-length": script(head("200 OK", "Transfer-Encoding: chunked",
                                  f"Content-Length: {len(TEXT) + 5}") + chunks(TEXT)
                             + b"0\r\n\r\n"),
    "/conflicting-lengths": script(head("200 OK", "Content-Length: 10", "Content-Length: 20")
                                   + b"x" * 20),
    "/te-two-lines": script(head("200 OK", "Transfer-Encoding: gzip",
                                 "Transfer-Encoding: chunked") + chunks(GZIPPED) + b"0\r\n\r\n"),
    "/te-gzip-chunked": script(head("200 OK", "Transfer-Encoding: gzip, chunked")
                               + chunks(GZIPPED) + b"0\r\n\r\n"),
    "/te-chunked-not-last": script(head("200 OK", "Transfer-Encoding: chunked, identity")
                                   + TEXT, end="close"),
    "/switching": script(head("101 Switching Protocols", "Upgrade: websocket",
                              "Connection: Upgrade")
                         + head("200 OK", f"Content-Length: {len(TEXT)}") + TEXT),
    "/early-hints": script(head("103 Early Hints", "Link: </a.css>; rel=preload")
                           + head("200 OK", f"Content-Length: {len(TEXT)}") + TEXT),
    "/endless-1xx": script(head("103 Early Hints") * 5000
                           + head("200 OK", f"Content-Length: {len(TEXT)}") + TEXT),
    "/trailers": script(head("200 OK", "Transfer-Encoding: chunked") + chunks(TEXT)
                        + b"0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n"),
    "/endless-trailers": script(head("200 OK", "Transfer-Encoding: chunked") + chunks(TEXT)
                                + b"0\r\n" + b"X-Trailer: 1\r\n" * 20000 + b"\r\n"),
    "/no-content": script(head("204 No Content")),
    "/not-modified": script(head("304 Not Modified", f"Content-Length: {len(TEXT)}",
                                 'ETag: "1"')),
    "/close-after-answer": close_after_answer,
    "/drop-second": drop_second_request,
    "/big-header": sized(TEXT, "X-Big: " + "b" * 12_000),
    "/huge-head": script(head("200 OK", *[f"X-H{i}: " + "h" * 1000 for i in range(1100)],
                              f"Content-Length: {len(TEXT)}") + TEXT),
    "/gzip-bomb": sized(BOMB, "Content-Encoding: gzip", "Content-Type: text/html"),
    "/te-gzip-bomb": script(head("200 OK", "Transfer-Encoding: gzip, chunked") + chunks(BOMB, 8192)
                            + b"0\r\n\r\n"),
}


# -- The clients ---------------------------------------------------------------------------------


def _settings(client: str, **overrides: Any) -> dict[str, Any]:
    import webcrawl.settings as project

    values = {name: getattr(project, name) for name in dir(project) if name.isupper()}
    values.update({
        "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": ["127.0.0.0/8", "::1/128"],
        "DOWNLOAD_HANDLERS": {"http": CLIENTS[client], "https": CLIENTS[client]},
        "DOWNLOAD_MAXSIZE": 8 << 20, "DOWNLOAD_WARNSIZE": 0,
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    })
    values.update(overrides)
    return values


@pytest.fixture(scope="module")
def server() -> Iterator[RawHttpServer]:
    with RawHttpServer(ROUTES) as running:
        yield running


@pytest.fixture(params=SELECTED)
def handler(request: pytest.FixtureRequest) -> Iterator[Any]:
    client = request.param
    try:
        cls = load_object(CLIENTS[client])
    except ImportError as exc:
        pytest.skip(f"{client}: {exc}")
    crawler = get_crawler(Spider, _settings(client))

    async def build() -> Any:  # some libraries need the running loop
        return cls.from_crawler(crawler) if hasattr(cls, "from_crawler") else cls(crawler)

    with _reactor_resolver():
        made = run(build())
        yield made
        run(made.close())


@contextmanager
def _reactor_resolver() -> Iterator[None]:
    """Handlers that resolve through Twisted's reactor (which never runs here) get a resolver
    on a thread pool of the test's own."""
    from twisted.internet import reactor
    from twisted.internet._resolver import GAIResolver
    from twisted.python.threadpool import ThreadPool

    pool = ThreadPool(0, 4, "test-http-edge-resolver")
    pool.start()
    saved = reactor.nameResolver, reactor.resolver
    reactor.installNameResolver(GAIResolver(reactor, lambda: pool))
    try:
        yield
    finally:
        reactor.installNameResolver(saved[0])
        reactor.resolver = saved[1]
        pool.stop()


def fetch(handler: Any, url: str, method: str = "GET", **meta: Any) -> Response:
    meta.setdefault("download_timeout", TIMEOUT)
    request = Request(url, method=method, meta=meta)

    async def download() -> Response:
        return await asyncio.wait_for(_future(handler.download_request(request)), TIMEOUT + 10)

    return run(download())


async def _future(result: Any) -> Any:
    if asyncio.iscoroutine(result):
        return await result
    from scrapy.utils.defer import maybe_deferred_to_future

    return await maybe_deferred_to_future(result)


def outcome(handler: Any, url: str, **kwargs: Any) -> Response | BaseException:
    try:
        return fetch(handler, url, **kwargs)
    except Exception as exc:  # noqa: BLE001 (the outcome under test)
        return exc


def failed(result: Response | BaseException) -> bool:
    """A download exception (never a timeout: the cases answer at once), or a response flagged
    partial."""
    if isinstance(result, BaseException):
        return "TimeoutError" not in type(result).__name__
    return "dataloss" in result.flags or "partial" in result.flags  # Scrapy's handler: partial


# -- The cases -----------------------------------------------------------------------------------


def test_a_reset_during_a_close_delimited_body_is_partial(server, handler):
    result = outcome(handler, server.url("/close-delimited-reset"),
                     download_fail_on_dataloss=False)
    assert failed(result), result


def test_a_close_delimited_body_ended_cleanly_is_whole(server, handler):
    response = fetch(handler, server.url("/close-delimited"))
    assert response.body == TEXT and "dataloss" not in response.flags


@pytest.mark.parametrize("path", ["/cut-length", "/cut-chunked"])
def test_a_framed_body_cut_short_is_partial(server, handler, path):
    response = fetch(handler, server.url(path), download_fail_on_dataloss=False)
    assert failed(response) and len(response.body) < len(TEXT)


def test_transfer_encoding_beside_content_length_closes_the_connection(server, handler):
    result = outcome(handler, server.url("/te-and-length"))
    if failed(result):
        return  # RFC 9112 6.3: "ought to be handled as an error"
    assert result.body == TEXT
    before = server.connections()
    fetch(handler, server.url("/ok"))
    assert server.connections() == before + 1  # RFC 9112 6.3: not reused


def test_conflicting_content_lengths_fail(server, handler):
    assert failed(outcome(handler, server.url("/conflicting-lengths")))


@pytest.mark.parametrize("path", ["/te-two-lines", "/te-gzip-chunked"])
def test_every_transfer_coding_is_undone_or_the_answer_refused(server, handler, path):
    result = outcome(handler, server.url(path))
    assert failed(result) or result.body == TEXT, result


def test_chunked_not_last_runs_to_the_connection_end(server, handler):
    result = outcome(handler, server.url("/te-chunked-not-last"))
    assert failed(result) or result.body == TEXT, result


def test_a_101_is_not_skipped_as_an_interim_answer(server, handler):
    result = outcome(handler, server.url("/switching"))
    assert failed(result) or result.status == 101, result


def test_an_early_hint_is_skipped(server, handler):
    response = fetch(handler, server.url("/early-hints"))
    assert response.status == 200 and response.body == TEXT


def test_interim_answers_are_counted(server, handler):
    assert failed(outcome(handler, server.url("/endless-1xx")))


def test_chunked_trailers_are_read_past_and_the_connection_kept(server, handler):
    fetch(handler, server.url("/ok"))
    before = server.connections()
    response = fetch(handler, server.url("/trailers"))
    assert response.body == TEXT
    fetch(handler, server.url("/ok"))
    assert server.connections() == before


def test_trailer_lines_are_counted(server, handler):
    assert failed(outcome(handler, server.url("/endless-trailers")))


@pytest.mark.parametrize(("path", "method", "status"), [
    ("/ok", "HEAD", 200), ("/no-content", "GET", 204), ("/not-modified", "GET", 304)])
def test_bodiless_answers_are_empty_and_keep_the_connection(server, handler, path, method, status):
    fetch(handler, server.url("/ok"))
    before = server.connections()
    response = fetch(handler, server.url(path), method=method)
    assert response.status == status and response.body == b""
    assert fetch(handler, server.url("/ok")).body == TEXT
    assert server.connections() == before


def test_a_connection_the_server_closed_after_its_answer_is_not_reused(server, handler):
    assert fetch(handler, server.url("/close-after-answer")).body == TEXT
    assert fetch(handler, server.url("/close-after-answer")).body == TEXT


def test_a_kept_connection_closed_as_the_next_request_arrives_is_retried(server, handler):
    assert fetch(handler, server.url("/drop-second")).body == TEXT
    assert fetch(handler, server.url("/drop-second")).body == TEXT


def test_a_12_kb_header_is_read(server, handler):
    response = fetch(handler, server.url("/big-header"))
    assert response.body == TEXT and len(response.headers[b"X-Big"]) == 12_000


def test_a_head_over_a_megabyte_fails(server, handler):
    assert failed(outcome(handler, server.url("/huge-head")))


def test_a_content_encoded_bomb_is_passed_on_as_sent(server, handler):
    response = fetch(handler, server.url("/gzip-bomb"))
    assert response.body == BOMB  # decoded, with its limit, by the decoding middleware


def test_a_transfer_coded_bomb_is_bounded_by_maxsize(server, handler):
    result = outcome(handler, server.url("/te-gzip-bomb"), download_maxsize=1 << 20)
    assert failed(result), result
