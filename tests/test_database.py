"""The database writer (webcrawl.database) on both engines, a real SQLite file and a real
PostgreSQL, fed from a real redis-server's event and check records as the land script writes
them: versions, typed values, checks and pages right; each event applied once whatever the
redelivery or the order; moves followed; the copy as it stood at a past time; the check log rolled
up past its retention; schema versions; a database that goes away and comes back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_state_events import State
from webcrawl.database import DatabaseUnavailable, DatabaseWriter, SchemaTooNew, migrate, open_database
from webcrawl.database import schema
from webcrawl.database.apply import roll_up
from webcrawl.database.queries import copy_as_of, copy_now, events_since, history
from webcrawl.state.batch import LandSettings
from webcrawl.state.streams import ShardStream

HOST = "shop.example"
A, B, C = (f"http://{HOST}/p/{n}" for n in (1, 2, 3))
DAY = 86_400.0
T0 = 1_800_000_000.0  # recent enough that no check is past the retention


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "copy.db")
    return request.getfixturevalue("postgres_url")


class Crawl(State):
    """A crawl state with a check log, and a writer of its records into a database."""

    def __init__(self, redis_url: str, db_url: str) -> None:
        super().__init__(redis_url, crawl="shop")
        s = self.batch.settings
        self.batch.settings = LandSettings(s.default_delay, events_retention_seconds=s.events_retention_seconds,
                                           removal_confirm_seconds=0, removed_probe_seconds=60,
                                           checks_kept=100_000)
        self.db = open_database(db_url)
        self.checks = ShardStream(self.client, self.layout, "checks")

    def writer(self, name: str = "w1", **kwargs: Any) -> DatabaseWriter:
        return DatabaseWriter(self.db, self.log, self.checks, consumer=name, **kwargs)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.db.transaction() as tx:
            return tx.rows(sql, params)

    def drain(self, writer: DatabaseWriter | None = None) -> None:
        writer = writer or self.writer()
        while writer.step():
            pass


@pytest.fixture
def crawl(redis_url: str, db_url: str) -> Iterator[Crawl]:
    view = Crawl(redis_url, db_url)
    yield view
    view.db.close()
    view.client.close()


def price(amount: float, currency: str = "USD") -> dict[str, Any]:
    return {"amount": amount, "currency": currency}


def history_of_a(crawl: Crawl) -> None:
    """A new at T0, changed at +1 d, unchanged at +2 d, gone (404 twice) at +3 d, back at +4 d:
    four events, six checks."""
    crawl.fetch(A, {"price": price(19.99), "name": "lamp"}, T0)
    crawl.fetch(A, {"price": price(17.49), "name": "lamp"}, T0 + DAY)
    crawl.fetch(A, {"price": price(17.49), "name": "lamp"}, T0 + 2 * DAY)
    crawl.gone(A, T0 + 3 * DAY)
    crawl.gone(A, T0 + 3 * DAY + 60, status=410)
    crawl.fetch(A, {"price": price(15.0), "name": "lamp"}, T0 + 4 * DAY)


def test_versions_chain_and_typed_values_and_checks(crawl: Crawl) -> None:
    history_of_a(crawl)
    crawl.drain()
    versions = crawl.rows("SELECT kind, valid_from, valid_to FROM versions ORDER BY valid_from")
    assert versions == [("new", T0, T0 + DAY), ("changed", T0 + DAY, T0 + 3 * DAY + 60),
                        ("removed", T0 + 3 * DAY + 60, T0 + 4 * DAY),
                        ("restored", T0 + 4 * DAY, None)]
    values = crawl.rows("SELECT v.kind, f.field, f.text_value, f.number_value, f.currency"
                        " FROM version_values f JOIN versions v ON v.event_id = f.event_id"
                        " WHERE f.field = 'price' ORDER BY v.valid_from")
    assert values == [("new", "price", None, 19.99, "USD"), ("changed", "price", None, 17.49, "USD"),
                      ("restored", "price", None, 15.0, "USD")]
    outcomes = [r[0] for r in crawl.rows("SELECT outcome FROM checks ORDER BY time")]
    assert outcomes == ["new", "changed", "unchanged", "gone", "removed", "restored"]
    [page] = crawl.rows("SELECT state, first_seen, last_checked, last_changed, last_status FROM pages")
    assert page == ("alive", T0, T0 + 4 * DAY, T0 + 4 * DAY, 200)


def test_each_event_is_applied_once_through_a_writer_killed_before_it_acknowledged(crawl: Crawl) -> None:
    history_of_a(crawl)
    dying = crawl.writer("dying")
    dying.open()
    events = crawl.log.read("db", "dying", 3)  # it took three events, applied them, and died
    with crawl.db.transaction() as tx:
        from webcrawl.database.apply import apply_events

        apply_events(tx, events)
    survivor = crawl.writer("survivor", claim_after=0.0)
    crawl.drain(survivor)
    assert survivor.counts.events == 1  # the three already applied change nothing
    assert crawl.rows("SELECT COUNT(*), COUNT(DISTINCT event_id) FROM versions") == [(4, 4)]
    assert crawl.log.lag() == {"db": 0.0}


def test_versions_are_right_whatever_order_their_events_arrive_in(crawl: Crawl) -> None:
    history_of_a(crawl)
    events = list(crawl.log.entries())
    from webcrawl.database.apply import apply_events

    migrate(crawl.db)
    for item in reversed(events):  # one transaction each, newest first
        with crawl.db.transaction() as tx:
            apply_events(tx, [item])
    versions = crawl.rows("SELECT kind, valid_from, valid_to FROM versions ORDER BY valid_from")
    assert [v[2] for v in versions] == [T0 + DAY, T0 + 3 * DAY + 60, T0 + 4 * DAY, None]
    [page] = crawl.rows("SELECT state, record FROM pages")
    assert page[0] == "alive"


def test_a_move_is_one_page_at_its_new_url_with_the_old_ones_history(crawl: Crawl) -> None:
    crawl.fetch(A, {"price": price(1.0)}, T0)
    crawl.fetch(B, {"price": price(2.0)}, T0 + DAY, moved_from=A)
    crawl.fetch(C, {"price": price(3.0)}, T0 + DAY)
    crawl.drain()
    with crawl.db.transaction() as tx:
        now = list(copy_now(tx, "shop"))
        assert [(p["canonical_url"], p["state"], p["first_seen"]) for p in now] == [
            (B, "alive", T0), (C, "alive", T0 + DAY)]
        steps = history(tx, "shop", B)
        assert [(s["kind"], s["canonical_url"], s["valid_to"]) for s in steps] == [
            ("new", A, T0 + DAY), ("moved", B, None)]
        assert steps[1]["changed_fields"] == {"price": {"previous": price(1.0), "current": price(2.0)}}
        before = list(copy_as_of(tx, "shop", T0 + 60))
        assert [(p["canonical_url"], p["record"]) for p in before] == [(A, {"price": price(1.0)})]
    [old] = crawl.rows("SELECT state, moved_to FROM pages WHERE canonical_url = %s", (A,))
    assert old == ("moved", B)


def test_the_copy_as_it_stood(crawl: Crawl) -> None:
    history_of_a(crawl)
    crawl.fetch(B, {"price": price(9.0)}, T0 + 2 * DAY)
    crawl.drain()
    with crawl.db.transaction() as tx:
        def at(t: float) -> dict[str, Any]:
            return {p["canonical_url"]: p for p in copy_as_of(tx, "shop", t)}

        assert list(at(T0 - 1)) == []
        assert at(T0 + 1)[A]["record"]["price"] == price(19.99)
        day2 = at(T0 + 2.5 * DAY)
        assert day2[A]["record"]["price"] == price(17.49) and day2[A]["last_checked"] == T0 + 2 * DAY
        assert day2[A]["last_changed"] == T0 + DAY and day2[B]["first_seen"] == T0 + 2 * DAY
        gone = at(T0 + 3.5 * DAY)[A]
        assert (gone["state"], gone["record"]["price"]) == ("removed", price(17.49))
        assert at(T0 + 5 * DAY)[A]["state"] == "alive"
        assert [e["kind"] for e in events_since(tx, "shop", T0 + DAY, T0 + 4 * DAY)] == [
            "changed", "new", "removed"]


def test_checks_past_their_retention_are_rolled_up_per_page_and_day(crawl: Crawl) -> None:
    history_of_a(crawl)
    crawl.drain()
    with crawl.db.transaction() as tx:
        assert roll_up(tx, T0 + 2.5 * DAY) == 3
        assert roll_up(tx, T0 + 2.5 * DAY) == 0  # nothing is counted twice
    days = crawl.rows("SELECT day, checks, changed, unchanged FROM check_days ORDER BY day")
    assert [d[1:] for d in days] == [(1, 1, 0), (1, 1, 0), (1, 0, 1)]
    assert crawl.rows("SELECT COUNT(*) FROM checks") == [(3,)]
    with crawl.db.transaction() as tx:
        assert history(tx, "shop", A)[1]["rolled_up"][0]["checks"] == 1


def test_a_newer_database_is_refused_and_an_older_one_upgraded(crawl: Crawl, monkeypatch) -> None:
    assert migrate(crawl.db) == 0 and migrate(crawl.db) == schema.SCHEMA_VERSION
    monkeypatch.setitem(schema.MIGRATIONS, schema.SCHEMA_VERSION + 1,
                        ("ALTER TABLE pages ADD COLUMN note TEXT",))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1)
    assert migrate(crawl.db) == schema.SCHEMA_VERSION - 1  # upgraded from the version before
    assert crawl.rows("SELECT COUNT(note) FROM pages") == [(0,)]
    monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION - 1)
    with pytest.raises(SchemaTooNew, match="newer than this webcrawl's .*upgrade webcrawl"):
        migrate(crawl.db)


def _until(condition: Any, what: str, seconds: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_writer_waits_out_a_database_that_stays_locked_and_loses_nothing(redis_url: str,
                                                                          tmp_path: Path) -> None:
    crawl = Crawl(redis_url, str(tmp_path / "copy.db"))
    history_of_a(crawl)
    writer = crawl.writer()
    writer.open()
    crawl.db.RETRIES = 2  # type: ignore[misc]
    crawl.db._conn.execute("PRAGMA busy_timeout = 50")
    blocker = open_database(tmp_path / "copy.db")
    stop = threading.Event()
    runner = threading.Thread(target=writer.run, args=(stop,), kwargs={"idle_seconds": 0.05})
    try:
        with blocker.transaction():  # another process holds the write lock
            runner.start()
            _until(lambda: writer.counts.failures >= 1, "the writer to find the database locked")
            assert writer.counts.events == 0
        _until(lambda: writer.counts.events == 4, "the writer to catch up")
    finally:
        stop.set()
        runner.join(30)
    assert crawl.rows("SELECT COUNT(*) FROM checks") == [(6,)]
    assert crawl.log.lag() == {"db": 0.0}
    blocker.close()
    crawl.db.close()
    crawl.client.close()
