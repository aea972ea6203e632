"""The bundled demo shop: a small catalog spread over several loopback hosts whose records change.

Hosts by role (``hosts`` as given to :meth:`ShopSite.bind`): the first is ``www`` (index, category
listings, cart, search), the last is ``blog`` (posts, static files and the hostile pages), those in
between are ``catalog`` shards holding the product pages (product i on shard i % shards). With two
hosts the blog lives on www; with one host everything does.

Truth for tests: :class:`Catalog` is a pure model. Product i changes as a Poisson process with its
own rate; its events and records are a deterministic function of (seed, i, t), generated lazily in
time order, so two loads at the same simulated time agree and a test can compute true freshness
with :meth:`Catalog.version` / :meth:`Catalog.change_times`. Simulated time runs ``time_scale``
times faster than real time from ``epoch`` (see :class:`SimClock`). With a ``lifecycle``
(:mod:`webcrawl.demo.lifecycle`) products are also born, die (404 or 410), come back, move (301 or
308 to a new slug) and redirect for a while (302 or 307); :meth:`ShopSite.product_state`,
:meth:`ShopSite.answer` and :meth:`ShopSite.lifecycle_events` give that truth.
"""

from __future__ import annotations

import html
import math
import random
import re
import secrets
import threading
import time
from collections.abc import Sequence
from email.utils import formatdate, parsedate_to_datetime
from urllib.parse import parse_qs, urlsplit

from webcrawl.demo.catalog import (ADJECTIVES, DAY, EPOCH, NOUNS, WORDS, Catalog, SimClock, paragraph,
                                   seeded, sentence)
from webcrawl.demo.lifecycle import Lifecycle, State
from webcrawl.demo.server import Headers, Response

#: The fields the demo site file (webcrawl/sites/demo.toml) extracts from a product page, in its
#: order, its volatile ``served_at`` left out: the keys of :meth:`ShopSite.page_record`.
RECORD_FIELDS = ("name", "price", "stock", "sku", "description", "category")

def host_roles(hosts: Sequence[str]) -> tuple[str, list[str], str]:
    """(www, catalog shards, blog) for the served addresses."""
    if not hosts:
        raise ValueError("the shop needs at least one host")
    www = hosts[0]
    if len(hosts) == 1:
        return www, [www], www
    if len(hosts) == 2:
        return www, [hosts[1]], www
    return www, list(hosts[1:-1]), hosts[-1]


def _http_date(t: float) -> str:
    return formatdate(t, usegmt=True)


