"""The truth of a test web: its pages, their change events and records, generated from
:class:`~bench.liveweb.params.ScenarioParams` alone (same parameters, same scenario).

Times are seconds since the server's start (its origin). Per shop: a hub (``/``), category
listings (``/c/<slug>/``, about ``per_category`` products each) and products (``/p/<pid>/<slug>``;
critical ones have a slug starting ``top-``). A product changes as a Poisson process whose mean
interval comes from :data:`~bench.liveweb.params.CHANGE_BANDS`; each event changes its price,
stock or description. A category's version counts the products born into it so far; a hub never
changes. A page's version at ``t`` is the number of its events at or before ``t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.liveweb._text import CATEGORIES, description, product_name, rng_for, slug
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
    version 0 (before the start for pages that exist from the start), ``size`` its body bytes."""

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
        """The products a category lists at ``t`` (those born by then)."""
        return [p for p in (self.pages[m] for m in category.members) if p.birth <= t]

    def categories(self, shop: int) -> list[Page]:
        return [p for p in self.shop_pages[shop] if p.kind == "category"]

    def sitemap_parts(self, shop: int) -> list[list[Page]]:
        """The pages each sitemap of the shop lists (two parts behind an index, else one)."""
        pages = self.shop_pages[shop]
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
            page = self._add(Page(first + j, s, "product", path, 4 if critical[j] else 3, name,
                                  int(sizes[j]), birth=float(births[j]),
                                  mean_interval=float(interval[j]), sitemap_only=j in hidden,
                                  category=category_of.get(j, -1)))
            self._changes(page, np.random.default_rng([p.seed, s, j, 11]))
        for cat in cat_pages:
            members = sorted(j + first for j, c in category_of.items() if c == cat.pid)
            cat.members = tuple(members)
            cat.events = np.sort(np.array([self.pages[m].birth for m in members
                                           if self.pages[m].birth > 0]))
        hub.members = tuple(c.pid for c in cat_pages)

    def _changes(self, page: Page, rng: np.random.Generator) -> None:
        """Poisson events after birth and the record after each of them."""
        span = self.params.horizon - page.birth
        count = rng.poisson(span / page.mean_interval)
        page.events = page.birth + np.sort(rng.uniform(0, span, size=count))
        page.t0 = page.birth if page.born_in_run else -min(
            float(rng.exponential(page.mean_interval)), 1000 * self.params.day_seconds)
        names = [f[0] for f in CHANGE_FIELDS]
        probs = np.array([f[1] for f in CHANGE_FIELDS])
        touched = rng.choice(len(names), size=count, p=probs / probs.sum())
        price = np.empty(count + 1, dtype=np.int64)
        stock = np.empty(count + 1, dtype=np.int64)
        revision = np.empty(count + 1, dtype=np.int64)
        price[0], stock[0], revision[0] = rng.integers(500, 50_000), rng.integers(0, 60), 0
        factors = rng.uniform(0.8, 1.2, size=count)
        stocks = rng.integers(0, 60, size=count)
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
