"""The demo shop's catalog: products whose records change over simulated time.

Pure and deterministic: the state of product ``i`` at simulated time ``t`` is a function of
(seed, i, t), so a test can ask for the truth (versions, change times, records, and with a
:class:`~webcrawl.demo.lifecycle.Lifecycle` births, deaths, moves and temporary redirects) without
the server. The simulated clock runs ``time_scale`` times faster than real time from ``EPOCH``.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
import time
from array import array
from bisect import bisect_right
from dataclasses import dataclass

from webcrawl.demo.lifecycle import Fate, Lifecycle, draw_fate

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: simulated time zero, fixed so truth is portable
DAY = 86_400.0

WORDS = (
    "quality durable compact classic modern premium light sturdy elegant simple practical robust "
    "soft smooth bright quiet reliable natural steel wooden cotton ceramic glass leather recycled "
    "design comfort finish colour texture handle surface edge frame layer base cover grip size "
    "weight shape detail pattern material craft warranty delivery service season collection range "
    "everyday kitchen garden travel office outdoor family home work weekend morning evening gift "
    "made tested built shaped crafted chosen packed finished cleaned stored used loved returned "
    "with for from into across under over beside between without around through along and or the "
    "a its our your every each this that more less well often rarely easily gently simply fully"
).split()
ADJECTIVES = ("Alpine Brisk Cedar Dusky Ember Fable Granite Harbor Indigo Juniper Kestrel Lumen "
              "Maple Nimbus Onyx Pebble Quartz Russet Sable Tundra Umber Velvet Willow Zephyr").split()
NOUNS = ("Kettle Lamp Chair Blanket Mug Backpack Speaker Notebook Planter Toaster Jacket Skillet "
         "Clock Rug Bottle Headphones Stool Vase Tent Grinder Pillow Shelf Torch Scarf").split()
CATEGORY_NAMES = ("Kitchen Garden Lighting Furniture Audio Outdoor Office Textiles Travel Bath "
                  "Tools Toys Books Sports Pets Storage").split()


def seeded(*parts: object) -> random.Random:
    """A random generator determined by ``parts`` alone (stable across processes and versions)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def sentence(rng: random.Random, low: int = 8, high: int = 18) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, sentences: int = 4) -> str:
    return " ".join(sentence(rng) for _ in range(sentences))


class SimClock:
    """Simulated time: ``epoch`` at real wall time ``origin``, then ``time_scale`` x faster.

    Satisfies ``webcrawl.clock.Clock`` (a ``time()`` method)."""

    def __init__(self, time_scale: float = 1.0, epoch: float = EPOCH,
                 origin: float | None = None) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        self.time_scale = time_scale
        self.epoch = epoch
        self.origin = time.time() if origin is None else origin

    def time(self) -> float:
        return self.at(time.time())

    def advance(self, seconds: float) -> None:
        """Move simulated time forward by ``seconds`` (tests: a frozen clock jumps to an event)."""
        self.epoch += seconds

    def at(self, wall: float) -> float:
        """Simulated time at real wall time ``wall``."""
        return self.epoch + (wall - self.origin) * self.time_scale

    def wall(self, sim: float) -> float:
        """Real wall time at which simulated time reaches ``sim``."""
        return self.origin + (sim - self.epoch) / self.time_scale


@dataclass(frozen=True)
class Product:
    """The fixed part of a product; ``rate`` is changes per simulated second (0: never changes)."""

    index: int
    name: str
    slug: str
    sku: str
    category: int
    base_cents: int
    rate: float
    created: float
    description: str


