"""One allocation of the budget rate (webcrawl.extensions._alloc_plan.plan): pure numpy, built
from page records as the crawl stores them (histories observed through the model's PageHistory).

Shares of the budget: discovery while new URLs wait, detectors (sitemaps, listing pages, seeds),
the re-estimation floor, the verification sample; the rest is water-filled over the other pages
under each host's capacity; hosts whose sitemap dates are trusted are left to their triggers;
known changes are followed only where that is worth it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from webcrawl.extensions._alloc_plan import DETECTOR_MAX_CYCLES, DISCOVERY_MAX, AllocInput, plan, followed_lag, listing_readings, sitemap_readings
from webcrawl.revisit import GammaPrior, Objective, PageHistory
from webcrawl.state import records
from webcrawl.state.records import EMPTY_BIN, KIND_PAGE, KIND_SITEMAP

NOW = 1_800_000_000.0
HOUR = 3600.0
PRODUCT, LISTING = 1, 2  # page type ids; LISTING is a listing page type
SHARES = {"discovery": 0.1, "reestimation": 0.05, "verification": 0.0, "detectors": 0.1}


def page_row(visits: int, changes: int, every: float, *, type_id: int = PRODUCT,
             kind: int = KIND_PAGE, cost: float | None = 1.0, last: float | None = None) -> np.void:
    """A page record after ``visits`` visits ``every`` seconds apart, the first ``changes`` of
    which found a change; ``cost``: mean cost of its own fetches (None: never measured)."""
    history = PageHistory()
    for i in range(visits):
        history.observe(every, i < changes)
    r = np.zeros(1, dtype=records.DTYPE)[0]
    for name in ("visits", "changes", "seconds", "unchanged_seconds"):
        r[name] = getattr(history, name)
    used = np.flatnonzero(history.changed_counts)
    for i in range(records.SLOTS):
        if i < len(used):
            b = used[i]
            r[f"b{i}"], r[f"n{i}"], r[f"s{i}"] = b, history.changed_counts[b], history.changed_seconds[b]
        else:
            r[f"b{i}"] = EMPTY_BIN
    r["last_fetched"] = NOW - every if last is None else last
    r["fetches"], r["type"], r["kind"] = visits + 1, type_id, kind
    if cost is not None:
        r["billed"], r["billed_n"] = cost * (visits + 1), visits + 1
    return r


def alloc_input(rows: list[np.void], host: list[int], **overrides: Any) -> AllocInput:
    nhosts = max(host) + 1
    values: dict[str, Any] = dict(
        rows=np.array(rows, dtype=records.DTYPE), host=np.asarray(host, dtype=np.intp),
        delay=np.full(nhosts, 0.1), hold_until=np.zeros(nhosts), health=np.ones(nhosts),
        sitemap_trusted=np.zeros(nhosts, dtype=bool), seed=np.zeros(len(rows), dtype=bool),
        now=NOW, budget_rate=0.05, period=10.0, cycle_seconds=HOUR, sitemap_seconds=900.0,
        shares=dict(SHARES), type_tier={PRODUCT: 3, LISTING: 1}, listing_types=frozenset({LISTING}),
        prior=GammaPrior.from_mean(1 / (7 * 86_400.0), 0.5), default_cost=1.0, backlog=0.0, seed_rng=1)
    values.update(overrides)
    return AllocInput(**values)


def spend(result: Any, mask: np.ndarray | None = None) -> float:
    """What the planned intervals cost per second (over ``mask``)."""
    rate = np.where(np.isfinite(result.interval), 1.0 / result.interval, 0.0)
    per = result.cost * rate
    return float(per[mask].sum() if mask is not None else per.sum())


def catalog() -> list[np.void]:
    """Hourly visits of a day: 20 pages that never changed, 20 that changed now and then, 20
    that changed at most visits."""
    return ([page_row(24, 0, HOUR) for _ in range(20)] + [page_row(24, 4, HOUR) for _ in range(20)]
            + [page_row(24, 20, HOUR) for _ in range(20)])


def test_the_plan_fits_the_budget_and_buys_changing_pages() -> None:
    result = plan(alloc_input(catalog(), [i % 3 for i in range(60)], budget_rate=0.05))
    assert 0.05 * 0.9 <= spend(result) <= 0.05 * (1 + 1e-6)
    static, sometimes, often = (result.interval[k:k + 20] for k in (0, 20, 40))
    assert np.ptp(static) == np.ptp(sometimes) == np.ptp(often) == 0, "same history, same plan"
    assert static[0] > 3 * sometimes[0] > 3 * often[0], "visits go where changes are"
    floor = 1.0 / (SHARES["reestimation"] * 0.05 / 60)  # every polled page: re-estimation floor
    assert (result.interval <= floor).all()
    # Only the top-up to the floor is spent on it: every page here polls above it.
    assert 0 <= result.figures["plan:floor"] <= SHARES["reestimation"] * 0.05


def test_the_floor_share_is_spent_not_parked() -> None:
    result = plan(alloc_input(catalog(), [i % 3 for i in range(60)], budget_rate=0.05))
    assert spend(result) >= 0.05 * 0.99


def test_costs_come_from_a_pages_fetches_then_its_type_then_the_default() -> None:
    rows = [page_row(4, 1, HOUR, cost=3.0), page_row(4, 1, HOUR, cost=None),
            page_row(4, 1, HOUR, type_id=5, cost=None), page_row(4, 1, HOUR, cost=7.0)]
    result = plan(alloc_input(rows, [0, 0, 0, 1], default_cost=2.0,
                              health=np.array([1.0, 3.0])))  # host 1's fetches fail: dearer
    assert result.cost.tolist() == pytest.approx([3.0, 5.0, 2.0, 21.0])  # type mean (3 + 7) / 2
    assert result.figures["cost:1"] == pytest.approx(5.0)


def test_discovery_takes_its_share_while_new_urls_wait() -> None:
    rows, host = catalog(), [i % 3 for i in range(60)]
    shares = dict(SHARES, reestimation=0.0, detectors=0.0)
    polled = np.ones(60, dtype=bool)
    none = plan(alloc_input(rows, host, budget_rate=10.0, shares=shares))
    few = plan(alloc_input(rows, host, budget_rate=10.0, shares=shares, backlog=5))
    many = plan(alloc_input(rows, host, budget_rate=10.0, shares=shares, backlog=150))
    flood = plan(alloc_input(rows, host, budget_rate=10.0, shares=shares, backlog=100_000))
    assert none.figures["discovery_share"] == 0.0
    assert few.figures["discovery_share"] == pytest.approx(SHARES["discovery"])
    # Enough for the backlog in about 30 s: 150 pages at 1 over 30 s of a 10/s budget.
    assert many.figures["discovery_share"] == pytest.approx(0.5)
    assert flood.figures["discovery_share"] == DISCOVERY_MAX
    # Short cycles: the backlog within half a cycle (20 s cycles: 150 pages over 10 s of 10/s).
    short = plan(alloc_input(rows, host, budget_rate=10.0, shares=shares, backlog=150,
                             cycle_seconds=20.0))
    assert short.figures["discovery_share"] == DISCOVERY_MAX
    brief = plan(alloc_input(rows, host, budget_rate=10.0, shares=shares, backlog=50,
                             cycle_seconds=20.0))
    assert brief.figures["discovery_share"] == pytest.approx(0.5)
    for result in (few, many, flood):
        share = result.figures["discovery_share"]
        assert result.figures["plan:discovery"] == pytest.approx(share * 10.0)
        assert spend(result, polled) <= (1 - share) * 10.0 * (1 + 1e-6)
    assert spend(flood, polled) < spend(few, polled) < spend(none, polled) * (1 + 1e-6)


def test_detectors_are_read_on_their_share() -> None:
    sitemaps = [page_row(4, 4, 900.0, kind=KIND_SITEMAP, type_id=0) for _ in range(2)]
    listing = [page_row(4, 1, HOUR, type_id=LISTING), page_row(4, 1, HOUR)]  # a listing, a seed
    rows = sitemaps + listing + catalog()[:10]
    host = [0, 1, 0, 0] + [0] * 10
    seed = np.zeros(len(rows), dtype=bool)
    seed[3] = True
    trusted = np.array([False, True])
    result = plan(alloc_input(rows, host, budget_rate=1.0, seed=seed, sitemap_trusted=trusted))
    # Sitemaps every sitemap period, four times as often where their dates are trusted.
    assert result.interval[:2].tolist() == pytest.approx([900.0, 225.0])
    # Listing pages and seeds share what the sitemaps leave of the detectors' 10%, each read in
    # proportion to the square root of its estimated change rate (cost 1 each).
    left = 0.1 * 1.0 - (1 / 900 + 1 / 225)
    reads = 1 / result.interval[2:4]
    assert reads.sum() == pytest.approx(left)
    assert reads[0] / reads[1] == pytest.approx(np.sqrt(result.rate[2] / result.rate[3]))
    assert result.figures["plan:detectors"] == pytest.approx(0.1)

    # A share too small for the sitemaps' period: they are read more slowly, within the share,
    # and listing pages still at least every two cycles.
    tight = plan(alloc_input(rows, host, budget_rate=1.0, seed=seed, sitemap_trusted=trusted,
                             shares=dict(SHARES, detectors=0.001)))
    assert spend(tight, np.arange(len(rows)) < 2) == pytest.approx(0.001)
    assert tight.interval[2:4].tolist() == pytest.approx([DETECTOR_MAX_CYCLES * HOUR] * 2)


def test_verification_samples_fetched_pages_at_its_share() -> None:
    rows = catalog()
    rows[0]["last_fetched"] = 0.0  # never fetched: nothing to verify
    listing = page_row(4, 1, HOUR, type_id=LISTING)
    shares = dict(SHARES, verification=0.02)
    a = plan(alloc_input([*rows, listing], [0] * 61, budget_rate=10.0, shares=shares))
    b = plan(alloc_input([*rows, listing], [0] * 61, budget_rate=10.0, shares=shares))
    # 2% of 10 per second over a 10 s period, at a typical cost of 1: two pages.
    assert len(a.verify) == 2 and len(set(a.verify.tolist())) == 2
    assert a.verify.tolist() == b.verify.tolist(), "the sample is reproducible with its seed"
    assert not {0, 60} & set(a.verify.tolist())
    assert a.figures["plan:verification"] == pytest.approx(0.2)
    off = plan(alloc_input([*rows, listing], [0] * 61, budget_rate=10.0))
    assert len(off.verify) == 0 and off.figures["plan:verification"] == 0.0


def test_without_a_floor_pages_not_worth_a_visit_get_none() -> None:
    """On a tight budget, pages changing at most hourly visits cannot be kept fresh: no visits
    (the optimum's rule); the slower ones get them."""
    rows, host = catalog(), [0] * 60
    shares = dict(SHARES, reestimation=0.0)
    result = plan(alloc_input(rows, host, budget_rate=0.002, shares=shares))
    assert np.isinf(result.interval[40:]).all(), "pages too fast to keep fresh were planned"
    assert np.isfinite(result.interval[:40]).all()
    floored = plan(alloc_input(rows, host, budget_rate=0.002))
    assert np.isfinite(floored.interval).all()


def test_water_filling_keeps_each_host_within_its_capacity() -> None:
    rows = [page_row(24, 20, 600.0) for _ in range(20)]
    host = [0] * 10 + [1] * 10
    shares = dict(SHARES, reestimation=0.0, detectors=0.0)
    even = plan(alloc_input(rows, host, budget_rate=5.0, shares=shares))
    capped = plan(alloc_input(rows, host, budget_rate=5.0, shares=shares,
                              delay=np.array([10.0, 0.1])))
    load = np.bincount(host, np.where(np.isfinite(capped.interval), 1 / capped.interval, 0.0))
    assert load[0] == pytest.approx(1.0 / 10.0)  # one request per delay
    assert spend(capped) == pytest.approx(5.0), "money waited on a host that cannot take it"
    assert load[1] > spend(even, np.array(host) == 1) * 1.5
    # A host held back (a 429's Retry-After) for the whole period gets nothing planned.
    held = plan(alloc_input(rows, host, budget_rate=5.0, shares=shares,
                            hold_until=np.array([NOW + 10.0, 0.0])))
    assert np.isinf(held.interval[:10]).all() and np.isfinite(held.interval[10:]).all()


def test_pages_of_hosts_with_trusted_sitemap_dates_wait_for_their_dates() -> None:
    rows = catalog()
    host = [i % 2 for i in range(60)]
    result = plan(alloc_input(rows, host, budget_rate=0.05, sitemap_trusted=np.array([True, False])))
    trusted = np.array(host) == 0
    floor = 1.0 / (SHARES["reestimation"] * 0.05 / 60)
    assert np.allclose(result.interval[trusted], floor), "trusted dates were polled anyway"
    assert (result.interval[~trusted][20:] < floor / 3).all()
    changing = trusted & (np.arange(60) >= 20)
    assert result.follow[changing].all(), "a newer trusted date must make the page due"


def test_known_changes_are_never_followed_on_pages_too_fast_to_keep_fresh() -> None:
    fast = [page_row(24, 24, 60.0) for _ in range(5)]  # about a change a minute
    slow = [page_row(24, 2, HOUR) for _ in range(5)]  # a change every half day
    rows = [*fast, *slow, page_row(24, 0, HOUR, type_id=LISTING)]  # the listing shows changes
    for budget in (0.01, 0.05, 1.0):
        result = plan(alloc_input(rows, [0] * 11, budget_rate=budget))
        assert not result.follow[:5].any(), f"budget {budget}: fast pages followed"
        assert result.follow[5:10].all(), f"budget {budget}: slow pages not followed"
        assert not result.follow[10], "the listing page itself is a detector"
        assert result.figures["plan:triggers"] > 0
    tight = plan(alloc_input(rows, [0] * 11, budget_rate=0.005))
    floor = 1.0 / (SHARES["reestimation"] * 0.005 / 10)
    assert np.allclose(tight.interval[:5], floor), "too fast to keep fresh: only the floor"
    # No detector on the host: there is no known change to follow.
    alone = plan(alloc_input([*fast, *slow], [0] * 10, budget_rate=0.05))
    assert not alone.follow.any()


def test_events_objective_follows_where_value_per_cost_reaches_the_multiplier() -> None:
    rows = [page_row(24, 12, HOUR) for _ in range(4)] + [page_row(24, 0, HOUR, type_id=LISTING)]
    rows[0]["billed"] *= 1000  # a page costing a thousand times as much
    result = plan(alloc_input(rows, [0] * 5, budget_rate=0.001, objective=Objective.EVENTS))
    mu = result.figures["mu"]
    worth = result.value / result.cost
    assert result.follow[1:4].all() and (worth[1:4] >= mu).all()
    assert not result.follow[0] and worth[0] < mu


def test_the_freshness_estimate_counts_new_urls_waiting_as_stale() -> None:
    now = [page_row(24, 0, HOUR, last=NOW) for _ in range(4)]  # fetched just now, never changed
    stale = [page_row(24, 24, HOUR, last=NOW - 86_400.0) for _ in range(4)]  # hourly, a day old
    fresh = plan(alloc_input(now, [0] * 4)).figures
    assert fresh["fetched"] == 4 and fresh["freshness"] == pytest.approx(1.0, abs=1e-3)
    waiting = plan(alloc_input(now, [0] * 4, backlog=4)).figures
    assert waiting["freshness"] == pytest.approx(fresh["freshness"] / 2)
    both = plan(alloc_input(now + stale, [0] * 8)).figures
    assert both["freshness"] == pytest.approx(0.5, abs=0.01)
    assert both[f"freshness:{PRODUCT}"] == pytest.approx(both["freshness"])


def test_following_and_polling_together_spend_no_more_than_the_budget() -> None:
    """Hundreds of changing pages on a host whose sitemap dates are trusted, a small budget:
    following every change would cost many times the budget, so only what fits is followed."""
    rows = [page_row(24, 6 + i % 12, HOUR) for i in range(400)]
    for budget in (0.01, 0.05, 0.2):
        result = plan(alloc_input(rows, [0] * 400, budget_rate=budget,
                                  sitemap_trusted=np.array([True]), sitemap_seconds=120.0))
        fig = result.figures
        planned = sum(fig[k] for k in ("plan:revisit", "plan:triggers", "plan:floor",
                                       "plan:verification", "plan:detectors") if k in fig)
        assert planned <= budget * 1.01, f"budget {budget}: {fig}"
        assert fig["plan:triggers"] <= budget
        if budget == 0.01:
            assert 0 < result.follow.sum() < 400, "all or none followed on a tight budget"
        # What is followed is what changes least: the cheapest freshness a trigger buys.
        rates = result.rate[result.follow]
        if len(rates) and (~result.follow).any():
            assert rates.max() <= np.median(result.rate[~result.follow]) * 1.0001 or budget > 0.01


def test_a_trusted_sitemap_date_read_since_the_fetch_says_how_fresh_the_copy_is() -> None:
    day = 86_400.0
    fetched = NOW - day
    current = page_row(3, 0, HOUR, last=fetched)  # fetched a day ago, dated before it
    current["lastmod"], current["lastmod_read"] = fetched - HOUR, NOW - 60
    changed = page_row(3, 0, HOUR, last=fetched)  # dated after the fetch: the copy is stale
    changed["lastmod"], changed["lastmod_read"] = NOW - HOUR, NOW - 60
    silent = page_row(3, 0, HOUR, last=fetched)  # no date read since
    rows = [current, changed, silent]
    trusted = plan(alloc_input(rows, [0] * 3, sitemap_trusted=np.array([True])))
    untrusted = plan(alloc_input(rows, [0] * 3))
    _, confirmed, stale = sitemap_readings(np.array(rows, dtype=records.DTYPE), np.ones(3, bool))
    assert list(confirmed) == [NOW - 60, fetched, fetched] and list(stale) == [False, True, False]
    # The date says current a minute ago: more evidence of a slow page, and nearly sure fresh.
    assert trusted.rate[0] < trusted.rate[2] and trusted.rate[0] < untrusted.rate[0]
    assert trusted.figures["freshness"] < untrusted.figures["freshness"] + 0.34  # one of three is stale
    per = []
    for i in range(3):
        one = plan(alloc_input([rows[i]], [0], sitemap_trusted=np.array([True]))).figures
        per.append(one["freshness"])
    assert per[0] > 0.99 and per[1] == 0.0 and per[2] < per[0]
    # Untrusted dates say nothing either way.
    assert plan(alloc_input([rows[1]], [0])).figures["freshness"] == pytest.approx(
        plan(alloc_input([rows[2]], [0])).figures["freshness"])


def test_what_followed_changes_actually_waited_prices_following() -> None:
    """Changes a trusted date showed were fetched 40 s after they were made (a busy host): on
    such a host following fast pages buys far less than half a sitemap period promises."""
    def followed(rate_every: float, waited: float | None) -> np.void:
        r = page_row(24, 12, rate_every)
        r["follow"], r["last_changed"], r["last_interval"] = 1, 1, rate_every
        if waited is not None:
            r["lastmod"] = r["last_fetched"] - waited
        return r

    rows = [followed(120.0, 40.0) for _ in range(6)]
    lag = followed_lag(np.array(rows, dtype=records.DTYPE), np.zeros(6, dtype=np.intp), 1)
    assert lag[0] == pytest.approx(40.0)
    few = followed_lag(np.array(rows[:4], dtype=records.DTYPE), np.zeros(4, dtype=np.intp), 1)
    assert np.isnan(few[0]), "four samples are not enough to say"
    # A date before the previous fetch says nothing about this change's wait.
    old = followed(120.0, 500.0)
    assert np.isnan(followed_lag(np.array([old] * 6, dtype=records.DTYPE),
                                 np.zeros(6, dtype=np.intp), 1)[0])
    trusted = dict(sitemap_trusted=np.array([True]), sitemap_seconds=8.0, budget_rate=0.5)
    quick = plan(alloc_input([followed(120.0, None) for _ in range(6)], [0] * 6, **trusted))
    slow = plan(alloc_input(rows, [0] * 6, **trusted))
    assert quick.follow.all() and not slow.follow.any()


def test_listings_that_show_no_change_are_evidence_of_a_slow_page() -> None:
    """Three pages fetched twice, an hour apart, unchanged: one shown unchanged by listings for a
    day since, one whose summary changed an hour after the fetch, one no listing shows."""
    day = 86_400.0
    rows = [page_row(1, 0, HOUR, last=NOW - day) for _ in range(3)]
    listed = np.array([[NOW - 2 * day, NOW], [NOW - day + HOUR, NOW], [0.0, 0.0]])
    readings = listing_readings(np.array(rows, dtype=records.DTYPE), listed, share=0.5)
    assert list(readings.quiet) == [0.5 * day, 0.5 * (day - HOUR), 0.0]
    assert list(readings.changed) == [0.0, 0.5 * HOUR, 0.0]
    with_lists = plan(alloc_input(rows, [0] * 3, listed=listed))
    quiet, changed, unlisted = with_lists.rate
    # (The type's prior is fitted over all three: the one change seen raises it for each.)
    assert quiet < unlisted < changed
    assert with_lists.interval[0] > with_lists.interval[1], "the quiet page is visited less"
