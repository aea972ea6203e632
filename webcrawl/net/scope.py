"""Where a crawl may connect: the one decision taken for every request before it goes out
(pages, robots.txt, sitemaps, every redirect hop), by :class:`~webcrawl.middlewares.ssrf.SSRFGuardMiddleware`.

:meth:`ConnectGate.refusal` judges a URL, in this order, and names the first reason that applies:

| reason | family (stat prefix) | when |
| --- | --- | --- |
| ``scheme`` | ``ssrf`` | the scheme is not http or https |
| ``origin`` | ``ssrf`` | the host or port cannot be read (``http://a:99999/``, ``http://a:x/``, ``:0``, no host) |
| ``offsite`` | ``offsite`` | the host is outside the crawl's allowed domains (when it has some) |
| address reasons | ``ssrf`` | a literal IP refused by the :class:`~webcrawl.net.addresses.AddressPolicy` |

Host names are judged on their addresses when the connection is made (:mod:`webcrawl.net.resolver`).
The gate is pure: no Scrapy, no I/O; it holds one crawler's scope and policy, never a process's.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult

from scrapy.exceptions import IgnoreRequest

from webcrawl.net.addresses import AddressPolicy, literal_address

__all__ = ["ConnectGate", "OffsiteRefused", "Refusal", "Scope", "origin"]

SCHEMES = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Refusal:
    """Why a URL may not be fetched: ``family`` is the stat prefix (``ssrf`` or ``offsite``)."""

    family: str
    reason: str
    host: str


class OffsiteRefused(IgnoreRequest):
    """A request refused because its host is outside the crawl's allowed domains. ``url`` is the
    refused URL and ``hops`` the redirects that led there (0: not a redirect)."""

    def __init__(self, url: str, host: str, hops: int) -> None:
        super().__init__(f"offsite: {host} is outside the allowed domains")
        self.url, self.host, self.hops = url, host, hops


class Scope:
    """The allowed domains of a crawl: a host is in scope when it is one of them or a subdomain
    of one (case-insensitive, a trailing dot ignored). No domains: every host is in scope."""

    def __init__(self, domains: tuple[str, ...] | list[str] = ()) -> None:
        self.domains = tuple(d.lower().rstrip(".") for d in domains if d)
        self._set = frozenset(self.domains)

    def allows(self, host: str) -> bool:
        if not self._set:
            return True
        host = host.lower().rstrip(".")
        # The host, then each parent domain: a set lookup per label, however many domains.
        while True:
            if host in self._set:
                return True
            _, dot, host = host.partition(".")
            if not dot:
                return False


def origin(parts: SplitResult) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL, host lower-cased, default port filled in;
    ``None`` when the scheme is another one or the host or port cannot be read."""
    default = SCHEMES.get(parts.scheme)
    if default is None or not parts.hostname:
        return None
    try:
        port = parts.port  # ValueError when it is not a number in 0..65535
    except ValueError:
        return None
    if port == 0:  # no server listens there: ":0" is a malformed origin, not the default port
        return None
    return parts.scheme, parts.hostname.lower(), default if port is None else port


#: How many origins a gate remembers its decision for; it forgets them all when full.
MEMO_SIZE = 4096
_UNKNOWN = object()


class ConnectGate:
    """One crawler's decision on where it may connect (see the module docstring).

    The decision depends on the URL's scheme and netloc only, so it is remembered per
    ``(scheme, netloc)`` while the scope and the policy's allowance stay the objects they were
    (assigning a new scope, or the policy allowing more networks, starts afresh)."""

    def __init__(self, policy: AddressPolicy, scope: Scope | None = None) -> None:
        self.policy = policy
        self.scope = scope or Scope()
        self._memo: dict[tuple[str, str], Refusal | None] = {}
        self._memo_for: tuple[object, object] = (None, None)

    def refusal(self, parts: SplitResult) -> Refusal | None:
        """Why the URL ``parts`` may not be fetched, or ``None`` when it may (names still get
        their addresses judged when connecting)."""
        key = (parts.scheme, parts.netloc)
        memo_for = self._memo_for
        if memo_for[0] is self.scope and memo_for[1] is self.policy.allowed:
            found = self._memo.get(key, _UNKNOWN)
            if found is not _UNKNOWN:
                return found  # type: ignore[return-value]
        else:
            self._memo.clear()
            self._memo_for = (self.scope, self.policy.allowed)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        decided = self._judge(parts)
        self._memo[key] = decided
        return decided

    def _judge(self, parts: SplitResult) -> Refusal | None:
        if parts.scheme not in SCHEMES:
            return Refusal("ssrf", "scheme", parts.scheme)
        found = origin(parts)
        if found is None:
            return Refusal("ssrf", "origin", parts.netloc)
        host = found[1]
        if not self.scope.allows(host.strip("[]")):
            return Refusal("offsite", "offsite", host)
        address = literal_address(host)
        if address is not None:
            reason = self.policy.refusal(address)
            if reason is not None:
                return Refusal("ssrf", reason, host)
        return None
