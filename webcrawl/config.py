"""webcrawl's settings, validated once at start-up into one typed object.

Every setting is prefixed ``WEBCRAWL_``; a bad value raises ``ValueError`` naming the setting, the
value and what was expected, before the crawl makes any request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webcrawl.revisit import GammaPrior
from webcrawl.state.layout import MAX_SHARDS, validate_crawl_name
from webcrawl.state.seen import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


#: Every webcrawl setting with its default (the README's settings reference lists them too).
DEFAULTS: dict[str, Any] = {
    "WEBCRAWL_REDIS_URL": None,
    "WEBCRAWL_DATA_DIR": ".webcrawl",
    "WEBCRAWL_CRAWL_NAME": "",
    "WEBCRAWL_DOMAIN_DELAY_SECONDS": 1.0,
    "WEBCRAWL_FRONTIER_MAX_PER_DOMAIN": 100_000,
    "WEBCRAWL_LEASE_SECONDS": 120.0,
    # The seen filter (webcrawl.state.seen): URLs its first generation holds, for the whole crawl
    # (each later one holds twice as many: an empty crawl costs a few KB), and the bound on the
    # chance that it takes a new URL for a seen one, however far it grows.
    "WEBCRAWL_BLOOM_CAPACITY": DEFAULT_CAPACITY,  # 2,000
    "WEBCRAWL_BLOOM_ERROR_RATE": DEFAULT_ERROR_RATE,  # 1 %
    "WEBCRAWL_SEEN_CACHE_SIZE": 500_000,
    "WEBCRAWL_PARSE_CACHE_SIZE": 20_000,
    # Net new container objects between two young-generation passes of Python's cyclic garbage
    # collector in a crawl process (webcrawl.heap.collect_less); 0 keeps Python's own (700).
    "WEBCRAWL_GC_THRESHOLD": 20_000,
    "WEBCRAWL_RESET": False,
    "WEBCRAWL_EMBEDDED_REDIS_SHUTDOWN": True,
    # Shards of the crawl state: "auto" is 1 on a single server, CLUSTER_SHARDS on a cluster.
    "WEBCRAWL_SHARDS": "auto",
    # For tests: pretend this machine's clock is off by this many seconds.
    "WEBCRAWL_CLOCK_SKEW_SECONDS": 0.0,
    # The change-rate prior of a page type with no history: one change per this many seconds.
    "WEBCRAWL_PRIOR_CHANGE_SECONDS": 7 * 86_400.0,
    "WEBCRAWL_PRIOR_SHAPE": 0.5,
    # Change events (docs/events.md): how long the crawl state keeps them; how long after a known
    # page's first 404/410 it is fetched again to confirm its removal; how often a removed page
    # is probed for a restore.
    "WEBCRAWL_EVENTS_RETENTION_SECONDS": 7 * 86_400.0,
    "WEBCRAWL_REMOVAL_CONFIRM_SECONDS": 300.0,
    "WEBCRAWL_REMOVED_PROBE_SECONDS": 86_400.0,
    # The local copy in a database (docs/database.md): on by default (SQLite in the data folder);
    # the check log entries each shard of the crawl state keeps at most until the writer takes
    # them (a database gone for long: past this, the oldest checks are lost, with a warning).
    "WEBCRAWL_DATABASE_ENABLED": True,
    "WEBCRAWL_DATABASE_CHECKS_KEPT": 1_000_000,
}

#: Shards of a crawl on a Redis Cluster when WEBCRAWL_SHARDS is "auto": enough to spread over a
#: few masters evenly, few enough that a process's per-shard work stays cheap.
CLUSTER_SHARDS = 16

#: :func:`configured_prior` with the default settings (for components built without a crawler).
DEFAULT_PRIOR = GammaPrior.from_mean(1 / DEFAULTS["WEBCRAWL_PRIOR_CHANGE_SECONDS"],
                                     DEFAULTS["WEBCRAWL_PRIOR_SHAPE"])


def positive_setting(settings: Any, name: str, default: Any) -> float | None:
    """Setting ``name`` as a number > 0 (``None`` when unset or empty); anything else is a
    ``ValueError`` naming the setting and its value."""
    raw = settings.get(name, default)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: expected a number > 0")
    return value


def _get(settings: BaseSettings, name: str) -> Any:
    return settings.get(name, DEFAULTS[name])


def _number(settings: BaseSettings, name: str, *, minimum: float, integer: bool = False,
            exclusive: bool = False) -> Any:
    raw = _get(settings, name)
    try:
        value = int(raw) if integer else float(raw)
        if integer and float(raw) != value:
            raise ValueError
    except (TypeError, ValueError):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name}={raw!r} is not {kind}") from None
    too_small = value <= minimum if exclusive else value < minimum
    if too_small or (not integer and not math.isfinite(value)):
        bound = f"> {minimum}" if exclusive else f">= {minimum}"
        raise ValueError(f"{name}={raw!r} is out of range: expected a value {bound}")
    return value


@dataclass(frozen=True)
class StateConfig:
    """Where the crawl state lives and how the scheduler treats it."""

    crawl_name: str
    redis_url: str | None
    data_dir: Path
    domain_delay: float
    frontier_max_per_domain: int
    lease_seconds: float
    bloom_capacity: int
    bloom_error_rate: float
    seen_cache_size: int
    reset: bool
    shutdown_embedded: bool
    shards: int | None = None  # None: "auto"
    parse_cache_size: int = DEFAULTS["WEBCRAWL_PARSE_CACHE_SIZE"]
    clock_skew: float = 0.0
    events_retention: float = DEFAULTS["WEBCRAWL_EVENTS_RETENTION_SECONDS"]
    removal_confirm: float = DEFAULTS["WEBCRAWL_REMOVAL_CONFIRM_SECONDS"]
    removed_probe: float = DEFAULTS["WEBCRAWL_REMOVED_PROBE_SECONDS"]
    database: bool = DEFAULTS["WEBCRAWL_DATABASE_ENABLED"]
    checks_kept: int = DEFAULTS["WEBCRAWL_DATABASE_CHECKS_KEPT"]

    def shards_for(self, cluster: bool) -> int:
        """The number of shards: the setting, or by default 1 on a single server and
        :data:`CLUSTER_SHARDS` on a cluster."""
        if self.shards is not None:
            return self.shards
        return CLUSTER_SHARDS if cluster else 1

    def bloom_capacity_per_shard(self, shards: int) -> int:
        """Each shard's slice of the seen filter starts with its share of the capacity (hosts
        spread over shards by a hash; 10% headroom for an uneven spread)."""
        if shards == 1:
            return self.bloom_capacity
        return max(1, int(self.bloom_capacity * 1.1 / shards))

    @staticmethod
    def parse_cache_size_of(settings: BaseSettings) -> int:
        """``WEBCRAWL_PARSE_CACHE_SIZE``: entries of each of a process's parse memo tables."""
        return int(_number(settings, "WEBCRAWL_PARSE_CACHE_SIZE", minimum=1, integer=True))

    @staticmethod
    def gc_threshold_of(settings: BaseSettings) -> int:
        """``WEBCRAWL_GC_THRESHOLD``: objects between the collector's young passes (0: Python's)."""
        return int(_number(settings, "WEBCRAWL_GC_THRESHOLD", minimum=0, integer=True))

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str) -> StateConfig:
        crawl_name = validate_crawl_name(_get(settings, "WEBCRAWL_CRAWL_NAME") or spider_name)
        error_rate = _number(settings, "WEBCRAWL_BLOOM_ERROR_RATE", minimum=0, exclusive=True)
        if error_rate >= 1:
            raise ValueError(
                f"WEBCRAWL_BLOOM_ERROR_RATE={error_rate!r} is out of range: expected 0 < rate < 1"
            )
        return cls(
            crawl_name=crawl_name,
            redis_url=_get(settings, "WEBCRAWL_REDIS_URL") or None,
            data_dir=Path(_get(settings, "WEBCRAWL_DATA_DIR") or ".webcrawl"),
            domain_delay=_number(settings, "WEBCRAWL_DOMAIN_DELAY_SECONDS", minimum=0),
            frontier_max_per_domain=_number(
                settings, "WEBCRAWL_FRONTIER_MAX_PER_DOMAIN", minimum=0, integer=True
            ),
            lease_seconds=_number(settings, "WEBCRAWL_LEASE_SECONDS", minimum=0, exclusive=True),
            bloom_capacity=_number(settings, "WEBCRAWL_BLOOM_CAPACITY", minimum=1, integer=True),
            bloom_error_rate=error_rate,
            seen_cache_size=_number(settings, "WEBCRAWL_SEEN_CACHE_SIZE", minimum=0, integer=True),
            parse_cache_size=cls.parse_cache_size_of(settings),
            reset=settings.getbool("WEBCRAWL_RESET", DEFAULTS["WEBCRAWL_RESET"]),
            shutdown_embedded=settings.getbool(
                "WEBCRAWL_EMBEDDED_REDIS_SHUTDOWN", DEFAULTS["WEBCRAWL_EMBEDDED_REDIS_SHUTDOWN"]
            ),
            shards=_shards(settings),
            clock_skew=_number(settings, "WEBCRAWL_CLOCK_SKEW_SECONDS", minimum=-1e9),
            events_retention=_number(settings, "WEBCRAWL_EVENTS_RETENTION_SECONDS", minimum=60),
            removal_confirm=_number(settings, "WEBCRAWL_REMOVAL_CONFIRM_SECONDS", minimum=0),
            removed_probe=_number(settings, "WEBCRAWL_REMOVED_PROBE_SECONDS", minimum=1),
            database=settings.getbool("WEBCRAWL_DATABASE_ENABLED", DEFAULTS["WEBCRAWL_DATABASE_ENABLED"]),
            checks_kept=_number(settings, "WEBCRAWL_DATABASE_CHECKS_KEPT", minimum=1000, integer=True),
        )


def _shards(settings: BaseSettings) -> int | None:
    raw = _get(settings, "WEBCRAWL_SHARDS")
    if raw in (None, "", "auto"):
        return None
    value = _number(settings, "WEBCRAWL_SHARDS", minimum=1, integer=True)
    if value > MAX_SHARDS:
        raise ValueError(f"WEBCRAWL_SHARDS={raw!r} is out of range: expected 1 to {MAX_SHARDS} or 'auto'")
    return int(value)


def configured_prior(settings: BaseSettings) -> GammaPrior:
    """The Gamma prior of change rates for page types with no history, from
    ``WEBCRAWL_PRIOR_CHANGE_SECONDS`` (mean seconds between changes) and ``WEBCRAWL_PRIOR_SHAPE``;
    the priority middleware, the planner and the report all start from it."""
    interval = _number(settings, "WEBCRAWL_PRIOR_CHANGE_SECONDS", minimum=0, exclusive=True)
    shape = _number(settings, "WEBCRAWL_PRIOR_SHAPE", minimum=0, exclusive=True)
    return GammaPrior.from_mean(1 / interval, shape)
