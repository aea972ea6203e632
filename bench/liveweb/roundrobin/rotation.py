"""The round-robin baseline's bookkeeping (no Scrapy): known URLs per host visited in turn, and
a token bucket that paces visits to the budget rate."""

from __future__ import annotations

from urllib.parse import urldefrag, urlsplit

__all__ = ["Rotation", "TokenBucket"]


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up; a failed fetch gives its token back."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0:
            raise ValueError(f"the budget rate must be positive, got {rate!r}")
        self.rate, self.burst = rate, max(1.0, burst)
        self.tokens, self.last = 1.0, now

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def ready(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= 1.0

    def take(self) -> None:
        self.tokens -= 1.0

    def refund(self) -> None:
        self.tokens = min(self.burst, self.tokens + 1.0)


class Rotation:
    """Every known URL of a host in discovery order, visited in a cycle; hosts take turns.

    A host with ``max_pending`` requests still out is skipped this turn, so a slow host (a long
    delay, a Retry-After) does not hold the budget up and its queue never grows stale.
    """

    def __init__(self, max_pending: int = 2) -> None:
        self.max_pending = max_pending
        self.urls: dict[str, list[str]] = {}
        self.cursor: dict[str, int] = {}
        self.pending: dict[str, int] = {}
        self.known: set[str] = set()
        self._turn = 0

    def add(self, url: str) -> bool:
        """Remember ``url`` (fragment dropped); False when it was known already."""
        url = urldefrag(url)[0]
        if url in self.known:
            return False
        host = urlsplit(url).hostname or ""
        self.known.add(url)
        self.urls.setdefault(host, []).append(url)
        self.cursor.setdefault(host, 0)
        self.pending.setdefault(host, 0)
        return True

    def next(self) -> str | None:
        """The next URL of the next host that can take a request (counted as pending)."""
        hosts = list(self.urls)
        for k in range(len(hosts)):
            host = hosts[(self._turn + k) % len(hosts)]
            if self.pending[host] >= self.max_pending:
                continue
            urls = self.urls[host]
            url = urls[self.cursor[host] % len(urls)]
            self.cursor[host] = (self.cursor[host] + 1) % len(urls)
            self.pending[host] += 1
            self._turn = (self._turn + k + 1) % len(hosts)
            return url
        return None

    def done(self, url: str) -> None:
        host = urlsplit(url).hostname or ""
        if self.pending.get(host, 0) > 0:
            self.pending[host] -= 1
