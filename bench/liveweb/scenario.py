"""The truth of a test web: its pages, their change events and records, generated from
:class:`~bench.liveweb.params.ScenarioParams` alone (same parameters, same scenario).

Times are seconds since the server's start (its origin). Per shop: a hub (``/``), category
listings (``/c/<slug>/``, about ``per_category`` products each) and products (``/p/<pid>/<slug>``;
critical ones have a slug starting ``top-``). A product changes as a Poisson process whose mean
interval comes from :data:`~bench.liveweb.params.CHANGE_BANDS`; each event changes its price,
stock or description. A category's version counts the products born into it so far; a hub never
changes. A page's version at ``t`` is the number of its events at or before ``t``.

With a lifecycle (``params.lifecycle``), products present from the start may also die, come
back, move or redirect for a while (:mod:`bench.liveweb.lifecycle`); the record changes a fate
makes (a restore or move with a changed record) are events like the others, and a category's
version counts its listing's deaths, restores and moves too. Shops without a sitemap list every
product. Without a lifecycle the scenario is exactly the one of a web with births only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.liveweb._text import CATEGORIES, description, product_name, rng_for, slug
from bench.liveweb.lifecycle import ALIVE, UNBORN, Fate, Life, draw_fate
from bench.liveweb.params import CHANGE_BANDS, CHANGE_FIELDS, TIER_VALUES, ScenarioParams

__all__ = ["Page", "Record", "Scenario"]

_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class Record:
    """A product's record at one version: what a crawler should extract."""

    name: str
    price_cents: int
    stock: int
    description: str

    @property
    def price(self) -> str:
        return f"${self.price_cents / 100:.2f}"

    @property
    def stock_text(self) -> str:
        return f"In stock: {self.stock}" if self.stock > 0 else "Out of stock"


@dataclass(eq=False)
class Page:
    """One scored page. ``events`` are its change times (after ``birth``), ``t0`` the time of its
    version 0 (before the start for pages that exist from the start), ``size`` its body bytes,
    ``fate`` its lifecycle (None: it only changes)."""

    pid: int
    shop: int
    kind: str  # hub | category | product
    path: str
    tier: int
    name: str
    size: int
    birth: float = 0.0
    t0: float = 0.0
    events: np.ndarray = field(default_factory=lambda: _EMPTY)
    mean_interval: float = math.inf
    sitemap_only: bool = False
    category: int = -1
    members: tuple[int, ...] = ()
    price: np.ndarray = field(default_factory=lambda: _EMPTY)
    stock: np.ndarray = field(default_factory=lambda: _EMPTY)
    revision: np.ndarray = field(default_factory=lambda: _EMPTY)
    fate: Fate | None = None

    @property
    def value(self) -> float:
        return TIER_VALUES[self.tier]

    @property
    def rate(self) -> float:
        """True change rate (per second) of a product; 0 for hubs and categories, whose
        changes are scheduled births (see :meth:`Scenario.empirical_rate`)."""
        return 0.0 if math.isinf(self.mean_interval) else 1.0 / self.mean_interval

    @property
    def born_in_run(self) -> bool:
        return self.birth > 0


