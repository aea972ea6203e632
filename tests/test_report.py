"""``scrapy report`` on crawl state v2: the figures of cycles booked through the crawl's own write
APIs (the write batch's ledger figures, page observations, an allocation and a cycle's close),
and of a real continuous crawl; the text table, the per-cycle lines with coverage and idle
budget, and the HTML page (well-formed, one chart per measure)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from tests import _shopcrawl as shop
from tests._scheduler_harness import settings_for
from tests.crawls import REPO, finish, pages, start_crawl
from webcrawl.commands._reportdata import NO_TYPE, figures_from_ledger, ledger_for
from webcrawl.commands._reporthtml import page
from webcrawl.commands._reportsvg import count_axis
from webcrawl.commands._reporttext import METRICS, render_text
from webcrawl.commands.report import Row, rows_from
from webcrawl.demo.serve import start_server_process
from webcrawl.extensions.allocator import Allocator
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import site_from_dict
from webcrawl.spiders.site import SiteSpider
from webcrawl.state.client import connect
from webcrawl.state.pagestore import observe_op

DAY = 86_400.0
NS = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}


class ReportedSpider(SiteSpider):
    name = "reported"
    site = site_from_dict({
        "name": "reported", "seeds": ["http://shop.test/"], "allowed_domains": ["shop.test"],
        "politeness": {"user_agent": "bot (ops@shop.test)"},
        "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": 3600},
        "page_types": [{"name": "product", "url_pattern": "/product/", "tier": "high"},
                       {"name": "category", "url_pattern": "/category/", "tier": "low"}]})


def prepare(redis_url: str, folder: Path, now: float) -> None:
    """Two one-run cycles of crawl 'reported' (billed in requests), written as a crawl writes
    them: cycle 1 discovers 6 products, 4 categories and robots.txt; cycle 2 revisits them, 4
    products changed. Products changed at every daily visit for 10 days, last fetched a day ago;
    categories never changed in 10 daily visits, fetched just now."""
    crawler = get_crawler_for(redis_url, folder)
    runtime = CrawlRuntime.of(crawler)
    try:
        batch, types = runtime.batch, runtime.types
        for cycle_no in (1, 2):
            allocator = Allocator(runtime, crawler)
            cycle = allocator.begin().id
            fetches = [("product", "new" if cycle_no == 1 else ("changed" if i < 4 else "unchanged"))
                       for i in range(6)]
            fetches += [("category", "new" if cycle_no == 1 else "unchanged")] * 4
            for kind, outcome in fetches:
                batch.ledger(cycle, {"booked": 1.0, f"fetches:{kind}": 1.0, f"cost:{kind}": 1.0,
                                     f"{outcome}:{kind}": 1.0})
            if cycle_no == 1:
                batch.ledger(cycle, {"booked": 1.0, "fetches:-": 1.0, "cost:-": 1.0})  # robots.txt
            if cycle_no == 2:
                for i in range(6):
                    for k in range(11):
                        batch.land("shop.test", observe_op(
                            f"http://shop.test/product/{i}", full=True, time=now - 11 * DAY + k * DAY,
                            record_hash=f"{k:016x}", type_id=types.id("product"), billed=1.0))
                for i in range(4):
                    for k in range(11):
                        batch.land("shop.test", observe_op(
                            f"http://shop.test/category/{i}", full=True, time=now - 10 * DAY + k * DAY,
                            record_hash="ab" * 8, type_id=types.id("category"), billed=1.0))
            runtime.flush()
            allocator.allocate(force=True)
            allocator.spider_closed()  # the run ends: the cycle's figures are booked
    finally:
        runtime.close()


def get_crawler_for(redis_url: str, folder: Path) -> Any:
    crawler = get_crawler(ReportedSpider, settings_for(redis_url, "reported", folder))
    crawler.spider = crawler._create_spider()
    return crawler


def run_report(redis_url: str, *args: str, crawl: str = "reported", site: str = "demo",
               **settings: Any) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "scrapy", "report", site, *args,
               "-s", f"WEBCRAWL_REDIS_URL={redis_url}", "-s", f"WEBCRAWL_CRAWL_NAME={crawl}"]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def table_row(out: str, name: str, after: str = "") -> list[str]:
    """The cells of a line of a printed table (names may hold a space), after ``after``."""
    text = out[out.index(after):] if after else out
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return [name, *line[len(name):].replace(" pages)", "_pages)").split()]


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


def test_report_command_text_and_html(redis_url: str, tmp_path: Path) -> None:
    prepare(redis_url, tmp_path, time.time())
    html = tmp_path / "report.html"
    done = run_report(redis_url, "--html", str(html))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "crawl 'reported', 2 cycles, costs in requests" in out
    # page type, fetches, new, changes, no change, no-change share, cost, cost/change, freshness
    assert table_row(out, "product")[1:8] == ["12", "6", "4", "2", "16.7%", "12", "3"]
    assert table_row(out, "category")[1:8] == ["8", "4", "0", "4", "50.0%", "8", "-"]
    assert table_row(out, NO_TYPE)[1:5] == ["1", "0", "0", "1"]
    assert table_row(out, "total")[1:8] == ["21", "10", "4", "7", "33.3%", "21", "5.25"]
    # Freshness estimated now: products changing daily, a day old, are nearly all stale;
    # categories that never changed, fetched just now, fresh.
    product_fresh = float(table_row(out, "product")[8].rstrip("%")) / 100
    category_fresh = float(table_row(out, "category")[8].rstrip("%")) / 100
    assert product_fresh < 0.2 and category_fresh > 0.95
    # Per cycle: coverage at each close (cycle 1 booked no page yet), no idle budget.
    assert table_row(out, "1", after="per cycle:")[-3:] == ["0", "0", "0"]
    assert table_row(out, "2", after="per cycle:")[-3:] == ["10", "10", "0"]
    assert "not recorded" not in out and "(none)" not in out

    root = ET.parse(html).getroot()  # well-formed
    charts = {svg.get("data-chart"): svg for svg in root.iter(f"{{{NS['s']}}}svg")}
    assert {"spend", "coverage", "found", "cost-per-change", "freshness"} <= set(charts)
    for svg in charts.values():  # each chart is named for screen readers by its title and description
        ids = svg.get("aria-labelledby", "").split()
        assert svg.get("role") == "img" and len(ids) == 2
        named = [e for e in svg if e.get("id")]
        assert [e.get("id") for e in named] == ids and all((e.text or "").strip() for e in named)
    # What the fetches found, stacked: cycle 2's 4 changed products are a bar of their own.
    found = charts["found"]
    tips = [t.text for t in found.findall(".//s:g[@data-series]/s:rect/s:title", NS)]
    assert "cycle 2, changed: 4" in tips and "cycle 1, new: 10" in tips and "cycle 2, no change: 6" in tips
    ticks = [t.text for t in found.findall(".//s:g[@class='axis']/s:text", NS) if t.get("class") is None]
    assert ticks and all(re.fullmatch(r"\d+", t or "") for t in ticks), ticks
    coverage = [t.text for t in charts["coverage"].findall(".//s:g[@data-series]/s:rect/s:title", NS)]
    assert "cycle 2, fetched: 10" in coverage
    # One panel per page type, one name for "no page type".
    types = [sec.get("data-page-type") for sec in root.iter(f"{{{NS['h']}}}section")]
    assert types == ["product", "category", NO_TYPE]
    text = "".join(root.itertext())
    assert "(none)" not in text
    for sentence in METRICS.values():
        assert sentence in text
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert not [e for e in root.iter() if e.get("src") or (e.get("href") or "").startswith("http")]

    one = run_report(redis_url, "--cycle", "2")
    assert one.returncode == 0, one.stderr
    row = table_row(one.stdout, "product")
    assert row[1:8] == ["6", "0", "4", "2", "33.3%", "6", "1.50"]
    fresh = float(row[8].rstrip("%")) / 100  # kept at the cycle's close
    assert fresh < 0.2 and math.isfinite(fresh)
    missing = run_report(redis_url, "--cycle", "9")
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "scrapy: error: crawl 'reported' has no cycle 9 (cycles: 1, 2)")


def test_cycles_rolled_up_past_the_retention_still_count_in_the_report(
        redis_url: str, tmp_path: Path) -> None:
    """Cycle 1 rolled up (webcrawl.state.ledger retention): the totals over all cycles, the
    cycle count and spent / budget are what they were; a note says what was rolled up; it has no
    line nor --cycle of its own; --json carries the summary."""
    prepare(redis_url, tmp_path, time.time())
    before = run_report(redis_url, "--html", str(tmp_path / "before.html"))
    assert before.returncode == 0, before.stderr
    client, _, _ = connect(redis_url)
    try:
        done = ledger_for(client, "reported").retain(1, now=time.time() + 3 * 3600, settle_seconds=600)
    finally:
        client.close()
    assert done.rolled == 1
    after = run_report(redis_url, "--html", str(tmp_path / "after.html"))
    assert after.returncode == 0, after.stderr
    assert "crawl 'reported', 2 cycles, costs in requests" in after.stdout
    for name in ("product", "category", NO_TYPE, "total"):
        assert table_row(after.stdout, name)[1:8] == table_row(before.stdout, name)[1:8], name
    assert ("Cycle 1 rolled up past the ledger's retention (WEBCRAWL_CYCLE_RETENTION): their 11 "
            "fetches and 11 spent of 100 count in the figures over all cycles") in after.stdout
    assert "per cycle:" in before.stdout and "per cycle:" not in after.stdout  # one cycle kept

    def tiles(name: str) -> list[str]:
        root = ET.parse(tmp_path / name).getroot()
        return ["".join(t.itertext()) for t in root.iter(f"{{{NS['h']}}}div") if t.get("class") == "tile"]

    assert tiles("after.html") == tiles("before.html")
    assert "21 / 200spent / budget (requests), all cycles" in tiles("after.html")
    gone = run_report(redis_url, "--cycle", "1")
    assert gone.returncode == 2 and gone.stderr.strip() == (
        "scrapy: error: cycle 1 of crawl 'reported' was rolled up with cycles 1 to 1: they count in "
        "the report over all cycles; cycles kept: 2 to 2 (WEBCRAWL_CYCLE_RETENTION)")
    figures = json.loads(run_report(redis_url, "--json").stdout)
    assert list(figures["cycles"]) == ["2"]
    rolled = figures["rolled_up"]
    assert (rolled["cycles"], rolled["first"], rolled["last"], rolled["booked"]) == (1, 1, 1, 11)


def test_unknown_crawl_is_one_line_error(redis_url: str, tmp_path: Path) -> None:
    none_yet = run_report(redis_url, crawl="nosuch")
    assert none_yet.returncode == 2 and none_yet.stdout == ""
    assert none_yet.stderr.count("\n") == 1 and none_yet.stderr.startswith("scrapy: error: no crawl 'nosuch'")
    assert "no crawl has run there yet" in none_yet.stderr
    prepare(redis_url, tmp_path, 1_800_000_000.0)
    known = run_report(redis_url, crawl="nosuch")
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


def test_a_continuous_crawls_report_gives_coverage_idle_budget_and_freshness_at_each_close(
        redis_url: str, tmp_path: Path) -> None:
    with start_server_process("shop", 3, tmp_path / "server.log", seed=3, time_scale=600.0,
                              products=24, categories=2, blog_posts=0) as server:
        # 100 requests a second: more than the shop's three hosts take (0.9 / 0.05 s each), so
        # once the bucket holds its cap (3 s of budget) the rest of each cycle's budget is idle.
        shop.write_site(tmp_path, budget=300, cycle_seconds=3,
                        extra="continuous = true\nstop_after_seconds = 6.5")
        settings = shop.settings(redis_url, tmp_path, server.port, "live", WEBCRAWL_ALLOCATOR_SECONDS=0.5)
        assert finish(start_crawl(shop.SPIDER, settings, tmp_path), 90) == 0
        served = {(e.host, e.path) for e in pages(server.read_log())}
    ledger = shop.cycles(redis_url, "live")
    site = {"site": shop.SPIDER, "WEBCRAWL_SITES_DIR": tmp_path / "sites", "WEBCRAWL_DEMO_PORT": 1}
    done = run_report(redis_url, crawl="live", **site)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"crawl 'live', {len(ledger)} cycles, costs in requests" in out
    assert len(ledger) >= 2
    for number, c in enumerate(ledger, start=1):
        assert 26 <= c["fetched"] <= len(served) and c["known"] == c["fetched"] + c["waiting"]
        cells = table_row(out, str(number), after="per cycle:")
        assert cells[-3:] == [f"{int(c['known']):,}", f"{int(c['fetched']):,}", f"{int(c['waiting']):,}"]
        assert cells[5] == f"{min(c['idle'] / c['budget'], 1.0):.1%}"  # after the start date and time
        assert 0 < c["freshness"] <= 1, "the freshness estimate kept at the cycle's close"
    # Cycle 2 (a whole one) could not spend its budget on the shop's hosts.
    assert 0 < ledger[1]["idle"] < ledger[1]["budget"]
    one = run_report(redis_url, "--cycle", "2", crawl="live", **site)
    assert one.returncode == 0, one.stderr
    kept = float(table_row(one.stdout, "total")[8].rstrip("%")) / 100
    assert kept == pytest.approx(ledger[1]["freshness"], abs=0.0006)


def test_a_page_types_freshness_names_the_pages_it_covers(redis_url: str, tmp_path: Path) -> None:
    prepare(redis_url, tmp_path, time.time())
    done = run_report(redis_url, "--cycle", "2")
    assert done.returncode == 0, done.stderr
    assert table_row(done.stdout, "product")[9] == "(6_pages)"
    assert table_row(done.stdout, "category")[9] == "(4_pages)"


def test_the_freshness_now_says_why_it_differs_from_the_last_cycles() -> None:
    from webcrawl.commands._reportdata import TOTAL_ROW, CycleFigures, Row
    from webcrawl.commands._reporttext import freshness_note

    cycle = CycleFigures(id=4, started=0.0, rows={TOTAL_ROW: Row(freshness=0.9, pages=10)},
                         freshness_at=100.0)
    below = freshness_note([cycle], 0.8, 200.0)
    assert below and "below the 90" in below and "cycle 4" in below and "ages" in below
    above = freshness_note([cycle], 0.95, 200.0)
    assert above and "above the 90" in above
    assert freshness_note([cycle], 0.9, 200.0) is None  # no difference, nothing to say
    assert freshness_note([cycle], 0.8, 100.0) is None  # the same estimate
    assert freshness_note([], 0.8, 200.0) is None
