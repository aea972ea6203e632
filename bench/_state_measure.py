"""What the crawl state costs in memory: Redis's own accounting, and the allocator's page table.

Redis figures are the server's: ``INFO memory`` ``used_memory`` (every byte the allocator handed
out, jemalloc size classes included) and ``MEMORY USAGE <key> SAMPLES 0`` (a key with all its
members, counted exactly). Answers kept for retries (``op:<id>``, a minute each) are dropped
before each look: they are the last minute's traffic, not state that grows with the crawl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

def used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def command_calls(client: Any) -> tuple[int, int]:
    """``(commands, script calls)`` the server ran so far (commands inside scripts included)."""
    stats = client.info("commandstats")
    total = sum(int(v["calls"]) for v in stats.values())
    return total, sum(int(stats.get(f"cmdstat_{n}", {}).get("calls", 0)) for n in ("evalsha", "eval"))


def key_bytes(client: Any, key: str) -> int:
    return int(client.execute_command("MEMORY USAGE", key, "SAMPLES", 0) or 0)


def drop_op_answers(client: Any, prefixes: list[str]) -> int:
    """Delete the kept script answers (``<prefix>op:*``); returns the bytes they held."""
    held = 0
    for prefix in prefixes:
        keys = list(client.scan_iter(match=prefix + "op:*", count=10_000))
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            held += sum(key_bytes(client, k) for k in chunk)
            client.unlink(*chunk)
    return held


@dataclass
class Snapshot:
    """``used_memory`` and the size of each named key at one moment."""

    used: int
    keys: dict[str, int] = field(default_factory=dict)


def snapshot(client: Any, keys: dict[str, str]) -> Snapshot:
    """``keys``: label -> Redis key."""
    return Snapshot(used_memory(client), {label: key_bytes(client, key) for label, key in keys.items()})


def table_bytes(table: Any) -> dict[str, int]:
    """Bytes the allocator's :class:`~webcrawl.extensions._alloc_table.PageTable` holds, by part,
    as allocated (room to grow included): the record rows, listing times and host ids (numpy),
    the URLs' UTF-8 bytes (one buffer) and their offsets, and the URL -> row index (sorted hashes
    and rows, plus the Python objects of URLs not merged into them yet)."""
    return {
        "record rows (numpy)": int(table.rows.nbytes),
        "listing times (numpy)": int(table.listed.nbytes),
        "host ids (numpy)": int(table.host.nbytes),
        **table.url_store.nbytes(),
    }
