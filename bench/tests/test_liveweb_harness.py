"""The live-freshness harness itself (bench/liveweb): the scenario is deterministic, the server
serves what the scenario says, the evaluator scores a hand-written log exactly, the reference
allocations are right and respect per-host caps, and the round-robin baseline's bookkeeping.
With a lifecycle: the fates and the server's answers to them (real requests), the newcomer's
site file, the events owed for a log and the scoring of events, refetches and births."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.liveweb import (Scenario, ScenarioParams, ServerProcess, ShopSpec, evaluate_entries,
                           evaluate_log)
from bench.liveweb.crawlers import (NEWCOMER_SITE_FILE, SITE_FILE, Invocation, _stop_daemon,
                                    newcomer_site_text, run_crawler)
from bench.liveweb.events import page_type_fields, score_events
from bench.liveweb.events_check import same_value
from bench.liveweb.expected_events import expected_events
from bench.liveweb.freshness import fresh_seconds, histories
from bench.liveweb.lifecycle_costs import births_found, lifecycle_costs
from bench.liveweb.oracle import (freshness, marginal, optimal_frequencies, proportional_frequencies,
                                  uniform_frequencies, value_freshness)
from bench.liveweb.pages import render_page, render_sitemap, w3c
from bench.liveweb.params import Lifecycle
from bench.liveweb.scenario import Page
from bench.liveweb.politeness import politeness
from bench.liveweb.roundrobin.rotation import Rotation, TokenBucket

# One shop of each behaviour; the last one answers 429 for the whole run.
TEST_SHOPS = (
    ShopSpec(12, "honest", "accurate", sitemap_index=True),
    ShopSpec(12, "ignored", "bogus_now"),
    ShopSpec(10, "absent", "absent", crawl_delay=1.0, sitemap_in_site_file=False),
    ShopSpec(8, "honest", "bogus_old", throttled=True),
)
TEST_PARAMS = ScenarioParams(seed=5, minutes=0.5, shops=TEST_SHOPS, born_share=0.2,
                             born_between=(0.04, 0.07), throttle_window=(0.0, 1.0))


# -- scenario ----------------------------------------------------------------------------------


def test_scenario_is_a_function_of_its_parameters() -> None:
    a, b = Scenario(ScenarioParams.small(seed=3)), Scenario(ScenarioParams.small(seed=3))
    other = Scenario(ScenarioParams.small(seed=4))
    assert [p.path for p in a.pages] == [p.path for p in b.pages]
    for p, q in zip(a.pages, b.pages):
        assert np.array_equal(p.events, q.events) and p.birth == q.birth and p.size == q.size
        if p.kind == "product":
            assert a.record(p, len(p.events)) == b.record(q, len(q.events))
    assert [p.path for p in a.pages] != [p.path for p in other.pages]
    assert ScenarioParams.from_dict(TEST_PARAMS.to_dict()) == TEST_PARAMS


def test_default_scenario_mix() -> None:
    sc = Scenario(ScenarioParams())
    products = [p for p in sc.pages if p.kind == "product"]
    assert 1100 <= len(sc.pages) <= 1200
    days = np.array([p.mean_interval for p in products]) / 60.0
    shares = [np.mean((days >= lo) & (days < hi)) for lo, hi in
              [(0, 1), (1, 7), (7, 30), (30, 120), (120, np.inf)]]
    assert np.allclose(shares, [0.23, 0.15, 0.16, 0.16, 0.30], atol=0.04), shares
    hidden = [p for p in products if p.sitemap_only and not p.born_in_run]
    born = [p for p in products if p.born_in_run]
    assert 0.06 < len(hidden) / len(products) < 0.10
    assert 0.04 < len(born) / len(products) < 0.06
    assert 3 <= sum(p.sitemap_only for p in born) <= 10
    assert all(10_000 <= p.size <= 60_000 for p in products)
    assert {p.tier for p in products} == {3, 4} and all(
        ("/top-" in p.path) == (p.tier == 4) for p in products)
    # every change alters the record
    for p in products[:50]:
        records = [sc.record(p, v) for v in range(len(p.events) + 1)]
        assert all(r != s for r, s in zip(records, records[1:]))


def test_throttle_window_scales_with_the_run() -> None:
    sc = Scenario(ScenarioParams(minutes=10))
    throttled = next(i for i, s in enumerate(sc.params.shops) if s.throttled)
    assert not sc.throttled(throttled, 239.9) and sc.throttled(throttled, 240.0)
    assert sc.throttled(throttled, 299.9) and not sc.throttled(throttled, 300.0)
    assert not sc.throttled((throttled + 1) % 4, 250.0)
    assert sc.params.retry_after_seconds == 10


# -- server ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(TEST_PARAMS, tmp_path_factory.mktemp("liveweb")) as server:
        yield server


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def log_entry(web: ServerProcess, host: str, path: str) -> dict[str, Any]:
    return [e for e in web.entries() if e["host"] == host and e["path"] == path][-1]


def test_pages_are_the_scenarios_records_with_noise(web: ServerProcess) -> None:
    sc = Scenario(TEST_PARAMS)
    fast = sorted((p for p in sc.pages if p.kind == "product" and p.shop < 3 and p.birth == 0),
                  key=lambda p: p.mean_interval)[:6]
    for page in fast:
        url = web.base_url(page.shop) + page.path
        status, _, body = fetch(url)
        entry = log_entry(web, sc.hosts[page.shop], page.path)
        assert status == 200 and entry["page"] == page.pid and entry["kind"] == "product"
        assert entry["version"] == sc.version(page, entry["t"])
        record = sc.record(page, entry["version"])
        assert f'<span class="price">{record.price}</span>' in body
        assert f'<span class="stock">{record.stock_text}</span>' in body
        assert html.escape(record.description) in body
        assert len(body) == page.size == entry["body"]
        assert body != fetch(url)[2]  # the noise differs on every load


@pytest.mark.parametrize("shop,kind", [(0, "honest"), (1, "ignored"), (2, "absent")])
def test_validators_by_shop(web: ServerProcess, shop: int, kind: str) -> None:
    sc = Scenario(TEST_PARAMS)
    page = max((p for p in sc.shop_pages[shop] if p.kind == "product" and p.birth == 0),
               key=lambda p: p.mean_interval)  # the slowest: no change during the test
    url = web.base_url(shop) + page.path
    status, headers, _ = fetch(url)
    assert status == 200
    if kind == "absent":
        assert "ETag" not in headers and "Last-Modified" not in headers
        assert fetch(url, {"If-None-Match": '"v0-0"'})[0] == 200
        return
    etag, modified = headers["ETag"], headers["Last-Modified"]
    assert etag == f'"v{page.pid}-0"'
    assert parsedate_to_datetime(modified).timestamp() == int(web.origin + page.t0)
    expected = 304 if kind == "honest" else 200
    assert fetch(url, {"If-None-Match": etag})[0] == expected
    assert fetch(url, {"If-Modified-Since": modified})[0] == expected
    assert fetch(url, {"If-None-Match": f'"v{page.pid}-9"'})[0] == 200
    entry = log_entry(web, sc.hosts[shop], page.path)
    assert entry["inm"] and entry["version"] == 0


def test_born_pages_404_until_birth_then_appear(web: ServerProcess) -> None:
    sc = Scenario(TEST_PARAMS)
    born = [p for p in sc.pages if p.born_in_run and p.shop == 0]
    assert born and any(p.sitemap_only for p in born) and any(not p.sitemap_only for p in born)
    if web.now() < min(p.birth for p in born) - 0.3:  # normally: the server just started
        assert fetch(web.base_url(0) + born[0].path)[0] == 404
    deadline = time.monotonic() + 20
    while web.now() < max(p.birth for p in born) and time.monotonic() < deadline:
        time.sleep(0.05)
    for page in born:
        assert fetch(web.base_url(0) + page.path)[0] == 200
    sitemaps = fetch(web.base_url(0) + "/sitemaps/part-1.xml")[2] + \
        fetch(web.base_url(0) + "/sitemaps/part-2.xml")[2]
    listings = "".join(fetch(web.base_url(0) + c.path)[2] for c in sc.categories(0))
    for page in born:
        assert page.path in sitemaps
        assert (page.path in listings) is (not page.sitemap_only)
    entries = [e for e in web.entries() if e["page"] in {p.pid for p in born}]
    assert all((e["status"] == 404) is (e["t"] < sc.pages[e["page"]].birth) for e in entries)


def test_throttled_shop_answers_429_with_retry_after(web: ServerProcess) -> None:
    status, headers, _ = fetch(web.base_url(3) + "/")
    assert status == 429 and headers["Retry-After"] == str(TEST_PARAMS.retry_after_seconds)
    assert fetch(web.base_url(3) + "/robots.txt")[0] == 429
    assert fetch(web.base_url(0) + "/")[0] == 200


def test_robots_txt_crawl_delay_and_sitemap_lines(web: ServerProcess) -> None:
    for shop in range(3):
        robots = fetch(web.base_url(shop) + "/robots.txt")[2]
        assert f"Sitemap: {web.base_url(shop)}/sitemap.xml" in robots.splitlines()
        assert ("Crawl-delay: 1" in robots.splitlines()) is (shop == 2)
    hub = fetch(web.base_url(2) + "/")[2]
    assert "sitemap.xml" not in hub  # shop 2's sitemap is announced by robots.txt only


def test_sitemap_lastmod_kinds(web: ServerProcess) -> None:
    sc = Scenario(TEST_PARAMS)
    index = fetch(web.base_url(0) + "/sitemap.xml")[2]
    assert "<sitemapindex" in index and "/sitemaps/part-2.xml" in index
    child = fetch(web.base_url(0) + "/sitemaps/part-2.xml")[2]
    t = log_entry(web, sc.hosts[0], "/sitemaps/part-2.xml")["t"]
    rows = re.findall(r"<loc>http://[^/]+(/[^<]*)</loc><lastmod>([^<]+)</lastmod>", child)
    assert rows
    for path, lastmod in rows:  # accurate: the record's last change
        page = sc.page_at(0, path)
        assert lastmod == w3c(web.origin + sc.changed_at(page, sc.version(page, t)))
    bogus = fetch(web.base_url(1) + "/sitemap.xml")[2]
    stamps = set(re.findall(r"<lastmod>([^<]+)</lastmod>", bogus))
    t1 = log_entry(web, sc.hosts[1], "/sitemap.xml")["t"]
    assert stamps <= {w3c(web.origin + t1), w3c(web.origin + t1 + 1)}  # the serving time
    assert "<lastmod>" not in fetch(web.base_url(2) + "/sitemap.xml")[2]
    old = render_sitemap(sc, 3, None, 1.0, web.origin, web.origin + 1, "http://x")
    assert old and set(re.findall(r"<lastmod>([^<]+)</lastmod>", old)) == {"2020-01-01T00:00:00+00:00"}


def test_site_file_declares_the_scenarios_tiers_and_entry_points() -> None:
    site = tomllib.loads(SITE_FILE.read_text())
    tiers = {"low": 1, "normal": 2, "high": 3, "critical": 4}
    params = ScenarioParams()
    sc = Scenario(params)
    for page in sc.pages:
        url = f"http://{sc.hosts[page.shop]}:8000{page.path}"
        kind = next(t for t in site["page_types"] if re.search(t["url_pattern"], url))
        rule = next((r for r in kind.get("value_rules", []) if re.search(r["url_pattern"], url)), None)
        assert kind["name"] == page.kind
        assert tiers[(rule or kind)["tier"]] == page.tier
    base = [f"http://{h}:${{LIVEWEB_PORT}}" for h in params.hosts]
    assert site["seeds"] == [b + "/" for b in base]
    assert site["sitemaps"] == [b + "/sitemap.xml" for b, s in zip(base, params.shops)
                                if s.sitemap_in_site_file]
    assert site["politeness"]["min_delay_seconds"] == params.min_delay
    assert site["budget"]["billing"] == "credits"


# -- evaluator ---------------------------------------------------------------------------------


def test_fresh_seconds_by_hand() -> None:
    events = np.array([10.0, 20.0, 30.0])
    times, held = np.array([5.0, 12.0, 25.0]), np.array([0, 1, 2])
    # stale 0-5; fresh 5-10; stale 10-12; fresh 12-20; stale 20-25; fresh 25-30; stale 30-40
    assert fresh_seconds(events, times, held, 0.0, 40.0) == pytest.approx(5 + 8 + 5)
    assert fresh_seconds(events, times, held, 11.0, 22.0) == pytest.approx(8)
    assert fresh_seconds(events, np.zeros(0), np.zeros(0, np.int64), 0.0, 40.0) == 0.0


def _entry(t: float, host: str, path: str, status: int = 200, kind: str = "product",
           page: int | None = None, version: int | None = None, size: int = 1000) -> dict[str, Any]:
    return {"t": t, "host": host, "path": path, "status": status, "kind": kind, "page": page,
            "version": version, "bytes": size + 200, "body": size}


def test_evaluator_scores_a_hand_written_log_exactly() -> None:
    params = ScenarioParams.small(seed=2, minutes=1.0)
    sc = Scenario(params)
    page = next(p for p in sc.pages if p.kind == "product" and p.birth == 0
                and 3 <= np.count_nonzero(p.events < 50) <= 30 and p.events[0] > 1.6
                and np.all(np.diff(p.events[p.events < 61]) > 0.6))
    host = sc.hosts[page.shop]
    changes = page.events[page.events < 50]
    log = [_entry(1.0, host, page.path, page=page.pid, version=0)]
    for k, e in enumerate(changes, 1):  # fetched 0.5 s after each change
        log.append(_entry(float(e) + 0.5, host, page.path, page=page.pid, version=k))
    # a lying 304 after the next change keeps the stale copy; a 429 and a 500 are free
    later = float(page.events[len(changes)]) if len(page.events) > len(changes) else 60.0
    log.append(_entry(min(later + 0.1, 59.0), host, page.path, 304, page=page.pid,
                      version=len(changes) + 1))
    log += [_entry(0.5, host, "/robots.txt", kind="robots"), _entry(2.0, host, "/x", 429),
            _entry(3.0, host, "/y", 500, kind="other"), _entry(4.0, host, "/z", 404, kind="other")]
    result = evaluate_entries(sc, log, warmup=0.0, end=60.0, budget_rate=1.0)
    end = 60.0
    stale = 1.0 + 0.5 * len(changes) + (end - later if later < end else 0.0)
    fresh = end - stale
    weights = sum(p.value * (end - p.birth) for p in sc.pages if p.birth < end)
    w = result["window"]
    assert w["freshness"] == pytest.approx(page.value * fresh / weights)
    assert w["changes_detected"] == len(changes)
    assert w["credits"] == len(changes) + 4  # every 200, the 304, robots.txt and the 404
    assert w["credits_per_change"] == pytest.approx(w["credits"] / len(changes))
    assert w["not_modified"] == 1
    assert result["coverage"]["all"]["fetched"] == 1
    assert result["references"]["credits"]["rate"] == pytest.approx((len(changes) + 2) / end)
    ref = result["references"]["credits"]
    assert 0 < ref["uniform"] <= ref["optimum"] <= 1


def test_histories_keep_the_copy_on_304() -> None:
    log = [_entry(1, "h", "/p", page=7, version=0), _entry(2, "h", "/p", 304, page=7, version=0),
           _entry(3, "h", "/p", page=7, version=2), _entry(4, "h", "/p", 304, page=7, version=3)]
    h = histories(log)[7]
    assert h.held == [0, 0, 2, 2] and h.changed == [False, False, True, False]


def test_politeness_from_arrivals() -> None:
    params = ScenarioParams.small(minutes=10)
    sc = Scenario(params)
    delayed = next(i for i, s in enumerate(params.shops) if s.crawl_delay)
    throttled = next(i for i, s in enumerate(params.shops) if s.throttled)
    a = sc.hosts[0]
    log = [_entry(t, a, "/") for t in (1.0, 1.25, 1.4, 1.7)]  # one gap of 0.15
    d = sc.hosts[delayed]
    log += [_entry(t, d, "/", kind=k) for t, k in
            ((0.0, "hub"), (0.3, "robots"), (1.2, "hub"), (2.3, "hub"))]  # 0.9 after robots
    w0, _ = params.window
    ra = params.retry_after_seconds
    th = sc.hosts[throttled]
    log += [_entry(w0 - 1, th, "/"), _entry(w0 + 1, th, "/", 429),
            _entry(w0 + 1 + ra / 2, th, "/", 429), _entry(w0 + 2 + 1.5 * ra, th, "/", 429)]
    result = politeness(log, sc)
    assert result["hosts"][a]["short_gaps"] == 1
    assert result["hosts"][d]["short_gaps"] == 1  # 0.0 -> 0.3 is before robots.txt: 0.2 applies
    assert result["early_in_429"] == 1 and result["short_gaps"] == 2


# -- reference allocations ---------------------------------------------------------------------


def test_optimum_matches_brute_force_without_caps() -> None:
    value, lam, cost, budget = np.array([1.0, 3.0]), np.array([0.01, 0.05]), np.array([1.0, 2.0]), 0.05
    f = optimal_frequencies(value, lam, cost, budget)
    grid = np.linspace(0, budget / cost[0], 100_001)
    other = (budget - cost[0] * grid) / cost[1]
    total = value[0] * freshness(lam[0], grid) + value[1] * freshness(lam[1], other)
    assert np.sum(cost * f) == pytest.approx(budget)
    assert f[0] == pytest.approx(grid[np.argmax(total)], rel=1e-3)
    assert value_freshness(value, lam, f) == pytest.approx(total.max() / value.sum(), rel=1e-9)
    marginals = value * marginal(lam, f) / cost
    assert marginals[0] == pytest.approx(marginals[1], rel=1e-6)


def test_identical_pages_share_equally_and_hopeless_pages_get_nothing() -> None:
    f = optimal_frequencies(np.ones(4), np.full(4, 0.1), np.ones(4), 2.0)
    assert np.allclose(f, 0.5)
    f = optimal_frequencies(np.ones(3), np.array([0.01, 0.02, 100.0]), np.ones(3), 0.03)
    assert f[2] == 0 and f[:2].sum() == pytest.approx(0.03)
    assert freshness(np.array([0.0]), np.array([0.0]))[0] == 1.0


def test_host_caps_bind() -> None:
    rng = np.random.default_rng(1)
    n = 40
    value = np.where(np.arange(n) < 20, 30.0, 1.0)  # host 0 holds the valuable pages
    lam, cost, host = rng.uniform(0.01, 0.5, n), np.ones(n), (np.arange(n) >= 20).astype(int)
    caps = np.array([1.0, np.inf])
    f = optimal_frequencies(value, lam, cost, 4.0, host, caps)
    load = np.bincount(host, weights=f)
    assert load[0] == pytest.approx(1.0, rel=1e-6)  # capped, the rest goes to host 1
    assert np.sum(f) == pytest.approx(4.0, rel=1e-6)
    uncapped = optimal_frequencies(value, lam, cost, 4.0)
    assert np.bincount(host, weights=uncapped)[0] > 1.5
    assert value_freshness(value, lam, f) < value_freshness(value, lam, uncapped)
    u = uniform_frequencies(cost, 4.0, host, caps)
    assert np.allclose(u[:20], 1.0 / 20) and np.allclose(u[20:], 3.0 / 20)
    p = proportional_frequencies(lam, cost, 4.0, host, caps)
    assert np.bincount(host, weights=p)[0] == pytest.approx(1.0)
    assert np.allclose(p[20:] / lam[20:], p[20] / lam[20])
    tight = optimal_frequencies(value, lam, cost, 100.0, host, np.array([1.0, 2.0]))
    assert np.allclose(np.bincount(host, weights=tight), [1.0, 2.0], rtol=1e-6)  # budget idle


# -- round-robin baseline bookkeeping ----------------------------------------------------------


def test_rotation_takes_hosts_in_turn_and_skips_busy_ones() -> None:
    r = Rotation(max_pending=1)
    for url in ("http://a/1", "http://a/2", "http://b/1", "http://a/1#x"):
        r.add(url)
    assert len(r.known) == 3
    assert r.next() == "http://a/1" and r.next() == "http://b/1" and r.next() is None
    r.done("http://a/1")
    assert r.next() == "http://a/2"
    r.done("http://a/2")
    assert r.next() == "http://a/1"  # the cycle starts over
    bucket = TokenBucket(10.0, 5.0, now=0.0)
    assert bucket.ready(0.0)
    bucket.take()
    assert not bucket.ready(0.05) and bucket.ready(0.1)
    bucket.refund()
    assert bucket.tokens == pytest.approx(2.0)


def test_evaluate_reads_a_finished_server_log(tmp_path: Path) -> None:
    params = ScenarioParams.small(seed=9, minutes=0.5)
    with ServerProcess(params, tmp_path) as server:
        sc = Scenario(params)
        page = next(p for p in sc.pages if p.kind == "product" and p.shop == 0 and p.birth == 0)
        assert fetch(server.base_url(0) + page.path)[0] == 200
    result = evaluate_log(server.log, warmup=0.0, end=params.duration, cycle=10.0)
    assert result["coverage"]["all"]["fetched"] == 1
    assert 0 < result["window"]["freshness"] < 0.05


def test_a_crawlers_daemon_is_stopped_by_its_pidfile_only(tmp_path: Path) -> None:
    ours, other = tmp_path / "ours", tmp_path / "other"
    ours.mkdir(), other.mkdir()
    sleeper = "import sys, time; time.sleep(60)"
    mine = subprocess.Popen([sys.executable, "-c", sleeper, str(ours)])
    stranger = subprocess.Popen([sys.executable, "-c", sleeper, str(other)])
    try:
        (ours / "redis.pid").write_text(str(mine.pid))
        (other / "redis.pid").write_text(str(stranger.pid))
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "redis.pid").write_text(str(stranger.pid))  # names another folder
        _stop_daemon(ours / "redis.pid")
        _stop_daemon(tmp_path / "elsewhere" / "redis.pid")
        _stop_daemon(tmp_path / "missing.pid")
        assert mine.wait(10) != 0
        assert stranger.poll() is None
    finally:
        for process in (mine, stranger):
            process.kill()
            process.wait()


# -- lifecycle: deaths, restores, moves, temporary redirects, shops without a sitemap ----------

LC_SHOPS = (ShopSpec(12, "honest", "accurate"), ShopSpec(12, "ignored", "accurate"),
            ShopSpec(10, "absent", "absent", crawl_delay=1.0), ShopSpec(10, "honest", "absent"))
# Every fate begins 0.6-0.9 s after the start and lasts 3 s (restores, temporary redirects).
LC = Lifecycle(death_share=0.3, move_share=0.3, temp_share=0.2, start_between=(0.01, 0.015),
               dead_for=(0.05, 0.05), temp_for=(0.05, 0.05))
LC_PARAMS = ScenarioParams(seed=3, minutes=1.0, shops=LC_SHOPS).with_lifecycle(lifecycle=LC)
ORIGIN = 1_800_000_000.0


def _fates(sc: Scenario) -> list[Page]:
    return [p for p in sc.pages if p.fate is not None]


def test_the_lifecycle_is_off_by_default_and_a_function_of_its_parameters() -> None:
    assert ScenarioParams().lifecycle is None and not _fates(Scenario(ScenarioParams.small()))
    assert all(s.sitemap for s in ScenarioParams().shops)
    params = ScenarioParams.small(seed=2, minutes=6).with_lifecycle()
    assert ScenarioParams.from_dict(params.to_dict()) == params
    assert params.no_sitemap == (2, 3)
    a, b = Scenario(params), Scenario(ScenarioParams.from_dict(params.to_dict()))
    assert [(p.path, p.fate) for p in a.pages] == [(p.path, p.fate) for p in b.pages]
    with pytest.raises(ValueError, match="no_sitemap"):
        ScenarioParams.small().with_lifecycle([7])
    with pytest.raises(ValueError, match="must not exceed 1"):
        Lifecycle(death_share=0.5, move_share=0.4, temp_share=0.2)


def test_default_lifecycle_mix() -> None:
    params = ScenarioParams(minutes=6).with_lifecycle()
    sc = Scenario(params)
    products = [p for p in sc.pages if p.kind == "product"]
    fates = [p.fate for p in products if p.fate is not None]
    kinds = {(f.kind, f.status) for f in fates}
    assert kinds == {("death", 404), ("death", 410), ("move", 301), ("move", 308),
                     ("temp", 302), ("temp", 307)}
    deaths = [f for f in fates if f.kind == "death"]
    assert 0.05 < len(deaths) / len(products) < 0.11
    assert 0.3 < sum(f.restored for f in deaths) / len(deaths) < 0.7
    assert all(p.birth == 0 for p in products if p.fate is not None)
    for shop in params.no_sitemap:  # births there during the run, each one listed
        born = [p for p in sc.shop_pages[shop] if p.born_in_run]
        assert len(born) >= 5 and not any(p.sitemap_only for p in sc.shop_pages[shop])
        assert all(0.2 * params.duration <= p.birth <= 0.65 * params.duration for p in born)
    for p in products:  # a fate's changes are versions: a restore or move with a new record
        if p.fate is not None and p.fate.changes:
            at = p.fate.forced_changes[0]
            assert sc.version(p, at) == sc.version(p, at - 1e-6) + 1
            assert sc.record(p, sc.version(p, at)) != sc.record(p, sc.version(p, at) - 1)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def raw(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """A GET that does not follow redirects."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def _wait_until(web: ServerProcess, t: float) -> None:
    while web.now() < t:
        time.sleep(0.02)


