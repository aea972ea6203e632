"""One redis-server process of the test Redis Cluster (see :mod:`tests.rediscluster`), and the
port and polling helpers that starting it needs."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection
from pathlib import Path

import redis

from webcrawl.state.embedded import redis_server_binary

SlotRow = tuple[int, int, int, tuple[int, ...]]
BUS_PORT_OFFSET = 10000  # Redis 6.2 always puts a node's cluster bus on its port + 10000
POLL_SECONDS = 0.02


class ClusterNodeProcess:
    """A cluster-enabled redis-server on 127.0.0.1:``port`` with its files in ``folder``.

    ``master_port`` is the master it was told to replicate (None for a master as formed).
    """

    def __init__(self, folder: Path, node_timeout_ms: int) -> None:
        self.folder = folder
        self.node_timeout_ms = node_timeout_ms
        self.port = 0
        self.node_id = ""
        self.master_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._client: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"<ClusterNodeProcess 127.0.0.1:{self.port}{'' if self.alive else ' dead'}>"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self, port: int) -> None:
        """Start the server (without waiting for it); a fresh folder each time."""
        self.port = port
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in ("nodes.conf", "appendonly.aof"):
            (self.folder / stale).unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [
                redis_server_binary(),
                "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.folder),
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.node_timeout_ms),
                # A replica takes over however long it was cut off: tests kill masters at will.
                "--cluster-replica-validity-factor", "0",
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                "--maxmemory-policy", "noeviction",
                "--logfile", "redis.log", "--daemonize", "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_until_up(self, deadline: float, avoid: Collection[int]) -> None:
        """Wait until the server answers PING. If it exited (its port was taken meanwhile by
        someone else), start it again on a free port pair not in ``avoid``."""
        tried = {self.port, *avoid}
        while True:
            if self.process is not None and self.process.poll() is not None:
                self.spawn(free_port_pair(tried))
                tried.add(self.port)
                self._client = None
            try:
                if self.client().ping():
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis-server on port {self.port} did not start")
            time.sleep(POLL_SECONDS)

    def client(self) -> redis.Redis:
        """A plain (non-cluster) client of this node alone, reused."""
        if self._client is None:
            self._client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5,
                                       socket_connect_timeout=2)
        return self._client

    def known_node_ids(self) -> set[str]:
        nodes = self.client().execute_command("CLUSTER NODES")
        return {entry["node_id"] for entry in nodes.values()}

    def cluster_ok(self, known_nodes: int) -> bool:
        info = self.client().execute_command("CLUSTER INFO")
        return info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == known_nodes

    def replication_settled(self) -> bool:
        """A replica's link to its master is up and its first sync is done; masters: True."""
        info = self.client().info("replication")
        if info["role"] != "slave":
            return True
        return info["master_link_status"] == "up" and not info.get("master_sync_in_progress")

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(sig)
            self.process.wait()

    def describe(self) -> str:
        """Port, exit status and the end of the log: what a failed start should show."""
        log = self.folder / "redis.log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else "(no log)"
        status = "running" if self.alive else f"exited {self.process and self.process.returncode}"
        return f"--- node 127.0.0.1:{self.port} ({status}):\n{tail}"


def cluster_slots_of(client: redis.Redis) -> tuple[SlotRow, ...]:
    """CLUSTER SLOTS of one node, by port, sorted: comparable across nodes."""
    rows = []
    for row in client.execute_command("CLUSTER SLOTS"):
        start, end, master, *replicas = row
        rows.append((int(start), int(end), int(master[1]),
                     tuple(sorted(int(replica[1]) for replica in replicas))))
    return tuple(sorted(rows))


def free_port_pair(avoid: Collection[int]) -> int:
    """A port P, free now together with P + 10000 (its cluster bus), such that neither P nor its
    bus is a port or a bus port of ``avoid``."""
    busy = {port + shift for port in avoid for shift in (0, BUS_PORT_OFFSET)}
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if {port, port + BUS_PORT_OFFSET} & busy or port + BUS_PORT_OFFSET > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + BUS_PORT_OFFSET))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair (P, P + 10000) on 127.0.0.1")


def wait_for(deadline: float, condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; a node refusing a connection counts as not yet."""
    while True:
        try:
            if condition():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(POLL_SECONDS)
