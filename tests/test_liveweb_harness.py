"""The live-freshness harness itself (bench/liveweb): the scenario is deterministic, the server
serves what the scenario says, the evaluator scores a hand-written log exactly, the reference
allocations are right and respect per-host caps, and the round-robin baseline's bookkeeping."""

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
from bench.liveweb.freshness import fresh_seconds, histories
from bench.liveweb.oracle import (freshness, marginal, optimal_frequencies, proportional_frequencies,
                                  uniform_frequencies, value_freshness)
from bench.liveweb.crawlers import SITE_FILE, _stop_daemon
from bench.liveweb.pages import render_sitemap, w3c
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
