"""The spend controller (webcrawl.spend.SpendController) over a real spend bucket in redis-server:
a process's wallet of tokens, charges and their reconciliation with what fetches cost, the order
of kinds (new URLs or due revisits) by the discovery share, and the end of a one-run cycle whose
budget is spent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from scrapy import Request

from webcrawl import meta as M
from webcrawl.spend import WALLET_MAX_SECONDS, SpendController
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.bucket import SpendBucket
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import CrawlQueue, PoppedItem
from webcrawl.state.scripts import ScriptSet


class Parts:
    def __init__(self, client: Any) -> None:
        layout = CrawlLayout("spend")
        scripts = ScriptSet(client)
        self.bucket = SpendBucket(scripts, layout)
        queue = CrawlQueue(client, scripts, layout, cap=0, default_delay=0.0, lease_seconds=30)
        self.batch = WriteBatch(client, scripts, layout, queue, LandSettings(0.0), bloom_slices=7)
        self.published: dict[str, float] = {}
        self.closed: list[str] = []

    def controller(self, *, continuous: bool = False, cycle: int | None = 1,
                   discovery_share: float = 0.1) -> SpendController:
        return SpendController(self.bucket, self.batch, default_cost=1.0,
                               discovery_share=discovery_share, read_published=lambda: self.published,
                               close=self.closed.append, continuous=continuous, cycle=lambda: cycle)


@pytest.fixture
def parts(redis_url: str) -> Iterator[Parts]:
    client, _, _ = connect(redis_url)
    yield Parts(client)
    client.close()


def popped(kind: str) -> PoppedItem:
    return PoppedItem("me:1", kind, "x", None, None, 0.0, "a.test", 0)


def new_request(cost: float = 1.0) -> Request:
    return Request("http://a.test/new", meta={M.EXPECTED_COST: cost})


def revisit(mean_cost: float | None) -> Request:
    return Request("http://a.test/known", meta={M.PAGE_STATS: {"mean_cost": mean_cost}})


def test_the_wallet_pays_for_pops_and_is_topped_up_from_the_bucket(parts: Parts) -> None:
    parts.bucket.configure(0.0, 10.0, 1, tokens=10.0)
    spend = parts.controller()
    spend.open()
    assert spend.wallet == 2.0 and parts.bucket.read().tokens == 8.0  # two typical fetches
    assert spend.poppable() == 2
    first, second = new_request(), revisit(mean_cost=0.75)
    spend.charge(first, popped("n"))
    spend.charge(second, popped("d"))  # a known page costs what its own fetches cost
    assert (first.meta[M.CHARGED], second.meta[M.CHARGED]) == (1.0, 0.75)
    assert spend.wallet == pytest.approx(0.25) and spend.poppable() == 0
    spend.tick()
    assert spend.wallet == 2.0 and parts.bucket.read().tokens == pytest.approx(6.25)


def test_charges_are_reconciled_with_what_fetches_cost(parts: Parts) -> None:
    parts.bucket.configure(0.0, 10.0, 1, tokens=10.0)
    spend = parts.controller()
    spend.open()
    dear, cheap, robots = new_request(), new_request(), Request("http://a.test/robots.txt")
    spend.charge(dear, popped("n"))
    spend.charge(cheap, popped("n"))
    spend.reconcile(dear, 3.0)  # cost 2 more than charged
    spend.reconcile(cheap, 0.5)  # half back
    spend.reconcile(robots, 1.0)  # never charged (not popped): charged now
    parts.batch.flush()
    assert parts.bucket.read().tokens == pytest.approx(8.0 - 2.0 + 0.5 - 1.0)
    assert dear.meta[M.CHARGED] == cheap.meta[M.CHARGED] == 0.0
    spend.finished(dear)  # settled already: nothing comes back
    assert spend.wallet == 0.0


def test_a_request_that_never_reached_the_network_gets_its_charge_back(parts: Parts) -> None:
    parts.bucket.configure(0.0, 10.0, 1, tokens=10.0)
    spend = parts.controller()
    spend.open()
    dropped, unfinished = new_request(), new_request()
    spend.charge(dropped, popped("n"))
    spend.charge(unfinished, popped("n"))
    spend.finished(dropped)  # filtered before the downloader, say
    assert spend.wallet == 1.0 and dropped.meta[M.CHARGED] == 0.0
    spend.close([], [unfinished])  # the wallet and the unsettled charge go back
    assert spend.wallet == 0.0 and parts.bucket.read().tokens == 10.0


def test_a_wallet_grown_too_large_gives_the_surplus_back(parts: Parts) -> None:
    parts.bucket.configure(0.0, 10.0, 1, tokens=10.0)
    spend = parts.controller()
    spend.open()
    spend.wallet += 5.0  # charges came back
    spend.tick()
    assert spend.wallet == 2.0 and parts.bucket.read().tokens == 13.0


def test_new_urls_keep_their_share_of_the_spend(parts: Parts) -> None:
    parts.bucket.configure(0.0, 100.0, 1, tokens=100.0)
    first = parts.controller(discovery_share=0.25)
    first.open()
    assert first.target_share == 1.0, "before any allocation, new URLs first"
    parts.published = {"discovery_share": 0.05}  # what the allocator published...
    low = parts.controller(discovery_share=0.25)
    low.open()
    assert low.target_share == 0.25, "...never below the site's own share"
    parts.published = {"discovery_share": 0.5}
    spend = parts.controller(discovery_share=0.25)
    spend.open()
    assert spend.target_share == 0.5 and spend.order() == "nd"
    spend.charge(new_request(), popped("n"))
    for _ in range(3):
        spend.charge(revisit(1.0), popped("d"))
    assert spend.order() == "nd"  # 25% of the spend went to new URLs, under 50%
    spend.charge(new_request(2.5), popped("n"))
    # Over 50% (not exactly at it: older charges decay with time): revisits first, new URLs when
    # none is ready.
    assert spend.order() == "dn"


def test_a_one_run_cycle_ends_when_its_budget_is_spent(parts: Parts) -> None:
    parts.bucket.configure(0.0, 3.0, 1, tokens=3.0)
    spend = parts.controller()
    spend.open()
    for _ in range(2):
        spend.charge(new_request(), popped("n"))
    spend.tick()  # the last token
    assert spend.wallet == 1.0 and not spend.exhausted
    spend.charge(new_request(), popped("n"))
    spend.tick()
    assert spend.exhausted and spend.poppable() == 0
    spend.budget_spent(pending=False)
    assert parts.closed == [], "nothing waits: the run ends as it would anyway"
    spend.budget_spent(pending=True)
    spend.budget_spent(pending=True)
    assert parts.closed == ["cycle_budget_spent"]


@pytest.mark.parametrize("mode", ["continuous", "no cycle"])
def test_only_a_one_run_cycle_ends_on_an_empty_bucket(parts: Parts, mode: str) -> None:
    parts.bucket.configure(0.0, 1.0, 1, tokens=1.0)
    spend = parts.controller(continuous=mode == "continuous", cycle=None if mode == "no cycle" else 1)
    spend.open()
    spend.charge(new_request(), popped("n"))
    spend.tick()
    spend.budget_spent(pending=True)
    assert not spend.exhausted and parts.closed == []


def test_a_continuous_wallet_holds_half_a_second_of_the_rate(parts: Parts) -> None:
    parts.bucket.configure(40.0, 100.0, 1, tokens=100.0)
    spend = parts.controller(continuous=True)
    spend.open()  # learns the rate from the first grant
    spend.tick()
    assert spend.rate == 40.0 and spend.wallet == pytest.approx(20.0)


def test_a_burst_of_pops_does_not_draw_the_bucket_into_one_wallet(parts: Parts) -> None:
    """A pop of several items at once measures as a high spending rate; the wallet still holds
    at most WALLET_MAX_SECONDS of the budget rate, so the bucket keeps the rest for every
    process and for telling that money piles up."""
    parts.bucket.configure(4.0, 12.0, 1, tokens=12.0)
    spend = parts.controller(continuous=True)
    spend.open()
    for _ in range(4):
        spend.charge(revisit(1.0), popped("d"))
    spend._demand_at -= 0.25  # those four within a quarter of a second: 16 credits a second
    spend.measure_demand()
    assert spend.demand > 4 * 4.0 * 0.9
    spend.tick()
    assert spend.wallet <= 4.0 * WALLET_MAX_SECONDS + 1e-9
    spent = 4.0
    assert parts.bucket.read().granted - spent <= 4.0 * WALLET_MAX_SECONDS + 1e-6


def test_money_idle_in_a_wallet_counts_as_idle(parts: Parts) -> None:
    parts.bucket.configure(4.0, 12.0, 1, tokens=0.0)  # the bucket is dry
    spend = parts.controller(continuous=True)
    spend.lookahead = 30.0
    spend.open()
    spend.wallet = 2.0 + 4.0 * 1.5  # its need, and a second and a half of the rate besides
    spend.took(0.0, 0.0, 4.0)
    assert spend.idle and spend.ahead() == 30.0
    spend.wallet = 2.0
    spend.took(0.0, 0.0, 4.0)
    assert not spend.idle


def test_without_a_budget_nothing_is_counted() -> None:
    spend = SpendController(None, None, default_cost=1.0)  # type: ignore[arg-type]
    spend.open()
    request = new_request()
    spend.charge(request, popped("n"))
    spend.reconcile(request, 5.0)
    spend.tick()
    assert not spend.enabled and spend.poppable() >= 1 << 20 and M.CHARGED not in request.meta


def test_revisits_due_soon_may_come_early_only_while_money_piles_up(parts: Parts) -> None:
    parts.bucket.configure(2.0, 20.0, 1, tokens=20.0)  # ten seconds of budget waiting
    idle = parts.controller(continuous=True)
    idle.lookahead = 30.0
    idle.open()
    assert idle.idle and idle.ahead() == 30.0
    one_run = parts.controller(continuous=False)  # a one-run cycle pulls its window forward whole
    one_run.lookahead = 30.0
    one_run.open()
    assert one_run.ahead() == 0.0
    parts.bucket.configure(2.0, 20.0, 1, tokens=1.0)  # spent as it comes: nothing early
    busy = parts.controller(continuous=True)
    busy.lookahead = 30.0
    busy.open()
    assert not busy.idle and busy.ahead() == 0.0
