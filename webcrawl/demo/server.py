"""A multi-host HTTP server for tests, benchmarks and the demo.

One threaded HTTP/1.1 server per loopback address (127.0.0.2, 127.0.0.3, ...), all on the same
port, so a crawler sees several distinct hosts (distinct politeness slots, robots.txt files and
cross-host links) without any DNS. A pluggable :class:`Site` answers every request; the server
keeps a request log that politeness and cost benchmarks read afterwards.
"""

from __future__ import annotations

import errno
import json
import socket
import socketserver
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, Protocol

Response = tuple[int, Mapping[str, str], bytes]
"""What a site answers: status, headers (Content-Length is set by the server), body."""


class Headers(Protocol):
    """Request headers, looked up case-insensitively (``email.message.Message`` or a dict)."""

    def get(self, name: str, default: None = None, /) -> str | None: ...


class Site(Protocol):
    """What the server serves. Implementations must be thread-safe: requests arrive concurrently."""

    def bind(self, hosts: Sequence[str], port: int) -> None:
        """Called once before the first request, with the addresses and port being served."""

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        """Answer a GET for ``path`` (with query string) arriving on address ``host``."""


@dataclass(frozen=True)
class LogEntry:
    """One request as the server saw it.

    ``mono`` is ``time.monotonic()`` at arrival: on Linux it is CLOCK_MONOTONIC, shared by every
    process of the machine, so a parent can compare it with its own monotonic readings.
    ``bytes`` counts everything written on the wire (status line, headers and body).
    """

    host: str
    path: str
    method: str
    mono: float
    wall: float
    status: int
    bytes: int


def default_hosts(count: int, first: str = "127.0.0.2") -> list[str]:
    """``count`` consecutive loopback addresses starting at ``first``."""
    prefix, _, last = first.rpartition(".")
    start = int(last)
    if not prefix.startswith("127.") or start + count > 255:
        raise ValueError(f"hosts must be {count} addresses inside 127.0.0.0/8, got first={first!r}")
    return [f"{prefix}.{start + i}" for i in range(count)]


def read_log(path: str | Path) -> list[LogEntry]:
    """Entries of a JSON-lines request log; a torn last line (writer still busy) is skipped."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                entries.append(LogEntry(**json.loads(line)))
    return entries


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: crawlers reuse connections
    server: _HostServer
    _arrival: tuple[float, float]

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def parse_request(self) -> bool:
        # Called right after the request line was read: the request's arrival, not the moment
        # a keep-alive connection started waiting for it.
        self._arrival = (time.monotonic(), time.time())
        return super().parse_request()

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, send_body: bool) -> None:
        owner = self.server.owner
        host = self.server.address
        try:
            status, headers, body = owner.site.respond(host, self.path, self.headers)
        except Exception as exc:  # a broken site must show up as a 500, not a hung client
            status, headers, body = 500, {"Content-Type": "text/plain"}, repr(exc).encode()
        reason = self.responses.get(status, ("",))[0]
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "content-length"]
        lines.append(f"Content-Length: {len(body)}")
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        data = head + body if send_body and status != 304 else head
        # Log first: once a client holds the response, its entry is in the log (no race for tests).
        owner._record(host, self.path, self.command, self._arrival, status, len(data))
        self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if hasattr(self, "_arrival"):
            owner = self.server.owner
            owner._record(self.server.address, getattr(self, "path", ""),
                          getattr(self, "command", "") or "", self._arrival, code, 0)
        super().send_error(code, message, explain)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log replaces stderr chatter


class _HostServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a crawler opening many connections at once must not see SYN drops
    owner: MultiHostServer
    address: str

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a reverse DNS lookup that would leave loopback.
        socketserver.TCPServer.server_bind(self)
        self.address, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        self.server_name = self.address


class MultiHostServer:
    """Serve ``site`` on every address of ``hosts`` at one shared port.

    ``port=0`` picks a port free on every address (retrying when another process holds it on one
    of them). ``log_path``, when given, receives each log entry as a JSON line, flushed at once, so
    another process can follow the log with :func:`read_log`.
    """

    def __init__(self, site: Site, hosts: Sequence[str] | int = 3, port: int = 0,
                 log_path: str | Path | None = None) -> None:
        self.site = site
        self.hosts: list[str] = default_hosts(hosts) if isinstance(hosts, int) else list(hosts)
        self.port = port
        self.log_path = Path(log_path) if log_path is not None else None
        self._servers: list[_HostServer] = []
        self._threads: list[threading.Thread] = []
        self._log: list[LogEntry] = []
        self._log_file: IO[str] | None = None
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def base_url(self, host: str | int = 0) -> str:
        """``http://host:port`` for an address or an index into :attr:`hosts`."""
        address = self.hosts[host] if isinstance(host, int) else host
        return f"http://{address}:{self.port}"

    def start(self) -> MultiHostServer:
        self._servers = self._bind_all()
        self.port = self._servers[0].server_address[1]
        self.site.bind(self.hosts, self.port)
        if self.log_path is not None:
            self._log_file = open(self.log_path, "a", encoding="utf-8")
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                      name=f"demo-http-{server.address}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop listening, cut open keep-alive connections and close the log file."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
        self._servers, self._threads = [], []

    def __enter__(self) -> MultiHostServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log(self) -> list[LogEntry]:
        """A copy of the request log so far, in completion order."""
        with self._lock:
            return list(self._log)

    def _bind_all(self, attempts: int = 50) -> list[_HostServer]:
        for _ in range(attempts if self.port == 0 else 1):
            servers: list[_HostServer] = []
            port = self.port
            try:
                for host in self.hosts:
                    server = _HostServer((host, port), _Handler)
                    server.owner = self
                    servers.append(server)
                    port = server.server_address[1]
                return servers
            except OSError as exc:
                for server in servers:
                    server.server_close()
                if exc.errno != errno.EADDRINUSE or self.port != 0:
                    raise
        raise OSError(errno.EADDRINUSE, f"no port free on all of {self.hosts}")

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _record(self, host: str, path: str, method: str, arrival: tuple[float, float],
                status: int, size: int) -> None:
        entry = LogEntry(host, path, method, arrival[0], arrival[1], status, size)
        with self._lock:
            self._log.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(asdict(entry)) + "\n")
                self._log_file.flush()
