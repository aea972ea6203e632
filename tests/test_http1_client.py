"""The asyncio HTTP/1.1 client (webcrawl.net.http1) through webcrawl's download handler
(GuardedDownloadHandler), against raw-socket servers on 127.0.0.1 that record every connection
and the bytes of every request.

The handler is built from a crawler with webcrawl's project settings; no downloader middleware
runs, so each request carries its own ``download_timeout``. Names are resolved as in a crawl:
through the reactor's name resolver, webcrawl's GuardedResolver (its fallback allowance empty, so
only the allowance the client passes for its crawler lets loopback through), over Twisted's
getaddrinfo resolver on a thread pool of the test's own (the reactor itself never runs here).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider, signals
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
    StopDownload,
)
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

import webcrawl.settings as project_settings
from tests.runtimes import run, until
from webcrawl import stopping
from webcrawl.net.handler import GuardedDownloadHandler
from webcrawl.net.http1 import Http1Client
from webcrawl.net.resolver import GuardedResolver
from webcrawl.settingtypes import SettingError

HOST = "127.0.0.1"
LOOPBACK = ["127.0.0.0/8"]


# -- A raw HTTP/1.1 server that records connections and request bytes -----------------------------


@dataclass
class Seen:
    """One request as the server read it."""

    raw: bytes
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n.lower() == name.lower()]


@dataclass
class Peer:
    """One connection as the server sees it."""

    server: RawServer
    sock: socket.socket
    number: int
    requests: list[Seen] = field(default_factory=list)
    buffer: bytes = b""
    client_closed: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    server_name: str | None = None

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client closed (or reset) the connection before these bytes went: as a read
            # would have seen it, had the server been reading.
            self.client_closed.set()
            raise

    def _recv(self) -> bytes:
        """The next bytes from the client; ``b""`` once it closed (or reset) the connection."""
        while not self.server.stopping.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset by the client (an abort), TLS errors included
                data = b""
            if not data:
                self.client_closed.set()
            return data
        return b""

    def read_request(self) -> Seen | None:
        while b"\r\n\r\n" not in self.buffer:
            data = self._recv()
            if not data:
                return None
            self.buffer += data
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [(n.strip(), v.strip())
                   for n, _, v in (line.partition(":") for line in lines[1:])]
        length = int(next((v for n, v in headers if n.lower() == "content-length"), "0"))
        while len(rest) < length:
            data = self._recv()
            if not data:
                return None
            rest += data
        body, self.buffer = rest[:length], rest[length:]
        return Seen(head + b"\r\n\r\n" + body, method, target, headers, body)

    def wait_client_close(self, seconds: float = 10.0) -> bool:
        """Read (and drop) whatever comes until the client closes; whether it did in time."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.server.stopping.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                self.client_closed.set()
                return True
        return False


#: What the server does with a request: write an answer; returns whether to read another
#: request on the connection (False: the server closes it).
Behaviour = Callable[[Seen, Peer], bool]


class RawServer:
    """Serves ``routes[path]`` on 127.0.0.1 at a free port; ``tls`` makes it an https server."""

    def __init__(self, routes: dict[str, Behaviour], tls: ssl.SSLContext | None = None,
                 on_connect: Callable[[Peer], None] | None = None) -> None:
        self.routes = routes
        self.tls = tls
        self.on_connect = on_connect  # instead of reading requests: whatever it does
        self.stopping = threading.Event()
        self.peers: list[Peer] = []
        self.requests: list[tuple[int, Seen]] = []  # (connection number, request)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.listener = socket.socket()
        self.listener.bind((HOST, 0))
        self.listener.listen(16)
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self._start(self._accept)

    def url(self, path: str = "/") -> str:
        return f"http{'s' if self.tls else ''}://{HOST}:{self.port}{path}"

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                peer = Peer(self, sock, len(self.peers))
                self.peers.append(peer)
            self._start(self._serve, peer)

    def _serve(self, peer: Peer) -> None:
        try:
            if self.tls is not None:
                peer.sock.settimeout(5)
                names: list[str | None] = []
                self.tls.sni_callback = lambda _obj, name, _ctx: names.append(name)
                try:
                    peer.sock = self.tls.wrap_socket(peer.sock, server_side=True)
                except OSError:
                    return
                peer.server_name = names[0] if names else None
            peer.sock.settimeout(0.1)
            if self.on_connect is not None:
                self.on_connect(peer)
                return
            while True:
                request = peer.read_request()
                if request is None:
                    return
                with self._lock:
                    peer.requests.append(request)
                    self.requests.append((peer.number, request))
                behaviour = self.routes.get(request.path, not_found)
                try:
                    if not behaviour(request, peer):
                        return
                except OSError:
                    return  # the client left mid-answer
        finally:
            peer.sock.close()
            peer.ended.set()

    def close(self) -> None:
        self.stopping.set()
        self.listener.close()
        for thread in self._threads:
            thread.join(5)

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self.peers)


