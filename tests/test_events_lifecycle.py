"""Change events of real crawls over the page lifecycle: the demo shop with its lifecycle on (real
HTTP, time frozen until the test moves it), a real redis-server, the site's spider in subprocess
crawls (tests/test_pipelines_recordhash.py's harness). Products that die (404 and 410), move (301
and 308) and redirect for a while (302/307) are crawled before, during and after their fates; the
events are compared with the shop's truth."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.test_pipelines_recordhash import (  # noqa: F401
    HOSTS, Crawl, EmptyPageShop, Shop, crawl, module_redis, state,
)
from webcrawl.demo.catalog import DAY
from webcrawl.demo.lifecycle import Lifecycle
from webcrawl.demo.server import MultiHostServer
from webcrawl.state.pagestore import trigger_op
from webcrawl.state.records import MOVED, REMOVED

HOUR = 3600.0
#: Fates from one to two hours into the shop's time; the dead come back after eight hours, the
#: temporary redirects last five.
LIFECYCLE = Lifecycle(start=HOUR, span=HOUR, birth_share=0.0, death_share=0.2, gone_share=0.5,
                      restore_share=1.0, dead_for=(8 * HOUR, 8 * HOUR), move_share=0.2,
                      move_308_share=0.5, temp_share=0.1, temp_for=(5 * HOUR, 5 * HOUR))
#: No confirmation delay: a removal is confirmed by the next fetch, in the same crawl.
SETTINGS = {"WEBCRAWL_CONDITIONAL_ENABLED": False, "WEBCRAWL_REMOVAL_CONFIRM_SECONDS": 0}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The database the crawls write their copy to: SQLite in their data folder, or PostgreSQL."""
    if request.param == "sqlite":
        yield None
        return
    server = request.getfixturevalue("postgres_server")
    name = "lifecycle"
    yield server.new_database(name)
    server.drop_database(name)


@pytest.fixture(scope="module")
def lifecycle_shop(engine: str | None) -> Iterator[Shop]:
    """A shop of its own for each engine's scenario (the scenario moves its time)."""
    site = EmptyPageShop(seed=11, time_scale=1e-9, products=80, large_page_kb=16,
                         min_change_interval=HOUR, max_change_interval=2 * DAY,
                         lifecycle=LIFECYCLE)
    shop = Shop(MultiHostServer(site, hosts=HOSTS).start(), site)
    yield shop
    shop.server.stop()


def products(shop: Shop, kind: str, status: int) -> list[int]:
    catalog = shop.site.catalog
    return [i for i in range(len(catalog)) if (f := catalog.fate(i)) is not None
            and f.kind == kind and f.status == status]


@dataclass
class Scenario:
    dead: list[int]
    database: str
    moved: list[int]
    temp: list[int]
    plain: list[int]
    crawls: list[Crawl]
    old_urls: dict[int, str]
    times: list[float]  # the shop's time at each crawl
    states: dict[str, int]
    log: list[Any]
    whole_log: list[Any]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, lifecycle_shop, module_redis, state, engine) -> Scenario:
    """Three crawls: before the fates (every page new), two hours in (deaths, moves and a
    temporary redirect; records changed), ten hours in (the dead back). Before each later crawl
    the known pages are made due, and the removed ones are shown again (a listing would)."""
    shop, (redis_url, client) = lifecycle_shop, module_redis
    client.flushall()  # each engine's scenario from an empty crawl state
    tmp = tmp_path_factory.mktemp("lifecycle")
    database = engine or str(tmp / "data" / "webcrawl.db")
    # The harness runs no allocator; each crawl's database writer, though, drains into the copy.
    settings = {**SETTINGS, "WEBCRAWL_DATABASE_URL": database,
                "EXTENSIONS": {"webcrawl.extensions.database.DatabaseExtension": 550}}
    dead = products(shop, "death", 404)[:1] + products(shop, "death", 410)[:1]
    moved = products(shop, "move", 301)[:1] + products(shop, "move", 308)[:1]
    temp = (products(shop, "temp", 302) + products(shop, "temp", 307))[:1]
    plain = [i for i in range(len(shop.site.catalog)) if shop.site.catalog.fate(i) is None
             and shop.site.catalog.change_rate(i) > 0][:3]
    assert len(dead) == 2 and len(moved) == 2 and temp and plain
    chosen = dead + moved + temp + plain
    old_urls = {i: shop.product(i) for i in chosen}
    urls = list(old_urls.values())
    times = [shop.site.now()]
    crawls = [crawl(tmp, shop, redis_url, urls, "1", **settings)]
    shop.site.clock.advance(2.5 * HOUR)
    times.append(shop.site.now())
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "2", **settings))
    shop.site.clock.advance(8 * HOUR)
    times.append(shop.site.now())
    state.make_due(urls)
    for i in dead:
        state.batch.land(old_urls[i].split("/")[2].split(":")[0], trigger_op(old_urls[i]))
    state.batch.flush()
    mark = len(shop.server.log())
    crawls.append(crawl(tmp, shop, redis_url, urls, "3", **settings))
    states = {url: state.record(url).state for url in urls}
    return Scenario(dead, database, moved, temp, plain, crawls, old_urls, times, states,
                    shop.server.log()[mark:], shop.server.log())


