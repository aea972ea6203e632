"""The record-hash pipeline's lifecycle branches in-process, on a real redis-server and a real body
store: 404/410 answers confirmed into a removal, a move's event, hubs, extraction errors, the
body stored before the landing (its pointer in the event) and after it when the pop could not
foresee the change."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.runtimes import run, runtime_for
from webcrawl.items import PageItem
from webcrawl.pipelines._bodies import BodyKeeper
from webcrawl.pipelines.recordhash import RecordHashPipeline
from webcrawl.state.pagestore import observe_op
from webcrawl.state.records import KIND_HUB, MOVED, REMOVED, SUSPECT
from webcrawl.store import BodyReader, Pointer, bodies_folder, body_hash

HOST = "a.example"
URL = f"http://{HOST}/product/1/x"


@pytest.fixture
def runtime(redis_url: str, tmp_path: Path) -> Any:
    runtime = runtime_for(redis_url, {"WEBCRAWL_DATA_DIR": str(tmp_path),
                                      "WEBCRAWL_REMOVAL_CONFIRM_SECONDS": 60})
    yield runtime
    runtime.close()


def pipeline(runtime: Any, tmp_path: Path) -> RecordHashPipeline:
    from webcrawl.sites.schema import FieldRule, PageType

    site = SimpleNamespace(name="shop", trust=None, page_types=[
        PageType(name="product", url_pattern=r"/product/", tier=2, fields=(FieldRule("price", "p"),),
                 volatile=frozenset())])
    bodies = BodyKeeper(runtime.stats, tmp_path, machine="box")
    return RecordHashPipeline(runtime, runtime.stats, site=site, bodies=bodies)


def item(url: str = URL, record: dict[str, Any] | None = None, **kwargs: Any) -> PageItem:
    return PageItem(url=url, canonical_url=kwargs.pop("canonical_url", url), site="shop",
                    page_type=kwargs.pop("page_type", "product"), status=kwargs.pop("status", 200),
                    fetch_time=kwargs.pop("fetch_time", 1000.0),
                    record={"price": "1"} if record is None else record,
                    body=kwargs.pop("body", b"<p>1</p>"), **kwargs)


def test_a_new_page_stores_its_body_first_and_its_event_points_at_it(runtime, tmp_path) -> None:
    p = pipeline(runtime, tmp_path)
    done = run(p.process_item(item()))
    assert done.change == "new" and done.event["kind"] == "new"
    [entry] = list(runtime.events.entries())
    assert entry.event == done.event  # the feed's object is the recorded one
    pointer = Pointer.parse(entry.fields["b"])
    with BodyReader(bodies_folder(tmp_path, "shop")) as reader:
        assert reader.read(pointer).body == b"<p>1</p>"
    assert runtime.pages.get(URL, HOST).body8 == bytes.fromhex(body_hash(b"<p>1</p>")[:16])


def test_a_revisit_whose_pop_saw_the_same_hash_stores_its_body_only_if_the_landing_asks(
        runtime, tmp_path) -> None:
    p = pipeline(runtime, tmp_path)
    first = run(p.process_item(item()))
    known = {"hash8": first.content_hash[:16]}
    same = run(p.process_item(item(fetch_time=2000.0, fetch={"page_stats": known})))
    assert same.change == "unchanged" and runtime.stats.get_value("webcrawl/bodies/skipped") == 1
    # Another process lands another record after this page was popped: the landing finds a
    # change the pop did not foresee, and the body is stored after it.
    runtime.batch.land(HOST, observe_op(URL, full=True, time=2500.0, record_hash="ee" * 16))
    runtime.batch.flush()
    late = run(p.process_item(item(fetch_time=3000.0, fetch={"page_stats": known})))
    assert late.change == "changed" and late.event["kind"] == "changed"
    assert runtime.stats.get_value("webcrawl/bodies/asked") == 1
    assert runtime.stats.get_value("webcrawl/bodies/stored") == 2
    entry = list(runtime.events.entries())[-1]
    with BodyReader(bodies_folder(tmp_path, "shop")) as reader:  # the event has its body
        assert reader.read(Pointer.parse(entry.fields["b"])).fetch_time == 3000.0
    assert runtime.pages.get(URL, HOST).visits == 3  # landed once, after the body


def test_404_then_410_is_one_removal_and_a_200_restores(runtime, tmp_path) -> None:
    p = pipeline(runtime, tmp_path)
    run(p.process_item(item()))
    gone = run(p.process_item(item(status=404, record={}, body=b"", fetch_time=2000.0)))
    assert gone.change == "suspect" and gone.event is None
    assert runtime.pages.get(URL, HOST).state == SUSPECT
    removed = run(p.process_item(item(status=410, record={}, body=b"", fetch_time=3000.0)))
    assert removed.change == "removed" and removed.event["kind"] == "removed"
    assert removed.event["previous"] == {"price": "1"} and removed.event["status"] == 410
    assert runtime.pages.get(URL, HOST).state == REMOVED
    back = run(p.process_item(item(record={"price": "5"}, fetch_time=4000.0)))
    assert back.event["kind"] == "restored"
    assert back.event["changed_fields"] == {"price": {"previous": "1", "current": "5"}}


def test_a_page_reached_by_a_permanent_redirect_reports_the_move(runtime, tmp_path) -> None:
    p = pipeline(runtime, tmp_path)
    old = f"http://{HOST}/product/1/old"
    run(p.process_item(item(old)))
    moved = run(p.process_item(item(URL, fetch_time=2000.0, moved_from=old, moved_url=old + "?x")))
    assert moved.event["kind"] == "moved"
    assert (moved.event["url"], moved.event["canonical_url"], moved.event["moved_to"]) == (
        old + "?x", old, URL)
    assert runtime.pages.get(old, HOST).state == MOVED
    assert runtime.pages.get(URL, HOST).visits == 1  # the old page's history went along


def test_a_hub_lands_its_links_and_makes_no_event(runtime, tmp_path) -> None:
    p = pipeline(runtime, tmp_path)
    hub = f"http://{HOST}/category/lamps/"
    first = run(p.process_item(item(hub, page_type=None, record={"links": [URL]}, body=b"")))
    assert first.change == "new" and first.event is None
    again = run(p.process_item(item(hub, page_type=None, record={"links": [URL, URL + "2"]},
                                    body=b"", fetch_time=2000.0)))
    assert again.change == "changed" and again.event is None  # a birth seen: no record event
    record = runtime.pages.get(hub, HOST)
    assert record.kind == KIND_HUB and record.changes == 1
    assert runtime.stats.get_value("webcrawl/bodies/stored") is None
    assert list(runtime.events.entries()) == []


def test_an_extraction_error_lands_nothing_and_is_counted_per_field(runtime, tmp_path, caplog) -> None:
    p = pipeline(runtime, tmp_path)
    for t in (1000.0, 2000.0):
        bad = run(p.process_item(item(record={"price": None}, fetch_time=t,
                                      extraction_errors={"price": "call us"})))
        assert bad.change == "error" and bad.event is None
    assert runtime.pages.get(URL, HOST) is None
    assert runtime.stats.get_value("webcrawl/extract/errors/product/price") == 2
    assert sum("did not parse" in r.message for r in caplog.records) == 1  # warned once