def write_head(peer: Peer, status: int = 200, headers: list[str] | tuple[str, ...] = (),
               version: str = "HTTP/1.1") -> None:
    peer.send(("\r\n".join([f"{version} {status} X", *headers]) + "\r\n\r\n").encode("latin-1"))


def answer(body: bytes = b"", status: int = 200, headers: tuple[str, ...] = (),
           version: str = "HTTP/1.1", keep: bool = True, length: bool = True,
           surplus: bytes = b"") -> Behaviour:
    """A whole answer with a Content-Length (unless ``length`` is false); ``keep``: the server
    keeps the connection for another request."""
    def behave(_: Seen, peer: Peer) -> bool:
        more = [f"Content-Length: {len(body)}"] if length else []
        head = "\r\n".join([f"{version} {status} X", *headers, *more]) + "\r\n\r\n"
        peer.send(head.encode("latin-1") + body + surplus)  # one write
        return keep
    return behave


def chunked(*chunks: bytes, last: bytes = b"0\r\n\r\n", keep: bool = True) -> Behaviour:
    def behave(_: Seen, peer: Peer) -> bool:
        write_head(peer, 200, ["Transfer-Encoding: chunked"])
        for chunk in chunks:
            peer.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        peer.send(last)
        return keep
    return behave


def head_then_wait(head: bytes) -> Behaviour:
    """Writes ``head`` (and whatever follows it), then waits until the client leaves."""
    def behave(_: Seen, peer: Peer) -> bool:
        peer.send(head)
        peer.wait_client_close()
        return False
    return behave


not_found = answer(b"not found", 404)


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(routes: dict[str, Behaviour], tls: ssl.SSLContext | None = None,
              on_connect: Callable[[Peer], None] | None = None) -> RawServer:
        server = RawServer(routes, tls, on_connect)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# -- The resolver and the handler ----------------------------------------------------------------


@pytest.fixture(scope="module")
def settings_for(redis_server: Any) -> Callable[..., dict[str, Any]]:
    """webcrawl's project settings, the asyncio client, loopback allowed, the tests' redis-server
    (a crawler's components would otherwise start an embedded one in the working folder, and
    nothing here closes a crawl to stop it), and ``overrides``."""
    values = {name: getattr(project_settings, name) for name in dir(project_settings)
              if name.isupper()}

    def make(**overrides: Any) -> dict[str, Any]:
        return {**values, "WEBCRAWL_HTTP_CLIENT": "asyncio", "WEBCRAWL_REDIS_URL": redis_server.url,
                "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": LOOPBACK, **overrides}

    return make


@pytest.fixture(scope="module")
def guard(settings_for: Callable[..., dict[str, Any]]) -> Iterator[GuardedResolver]:
    """webcrawl's GuardedResolver on the reactor, as TWISTED_DNS_RESOLVER installs it at a
    crawl's start, with an empty fallback allowance."""
    from twisted.internet import reactor
    from twisted.internet._resolver import GAIResolver
    from twisted.python.threadpool import ThreadPool

    pool = ThreadPool(0, 4, "test-http1-resolver")
    pool.start()
    saved = reactor.nameResolver, reactor.resolver
    reactor.installNameResolver(GAIResolver(reactor, lambda: pool))
    guarded = GuardedResolver.from_crawler(
        get_crawler(Spider, settings_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=[])), reactor)
    guarded.install_on_reactor()
    try:
        yield guarded
    finally:
        reactor.installNameResolver(saved[0])
        reactor.resolver = saved[1]
        pool.stop()


