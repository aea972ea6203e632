"""The spend controller: a process pops only the work the crawl can pay for, at the budget rate.

The crawl's spend bucket (:mod:`webcrawl.state.bucket`) refills at the budget rate (a cycle's
budget over its length; a one-run cycle gets its whole budget at once). Each process keeps a
small wallet of tokens taken from it, topped up every tick to about half a second of spending,
so a pop needs no extra round trip. Popping work charges its expected cost to the wallet
(``meta["webcrawl_charged"]``); when the fetch lands, the cost middleware reconciles the charge
with what it really cost (:meth:`SpendController.reconcile`, batched); a request that never
reached the network gets its charge back. Spending is therefore smooth, never above the rate by
more than what is in flight, and never refused while tokens and due work exist.

Which work first, when both are ready: queued requests (new URLs: discovery) or due revisits?
:meth:`SpendController.order` keeps discovery at its share of the recent spend: the share the
allocator published (up to 80% while many new URLs wait: a page never fetched is all stale), at
least the site's ``reserve.discovery``. The pop falls back to the other kind whenever the
preferred one has nothing ready, so no budget waits.

Without a budget (a spider that is not a site file, or ``WEBCRAWL_BUDGET_ENABLED = False``) the
wallet is unlimited.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any


from webcrawl.state.errors import StateError
from webcrawl.state.scripts import new_op_id
from webcrawl import meta as M

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from scrapy import Request

    from webcrawl.state.batch import WriteBatch
    from webcrawl.state.bucket import SpendBucket
    from webcrawl.state.queue import PoppedItem

__all__ = ["SpendController"]

logger = logging.getLogger(__name__)

WALLET_SECONDS = 0.5
#: The wallet also holds this long of the process's own spending (measured, see measure_demand),
DEMAND_SECONDS = 1.5
#: but never more than this long of the budget rate (a continuous crawl): money in a wallet is
#: money the other processes cannot spend, and a burst when work comes back.
WALLET_MAX_SECONDS = 1.0
DEMAND_MIN_SECONDS = 0.2
DEMAND_DECAY_SECONDS = 5.0
PUBLISHED_SECONDS = 2.0
#: Tokens piled up in the bucket (seconds of budget) that mean money sits idle: revisits due soon
#: may then come out early (see :meth:`SpendController.ahead`).
IDLE_SECONDS = 1.0
IDLE_CHECK_SECONDS = 0.5
LOOKAHEAD_MAX_SECONDS = 3600.0  #: early revisits come from at most a cycle ahead, and this
DECAY_SECONDS = 30.0


class SpendController:
    """The wallet of one process (see the module docstring)."""

    def __init__(self, bucket: SpendBucket | None, batch: WriteBatch, *, default_cost: float,
                 discovery_share: float = 0.1, read_published: Callable[[], dict[str, float]] | None = None,
                 close: Callable[[str], Any] | None = None, continuous: bool = False,
                 cycle: Callable[[], int | None] | None = None) -> None:
        self.bucket = bucket
        self.batch = batch
        self.default_cost = default_cost
        self.discovery_share = discovery_share
        self.read_published = read_published
        self.close_spider = close
        self.continuous = continuous
        self.cycle = cycle or (lambda: 0)
        self.wallet = 0.0 if bucket is not None else math.inf
        self.rate = 0.0
        self.typical_cost = default_cost
        self.known = 0.0
        self.backlog = 0.0
        self.target_share: float | None = None
        self._spent = {"n": 0.0, "d": 0.0}
        self._decayed_at = time.monotonic()
        self._published_at = -math.inf
        self._closing = False
        self.exhausted = False
        self.idle = False  # the bucket held more than IDLE_SECONDS of budget at the last look
        self._idle_checked = -math.inf
        self.lookahead = 0.0  # how far ahead early revisits may come from, when money is idle
        self.demand = 0.0  # this process's recent spending per second (measure_demand)
        self._charged = 0.0
        self._demand_at = time.monotonic()
        self.dry = False  # the bucket was empty at the last take

    @classmethod
    def from_runtime(cls, runtime: Any) -> SpendController:
        settings = runtime.crawler.settings
        site = runtime.site
        enabled = site is not None and settings.getbool("WEBCRAWL_BUDGET_ENABLED", True)
        default = runtime.default_cost()

        def close(reason: str) -> None:
            from scrapy.utils.defer import deferred_from_coro

            engine = runtime.crawler.engine
            if engine is not None:
                deferred_from_coro(engine.close_spider_async(reason=reason))

        controller = cls(runtime.bucket if enabled else None, runtime.batch, default_cost=default,
                         discovery_share=site.budget.reserves.discovery if site is not None else 0.1,
                         read_published=runtime.published, close=close,
                         continuous=runtime.continuous(), cycle=lambda: runtime.cycle)
        cycle_seconds = settings.getfloat("WEBCRAWL_CYCLE_SECONDS", 0.0) or (
            site.budget.cycle_seconds if site is not None else 0.0)
        controller.lookahead = min(cycle_seconds, LOOKAHEAD_MAX_SECONDS)
        return controller

    @property
    def enabled(self) -> bool:
        return self.bucket is not None

    def open(self) -> None:
        self.tick()

    # -- popping ---------------------------------------------------------------------------------

    def poppable(self) -> int:
        """How many items the wallet can pay for now (at their typical cost)."""
        if not self.enabled:
            return 1 << 20
        if self.wallet < self.typical_cost * 0.5:
            return 0
        return max(1, int(self.wallet / self.typical_cost))

    def ahead(self) -> float:
        """Seconds ahead from which due revisits may be popped now: while budget piles up in the
        bucket (nothing due on hosts whose turn came: a wave of due times has passed, or a host
        is held back), the revisits due soonest come out early, so spending stays smooth; 0
        otherwise. Continuous crawls only (a one-run cycle's window is pulled forward whole)."""
        return self.lookahead if self.idle and self.enabled else 0.0

    def order(self) -> str:
        """"nd" (new URLs first) or "dn" (due revisits first): see the module docstring."""
        spent = self._spent["n"] + self._spent["d"]
        target = self.target_share if self.target_share is not None else self.discovery_share
        if spent <= 0:
            return "nd"
        return "nd" if self._spent["n"] / spent < target else "dn"

    def charge(self, request: Request, item: PoppedItem) -> None:
        if item.kind == "d":
            stats = request.meta.get(M.PAGE_STATS) or {}
            cost = stats.get("mean_cost") or self.typical_cost
        else:
            cost = request.meta.get(M.EXPECTED_COST) or self.typical_cost
        cost = float(cost)
        self._charged += cost
        self._decay()
        self._spent[item.kind] += cost
        if self.enabled:
            self.wallet -= cost
            request.meta[M.CHARGED] = cost

    def reconcile(self, request: Request, actual: float) -> None:
        """A fetch of ``request`` cost ``actual``: settle its charge with the bucket (a fetch that
        was never charged, such as robots.txt, is charged now)."""
        if not self.enabled:
            return
        charged = float(request.meta.get(M.CHARGED) or 0.0)
        request.meta[M.CHARGED] = 0.0
        if charged != actual:
            self.batch.bucket(charged - actual)

    def finished(self, request: Request) -> None:
        """The engine is done with ``request``: a charge never reconciled (it never reached the
        network) goes back."""
        charged = float(request.meta.get(M.CHARGED) or 0.0)
        if charged and self.enabled:
            request.meta[M.CHARGED] = 0.0
            self.wallet += charged

    # -- upkeep ----------------------------------------------------------------------------------

    def _decay(self) -> None:
        now = time.monotonic()
        factor = math.exp(-(now - self._decayed_at) / DECAY_SECONDS)
        self._decayed_at = now
        for k in self._spent:
            self._spent[k] *= factor

    def tick(self) -> None:
        """Top the wallet up (one round trip) and read what the allocator published."""
        if self.read_published is not None and self.wants_published():
            self.published(self.read_published())
        if not self.enabled or self.bucket is None:
            return
        want = self.top_up_wanted()
        if want is not None:
            self.took(*self.bucket.take(want))
        elif self.wallet > 2 * self._target():
            target = self._target()
            self.bucket.give(self.wallet - target)
            self.wallet = target

    # -- upkeep carried by the scheduler's round trips (same decisions as :meth:`tick`) ---------

    def wants_published(self) -> bool:
        return time.monotonic() - self._published_at > PUBLISHED_SECONDS

    def published(self, published: dict[str, float]) -> None:
        """What the allocator published (see :meth:`tick`)."""
        self._published_at = time.monotonic()
        self.typical_cost = published.get("typical_cost") or self.typical_cost or self.default_cost
        self.known = published.get("known", 0.0)
        self.backlog = published.get("backlog", 0.0)
        share = published.get("discovery_share")
        # The allocator's share while new URLs waited; before any allocation, new URLs first.
        self.target_share = max(share, self.discovery_share) if share is not None else 1.0

    def _target(self) -> float:
        # Half a second of the budget rate, and of what this process spends (a one-run cycle has
        # no rate: its whole budget is in the bucket), so a busy process tops up once in a while
        # rather than once a pop.
        demand = self.demand * DEMAND_SECONDS
        if self.rate > 0:
            demand = min(demand, self.rate * WALLET_MAX_SECONDS)
        return max(self.rate * WALLET_SECONDS, 2 * self.typical_cost, demand)

    def top_up_wanted(self, *, low: float = 1.0) -> float | None:
        """Tokens to take from the bucket now (0: only a look at it, to tell whether money piles
        up), or None when no take is due: the wallet holds at least ``low`` x its target and
        the last look is recent."""
        if not self.enabled:
            return None
        target = self._target()
        if self.wallet < target * low:
            return target - self.wallet
        if time.monotonic() - self._idle_checked > IDLE_CHECK_SECONDS and (
                self.continuous or low >= 1.0):
            return 0.0
        return None

    def take_call(self, want: float, pipe: Any) -> None:
        """Queue the take of ``want`` tokens on ``pipe``; :meth:`took` gets its answer."""
        bucket = self.bucket
        assert bucket is not None
        layout = bucket.layout
        bucket.scripts.call_keys("bucket", [layout.bucket, layout.op(new_op_id())],
                                 ["take", repr(float(want)), bucket.scripts.op_ttl], client=pipe)

    def took_reply(self, reply: list[Any]) -> None:
        """:meth:`took` with the bucket script's raw answer to a take."""
        granted, left, rate = reply
        self.took(float(granted), float(left), float(rate))

    def took(self, granted: float, left: float, rate: float) -> None:
        """A take's answer: ``granted`` tokens, ``left`` in the bucket, its refill ``rate``."""
        self.rate = float(rate)
        self.wallet += float(granted)
        self._idle_checked = time.monotonic()
        # Idle money: what piles up in the bucket, and what this wallet holds beyond its need.
        spare = float(left) + max(self.wallet - self._target(), 0.0)
        self.idle = self.continuous and self.rate > 0 and spare > self.rate * IDLE_SECONDS
        if (not self.continuous and self.cycle() is not None and self.rate == 0 and left <= 0
                and self.wallet < self.typical_cost * 0.5):
            self.exhausted = True
        self.dry = left <= 0

    def measure_demand(self) -> None:
        """Called every scheduler tick: this process's spending per second, rising at once and
        decaying over :data:`DEMAND_DECAY_SECONDS` (it sizes the wallet)."""
        now = time.monotonic()
        elapsed = now - self._demand_at
        if elapsed < DEMAND_MIN_SECONDS:
            return
        seen = self._charged / elapsed
        self._charged, self._demand_at = 0.0, now
        factor = math.exp(-elapsed / DEMAND_DECAY_SECONDS)
        self.demand = max(seen, self.demand * factor)

    def budget_spent(self, pending: bool) -> None:
        """One-run mode: the budget is spent and work is still waiting: end the run (what is
        queued or due waits for the next run)."""
        if self.exhausted and pending and not self._closing and self.close_spider is not None:
            self._closing = True
            logger.info("The cycle's budget is spent: closing; what is queued or due waits for "
                        "the next run")
            self.close_spider("cycle_budget_spent")

    def close(self, unstarted: Iterable[PoppedItem], unfinished: Iterable[Request]) -> None:
        """Give the wallet and unreconciled charges back to the bucket."""
        if not self.enabled or self.bucket is None:
            return
        back = self.wallet
        for request in unfinished:
            back += float(request.meta.get(M.CHARGED) or 0.0)
        self.wallet = 0.0
        try:
            self.bucket.give(back)
        except StateError:
            pass
