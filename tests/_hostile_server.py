"""A raw HTTP server on 127.0.0.x for tests of slow and hostile answers: drips, stalls, cut
bodies, bombs, redirects. The demo server builds a whole answer before writing it; these tests
need answers that write a byte now and then, stop half way or never end.

Every request is logged with its arrival time (``time.monotonic()``, shared by the processes of
the machine) and its connection's number; every connection's opening and closing is logged too,
so a test can tell how many connections a host had open at once and when a drip was cut.
"""

from __future__ import annotations

import gzip
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

#: What a route does with the connection: write whatever it wants, then return (the server closes).
Behaviour = Callable[["Exchange"], None]


@dataclass(frozen=True)
class Hit:
    """One request as the server saw it."""

    host: str
    path: str
    mono: float
    connection: int


@dataclass
class Connection:
    host: str
    number: int
    opened: float
    closed: float | None = None


@dataclass
class Exchange:
    """One request being answered: ``write`` raises ``OSError`` once the client has gone."""

    sock: socket.socket
    host: str
    path: str
    server: HostileServer
    headers: dict[str, str] = field(default_factory=dict)

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self, status: int, body: bytes, headers: dict[str, str] | None = None,
               length: int | None = None) -> None:
        """A whole answer; ``length`` overrides Content-Length (a lie, for cut bodies)."""
        self.write(head(status, {**(headers or {}),
                                 "Content-Length": str(len(body) if length is None else length)}))
        self.write(body)

    def drip(self, status: int = 200, every: float = 0.2, length: int = 10_000_000) -> None:
        """Headers, then one byte every ``every`` seconds until the client leaves or the server
        stops: a body that never ends."""
        self.write(head(status, {"Content-Type": "text/html", "Content-Length": str(length)}))
        self.write(b"<html><body>")
        while not self.server.stopping.wait(every):
            self.write(b".")

    def stall(self) -> None:
        """Headers and part of the body, then nothing, until the client leaves."""
        self.write(head(200, {"Content-Type": "text/html", "Content-Length": "5000"}))
        self.write(b"<html><body>half")
        self.sock.settimeout(0.2)
        while not self.server.stopping.is_set():
            try:
                if not self.sock.recv(1024):
                    return  # the client closed its side
            except TimeoutError:
                continue


def head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def page(links: list[str] = (), title: str = "page") -> Behaviour:  # type: ignore[assignment]
    body = ("<html><body><h1>" + title + "</h1>"
            + "".join(f'<a href="{u}">{u}</a> ' for u in links) + "</body></html>").encode()
    return lambda x: x.answer(200, body, {"Content-Type": "text/html"})


def text(body: str, status: int = 200, content_type: str = "text/plain") -> Behaviour:
    return lambda x: x.answer(status, body.encode(), {"Content-Type": content_type})


def redirect(location: str, status: int = 302) -> Behaviour:
    return lambda x: x.answer(status, b"", {"Location": location})


def gzip_bomb(unpacked_mb: int = 64) -> Behaviour:
    packed = gzip.compress(b"\0" * (unpacked_mb << 20), 9)
    return lambda x: x.answer(200, packed, {"Content-Type": "text/html",
                                            "Content-Encoding": "gzip"})


def bad_gzip() -> Behaviour:
    return lambda x: x.answer(200, b"\x1f\x8b\x08\x00this is no gzip stream at all" * 20,
                              {"Content-Type": "text/html", "Content-Encoding": "gzip"})


def cut_body(announced: int = 5000) -> Behaviour:
    """Content-Length says ``announced`` bytes; far fewer come before the connection closes."""
    return lambda x: x.answer(200, b"<html><body>cut", {"Content-Type": "text/html"},
                              length=announced)


def cut_chunked() -> Behaviour:
    def behave(x: Exchange) -> None:
        x.write(b"HTTP/1.1 200 X\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n10\r\n<html><body>abcd\r\n")
    return behave


def oversized(size: int) -> Behaviour:
    return lambda x: x.answer(200, b"<html>" + b"x" * size, {"Content-Type": "text/html"})


class _Handler(socketserver.BaseRequestHandler):
    server: _Listener

    def handle(self) -> None:
        owner, host = self.server.owner, self.server.address
        conn = owner._opened(host)
        try:
            data = b""
            self.request.settimeout(5)
            while b"\r\n\r\n" not in data:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                data += chunk
            lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:])}
            owner._hit(Hit(host, path, time.monotonic(), conn.number))
            behaviour = owner.route(host, path)
            try:
                behaviour(Exchange(self.request, host, path, owner, headers))
            except OSError:
                pass  # the client left mid-answer: what drips and stalls expect
        finally:
            conn.closed = time.monotonic()


class _Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: HostileServer
    address: str


class HostileServer:
    """Serve ``routes[(host, path)]`` (or ``routes[path]``, for every host) on each of ``hosts``
    at one port; anything else is a 404. Use as a context manager."""

    def __init__(self, hosts: list[str], routes: dict[object, Behaviour]) -> None:
        self.hosts = hosts
        self.routes = routes
        self.stopping = threading.Event()
        self.hits: list[Hit] = []
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        self._listeners: list[_Listener] = []
        self.port = 0

    def route(self, host: str, path: str) -> Behaviour:
        found = self.routes.get((host, path)) or self.routes.get(path)
        return found or text("not found", 404)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def __enter__(self) -> HostileServer:
        for _ in range(50):
            try:
                port = 0
                for host in self.hosts:
                    listener = _Listener((host, port), _Handler)
                    listener.owner, listener.address = self, host
                    self._listeners.append(listener)
                    port = listener.server_address[1]
                self.port = port
                break
            except OSError:
                for listener in self._listeners:
                    listener.server_close()
                self._listeners = []
        else:
            raise OSError(f"no port free on all of {self.hosts}")
        for listener in self._listeners:
            threading.Thread(target=listener.serve_forever, kwargs={"poll_interval": 0.05},
                             daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for listener in self._listeners:
            listener.shutdown()
            listener.server_close()

    def _opened(self, host: str) -> Connection:
        with self._lock:
            conn = Connection(host, len(self.connections), time.monotonic())
            self.connections.append(conn)
            return conn

    def _hit(self, hit: Hit) -> None:
        with self._lock:
            self.hits.append(hit)

    def log(self, host: str | None = None) -> list[Hit]:
        with self._lock:
            return [h for h in self.hits if host is None or h.host == host]

    def paths(self, host: str) -> list[str]:
        return [h.path for h in self.log(host)]

    def most_open(self, host: str) -> int:
        """The most connections to ``host`` that were open at one moment."""
        with self._lock:
            events = sorted([(c.opened, 1) for c in self.connections if c.host == host]
                            + [(c.closed if c.closed is not None else float("inf"), -1)
                               for c in self.connections if c.host == host],
                            key=lambda e: (e[0], e[1]))
        most = current = 0
        for _, step in events:
            current += step
            most = max(most, current)
        return most

    def connection_of(self, hit: Hit) -> Connection:
        with self._lock:
            return self.connections[hit.connection]


def iter_gaps(hits: list[Hit]) -> Iterator[tuple[Hit, Hit, float]]:
    """Consecutive requests (by arrival) and the seconds between them."""
    ordered = sorted(hits, key=lambda h: h.mono)
    for a, b in zip(ordered, ordered[1:]):
        yield a, b, b.mono - a.mono