@pytest.fixture
def make_handler(guard: GuardedResolver, settings_for: Callable[..., dict[str, Any]],
                 ) -> Iterator[Callable[..., GuardedDownloadHandler]]:
    handlers: list[GuardedDownloadHandler] = []

    def make(**overrides: Any) -> GuardedDownloadHandler:
        crawler = get_crawler(Spider, settings_for(**overrides))
        handler = GuardedDownloadHandler(crawler)
        handlers.append(handler)
        return handler

    yield make
    for handler in handlers:
        run(handler.close())


@pytest.fixture
def handler(make_handler: Callable[..., GuardedDownloadHandler]) -> GuardedDownloadHandler:
    made = make_handler()
    assert isinstance(made.client, Http1Client)
    return made


def request(url: str, **kwargs: Any) -> Request:
    meta = kwargs.pop("meta", {})
    meta.setdefault("download_timeout", 30)  # a deadline for a loaded machine, not a wait
    return Request(url, meta=meta, **kwargs)


def fetch(handler: GuardedDownloadHandler, url: str, **kwargs: Any) -> Response:
    return run(handler.download_request(request(url, **kwargs)))


def failure(handler: GuardedDownloadHandler, url: str, **kwargs: Any) -> BaseException:
    """The exception the download of ``url`` ends with."""
    try:
        response = fetch(handler, url, **kwargs)
    except Exception as exc:  # noqa: BLE001 (the point)
        return exc
    raise AssertionError(f"no error: {response!r} {response.flags}")


def wait(event: threading.Event, seconds: float = 15.0) -> bool:
    return event.wait(seconds)


# -- 1. Kept connections and the request's bytes -------------------------------------------------