def _check_lifecycle_answers(web: ServerProcess, sc: Scenario) -> set[tuple[str | None, int]]:
    """Fetch every fated product's URLs; each answer is the scenario's at its logged time."""
    seen = set()
    for page in _fates(sc):
        fate = page.fate
        assert fate is not None
        for path in (page.path, fate.new_path) if fate.new_path else (page.path,):
            status, headers, _ = raw(web.base_url(page.shop) + path)
            entry = log_entry(web, sc.hosts[page.shop], path)
            life = sc.life(page, path, entry["t"])
            assert (status, entry["status"], entry["life"]) == (life.status, life.status,
                                                                life.life)
            assert entry["page"] == page.pid
            if life.location:
                assert headers["Location"] == web.base_url(page.shop) + life.location
                assert entry["location"] == headers["Location"]
            seen.add((life.life, status))
    return seen


def test_lifecycle_answers_listings_and_sitemaps(tmp_path: Path) -> None:
    sc = Scenario(LC_PARAMS)
    fates = [p.fate for p in _fates(sc)]
    assert all(0.6 <= f.start <= 0.9 for f in fates if f is not None)
    with ServerProcess(LC_PARAMS, tmp_path) as web:
        _wait_until(web, 1.0)  # every fate has begun; no restore, no redirect has ended
        during = _check_lifecycle_answers(web, sc)
        assert during >= {("dead", 404), ("dead", 410), ("moved", 301), ("moved", 308),
                          ("temp", 302), ("temp", 307), (None, 200)}
        listings = {s: "".join(fetch(web.base_url(s) + c.path)[2] for c in sc.categories(s))
                    for s in range(len(sc.hosts))}
        sitemap = fetch(web.base_url(0) + "/sitemap.xml")[2]
        t = web.now()
        for page in _fates(sc):
            fate = page.fate
            assert fate is not None
            if page.category >= 0 and fate.start < t - 0.5:
                assert (f'href="{sc.path_at(page, t)}"' in listings[page.shop]) is fate.present(t)
            if fate.kind == "move" and page.shop == 0:
                assert fate.new_path in sitemap and f"{page.path}</loc>" not in sitemap
            if fate.kind == "death" and page.shop == 0:
                assert f"{page.path}</loc>" not in sitemap
        moved = next(p for p in _fates(sc) if p.shop == 0 and p.fate and p.fate.kind == "move")
        assert moved.fate is not None
        etag = f'"v{moved.pid}-{sc.version(moved, 0.0)}"'  # the old URL's, carried over the 301
        assert raw(web.base_url(0) + moved.fate.new_path, {"If-None-Match": etag})[0] == 200
        _wait_until(web, 4.0)  # restores and temporary redirects are over
        after = _check_lifecycle_answers(web, sc)
        assert ("temp", 302) not in after and ("dead", 404) in after  # never restored
        back = next(p for p in _fates(sc) if LC_SHOPS[p.shop].validators == "honest"
                    and p.fate and p.fate.restored)
        old_tag = f'"v{back.pid}-{sc.version(back, 0.0)}"'
        url = web.base_url(back.shop) + back.path
        status, headers, _ = raw(url, {"If-None-Match": old_tag})
        assert status == 200 and headers["ETag"] != old_tag  # a restored page is a new resource
        assert raw(url, {"If-None-Match": headers["ETag"]})[0] == 304
        for shop in LC_PARAMS.no_sitemap:
            assert "Sitemap:" not in fetch(web.base_url(shop) + "/robots.txt")[2]
            assert fetch(web.base_url(shop) + "/sitemap.xml")[0] == 404
            assert "sitemap.xml" not in fetch(web.base_url(shop) + "/")[2]