class Scenario:
    """Pages, events and records of one parameter set; read-only once built (thread-safe)."""

    def __init__(self, params: ScenarioParams) -> None:
        self.params = params
        self.hosts = params.hosts
        self.pages: list[Page] = []
        self._by_path: dict[tuple[int, str], Page] = {}
        self.shop_pages: list[list[Page]] = []
        for s in range(len(params.shops)):
            self._build_shop(s)
        for page in self.pages:
            self._by_path[(page.shop, page.path)] = page
            if page.fate is not None and page.fate.new_path:
                self._by_path[(page.shop, page.fate.new_path)] = page

    # -- lookups ---------------------------------------------------------------------------------

    def page_at(self, shop: int, path: str) -> Page | None:
        return self._by_path.get((shop, path))

    def version(self, page: Page, t: float) -> int:
        return int(np.searchsorted(page.events, t, side="right"))

    def changed_at(self, page: Page, version: int) -> float:
        """When the record of ``version`` came to be (seconds from the origin, may be < 0)."""
        return page.t0 if version == 0 else float(page.events[version - 1])

    def record(self, page: Page, version: int) -> Record:
        return Record(page.name, int(page.price[version]), int(page.stock[version]),
                      description(self.params.seed, page.pid, int(page.revision[version])))

    def listed(self, category: Page, t: float) -> list[Page]:
        """The products a category lists at ``t`` (born by then and not dead)."""
        return [p for p in (self.pages[m] for m in category.members) if self.present(p, t)]

    # -- lifecycle -------------------------------------------------------------------------------

    def present(self, page: Page, t: float) -> bool:
        """Born by ``t`` and not dead: listed, and in the sitemap."""
        return page.birth <= t and (page.fate is None or page.fate.present(t))

    def path_at(self, page: Page, t: float) -> str:
        """The URL path a page lives at, and is linked by, at ``t``."""
        return page.path if page.fate is None else page.fate.path_at(page.path, t)

    def life(self, page: Page, path: str, t: float) -> Life:
        """What ``path`` (one of the page's paths) answers at ``t``."""
        if page.birth > t:
            return UNBORN
        return ALIVE if page.fate is None else page.fate.answer(page.path, path, t)

    def incarnation(self, page: Page, path: str, t: float) -> float:
        """When the resource served at ``path`` at ``t`` began (-inf: before the run)."""
        return -math.inf if page.fate is None else page.fate.incarnation(path, t)

    def alive(self, page: Page, start: float, end: float) -> list[tuple[float, float]]:
        """The parts of [start, end] in which the page exists (born, not dead)."""
        start = max(start, page.birth)
        if page.fate is None:
            return [(start, end)] if end > start else []
        return page.fate.alive(start, end)

    def categories(self, shop: int) -> list[Page]:
        return [p for p in self.shop_pages[shop] if p.kind == "category"]

    def sitemap_parts(self, shop: int) -> list[list[Page]]:
        """The pages each sitemap of the shop lists (two parts behind an index, else one; none
        for a shop without a sitemap)."""
        pages = self.shop_pages[shop]
        if not self.params.shops[shop].sitemap:
            return []
        if not self.params.shops[shop].sitemap_index:
            return [pages]
        half = (len(pages) + 1) // 2
        return [pages[:half], pages[half:]]

    def throttled(self, shop: int, t: float) -> bool:
        a, b = self.params.window
        return self.params.shops[shop].throttled and a <= t < b

    def empirical_rate(self, page: Page, start: float, end: float) -> float:
        """Changes per second of ``page`` inside [start, end] (the oracle's rate for pages whose
        changes are scheduled, and a check for the others)."""
        if page.rate > 0:
            return page.rate
        count = np.count_nonzero((page.events > start) & (page.events <= end))
        return count / max(end - start, 1e-9)

    # -- generation ------------------------------------------------------------------------------

    def _add(self, page: Page) -> Page:
        self.pages.append(page)
        self.shop_pages[-1].append(page)
        return page

    def _build_shop(self, s: int) -> None:
        p, spec = self.params, self.params.shops[s]
        rng = np.random.default_rng([p.seed, s, 7])
        self.shop_pages.append([])
        n = spec.products
        shares = np.array([b[0] for b in CHANGE_BANDS])
        band = rng.choice(len(CHANGE_BANDS), size=n, p=shares / shares.sum())
        lo = np.log([CHANGE_BANDS[b][1] for b in band])
        hi = np.log([CHANGE_BANDS[b][2] for b in band])
        interval = np.exp(rng.uniform(lo, hi)) * p.day_seconds
        order = rng.permutation(n)
        n_born = round(n * p.born_share)
        born = set(order[:n_born].tolist())
        born_hidden = set(order[:max(1, round(n_born * p.born_sitemap_only_share))].tolist()
                          if n_born else [])
        hidden = born_hidden | set(order[n_born:n_born + round(n * p.sitemap_only_share)].tolist())
        if not spec.sitemap:
            hidden = set()  # nothing could find them
        births = np.where(np.isin(np.arange(n), list(born)),
                          rng.uniform(*p.born_between, size=n) * p.duration, 0.0)
        critical = rng.random(n) < p.critical_share
        sizes = np.exp(rng.uniform(np.log(10_000), np.log(60_000), size=n)).astype(int)

        listed = [j for j in range(n) if j not in hidden]
        rng.shuffle(listed)
        n_cat = max(1, math.ceil(len(listed) / p.per_category))
        hub = self._add(Page(len(self.pages), s, "hub", "/", 1, f"Shop {s + 1}", 8_000,
                             t0=-30 * p.day_seconds))
        cat_pages = []
        for k in range(n_cat):
            title = f"{CATEGORIES[(k + 3 * s) % len(CATEGORIES)].capitalize()} {k + 1}"
            cat_pages.append(self._add(Page(
                len(self.pages), s, "category", f"/c/{slug(title)}/", 2, title,
                int(rng.uniform(20_000, 40_000)), t0=-float(rng.uniform(1, 30)) * p.day_seconds)))
        category_of = {j: cat_pages[i // p.per_category].pid for i, j in enumerate(listed)}
        first = len(self.pages)
        for j in range(n):
            name = product_name(rng_for(p.seed, s, j))
            path = f"/p/{first + j}/{'top-' if critical[j] else ''}{slug(name)}"
            category = category_of.get(j, -1)
            fate = None
            if p.lifecycle is not None and births[j] == 0:
                target = self.pages[category].path if category >= 0 else "/"
                fate = draw_fate(p.lifecycle, p.duration, path, target,
                                 np.random.default_rng([p.seed, s, j, 17]))
            page = self._add(Page(first + j, s, "product", path, 4 if critical[j] else 3, name,
                                  int(sizes[j]), birth=float(births[j]),
                                  mean_interval=float(interval[j]), sitemap_only=j in hidden,
                                  category=category, fate=fate))
            self._changes(page, np.random.default_rng([p.seed, s, j, 11]),
                          np.random.default_rng([p.seed, s, j, 19]))
        for cat in cat_pages:
            members = sorted(j + first for j, c in category_of.items() if c == cat.pid)
            cat.members = tuple(members)
            listing = [self.pages[m].birth for m in members if self.pages[m].birth > 0]
            listing += [t for m in members if self.pages[m].fate is not None
                        for t in self.pages[m].fate.listing_changes if math.isfinite(t)]
            cat.events = np.sort(np.array(listing))
        hub.members = tuple(c.pid for c in cat_pages)

    def _changes(self, page: Page, rng: np.random.Generator,
                 forced_rng: np.random.Generator) -> None:
        """Poisson events after birth, the changes its fate makes (drawn from ``forced_rng``),
        and the record after each of them."""
        span = self.params.horizon - page.birth
        count = rng.poisson(span / page.mean_interval)
        page.events = page.birth + np.sort(rng.uniform(0, span, size=count))
        page.t0 = page.birth if page.born_in_run else -min(
            float(rng.exponential(page.mean_interval)), 1000 * self.params.day_seconds)
        names = [f[0] for f in CHANGE_FIELDS]
        probs = np.array([f[1] for f in CHANGE_FIELDS])
        touched = rng.choice(len(names), size=count, p=probs / probs.sum())
        first_price, first_stock = rng.integers(500, 50_000), rng.integers(0, 60)
        factors = rng.uniform(0.8, 1.2, size=count)
        stocks = rng.integers(0, 60, size=count)
        forced = np.array(page.fate.forced_changes if page.fate else (), dtype=float)
        if len(forced):  # merged into the Poisson events, in time order
            extra = len(forced)
            times = np.concatenate((page.events, forced))
            order = np.argsort(times, kind="stable")
            page.events = times[order]
            touched = np.concatenate((touched, forced_rng.choice(len(names), size=extra,
                                                                 p=probs / probs.sum())))[order]
            factors = np.concatenate((factors, forced_rng.uniform(0.8, 1.2, size=extra)))[order]
            stocks = np.concatenate((stocks, forced_rng.integers(0, 60, size=extra)))[order]
            count += extra
        price = np.empty(count + 1, dtype=np.int64)
        stock = np.empty(count + 1, dtype=np.int64)
        revision = np.empty(count + 1, dtype=np.int64)
        price[0], stock[0], revision[0] = first_price, first_stock, 0
        for k in range(count):
            price[k + 1], stock[k + 1], revision[k + 1] = price[k], stock[k], revision[k]
            field_name = names[touched[k]]
            if field_name == "price":
                new = max(100, int(price[k] * factors[k]))
                price[k + 1] = new if new != price[k] else new + 1
            elif field_name == "stock":
                stock[k + 1] = stocks[k] if stocks[k] != stock[k] else (stock[k] + 1) % 60
            else:
                revision[k + 1] = revision[k] + 1
        page.price, page.stock, page.revision = price, stock, revision