def test_sequential_requests_reuse_one_connection_and_send_what_the_request_says(serve, handler):
    page = answer(b"got", headers=("Content-Type: text/html", "Set-Cookie: a=1",
                                   "Set-Cookie: b=2"))
    server = serve({"/get": page, "/post": answer(b"posted"),
                    "/empty": answer(b"nothing"), "/get;params": page})
    asked = request(server.url("/get?x=1&y=two"), headers={"X-Test": "yes", "Accept": "text/html"})
    first = run(handler.download_request(asked))
    second = fetch(handler, server.url("/post"), method="POST", body=b"a=1&b=2",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    third = fetch(handler, server.url("/empty"), method="POST")
    fourth = fetch(handler, server.url("/get;params?q#fragment"))
    assert [r.body for r in (first, second, third, fourth)] == [b"got", b"posted", b"nothing",
                                                                  b"got"]
    assert all(r.status == 200 and r.protocol == "HTTP/1.1" for r in (first, second, third))
    assert first.ip_address == ipaddress.ip_address(HOST)
    assert isinstance(first, HtmlResponse) and first.url == asked.url
    assert first.headers.getlist(b"Set-Cookie") == [b"a=1", b"b=2"]
    assert 0 <= asked.meta["download_latency"] < 5
    assert server.connections == 1
    assert handler.client.crawler.stats.get_value("webcrawl/http/connections") == 1
    assert [number for number, _ in server.requests] == [0, 0, 0, 0]
    seen = [r for _, r in server.requests]
    host = f"{HOST}:{server.port}"
    assert seen[0].raw.startswith(b"GET /get?x=1&y=two HTTP/1.1\r\n")
    assert seen[0].header("Host") == [host]
    assert seen[0].header("X-Test") == ["yes"] and seen[0].header("Accept") == ["text/html"]
    assert seen[0].header("Content-Length") == [] and seen[0].body == b""
    assert seen[1].raw.startswith(b"POST /post HTTP/1.1\r\n")
    assert seen[1].header("Host") == [host]
    assert seen[1].header("Content-Type") == ["application/x-www-form-urlencoded"]
    assert seen[1].header("Content-Length") == ["7"] and seen[1].body == b"a=1&b=2"
    assert seen[1].raw.endswith(b"\r\n\r\na=1&b=2")
    assert seen[2].method == "POST" and seen[2].header("Content-Length") == ["0"]
    assert seen[3].target == "/get;params?q"  # the fragment stays with the client


def test_a_header_holding_a_line_break_is_never_sent(serve, handler):
    server = serve({"/": answer(b"ok")})
    error = failure(handler, server.url("/"), headers={"X-Evil": "a\r\nX-Injected: 1"})
    assert isinstance(error, ValueError) and "line break" in str(error)
    assert server.requests == []


def test_concurrent_downloads_use_their_own_connections_and_the_pool_keeps_per_domain(
        serve, make_handler):
    """No pipelining: two downloads at once, two connections; CONCURRENT_REQUESTS_PER_DOMAIN=1
    keeps only one of them afterwards (the other is closed by the client)."""
    both = threading.Barrier(2, timeout=5)

    def together(_: Seen, peer: Peer) -> bool:
        both.wait()
        return answer(b"together")(_, peer)

    server = serve({"/": together})
    handler = make_handler(CONCURRENT_REQUESTS_PER_DOMAIN=1)

    async def scenario() -> list[Response]:
        return list(await asyncio.gather(handler.download_request(request(server.url("/"))),
                                         handler.download_request(request(server.url("/")))))

    assert [r.body for r in run(scenario())] == [b"together", b"together"]
    assert server.connections == 2
    assert [len(p.requests) for p in server.peers] == [1, 1]
    run(until(lambda: any(p.client_closed.is_set() for p in server.peers), 5))
    fetch(handler, server.url("/x"))  # on the kept one
    assert server.connections == 2
    assert sum(p.client_closed.is_set() for p in server.peers) == 1


# -- 2. Framings ---------------------------------------------------------------------------------


def test_each_framing_arrives_whole_and_bodiless_answers_leave_the_connection_reusable(
        serve, handler):
    big = bytes(range(256)) * 400  # 100 KiB: several reads
    server = serve({
        "/length": answer(big, headers=("Content-Type: application/octet-stream",)),
        "/chunked": chunked(b"hello ", b"chunked ", b"world"),
        "/head": answer(b"", headers=("Content-Length: 1000",), length=False),
        "/204": answer(b"", 204, headers=("Content-Length: 5",), length=False),
        "/304": answer(b"", 304, headers=("Content-Length: 7",), length=False),
        "/close": answer(b"until the end" * 1000, length=False, keep=False),
    })
    assert fetch(handler, server.url("/length")).body == big
    assert fetch(handler, server.url("/chunked")).body == b"hello chunked world"
    head = fetch(handler, server.url("/head"), method="HEAD")
    assert (head.status, head.body, head.headers[b"Content-Length"]) == (200, b"", b"1000")
    no_content = fetch(handler, server.url("/204"))
    assert (no_content.status, no_content.body) == (204, b"")
    not_modified = fetch(handler, server.url("/304"))
    assert (not_modified.status, not_modified.body) == (304, b"")
    after = fetch(handler, server.url("/chunked"))  # read right after the bodiless answers
    assert after.body == b"hello chunked world" and not after.flags
    assert server.connections == 1
    assert [p for p, _ in server.requests] == [0] * 6
    close_delimited = fetch(handler, server.url("/close"))
    assert close_delimited.body == b"until the end" * 1000 and not close_delimited.flags
    assert fetch(handler, server.url("/length")).body == big
    assert server.connections == 2  # a close-delimited body spends its connection


# -- 3. Answers that end their connection --------------------------------------------------------


@pytest.mark.parametrize(("behaviour", "reused"), [
    (answer(b"bye", headers=("Connection: close",)), False),
    (answer(b"bye", headers=("Connection: keep-alive, Close",)), False),
    (answer(b"old", version="HTTP/1.0"), False),
    (answer(b"old", version="HTTP/1.0", headers=("Connection: keep-alive",)), True),
    (answer(b"ok", surplus=b"HTTP/1.1 200 X\r\n\r\nunasked"), False),
    (answer(b"ok"), True),
], ids=["close", "close-in-list", "http10", "http10-keep-alive", "surplus-bytes", "kept"])
def test_an_answer_that_ends_its_connection_makes_the_next_request_open_one(
        serve, handler, behaviour, reused):
    """The server keeps every connection open: the client alone decides not to reuse one, and
    closes it."""
    server = serve({"/first": behaviour, "/next": answer(b"next")})
    assert fetch(handler, server.url("/first")).status == 200
    assert fetch(handler, server.url("/next")).body == b"next"
    assert server.connections == (1 if reused else 2)
    assert [p for p, _ in server.requests] == ([0, 0] if reused else [0, 1])
    if not reused:
        assert wait(server.peers[0].client_closed)


# -- 4. A kept connection the server closed ------------------------------------------------------


def test_a_kept_connection_closed_by_the_server_while_idle_is_replaced(serve, handler):
    server = serve({"/first": answer(b"one", keep=False), "/next": answer(b"two")})
    assert fetch(handler, server.url("/first")).body == b"one"
    assert wait(server.peers[0].ended)  # the server closed it, the client was idle

    async def later() -> Response:
        # Let the loop see the end of the connection, or not: either way no error.
        return await handler.download_request(request(server.url("/next")))

    assert run(later()).body == b"two"
    assert server.connections == 2
    assert [(p, r.path) for p, r in server.requests] == [(0, "/first"), (1, "/next")]


def test_a_kept_connection_that_ends_as_the_request_goes_out_is_retried_once(serve, handler):
    """The server reads the next request on the kept connection and closes it without a byte of
    answer: the request goes again, once, on a new connection."""
    calls = []

    def first_closes(_: Seen, peer: Peer) -> bool:
        calls.append(peer.number)
        if peer.number == 0 and len(peer.requests) == 2:
            return False  # read, then closed unanswered
        return answer(b"answered")(_, peer)

    server = serve({"/": first_closes})
    assert fetch(handler, server.url("/")).body == b"answered"
    assert fetch(handler, server.url("/")).body == b"answered"
    assert calls == [0, 0, 1]
    assert server.connections == 2


def test_a_post_on_a_kept_connection_that_ends_unanswered_is_not_sent_again(serve, handler):
    """RFC 9110 section 9.2.2: a request that is not idempotent is not retried by itself."""
    def second_closes(_: Seen, peer: Peer) -> bool:
        return len(peer.requests) == 1 and answer(b"first")(_, peer)

    server = serve({"/": second_closes})
    assert fetch(handler, server.url("/")).body == b"first"
    error = failure(handler, server.url("/"), method="POST", body=b"order=1")
    assert type(error) is DownloadFailedError
    assert [(p, r.method) for p, r in server.requests] == [(0, "GET"), (0, "POST")]
    assert server.connections == 1


def test_a_new_connection_that_ends_before_any_answer_fails(serve, handler):
    server = serve({"/": lambda _, peer: False})
    error = failure(handler, server.url("/"))
    assert type(error) is DownloadFailedError
    assert len(server.requests) == 1  # not retried: the connection was new


def test_bytes_on_an_idle_connection_end_it(serve, handler):
    idle = threading.Event()

    def then_junk(_: Seen, peer: Peer) -> bool:
        answer(b"ok")(_, peer)
        if idle.wait(5):  # the client has the answer: its connection is idle
            peer.send(b"HTTP/1.1 200 X\r\nContent-Length: 4\r\n\r\njunk")
        return True

    server = serve({"/junk": then_junk, "/next": answer(b"next")})
    assert fetch(handler, server.url("/junk")).body == b"ok"
    idle.set()
    run(until(server.peers[0].client_closed.is_set, 5))  # the client dropped it
    assert fetch(handler, server.url("/next")).body == b"next"
    assert [p for p, _ in server.requests] == [0, 1]


# -- 5. Data loss --------------------------------------------------------------------------------


CUT_LENGTH = answer(b"<html><body>cut", headers=("Content-Length: 5000",), length=False,
                    keep=False)
CUT_CHUNKED = chunked(b"<html><body>", b"abcd", last=b"10\r\nhalf", keep=False)


@pytest.mark.parametrize(("behaviour", "partial"), [(CUT_LENGTH, b"<html><body>cut"),
                                                     (CUT_CHUNKED, b"<html><body>abcdhalf")],
                         ids=["content-length", "chunked"])
def test_a_body_cut_short_is_data_loss(serve, make_handler, behaviour, partial):
    server = serve({"/": behaviour})
    handler = make_handler(DOWNLOAD_FAIL_ON_DATALOSS=True)
    assert isinstance(failure(handler, server.url("/")), ResponseDataLossError)
    partly = fetch(handler, server.url("/"), meta={"download_fail_on_dataloss": False})
    assert partly.status == 200 and partly.body == partial
    assert "dataloss" in partly.flags
    quiet = make_handler(DOWNLOAD_FAIL_ON_DATALOSS=False)
    kept = fetch(quiet, server.url("/"))
    assert kept.body == partial and "dataloss" in kept.flags


# -- 6. Sizes ------------------------------------------------------------------------------------


def test_an_announced_body_over_maxsize_is_cancelled_unread(serve, handler, caplog):
    server = serve({"/": head_then_wait(b"HTTP/1.1 200 X\r\nContent-Length: 100000\r\n\r\n")})
    with caplog.at_level(logging.WARNING):
        error = failure(handler, server.url("/"), meta={"download_maxsize": 1000})
    assert isinstance(error, DownloadCancelledError)
    assert wait(server.peers[0].client_closed)  # the client left without the body
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "100000" in warnings[0].getMessage()


@pytest.mark.parametrize("head", [b"HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\n\r\n",
                                  b"HTTP/1.1 200 X\r\n\r\n"], ids=["chunked", "close-delimited"])
def test_an_unannounced_body_growing_past_maxsize_is_cancelled(serve, handler, head):
    chunked_body = b"Transfer-Encoding" in head

    def grows(_: Seen, peer: Peer) -> bool:
        peer.send(head)
        for _ in range(5):  # 2000 bytes, then nothing until the client leaves
            piece = b"x" * 400
            peer.send(b"190\r\n" + piece + b"\r\n" if chunked_body else piece)
        peer.wait_client_close()
        return False

    server = serve({"/": grows})
    error = failure(handler, server.url("/"), meta={"download_maxsize": 1000})
    assert isinstance(error, DownloadCancelledError)
    assert wait(server.peers[0].client_closed)


def test_a_body_of_exactly_maxsize_is_read(serve, handler):
    server = serve({"/length": answer(b"y" * 1000), "/chunked": chunked(b"y" * 600, b"y" * 400)})
    for path in ("/length", "/chunked"):
        assert fetch(handler, server.url(path), meta={"download_maxsize": 1000}).body == b"y" * 1000


@pytest.mark.parametrize("behaviour", [answer(b"w" * 500), chunked(*[b"w" * 100] * 5),
                                       answer(b"w" * 500, length=False, keep=False)],
                         ids=["content-length", "chunked", "close-delimited"])
def test_warnsize_logs_exactly_one_warning(serve, handler, caplog, behaviour):
    server = serve({"/": behaviour})
    with caplog.at_level(logging.DEBUG):
        response = fetch(handler, server.url("/"), meta={"download_warnsize": 100})
    assert response.body == b"w" * 500
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "warn size (100)" in warnings[0].getMessage()
    assert server.url("/") in warnings[0].getMessage()


def test_a_body_of_exactly_warnsize_logs_nothing(serve, handler, caplog):
    server = serve({"/length": answer(b"w" * 100), "/chunked": chunked(b"w" * 60, b"w" * 40)})
    with caplog.at_level(logging.DEBUG):
        for path in ("/length", "/chunked"):
            assert fetch(handler, server.url(path), meta={"download_warnsize": 100}).body \
                == b"w" * 100
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


# -- 7. Time-outs --------------------------------------------------------------------------------


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 X\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n<html>half",
    b"HTTP/1.1 200 X\r\nContent-Le",
    b"",
], ids=["mid-body", "mid-head", "no-answer"])
def test_a_stalled_answer_times_out_and_the_client_closes_the_connection(serve, handler, head):
    server = serve({"/": head_then_wait(head)})
    started = time.monotonic()
    error = failure(handler, server.url("/"), meta={"download_timeout": 0.5})
    took = time.monotonic() - started
    assert isinstance(error, DownloadTimeoutError) and "0.5" in str(error)
    assert 0.5 <= took < 3.0
    assert wait(server.peers[0].client_closed)