def _w3c(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


class ShopSite:
    """The shop as a :class:`webcrawl.demo.server.Site`.

    Every load carries noise that never touches a record field: a generation timestamp, a random
    ad slot, a visitor count, a CSRF token and ``?sid=`` session tokens on some links. Product
    pages send ``ETag`` (``"p<i>-v<version>"``) and ``Last-Modified`` (the last change) and answer
    304 when the client's validator is current, except on hosts (indices into ``hosts``) listed in
    ``ignore_validators`` (always 200) or ``lying_validators`` (304 to any conditional request,
    changed or not). Hostile pages on the blog host: ``/files/report.html`` (binary body sent as
    text/html), ``/legacy/latin.html`` (invalid UTF-8), ``/calendar/<y>/<m>`` (endless months) and
    ``/archive/everything.html`` (``large_page_kb`` KiB). Hosts in ``throttle_hosts`` answer 429
    with ``Retry-After`` to requests (robots.txt aside) closer than ``throttle_seconds`` apart.
    A ``lifecycle`` gives products births, deaths, restores, moves and temporary redirects; listings,
    links and sitemaps show only products born and not dead, at their current URL.
    """

    def __init__(self, seed: int = 0, *, products: int = 200, categories: int = 10,
                 per_page: int = 20, time_scale: float = 1.0, epoch: float = EPOCH,
                 clock_origin: float | None = None, min_change_interval: float = 600.0,
                 max_change_interval: float = 30 * DAY, never_change_share: float = 0.15,
                 large_page_kb: int = 3072, ignore_validators: tuple[int, ...] = (),
                 lying_validators: tuple[int, ...] = (), crawl_delay: float = 0.0,
                 blog_posts: int = 12, throttle_hosts: tuple[int, ...] = (),
                 throttle_seconds: float = 1.0, lifecycle: Lifecycle | None = None) -> None:
        if per_page < 1:
            raise ValueError(f"per_page must be >= 1, got {per_page!r}")
        self.seed, self.per_page, self.large_page_kb = seed, per_page, large_page_kb
        self.catalog = Catalog(seed, products, categories, epoch, min_change_interval,
                               max_change_interval, never_change_share, lifecycle)
        self.clock = SimClock(time_scale, epoch, clock_origin)
        self.ignore_validators, self.lying_validators = set(ignore_validators), set(lying_validators)
        self.crawl_delay, self.blog_posts = crawl_delay, blog_posts
        self.throttle_hosts, self.throttle_seconds = set(throttle_hosts), throttle_seconds
        self._last_served: dict[str, float] = {}
        self._throttle_lock = threading.Lock()
        self.hosts: list[str] = []
        self.port = 0
        self._noise = random.Random()  # unseeded on purpose: noise must differ between loads
        self._large: bytes | None = None
        self._large_lock = threading.Lock()
        rng = seeded(seed, "chrome")
        self._legal = "".join(f"<p>{paragraph(rng, 5)}</p>" for _ in range(5))
        self._css = "".join(f".c{k} {{ margin: {k % 7}px; padding: {k % 5}px {k % 3}px; "
                            f"color: #{rng.randrange(0x1000000):06x}; }}\n" for k in range(90))
        self._reviews = [self._make_reviews(p.index) for p in self.catalog.products]
        self._specs = [self._make_specs(p.index) for p in self.catalog.products]

    # -- Site protocol ---------------------------------------------------------------------------

    def bind(self, hosts: Sequence[str], port: int) -> None:
        self.hosts, self.port = list(hosts), port
        self.www, self.shards, self.blog = host_roles(self.hosts)

    def ready_info(self) -> dict[str, float]:
        """What a parent process needs to rebuild this site's truth: the clock parameters."""
        return {"clock_origin": self.clock.origin, "epoch": self.clock.epoch,
                "time_scale": self.clock.time_scale}

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        now = self.clock.time()
        parts = urlsplit(path)
        route, query = parts.path, parse_qs(parts.query)
        if route == "/robots.txt":
            return self._text(self._robots(host), "text/plain")
        if self._throttled(host):
            return 429, {"Retry-After": str(math.ceil(self.throttle_seconds)),
                         "Content-Type": "text/plain", "Date": _http_date(now)}, b"Slow down\n"
        if route == "/sitemap.xml":
            return self._text(self._sitemap(host, now), "application/xml")
        if host == self.www:
            if route == "/":
                return self._html(host, now, "Demo shop", self._index_main(host, now))
            if m := re.fullmatch(r"/category/([a-z0-9-]+)/", route):
                return self._listing(host, m.group(1), query.get("page", ["1"])[0], now)
            if route in ("/cart", "/search"):
                return self._html(host, now, route[1:].title(), "<p>Nothing here yet.</p>")
        if host in self.shards:
            if m := re.fullmatch(r"/product/(\d+)/([a-z0-9-]+)", route):
                return self._product(host, int(m.group(1)), m.group(2), headers, now)
            if route == "/":
                return self._html(host, now, "Catalog", self._shard_main(host, now))
        if host == self.blog:
            return self._blog_route(host, route, now)
        return self._not_found(host, now)

    def _throttled(self, host: str) -> bool:
        """A throttled host serves one request per ``throttle_seconds`` (real time), else 429."""
        if self.hosts.index(host) not in self.throttle_hosts:
            return False
        with self._throttle_lock:
            now, last = time.monotonic(), self._last_served.get(host)
            if last is not None and now - last < self.throttle_seconds:
                return True
            self._last_served[host] = now
            return False

    # -- truth helpers for tests -----------------------------------------------------------------

    def now(self) -> float:
        """Simulated time now."""
        return self.clock.time()

    def product_version(self, i: int, t: float | None = None) -> int:
        """Changes of product ``i`` up to simulated time ``t`` (default: now)."""
        return self.catalog.version(i, self.now() if t is None else t)

    def change_times(self, i: int, start: float, end: float) -> list[float]:
        """Simulated times of product ``i``'s changes in ``(start, end]``."""
        return self.catalog.change_times(i, start, end)

    def product_url(self, i: int, t: float | None = None) -> str:
        """Product ``i``'s URL at ``t`` (default: now): a moved product's new one from the move."""
        slug = self.catalog.slug(i, self.now() if t is None else t)
        return f"http://{self.shards[i % len(self.shards)]}:{self.port}/product/{i}/{slug}"

    def product_index(self, url: str, t: float | None = None) -> int | None:
        """The product whose URL at ``t`` (default: now) ``url`` is (query string aside), or None."""
        parts = urlsplit(url)
        m = re.fullmatch(r"/product/(\d+)/[a-z0-9-]+", parts.path)
        if m is None or int(m.group(1)) >= len(self.catalog):
            return None
        return int(m.group(1)) if self.product_url(int(m.group(1)), t).endswith(
            f"{parts.hostname}:{parts.port}{parts.path}") else None

    def product_state(self, i: int, t: float | None = None) -> State:
        """What product ``i``'s first URL answers at ``t`` (default: now): ``alive``, ``unborn``,
        ``dead`` (404 or 410), ``moved`` (``location``: the new URL) or ``temp`` (``location``:
        the redirect's target, the product's category listing)."""
        t = self.now() if t is None else t
        state, status = self.catalog.state(i, t)
        location = (self.product_url(i, t) if state == "moved" else
                    self.category_url(self.catalog.products[i].category) if state == "temp" else None)
        return State(state, status, location)

    def answer(self, url: str, t: float | None = None) -> tuple[int, str | None] | None:
        """(status, ``Location`` or None) the shop answers for a product page URL at ``t``
        (default: now); None for a URL that is no product page."""
        parts = urlsplit(url)
        m = re.fullmatch(r"/product/(\d+)/([a-z0-9-]+)", parts.path)
        if m is None or int(m.group(1)) >= len(self.catalog) or parts.port != self.port or \
                parts.hostname != self.shards[int(m.group(1)) % len(self.shards)]:
            return None
        return self._answer(int(m.group(1)), m.group(2), self.now() if t is None else t)

    def lifecycle_events(self, i: int) -> list[tuple[str, float]]:
        """Product ``i``'s lifecycle events, (kind, simulated time) in time order: ``born``,
        ``died``, ``restored``, ``moved``, ``redirected``, ``redirect_ended``; [] without any."""
        return self.catalog.lifecycle_events(i)

    def page_record(self, i: int, t: float | None = None, *, version: int | None = None
                    ) -> dict[str, str]:
        """The record the demo site file extracts from product ``i``'s page (:data:`RECORD_FIELDS`,
        text as the crawler normalises it) at ``version``, or at the version current at ``t``
        (default: now). The page serves it only while the product is alive."""
        if version is None:
            version = self.catalog.version(i, self.now() if t is None else t)
        record = self.catalog.record_at(i, version)
        return {name: " ".join(str(record[name]).split()) for name in RECORD_FIELDS}

    def category_url(self, c: int, page: int = 1) -> str:
        slug = self.catalog.category_names[c].lower().replace(" ", "-")
        return f"http://{self.www}:{self.port}/category/{slug}/" + (f"?page={page}" if page > 1 else "")

    # -- pages -----------------------------------------------------------------------------------

    def _link(self, here: str, there: str, path: str) -> str:
        """Same-host links are root-relative, cross-host links absolute, as on real shops."""
        return path if here == there else f"http://{there}:{self.port}{path}"

    def _product_link(self, here: str, i: int, now: float) -> str:
        return self._link(here, self.shards[i % len(self.shards)],
                          f"/product/{i}/{self.catalog.slug(i, now)}")

    def _listed(self, products: Sequence[int], now: float) -> list[int]:
        return [i for i in products if self.catalog.listed(i, now)]

    def _category_link(self, here: str, c: int) -> str:
        slug = self.catalog.category_names[c].lower().replace(" ", "-")
        return self._link(here, self.www, f"/category/{slug}/")

    def _html(self, host: str, now: float, title: str, main: str, status: int = 200,
              headers: dict[str, str] | None = None) -> Response:
        noise, sid = self._noise, secrets.token_hex(8)
        names = self.catalog.category_names
        nav = "".join(f'<li><a href="{self._category_link(host, c)}">{_esc(n)}</a></li>'
                      for c, n in enumerate(names))
        mega = "".join(
            f'<div class="col c{c}"><h4>{_esc(n)}</h4><ul>' + "".join(
                f'<li><a href="{self._product_link(host, i, now)}">{_esc(self.catalog.products[i].name)}</a></li>'
                for i in self._listed(self.catalog.in_category(c), now)[:6]) + "</ul></div>"
            for c, n in enumerate(names))
        blog = self.blog
        hostile = "".join(f'<li><a href="{self._link(host, blog, p)}">{t}</a></li>' for p, t in (
            ("/calendar/2026/12", "Events"), ("/files/report.html", "Annual report"),
            ("/legacy/latin.html", "Old catalogue"), ("/archive/everything.html", "Full archive")))
        page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)} | Demo shop</title>
