"""Measured costs and domain health in Redis, shared by every process of a crawl.

Three things, each updated by one Lua script (atomic, so processes never lose an update):

- ``{c}:costs:<page type>``: running averages of measured fetches of a page type, by the rule of
  :class:`webcrawl.revisit.RunningCost` (a plain mean over the first ``1 / alpha`` measurements,
  then exponentially weighted): ``mean:full``, ``mean:not_modified``, ``mean:failed`` (wire bytes
  of such attempts), ``mean:failure`` (the failure rate) and ``mean:billed`` (the cost of an
  attempt in the site's unit), each with its count ``n:<kind>``. :meth:`CostStore.profile` turns
  them into the model's :class:`~webcrawl.revisit.CostProfile`.
- ``{c}:health:<domain>``: the state of :class:`webcrawl.revisit.HealthTracker` (``bad``,
  ``weight``, ``at``: a bad-outcome rate decaying in time), ``streak`` (bad outcomes in a row,
  the exponent of the backoff; 0 after any good answer) and ``until`` (the latest backoff hold).
  :meth:`CostStore.multiplier` is the factor that raises the domain's expected cost.
- three fields added to an existing page history hash (``{c}:page:<url>``, never created here):
  ``billed`` (the page's cost so far in the site's unit, every attempt), ``failed`` (failed
  attempts) and ``failed_bytes`` (their wire bytes). The history's own ``cost`` stays what the
  change-detection components record (bytes of the answers they saw).
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.context import crawl_context
from webcrawl.parse import Canonicalizer
from webcrawl.revisit import BillingModel, CostProfile
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore

if TYPE_CHECKING:
    from collections.abc import Callable

    import redis
    from scrapy.crawler import Crawler

__all__ = ["OUTCOMES", "CostContext", "CostStore", "DomainHealth", "backoff_seconds", "cost_context"]

OUTCOMES = ("full", "not_modified", "failed")

_RECORD = """
local alpha = tonumber(ARGV[1])
local function update(kind, value)
  local n = redis.call('HINCRBY', KEYS[1], 'n:' .. kind, 1)
  local old = tonumber(redis.call('HGET', KEYS[1], 'mean:' .. kind) or value)
  local weight = math.max(alpha, 1 / n)
  redis.call('HSET', KEYS[1], 'mean:' .. kind, tostring(old + weight * (value - old)))
end
update(ARGV[2], tonumber(ARGV[3]))
update('failure', ARGV[2] == 'failed' and 1 or 0)
update('billed', tonumber(ARGV[4]))
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HINCRBYFLOAT', KEYS[2], 'billed', ARGV[4])
  if ARGV[2] == 'failed' then
    redis.call('HINCRBY', KEYS[2], 'failed', 1)
    redis.call('HINCRBYFLOAT', KEYS[2], 'failed_bytes', ARGV[3])
  end
end
return 1
"""

# HealthTracker.observe, applied in place: decay to now, add the outcome, count the streak.
_HEALTH = """
local now, half = tonumber(ARGV[1]), tonumber(ARGV[2])
local s = redis.call('HMGET', KEYS[1], 'bad', 'weight', 'at', 'streak')
local bad, weight, at = tonumber(s[1] or 0), tonumber(s[2] or 0), tonumber(s[3])
local streak = tonumber(s[4] or 0)
local previous = streak
if at ~= nil and now > at then
  local factor = 2 ^ (-(now - at) / half)
  bad, weight = bad * factor, weight * factor
end
if at == nil or now > at then at = now end
weight = weight + 1
if ARGV[3] == '1' then streak = 0 else bad = bad + 1; streak = streak + 1 end
redis.call('HSET', KEYS[1], 'bad', tostring(bad), 'weight', tostring(weight), 'at', tostring(at),
           'streak', streak)
