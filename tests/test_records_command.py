"""``scrapy records``, ``scrapy history``, ``scrapy dbwriter`` and ``scrapy events`` past the
retention, as real subprocesses over a real SQLite copy written from a real redis-server's
records: JSON lines and CSV, the copy at a past time, a page's versions with their diffs, one-line
errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests._cli import scrapy
from tests.test_database import DAY, T0, Crawl, history_of_a, price

A = "http://shop.example/p/1"


@pytest.fixture
def copy(redis_url: str, tmp_path: Path) -> dict[str, str]:
    """A crawl "shop" whose page A has four events, its copy not yet written: the environment
    of a command that reads both."""
    crawl = Crawl(redis_url, str(tmp_path / "webcrawl.db"))
    history_of_a(crawl)
    crawl.fetch("http://shop.example/p/2", {"price": price(3.0)}, T0 + DAY)
    crawl.db.close()
    crawl.client.close()
    return {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path)}


def run(args: list[str], env: dict[str, str], cwd: Path) -> Any:
    done = scrapy(args, cwd, env=env)
    return done


def test_dbwriter_then_records_now_and_as_of(copy, tmp_path) -> None:
    done = run(["dbwriter", "shop", "--until-idle"], copy, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote 5 events and 7 checks" in done.stdout
    now = [json.loads(line) for line in run(["records", "shop"], copy, tmp_path).stdout.splitlines()]
    assert [(p["canonical_url"], p["state"], p["record"]["price"]) for p in now] == [
        (A, "alive", price(15.0)), ("http://shop.example/p/2", "alive", price(3.0))]
    assert list(now[0]) == ["site", "canonical_url", "url", "page_type", "state", "moved_to",
                            "record", "first_seen", "last_checked", "last_changed"]
    out = tmp_path / "copy.csv"
    assert run(["records", "shop", "--as-of", str(T0 + 3.5 * DAY), "-o", str(out)], copy,
               tmp_path).returncode == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [(r["canonical_url"], r["state"]) for r in rows] == [
        (A, "removed"), ("http://shop.example/p/2", "alive")]
    assert json.loads(rows[0]["record"])["price"] == price(17.49)


def test_history_shows_each_version_with_its_diff_and_checks(copy, tmp_path) -> None:
    run(["dbwriter", "shop", "--until-idle"], copy, tmp_path)
    done = run(["history", "shop", A], copy, tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "4 version(s)" in text and "removed" in text and "restored" in text
    assert 'price: {"amount": 19.99, "currency": "USD"} -> {"amount": 17.49, "currency": "USD"}' in text
    assert "1 unchanged" in text  # the check between two versions
    versions = json.loads(run(["history", "shop", A, "--json"], copy, tmp_path).stdout)
    assert [v["kind"] for v in versions] == ["new", "changed", "removed", "restored"]


def test_events_past_the_retention_come_from_the_database(copy, tmp_path, redis_url) -> None:
    run(["dbwriter", "shop", "--until-idle"], copy, tmp_path)
    import redis

    client = redis.Redis.from_url(redis_url)
    client.delete("webcrawl:{shop:0}:events")  # trimmed: past the retention
    client.close()
    done = run(["events", "shop", "--since", str(T0)], copy, tmp_path)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(e["kind"] for e in events) == ["changed", "new", "new", "removed", "restored"]
    times = [e["detected_at"] for e in events]
    assert times == sorted(times) and times[0] == T0


@pytest.mark.parametrize(("args", "message"), [
    (["records", "shop"], "no database at"),
    (["records", "shop", "--as-of", "soon"], "--as-of 'soon'"),
    (["history", "shop"], "name a site and a URL"),
])
def test_mistakes_are_one_line(copy, tmp_path, args, message) -> None:
    env = {**copy, "WEBCRAWL_DATA_DIR": str(tmp_path / "elsewhere")}
    done = run(args, env, tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("scrapy: error:") and message in line


def test_history_of_a_page_the_copy_does_not_hold(copy, tmp_path) -> None:
    run(["dbwriter", "shop", "--until-idle"], copy, tmp_path)
    done = run(["history", "shop", "http://shop.example/nowhere"], copy, tmp_path)
    assert done.returncode == 2 and "no version of http://shop.example/nowhere" in done.stderr
