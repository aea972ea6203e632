"""``python -m webcrawl.demo`` as a user runs it: a real child process serving the shop and running
``scrapy crawl demo`` with the embedded Redis in a temporary data folder, twice, so that the second
run resumes the crawl; every cycle's files are kept and numbered as the report numbers them, and
the first run's feed holds every kind of change event, each true of the shop."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from tests.crawls import REPO
from webcrawl.change.events import EVENT_FIELDS, KINDS
from webcrawl.demo.__main__ import (FASTEST_CHANGE, HOSTS, LIFECYCLE, REMOVAL_CONFIRM_SECONDS,
                                    REMOVED_PROBE_SECONDS, SLOWEST_CHANGE, crawl_command)
from webcrawl.demo._summary import CrawlRun, Paths, cycle_line, event_counts
from webcrawl.demo.server import default_hosts
from webcrawl.demo.shop import ShopSite
from webcrawl.state.embedded import EmbeddedRedis

PRODUCTS = 200  # the shop's default catalog


def run_demo(cwd: Path, data: Path, *args: str) -> tuple[str, float]:
    env = dict(os.environ, WEBCRAWL_DATA_DIR=str(data),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SCRAPY_SETTINGS_MODULE", None)  # the runner must set it itself
    env.pop("WEBCRAWL_REDIS_URL", None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "webcrawl.demo", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, time.monotonic() - started


def row(output: str, page_type: str) -> list[int]:
    """The numbers of a page type's row in the printed table."""
    match = re.search(rf"^{re.escape(page_type)}\s+([\d ]+)$", output, re.M)
    assert match, output
    return [int(n) for n in match.group(1).split()]


def kept_cycle(folder: Path) -> tuple[dict, list[dict], datetime, datetime]:
    """A cycle folder's stats, feed lines and real start and finish times."""
    stats = json.loads((folder / "stats.json").read_text())
    changes = [json.loads(line) for line in (folder / "changes.jsonl").read_text().splitlines()]
    start, finish = (datetime.fromisoformat(stats[k]) for k in ("start_time", "finish_time"))
    assert start.tzinfo is not None and start < finish, stats
    assert "Dumping Scrapy stats" in (folder / "crawl.log").read_text()
    return stats, changes, start, finish