return {tostring(bad), tostring(weight), tostring(at), streak, previous}
"""


@dataclass(frozen=True)
class DomainHealth:
    """A domain's health as stored (see the module docstring)."""

    bad: float = 0.0
    weight: float = 0.0
    at: float | None = None
    streak: int = 0
    until: float = 0.0

    def bad_rate(self, now: float, half_life_seconds: float) -> float:
        """The bad-outcome rate decayed to ``now`` (missing weight counts as good outcomes)."""
        bad, weight = self.bad, self.weight
        if self.at is not None and now > self.at:
            factor = math.exp2(-(now - self.at) / half_life_seconds)
            bad, weight = bad * factor, weight * factor
        return bad / max(weight, 1.0)


def _float(value: bytes | str | None, default: float = 0.0) -> float:
    return float(value) if value is not None else default


class CostStore:
    """Cost averages per page type and health per domain of one crawl.

    ``penalty`` and ``half_life_seconds`` are :class:`webcrawl.revisit.HealthTracker`'s: the
    multiplier is ``1 + penalty * bad_rate``. ``cache_seconds``: how long :meth:`profile` and
    :meth:`multiplier` answers are reused in this process (the priority middleware asks per
    request); this process's own updates clear its cache at once.
    """

    def __init__(self, client: redis.Redis, keys: CrawlKeys, *, alpha: float = 0.1,
                 penalty: float = 4.0, half_life_seconds: float = 600.0,
                 cache_seconds: float = 5.0) -> None:
        if not 0 < alpha <= 1 or penalty < 0 or half_life_seconds <= 0:
            raise ValueError("CostStore: expected 0 < alpha <= 1, penalty >= 0, half_life_seconds > 0")
        self.client = client
        self.keys = keys
        self.alpha = alpha
        self.penalty = penalty
        self.half_life = half_life_seconds
        self.cache_seconds = cache_seconds
        self._record = client.register_script(_RECORD)
        self._health = client.register_script(_HEALTH)
        self._profiles: dict[str | None, tuple[float, dict[str, float]]] = {}
        self._domains: dict[str, tuple[float, DomainHealth]] = {}

    # -- page types --------------------------------------------------------------------------

    def record(self, page_type: str | None, outcome: str, wire_bytes: float, billed: float,
               page_url: str | None = None, client: Any = None) -> None:
        """One attempt: ``outcome`` "full", "not_modified" or "failed", its bytes on the wire and
        its cost in the site's unit; added to the page's history too when it has one.
        ``client``: a pipeline to queue the update on (its result is then the pipeline's)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome={outcome!r}: expected one of {OUTCOMES}")
        page_key = self.keys.page(page_url) if page_url else self.keys.prefix + "page:"
        self._record(keys=[self.keys.costs(page_type), page_key],
                     args=[self.alpha, outcome, repr(float(wire_bytes)), repr(float(billed))],
                     client=client)
        self._profiles.pop(page_type, None)

    def attempt(self, page_type: str | None, outcome: str, wire_bytes: float, billed: float,
                page_url: str | None, *, domain: str, ok: bool, now: float) -> tuple[DomainHealth, int]:
        """:meth:`record` and :meth:`observe_health` in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        self.record(page_type, outcome, wire_bytes, billed, page_url, client=pipe)
        self._observe(domain, ok, now, pipe)
        return self._health_reply(domain, pipe.execute()[-1])

    def means(self, page_type: str | None) -> dict[str, float]:
        """``{"full": bytes, ..., "failure": rate, "billed": unit, "n:full": count, ...}``."""
        cached = self._profiles.get(page_type)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        raw = self.client.hgetall(self.keys.costs(page_type))
        means = {(k.decode() if isinstance(k, bytes) else k).removeprefix("mean:"): float(v)
                 for k, v in raw.items()}
        self._profiles[page_type] = (time.monotonic(), means)
        return means

    def profile(self, page_type: str | None, default_full_bytes: float) -> CostProfile:
        """The page type's :class:`CostProfile`; ``default_full_bytes`` until a full response
        has been measured (a 304 then costs a tenth of it, by lack of anything better)."""
        m = self.means(page_type)
        full = m.get("full", default_full_bytes)
        return CostProfile(full_bytes=full, not_modified_bytes=m.get("not_modified", full / 10),
                           failed_bytes=m.get("failed", 0.0),
                           failure_rate=min(max(m.get("failure", 0.0), 0.0), 1.0))

    # -- domains -----------------------------------------------------------------------------

    def observe_health(self, domain: str, ok: bool, now: float) -> tuple[DomainHealth, int]:
        """Record one outcome of a fetch from ``domain`` (``ok`` False for 429, 503, timeouts,
        connection errors); returns the state after it (its ``streak`` drives the backoff) and the
        streak before it (> 0 with ``ok``: the domain just recovered)."""
        return self._health_reply(domain, self._observe(domain, ok, now, None))

    def _observe(self, domain: str, ok: bool, now: float, client: Any) -> Any:
        return self._health(keys=[self.keys.health(domain)],
                            args=[repr(float(now)), self.half_life, "1" if ok else "0"], client=client)

    def _health_reply(self, domain: str, reply: list[Any]) -> tuple[DomainHealth, int]:
        bad, weight, at, streak, previous = reply
        self._domains.pop(domain, None)
        return DomainHealth(float(bad), float(weight), float(at), int(streak)), int(previous)

    def note_hold(self, domain: str, until: float) -> None:
        self.client.hset(self.keys.health(domain), "until", repr(float(until)))

    def health(self, domain: str) -> DomainHealth:
        cached = self._domains.get(domain)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        bad, weight, at, streak, until = self.client.hmget(
            self.keys.health(domain), "bad", "weight", "at", "streak", "until")
        state = DomainHealth(_float(bad), _float(weight), float(at) if at is not None else None,
                             int(streak or 0), _float(until))
        self._domains[domain] = (time.monotonic(), state)
        return state

    def multiplier(self, domain: str, now: float) -> float:
        """``1 + penalty * bad_rate``: 1 for a healthy (or unknown) domain."""
        return 1.0 + self.penalty * self.health(domain).bad_rate(now, self.half_life)


