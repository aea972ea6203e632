"""Per-page sufficient statistics of the change history, for one page or for many.

What the estimator needs from a page's visits (see estimate.py), kept in constant space:

- ``unchanged_seconds``: the sum of the intervals after which the record had *not* changed. The
  censored likelihood of those visits is ``exp(-rate * sum)``, so the sum is all it needs.
- changed intervals (the record changed, we do not know how often): their likelihood term
  ``ln(1 - exp(-rate * t))`` depends on each ``t``, so no single sum suffices. We keep a histogram
  over interval bins spaced by a factor sqrt(2) (1 s, 1.4 s, 2 s, ... about 8 years;
  :data:`NBINS` bins), each with the count and the sum of its intervals, and evaluate the term
  at the bin mean (a page uses a few bins, stored sparsely by :meth:`PageHistory.to_dict`). A crawler's
  intervals cluster (the planner revisits a page at a steady pace), so most pages use one or two
  bins and the bin mean is then exact; across a factor-sqrt(2) bin the term is so smooth that
  the estimate moves by under 0.5% even for intervals spread evenly over many bins
  (tests/test_revisit_history.py measures it).
- exact observations: a changed visit on a host whose Last-Modified or sitemap lastmod proved
  reliable tells the time of the *last* change. Its likelihood is ``rate * exp(-rate * age)``
  (a change at that instant, none since; what happened before is irrelevant), i.e. one event
  over ``age`` seconds of exposure: ``exact_changes`` and ``exact_seconds`` are sufficient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: Number of interval bins; bin b holds intervals in [2**(b/2), 2**((b+1)/2)) seconds (bin 0 also
#: holds shorter ones; the last bin, from about 8 years, longer ones). Fine bins at the short end
#: matter: a crawl that revisits every few seconds must not lump 2 s and 60 s intervals together.
NBINS = 56
BIN_BASE_SECONDS = 1.0
BINS_PER_DOUBLING = 2


def interval_bin(interval: ArrayLike) -> NDArray[np.intp]:
    """The histogram bin of each interval (seconds)."""
    t = np.maximum(np.asarray(interval, dtype=float), BIN_BASE_SECONDS)
    return np.clip(np.floor(BINS_PER_DOUBLING * np.log2(t / BIN_BASE_SECONDS)), 0, NBINS - 1).astype(np.intp)


def _check(interval: float, change_age: float | None) -> None:
    if not interval >= 0 or not np.isfinite(interval):
        raise ValueError(f"interval={interval!r}: expected finite seconds >= 0 since the last visit")
    if change_age is not None and not change_age >= 0:
        raise ValueError(f"change_age={change_age!r}: expected seconds >= 0 since the last change")


@dataclass(slots=True)
class PageHistory:
    """Sufficient statistics of one page's visits (all times in seconds)."""

    visits: int = 0  #: observed intervals (a first fetch is not one: it has no previous copy)
    changes: int = 0  #: intervals after which the record had changed
    seconds: float = 0.0  #: total observed seconds
    unchanged_seconds: float = 0.0  #: sum of the intervals that ended unchanged
    exact_changes: int = 0  #: changed intervals whose last change time was known
    exact_seconds: float = 0.0  #: sum of (visit time - last change time) over those
    changed_counts: list[int] = field(default_factory=lambda: [0] * NBINS)
    changed_seconds: list[float] = field(default_factory=lambda: [0.0] * NBINS)

    def observe(self, interval: float, changed: bool, change_age: float | None = None) -> None:
        """Record a visit ``interval`` seconds after the previous one.

        ``changed``: the extracted record differs from the previous copy's. ``change_age``: seconds
        between the last change and this visit, from a Last-Modified or lastmod the caller trusts
        for this host; ignored when the page did not change or when it exceeds ``interval``
        (then the date is inconsistent with our own observation and the visit stays censored).
        """
        _check(interval, change_age)
        self.visits += 1
        self.seconds += interval
        if not changed:
            self.unchanged_seconds += interval
            return
        self.changes += 1
        if change_age is not None and change_age <= interval:
            self.exact_changes += 1
            self.exact_seconds += change_age
        else:
            b = int(interval_bin(interval))
            self.changed_counts[b] += 1
            self.changed_seconds[b] += interval

    @property
    def naive_rate(self) -> float:
        """Changes seen / seconds observed: biased low when visits are sparse (see estimate.py)."""
        return self.changes / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (sparse bins), the inverse of :meth:`from_dict`."""
        out: dict[str, Any] = {
            k: getattr(self, k)
            for k in ("visits", "changes", "seconds", "unchanged_seconds", "exact_changes", "exact_seconds")
        }
        out["bins"] = {
            str(b): [c, s] for b, (c, s) in enumerate(zip(self.changed_counts, self.changed_seconds)) if c
        }
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageHistory:
        page = cls(
            visits=int(data["visits"]), changes=int(data["changes"]), seconds=float(data["seconds"]),
            unchanged_seconds=float(data["unchanged_seconds"]),
            exact_changes=int(data["exact_changes"]), exact_seconds=float(data["exact_seconds"]),
        )
        for b, (c, s) in data.get("bins", {}).items():
            page.changed_counts[int(b)] = int(c)
            page.changed_seconds[int(b)] = float(s)
        return page


_COLUMNS = ("visits", "changes", "seconds", "unchanged_seconds", "exact_changes", "exact_seconds",
            "changed_counts", "changed_seconds")


class HistoryTable:
    """The same statistics for ``n`` pages as numpy columns, updated in bulk.

    Used where many pages are estimated at once (the planner's inputs, the simulator). Row ``i``
    obeys exactly the rules of :class:`PageHistory`.
    """

    def __init__(self, n: int) -> None:
        self.visits = np.zeros(n, dtype=np.int64)
        self.changes = np.zeros(n, dtype=np.int64)
        self.seconds = np.zeros(n)
        self.unchanged_seconds = np.zeros(n)
        self.exact_changes = np.zeros(n, dtype=np.int64)
        self.exact_seconds = np.zeros(n)
        self.changed_counts = np.zeros((n, NBINS), dtype=np.int64)
        self.changed_seconds = np.zeros((n, NBINS))

    def __len__(self) -> int:
        return len(self.visits)

    @classmethod
    def from_pages(cls, pages: list[PageHistory]) -> HistoryTable:
        table = cls(len(pages))
        for i, p in enumerate(pages):
            table.visits[i], table.changes[i], table.seconds[i] = p.visits, p.changes, p.seconds
            table.unchanged_seconds[i] = p.unchanged_seconds
            table.exact_changes[i], table.exact_seconds[i] = p.exact_changes, p.exact_seconds
            table.changed_counts[i], table.changed_seconds[i] = p.changed_counts, p.changed_seconds
        return table

    def observe(
        self, index: ArrayLike, interval: ArrayLike, changed: ArrayLike, change_age: ArrayLike | None = None
    ) -> None:
        """Record one visit per entry of ``index`` (indices must be distinct within one call).

        ``change_age`` is NaN where no trusted change time is known.
        """
        idx = np.asarray(index, dtype=np.intp)
        t = np.broadcast_to(np.asarray(interval, dtype=float), idx.shape)
        ch = np.broadcast_to(np.asarray(changed, dtype=bool), idx.shape)
        if np.any(~np.isfinite(t) | (t < 0)):
            raise ValueError("interval: expected finite seconds >= 0 since the last visit")
        age = np.full(idx.shape, np.nan) if change_age is None else np.broadcast_to(
            np.asarray(change_age, dtype=float), idx.shape)
        self.visits[idx] += 1
        self.seconds[idx] += t
        self.changes[idx] += ch
        self.unchanged_seconds[idx] += np.where(ch, 0.0, t)
        exact = ch & (age >= 0) & (age <= t)  # NaN compares False
        self.exact_changes[idx] += exact
        self.exact_seconds[idx] += np.where(exact, age, 0.0)
        cens = ch & ~exact
        b = interval_bin(t[cens])
        np.add.at(self.changed_counts, (idx[cens], b), 1)
        np.add.at(self.changed_seconds, (idx[cens], b), t[cens])

    def take(self, index: ArrayLike) -> HistoryTable:
        """A copy of the rows ``index`` (to estimate only the pages a cycle visited)."""
        idx = np.asarray(index, dtype=np.intp)
        out = HistoryTable(0)
        for name in _COLUMNS:
            setattr(out, name, getattr(self, name)[idx])
        return out

    def page(self, i: int) -> PageHistory:
        """Row ``i`` as a :class:`PageHistory`."""
        return PageHistory(
            visits=int(self.visits[i]), changes=int(self.changes[i]), seconds=float(self.seconds[i]),
            unchanged_seconds=float(self.unchanged_seconds[i]),
            exact_changes=int(self.exact_changes[i]), exact_seconds=float(self.exact_seconds[i]),
            changed_counts=[int(c) for c in self.changed_counts[i]],
            changed_seconds=[float(s) for s in self.changed_seconds[i]],
        )