def test_help_speaks_of_the_product() -> None:
    done = subprocess.run([sys.executable, "-m", "webcrawl.demo", "--help"], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "cycles/N/" in text and "--fresh" in text
    for leak in ("issue", ":func:", ":class:", ":mod:", "``", "so later"):
        assert leak not in text, f"{leak!r} in --help:\n{text}"


def on_a_busy_port(module: str, args: list[str], cwd: Path, env: dict[str, str]
                   ) -> tuple[int, subprocess.CompletedProcess[str]]:
    """``python -m module --port P *args`` while P is taken on 127.0.0.2: the port, the outcome
    (one line on stderr, exit 2)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.2", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", module, "--port", str(port), *args], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return port, done


def test_a_busy_port_is_one_line_with_the_way_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = dict(os.environ, WEBCRAWL_DATA_DIR=str(data),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("WEBCRAWL_REDIS_URL", None)
    port, done = on_a_busy_port("webcrawl.demo", ["--cycles", "1"], tmp_path, env)
    assert f"the demo shop did not start on port {port}" in done.stderr
    assert "Address already in use" in done.stderr and "--port 0 picks a free port" in done.stderr
    assert not EmbeddedRedis(data)._alive(), "the demo left its redis-server running"


def allowed(budget: float, cycle_seconds: float) -> float:
    """The most a continuous cycle may spend: its budget, what the spend bucket carried into it
    (at most 3 s of the budget rate; half that on a new crawl), the second of refill before the
    tick that ends the cycle, and what was in flight then (two connections to each of 4 hosts)."""
    return budget + (3.0 + 1.0) * budget / cycle_seconds + 8


def demo_shop(folder: Path, port: int) -> ShopSite:
    """The truth of the shop a demo run served: its products, clock and lifecycle."""
    origin = json.loads((folder / "shop-clock.json").read_text())["origin"]
    site = ShopSite(0, time_scale=1.0, epoch=origin, clock_origin=origin, lifecycle=LIFECYCLE,
                    min_change_interval=FASTEST_CHANGE, max_change_interval=SLOWEST_CHANGE)
    site.bind(default_hosts(HOSTS), port)
    return site


def product_of(url: str) -> int:
    match = re.search(r"/product/(\d+)/", url)
    assert match, url
    return int(match.group(1))


def check_lifecycle_events(events: list[dict], site: ShopSite) -> None:
    """Every removed, moved and restored event is true of the shop when it was detected."""
    for event in events:
        i, when = product_of(event["url"]), event["detected_at"]
        fate, state = site.catalog.fate(i), site.product_state(i, when)
        if event["kind"] == "removed":
            assert (state.state, state.status) == ("dead", event["status"]), event
        elif event["kind"] == "moved":
            assert state.state == "moved" and event["moved_to"] == state.location, event
            assert fate is not None and event["url"] == site.product_url(i, fate.start - 1), event
        elif event["kind"] == "restored":
            assert state.state == "alive" and fate is not None and fate.kind == "death", event
            assert fate.end <= when, event


def test_demo_keeps_every_cycle_and_numbers_them_as_the_report(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first, seconds = run_demo(tmp_path, data, "--fresh", "--port", "0")
    assert seconds < 150, f"the demo took {seconds:.0f} s"
    # Each cycle is one continuous-mode crawl that stops after its cycle.
    assert re.search(r"^cycle 1 \(\d\d:\d\d:\d\d-\d\d:\d\d:\d\d UTC\): crawl finished "
                     r"\(stop_after_cycles\)", first, re.M), first
    port = re.search(r"port (\d+)", first)
    assert port, first
    folder = data / "demo"
    site = demo_shop(folder, int(port.group(1)))
    stats, changes, started, finished = kept_cycle(folder / "cycles" / "1")
    # The first cycle discovers every product the shop lists meanwhile (and may revisit some: the
    # shop changes); products are born and die from 20 s on, after it in most runs.
    span = [started.timestamp(), finished.timestamp()]
    present = [sum(1 for i in range(PRODUCTS) if f(site.catalog.listed(i, t) for t in span))
               for f in (all, any)]
    pages, records, new, *_, listed = row(first, "product")
    assert present[0] <= new <= present[1] and pages == records >= new and listed == 0, first
    assert row(first, "category")[-1] >= present[0]  # every product listed
    assert row(first, "(no type)")[0] > 0
    assert "robots.txt      4 fetched" in first
    sitemaps = re.search(r"^sitemaps\s+(\d+) read", first, re.M)
    assert sitemaps and int(sitemaps.group(1)) >= 4, first
    for odd in ("binary 1", "encoding/broken 1", "truncated 1"):
        assert odd in first, first

    assert stats["finish_reason"] == "stop_after_cycles"
    assert stats["webcrawl/parse/page_type/product"] == pages
    new_products = sum(c["page_type"] == "product" and c["kind"] == "new" for c in changes)
    assert present[0] <= new_products <= present[1]
    assert all(list(c) == list(EVENT_FIELDS) for c in changes)
    assert all(c["record"] for c in changes if c["page_type"] == "product" and c["kind"] != "removed")
    assert (data / "appendonly.aof").exists(), "the embedded Redis keeps its data in the data dir"
    assert not (tmp_path / ".webcrawl").exists(), "WEBCRAWL_DATA_DIR was not respected"
    assert not EmbeddedRedis(data)._alive(), "the demo left its redis-server running"

    # The two revisit cycles of the first run see every kind of event but the returns (a dead
    # product comes back 12-18 s after its death, near the first run's end: on a loaded machine
    # its probe falls in the next run's cycle, checked below), each true of the shop, and their
    # lines count them.
    later = [kept_cycle(folder / "cycles" / str(n)) for n in (2, 3)]
    events = [c for k in later for c in k[1]]
    assert set(Counter(c["kind"] for c in events)) >= set(KINDS) - {"restored"}, \
        Counter(c["kind"] for c in events)
    check_lifecycle_events(events, site)
    for n, (_, cycle_events, _, _) in zip((2, 3), later):
        counts = Counter(c["kind"] for c in cycle_events)
        assert re.search(rf"^cycle {n} .*events: {counts['new']} new, {counts['changed']} changed, "
                         rf"{counts['removed']} removed, {counts['moved']} moved, "
                         rf"{counts['restored']} restored \(\d+ records unchanged\)", first, re.M), first

    # Same port, same crawl state, the shop going on: a revisit cycle on a small budget, within
    # it (and what the bucket carried); then the report over all cycles.
    second, _ = run_demo(tmp_path, data, "--port", port.group(1), "--cycles", "1", "--budget", "80",
                         "--cycle-seconds", "10")
    cycles = re.findall(r"^cycle (\d+) \([^)]*\): (\w+) in [\d.]+ s, (\d+) requests", second, re.M)
    assert [c[0] for c in cycles] == ["4"], second
    for _, _, requests in cycles:
        assert int(requests) <= allowed(80, 10), second
    report = second.split("webcrawl report", 1)[1]
    reported = re.findall(r"^(\d+)\s+\S+ \S+\s+([\d,]+)\s+([\d,]+)\s", report, re.M)
    assert [r[0] for r in reported] == ["1", "2", "3", "4"], report
    for n, budget, spent in reported:
        budget_, spent_ = (float(v.replace(",", "")) for v in (budget, spent))
        assert budget_ == (80 if n == "4" else 450), report
        assert spent_ <= allowed(budget_, 10 if n == "4" else 15), report
    product = re.search(r"^product\s+(\d+)\s+(\d+)\s+(\d+)", report, re.M)
    assert product and int(product.group(3)) > 0, f"no change found: {report}"
    assert (folder / "report.html").read_text().startswith("<!DOCTYPE html>")

    # Every cycle's feed, stats and log are kept; the top feed holds them all, in order.
    kept = [kept_cycle(folder / "cycles" / str(n)) for n in (1, 2, 3, 4)]
    assert sorted(p.name for p in (folder / "cycles").iterdir()) == ["1", "2", "3", "4"]
    assert all(a[3] <= b[2] < b[3] for a, b in zip(kept, kept[1:]))
    every = [json.loads(line) for line in (folder / "changes.jsonl").read_text().splitlines()]
    assert every == [c for k in kept for c in k[1]]
    assert sum(1 for k in kept[1:] for c in k[1] if c["kind"] == "changed") > 0
    assert any(c["kind"] == "restored" for k in kept[1:] for c in k[1]), "no product seen back"
    assert not EmbeddedRedis(data)._alive(), "the demo left its redis-server running"


def test_a_cycle_line_counts_the_feeds_events_by_kind(tmp_path: Path) -> None:
    run = CrawlRun(0, 15.2, {"webcrawl/records/unchanged/product": 7, "finish_reason": "stop_after_cycles",
                             "downloader/request_count": 40}, 2, tmp_path)
    assert "events: 0 new, 0 changed, 0 removed, 0 moved, 0 restored (7 records unchanged)" in cycle_line(run)
    kinds = ["new", "changed", "changed", "removed", "moved", "restored", "restored", "restored"]
    lines = [json.dumps({"kind": k, "url": f"http://127.0.0.3/product/{n}/x"}) for n, k in enumerate(kinds)]
    run.changes.write_text("\n".join(lines) + '\n{"torn": ')
    assert event_counts(run.changes) == Counter(kinds)
    assert "events: 1 new, 2 changed, 1 removed, 1 moved, 3 restored (7 records unchanged)" in cycle_line(run)


def test_the_crawl_confirms_removals_within_a_cycle(tmp_path: Path) -> None:
    command = crawl_command(8000, Paths(tmp_path), False, 450, 15.0)
    settings = dict(arg.split("=", 1) for arg in command[command.index("-s"):] if arg != "-s")
    assert float(settings["WEBCRAWL_REMOVAL_CONFIRM_SECONDS"]) == REMOVAL_CONFIRM_SECONDS < 15
    assert float(settings["WEBCRAWL_REMOVED_PROBE_SECONDS"]) == REMOVED_PROBE_SECONDS
    # A product dead for the shortest time is probed after its return: seen restored, not alive.
    assert REMOVAL_CONFIRM_SECONDS + REMOVED_PROBE_SECONDS > LIFECYCLE.dead_for[1]


def test_the_demo_server_on_a_busy_port_is_one_line_too(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port, done = on_a_busy_port("webcrawl.demo.serve", ["--hosts", "2"], tmp_path, env)
    assert f"cannot listen on port {port}" in done.stderr and "--port 0" in done.stderr