# -- 8. Refused ----------------------------------------------------------------------------------


def test_nothing_listening_is_a_refused_connection(handler):
    with socket.socket() as bound:  # bound, never listening: no one else takes the port
        bound.bind((HOST, 0))
        port = bound.getsockname()[1]
        error = failure(handler, f"http://{HOST}:{port}/")
    assert isinstance(error, DownloadConnectionRefusedError)


# -- 9. SSRF -------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", [HOST, "localhost"])
def test_without_an_allowance_loopback_is_refused_before_connecting(
        serve, make_handler, guard, host):
    server = serve({"/": answer(b"secret")})
    handler = make_handler(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=[])
    assert isinstance(handler.client, Http1Client)
    error = failure(handler, f"http://{host}:{server.port}/")
    assert isinstance(error, CannotResolveHostError)
    assert server.connections == 0
    refusal = guard.recent_refusal(host, handler.policy)
    assert refusal is not None and refusal.reason == "loopback"


def test_the_allowance_is_the_crawlers_own_not_the_resolvers_fallback(serve, handler, guard):
    """The resolver's fallback allows nothing (the fixture): this crawler's allowance is the one
    that lets loopback through."""
    assert guard.policy.refusal(HOST) is not None
    server = serve({"/": answer(b"allowed")})
    assert fetch(handler, server.url("/")).body == b"allowed"