def backoff_seconds(streak: int, retry_after: float | None, base: float, maximum: float) -> float:
    """How long to hold a host after its ``streak``-th bad outcome in a row: ``Retry-After`` when
    given, else ``base * 2 ** (streak - 1)``; never more than ``maximum``."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), maximum)
    return min(base * 2.0 ** max(streak - 1, 0), maximum)


@dataclass
class CostContext:
    """What the cost and priority components of one crawler share."""

    costs: CostStore
    ledger: LedgerStore
    billing: BillingModel
    site: Any
    canonical: Callable[[str], str | None]


_contexts: weakref.WeakKeyDictionary[Crawler, CostContext] = weakref.WeakKeyDictionary()


def cost_context(crawler: Crawler) -> CostContext:
    """The crawler's shared :class:`CostContext`, built on first use (needs ``crawler.spider``).
    The billing model is the site's (``budget.billing``), else ``WEBCRAWL_COST_BILLING``."""
    context = _contexts.get(crawler)
    if context is None:
        settings = crawler.settings
        shared = crawl_context(crawler)
        client, keys = shared.client, shared.keys
        site = getattr(crawler.spider, "site", None)
        billing = site.budget.billing if site is not None else settings.get(
            "WEBCRAWL_COST_BILLING", "bandwidth")
        try:
            model = BillingModel(billing)
        except ValueError:
            raise ValueError(f"WEBCRAWL_COST_BILLING={billing!r}: expected one of "
                             f"{[b.value for b in BillingModel]}") from None
        costs = CostStore(
            client, keys, alpha=settings.getfloat("WEBCRAWL_COST_ALPHA", 0.1),
            penalty=settings.getfloat("WEBCRAWL_HEALTH_PENALTY", 4.0),
            half_life_seconds=settings.getfloat("WEBCRAWL_HEALTH_HALF_LIFE_SECONDS", 600.0),
            cache_seconds=settings.getfloat("WEBCRAWL_COST_CACHE_SECONDS", 5.0))
        context = CostContext(costs, LedgerStore(client, keys), model, site, Canonicalizer().canonical)
        _contexts[crawler] = context
    return context
