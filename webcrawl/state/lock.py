"""A lock in Redis held under a token: taken with ``SET key token NX PX ttl``, renewed and released
only by the holder of that token (a compare-and-set in a small script), so a process whose lock
expired and was taken over can neither extend nor delete the new holder's.

The crawl's two locks use it: the planning lock (``planner:lock``, starting or joining a cycle,
:mod:`webcrawl.state.ledger`) and the allocation lock (``alloc:lock``, the one process that plans
for the crawl, :mod:`webcrawl.extensions._alloc_planner`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["TokenLock"]

# Extend the lock's time only if it still holds our token.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Delete the lock only if it still holds our token (it may have expired and been taken).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class TokenLock:
    """One lock key (see the module docstring). Safe to use from several threads."""

    def __init__(self, client: Any, key: str) -> None:
        self.client = client
        self.key = key
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def acquire(self, token: str, ttl_seconds: float) -> bool:
        """Take the lock for ``ttl_seconds`` if nobody holds it: True if ``token`` now holds it."""
        return bool(self.client.set(self.key, token, nx=True, px=_ms(ttl_seconds)))

    def renew(self, token: str, ttl_seconds: float) -> bool:
        """Hold it ``ttl_seconds`` more if ``token`` still holds it; False if it does not."""
        return bool(self._renew(keys=[self.key], args=[token, _ms(ttl_seconds)]))

    def release(self, token: str) -> bool:
        """Let it go if ``token`` still holds it; False (and nothing deleted) if it does not."""
        return bool(self._release(keys=[self.key], args=[token]))

    def holder(self) -> str | None:
        """The token holding the lock now, ``None`` when free."""
        raw = self.client.get(self.key)
        return raw.decode() if isinstance(raw, bytes) else raw
