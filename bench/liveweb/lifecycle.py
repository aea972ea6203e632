"""The lifecycle of a test web's products besides their record changes: deaths, restores, moves
and temporary redirects, drawn per product from the scenario's seed
(:class:`~bench.liveweb.params.Lifecycle`), and what a URL answers at a time because of them.

A product present from the start gets at most one :class:`Fate`. Times are seconds from the
origin. A URL's *incarnation* is the time its current resource began (a moved page's new URL at
the move, a restored page at its restore); validators change with it, so an ETag or date the
crawler kept from an earlier incarnation (or carried over a redirect) never earns a 304.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.liveweb.params import Lifecycle

__all__ = ["ALIVE", "MOVE_SUFFIXES", "UNBORN", "Fate", "Life", "draw_fate"]

#: Words appended to a moved product's slug (its new URL keeps the shop's URL pattern).
MOVE_SUFFIXES = ("new", "v2", "edition", "plus", "renewed")


@dataclass(frozen=True)
class Life:
    """What a product's URL answers at a time: ``life`` None (the page, 200), ``unborn`` (404
    before the page, or its new URL, exists), ``dead`` (404 or 410), ``moved`` (301 or 308 to
    ``location``) or ``temp`` (302 or 307 to ``location``); ``location`` is a path."""

    life: str | None
    status: int
    location: str = ""


ALIVE = Life(None, 200)
UNBORN = Life("unborn", 404)


@dataclass(frozen=True)
class Fate:
    """One product's fate. ``kind``: ``death`` (dead during [start, end); ``end`` infinite when
    it never comes back), ``move`` (from ``start`` the old path answers ``status`` to
    ``new_path``, which answers 404 before) or ``temp`` (``status`` to ``target`` during
    [start, end)). ``status``: 404 or 410, 301 or 308, 302 or 307. ``changes``: a restored page
    comes back with a changed record, or the record changes at the move."""

    kind: str
    start: float
    end: float
    status: int
    new_path: str = ""
    target: str = ""
    changes: bool = False

    @property
    def restored(self) -> bool:
        return self.kind == "death" and math.isfinite(self.end)

    @property
    def forced_changes(self) -> tuple[float, ...]:
        """Times of the record changes the fate itself makes."""
        if not self.changes:
            return ()
        return (self.end,) if self.kind == "death" else (self.start,)

    @property
    def listing_changes(self) -> tuple[float, ...]:
        """Times at which listings and sitemaps change because of the fate."""
        if self.kind == "death":
            return (self.start, self.end) if self.restored else (self.start,)
        return (self.start,) if self.kind == "move" else ()

    def present(self, t: float) -> bool:
        """Listed (and in the sitemap) at ``t``: not dead."""
        return not (self.kind == "death" and self.start <= t < self.end)

    def path_at(self, old_path: str, t: float) -> str:
        return self.new_path if self.kind == "move" and t >= self.start else old_path

    def answer(self, old_path: str, path: str, t: float) -> Life:
        """What ``path`` (the page's old or new path) answers at ``t``."""
        if self.kind == "move":
            if path == self.new_path:
                return ALIVE if t >= self.start else UNBORN
            return Life("moved", self.status, self.new_path) if t >= self.start else ALIVE
        if not self.start <= t < self.end:
            return ALIVE
        if self.kind == "death":
            return Life("dead", self.status)
        return Life("temp", self.status, self.target)

    def incarnation(self, path: str, t: float) -> float:
        """When the resource ``path`` serves at ``t`` began (-inf: before the run)."""
        if self.kind == "move" and path == self.new_path:
            return self.start
        if self.restored and t >= self.end:
            return self.end
        return -math.inf

    def alive(self, start: float, end: float) -> list[tuple[float, float]]:
        """The parts of [start, end] in which the page exists (at one URL or another)."""
        if self.kind != "death":
            return [(start, end)] if end > start else []
        spans = [(start, min(end, self.start)), (max(start, self.end), end)]
        return [(a, b) for a, b in spans if b > a]


def draw_fate(lc: Lifecycle, duration: float, path: str, target: str,
              rng: np.random.Generator) -> Fate | None:
    """The fate of a product at ``path`` (present from the start) whose category is ``target``
    (its temporary redirects go there). Every draw is made whatever the outcome, so changing one
    share moves no other product's fate."""
    u, start, a, b, c, d, e = (float(x) for x in rng.random(7))
    start = (lc.start_between[0] + start * (lc.start_between[1] - lc.start_between[0])) * duration
    if u < lc.death_share:
        status = 410 if a < lc.gone_share else 404
        restored = b < lc.restore_share
        dead = (lc.dead_for[0] + c * (lc.dead_for[1] - lc.dead_for[0])) * duration
        return Fate("death", start, start + dead if restored else math.inf, status,
                    changes=restored and d < lc.restore_change_share)
    u -= lc.death_share
    if u < lc.move_share:
        suffix = MOVE_SUFFIXES[int(e * len(MOVE_SUFFIXES))]
        return Fate("move", start, math.inf, 308 if a < lc.move_308_share else 301,
                    new_path=f"{path}-{suffix}", changes=b < lc.move_change_share)
    u -= lc.move_share
    if u < lc.temp_share:
        span = (lc.temp_for[0] + c * (lc.temp_for[1] - lc.temp_for[0])) * duration
        return Fate("temp", start, start + span, 307 if a < lc.temp_307_share else 302,
                    target=target)
    return None
