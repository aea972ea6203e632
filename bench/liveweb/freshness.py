"""What the crawler held of each page, and for how long it was right, from the server's log alone.

A GET answered 200 with a page id gives the crawler that version (a HEAD gives it nothing but a
cost); a 304 confirms the version it already holds (an honest host answers 304 only when that
version is still live, and the copy's version, not the log's word, is what scoring compares). A
copy is fresh at ``t`` when the version held at ``t`` is the version live at ``t``; before its
first fetch a page is stale.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["History", "fresh_seconds", "histories"]


@dataclass
class History:
    """The successful fetches of one page in time order: arrival ``times``, the version
    ``held`` after each, and whether each saw a change (a 200 with a version other than the
    one held before; the first fetch is a discovery, not a change)."""

    times: list[float] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    changed: list[bool] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.times, float), np.asarray(self.held, np.int64)

    @property
    def first(self) -> float | None:
        return self.times[0] if self.times else None


def histories(entries: Iterable[dict[str, Any]]) -> dict[int, History]:
    """Per page id, its :class:`History` from the log's 200 and 304 answers."""
    fetches = sorted((e["t"], e["page"], e["status"], e["version"]) for e in entries
                     if e.get("page") is not None and e.get("version") is not None
                     and e["status"] in (200, 304) and e.get("method", "GET") != "HEAD")
    out: dict[int, History] = defaultdict(History)
    for t, page, status, version in fetches:
        h = out[page]
        before = h.held[-1] if h.held else None
        if status == 200:
            now = int(version)
        else:  # a 304 keeps the copy; with none held yet, take the confirmed version
            now = before if before is not None else int(version)
        h.times.append(float(t))
        h.held.append(now)
        h.changed.append(status == 200 and before is not None and now != before)
        h.statuses.append(int(status))
    return dict(out)


def fresh_seconds(events: np.ndarray, fetch_times: np.ndarray, held: np.ndarray,
                  start: float, end: float) -> float:
    """Seconds of [start, end] during which the held version equals the live one.

    ``events``: sorted change times (the live version at ``t`` is the number of events at or
    before ``t``); ``fetch_times`` / ``held``: the crawler's fetches and the version held after
    each (held nothing before the first).
    """
    if end <= start:
        return 0.0
    inside_e = events[(events > start) & (events < end)]
    inside_f = fetch_times[(fetch_times > start) & (fetch_times < end)]
    cuts = np.unique(np.concatenate(([start, end], inside_e, inside_f)))
    mid = (cuts[:-1] + cuts[1:]) / 2
    live = np.searchsorted(events, mid, side="right")
    k = np.searchsorted(fetch_times, mid, side="right") - 1
    have = np.where(k >= 0, held[np.maximum(k, 0)] if len(held) else -1, -1)
    return float(np.sum(np.diff(cuts)[have == live]))