# -- 10. Broken answers --------------------------------------------------------------------------


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 X\r\nX-Big: " + b"b" * 70_000,
    b"HTTP/1.1 200 X\r\nX-Big: " + b"b" * 70_000 + b"\r\nContent-Length: 0\r\n\r\n",
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    b"<html><body>no head at all</body></html>\r\n\r\n",
    b"HTTP/1.1 200 X\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
], ids=["head-over-64k", "head-over-64k-ended", "ssh", "html", "two-lengths", "bad-chunk-size"])
def test_a_broken_answer_is_a_failed_download_and_its_connection_is_dropped(
        serve, handler, head):
    server = serve({"/": head_then_wait(head)})
    error = failure(handler, server.url("/"))
    assert type(error) is DownloadFailedError, repr(error)
    assert server.url("/") in str(error)
    assert wait(server.peers[0].client_closed)


def test_a_connection_closed_mid_head_is_a_failed_download(serve, handler):
    def half(_: Seen, peer: Peer) -> bool:
        peer.send(b"HTTP/1.1 200 X\r\nContent-")
        return False

    server = serve({"/": half})
    error = failure(handler, server.url("/"))
    assert type(error) is DownloadFailedError and "head" in str(error)


# -- 11. StopDownload from signal handlers -------------------------------------------------------


