"""The Lua scripts of the crawl state, loaded once per client.

Shard scripts get two preludes: the page-record helpers generated from
:data:`webcrawl.state.records.FIELDS`, and ``lua2/common.lua`` (host queues, due members, the
server clock, idempotent answers). Every key a script touches is passed in ``KEYS``; the key
lists are built here, from a :class:`~webcrawl.state.layout.ShardKeys`, so callers never get
them wrong. Each call that must not take effect twice carries an operation id: its answer is
kept under ``op:<id>`` for :attr:`ScriptSet.op_ttl` seconds (:func:`op_ttl_for`: longer than the
longest Redis outage the crawl waits out, during which calls stay queued with their ids), and a
retry with the same id (after a timeout that hid a success) gets that answer back with no
second effect.
"""

from __future__ import annotations

import itertools
import os
from importlib import resources
from typing import TYPE_CHECKING, Any

from webcrawl.state import records

if TYPE_CHECKING:
    from redis.commands.core import Script

    from webcrawl.state.layout import ShardKeys

__all__ = ["MAX_OUTAGE_SECONDS", "OP_TTL_SECONDS", "ScriptSet", "new_op_id", "op_ttl_for",
           "shard_keys_for"]

OP_TTL_SECONDS = 60
#: The longest Redis outage a crawl may wait out (``WEBCRAWL_REDIS_OUTAGE_SECONDS``): op answers
#: are kept that long and a minute more, a few MB a process at most.
MAX_OUTAGE_SECONDS = 3600.0


def op_ttl_for(outage_seconds: float) -> int:
    """How long op answers are kept when the crawl waits out outages of ``outage_seconds``: a
    call retried after the longest outage still finds its answer."""
    return int(max(OP_TTL_SECONDS, outage_seconds + OP_TTL_SECONDS))
_SHARD_SCRIPTS = ("pop", "push", "lease", "reclaim", "land", "claim", "exclude", "note")
_counter = itertools.count()
_process_token = os.urandom(6).hex()


def new_op_id() -> str:
    """An id unique across processes and machines (random process token + counter)."""
    return f"{_process_token}{next(_counter):x}"


def _source(name: str) -> str:
    if name == "seen":  # the seen filter's rules, with the sizes of a filter nothing recorded
        from webcrawl.state.seen import LUA

        return LUA
    return resources.files("webcrawl.state").joinpath(f"lua2/{name}.lua").read_text()


#: Scripts made of several files, joined in this order (one concern a file).
_PARTS = {"land": ("land_head", "checks", "lifecycle", "land"),
          "push": ("refused", "seen", "push"), "note": ("refused", "note")}


def _shard_source(name: str) -> str:
    return records.LUA + _source("common") + "".join(_source(p) for p in _PARTS.get(name, (name,)))


#: The KEYS of each shard script, by attribute name of :class:`ShardKeys` ("op" is the call's
#: idempotency key, added by :func:`shard_keys_for`).
KEYS: dict[str, tuple[str, ...]] = {
    "pop": ("ready_new", "ready_due", "frontier", "due", "next", "delay", "leases", "leased",
            "excluded", "queued", "pages", "validators", "links", "op"),
    "push": ("frontier", "ready_new", "ready_due", "due", "next", "seen", "seen_meta", "excluded",
             "queued", "seq", "refused", "refused_at", "op"),
    "note": ("refused", "refused_at"),
    "lease": ("leases", "leased"),
    "reclaim": ("leases", "leased", "frontier", "due", "ready_new", "ready_due", "next", "queued",
                "pages"),
    "land": ("pages", "validators", "due", "ready_due", "next", "delay", "health", "ready_new",
             "frontier", "listing", "trust_sitemaps", "trust_validators", "dirty", "records", "events",
             "links", "checks", "op"),
    "claim": ("next", "delay", "frontier", "due", "ready_new", "ready_due"),
    "exclude": ("excluded", "excluded_version", "frontier", "due", "ready_new", "ready_due",
                "queued"),
}


def shard_keys_for(script: str, keys: ShardKeys, op_id: str | None = None) -> list[str]:
    return [keys.op(op_id or "-") if name == "op" else getattr(keys, name)
            for name in KEYS[script]]


class ScriptSet:
    """The scripts of one client. ``call(name, shard, args, op_id, client=pipeline)`` runs one.

    Outside a pipeline a call is redis-py's ``Script`` (EVALSHA, loading the script on NOSCRIPT).
    Inside one it is a bare EVALSHA: a pipeline holding ``Script`` objects would first send a
    blocking SCRIPT EXISTS, a round trip of its own on every flush. The scripts are loaded when
    the set is made (:meth:`load`); a server that lost them (restart, failover) answers NOSCRIPT
    and the caller loads them again and retries, which the operation ids make safe.
    """

    def __init__(self, client: Any, *, op_ttl: int = OP_TTL_SECONDS) -> None:
        self.client = client
        self.op_ttl = op_ttl
        self._scripts: dict[str, Script] = {
            name: client.register_script(_shard_source(name)) for name in _SHARD_SCRIPTS}
        for name in ("bucket", "ledger"):
            self._scripts[name] = client.register_script(_source(name))
        self.load()

    def load(self) -> None:
        """Load every script into the server's cache (on a cluster, every primary's; on a
        single server in one round trip)."""
        if hasattr(self.client, "get_primaries"):
            for script in self._scripts.values():
                self.client.script_load(script.script)
            return
        pipe = self.client.pipeline(transaction=False)
        for script in self._scripts.values():
            pipe.script_load(script.script)
        pipe.execute()

    def call(self, name: str, shard: ShardKeys, args: list[Any], *, op_id: str | None = None,
             client: Any = None) -> Any:
        return self.call_keys(name, shard_keys_for(name, shard, op_id), args, client=client)

    def call_keys(self, name: str, keys: list[str], args: list[Any], *, client: Any = None) -> Any:
        script = self._scripts[name]
        if client is None:
            return script(keys=keys, args=args)
        return client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)

    def source(self, name: str) -> str:
        return self._scripts[name].script
