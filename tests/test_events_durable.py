"""Change events survive a kill -9, and two crawl processes on one machine store every body: real
``scrapy crawl demo`` processes in continuous mode against the demo shop (its products changing,
dying, moving and coming back in real time) in a subprocess that logs every request, sharing a
real redis-server and one data folder.

A first process is killed with SIGKILL while events flow; two processes then go on with the
crawl. Read back with the event record (what ``scrapy events`` reads):

- no event id twice, and every event the processes' feeds got is in the record, identical;
- for every page, each event's previous record is the record of the event before it (the
  page's history followed through moves): a change recorded without its event would break the
  chain, and a change recorded twice would repeat it;
- every event's record is what the shop served at the fetch that detected it;
- every event that carries a record points at its stored body, readable from whichever writer
  folder holds it (both processes wrote), fetched when the event was detected.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._cli import scrapy
from tests.crawls import finish, start_crawl, stats_of, wait_for
from webcrawl.demo.lifecycle import Lifecycle
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.state.client import connect
from webcrawl.state.eventlog import Delivered, EventLog
from webcrawl.state.layout import CrawlLayout
from webcrawl.store import BodyReader, Pointer, bodies_folder

FIELDS = ("name", "price", "stock", "sku", "description", "category")
#: Fates from 8 s into the shop's time, over 30 s; the dead come back after 8 to 15 s.
LIFECYCLE = Lifecycle(start=8, span=30, birth_share=0.05, death_share=0.1, restore_share=0.5,
                      dead_for=(8, 15), move_share=0.08, temp_share=0.04, temp_for=(5, 10))


@dataclass
class Run:
    shop: ServerProcess
    entries: list[Delivered]
    feeds: dict[str, list[dict[str, Any]]]
    stats: dict[str, dict[str, Any]]
    data: Path
    killed_at: float


def _settings(redis_url: str, data: Path, port: int, feed: Path, **more: Any) -> dict[str, Any]:
    return {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(data),
            "WEBCRAWL_DEMO_PORT": port, "WEBCRAWL_CYCLE_CONTINUOUS": True,
            "WEBCRAWL_CYCLE_SECONDS": 8, "WEBCRAWL_BUDGET_PER_CYCLE": 240,
            "WEBCRAWL_REMOVAL_CONFIRM_SECONDS": 2, "WEBCRAWL_REMOVED_PROBE_SECONDS": 6,
            # What the killed process's writer held is taken over by the others soon.
            "WEBCRAWL_DATABASE_CLAIM_SECONDS": 3,
            "FEEDS": json.dumps({str(feed): {"format": "jsonlines", "overwrite": True}}),
            "LOG_LEVEL": "INFO", **more}


def _feed(path: Path) -> list[dict[str, Any]]:
    """The lines of a feed file; a last line cut by the kill is left out."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory, redis_server) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("durable")
    redis_server.client().flushall()
    url = redis_server.url
    data = tmp / "data"
    shop = start_server_process("shop", 4, tmp / "requests.jsonl", seed=5, products=60,
                                time_scale=1.0, min_change_interval=15, max_change_interval=300,
                                large_page_kb=16, lifecycle=LIFECYCLE)
    client, _, _ = connect(url)
    log = EventLog(client, CrawlLayout("demo"))
    try:
        victim = start_crawl("demo", _settings(url, data, shop.port, tmp / "victim.jsonl"), tmp,
                             log_name="victim.log")
        # Killed once the first pages are known and changes flow (past the new pages' events).
        wait_for(lambda: log.count() >= 90 or victim.poll() is not None, 120, "events to flow")
        assert victim.poll() is None, (tmp / "victim.log").read_text()[-3000:]
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        killed_at = time.time()
        pair = [start_crawl("demo", _settings(url, data, shop.port, tmp / f"{n}.jsonl",
                                              WEBCRAWL_STOP_AFTER_SECONDS=25), tmp,
                            log_name=f"{n}.log") for n in ("a", "b")]
        for process in pair:
            assert finish(process, 180) == 0
        entries = list(log.entries())
        feeds = {n: _feed(tmp / f"{n}.jsonl") for n in ("victim", "a", "b")}
        stats = {n: stats_of((tmp / f"{n}.log").read_text()) for n in ("a", "b")}
        yield Run(shop, entries, feeds, stats, data, killed_at)
    finally:
        client.close()
        shop.stop()


