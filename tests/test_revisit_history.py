from __future__ import annotations

import json

import numpy as np
import pytest

from webcrawl.revisit import NBINS, HistoryTable, PageHistory, censored_mle, interval_bin

DAY = 86400.0


def test_observe_keeps_sufficient_statistics() -> None:
    page = PageHistory()
    page.observe(DAY, False)
    page.observe(2 * DAY, True)
    page.observe(DAY, True, change_age=3600)  # trusted Last-Modified: exact
    page.observe(DAY, True, change_age=2 * DAY)  # older than our last visit: stays censored
    assert (page.visits, page.changes, page.seconds) == (4, 3, 5 * DAY)
    assert page.unchanged_seconds == DAY
    assert (page.exact_changes, page.exact_seconds) == (1, 3600)
    assert sum(page.changed_counts) == 2 and sum(page.changed_seconds) == 3 * DAY
    assert page.naive_rate == pytest.approx(3 / (5 * DAY))


def test_round_trip_through_json() -> None:
    page = PageHistory()
    for t, c in [(DAY, True), (3 * DAY, False), (600, True)]:
        page.observe(t, c)
    again = PageHistory.from_dict(json.loads(json.dumps(page.to_dict())))
    assert again == page


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="interval"):
        PageHistory().observe(-1, True)
    with pytest.raises(ValueError, match="interval"):
        HistoryTable(2).observe([0], [float("nan")], [True])


def test_bins() -> None:
    assert interval_bin([0, 1, 1.4, 1.5, 2, 1e12]).tolist() == [0, 0, 0, 1, 2, NBINS - 1]


def test_table_rows_match_pages() -> None:
    rng = np.random.default_rng(3)
    pages = [PageHistory() for _ in range(5)]
    table = HistoryTable(5)
    for _ in range(40):
        t = rng.uniform(60, 10 * DAY, 5)
        ch = rng.random(5) < 0.5
        age = np.where(rng.random(5) < 0.3, t * 0.5, np.nan)
        table.observe(np.arange(5), t, ch, age)
        for i, p in enumerate(pages):
            p.observe(float(t[i]), bool(ch[i]), None if np.isnan(age[i]) else float(age[i]))
    for i, p in enumerate(pages):
        row = table.page(i)
        assert row.visits == p.visits and row.changed_counts == p.changed_counts
        assert row.seconds == pytest.approx(p.seconds) and row.exact_seconds == pytest.approx(p.exact_seconds)
    assert HistoryTable.from_pages(pages).take([1, 3]).page(1).visits == pages[3].visits


def test_binning_costs_under_one_percent_of_the_estimate() -> None:
    """Changed intervals are kept as a histogram; the MLE from it stays within 0.5% of the MLE from
    the exact intervals, even with intervals spread over every bin."""
    rng = np.random.default_rng(11)
    rate = 1 / DAY
    for _ in range(20):
        t = np.exp(rng.uniform(np.log(0.2 * DAY), np.log(5 * DAY), 60))
        changed = rng.random(60) < -np.expm1(-rate * t)
        binned = PageHistory()
        for ti, ci in zip(t, changed):
            binned.observe(float(ti), bool(ci))
        # The exact MLE by bisection on the full sum, for reference.
        lo, hi = 1e-9, 1e-2
        for _ in range(200):
            mid = (lo * hi) ** 0.5
            score = (t[changed] / np.expm1(mid * t[changed])).sum() - t[~changed].sum() - 0.5 * t.mean()
            lo, hi = (mid, hi) if score > 0 else (lo, mid)
        assert float(censored_mle(binned)[0]) == pytest.approx(lo, rel=0.005)
