"""The demo shop's product lifecycle: births, deaths, restores, moves and temporary redirects.

Opt-in: a :class:`Lifecycle` given to the catalog (``ShopSite(lifecycle=...)``, ``--lifecycle`` on
the command line). Each product gets at most one :class:`Fate`, drawn from its own random stream
(seed, product, ``"lifecycle"``): a fate is a pure function of (seed, product, parameters), and the
record history, drawn from another stream, is the same with or without a lifecycle. Every draw is
made whatever the outcome, so changing one share moves no other product's times.

A fate begins at a simulated time in ``[epoch + start, epoch + start + span)``:

| fate | before ``start`` | from ``start`` | from ``end`` |
| --- | --- | --- | --- |
| ``birth`` | unborn: 404, not listed | alive | |
| ``death`` | alive | dead: 404 or 410, not listed | alive again (restored), if ``end`` is finite |
| ``move`` | alive | the old URL answers 301 or 308 to the new slug, which is listed | |
| ``temp`` | alive | 302 or 307 to the product's category listing, still listed | alive |

The record keeps changing while a product is unborn or dead, so a restored product may come back
with another record.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields, replace

__all__ = ["Fate", "Lifecycle", "State", "draw_fate"]

#: Words appended to a moved product's slug: its new URL keeps the shop's URL pattern.
MOVE_SUFFIXES = ("new", "v2", "edition", "plus", "renewed")
_SHARES = ("birth_share", "death_share", "gone_share", "restore_share", "move_share",
           "move_308_share", "temp_share", "temp_307_share")


@dataclass(frozen=True)
class Lifecycle:
    """How many products meet each fate, and when (simulated seconds after the catalog's epoch).

    ``*_share``: the share of products born late, dying, moving or redirected for a while (at
    most 1 together); ``gone_share`` of deaths answer 410 (the others 404) and ``restore_share`` of
    them come back after ``dead_for`` (low, high) seconds; ``move_308_share`` of moves answer 308
    (the others 301); ``temp_307_share`` of temporary redirects answer 307 (the others 302), for
    ``temp_for`` (low, high) seconds."""

    start: float = 0.0
    span: float = 86_400.0
    birth_share: float = 0.03
    death_share: float = 0.05
    gone_share: float = 0.5
    restore_share: float = 0.5
    dead_for: tuple[float, float] = (600.0, 7200.0)
    move_share: float = 0.04
    move_308_share: float = 0.5
    temp_share: float = 0.03
    temp_307_share: float = 0.5
    temp_for: tuple[float, float] = (300.0, 3600.0)

    def __post_init__(self) -> None:
        for name in _SHARES:
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"lifecycle {name} must be within [0, 1], got {getattr(self, name)!r}")
        if self.birth_share + self.death_share + self.move_share + self.temp_share > 1:
            raise ValueError("lifecycle birth_share + death_share + move_share + temp_share must "
                             "not exceed 1")
        if not (math.isfinite(self.start) and 0 <= self.span < math.inf):
            raise ValueError(f"lifecycle needs a finite start and span >= 0, got {self.start!r}, "
                             f"{self.span!r}")
        for name in ("dead_for", "temp_for"):
            low, high = getattr(self, name)
            if not 0 < low <= high < math.inf:
                raise ValueError(f"lifecycle {name} must be low:high with 0 < low <= high, got "
                                 f"{low!r}:{high!r}")

    @classmethod
    def parse(cls, text: str) -> Lifecycle:
        """``on`` (the defaults) or comma-separated ``key=value`` overriding them, ranges as
        ``low:high``: ``start=60,span=600,death_share=0.1,dead_for=30:90``. Raises ``ValueError``
        naming the bad item."""
        ranges = {f.name: isinstance(f.default, tuple) for f in fields(cls)}
        values: dict[str, float | tuple[float, ...]] = {}
        for item in (part.strip() for part in text.split(",")):
            if item in ("", "on"):
                continue
            key, _, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if key not in ranges or not value:
                raise ValueError(f"lifecycle item {item!r}: expected on or key=value with a key "
                                 f"among {', '.join(ranges)}")
            try:
                numbers = tuple(float(v) for v in value.split(":"))
            except ValueError:
                raise ValueError(f"lifecycle item {item!r}: {value!r} is not a number"
                                 + (" range low:high" if ranges[key] else "")) from None
            if len(numbers) != (2 if ranges[key] else 1):
                raise ValueError(f"lifecycle item {item!r}: expected "
                                 + ("low:high" if ranges[key] else "one number"))
            values[key] = numbers if ranges[key] else numbers[0]
        return replace(cls(), **values)  # type: ignore[arg-type]  # each key's type checked above

    def spec(self) -> str:
        """The text :meth:`parse` reads back into this lifecycle (``on`` for the defaults)."""
        default = Lifecycle()
        items = [f"{f.name}={':'.join(map(_number, value)) if isinstance(value, tuple) else _number(value)}"
                 for f in fields(self) if (value := getattr(self, f.name)) != getattr(default, f.name)]
        return ",".join(items) or "on"


@dataclass(frozen=True)
class State:
    """What a product's first URL answers: ``alive`` (200), ``unborn`` (404), ``dead`` (404 or
    410), ``moved`` (301 or 308 to ``location``) or ``temp`` (302 or 307 to ``location``)."""

    state: str
    status: int
    location: str | None = None


@dataclass(frozen=True)
class Fate:
    """One product's fate (module docstring); times are absolute simulated times. ``end``: when
    a dead product comes back (infinite: never) or a temporary redirect ends; ``suffix``: what a
    move appends to the slug."""

    kind: str
    start: float
    status: int
    end: float = math.inf
    suffix: str = ""

    def state(self, t: float) -> tuple[str, int]:
        """(state, status) of the product's first URL at ``t`` (see :class:`State`)."""
        if self.kind == "birth":
            return ("alive", 200) if t >= self.start else ("unborn", 404)
        if not self.start <= t < self.end:
            return "alive", 200
        return {"death": "dead", "move": "moved", "temp": "temp"}[self.kind], self.status

    def listed(self, t: float) -> bool:
        """Listed, linked and in the sitemap at ``t``: born and not dead."""
        state = self.state(t)[0]
        return state not in ("unborn", "dead")

    def slug(self, slug: str, t: float) -> str:
        """The product's slug at ``t``, its first slug being ``slug``."""
        return f"{slug}-{self.suffix}" if self.kind == "move" and t >= self.start else slug

    def incarnation(self, t: float) -> float | None:
        """When the resource served at ``t`` began (birth, restore, move), None if before any
        fate: validators change with it, so none kept from an earlier incarnation earns a 304."""
        began = self.end if self.kind == "death" else self.start if self.kind in ("birth", "move") else None
        return began if began is not None and began <= t else None

    def events(self) -> list[tuple[str, float]]:
        """The fate's events in time order: ``born``, ``died``, ``restored``, ``moved``,
        ``redirected`` and ``redirect_ended``, each with its time."""
        first = {"birth": "born", "death": "died", "move": "moved", "temp": "redirected"}[self.kind]
        then = {"death": "restored", "temp": "redirect_ended"}.get(self.kind)
        return [(first, self.start)] + ([(then, self.end)] if then and math.isfinite(self.end) else [])


def draw_fate(lifecycle: Lifecycle, epoch: float, rng: random.Random) -> Fate | None:
    """One product's fate (None: it lives on untouched), from its own ``rng``."""
    lc = lifecycle
    u, when, a, b, c = (rng.random() for _ in range(5))
    suffix = rng.choice(MOVE_SUFFIXES)
    start = epoch + lc.start + when * lc.span
    for kind, share in (("birth", lc.birth_share), ("death", lc.death_share),
                        ("move", lc.move_share), ("temp", lc.temp_share)):
        if u < share:
            break
        u -= share
    else:
        return None
    if kind == "birth":
        return Fate("birth", start, 404)
    if kind == "death":
        end = start + _between(lc.dead_for, c) if b < lc.restore_share else math.inf
        return Fate("death", start, 410 if a < lc.gone_share else 404, end)
    if kind == "move":
        return Fate("move", start, 308 if a < lc.move_308_share else 301, suffix=suffix)
    return Fate("temp", start, 307 if a < lc.temp_307_share else 302, start + _between(lc.temp_for, c))


def _number(value: float) -> str:
    """``20`` rather than ``20.0``, and every digit of a value that needs them."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def _between(span: tuple[float, float], u: float) -> float:
    return span[0] + u * (span[1] - span[0])