def test_newcomers_site_file_reads_the_product_pages() -> None:
    from selectolax.lexbor import LexborHTMLParser

    site = tomllib.loads(NEWCOMER_SITE_FILE.read_text())
    params = ScenarioParams(minutes=6).with_lifecycle()
    sc = Scenario(params)
    assert [t["name"] for t in site["page_types"]] == ["product"]
    kind = site["page_types"][0]
    assert "listing" not in kind and set(kind["volatile"]) <= set(kind["fields"])
    base = [f"http://{h}:${{LIVEWEB_PORT}}" for h in params.hosts]
    assert site["seeds"] == [b + "/" for b in base]
    assert site["sitemaps"] == [b + "/sitemap.xml" for b, s in zip(base, params.shops) if s.sitemap]
    assert newcomer_site_text(params) == NEWCOMER_SITE_FILE.read_text()
    assert "127.0.0.4" in newcomer_site_text(ScenarioParams().with_lifecycle([1, 3]))
    fields = [f for f in kind["fields"] if f not in kind["volatile"]]
    for page in [p for p in sc.pages if p.kind == "product"][:: 40]:
        for path in filter(None, (page.path, page.fate.new_path if page.fate else "")):
            url = f"http://{sc.hosts[page.shop]}:8000{path}"
            assert re.search(kind["url_pattern"], url)
            critical = any(re.search(r["url_pattern"], url) for r in kind["value_rules"])
            assert critical is (page.tier == 4)
        tree = LexborHTMLParser(render_page(sc, page, 1.0, ORIGIN, "token"))
        record = sc.record(page, sc.version(page, 1.0))
        for name in fields:
            node = tree.css_first(kind["fields"][name])
            assert node is not None and same_value(name, node.text(), record), name


