"""A raw-socket HTTP server on 127.0.0.1 for the HTTP edge-case suite: each route answers byte by
byte as its script says (a body cut by a reset, a 101, a thousand 1xx heads, two
Transfer-Encoding lines...), and the server records every connection and the requests read on it,
so a test can tell whether the client reused a connection.

A route is a function ``(peer, request) -> bool``: it writes what it wants with
:meth:`Peer.send` (or ends the connection with :meth:`Peer.reset` / :meth:`Peer.close`) and
returns whether to read another request on the connection.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

HOST = "127.0.0.1"


@dataclass
class Seen:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    connection: int


@dataclass
class Peer:
    sock: socket.socket
    number: int
    buffer: bytes = b""
    ended: bool = False
    requests: list[Seen] = field(default_factory=list)

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.ended = True

    def close(self) -> None:
        """A clean end (FIN)."""
        if not self.ended:
            self.ended = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()

    def reset(self) -> None:
        """An abortive end (RST): SO_LINGER 0, then close."""
        if not self.ended:
            self.ended = True
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()

    def read_request(self) -> Seen | None:
        while b"\r\n\r\n" not in self.buffer:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                return None
            self.buffer += data
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {n.strip().lower(): v.strip()
                   for n, _, v in (line.partition(":") for line in lines[1:])}
        return Seen(method, target, headers, self.number)


Route = Callable[[Peer, Seen], bool]


class RawHttpServer:
    """Serves ``routes[path]`` on 127.0.0.1 at a free port (or ``port``)."""

    def __init__(self, routes: dict[str, Route], host: str = HOST) -> None:
        self.routes = routes
        self.host = host
        self.peers: list[Peer] = []
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def connections(self) -> int:
        with self._lock:
            return len(self.peers)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                peer = Peer(sock, len(self.peers))
                self.peers.append(peer)
            threading.Thread(target=self._serve, args=(peer,), daemon=True).start()

    def _serve(self, peer: Peer) -> None:
        while not peer.ended and not self._closing:
            seen = peer.read_request()
            if seen is None:
                break
            with self._lock:
                peer.requests.append(seen)
                self.requests.append(seen)
            route = self.routes.get(seen.path.split("?", 1)[0])
            if route is None:
                peer.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            if not route(peer, seen):
                break
        peer.close()

    def close(self) -> None:
        self._closing = True
        self.listener.close()
        with self._lock:
            peers = list(self.peers)
        for peer in peers:
            peer.close()

    def __enter__(self) -> RawHttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
