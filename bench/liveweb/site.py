"""What the test web answers to one request: the scenario's truth at the request's time, with
each shop's validators, throttle window and 404s before birth, and the products' lifecycle: 404
or 410 while dead, 301 or 308 from a moved product's old URL, 302 or 307 during a temporary
redirect (Location absolute). No sockets here (see server.py).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from urllib.parse import urlsplit

import numpy as np

from bench.liveweb.pages import render_page, render_robots, render_sitemap
from bench.liveweb.scenario import Page, Scenario

__all__ = ["Answer", "LiveSite"]

_PART = re.compile(r"^/sitemaps/part-(\d+)\.xml$")


@dataclass
class Answer:
    """A response and what the log records about it (``page`` and ``version`` for scored
    pages: the version served, or the version a 304 confirmed; ``life`` for a product's
    lifecycle answer: ``unborn``, ``dead``, ``moved`` or ``temp``, else None)."""

    status: int
    headers: dict[str, str]
    body: bytes
    kind: str
    page: int | None = None
    version: int | None = None
    extra: dict[str, object] = field(default_factory=dict)
    life: str | None = None


def _http_date(epoch: float) -> str:
    return formatdate(epoch, usegmt=True)


def _parse_http_date(text: str) -> float | None:
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


class LiveSite:
    """Answers requests for the shops of ``scenario``; ``origin`` is the epoch second of t = 0
    and ``port`` the port every shop is served on (for absolute URLs)."""

    def __init__(self, scenario: Scenario, origin: float, port: int) -> None:
        self.sc, self.origin, self.port = scenario, origin, port

    def base(self, shop: int) -> str:
        return f"http://{self.sc.hosts[shop]}:{self.port}"

    def answer(self, shop: int, target: str, inm: str | None, ims: str | None,
               t: float) -> Answer:
        """The answer to ``GET target`` arriving on shop ``shop`` at ``t`` seconds."""
        route = urlsplit(target).path
        kind, page = self._classify(shop, route)
        now = self.origin + t
        if self.sc.throttled(shop, t):
            retry = str(self.sc.params.retry_after_seconds)
            return Answer(429, {"Retry-After": retry, "Content-Type": "text/plain",
                                "Date": _http_date(now)}, b"Too many requests\n", kind,
                          page.pid if page else None)
        if kind == "robots":
            body = render_robots(self.sc, shop, self.base(shop)).encode()
            return Answer(200, {"Content-Type": "text/plain"}, body, kind)
        if kind == "sitemap" and self.sc.params.shops[shop].sitemap:
            match = _PART.match(route)
            xml = render_sitemap(self.sc, shop, int(match.group(1)) if match else None, t,
                                 self.origin, now, self.base(shop))
            if xml is not None:
                return Answer(200, {"Content-Type": "application/xml"}, xml.encode(), kind)
        if page is None:
            return Answer(404, {"Content-Type": "text/plain"}, b"Not found\n", kind)
        life = self.sc.life(page, route, t)
        if life.location:
            headers = {"Location": self.base(shop) + life.location, "Date": _http_date(now),
                       "Content-Type": "text/plain"}
            return Answer(life.status, headers, f"See {life.location}\n".encode(), kind,
                          page.pid, life=life.life)
        if life.status != 200:
            body = b"Gone\n" if life.status == 410 else b"Not found\n"
            return Answer(life.status, {"Content-Type": "text/plain", "Date": _http_date(now)},
                          body, kind, page.pid, life=life.life)
        return self._page(shop, page, route, inm, ims, t, now)

    def _classify(self, shop: int, route: str) -> tuple[str, Page | None]:
        if route == "/robots.txt":
            return "robots", None
        if route == "/sitemap.xml" or _PART.match(route):
            return "sitemap", None
        page = self.sc.page_at(shop, route)
        return (page.kind, page) if page is not None else ("other", None)

    def _page(self, shop: int, page: Page, route: str, inm: str | None, ims: str | None,
              t: float, now: float) -> Answer:
        version = self.sc.version(page, t)
        # A moved page's new URL and a restored page are new resources: their validators start
        # over, so none kept from before (or carried over a redirect) earns a 304.
        born = self.sc.incarnation(page, route, t)
        headers = {"Content-Type": "text/html; charset=utf-8", "Date": _http_date(now),
                   "Cache-Control": "no-cache"}
        validators = self.sc.params.shops[shop].validators
        if validators != "absent":
            tag = "" if born == -np.inf else f"-i{int(born * 1000)}"
            headers["ETag"] = f'"v{page.pid}-{version}{tag}"'
            modified = max(self.sc.changed_at(page, version), born)
            headers["Last-Modified"] = _http_date(int(self.origin + modified))
        if validators == "honest" and self._not_modified(page, version, born, headers, inm, ims):
            return Answer(304, headers, b"", page.kind, page.pid, version)
        body = render_page(self.sc, page, t, now, secrets.token_hex(16)).encode()
        return Answer(200, headers, body, page.kind, page.pid, version)

    def _not_modified(self, page: Page, version: int, born: float, headers: dict[str, str],
                      inm: str | None, ims: str | None) -> bool:
        """Honest validation: If-None-Match wins; If-Modified-Since alone answers 304 only when
        the date cannot hide a later change (Last-Modified has whole seconds), nor the URL's
        earlier incarnation (``born``: when its current resource began)."""
        if inm is not None:
            tags = [tag.strip().removeprefix("W/") for tag in inm.split(",")]
            return "*" in tags or headers["ETag"] in tags
        if ims is None:
            return False
        since = _parse_http_date(ims)
        if since is None:
            return False
        second = int(self.origin + max(self.sc.changed_at(page, version), born))
        if second < since:
            return True
        if second > since:
            return False
        # Same second: only safe when no other version of the page began in that second.
        starts = self.origin + np.concatenate(([page.t0], page.events[:version]))
        if born > -np.inf:
            starts = np.append(starts, self.origin + born)
        return int(np.count_nonzero(starts.astype(np.int64) == second)) == 1