class _History:
    """One product's change events, generated in time order from the product's own RNG stream.

    Each event alters the stock, the price or the description, always to a different value, so
    every version has a record distinct from the one before."""

    def __init__(self, product: Product, seed: int, epoch: float) -> None:
        self.rng = seeded(seed, product.index, "history")
        self.rate = product.rate
        self.times = array("d")
        self.prices = array("q", [product.base_cents])
        self.stocks = array("q", [self.rng.randrange(60)])
        self.notes = array("q", [0])
        self.base = product.base_cents
        self.next = epoch + self.rng.expovariate(self.rate) if self.rate > 0 else math.inf
        self.lock = threading.Lock()

    def version(self, t: float) -> int:
        with self.lock:
            while self.next <= t:
                self._step()
            return bisect_right(self.times, t)

    def reach(self, version: int) -> None:
        """Generate the history up to ``version`` changes (at least)."""
        with self.lock:
            while len(self.times) < version:
                self._step()

    def _step(self) -> None:
        rng = self.rng
        price, stock, note = self.prices[-1], self.stocks[-1], self.notes[-1]
        kind = rng.random()
        if kind < 0.5:
            stock = (stock + 1 + rng.randrange(59)) % 60
        elif kind < 0.9:
            new = int(self.base * (0.7 + 0.6 * rng.random()))
            price = new if new != price else new + 1
        else:
            note = (note + 1 + rng.randrange(len(NOTES) - 1)) % len(NOTES)
        self.times.append(self.next)
        self.prices.append(price)
        self.stocks.append(stock)
        self.notes.append(note)
        self.next += rng.expovariate(self.rate)


NOTES = ("", " Now with free delivery.", " Limited edition colours.", " Back by popular demand.",
         " New improved finish.")


