"""Every Redis key webcrawl uses, in one place.

All keys of a crawl start with ``webcrawl:{<crawl>}:``. The crawl name is the spider's name unless
``WEBCRAWL_CRAWL_NAME`` says otherwise; every process started with the same name and Redis works on
the same crawl. The braces are a Redis Cluster hash tag: all of a crawl's keys live in one slot, so
the Lua scripts that touch several of them stay atomic on a cluster too.

Keys that are not per crawl start with ``webcrawl:`` and are shared by every crawl on the server
(robots.txt answers and the exclusion list concern a host, not a crawl).

| key | type | holds |
| --- | --- | --- |
| ``{c}:ready`` | zset | domain -> next-allowed fetch time, for domains with queued requests |
| ``{c}:next`` | hash | domain -> next-allowed fetch time, kept while a domain's frontier is empty |
| ``{c}:delay`` | hash | domain -> delay in seconds, when it differs from the default |
| ``{c}:frontier:<domain>`` | zset | queued requests of one domain: score -priority, member ``<seq>|<json>`` |
| ``{c}:queued`` | string | number of requests in all frontiers |
| ``{c}:seq`` | string | counter that orders requests of equal priority first-in first-out |
| ``{c}:leases`` | zset | lease id -> expiry time of a popped (in-flight) request |
| ``{c}:leased`` | hash | lease id -> ``<domain>\\t<score>\\t<member>``: how to put it back |
| ``{c}:seen`` | string | the seen-URL bloom filter's bitmap |
| ``{c}:seen:meta`` | hash | capacity, error rate, slices and bits of that filter (checked at open) |
| ``{c}:evicted`` | string | requests evicted from capped frontiers so far |
| ``{c}:page:<canonical url>`` | hash | one page's history: hash, validators, visit statistics, cost, body pointer (:mod:`webcrawl.state.history`) |
| ``{c}:trust:validators`` | hash | host -> JSON of its validator trust (:mod:`webcrawl.state.trust`) |
| ``{c}:cycle`` | hash | the current cycle: id, started, ends, budget |
| ``{c}:cycle:seq`` | string | last cycle id |
| ``{c}:cycles`` | zset | cycle id -> start time |
| ``{c}:cycle:<id>`` | hash | one cycle's ledger and metrics (see :mod:`webcrawl.state.ledger`) |
| ``{c}:page:<canonical url>`` fields ``billed``, ``failed``, ``failed_bytes`` | hash fields | added to an existing page history by the cost middleware: cost so far in the site's unit (every attempt), failed attempts and their wire bytes (:mod:`webcrawl.state.costs`) |
| ``{c}:costs:<page type>`` | hash | measured cost averages of a page type: ``n:<kind>``, ``mean:<kind>`` for kinds ``full``, ``not_modified``, ``failed`` (wire bytes), ``failure`` (rate), ``billed`` (site unit per attempt) (:mod:`webcrawl.state.costs`) |
| ``{c}:health:<domain>`` | hash | a domain's health: ``bad``, ``weight``, ``at`` (time-decayed bad-outcome rate), ``streak`` (bad outcomes in a row), ``until`` (last backoff hold) (:mod:`webcrawl.state.costs`) |
| ``{c}:freshness:<id>`` | hash | estimated freshness of the copy at a cycle's close: ``<page type>`` / ``*`` -> mean, ``pages:<page type>``, ``at`` (:mod:`webcrawl.state.freshness`) |
| ``{c}:cycle:<id>:workers`` | zset | process token -> heartbeat expiry: the processes working on a cycle (:mod:`webcrawl.state.ledger`) |
| ``{c}:planner:lock`` | string | token of the process planning a cycle (``SET NX PX``) |
| ``{c}:deferred`` | list | JSON ``{"domain", "priority", "payload"}`` of requests a cycle could not afford, pushed back into the frontiers when the next one starts |
| ``{c}:pages:ids`` / ``{c}:pages:urls`` | hash | canonical URL -> index row id, and back (:mod:`webcrawl.state.pages`) |
| ``{c}:pages:seq`` | string | index rows given so far |
| ``{c}:pages:rec:<n>`` | string | fixed-size records of known pages ``n * 65536`` onwards (statistics the planner scores) |
| ``{c}:pages:types`` | hash | page type -> small id used in the records |
| ``{c}:pages:dirty`` | zset | canonical URL -> time its history changed, until its record is rewritten |
| ``{c}:listing:summaries`` | hash | listed item's canonical URL -> ``<summary hash> <time it last changed> <time listed>`` (:mod:`webcrawl.pipelines.listing`) |
| ``{c}:listing:items`` | hash | listing page URL -> items it listed at its latest fetch (its cost is shared among them) |
| ``{c}:trust:sitemaps`` | hash | host -> JSON of its sitemap ``lastmod`` trust (:mod:`webcrawl.state.sitemaps`) |
| ``{c}:sitemap:lastmod`` | hash | canonical URL -> latest ``lastmod`` a sitemap gave it (seconds) |
| ``webcrawl:robots:<scheme://host:port>`` | hash | a parsed robots.txt answer, with expiry |
| ``webcrawl:excluded`` | set | domains that asked to be left alone |
| ``webcrawl:excluded:events`` | string | counter bumped on each change of the exclusion list |
"""

