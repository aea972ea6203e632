"""The politeness benchmark's HTTP server: every host of a :class:`PoliteSite`, one process.

One asyncio loop listens on every host's address at one shared port and answers HTTP/1.1 GETs
(keep-alive) from pre-rendered bodies: serving hundreds of requests per second costs it a few
percent of a core, so the crawler, not the server, sets the pace. Every request is logged with its
arrival time, ``time.monotonic()`` read when its bytes were handed to the loop (CLOCK_MONOTONIC,
the same clock in every process of the machine), the host it came to, its path and status.

Command line (the benchmark runs it as a child process)::

    python -m bench._polite_server --hosts 500 --pages 20 --log FILE

prints ``READY <port>`` once every host listens. Each line ``dump`` on stdin writes the log so
far to FILE (JSON lines, replacing it) and is answered ``ok <entries>``. Exits on EOF of stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench._polite_site import PoliteSite

_REASONS = {200: b"OK", 404: b"Not Found", 400: b"Bad Request"}


@dataclass(frozen=True)
class Request:
    host: str
    path: str
    mono: float
    status: int


class _Connection(asyncio.Protocol):
    def __init__(self, site: PoliteSite, host: str, log: list[tuple[str, str, float, int]]) -> None:
        self.site, self.host, self.log = site, host, log
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        arrival = time.monotonic()
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:  # GETs only: a request ends with its headers
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if len(line) != 3:
                status, kind, body = 400, b"text/plain", b"bad request"
                path = ""
            else:
                path = line[1]
                status, kind, body = self.site.respond(self.host, path)
            self.log.append((self.host, path, arrival, status))
            close = b"\r\nconnection: close" in head.lower() or status == 400
            assert self.transport is not None
            self.transport.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
                % (status, _REASONS[status], kind, len(body), b"Connection: close\r\n" if close else b"")
                + body)
            if close:
                self.transport.close()
                return


async def _listen(site: PoliteSite, log: list[tuple[str, str, float, int]]) -> list[asyncio.Server]:
    """Every host on one port, picked at random and retried while some address has it taken."""
    loop = asyncio.get_running_loop()
    rng = random.Random()
    for _ in range(100):
        port, servers = rng.randrange(20000, 60000), []
        try:
            for host in site.hosts:
                servers.append(await loop.create_server(
                    lambda host=host: _Connection(site, host, log), host, port, backlog=512))
            site.bind(port)
            return servers
        except OSError as exc:
            for server in servers:
                server.close()
            if exc.errno != errno.EADDRINUSE:
                raise
    raise OSError(errno.EADDRINUSE, "no port free on every host")


async def _serve(site: PoliteSite, log_path: Path) -> None:
    log: list[tuple[str, str, float, int]] = []
    servers = await _listen(site, log)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def dump() -> None:
        entries = list(log)
        with open(log_path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"host": h, "path": p, "mono": m, "status": s}) + "\n"
                         for h, p, m, s in entries)
        print(f"ok {len(entries)}", flush=True)

    def commands() -> None:  # stdin is read in a thread: the loop only answers requests
        for line in sys.stdin:
            if line.strip() == "dump":
                loop.call_soon_threadsafe(dump)
        loop.call_soon_threadsafe(done.set)

    print(f"READY {site.port}", flush=True)
    threading.Thread(target=commands, daemon=True).start()
    await done.wait()
    for server in servers:
        server.close()


def read_log(path: Path) -> list[Request]:
    with open(path, encoding="utf-8") as f:
        return [Request(**json.loads(line)) for line in f if line.endswith("\n")]


class ServerProcess:
    """``python -m bench._polite_server`` as a child process."""

    def __init__(self, hosts: int, pages: int, log_path: Path) -> None:
        self.log_path = log_path
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench._polite_server", "--hosts", str(hosts), "--pages",
             str(pages), "--log", str(log_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"the politeness server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.pid = self.process.pid

    def log(self) -> list[Request]:
        """Every request so far, in arrival order."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("dump\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer.startswith("ok "):
            raise RuntimeError(f"the politeness server answered {answer!r}")
        return read_log(self.log_path)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._polite_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=500)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(_serve(PoliteSite(args.hosts, args.pages), args.log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
