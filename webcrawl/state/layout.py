"""Every Redis key webcrawl uses, in one place, and how a crawl is split into shards.

A crawl's state is split into ``shards`` (a setting; 1 serves a single server). Each shard lives
under its own Redis Cluster hash tag, ``webcrawl:{<crawl>:<k>}:``, so on a cluster the shards
spread over the masters, while every key one script touches stays in one slot. A host belongs to
exactly one shard, ``crc32(host) % shards``, and everything about the host lives there: its
frontier, its revisits, its politeness and health, its leases, its pages' histories, its slice
of the seen-URL filter and its robots.txt answers. Per-host and per-page data are fields and
members of a fixed set of keys per shard (below), so scripts declare every key they touch in
``KEYS``.

Crawl-wide data lives in the crawl's own slot, ``webcrawl:{<crawl>}:``, and is never touched by a
shard's script: the cycle ledger and the shared spend bucket, the planning lock, the page-type
ids and the published allocation. The exclusion list is global (``webcrawl:excluded``, every
crawl on the server) and mirrored into each shard with a version counter.

Shard keys (``webcrawl:{<crawl>:<k>}:`` + name):

| name | type | holds |
| --- | --- | --- |
| ``frontier`` | zset (lex) | queued requests: ``<host>\\0<priority key>\\0<seq>|<json>`` |
| ``due`` | zset (lex) | known pages to revisit: ``<host>\\0<class><due ms>\\0<kind><url>`` (class 0: sitemaps and hubs, first once due; 1: pages; the URL without ``https://<host>``, ``~`` in its place, or ``http://<host>``, ``^``: layout 4) |
| ``ready:new`` | zset | host -> next-allowed time, hosts with queued requests |
| ``ready:due`` | zset | host -> max(next-allowed time, earliest due), hosts with revisits |
| ``next`` | hash | host -> next-allowed time (server clock) |
| ``delay`` | hash | host -> delay in seconds, where it differs from the default |
| ``health`` | hash | host -> health record (bad-outcome rate, streak, hold) |
| ``leases`` / ``leased`` | zset / hash | lease id -> expiry; lease id -> owner, class, host, member |
| ``queued`` / ``seq`` | string | frontier size; sequence keeping equal priorities in order |
| ``seen`` / ``seen:meta`` | string / hash | the shard's slice of the seen-URL filter, generations growing with it (:mod:`webcrawl.state.seen`); its sizes and fill |
| ``refused`` / ``refused:at`` | hash / zset | URLs the crawl refused (SSRF guard, robots.txt) or evicted from a full frontier: their seen-filter offsets -> reason, URL, time; let in again when met again; the oldest notes go first past the limit (:mod:`webcrawl.state.refused`) |
| ``excluded`` / ``excluded:version`` | set / string | mirror of the global exclusion list |
| ``pages`` / ``validators`` | hash | url -> packed page record (:mod:`webcrawl.state.records`); page key -> ETag and Last-Modified (page key: 8 bytes of the URL's SHA-1, :func:`webcrawl.state.pagestore.page_key`; the URL itself before layout 4) |
| ``listing`` | hash | listed item url -> summary hash, time since which listings show it, time last listed |
| ``trust:validators`` / ``trust:sitemaps`` | hash | host -> JSON of the host's trust |
| ``robots:<origin>`` | hash | robots.txt answer of ``scheme://host:port``, with its expiry |
| ``dirty`` | set | pages whose record changed since the allocator last read it |
| ``records`` | hash | page key -> the typed page's latest record (compact JSON): the ``previous`` of its next change event |
| ``links`` | hash | url -> the typed pages a listing page or hub showed at its latest reading (sorted, one a line): what its next reading compares with |
| ``checks`` | stream | every observation of a page (the check log), until the database writer takes it (at most about ``WEBCRAWL_DATABASE_CHECKS_KEPT``) |
| ``events`` | stream | change events (:mod:`webcrawl.state.eventlog`), kept ``WEBCRAWL_EVENTS_RETENTION_SECONDS`` |
| ``op:<id>`` | string | answer of a script call, kept a while so a retry has no second effect |

Crawl-wide keys (``webcrawl:{<crawl>}:`` + name): ``meta`` (hash: shards, layout version, seen
filter size), ``types`` (hash: page type -> small id), ``cycle`` / ``cycles`` / ``cycle:<id>`` /
``cycle:<id>:workers`` / ``cycles:rolled`` (the ledger, and the cycles past its retention rolled
up, :mod:`webcrawl.state.ledger`), ``bucket`` (the spend bucket, :mod:`webcrawl.state.bucket`),
``planner:lock`` and ``alloc:lock`` (:mod:`webcrawl.state.lock`), ``alloc`` (hash: what the last
allocation published: mean cost per page type, shares), ``op:<id>``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property

__all__ = ["EXCLUDED", "EXCLUDED_EVENTS", "GLOBAL_PREFIX", "LAYOUT_VERSION", "CrawlLayout",
           "LayoutMismatch", "ShardKeys", "validate_crawl_name"]

GLOBAL_PREFIX = "webcrawl:"
EXCLUDED = "webcrawl:excluded"
EXCLUDED_EVENTS = "webcrawl:excluded:events"
#: 4: the seen filter grows by larger generations (a filter of layout 3 is read as it is), due
#: members and the page keys of ``records`` and ``validators`` are shorter (those of layout 3 are
#: read too); a webcrawl reading only layout 3 refuses a crawl of layout 4.
LAYOUT_VERSION = 4
MAX_SHARDS = 4096


class LayoutMismatch(ValueError):
    """A crawl's state in Redis was written in a layout this version does not read (the crawl's
    ``meta`` hash records it; checked when a crawl opens)."""


def validate_crawl_name(name: str) -> str:
    """A crawl name is printable, without spaces, braces or colons (they delimit hash tags)."""
    if not name or any(c in name for c in "{}: ") or not name.isprintable():
        raise ValueError(
            f"WEBCRAWL_CRAWL_NAME={name!r} is not a valid crawl name: use letters, digits, "
            "'-', '_' or '.' (no spaces, braces or colons)"
        )
    return name


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard (see the module docstring)."""

    crawl: str
    index: int

    @cached_property
    def prefix(self) -> str:
        return f"{GLOBAL_PREFIX}{{{self.crawl}:{self.index}}}:"

    def __getattr__(self, name: str) -> str:
        # Only names listed in _NAMES are keys; anything else is a genuine AttributeError.
        try:
            suffix = _NAMES[name]
        except KeyError:
            raise AttributeError(name) from None
        return self.prefix + suffix

    def op(self, op_id: str) -> str:
        return f"{self.prefix}op:{op_id}"

    def robots(self, origin: str) -> str:  # type: ignore[override]
        """The key of an origin's robots.txt answer (``scheme://host:port``)."""
        return f"{self.prefix}robots:{origin}"

    @property
    def pattern(self) -> str:
        """A SCAN pattern matching every key of the shard."""
        return _escape(self.prefix) + "*"


