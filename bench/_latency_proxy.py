"""A loopback TCP proxy that delays every byte by a fixed time each way: Redis "on another machine".

The benchmarks put it between a crawl and a redis-server listening on TCP, so that every Redis
round trip pays ``2 * delay`` on top of loopback, as it would to a Redis one network hop away.

Contract:

- One thread per connection relays both directions. Every chunk received is stamped
  ``arrival + delay`` and queued; it is sent once that time has come. Chunks keep their order, and
  a chunk never waits for the one before it to be *delayed*: latency is added, bandwidth is not
  taken away (a pipeline of 100 commands pays one delay, not 100).
- The delay is a floor. Relaying and wake-ups add some tens of microseconds more;
  :func:`measure_added_rtt` measures what a PING round trip really gains, and the benchmarks report
  that figure next to their results.
- ``client_writes`` counts the chunks received from clients: a client sends each command or
  pipeline in one write, so it approximates the round trips made (a large pipeline can arrive in
  several chunks and count more than once; never less).

Command line (``bench/_latency_proxy_process.py`` runs it as a child process, away from the
benchmark's own threads, and measures it)::

    python -m bench._latency_proxy --target 127.0.0.1:6379 [--delay-ms 0.5] [--port 0]

prints ``READY <port>`` once listening; then each line ``stats`` on stdin is answered with a JSON
line of counters and ``reset`` zeroes them. It exits on EOF of stdin or SIGTERM.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import select
import socket
import sys
import threading
import time
from collections import deque
from typing import IO

_CHUNK = 256 * 1024


class LatencyProxy:
    """Listen on ``host:port`` (0: any free port) and forward to ``target`` with ``delay`` seconds
    added in each direction."""

    def __init__(self, target: tuple[str, int], delay: float = 0.0005, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay}")
        self.target, self.delay = target, delay
        self._listener = socket.create_server((host, port))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self.connections = 0
        self.client_writes = 0
        self.bytes_up = 0
        self.bytes_down = 0

    def start(self) -> LatencyProxy:
        threading.Thread(target=self._accept, name="latency-proxy-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop accepting and cut every open connection."""
        with self._lock:
            self._closed = True
            sockets = [self._listener, *self._sockets]
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def counters(self) -> dict[str, int]:
        with self._lock:
            return {"connections": self.connections, "client_writes": self.client_writes,
                    "bytes_up": self.bytes_up, "bytes_down": self.bytes_down}

    def reset(self) -> None:
        with self._lock:
            self.connections = self.client_writes = self.bytes_up = self.bytes_down = 0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # listener closed by stop()
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                # The delay is the only latency we want: no Nagle coalescing on top of it.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
                self.connections += 1
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True,
                             name="latency-proxy-relay").start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Both directions of one connection in one thread: a ``select`` loop whose timeout is
        the next chunk's due time (``select`` takes microseconds; epoll would round up to a
        millisecond), so no thread hand-off adds latency of its own."""
        _precise_timers()
        ways = {client: _Way(upstream, up=True), upstream: _Way(client, up=False)}
        try:
            while any(not w.done for w in ways.values()):
                now = time.monotonic()
                for way in ways.values():
                    way.release(now)
                readers = [s for s, w in ways.items() if not w.eof]
                writers = [w.sink for w in ways.values() if w.out]
                due = [w.chunks[0][0] for w in ways.values() if w.chunks]
                timeout = max(0.0, min(due) - time.monotonic()) if due else None
                readable, writable, _ = select.select(readers, writers, [], timeout)
                for sock in readable:
                    self._receive(sock, ways[sock])
                for way in ways.values():
                    if way.sink in writable:
                        way.flush()
        except (OSError, ValueError):
            pass  # a side went away (or stop() closed both): the other is cut too
        finally:
            with self._lock:
                self._sockets.difference_update((client, upstream))
            client.close()
            upstream.close()

    def _receive(self, sock: socket.socket, way: _Way) -> None:
        try:
            data = sock.recv(_CHUNK)
        except BlockingIOError:
            return
        way.chunks.append((time.monotonic() + self.delay, data))  # b"": end of stream, delayed too
        if not data:
            way.eof = True
            return
        with self._lock:
            if way.up:
                self.client_writes += 1
                self.bytes_up += len(data)
            else:
                self.bytes_down += len(data)


class _Way:
    """One direction of a connection: chunks waiting for their due time, then bytes to send."""

    def __init__(self, sink: socket.socket, up: bool) -> None:
        self.sink, self.up = sink, up
        self.chunks: deque[tuple[float, bytes]] = deque()
        self.out = bytearray()
        self.eof = False  # the source closed
        self.closing = False  # ... and that end of stream is due
        self.done = False  # ... and everything before it was passed on

    def release(self, now: float) -> None:
        """Pass on every chunk that is due, at once (not on the next turn of the loop)."""
        while self.chunks and self.chunks[0][0] <= now:
            _, data = self.chunks.popleft()
            if data:
                self.out += data
            else:
                self.closing = True
        self.flush()

    def flush(self) -> None:
        if self.out:
            try:
                sent = self.sink.send(self.out)
            except BlockingIOError:
                sent = 0
            del self.out[:sent]
        if self.closing and not self.out and not self.done:
            self.sink.shutdown(socket.SHUT_WR)
            self.done = True


def _precise_timers() -> None:
    """Ask Linux for 1 ns timer slack on this thread (default 50 us): the delay is a sleep."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


def _serve(proxy: LatencyProxy, commands: IO[str], out: IO[str]) -> None:
    out.write(f"READY {proxy.port}\n")
    out.flush()
    for line in commands:
        command = line.strip()
        if command == "stats":
            out.write(json.dumps(proxy.counters()) + "\n")
        elif command == "reset":
            proxy.reset()
            out.write("ok\n")
        else:
            out.write(json.dumps({"error": f"unknown command {command!r}"}) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._latency_proxy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True, help="host:port of the server (TCP)")
    parser.add_argument("--delay-ms", type=float, default=0.5, help="added each way (0.5)")
    parser.add_argument("--port", type=int, default=0, help="listen port on 127.0.0.1 (0: any)")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    if not host or not port.isdigit():
        parser.error(f"--target must be host:port, got {args.target!r}")
    if args.delay_ms < 0:
        parser.error(f"--delay-ms must be >= 0, got {args.delay_ms}")
    with LatencyProxy((host, int(port)), args.delay_ms / 1000, port=args.port) as proxy:
        _serve(proxy, sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
