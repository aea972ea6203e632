"""Headless Chromium driven over the Chrome DevTools Protocol, with the standard library only.

:func:`open_browser` starts Debian's ``chromium`` with a fresh profile and
``--remote-debugging-port=0``, reads the DevTools websocket address it prints on stderr, and
talks to it through :class:`WebSocket`, a minimal RFC 6455 client (text frames, masked as a
client must, pings answered). :class:`Browser` opens one page target in flattened session mode,
loads a URL, waits for its load event, evaluates JavaScript, takes screenshots, and collects
what the page reported: console errors, uncaught exceptions, log entries of level error.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

INSTALL_HINT = ("the browser test needs Chromium: install it with `apt-get install -y chromium` "
                "(Debian; .ci/run does it), or set WEBCRAWL_CHROMIUM to a Chromium binary")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1"]


def chromium_binary() -> str | None:
    """The Chromium to drive: ``WEBCRAWL_CHROMIUM``, else the first of the usual names on PATH."""
    named = os.environ.get("WEBCRAWL_CHROMIUM")
    if named:
        return named
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class WebSocket:
    """A blocking websocket client for one ``ws://`` URL (text messages only)."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        head, self._buffer = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def _frame(self, opcode: int, payload: bytes) -> None:
        size = len(payload)
        head = bytes([0x80 | opcode])
        if size < 126:
            head += bytes([0x80 | size])
        elif size < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", size)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", size)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def _read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def receive(self, timeout: float) -> str:
        """The next text message (fragments joined); pings answered on the way."""
        self.sock.settimeout(max(timeout, 0.01))
        message = b""
        while True:
            first, second = self._read(2)
            size = second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._read(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(size)  # a server never masks its frames
            opcode = first & 0x0F
            if opcode == 0x9:
                self._frame(0xA, payload)
            elif opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            elif opcode in (0x0, 0x1, 0x2):
                message += payload
                if first & 0x80:
                    return message.decode()

    def close(self) -> None:
        try:
            self._frame(0x8, b"")
        finally:
            self.sock.close()


class Browser:
    """One page of a running Chromium, spoken to over DevTools (see the module docstring)."""

    def __init__(self, ws: WebSocket, timeout: float) -> None:
        self.ws, self.timeout, self._next = ws, timeout, 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=True)

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while True:
            reply = json.loads(self.ws.receive(deadline - time.monotonic()))
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, **params: Any) -> dict[str, Any]:
        """The first event ``method`` whose params include ``params`` (already received, or the
        next to come before the timeout)."""
        deadline = time.monotonic() + self.timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                got = event.get("params", {})
                if event.get("method") == method and all(got.get(k) == v for k, v in params.items()):
                    return event
            seen = len(self.events)
            self.events.append(json.loads(self.ws.receive(deadline - time.monotonic())))

    def load(self, url: str) -> None:
        """Navigate to ``url`` and return once its own load event fired (not about:blank's)."""
        loader = self.call("Page.navigate", {"url": url}, session=True).get("loaderId")
        self.wait_for("Page.lifecycleEvent", name="load", loaderId=loader)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                           session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, width: int, height: int) -> bytes:
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session=True)
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                         session=True)["data"]
        return base64.b64decode(data)

    def errors(self) -> list[str]:
        """What the page reported as wrong: console errors and assertions, uncaught exceptions,
        log entries of level error (a resource that failed to load, a blocked request)."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append("log: " + params["entry"].get("text", ""))
        return found


def _devtools_url(process: subprocess.Popen[bytes], timeout: float) -> tuple[str, threading.Thread]:
    """Read Chromium's stderr until it names its DevTools websocket; keep draining it after (the
    thread returned), so a chatty browser never blocks on a full pipe."""
    found, lines = threading.Event(), []
    url: list[str] = []

    def drain() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode(errors="replace").strip()
            lines.append(line)
            if "DevTools listening on ws://" in line and not url:
                url.append(line.split("DevTools listening on ", 1)[1])
                found.set()
        found.set()  # stderr closed: the browser is gone

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    if not found.wait(timeout) or not url:
        raise RuntimeError("Chromium did not open DevTools:\n" + "\n".join(lines[-20:]))
    return url[0], reader


@contextmanager
def open_browser(timeout: float = 30.0) -> Iterator[Browser]:
    """A headless Chromium with a fresh profile, closed (and its profile deleted) on exit."""
    binary = chromium_binary()
    if binary is None:
        raise FileNotFoundError(INSTALL_HINT)
    profile = tempfile.mkdtemp(prefix="webcrawl-chromium-")
    process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ws, reader = None, None
    try:
        url, reader = _devtools_url(process, timeout)
        ws = WebSocket(url, timeout)
        yield Browser(ws, timeout)
    finally:
        if ws is not None:
            ws.close()
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if reader is not None:
            reader.join(timeout)  # stderr ends once the browser's helpers are gone too
        assert process.stderr is not None
        process.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)
