"""The test web's HTTP server: one threaded HTTP/1.1 server per shop host, all on one port.

    python -m bench.liveweb.server --seed S --minutes M [--port 0] --log FILE
        [--params JSON_FILE] [--small] [--day-seconds D] [--lifecycle [--no-sitemap 2,3]]

prints ``READY {"hosts": [...], "port": N, "origin": epoch, "pid": ...}`` once every host
listens, then serves until SIGTERM or SIGINT. Before READY it writes the header file
(:func:`header_path`: the log's name with ``.header.json``): the scenario parameters, the origin
(epoch and monotonic seconds of t = 0), hosts, port and pid. Every request becomes one JSON line
of the log, written before the response (see :data:`LOG_FIELDS`).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from bench.liveweb.params import ScenarioParams
from bench.liveweb.scenario import Scenario
from bench.liveweb.site import Answer, LiveSite

__all__ = ["LOG_FIELDS", "LiveServer", "header_path", "main"]

#: Keys of a log line: ``t`` seconds from the origin at arrival (monotonic), ``wall`` and
#: ``mono`` at arrival, ``host``, ``path``, ``method``, ``status``, ``bytes`` written (status
#: line, headers, body), ``body`` bytes, ``inm`` / ``ims`` (If-None-Match / If-Modified-Since
#: sent), ``ua``, ``kind`` (robots, sitemap, hub, category, product, other), ``page`` and
#: ``version`` (scored pages: served, or confirmed by a 304), ``life`` (a product's lifecycle
#: answer: ``unborn`` 404 before it exists, ``dead`` 404/410, ``moved`` 301/308 from its old
#: URL, ``temp`` 302/307; null otherwise) and ``location`` (a redirect's Location, else null).
LOG_FIELDS = ("t", "wall", "mono", "host", "path", "method", "status", "bytes", "body", "inm",
              "ims", "ua", "kind", "page", "version", "life", "location")


def header_path(log: str | Path) -> Path:
    log = Path(log)
    return log.with_name(log.stem + ".header.json")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ShopServer

    def parse_request(self) -> bool:
        self._arrival = (time.monotonic(), time.time())  # the request line just arrived
        return super().parse_request()

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _serve(self, body: bool) -> None:
        owner, shop = self.server.owner, self.server.shop
        mono, wall = self._arrival
        t = mono - owner.origin_mono
        inm, ims = self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since")
        try:
            answer = owner.site.answer(shop, self.path, inm, ims, t)
        except Exception as exc:  # a bug must show as a 500 in the log, not a hung client
            answer = Answer(500, {"Content-Type": "text/plain"}, repr(exc).encode(), "other")
        reason = self.responses.get(answer.status, ("",))[0]
        lines = [f"HTTP/1.1 {answer.status} {reason}"]
        lines += [f"{k}: {v}" for k, v in answer.headers.items()]
        lines.append(f"Content-Length: {len(answer.body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        payload = answer.body if body and answer.status != 304 else b""
        owner.record({
            "t": round(t, 6), "wall": round(wall, 6), "mono": round(mono, 6),
            "host": self.server.address, "path": self.path, "method": self.command,
            "status": answer.status, "bytes": len(head) + len(payload), "body": len(payload),
            "inm": inm is not None, "ims": ims is not None,
            "ua": self.headers.get("User-Agent", ""), "kind": answer.kind,
            "page": answer.page, "version": answer.version, "life": answer.life,
            "location": answer.headers.get("Location"),
        })
        self.wfile.write(head + payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the JSON log replaces stderr chatter


class _ShopServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    owner: LiveServer
    shop: int
    address: str

    def server_bind(self) -> None:
        # HTTPServer.server_bind would call getfqdn(), a reverse DNS lookup.
        socketserver.TCPServer.server_bind(self)
        self.address = str(self.server_address[0])


class LiveServer:
    """The shops of ``params`` served in this process, logging to ``log``."""

    def __init__(self, params: ScenarioParams, log: str | Path, port: int = 0) -> None:
        self.params, self.log_path, self.port = params, Path(log), port
        self.scenario = Scenario(params)
        self.hosts = params.hosts
        self._servers: list[_ShopServer] = []
        self._lock = threading.Lock()
        self._log: IO[str] | None = None
        self.origin_mono = self.origin = 0.0

    def start(self) -> dict[str, Any]:
        """Bind every host, fix the origin, write the header, serve; returns the READY info."""
        self._servers = self._bind()
        self.port = self._servers[0].server_address[1]
        self._log = open(self.log_path, "a", encoding="utf-8")
        self.origin_mono, self.origin = time.monotonic(), time.time()
        self.site = LiveSite(self.scenario, self.origin, self.port)
        info = {"hosts": self.hosts, "port": self.port, "origin": self.origin,
                "origin_mono": self.origin_mono, "pid": os.getpid(),
                "log": str(self.log_path), "header": str(header_path(self.log_path))}
        header = dict(info, params=self.params.to_dict())
        header_path(self.log_path).write_text(json.dumps(header, indent=1))
        for server in self._servers:
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                             daemon=True, name=f"liveweb-{server.address}").start()
        return info

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def record(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry) + "\n"
        with self._lock:
            if self._log is not None:
                self._log.write(line)
                self._log.flush()

    def _bind(self, attempts: int = 50) -> list[_ShopServer]:
        for _ in range(attempts if self.port == 0 else 1):
            servers: list[_ShopServer] = []
            port = self.port
            try:
                for shop, host in enumerate(self.hosts):
                    server = _ShopServer((host, port), _Handler)
                    server.owner, server.shop = self, shop
                    servers.append(server)
                    port = server.server_address[1]
                return servers
            except OSError as exc:
                for server in servers:
                    server.server_close()
                if exc.errno != errno.EADDRINUSE or self.port != 0:
                    raise
        raise OSError(errno.EADDRINUSE, f"no port free on all of {self.hosts}")


def params_from_args(args: argparse.Namespace) -> ScenarioParams:
    """The scenario of the command line: ``--params`` file, else defaults (``--small``: the test
    size), then ``--seed``, ``--minutes`` and ``--day-seconds`` on top, then ``--lifecycle``
    (:meth:`ScenarioParams.with_lifecycle`, without a sitemap on the shops ``--no-sitemap``)."""
    if args.params:
        base = ScenarioParams.from_dict(json.loads(Path(args.params).read_text()))
    else:
        base = ScenarioParams.small() if args.small else ScenarioParams()
    data = base.to_dict()
    for key in ("seed", "minutes", "day_seconds"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    params = ScenarioParams.from_dict(data)
    if args.lifecycle:
        params = params.with_lifecycle(int(s) for s in args.no_sitemap.split(",") if s.strip())
    return params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.liveweb.server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int)
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--day-seconds", dest="day_seconds", type=float)
    parser.add_argument("--params", help="JSON file of scenario parameters")
    parser.add_argument("--small", action="store_true", help="the small test scenario")
    parser.add_argument("--lifecycle", action="store_true",
                        help="products die, come back, move and redirect for a while")
    parser.add_argument("--no-sitemap", default="2,3",
                        help="with --lifecycle: the shops without a sitemap (0-based, default 2,3)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True, help="request log (JSON lines), appended to")
    args = parser.parse_args(argv)
    try:
        params = params_from_args(args)
    except (OSError, ValueError, TypeError) as exc:
        parser.error(str(exc))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = LiveServer(params, args.log, args.port)
    info = server.start()
    print("READY " + json.dumps(info), flush=True)
    while not stop.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
