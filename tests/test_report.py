"""``scrapy report``: figures from a prepared ledger and page histories in a real Redis, the text
table, the per-cycle lines, and the HTML page (well-formed, with one chart per measure)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import redis

from tests.crawls import REPO
from webcrawl.commands._reportdata import NO_TYPE, figures_from_ledger
from webcrawl.commands._reporthtml import page
from webcrawl.commands._reportsvg import count_axis
from webcrawl.commands._reporttext import METRICS, render_text
from webcrawl.commands.report import Row, rows_from
from webcrawl.revisit import GammaPrior
from webcrawl.state.freshness import TOTAL, estimate_freshness, read_snapshot, store_snapshot
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore

KEYS = CrawlKeys("reported")
DAY = 86_400.0
PRIOR = GammaPrior.from_mean(1 / (7 * DAY))


def prepare(client: redis.Redis, now: float) -> None:
    """Two cycles of a 'requests'-billed crawl: products change, categories do not."""
    ledger = LedgerStore(client, KEYS)
    history = HistoryStore(client, KEYS)
    first = ledger.start_cycle(budget=100, cycle_seconds=3600, now=now - 2 * 3600)
    for i in range(6):
        ledger.land(first.id, expected=1, actual=1, purpose="discovery", page_type="product")
        ledger.record_outcome(first.id, "product", "new")
    for i in range(4):
        ledger.land(first.id, expected=0, actual=1, purpose="discovery", page_type="category")
        ledger.record_outcome(first.id, "category", "new")
    ledger.land(first.id, expected=0, actual=1, purpose="robots", page_type=None)
    second = ledger.start_cycle(budget=100, cycle_seconds=3600, now=now - 3600)
    for i in range(6):
        ledger.land(second.id, expected=1, actual=1, purpose="revisit", page_type="product")
        ledger.record_outcome(second.id, "product", "changed" if i < 4 else "unchanged")
    for i in range(4):
        ledger.land(second.id, expected=1, actual=1, purpose="revisit", page_type="category")
        ledger.record_outcome(second.id, "category", "unchanged")
    # Histories: products changed at every daily visit for 10 days, last fetched a day ago;
    # categories never changed in 10 daily visits, fetched just now.
    for i in range(6):
        for k in range(11):
            history.observe(f"http://shop.test/product/{i}", now=now - 11 * DAY + k * DAY,
                            record_hash=f"v{k}", page_type="product")
    for i in range(4):
        for k in range(11):
            history.observe(f"http://shop.test/category/{i}", now=now - 10 * DAY + k * DAY,
                            record_hash="same", page_type="category")
    store_snapshot(client, KEYS, first.id, estimate_freshness(client, KEYS, now - 3600, PRIOR))


def test_rows_from_the_ledger_fields() -> None:
    rows = rows_from({"budget": 10, "fetches:a": 10, "cost:a": 20, "changed:a": 4, "new:a": 1,
                      "unchanged:a": 5, "fetches:-": 2, "cost:-": 2})
    assert list(rows) == [NO_TYPE, "a", "total"]
    a = rows["a"]
    assert (a.no_change, a.no_change_share, a.cost_per_change) == (5, 0.5, 5.0)
    assert rows["total"].fetches == 12 and rows["total"].no_change == 7
    assert Row().no_change_share is None and Row().cost_per_change is None


def test_count_axes_tick_on_whole_numbers() -> None:
    assert count_axis(3).ticks == (0, 1, 2, 3)
    assert count_axis(0).ticks == (0, 1)
    assert count_axis(50).ticks == (0, 10, 20, 30, 40, 50)  # not 12.5, 25, 37.5
    for largest in (1, 2, 7, 13, 37, 99, 270, 1234, 2_000_001):
        axis = count_axis(largest)
        assert axis.top >= largest and len(axis.ticks) <= 6
        assert all(t == int(t) for t in axis.ticks), axis.ticks


def test_estimated_freshness_follows_the_model(redis_client: redis.Redis) -> None:
    now = 1_800_000_000.0
    prepare(redis_client, now)
    fresh = estimate_freshness(redis_client, KEYS, now, PRIOR)
    assert fresh.pages == {"product": 6, "category": 4, TOTAL: 10}
    # Products change faster than daily visits: a day after the last fetch, nearly all stale.
    assert fresh.mean["product"] < 0.2
    # Categories never changed in ten days and were fetched now: fresh.
    assert fresh.mean["category"] == pytest.approx(1.0)
    assert fresh.mean[TOTAL] == pytest.approx((6 * fresh.mean["product"] + 4) / 10)
    later = estimate_freshness(redis_client, KEYS, now + 30 * DAY, PRIOR)
    assert later.mean["category"] < fresh.mean["category"]
    snap = read_snapshot(redis_client, KEYS, 1)
    assert snap is not None and snap.pages[TOTAL] == 10


def run_report(redis_url: str, cwd: Path, *args: str, crawl: str = KEYS.crawl) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "scrapy", "report", "demo", *args,
               "-s", f"WEBCRAWL_REDIS_URL={redis_url}", "-s", f"WEBCRAWL_CRAWL_NAME={crawl}"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)


def table_row(out: str, name: str) -> list[str]:
    """The cells of a page type's line of the printed table (names may hold a space)."""
    line = next(line for line in out.splitlines() if line.startswith(name + " "))
    return [name, *line[len(name):].replace(" pages)", "_pages)").split()]


NS = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}


