"""Validator trust per host in Redis (``{c}:trust:validators``: host -> JSON), shared by every
process of a crawl, with a short in-process cache for the per-request decision.

The state machine itself is pure (:class:`webcrawl.change.ValidatorTrust`); this module only
loads and stores it. An update is read-modify-write inside ``WATCH``/``MULTI`` (retried on
conflict), so two processes reporting evidence about one host at once both count. Reads go
through a cache of ``cache_seconds``: another process's verdict reaches this one within that
time; this process's own updates are seen at once.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from webcrawl.change.trust import Event, State, TrustPolicy, ValidatorTrust

if TYPE_CHECKING:
    import redis

    from webcrawl.clock import Clock
    from webcrawl.state.keys import CrawlKeys

__all__ = ["TrustStore"]

logger = logging.getLogger(__name__)


class TrustStore:
    """Each host's :class:`ValidatorTrust` for one crawl."""

    def __init__(self, client: redis.Redis, keys: CrawlKeys, policy: TrustPolicy, clock: Clock,
                 *, cache_seconds: float = 5.0) -> None:
        self.client = client
        self.key = keys.trust_validators
        self.policy = policy
        self.clock = clock
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, ValidatorTrust]] = {}

    @staticmethod
    def _decode(raw: bytes | str | None, host: str) -> ValidatorTrust:
        if raw is None:
            return ValidatorTrust()
        try:
            return ValidatorTrust.from_dict(json.loads(raw))
        except (ValueError, TypeError):
            logger.warning("validator trust of %s is unreadable; learning it again", host)
            return ValidatorTrust()

    def get(self, host: str) -> ValidatorTrust:
        """The host's trust (from the cache when fresh enough). Do not mutate it."""
        now = self.clock.time()
        cached = self._cache.get(host)
        if cached is not None and now - cached[0] < self.cache_seconds:
            return cached[1]
        trust = self._decode(self.client.hget(self.key, host), host)
        self._cache[host] = (now, trust)
        return trust

    def observe(self, host: str, event: Event) -> tuple[ValidatorTrust, State | None]:
        """Apply ``event`` to the host's trust in Redis; return the trust and the new state if
        the event changed it."""
        now = self.clock.time()
        outcome: list[tuple[ValidatorTrust, State | None]] = []

        def update(pipe: redis.client.Pipeline) -> None:
            trust = self._decode(pipe.hget(self.key, host), host)
            changed = trust.observe(event, now, self.policy)
            pipe.multi()
            pipe.hset(self.key, host, json.dumps(trust.to_dict()))
            outcome[:] = [(trust, changed)]

        self.client.transaction(update, self.key)
        trust, changed = outcome[0]
        self._cache[host] = (now, trust)
        return trust, changed

    def all(self) -> dict[str, ValidatorTrust]:
        """Every host's trust (for reports and tests)."""
        raw = self.client.hgetall(self.key)
        return {(k.decode() if isinstance(k, bytes) else k): self._decode(v, str(k)) for k, v in raw.items()}
