"""The latency proxy as a child process of a benchmark, and a measurement of what it adds.

``ProxyProcess`` runs ``python -m bench._latency_proxy`` (see that module for the contract) and
talks to it over its stdin and stdout; :func:`measure_added_rtt` times raw ``PING`` round trips
to a redis-server directly and through the proxy, so that every benchmark reports the latency it
actually added next to its results.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time


def measure_added_rtt(direct: tuple[str, int], proxied: tuple[str, int], pings: int = 200,
                      ) -> tuple[float, float]:
    """Median seconds of a raw ``PING`` round trip to ``direct`` and through ``proxied``."""

    def median_rtt(address: tuple[str, int]) -> float:
        with socket.create_connection(address, timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times = []
            for _ in range(pings):
                started = time.perf_counter()
                sock.sendall(b"PING\r\n")
                reply = b""
                while not reply.endswith(b"\r\n"):
                    part = sock.recv(64)
                    if not part:
                        raise ConnectionError(f"{address} closed the connection")
                    reply += part
                times.append(time.perf_counter() - started)
        return statistics.median(times)

    return median_rtt(direct), median_rtt(proxied)


class ProxyProcess:
    """``python -m bench._latency_proxy`` in a child process (see the module docstring)."""

    def __init__(self, target: tuple[str, int], delay: float = 0.0005) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench._latency_proxy", "--target", f"{target[0]}:{target[1]}",
             "--delay-ms", str(delay * 1000)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.delay = delay
        line = self._line()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"latency proxy did not start: {line!r}")
        self.port = int(line.split()[1])

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def _ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._line()

    def counters(self) -> dict[str, int]:
        counters: dict[str, int] = json.loads(self._ask("stats"))
        return counters

    def reset(self) -> None:
        self._ask("reset")

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