def test_report_command_text_and_html(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    import time

    prepare(redis_client, time.time())
    html = tmp_path / "report.html"
    done = run_report(redis_url, tmp_path, "--html", str(html))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "crawl 'reported', 2 cycles, costs in requests" in out
    # page type, fetches, new, changes, no change, no-change share, cost, cost/change, freshness
    assert table_row(out, "product")[1:8] == ["12", "6", "4", "2", "16.7%", "12", "3"]
    assert table_row(out, "category")[1:8] == ["8", "4", "0", "4", "50.0%", "8", "-"]
    assert table_row(out, NO_TYPE)[1:5] == ["1", "0", "0", "1"]
    assert table_row(out, "total")[1:8] == ["21", "10", "4", "7", "33.3%", "21", "5.25"]
    assert "per cycle:" in out and "coverage (known, fetched, waiting URLs): not recorded" in out
    assert "(none)" not in out

    root = ET.parse(html).getroot()  # well-formed
    charts = {svg.get("data-chart"): svg for svg in root.iter(f"{{{NS['s']}}}svg")}
    assert {"spend", "coverage", "found", "cost-per-change", "freshness"} <= set(charts)
    for svg in charts.values():  # each chart is named for screen readers by its title and description
        ids = svg.get("aria-labelledby", "").split()
        assert svg.get("role") == "img" and len(ids) == 2
        named = [e for e in svg if e.get("id")]
        assert [e.get("id") for e in named] == ids and all((e.text or "").strip() for e in named)
    # Coverage was not recorded: said so, no bar drawn.
    coverage = charts["coverage"]
    assert coverage.get("data-empty") == "true" and not coverage.findall(".//s:rect[@fill]", NS)[1:]
    assert "not recorded" in "".join(coverage.itertext())
    # What the fetches found, stacked: cycle 2's 4 changed products are a bar of their own.
    found = charts["found"]
    tips = [t.text for t in found.findall(".//s:g[@data-series]/s:rect/s:title", NS)]
    assert "cycle 2, changed: 4" in tips and "cycle 1, new: 10" in tips and "cycle 2, no change: 6" in tips
    ticks = [t.text for t in found.findall(".//s:g[@class='axis']/s:text", NS) if t.get("class") is None]
    assert ticks and all(re.fullmatch(r"\d+", t or "") for t in ticks), ticks
    # One panel per page type, one name for "no page type".
    types = [sec.get("data-page-type") for sec in root.iter(f"{{{NS['h']}}}section")]
    assert types == ["product", "category", NO_TYPE]
    text = "".join(root.itertext())
    assert "(none)" not in text
    for sentence in METRICS.values():
        assert sentence in text
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert not [e for e in root.iter() if e.get("src") or (e.get("href") or "").startswith("http")]

    one = run_report(redis_url, tmp_path, "--cycle", "2")
    assert one.returncode == 0, one.stderr
    row = table_row(one.stdout, "product")
    assert row[1:8] == ["6", "0", "4", "2", "33.3%", "6", "1.50"]
    fresh = float(row[8].rstrip("%")) / 100
    assert fresh < 0.2 and math.isfinite(fresh)
    missing = run_report(redis_url, tmp_path, "--cycle", "9")
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "scrapy: error: crawl 'reported' has no cycle 9 (cycles: 1, 2)")


def test_unknown_crawl_is_one_line_error(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    none_yet = run_report(redis_url, tmp_path, crawl="nosuch")
    assert none_yet.returncode == 2 and none_yet.stdout == ""
    assert none_yet.stderr.count("\n") == 1 and none_yet.stderr.startswith("scrapy: error: no crawl 'nosuch'")
    assert "no crawl has run there yet" in none_yet.stderr
    prepare(redis_client, 1_800_000_000.0)
    known = run_report(redis_url, tmp_path, crawl="nosuch")
    assert known.returncode == 2 and known.stderr.count("\n") == 1, known.stderr
    assert "no crawl 'nosuch'" in known.stderr and "crawls there: reported" in known.stderr


def test_recorded_coverage_and_idle_budget_are_drawn() -> None:
    """The fields a cycle's ledger may carry (coverage at its close, idle budget) reach the page
    and the text; a cycle without them says "not recorded"."""
    base = {"started": 1.8e9, "budget": 100.0, "booked": 80.0, "fetches:product": 80, "cost:product": 80,
            "changed:product": 20}
    full = figures_from_ledger(2, {**base, "idle": 15.0, "known": 500, "fetched": 320, "waiting": 150}, None)
    bare = figures_from_ledger(1, base, None)
    assert (full.idle_share, full.never_fetched, bare.idle_share, bare.has_coverage) == (0.15, 180, None, False)
    text = render_text("t", full.rows, [bare, full], "requests")
    assert re.search(r"^2 .* 15\.0% .* 500\s+320\s+150$", text, re.M), text
    root = ET.fromstring(page("t", "2 cycles", full.rows, [bare, full], "requests", None, None))
    coverage = next(s for s in root.iter(f"{{{NS['s']}}}svg") if s.get("data-chart") == "coverage")
    tips = sorted(t.text or "" for t in coverage.findall(".//s:g[@data-series]/s:rect/s:title", NS))
    assert tips == ["cycle 2, fetched: 320", "cycle 2, never fetched, not waiting: 30", "cycle 2, waiting: 150"]
    assert "not recorded" in "".join(coverage.itertext())  # cycle 1
    spend = next(s for s in root.iter(f"{{{NS['s']}}}svg") if s.get("data-chart") == "spend")
    tips = [t.text or "" for t in spend.findall(".//s:g[@data-series='idle']/s:rect/s:title", NS)]
    assert tips == ["cycle 2, idle: 15%"]
