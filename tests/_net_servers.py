"""Real servers for the network tests, all on loopback: a DNS server whose records the test
changes (dnslib), an https server with a certificate from a test CA (trustme), a forward proxy
(proxy.py, its own process) and a relay that counts the bytes crossing it; and the download
handler built the way a crawl builds it."""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dnslib import AAAA, QTYPE, RR, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

BODY = b"<html><body>" + b"hello " * 50 + b"</body></html>"


def run(coroutine: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coroutine)


def handler_for(**settings: Any) -> Any:
    """webcrawl's download handler, built in the running loop from a crawler's settings."""
    import webcrawl.settings as project
    from webcrawl.net.handler import GuardedDownloadHandler

    values = {n: getattr(project, n) for n in dir(project) if n.isupper()}
    crawler = get_crawler(Spider, {**values, **settings})
    crawler.spider = crawler._create_spider("netsite")

    async def build() -> GuardedDownloadHandler:
        return GuardedDownloadHandler.from_crawler(crawler)

    return run(build())


def fetch(handler: Any, url: str, **meta: Any) -> Any:
    meta.setdefault("download_timeout", 20)
    request = Request(url, meta=meta)
    response = run(handler.download_request(request))
    return response, request


class Records(BaseResolver):  # type: ignore[misc]
    """Answers A and AAAA queries from ``names`` (name -> addresses), with ``ttl``."""

    def __init__(self, ttl: int = 1) -> None:
        self.names: dict[str, list[str]] = {}
        self.ttl = ttl
        self.queries = 0

    def resolve(self, request: Any, handler: Any) -> Any:
        reply = request.reply()
        name = str(request.q.qname).rstrip(".")
        self.queries += 1
        for address in self.names.get(name, []):
            if ":" in address and request.q.qtype == QTYPE.AAAA:
                reply.add_answer(RR(name, QTYPE.AAAA, rdata=AAAA(address), ttl=self.ttl))
            elif ":" not in address and request.q.qtype == QTYPE.A:
                reply.add_answer(RR(name, QTYPE.A, rdata=A(address), ttl=self.ttl))
        return reply


@contextmanager
def dns_server(ttl: int = 1) -> Iterator[tuple[Records, str]]:
    """A DNS server on 127.0.0.1 (UDP); yields its records and its ``address:port``."""
    records = Records(ttl)
    server = DNSServer(records, port=0, address="127.0.0.1",
                       logger=DNSLogger(logf=lambda _line: None))
    server.start_thread()
    try:
        yield records, f"127.0.0.1:{server.server.server_address[1]}"
    finally:
        server.stop()
        server.server.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        if getattr(self.server, "close_each", False):
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def http_server(address: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None,
                close_each: bool = False) -> Iterator[Any]:
    """A threaded HTTP(S) server; ``server.hits`` lists the paths it answered."""
    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        daemon_threads = True

    server = Server((address, port), _Handler)
    server.hits = []  # type: ignore[attr-defined]
    server.close_each = close_each  # type: ignore[attr-defined]
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Relay:
    """Forwards 127.0.0.1:``port`` to ``target``, counting the bytes each way."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = self.down = self.connections = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def total(self) -> int:
        with self._lock:
            return self.up + self.down

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self.connections += 1
                self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, "down"), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, way: str) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    sink.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            with self._lock:
                setattr(self, way, getattr(self, way) + len(data))
            try:
                sink.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()


@contextmanager
def forward_proxy(folder: Path) -> Iterator[int]:
    """proxy.py (from PyPI) on 127.0.0.1, in a process of its own; yields its port."""
    port_file = folder / "proxy.port"
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", "0",
         "--port-file", str(port_file), "--num-acceptors", "1", "--threaded",
         "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("proxy.py did not start")
            time.sleep(0.02)
        port = int(port_file.read_text().strip())
        while True:  # listening once it accepts a connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield port
    finally:
        # its acceptors are processes of their own: the whole group goes
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