@pytest.mark.parametrize("fail", [False, True])
def test_stop_download_from_headers_received(serve, handler, fail):
    server = serve({"/": head_then_wait(b"HTTP/1.1 200 X\r\nContent-Length: 100\r\n"
                                        b"X-Mark: m\r\n\r\nbody...")})
    received: list[Any] = []

    def on_headers(headers, body_length, request, spider):
        received.append((headers.get(b"X-Mark"), body_length, request.url))
        raise StopDownload(fail=fail)

    handler.client.crawler.signals.connect(on_headers, signal=signals.headers_received)
    if fail:
        error = failure(handler, server.url("/"))
        assert isinstance(error, StopDownload)
        response = error.response
    else:
        response = fetch(handler, server.url("/"))
    assert isinstance(response, Response)
    assert response.status == 200 and response.headers[b"X-Mark"] == b"m"
    assert "download_stopped" in response.flags
    assert received == [(b"m", 100, server.url("/"))]
    assert wait(server.peers[0].client_closed)


def test_stop_download_from_bytes_received_keeps_the_body_so_far(serve, handler):
    server = serve({"/": head_then_wait(b"HTTP/1.1 200 X\r\nContent-Length: 1000\r\n\r\n"
                                        b"first-piece")})
    pieces: list[bytes] = []

    def on_bytes(data, request, spider):
        pieces.append(data)
        raise StopDownload(fail=False)

    handler.client.crawler.signals.connect(on_bytes, signal=signals.bytes_received)
    response = fetch(handler, server.url("/"))
    assert "download_stopped" in response.flags
    assert len(pieces) == 1 and response.body == pieces[0]
    assert response.body and b"first-piece".startswith(response.body)
    assert wait(server.peers[0].client_closed)


# -- 12. cancel_all ------------------------------------------------------------------------------


def test_cancel_all_cuts_a_stalled_download(serve, handler):
    server = serve({"/": head_then_wait(b"HTTP/1.1 200 X\r\nContent-Length: 5000\r\n\r\nhalf")})
    stalled = request(server.url("/"), meta={"download_timeout": 10})

    async def scenario() -> BaseException:
        download = asyncio.ensure_future(handler.download_request(stalled))
        await until(lambda: len(server.requests) == 1, 5)
        assert handler.in_flight == 1
        assert handler.cancel_all() == 1
        try:
            await download
        except BaseException as exc:  # noqa: BLE001 (the point)
            return exc
        raise AssertionError("the download was not cancelled")

    started = time.monotonic()
    error = run(scenario())
    assert isinstance(error, stopping.Cancelled), repr(error)
    assert time.monotonic() - started < 5
    assert stalled.meta.get(stopping.GIVEN_BACK) is True
    assert wait(server.peers[0].client_closed)
    assert handler.in_flight == 0
    later = request(server.url("/"))  # and a download starting after it
    with pytest.raises(stopping.Cancelled):
        run(handler.download_request(later))
    assert len(server.requests) == 1