_NAMES = {
    "frontier": "frontier", "due": "due", "ready_new": "ready:new", "ready_due": "ready:due",
    "next": "next", "delay": "delay", "health": "health", "leases": "leases", "leased": "leased",
    "queued": "queued", "seq": "seq", "seen": "seen", "seen_meta": "seen:meta",
    "excluded": "excluded", "excluded_version": "excluded:version", "pages": "pages",
    "validators": "validators", "listing": "listing", "trust_validators": "trust:validators",
    "trust_sitemaps": "trust:sitemaps", "dirty": "dirty", "records": "records",
    "events": "events", "links": "links", "checks": "checks",
    "refused": "refused", "refused_at": "refused:at",
}


def _escape(text: str) -> str:
    for char in "\\[]*?":
        text = text.replace(char, "\\" + char)
    return text


@dataclass(frozen=True)
class CrawlLayout:
    """Names of one crawl's keys, and which shard a host belongs to."""

    crawl: str
    shards: int = 1

    def __post_init__(self) -> None:
        validate_crawl_name(self.crawl)
        if not 1 <= self.shards <= MAX_SHARDS:
            raise ValueError(f"WEBCRAWL_SHARDS={self.shards!r}: expected 1 to {MAX_SHARDS}")

    @cached_property
    def prefix(self) -> str:
        """Prefix of the crawl-wide keys (its own slot)."""
        return f"{GLOBAL_PREFIX}{{{self.crawl}}}:"

    @cached_property
    def all_shards(self) -> tuple[ShardKeys, ...]:
        return tuple(ShardKeys(self.crawl, k) for k in range(self.shards))

    def shard_index(self, host: str) -> int:
        """The shard of ``host`` (lower-case host name): stable across processes and runs."""
        if self.shards == 1:
            return 0
        return zlib.crc32(host.encode("utf-8", "surrogateescape")) % self.shards

    def shard(self, host: str) -> ShardKeys:
        return self.all_shards[self.shard_index(host)]

    # -- crawl-wide keys ------------------------------------------------------------------------

    def key(self, name: str) -> str:
        return self.prefix + name

    @property
    def meta(self) -> str:
        return self.prefix + "meta"

    @property
    def types(self) -> str:
        return self.prefix + "types"

    @property
    def bucket(self) -> str:
        return self.prefix + "bucket"

    @property
    def alloc(self) -> str:
        return self.prefix + "alloc"

    @property
    def planner_lock(self) -> str:
        return self.prefix + "planner:lock"

    def op(self, op_id: str) -> str:
        return f"{self.prefix}op:{op_id}"

    @property
    def patterns(self) -> tuple[str, ...]:
        """SCAN patterns matching every key of the crawl: its own slot and every shard's."""
        crawl = _escape(self.crawl)
        return (_escape(self.prefix) + "*", f"{_escape(GLOBAL_PREFIX)}{{{crawl}:*}}:*")