<meta name="viewport" content="width=device-width"><style>{self._css}</style></head>
<body><header><a class="logo" href="{self._link(host, self.www, '/')}">Demo shop</a>
<nav class="main"><ul>{nav}</ul></nav>
<a class="cart" href="{self._link(host, self.www, '/cart')}?sid={sid}">Cart (0)</a>
<form class="search" action="{self._link(host, self.www, '/search')}"><input type="hidden"
 name="csrf" value="{secrets.token_hex(16)}"><input name="q" placeholder="Search"></form></header>
<div class="ad" data-slot="{noise.randrange(10**6)}">{_esc(noise.choice(ADS))}</div>
<main>{main}</main>
<nav class="mega">{mega}</nav>
<footer><ul class="links"><li><a href="{self._link(host, blog, '/')}">Blog</a></li>{hostile}
<li><a href="/sitemap.xml">Sitemap</a></li></ul>{self._legal}
<p class="generated">Generated {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(now))}.{int(now * 1e6) % 10**6:06d}
 in {noise.randrange(3, 90)} ms, {noise.randrange(10, 999)} visitors online, session {sid}.</p>
</footer></body></html>"""
        return status, {"Content-Type": "text/html; charset=utf-8", "Date": _http_date(now),
                        **(headers or {})}, page.encode("utf-8")

    def _text(self, text: str, kind: str) -> Response:
        return 200, {"Content-Type": f"{kind}; charset=utf-8"}, text.encode("utf-8")

    def _not_found(self, host: str, now: float) -> Response:
        return self._html(host, now, "Not found", "<h1>Page not found</h1>", status=404)

    def _index_main(self, host: str, now: float) -> str:
        featured = "".join(f'<li><a href="{self._product_link(host, i, now)}">'
                           f'{_esc(self.catalog.products[i].name)}</a></li>'
                           for i in self._listed(range(min(24, len(self.catalog))), now))
        posts = "".join(f'<li><a href="{self._link(host, self.blog, self._post_path(k))}">Post {k}</a></li>'
                        for k in range(self.blog_posts))
        return (f'<h1>Welcome</h1><p>{paragraph(seeded(self.seed, "welcome"), 4)}</p>'
                f'<ul class="featured">{featured}</ul><ul class="posts">{posts}</ul>')

    def _shard_main(self, host: str, now: float) -> str:
        items = "".join(f'<li><a href="{self._product_link(host, i, now)}">{_esc(p.name)}</a></li>'
                        for i, p in enumerate(self.catalog.products)
                        if self.shards[i % len(self.shards)] == host and self.catalog.listed(i, now))
        return f"<h1>Catalog</h1><ul>{items}</ul>"

    def _listing(self, host: str, slug: str, page_arg: str, now: float) -> Response:
        names = [n.lower().replace(" ", "-") for n in self.catalog.category_names]
        if slug not in names or not page_arg.isdigit():
            return self._not_found(host, now)
        c, page = names.index(slug), int(page_arg)
        members = self._listed(self.catalog.in_category(c), now)
        pages = max(1, math.ceil(len(members) / self.per_page))
        if not 1 <= page <= pages:
            return self._not_found(host, now)
        items = []
        for i in members[(page - 1) * self.per_page:page * self.per_page]:
            r = self.catalog.record(i, now)
            items.append(f'<li class="item" data-index="{i}"><a class="name" href="'
                         f'{self._product_link(host, i, now)}">{_esc(str(r["name"]))}</a> '
                         f'<span class="price">{r["price"]}</span> <span class="stock">{r["stock"]}'
                         f'</span><p class="teaser">{_esc(str(r["description"])[:160])}</p></li>')
        links = "".join(f'<a href="/category/{slug}/' + (f'?page={k}' if k > 1 else "")
                        + ('" class="next" rel="next' if k == page + 1 else "") + f'">{k}</a> '
                        for k in range(1, pages + 1))
        main = (f'<h1 class="category">{_esc(self.catalog.category_names[c])}</h1>'
                f'<ul class="listing">{"".join(items)}</ul><nav class="pages">{links}</nav>')
        return self._html(host, now, self.catalog.category_names[c], main)

    def _answer(self, i: int, slug: str, now: float) -> tuple[int, str | None]:
        """(status, Location or None) of product ``i``'s page at ``slug``."""
        current = self.catalog.slug(i, now)
        if slug != current:  # the slug it moved from, an old or a mistyped one: one canonical URL
            fate = self.catalog.fate(i)
            if fate is not None and fate.kind == "move" and slug == self.catalog.products[i].slug:
                return fate.status, self.product_url(i, now)
            return 301, self.product_url(i, now)
        state, status = self.catalog.state(i, now)
        if state == "temp":
            return status, self.category_url(self.catalog.products[i].category)
        return (200 if state == "moved" else status), None  # moved: this is the new slug

    def _product(self, host: str, i: int, slug: str, headers: Headers, now: float) -> Response:
        if i >= len(self.catalog) or self.shards[i % len(self.shards)] != host:
            return self._not_found(host, now)
        status, location = self._answer(i, slug, now)
        if location is not None:
            return status, {"Location": location, "Date": _http_date(now)}, b""
        if status == 410:
            return self._html(host, now, "Gone", "<h1>This product is no longer sold</h1>", status=410)
        if status != 200:
            return self._not_found(host, now)
        version, last = self.catalog.version(i, now), self.catalog.last_modified(i, now)
        began = self.catalog.incarnation(i, now)
        tag = f"p{i}-v{version}" + ("" if began is None else f"-i{began:.0f}")
        validators = {"ETag": f'"{tag}"', "Last-Modified": _http_date(last), "Cache-Control": "no-cache"}
        inm, ims = headers.get("If-None-Match"), headers.get("If-Modified-Since")
        where = self.hosts.index(host)
        if (inm or ims) and where in self.lying_validators:
            # Echo the client's own validators: a broken cache layer that never looks.
            echoed = {"ETag": inm} if inm else {"Last-Modified": ims or ""}
            return 304, {"Date": _http_date(now), **echoed}, b""
        if where not in self.ignore_validators and _not_modified(inm, ims, validators["ETag"], last):
            return 304, {"Date": _http_date(now), **validators}, b""
        p, r = self.catalog.products[i], self.catalog.record(i, now)
        sid = secrets.token_hex(6)
        n = len(self.catalog)
        related = "".join(f'<li><a href="{self._product_link(host, j, now)}?sid={sid}">'
                          f'{_esc(self.catalog.products[j].name)}</a></li>'
                          for j in self._listed(sorted({(i + 7 * k) % n for k in range(1, 9)} - {i}), now))
        main = f"""<nav class="breadcrumb"><a href="{self._link(host, self.www, '/')}">Home</a> &rsaquo;
<a href="{self._category_link(host, p.category)}">{_esc(str(r["category"]))}</a></nav>
<article class="product" data-index="{i}"><h1 class="name">{_esc(p.name)}</h1>
<p class="offer"><span class="price">{r["price"]}</span> <span class="currency">EUR</span>,
in stock: <span class="stock">{r["stock"]}</span></p>
<p class="ids">SKU <span class="sku">{p.sku}</span>, category <span class="category">{_esc(str(r["category"]))}</span></p>
<div class="desc"><p>{_esc(str(r["description"]))}</p></div>
<table class="specs">{self._specs[i]}</table>
<section class="reviews"><h2>Reviews</h2>{self._reviews[i]}</section>
<section class="related"><h2>Customers also viewed</h2><ul>{related}</ul></section></article>"""
        return self._html(host, now, p.name, main, headers=validators)

    def _make_reviews(self, i: int) -> str:
        rng = seeded(self.seed, i, "reviews")
        return "".join(f'<div class="review"><span class="stars">{rng.randint(1, 5)}/5</span>'
                       f'<p>{paragraph(rng, rng.randint(2, 5))}</p><p class="by">{rng.choice(ADJECTIVES)} '
                       f'{rng.choice(NOUNS)} fan</p></div>' for _ in range(rng.randint(3, 12)))

    def _make_specs(self, i: int) -> str:
        rng = seeded(self.seed, i, "specs")
        return "".join(f"<tr><th>{rng.choice(WORDS).title()} {rng.choice(WORDS)}</th>"
                       f"<td>{sentence(rng, 2, 6)}</td></tr>" for _ in range(rng.randint(8, 20)))

    # -- blog host: posts and hostile pages -------------------------------------------------------

    def _post_path(self, k: int) -> str:
        return f"/blog/{k}/notes-from-the-shop-{k}"

    def _blog_route(self, host: str, route: str, now: float) -> Response:
        if route == "/":
            posts = "".join(f'<li><a href="{self._post_path(k)}">Notes from the shop {k}</a></li>'
                            for k in range(self.blog_posts))
            return self._html(host, now, "Blog", f'<h1>Blog</h1><ul class="posts">{posts}</ul>')
        if (m := re.fullmatch(r"/blog/(\d+)/notes-from-the-shop-\d+", route)) and \
                route == self._post_path(int(m.group(1))) and int(m.group(1)) < self.blog_posts:
            rng = seeded(self.seed, "post", m.group(1))
            picks = rng.sample(range(len(self.catalog)), min(10, len(self.catalog)))
            # The first link uses an outdated slug: old posts are how crawlers meet redirects.
            texts = {i: paragraph(rng, 5) for i in picks}  # a post's text does not change
            body = "".join(f'<p>{texts[i]} See <a href="{self._product_link(host, i, now)}'
                           f'{"-2025" if n == 0 else ""}">{_esc(self.catalog.products[i].name)}'
                           "</a>.</p>" for n, i in enumerate(self._listed(picks, now)))
            return self._html(host, now, f"Post {m.group(1)}", f"<h1>Post {m.group(1)}</h1>{body}")
        if m := re.fullmatch(r"/calendar/(\d{1,4})/(\d{1,2})", route):
            year, month = int(m.group(1)), int(m.group(2))
            if not 1 <= month <= 12:
                return self._not_found(host, now)
            prev = (year, month - 1) if month > 1 else (year - 1, 12)
            nxt = (year, month + 1) if month < 12 else (year + 1, 1)
            main = (f"<h1>Events {year}-{month:02d}</h1><p>No events this month.</p>"
                    f'<a class="prev" href="/calendar/{prev[0]}/{prev[1]}">Previous</a> '
                    f'<a class="next" href="/calendar/{nxt[0]}/{nxt[1]}">Next</a>')
            return self._html(host, now, "Events", main)
        if route == "/files/report.html":
            return 200, {"Content-Type": "text/html"}, seeded(self.seed, "binary").randbytes(48 * 1024)
        if route == "/legacy/latin.html":
            raw = (b'<html><head><meta charset="utf-8"><title>Caf\xe9 catalogue</title></head><body>'
                    b"<h1>Cat\xe1logo \xff\xfe</h1><p>Truncated \xc3 and overlong \xc0\xaf bytes.</p>"
                    + f'<a href="{self._link(host, self.www, "/")}">Home</a>'.encode() + b"</body></html>")
            return 200, {"Content-Type": "text/html; charset=utf-8"}, raw
        if route == "/archive/everything.html":
            return 200, {"Content-Type": "text/html; charset=utf-8"}, self._large_page()
        return self._not_found(host, now)

    def _large_page(self) -> bytes:
        with self._large_lock:
            if self._large is None:
                rng = seeded(self.seed, "large")
                # Built once: it links only products whose URL and presence never change.
                fixed = [i for i in range(len(self.catalog)) if self.catalog.fate(i) is None]
                pool = [f"<p>{paragraph(rng, 6)}" + (
                    f" <a href=\"{self._product_link(self.blog, fixed[k % len(fixed)], self.catalog.epoch)}\">more</a>"
                    if fixed else "") + "</p>\n" for k in range(64)]
                target, parts, size = self.large_page_kb * 1024, ["<html><body><h1>Archive</h1>"], 0
                while size < target:
                    parts.append(pool[len(parts) % len(pool)])
                    size += len(parts[-1])
                self._large = ("".join(parts) + "</body></html>").encode()
            return self._large

    # -- robots.txt and sitemaps ------------------------------------------------------------------

    def _robots(self, host: str) -> str:
        delay = f"Crawl-delay: {self.crawl_delay:g}\n" if self.crawl_delay else ""
        return (f"User-agent: *\nDisallow: /cart\nDisallow: /search\n{delay}\n"
                f"Sitemap: http://{host}:{self.port}/sitemap.xml\n")

    def _sitemap(self, host: str, now: float) -> str:
        base, entries = f"http://{host}:{self.port}", list[tuple[str, float | None]]()
        if host == self.www:
            entries.append((f"{base}/", None))
            entries += [(self.category_url(c), self.catalog.category_last_change(c, now))
                        for c in range(len(self.catalog.category_names))]
        if host in self.shards:
            entries += [(self.product_url(i, now), self.catalog.last_modified(i, now))
                        for i in range(len(self.catalog))
                        if self.shards[i % len(self.shards)] == host and self.catalog.listed(i, now)]
        if host == self.blog:
            entries += [(f"{base}{self._post_path(k)}", self.clock.epoch - (k + 1) * DAY)
                        for k in range(self.blog_posts)]
        urls = "".join(f"<url><loc>{_esc(loc)}</loc>" + (f"<lastmod>{_w3c(t)}</lastmod>" if t else "")
                       + "</url>\n" for loc, t in entries)
        return ('<?xml version="1.0" encoding="UTF-8"?>\n'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{urls}</urlset>\n')


ADS = ("Spring sale: 20% off garden tools", "Free delivery over 50 EUR", "Join our newsletter",
       "New: the Alpine collection", "Gift cards for every occasion", "Refer a friend, get 10 EUR")


def _not_modified(inm: str | None, ims: str | None, etag: str, last: float) -> bool:
    """RFC 9110 section 13.2.2: If-None-Match wins; If-Modified-Since is checked only without it."""
    if inm is not None:
        tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
        return "*" in tags or etag in tags
    if ims:
        try:
            since = parsedate_to_datetime(ims).timestamp()
        except (TypeError, ValueError, IndexError):
            return False
        return math.floor(last) <= since
    return False