# -- change events: what is owed, and the score ----------------------------------------------


def _get(t: float, sc: Scenario, page: Page, path: str | None = None, status: int = 200,
         version: int | None = None, life: str | None = None) -> dict[str, Any]:
    return {"t": t, "wall": ORIGIN + t, "host": sc.hosts[page.shop], "path": path or page.path,
            "method": "GET", "status": status, "kind": "product", "page": page.pid,
            "version": version if status in (200, 304) else None, "life": life,
            "bytes": 1000, "body": 800}


def _record(sc: Scenario, page: Page, version: int) -> dict[str, Any]:
    r = sc.record(page, version)
    return {"name": r.name, "price": r.price, "stock": r.stock_text, "description": r.description,
            "served_at": "Served at now"}


def _event(sc: Scenario, kind: str, page: Page, t: float, version: int | None,
           previous: int | None = None, previous_t: float | None = None, path: str | None = None,
           moved_to: str | None = None, status: int = 200) -> dict[str, Any]:
    url = f"http://{sc.hosts[page.shop]}:8000{path or page.path}"
    before = _record(sc, page, previous) if previous is not None else None
    now = _record(sc, page, version) if version is not None else None
    changed = {f: {"previous": before[f], "current": now[f]} for f in ("name", "price", "stock",
               "description") if before and now and before[f] != now[f]}
    return {"event_id": f"{kind}-{page.pid}-{t}", "kind": kind, "site": "shops",
            "page_type": "product", "url": url, "canonical_url": url,
            "detected_at": ORIGIN + t + 0.2,
            "previous_fetch_at": None if previous_t is None else ORIGIN + previous_t,
            "record": now, "previous": before, "changed_fields": changed,
            "moved_to": f"http://{sc.hosts[page.shop]}:8000{moved_to}" if moved_to else None,
            "status": status}


