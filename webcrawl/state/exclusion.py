"""The exclusion list: domains whose owners asked to be left alone, shared by every crawl.

Adding a domain takes effect at once in every process: the scheduler's push script refuses it,
and its pop script drops the domain's queued requests the first time it meets them (see
``lua/push.lua`` and ``lua/pop.lua``). :func:`exclude` also drops the queued requests of every
crawl on the server straight away, so ``scrapy crawlstate`` shows them gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webcrawl.state.keys import EXCLUDED, EXCLUDED_EVENTS, GLOBAL_PREFIX

if TYPE_CHECKING:
    import redis

_DROP = """
local n = redis.call('ZCARD', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if n > 0 then
  redis.call('DECRBY', KEYS[3], n)
  redis.call('INCRBY', KEYS[4], n)
end
return n
"""


def normalise(domain: str) -> str:
    host = domain.strip().lower().rstrip(".")
    if not host or "/" in host or " " in host:
        raise ValueError(f"{domain!r} is not a host name: expected e.g. www.example.org")
    return host


def exclude(client: redis.Redis, domain: str) -> int:
    """Put ``domain`` on the list; return how many queued requests were dropped."""
    host = normalise(domain)
    client.sadd(EXCLUDED, host)
    client.incr(EXCLUDED_EVENTS)
    drop = client.register_script(_DROP)
    dropped = 0
    for ready in client.scan_iter(match=GLOBAL_PREFIX + "{*}:ready", count=1000):
        prefix = ready.decode()[: -len("ready")]
        dropped += int(drop(keys=[f"{prefix}frontier:{host}", ready, prefix + "queued",
                                  prefix + "excluded:dropped"], args=[host]))
    return dropped


def unexclude(client: redis.Redis, domain: str) -> bool:
    host = normalise(domain)
    removed = bool(client.srem(EXCLUDED, host))
    client.incr(EXCLUDED_EVENTS)
    return removed


def excluded(client: redis.Redis) -> list[str]:
    return sorted(d.decode() for d in client.smembers(EXCLUDED))
