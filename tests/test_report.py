"""``scrapy report``: figures from a prepared ledger and page histories in a real Redis, the text
table, the per-cycle lines, and the HTML page (well-formed, with one chart per measure)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import redis

from tests.crawls import REPO
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
    assert list(rows) == ["(none)", "a", "total"]
    a = rows["a"]
    assert (a.no_change, a.share, a.cost_per_change) == (5, 0.5, 5.0)
    assert rows["total"].fetches == 12 and rows["total"].no_change == 7
    assert Row().share is None and Row().cost_per_change is None


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


def run_report(redis_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "scrapy", "report", "demo", *args,
               "-s", f"WEBCRAWL_REDIS_URL={redis_url}", "-s", f"WEBCRAWL_CRAWL_NAME={KEYS.crawl}"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_report_command_text_and_html(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    import time

    prepare(redis_client, time.time())
    html = tmp_path / "report.html"
    done = run_report(redis_url, tmp_path, "--html", str(html))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "crawl 'reported', 2 cycles, costs in requests" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    # page type, fetches, new, changes, no change, share, cost, cost/change, freshness
    assert lines["product"][1:8] == ["12", "6", "4", "2", "16.7%", "12", "3"]
    assert lines["category"][1:8] == ["8", "4", "0", "4", "50.0%", "8", "-"]
    assert lines["(none)"][1:5] == ["1", "0", "0", "1"]
    assert lines["total"][1:8] == ["21", "10", "4", "7", "33.3%", "21", "5.25"]
    assert "per cycle:" in out
    root = ET.parse(html).getroot()  # well-formed
    ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
    charts = root.findall(".//s:svg", ns)
    titles = [svg.get("aria-label") for svg in charts]
    assert titles == ["Fetches", "Changes detected", "Share of fetches that found no change",
                      "Cost (requests)", "Cost per detected change (requests)",
                      "Estimated freshness of the copy"]
    # One line or point per page type and the total; cycle 2's changes: 4 products.
    changes = charts[1]
    labels = [t.text for t in changes.findall(".//s:circle/s:title", ns)]
    assert "product, cycle 2: 4" in labels and "total, cycle 2: 4" in labels
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    one = run_report(redis_url, tmp_path, "--cycle", "2")
    assert one.returncode == 0, one.stderr
    row = next(line.split() for line in one.stdout.splitlines() if line.startswith("product"))
    assert row[1:8] == ["6", "0", "4", "2", "33.3%", "6", "1.50"]
    assert float(row[8]) < 0.2 and math.isfinite(float(row[8]))
    missing = run_report(redis_url, tmp_path, "--cycle", "9")
    assert missing.returncode != 0 and "has no cycle 9" in missing.stderr + missing.stdout
