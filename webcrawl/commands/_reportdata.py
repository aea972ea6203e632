"""The figures of ``scrapy report``, apart from where they come from and how they are drawn.

:class:`CycleFigures` is what the text tables and the HTML page take for one cycle. Its optional
fields are ``None`` when the crawl did not record them; the report then says "not recorded" and
never makes a number up. :func:`figures_from_ledger` fills it from one cycle's ledger hash
(``cycle:<id>`` in the crawl's slot, :mod:`webcrawl.state.ledger`), reading these fields:

| ledger field | :class:`CycleFigures` field | meaning |
| --- | --- | --- |
| ``started``, ``ends`` | ``started``, ``ends`` | the cycle's start and planned end (Unix seconds) |
| ``budget`` | ``budget`` | what the cycle was allowed to spend (site unit) |
| ``booked`` | ``spent`` | what its fetches cost (site unit) |
| ``idle`` | ``idle`` | budget left unused while nothing was due (site unit) |
| ``known`` | ``coverage_known`` | URLs the crawl knows at the cycle's close, fetched or not |
| ``fetched`` | ``coverage_fetched`` | of those, fetched at least once |
| ``waiting`` | ``coverage_waiting`` | never fetched, queued in a frontier at the close |
| ``never_fetched`` | ``coverage_never_fetched`` | never fetched (``known - fetched`` if absent) |
| ``fetches:<t>``, ``cost:<t>``, ``new:<t>``, ``changed:<t>``, ``unchanged:<t>`` | ``rows`` | page type t |

A crawl records ``known = fetched + waiting`` at each close; pages never fetched and not waiting
(a ledger that records ``never_fetched`` apart) were evicted from a full frontier. Page type ``-`` is
:data:`NO_TYPE`.

Cycles past the ledger's retention (``WEBCRAWL_CYCLE_RETENTION``) are rolled up into one summary
(``cycles:rolled``): :func:`rolled_from_ledger` reads it as :class:`RolledUp`, whose figures carry
the same amounts (budget, spent, idle, the rows by page type) added over those cycles, and no
coverage or freshness (those were each cycle's own, at its close).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webcrawl.state.freshness import TOTAL, Freshness
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.ledger import OUTCOMES, ROLLUP_FIELDS, LedgerStore

__all__ = ["NO_TYPE", "TOTAL_ROW", "CycleFigures", "RolledUp", "Row", "figures_from_ledger", "ledger_for",
           "rolled_from_ledger", "rows_from", "with_freshness", "with_total"]

NO_TYPE = "(no type)"  #: the one name of fetches without a page type (robots.txt, sitemaps, ...)
TOTAL_ROW = "total"
_FIELDS = ("fetches", "cost", *OUTCOMES)
_LEDGER_TYPE_NONE = "-"  # how the ledger spells "no page type" in its field names


@dataclass
class Row:
    """One page type's (or the total's) figures over a cycle or several."""

    fetches: float = 0.0
    cost: float = 0.0
    new: float = 0.0
    changed: float = 0.0
    unchanged: float = 0.0
    freshness: float | None = None
    pages: int = 0  #: pages the freshness estimate was taken over

    @property
    def no_change(self) -> float:
        """Fetches that found neither a new page nor a changed record."""
        return max(self.fetches - self.new - self.changed, 0.0)

    @property
    def no_change_share(self) -> float | None:
        """``no_change / fetches``; None without fetches."""
        return self.no_change / self.fetches if self.fetches else None

    @property
    def cost_per_change(self) -> float | None:
        return self.cost / self.changed if self.changed else None

    def add(self, other: Row) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class CycleFigures:
    """One cycle's figures; ``None`` in an optional field means "not recorded"."""

    id: int
    started: float
    rows: dict[str, Row] = field(default_factory=dict)  #: page type -> row, ``total`` last
    ends: float | None = None
    budget: float | None = None
    spent: float | None = None
    idle: float | None = None
    coverage_known: int | None = None
    coverage_fetched: int | None = None
    coverage_waiting: int | None = None
    coverage_never_fetched: int | None = None
    freshness_at: float | None = None  #: when the freshness figures were estimated

    @property
    def total(self) -> Row:
        return self.rows.get(TOTAL_ROW) or Row()

    @property
    def idle_share(self) -> float | None:
        """Idle budget as a share of the budget."""
        if self.idle is None or not self.budget:
            return None
        return min(max(self.idle / self.budget, 0.0), 1.0)

    @property
    def never_fetched(self) -> int | None:
        if self.coverage_never_fetched is not None:
            return self.coverage_never_fetched
        if self.coverage_known is None or self.coverage_fetched is None:
            return None
        return max(self.coverage_known - self.coverage_fetched, 0)

    @property
    def has_coverage(self) -> bool:
        return self.coverage_known is not None and self.coverage_fetched is not None