# -- 13. https -----------------------------------------------------------------------------------


def self_signed(folder: Path, address: str = HOST) -> tuple[Path, Path, bytes]:
    """A certificate for ``address`` made now: (cert file, key file, DER bytes)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(address))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, cert.public_bytes(serialization.Encoding.DER)


def tls_context_for(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context


def test_https_with_a_self_signed_certificate(serve, handler, tmp_path):
    cert_file, key_file, der = self_signed(tmp_path)
    server = serve({"/secure": answer(b"over tls", headers=("Content-Type: text/plain",))},
                   tls=tls_context_for(cert_file, key_file))
    first = fetch(handler, server.url("/secure?q=1"))
    second = fetch(handler, server.url("/secure"))
    assert first.url.startswith("https://")
    assert (first.status, first.body, second.body) == (200, b"over tls", b"over tls")
    assert isinstance(first, TextResponse) and not isinstance(first, HtmlResponse)
    assert first.ip_address == ipaddress.ip_address(HOST)
    assert first.protocol == "HTTP/1.1"
    assert first.certificate == der
    assert server.connections == 1  # the TLS connection is kept too
    seen = server.requests[0][1]
    assert seen.raw.startswith(b"GET /secure?q=1 HTTP/1.1\r\n")
    assert seen.header("Host") == [f"{HOST}:{server.port}"]
    assert server.peers[0].server_name is None  # no SNI for an address


def test_https_to_a_plain_http_server_is_a_failed_download(serve, handler):
    """The server reads the TLS hello as a broken request and answers 400, as nginx does."""
    def bad_request(peer: Peer) -> None:
        peer.buffer = peer._recv()
        peer.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    server = serve({}, on_connect=bad_request)
    error = failure(handler, f"https://{HOST}:{server.port}/")
    assert type(error) is DownloadFailedError, repr(error)
    assert server.peers[0].buffer.startswith(b"\x16\x03")  # a TLS handshake record


@pytest.mark.parametrize(("issued_for", "trusted", "accepted"), [
    (HOST, True, True),
    (HOST, False, False),
    ("127.0.0.9", True, False),  # trusted, but not this address's certificate
], ids=["trusted", "untrusted", "another-address"])
def test_verified_https_checks_the_chain_and_the_address(
        serve, make_handler, tmp_path, monkeypatch, issued_for, trusted, accepted):
    """DOWNLOAD_VERIFY_CERTIFICATES: the certificate must chain to a trusted one (here: itself,
    through SSL_CERT_FILE) and name the address connected to, as with Scrapy's own handler
    (which refuses the third case with an IPAddressMismatch)."""
    cert_file, key_file, _ = self_signed(tmp_path, issued_for)
    server = serve({"/": answer(b"verified")}, tls=tls_context_for(cert_file, key_file))
    if trusted:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    else:
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-file.pem"))
    handler = make_handler(DOWNLOAD_VERIFY_CERTIFICATES=True)
    if accepted:
        assert fetch(handler, server.url("/")).body == b"verified"
    else:
        error = failure(handler, server.url("/"))
        assert type(error) is DownloadFailedError, repr(error)
        assert server.requests == []


# -- 14. The setting -----------------------------------------------------------------------------


def test_an_unknown_client_stops_the_handler_naming_the_setting(guard, settings_for):
    with pytest.raises(SettingError, match="WEBCRAWL_HTTP_CLIENT") as refused:
        GuardedDownloadHandler(get_crawler(Spider, settings_for(WEBCRAWL_HTTP_CLIENT="bogus")))
    assert "bogus" in str(refused.value)


def test_twisted_falls_back_to_scrapys_handler(make_handler, serve):
    handler = make_handler(WEBCRAWL_HTTP_CLIENT="twisted")
    assert handler.client is None


def test_the_default_client_is_asyncio(guard, settings_for):
    settings = settings_for()
    del settings["WEBCRAWL_HTTP_CLIENT"]
    handler = GuardedDownloadHandler(get_crawler(Spider, settings))
    try:
        assert isinstance(handler.client, Http1Client)
    finally:
        run(handler.close())