from __future__ import annotations

from dataclasses import dataclass

GLOBAL_PREFIX = "webcrawl:"
ROBOTS_PREFIX = "webcrawl:robots:"
EXCLUDED = "webcrawl:excluded"
EXCLUDED_EVENTS = "webcrawl:excluded:events"


def validate_crawl_name(name: str) -> str:
    """A crawl name is printable and has no braces (they delimit the cluster hash tag)."""
    if not name or any(c in name for c in "{}") or not name.isprintable() or " " in name:
        raise ValueError(
            f"WEBCRAWL_CRAWL_NAME={name!r} is not a valid crawl name: use letters, digits, "
            "'-', '_' or '.' (no spaces or braces)"
        )
    return name


@dataclass(frozen=True)
class CrawlKeys:
    """Names of one crawl's keys (see the module docstring for what each holds)."""

    crawl: str

    @property
    def prefix(self) -> str:
        return f"{GLOBAL_PREFIX}{{{self.crawl}}}:"

    @property
    def pattern(self) -> str:
        """A SCAN pattern matching every key of the crawl."""
        escaped = self.prefix.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*")
        return escaped.replace("?", "\\?") + "*"

    @property
    def ready(self) -> str:
        return self.prefix + "ready"

    @property
    def next(self) -> str:
        return self.prefix + "next"

    @property
    def delay(self) -> str:
        return self.prefix + "delay"

    @property
    def queued(self) -> str:
        return self.prefix + "queued"

    @property
    def seq(self) -> str:
        return self.prefix + "seq"

    @property
    def leases(self) -> str:
        return self.prefix + "leases"

    @property
    def leased(self) -> str:
        return self.prefix + "leased"

    @property
    def seen(self) -> str:
        return self.prefix + "seen"

    @property
    def seen_meta(self) -> str:
        return self.prefix + "seen:meta"

    @property
    def evicted(self) -> str:
        return self.prefix + "evicted"

    @property
    def trust_validators(self) -> str:
        return self.prefix + "trust:validators"

    def page(self, url: str) -> str:
        return f"{self.prefix}page:{url}"

    @property
    def page_prefix(self) -> str:
        return f"{self.prefix}page:"

    def frontier(self, domain: str) -> str:
        return f"{self.prefix}frontier:{domain}"

    @property
    def frontier_prefix(self) -> str:
        return f"{self.prefix}frontier:"

    def costs(self, page_type: str | None) -> str:
        return f"{self.prefix}costs:{page_type or '-'}"

    def health(self, domain: str) -> str:
        return f"{self.prefix}health:{domain}"

    def freshness(self, cycle_id: int) -> str:
        return f"{self.prefix}freshness:{cycle_id}"

    @property
    def planner_lock(self) -> str:
        return self.prefix + "planner:lock"

    @property
    def deferred(self) -> str:
        return self.prefix + "deferred"

    @property
    def pages_prefix(self) -> str:
        return self.prefix + "pages:"

    @property
    def listing_summaries(self) -> str:
        return self.prefix + "listing:summaries"

    @property
    def trust_sitemaps(self) -> str:
        return self.prefix + "trust:sitemaps"

    @property
    def sitemap_lastmod(self) -> str:
        return self.prefix + "sitemap:lastmod"

    @property
    def listing_items(self) -> str:
        return self.prefix + "listing:items"