def kinds(feed: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for event in feed:
        out.setdefault(event["kind"], []).append(event["canonical_url"])
    return out


def test_every_page_is_new_once_with_the_record_the_shop_served(scenario, lifecycle_shop) -> None:
    first = scenario.crawls[0].feed
    assert list(kinds(first)) == ["new"]
    assert sorted(kinds(first)["new"]) == sorted(scenario.old_urls.values())
    for event in first:
        i = lifecycle_shop.site.product_index(event["canonical_url"], scenario.times[0])
        assert {k: event["record"][k] for k in ("price", "stock", "name")} == {
            k: lifecycle_shop.site.page_record(i, scenario.times[0])[k] for k in ("price", "stock", "name")}


def test_a_page_answering_404_or_410_twice_is_removed_with_its_last_record(scenario) -> None:
    second = scenario.crawls[1].feed
    removed = [e for e in second if e["kind"] == "removed"]
    assert sorted(e["canonical_url"] for e in removed) == sorted(scenario.old_urls[i] for i in scenario.dead)
    first = {e["canonical_url"]: e for e in scenario.crawls[0].feed}
    for event in removed:
        assert event["record"] is None and event["status"] in (404, 410)
        assert event["previous"] == first[event["canonical_url"]]["record"]
        assert event["previous_fetch_at"] == first[event["canonical_url"]]["detected_at"]
    assert scenario.crawls[1].stats["webcrawl/records/suspect"] == 2  # one answer is no removal


def test_a_permanent_redirect_is_a_move_whose_history_follows_the_page(scenario, lifecycle_shop) -> None:
    moves = [e for e in scenario.crawls[1].feed if e["kind"] == "moved"]
    assert sorted(e["canonical_url"] for e in moves) == sorted(scenario.old_urls[i] for i in scenario.moved)
    for event in moves:
        i = lifecycle_shop.site.product_index(event["canonical_url"], scenario.times[0])
        assert event["moved_to"] == lifecycle_shop.site.product_url(i, scenario.times[1])
        assert event["url"] == event["canonical_url"]
        truth = lifecycle_shop.site.page_record(i, scenario.times[1])
        assert event["record"]["price"] == truth["price"]
        differs = {f for f in ("price", "stock", "description")
                   if event["previous"][f] != event["record"][f]}
        assert set(event["changed_fields"]) == differs
    new_urls = {e["moved_to"] for e in moves}
    assert not [e for c in scenario.crawls for e in c.feed if e["kind"] == "new"
                and e["canonical_url"] in new_urls]  # a moved page is never a new page
    assert all(scenario.states[scenario.old_urls[i]] == MOVED for i in scenario.moved)


def test_the_old_url_of_a_moved_page_is_retired(scenario, lifecycle_shop) -> None:
    old_paths = {scenario.old_urls[i].split(str(lifecycle_shop.server.port), 1)[1] for i in scenario.moved}
    assert not [e for e in scenario.log if e.path in old_paths]  # made due: still not fetched


def test_a_temporary_redirect_is_no_event(scenario) -> None:
    temp = {scenario.old_urls[i] for i in scenario.temp}
    during = scenario.crawls[1]  # the redirect lasts from the fate's start for five hours
    assert not [e for e in during.feed if e["canonical_url"] in temp]
    assert not [e for e in during.feed if e["kind"] == "moved" and e["canonical_url"] in temp]
    assert during.stats["webcrawl/spider/items/temporary_redirect"] == len(temp)


def test_a_removed_page_answering_again_is_restored(scenario, lifecycle_shop) -> None:
    restored = [e for e in scenario.crawls[2].feed if e["kind"] == "restored"]
    assert sorted(e["canonical_url"] for e in restored) == sorted(scenario.old_urls[i] for i in scenario.dead)
    removed = {e["canonical_url"]: e for e in scenario.crawls[1].feed if e["kind"] == "removed"}
    for event in restored:
        assert event["previous"] == removed[event["canonical_url"]]["previous"]
        i = lifecycle_shop.site.product_index(event["canonical_url"], scenario.times[2])
        assert event["record"]["price"] == lifecycle_shop.site.page_record(i, scenario.times[2])["price"]
    assert not any(scenario.states[scenario.old_urls[i]] == REMOVED for i in scenario.dead)


def test_changes_chain_each_event_to_the_previous_one(scenario) -> None:
    """For every page, each event's previous record is the record of the event before it (the
    page's history followed through its move): no change was lost between two crawls."""
    def stable(record: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if record is None else {k: v for k, v in record.items() if k != "served_at"}

    last: dict[str, dict[str, Any] | None] = {}
    ids = set()
    for c in scenario.crawls:
        for event in c.feed:
            assert event["event_id"] not in ids
            ids.add(event["event_id"])
            url = event["canonical_url"]
            if event["kind"] != "new":
                assert stable(event["previous"]) == last[url], (event["kind"], url)
            kept = event["record"] if event["kind"] != "removed" else event["previous"]
            last[event["moved_to"] or url] = stable(kept)


# -- The copy in the database the crawls wrote (each crawl's writer drained it as it closed) -----

def rows(scenario: Scenario, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    from webcrawl.database import open_database

    db = open_database(scenario.database)
    try:
        with db.transaction() as tx:
            return tx.rows(sql, params)
    finally:
        db.close()


def test_every_event_is_one_version_and_every_fetch_one_check(scenario, lifecycle_shop) -> None:
    events = {e["event_id"]: e for c in scenario.crawls for e in c.feed}
    versions = dict(rows(scenario, "SELECT event_id, kind FROM versions"))
    assert versions == {i: e["kind"] for i, e in events.items()}
    port = str(lifecycle_shop.server.port)
    fetched = sorted((e.path, e.status) for e in scenario.whole_log
                     if e.path not in ("/robots.txt",))
    checked = sorted((url.split(port, 1)[1], status)
                     for url, status in rows(scenario, "SELECT url, status FROM checks"))
    assert checked == fetched


def test_removed_and_moved_pages_carry_their_state_and_the_copy_is_the_truth(scenario, lifecycle_shop) -> None:
    from webcrawl.database import open_database
    from webcrawl.database.queries import copy_as_of, copy_now

    site = lifecycle_shop.site
    db = open_database(scenario.database)
    try:
        with db.transaction() as tx:
            # The crawls' own clock: after the first crawl, and between the second and the third.
            first = max(e["detected_at"] for e in scenario.crawls[0].feed)
            second = max(e["detected_at"] for e in scenario.crawls[1].feed)
            now = {p["canonical_url"]: p for p in copy_now(tx, "demo")}
            then = {p["canonical_url"]: p for p in copy_as_of(tx, "demo", first + 1e-3)}
            during = {p["canonical_url"]: p for p in copy_as_of(tx, "demo", second + 1e-3)}
    finally:
        db.close()
    for i in scenario.moved:
        old, new = scenario.old_urls[i], site.product_url(i, scenario.times[2])
        assert old not in now and now[new]["state"] == "alive"  # one line, at its new URL
        assert old in then and new not in then
    for i in scenario.dead:
        url = scenario.old_urls[i]
        assert during[url]["state"] == "removed" and during[url]["record"]["name"] == site.page_record(i, scenario.times[0])["name"]
        assert now[url]["state"] == "alive"
    for url, line in then.items():  # the copy as it stood after the first crawl: what was served
        i = site.product_index(url, scenario.times[0])
        truth = site.page_record(i, scenario.times[0])
        assert {k: line["record"][k] for k in ("price", "stock", "name")} == {
            k: truth[k] for k in ("price", "stock", "name")}
    assert len(then) == len(scenario.old_urls)