def _story(sc: Scenario) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A log of one page of each kind and the events a correct crawler reports for it."""
    fated = _fates(sc)
    plain = next(p for p in sc.pages if p.kind == "product" and p.fate is None and p.birth == 0
                 and len(p.events))
    dead = next(p for p in fated if p.fate and p.fate.restored and p.fate.changes)
    moved = next(p for p in fated if p.fate and p.fate.kind == "move" and p.fate.changes)
    temp = next(p for p in fated if p.fate and p.fate.kind == "temp")
    assert moved.fate and temp.fate
    log = [_get(0.1 * k, sc, p, version=0) for k, p in enumerate((plain, dead, moved, temp), 1)]
    log += [_get(5.0, sc, plain, version=1),
            _get(6.0, sc, dead, status=410, life="dead"), _get(7.0, sc, dead, status=410,
                                                                 life="dead"),
            _get(20.0, sc, dead, version=1),
            _get(8.0, sc, moved, status=301, life="moved"),
            _get(8.3, sc, moved, path=moved.fate.new_path, version=1),
            _get(30.0, sc, moved, status=301, life="moved"),  # a retired URL owes nothing
            _get(9.0, sc, temp, status=302, life="temp"), _get(25.0, sc, temp, version=0)]
    events = [_event(sc, "new", p, 0.1 * k, 0) for k, p in enumerate((plain, dead, moved, temp), 1)]
    events += [_event(sc, "changed", plain, 5.0, 1, 0, 0.1),
               _event(sc, "removed", dead, 7.0, None, 0, 0.2, status=410),
               _event(sc, "restored", dead, 20.0, 1, 0, 0.2),
               _event(sc, "moved", moved, 8.3, 1, 0, 0.3, moved_to=moved.fate.new_path,
                      status=301)]
    return log, events


def _score(sc: Scenario, log: list[dict[str, Any]], events: list[dict[str, Any]]
           ) -> dict[str, Any]:
    fields, volatile = page_type_fields(NEWCOMER_SITE_FILE)
    return score_events(sc, log, events, site="shops", fields=fields, volatile=volatile)


def test_a_correct_crawlers_events_score_full_marks() -> None:
    sc = Scenario(LC_PARAMS)
    log, events = _story(sc)
    owed = expected_events(sc, log)
    assert sorted(x.kind for x in owed) == ["changed", "moved", "new", "new", "new", "new",
                                            "removed", "restored"]
    result = _score(sc, log, events + [events[0]])  # a re-delivery counts once
    assert result["complete"] == result["correct_share"] == 1.0, result
    assert result["false"] == 0 and result["redelivered"] == 1 and result["duplicate_ids"] == 0
    assert result["by_kind"]["moved"] == {"expected": 1, "found": 1, "correct": 1, "false": 0,
                                          "tolerated": 0}


@pytest.mark.parametrize("case", ["missing", "wrong_fields", "temp_move", "twice", "late",
                                  "volatile_change", "same_id"])
def test_event_scoring_finds_what_is_wrong(case: str) -> None:
    sc = Scenario(LC_PARAMS)
    log, events = _story(sc)
    changed = next(e for e in events if e["kind"] == "changed")
    if case == "missing":
        events.remove(changed)
    elif case == "wrong_fields":
        changed["changed_fields"]["served_at"] = {"previous": "a", "current": "b"}
    elif case == "temp_move":
        temp = next(p for p in _fates(sc) if p.fate and p.fate.kind == "temp")
        events.append(_event(sc, "moved", temp, 9.0, 0, 0, 0.4, moved_to="/c/x/", status=302))
    elif case == "twice":
        events.append(dict(changed, event_id="another id", detected_at=changed["detected_at"] + 1))
    elif case == "same_id":  # one id on two different events: the second is false
        events.append(dict(events[1], event_id=events[0]["event_id"]))
    elif case == "late":
        changed["detected_at"] += 60
    elif case == "volatile_change":  # a noise-only difference reported as a change
        events.append(dict(events[0], event_id="noise", kind="changed",
                           previous=events[0]["record"], previous_fetch_at=ORIGIN + 0.1,
                           detected_at=ORIGIN + 5.0))
    result = _score(sc, log, events)
    row = result["by_kind"]["changed"]
    expect = {"missing": (0.875, 7 / 8, 0), "wrong_fields": (1.0, 7 / 8, 0),
              "temp_move": (1.0, 1.0, 1), "twice": (1.0, 1.0, 1), "late": (1.0, 7 / 8, 0),
              "volatile_change": (1.0, 1.0, 1), "same_id": (1.0, 1.0, 1)}[case]
    assert (result["complete"], result["correct_share"], result["false"]) == pytest.approx(expect)
    if case == "missing":
        assert row["found"] == 0 and result["missing"][0]["kind"] == "changed"
    if case in ("wrong_fields", "late"):
        assert len(result["mismatches"]) == 1 and row["correct"] == 0
    if case == "temp_move":
        assert result["false_by_reason"] == {"temporary redirect": 1}
    if case in ("twice", "volatile_change", "same_id"):
        assert result["false_by_reason"] == {"repeated": 1}
    assert result["duplicate_ids"] == (case == "same_id")


def test_owed_events_follow_a_moved_page() -> None:
    sc = Scenario(LC_PARAMS)
    moved = next(p for p in _fates(sc) if p.fate and p.fate.kind == "move")
    assert moved.fate is not None
    new = moved.fate.new_path
    # the new URL met first in a listing, then the 301: its "new" is tolerated, not owed
    log = [_get(0.1, sc, moved, version=0), _get(2.0, sc, moved, path=new, version=0),
           _get(3.0, sc, moved, status=301, life="moved"), _get(3.1, sc, moved, path=new,
                                                                version=0)]
    owed = expected_events(sc, log)
    assert [(x.kind, x.required) for x in owed] == [("new", True), ("new", False), ("moved", True)]
    assert owed[2].records == (0, 0) and owed[2].moved_to == new
    # first met through a 301 from a URL never fetched: a "new" at the URL it led to
    owed = expected_events(sc, [_get(3.0, sc, moved, status=301, life="moved"),
                                _get(3.1, sc, moved, path=new, version=1)])
    assert [(x.kind, x.path, x.required) for x in owed] == [("new", new, True)]
    # one 404 and back (no confirmation): no removal
    dead = next(p for p in _fates(sc) if p.fate and p.fate.restored)
    owed = expected_events(sc, [_get(0.1, sc, dead, version=0),
                                _get(1.0, sc, dead, status=404, life="dead"),
                                _get(9.0, sc, dead, version=0)])
    assert [x.kind for x in owed] == ["new"]


def test_lifecycle_costs_and_births_from_the_log() -> None:
    params = ScenarioParams.small(seed=1, minutes=6).with_lifecycle()
    sc = Scenario(params)
    dead = next(p for p in _fates(sc) if p.fate and p.fate.kind == "death" and not p.fate.restored)
    moved = next(p for p in _fates(sc) if p.fate and p.fate.kind == "move")
    assert dead.fate and moved.fate
    s, m = dead.fate.start, moved.fate.start
    log = [_get(s - 5, sc, dead, version=0)]
    # first 404, the confirmation (1), one more (2), a probe a minute later (not counted), one
    # more 5 s after the probe (3)
    log += [_get(s + d, sc, dead, status=404, life="dead") for d in (1, 2, 3, 63, 68)]
    log += [_get(m + d, sc, moved, status=301, life="moved") for d in (1, 2, 3)]
    costs = lifecycle_costs(sc, log, probe_seconds=60)
    assert costs["dead"] == {"pages": 1, "max": 3, "distribution": {"3": 1}, "over_two": 1}
    assert costs["moved"] == {"pages": 1, "max": 2, "distribution": {"2": 1}, "over_one": 1}
    born = [p for p in sc.pages if p.born_in_run and not params.shops[p.shop].sitemap
            and 72 <= p.birth <= 240]
    assert len(born) >= 2
    log = [_get(born[0].birth + 30, sc, born[0], version=0),
           _get(born[1].birth + 150, sc, born[1], version=0)]
    found = births_found(sc, log, warmup=72.0, cycle=60.0)["no_sitemap"]
    assert (found["pages"], found["found"], found["within_two"]) == (len(born), 2, 1)
    assert found["max_cycles"] == pytest.approx(2.5)


def test_a_crawl_killed_once_is_started_again(tmp_path: Path) -> None:
    marks = tmp_path / "starts"
    script = ("import sys, time; open(sys.argv[1], 'a').write('start\\n'); time.sleep(60)")
    invocation = Invocation([sys.executable, "-c", script, str(marks)], {})
    now = time.monotonic()
    status = run_crawler(invocation, tmp_path, now + 1.2, grace=5.0, kill_at_monotonic=now + 0.6)
    assert marks.read_text() == "start\nstart\n"
    assert (tmp_path / "crawl-2.log").exists() and status != 0
