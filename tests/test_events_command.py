"""``scrapy events`` as a real subprocess over events a real redis-server holds: JSON lines of the
contract, in the order recorded, filtered by time, kind and site; appended or written anew; one-line
errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._cli import scrapy
from tests.test_state_events import State
from webcrawl.change.events import EVENT_FIELDS

HOST = "shop.example"


@pytest.fixture
def events(redis_url: str) -> list[dict[str, Any]]:
    """Four events of crawl "shop": two new pages, a change, a removal."""
    state = State(redis_url, crawl="shop")
    a, b = f"http://{HOST}/p/1", f"http://{HOST}/p/2"
    state.fetch(a, {"price": "1"}, 100.0)
    state.fetch(b, {"price": "2"}, 200.0)
    state.fetch(a, {"price": "3"}, 300.0)
    state.gone(b, 400.0)
    state.gone(b, 500.0)
    out = state.events()
    state.client.close()
    return out


def run(args: list[str], redis_url: str, tmp_path: Path) -> Any:
    return scrapy(["events", *args], tmp_path, env={"WEBCRAWL_REDIS_URL": redis_url})


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_every_event_in_the_order_recorded(events, redis_url, tmp_path) -> None:
    done = run(["shop"], redis_url, tmp_path)
    assert done.returncode == 0, done.stderr
    got = lines(done.stdout)
    assert got == events and [e["kind"] for e in got] == ["new", "new", "changed", "removed"]
    assert all(list(e) == list(EVENT_FIELDS) for e in got)


def test_since_and_kind_filter(events, redis_url, tmp_path) -> None:
    got = lines(run(["shop", "--since", "250", "--kind", "changed,removed"], redis_url, tmp_path).stdout)
    assert [e["kind"] for e in got] == ["changed", "removed"]
    got = lines(run(["shop", "--since", "1970-01-01T00:04:10Z", "--kind", "new"], redis_url,
                    tmp_path).stdout)
    assert got == []


def test_append_completes_a_feed_and_overwrite_starts_it_anew(events, redis_url, tmp_path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps(events[0]) + "\n")  # a feed cut short after its first event
    assert run(["shop", "--since", "200", "-o", str(feed)], redis_url, tmp_path).returncode == 0
    assert lines(feed.read_text()) == events  # nothing lost, nothing twice
    assert run(["shop", "-O", str(feed), "--kind", "new"], redis_url, tmp_path).returncode == 0
    assert [e["kind"] for e in lines(feed.read_text())] == ["new", "new"]


def test_events_of_another_site_in_the_crawl_are_left_out(events, redis_url, tmp_path) -> None:
    done = run(["other", "--crawl", "shop"], redis_url, tmp_path)
    assert done.returncode == 0 and done.stdout == ""


@pytest.mark.parametrize(("args", "message"), [
    (["nosuch"], "no crawl 'nosuch'"),
    (["shop", "--kind", "gone"], "--kind gone: not an event kind"),
    (["shop", "--since", "yesterday"], "--since 'yesterday'"),
    (["shop", "-o", "a", "-O", "b"], "-o and -O both given"),
    ([], "name one site"),
])
def test_mistakes_are_one_line(events, redis_url, tmp_path, args, message) -> None:
    done = run(args, redis_url, tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("scrapy: error:") and message in line