class Catalog:
    """The shop's products and their history: pure, deterministic, thread-safe.

    Rates are spread log-uniformly between one change per ``max_change_interval`` and one per
    ``min_change_interval`` simulated seconds; a ``never_change_share`` of products never change.
    Querying a time far past the epoch costs one step per change of that product up to it.
    With a ``lifecycle``, products are also born, die, come back, move and redirect for a while
    (:mod:`webcrawl.demo.lifecycle`); without one every product lives at its first URL forever."""

    def __init__(self, seed: int = 0, products: int = 200, categories: int = 10,
                 epoch: float = EPOCH, min_change_interval: float = 600.0,
                 max_change_interval: float = 30 * DAY, never_change_share: float = 0.15,
                 lifecycle: Lifecycle | None = None) -> None:
        if products < 1 or categories < 1:
            raise ValueError(f"need products >= 1 and categories >= 1, got {products}, {categories}")
        if not 0 < min_change_interval <= max_change_interval:
            raise ValueError("need 0 < min_change_interval <= max_change_interval, got "
                             f"{min_change_interval!r}, {max_change_interval!r}")
        self.seed, self.epoch = seed, epoch
        self.category_names = [CATEGORY_NAMES[c % len(CATEGORY_NAMES)]
                               + (f" {c // len(CATEGORY_NAMES) + 1}" if c >= len(CATEGORY_NAMES) else "")
                               for c in range(categories)]
        rng = seeded(seed, "catalog")
        # Uneven category sizes so that some listings span several pages.
        weights = [1 / (c + 1) ** 0.8 for c in range(categories)]
        lo, hi = math.log(min_change_interval), math.log(max_change_interval)
        self.products: list[Product] = []
        for i in range(products):
            name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {100 + i}"
            category = i if i < categories else rng.choices(range(categories), weights)[0]
            never = rng.random() < never_change_share
            rate = 0.0 if never else 1 / math.exp(rng.uniform(lo, hi))
            self.products.append(Product(
                index=i, name=name, slug=name.lower().replace(" ", "-"), sku=f"SKU-{seed % 1000:03d}-{i:05d}",
                category=category, base_cents=rng.randrange(499, 25_000), rate=rate,
                created=epoch - rng.uniform(1, 90) * DAY, description=paragraph(rng, 3)))
        self._histories = [_History(p, seed, epoch) for p in self.products]
        self.lifecycle = lifecycle
        self.fates: list[Fate | None] = [
            None if lifecycle is None else draw_fate(lifecycle, epoch, seeded(seed, i, "lifecycle"))
            for i in range(products)]

    def __len__(self) -> int:
        return len(self.products)

    def in_category(self, category: int) -> list[int]:
        return [p.index for p in self.products if p.category == category]

    def change_rate(self, i: int) -> float:
        """True change rate of product ``i``, per simulated second."""
        return self.products[i].rate

    def version(self, i: int, t: float) -> int:
        """Number of changes of product ``i`` at or before simulated time ``t``."""
        return self._histories[i].version(t)

    def change_times(self, i: int, start: float, end: float) -> list[float]:
        """Simulated times of product ``i``'s changes in ``(start, end]``."""
        history = self._histories[i]
        history.version(end)
        with history.lock:
            times = history.times
            return list(times[bisect_right(times, start):bisect_right(times, end)])

    def last_change(self, i: int, t: float) -> float:
        """When the record seen at ``t`` came to be (the product's creation if it never changed)."""
        v = self.version(i, t)
        return self._histories[i].times[v - 1] if v else self.products[i].created

    def record(self, i: int, t: float) -> dict[str, str | int]:
        """The record a product page shows at simulated time ``t``."""
        return self.record_at(i, self.version(i, t))

    def record_at(self, i: int, version: int) -> dict[str, str | int]:
        """Product ``i``'s record at ``version`` (0: as it was at the epoch)."""
        if version < 0:
            raise ValueError(f"version must be >= 0, got {version!r}")
        p, history, v = self.products[i], self._histories[i], version
        history.reach(v)
        return {"name": p.name, "price": f"{history.prices[v] / 100:.2f}",
                "stock": history.stocks[v], "description": p.description + NOTES[history.notes[v]],
                "sku": p.sku, "category": self.category_names[p.category]}

    # -- lifecycle (all products alive at their first slug without one) ---------------------------

    def fate(self, i: int) -> Fate | None:
        """Product ``i``'s fate, None if it has none."""
        return self.fates[i]

    def state(self, i: int, t: float) -> tuple[str, int]:
        """(state, HTTP status) of product ``i``'s first URL at ``t``: ``alive`` 200, ``unborn``
        404, ``dead`` 404/410, ``moved`` 301/308, ``temp`` 302/307."""
        fate = self.fates[i]
        return ("alive", 200) if fate is None else fate.state(t)

    def slug(self, i: int, t: float) -> str:
        """Product ``i``'s slug at ``t`` (a moved product's new one from the move on)."""
        fate, slug = self.fates[i], self.products[i].slug
        return slug if fate is None else fate.slug(slug, t)

    def listed(self, i: int, t: float) -> bool:
        """Whether listings, links and sitemaps show product ``i`` at ``t``: born and not dead."""
        fate = self.fates[i]
        return fate is None or fate.listed(t)

    def incarnation(self, i: int, t: float) -> float | None:
        """When the resource product ``i``'s page serves at ``t`` began (birth, restore, move),
        None if before any fate (see :meth:`Fate.incarnation`)."""
        fate = self.fates[i]
        return None if fate is None else fate.incarnation(t)

    def last_modified(self, i: int, t: float) -> float:
        """The page's ``Last-Modified`` at ``t``: its last change, or when its current resource
        began (birth, restore, move) if later."""
        last, began = self.last_change(i, t), self.incarnation(i, t)
        return last if began is None else max(last, began)

    def lifecycle_events(self, i: int) -> list[tuple[str, float]]:
        """Product ``i``'s lifecycle events in time order (see :meth:`Fate.events`)."""
        fate = self.fates[i]
        return [] if fate is None else fate.events()

    def category_last_change(self, c: int, t: float) -> float | None:
        """When category ``c``'s listing last changed by ``t``: a listed member's record or
        URL, or a member born, dying or coming back. None for an empty category."""
        times = [self.last_modified(i, t) for i in self.in_category(c) if self.listed(i, t)]
        times += [when for i in self.in_category(c) for kind, when in self.lifecycle_events(i)
                  if when <= t and kind in ("born", "died", "restored", "moved")]
        return max(times, default=None)