def test_no_event_twice_and_every_fed_event_is_recorded(run: Run) -> None:
    ids = [e.event["event_id"] for e in run.entries]
    assert len(ids) == len(set(ids))
    recorded = {e.event["event_id"]: e.event for e in run.entries}
    for name, feed in run.feeds.items():
        assert feed, f"{name} fed no event"
        for event in feed:
            assert recorded[event["event_id"]] == event, name
    assert {e.event["kind"] for e in run.entries} >= {"new", "changed"}


def test_each_pages_events_chain_without_a_gap(run: Run) -> None:
    last: dict[str, tuple[str, ...] | None] = {}
    for entry in run.entries:
        event = entry.event
        if event["page_type"] != "product":
            continue
        url = event["canonical_url"]
        previous = tuple(event["previous"][f] for f in FIELDS) if event["previous"] else None
        if event["kind"] == "new":
            assert url not in last, f"{url} new twice"
        else:
            assert previous == last[url], f"{event['kind']} of {url} does not follow its last event"
        if event["kind"] == "changed":
            assert previous != tuple(event["record"][f] for f in FIELDS), "a change that is none"
        kept = event["previous"] if event["kind"] == "removed" else event["record"]
        last[event["moved_to"] or url] = tuple(kept[f] for f in FIELDS) if kept else None


def test_every_record_is_what_the_shop_served(run: Run) -> None:
    site = run.shop.site
    served: dict[str, list[Any]] = {}
    for entry in run.shop.read_log():
        if entry.status == 200:
            served.setdefault(entry.path, []).append(entry)
    checked = 0
    for item in run.entries:
        event = item.event
        if event["record"] is None or event["status"] != 200 or event["page_type"] != "product":
            continue
        url = event["moved_to"] or event["url"]
        path = url.split(str(run.shop.port), 1)[1]
        fetched = [e for e in served[path] if e.wall <= event["detected_at"] + 0.5]
        answer = fetched[-1]
        i = site.product_index(url, site.clock.at(answer.wall))
        truth = site.page_record(i, site.clock.at(answer.wall))
        assert {f: event["record"][f] for f in FIELDS} == {f: truth[f] for f in FIELDS}, url
        checked += 1
    assert checked >= 60


def test_every_event_with_a_record_points_at_its_body_in_either_processs_store(run: Run) -> None:
    writers = set()
    with BodyReader(bodies_folder(run.data, "demo")) as reader:
        for item in run.entries:
            if item.event["kind"] == "removed" or item.event["status"] == 304:
                continue  # no body: a removal, a return a 304 showed
            assert item.fields["b"], item.event
            pointer = Pointer.parse(item.fields["b"])
            body = reader.read(pointer)
            assert body.fetch_time == item.event["detected_at"]
            assert body.url == (item.event["moved_to"] or item.event["canonical_url"])
            writers.add(pointer.writer)
    for name, stats in run.stats.items():
        assert stats.get("webcrawl/bodies/stored", 0) > 0, f"process {name} stored no body"
        assert not any(k.startswith("webcrawl/bodies/errors") for k in stats), stats
    assert len(writers) >= 2  # the killed process's folder, taken again, and another


def test_scrapy_body_reads_a_body_by_the_pointer_its_event_gives(run: Run, tmp_path: Path) -> None:
    item = next(e for e in reversed(run.entries) if e.event["kind"] == "changed")
    done = scrapy(["body", "demo", "--pointer", item.fields["b"], "--meta"], tmp_path,
                  env={"WEBCRAWL_DATA_DIR": str(run.data)})
    assert done.returncode == 0, done.stderr
    assert item.event["canonical_url"] in done.stdout


def test_the_database_has_every_event_once_though_a_writer_died_and_two_shared_the_file(run: Run) -> None:
    """The killed process's writer died with it; the two others wrote to one SQLite file."""
    from webcrawl.database import open_database

    db = open_database(run.data / "webcrawl.db")
    try:
        with db.transaction() as tx:
            versions = tx.rows("SELECT event_id, kind FROM versions")
            checks = tx.rows("SELECT url, status FROM checks WHERE time > %s", (run.killed_at,))
    finally:
        db.close()
    assert sorted(versions) == sorted((e.event["event_id"], e.event["kind"]) for e in run.entries)
    # Every product page fetch of the two processes started after the kill is one check (the
    # killed process's last fetches may never have landed: they are fetched again).
    port = str(run.shop.port)
    fetched = sorted((e.path, e.status) for e in run.shop.read_log()
                     if e.path.startswith("/product/") and e.wall > run.killed_at)
    checked = sorted((url.split(port, 1)[1], status) for url, status in checks
                     if "/product/" in url)
    assert checked == fetched
    for stats in run.stats.values():
        assert stats.get("webcrawl/database/batches", 0) > 0
