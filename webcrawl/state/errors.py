"""What the crawl state raises, for the layers above it (which never import redis themselves).

Every failure of the state's Redis is a :data:`StateError`; :data:`TRANSIENT` are the ones a
restart or a cluster failover explains (the crawl waits them out for a while).
"""

from __future__ import annotations

import redis
from redis.exceptions import ClusterDownError, TryAgainError

__all__ = ["TRANSIENT", "StateError", "is_connection_error"]

StateError = redis.RedisError
TRANSIENT: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError,
                                               ClusterDownError, TryAgainError)


def is_connection_error(exc: BaseException) -> bool:
    """The server did not answer (as opposed to refusing a command)."""
    return isinstance(exc, (redis.ConnectionError, redis.TimeoutError))