def ledger_for(client: Any, crawl: str) -> LedgerStore:
    """The cycle ledger of ``crawl`` (the report and the demo read it through this one place)."""
    return LedgerStore(client, CrawlLayout(crawl))


def _type_name(ledger_kind: str) -> str:
    return NO_TYPE if ledger_kind == _LEDGER_TYPE_NONE else ledger_kind


def rows_from(numbers: dict[str, float]) -> dict[str, Row]:
    """Ledger fields ``fetches:<page type>`` etc. as rows by page type (sorted), ``total`` last."""
    rows: dict[str, Row] = {}
    for key, value in numbers.items():
        name, _, kind = key.partition(":")
        if name in _FIELDS and kind:
            row = rows.setdefault(_type_name(kind), Row())
            setattr(row, name, getattr(row, name) + value)
    return with_total(rows)


def with_total(rows: dict[str, Row]) -> dict[str, Row]:
    """``rows`` sorted by page type (no type first) with a fresh ``total`` row summing them last."""
    body = {k: v for k, v in rows.items() if k != TOTAL_ROW}
    total = Row()
    for row in body.values():
        total.add(row)
    ordered = dict(sorted(body.items(), key=lambda kv: (kv[0] != NO_TYPE, kv[0])))
    return {**ordered, TOTAL_ROW: total}


def with_freshness(rows: dict[str, Row], freshness: Freshness | None) -> dict[str, Row]:
    """``rows`` with each page type's estimated freshness; page types known only from earlier
    cycles get a row of their own (no fetches) so that their freshness shows."""
    if freshness is None:
        return rows
    for kind, mean in freshness.mean.items():
        name = TOTAL_ROW if kind == TOTAL else _type_name(kind)
        row = rows.get(name)
        if row is None:
            row = rows[name] = Row()
        row.freshness, row.pages = mean, freshness.pages.get(kind, 0)
    total = rows.pop(TOTAL_ROW, Row())
    ordered = dict(sorted(rows.items(), key=lambda kv: (kv[0] != NO_TYPE, kv[0])))
    return {**ordered, TOTAL_ROW: total}


def _optional(numbers: dict[str, float], name: str) -> float | None:
    value = numbers.get(name)
    return None if value is None else float(value)


def _count(numbers: dict[str, float], name: str) -> int | None:
    value = numbers.get(name)
    return None if value is None else int(value)


def figures_from_ledger(cycle_id: int, numbers: dict[str, float],
                        freshness: Freshness | None) -> CycleFigures:
    """A cycle's figures from its ledger hash (see the module docstring for the fields read)
    and its freshness estimate (kept at its close, or estimated now for a running cycle)."""
    return CycleFigures(
        id=cycle_id,
        started=numbers.get("started", 0.0),
        rows=with_freshness(rows_from(numbers), freshness),
        ends=_optional(numbers, "ends"),
        budget=_optional(numbers, "budget"),
        spent=_optional(numbers, "booked"),
        idle=_optional(numbers, "idle"),
        coverage_known=_count(numbers, "known"),
        coverage_fetched=_count(numbers, "fetched"),
        coverage_waiting=_count(numbers, "waiting"),
        coverage_never_fetched=_count(numbers, "never_fetched"),
        freshness_at=freshness.at if freshness is not None and freshness.pages else None,
    )


@dataclass
class RolledUp:
    """The cycles rolled up past the ledger's retention: how many, the first and last of them,
    and their figures added up (``figures.id`` is the last one's)."""

    count: int
    first: int
    last: int
    figures: CycleFigures


def rolled_from_ledger(numbers: dict[str, float]) -> RolledUp | None:
    """The ledger's rolled-up summary (:meth:`LedgerStore.rolled_up`), ``None`` when no cycle was
    rolled up."""
    count = int(numbers.get("cycles", 0))
    if count <= 0:
        return None
    amounts = {k: v for k, v in numbers.items() if k not in ROLLUP_FIELDS}
    figures = figures_from_ledger(int(numbers.get("last", 0)), amounts, None)
    figures.started = numbers.get("started", 0.0)
    figures.ends = _optional(numbers, "ends")
    return RolledUp(count, int(numbers.get("first", 0)), int(numbers.get("last", 0)), figures)
