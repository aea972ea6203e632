"""A robots.txt answer for one origin, and the RFC 9309 rules that turn a fetch into one.

A :class:`RobotsPolicy` is what the crawler keeps about ``scheme://host:port/robots.txt``: either
the rules of a parsed file, or one of the two blanket answers the RFC prescribes when there is no
file to parse (allow all, disallow all). Its :meth:`~RobotsPolicy.allowed` is the one code path
every verdict goes through: the middleware's and the conformance tests'.

Fetch outcomes (RFC 9309 section 2.3.1):

| outcome | answer | kept for |
| --- | --- | --- |
| 2xx | the file's rules (first ``max_bytes`` parsed, at least 500 KiB) | ``ttl`` (at most 24 h) |
| 3xx left after redirects were followed | allow all (the file is "unavailable") | ``ttl`` |
| 4xx except 429 | allow all | ``ttl`` |
| 429, 5xx, other codes, network errors | disallow all ("unreachable") | ``error_ttl`` (minutes) |
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from enum import StrEnum

from protego import Protego

from webcrawl.robots._normalise import canonical_rules, match_target, product_token

MIN_PARSE_BYTES = 500 * 1024
MAX_CACHE_SECONDS = 24 * 3600.0


class Kind(StrEnum):
    RULES = "rules"
    ALLOW_ALL = "allow_all"
    DISALLOW_ALL = "disallow_all"


class RobotsPolicy:
    """The robots.txt answer of one origin.

    ``rules`` is the canonical text made by :func:`canonical_rules` (what the cache stores);
    build a policy from a fetched body with :meth:`parse`.
    """

    __slots__ = ("kind", "rules", "_parser", "_tokens")

    def __init__(self, kind: Kind, rules: str = "") -> None:
        self.kind = kind
        self.rules = rules if kind is Kind.RULES else ""
        self._parser: Protego | None = None
        self._tokens: frozenset[str] | None = None

    @classmethod
    def parse(cls, body: bytes | str, max_bytes: int = MIN_PARSE_BYTES) -> RobotsPolicy:
        """The policy of a 2xx body: its first ``max_bytes`` octets, cut back to the last whole
        line so that a rule cut in half is never read as a shorter (broader) one."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        if len(body) > max_bytes:
            body = body[:max_bytes]
            cut = max(body.rfind(b"\n"), body.rfind(b"\r"))
            body = body[: cut + 1] if cut >= 0 else b""
        if body.startswith(codecs.BOM_UTF8):
            body = body[len(codecs.BOM_UTF8):]
        text = body.decode("utf-8", "replace")
        return cls(Kind.RULES, canonical_rules(text))

    @classmethod
    def allow_all(cls) -> RobotsPolicy:
        return cls(Kind.ALLOW_ALL)

    @classmethod
    def disallow_all(cls) -> RobotsPolicy:
        return cls(Kind.DISALLOW_ALL)

    def _protego(self) -> Protego:
        if self._parser is None:
            self._parser = Protego.parse(self.rules)
        return self._parser

    def _group(self, user_agent: str) -> str:
        """The group token Protego should look up for this crawler: its own when the file names
        it (case-insensitive equality, RFC 9309 section 2.2.1), else ``*``."""
        if self._tokens is None:
            self._tokens = frozenset(
                line[len("User-agent: "):] for line in self.rules.splitlines()
                if line.startswith("User-agent: ")
            )
        token = user_agent.strip().lower()
        return token if token and token in self._tokens else "*"

    def allowed(self, url: str, user_agent: str) -> bool:
        """Whether ``user_agent`` (the crawler's product token, e.g. ``webcrawl``; see
        :func:`product_token`) may fetch ``url`` (percent-encoded, as Scrapy's URLs are).

        ``/robots.txt`` itself is always allowed.
        """
        if self.kind is Kind.ALLOW_ALL:
            return True
        if self.kind is Kind.DISALLOW_ALL:
            return _is_robots_url(url)
        return self._protego().can_fetch(match_target(url), self._group(user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        """The Crawl-delay (seconds) of the group that applies to ``user_agent``, if any."""
        if self.kind is not Kind.RULES:
            return None
        return self._protego().crawl_delay(self._group(user_agent))

    def sitemaps(self) -> list[str]:
        return list(self._protego().sitemaps) if self.kind is Kind.RULES else []

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RobotsPolicy) and other.kind is self.kind
                and other.rules == self.rules)

    def __hash__(self) -> int:
        return hash((self.kind, self.rules))

    def __repr__(self) -> str:
        return f"RobotsPolicy({self.kind.value}, {len(self.rules)} chars)"


def _is_robots_url(url: str) -> bool:
    return match_target(url).split("?", 1)[0].endswith("://robots.invalid/robots.txt")


@dataclass(frozen=True)
class Verdict:
    """A fetch outcome turned into an answer and how long to keep it."""

    policy: RobotsPolicy
    ttl: float
    status: int | None  # None: no HTTP answer (network error)


def verdict_for_response(status: int, body: bytes, *, ttl: float, error_ttl: float,
                         max_bytes: int = MIN_PARSE_BYTES) -> Verdict:
    """RFC 9309 status rules (table in the module docstring)."""
    ttl = min(ttl, MAX_CACHE_SECONDS)
    if 200 <= status < 300:
        return Verdict(RobotsPolicy.parse(body, max_bytes), ttl, status)
    if 300 <= status < 500 and status != 429:
        return Verdict(RobotsPolicy.allow_all(), ttl, status)
    return Verdict(RobotsPolicy.disallow_all(), min(error_ttl, ttl), status)


def verdict_for_error(*, error_ttl: float) -> Verdict:
    """No answer at all (DNS, connection refused, timeout, refused by the SSRF guard)."""
    return Verdict(RobotsPolicy.disallow_all(), min(error_ttl, MAX_CACHE_SECONDS), None)


__all__ = [
    "MAX_CACHE_SECONDS", "MIN_PARSE_BYTES", "Kind", "RobotsPolicy", "Verdict", "product_token",
    "verdict_for_error", "verdict_for_response",
]
