"""Whether one change event keeps the contract, given the event a correct crawler owed
(:class:`~bench.liveweb.expected_events.Expected`) and the truth of the page's records.

The contract (webcrawl/change/events.py): exactly the fields of :data:`EVENT_FIELDS`; ``url``
as fetched (the old URL for ``moved``) and ``canonical_url`` naming the same page;
``detected_at`` the detecting fetch's time and ``previous_fetch_at`` the time of a fetch that
gave (or confirmed) the previous record, within :data:`TIME_TOLERANCE_SECONDS` of the server's
arrival time; ``record`` null only for ``removed``, ``previous`` null only for ``new``, both
with the page type's fields and the truth's values; ``changed_fields`` every non-volatile field
that differs, with both values; ``moved_to`` the new URL for ``moved`` only; ``status`` the
detecting fetch's (for ``moved``: the 301/308, or the 200 of the new URL it led to).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from bench.liveweb.expected_events import Expected
from bench.liveweb.scenario import Page, Record, Scenario

__all__ = ["EVENT_FIELDS", "KINDS", "TIME_TOLERANCE_SECONDS", "TRUTH", "EventChecker", "locate",
           "same_value"]

EVENT_FIELDS = ("event_id", "kind", "site", "page_type", "url", "canonical_url", "detected_at",
                "previous_fetch_at", "record", "previous", "changed_fields", "moved_to", "status")
KINDS = ("new", "changed", "removed", "moved", "restored")
#: How far an event's times may be from the server's arrival time of the fetch they name.
TIME_TOLERANCE_SECONDS = 5.0

#: The truth of each record field, by the name the newcomer's site file gives it.
TRUTH: dict[str, Callable[[Record], str]] = {
    "name": lambda r: r.name, "price": lambda r: r.price, "stock": lambda r: r.stock_text,
    "description": lambda r: r.description}


def locate(sc: Scenario, url: Any) -> tuple[Page, str] | None:
    """The page and path a URL names on the test web (None: not one of its product pages)."""
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if parts.hostname not in sc.hosts:
        return None
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    page = sc.page_at(sc.hosts.index(parts.hostname), path)
    return (page, path) if page is not None and page.kind == "product" else None


def same_value(name: str, got: Any, record: Record) -> bool:
    """Whether an extracted value is the truth's: text with whitespace collapsed; a price also
    as a number or a typed ``{"amount": ..., "currency": ...}``."""
    if name == "price" and isinstance(got, dict):
        amount = got.get("amount")
        return (isinstance(amount, (int, float)) and got.get("currency") in (None, "USD")
                and abs(amount - record.price_cents / 100) < 0.005)
    if name == "price" and isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(got - record.price_cents / 100) < 0.005
    return isinstance(got, str) and " ".join(got.split()) == " ".join(TRUTH[name](record).split())


def _near(value: Any, times: Sequence[float]) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and bool(times)
            and min(abs(value - t) for t in times) <= TIME_TOLERANCE_SECONDS)


class EventChecker:
    """Checks events of one site and page type against the truth of ``sc``; ``fields`` are the
    page type's fields, ``volatile`` those left out of comparisons."""

    def __init__(self, sc: Scenario, site: str, page_type: str, fields: Sequence[str],
                 volatile: Sequence[str] = ()) -> None:
        self.sc, self.site, self.page_type = sc, site, page_type
        self.fields = set(fields)
        self.scored = [f for f in fields if f not in volatile]

    def _is(self, page: Page, got: Any, version: int) -> bool:
        record = self.sc.record(page, version)
        return isinstance(got, dict) and all(same_value(f, got.get(f), record)
                                             for f in self.scored)

    def _versions(self, x: Expected) -> tuple[int, ...]:
        if x.kind == "moved" and not x.records:  # the new URL never fetched: any of its records
            return tuple(range(len(self.sc.pages[x.page].events) + 1))
        return x.records

    def _current(self, x: Expected, got: Any) -> int | None:
        page = self.sc.pages[x.page]
        return next((v for v in self._versions(x) if self._is(page, got, v)), None)

    def fits(self, x: Expected, ev: dict[str, Any]) -> bool:
        """Whether ``ev`` names the URL and carries the records ``x`` owes (what matching
        prefers)."""
        page = self.sc.pages[x.page]
        where = locate(self.sc, ev.get("url"))
        if where is None or where[1] != x.path:
            return False
        record, previous = ev.get("record"), ev.get("previous")
        now = record is None if x.kind == "removed" else self._current(x, record) is not None
        before = previous is None if x.previous is None else self._is(page, previous, x.previous)
        return now and before

    def problems(self, x: Expected, ev: dict[str, Any]) -> list[str]:
        """What is wrong with ``ev`` as the event ``x`` (empty: correct)."""
        page, out = self.sc.pages[x.page], []
        keys = set(ev)
        if keys != set(EVENT_FIELDS):
            out.append(f"fields: missing {sorted(set(EVENT_FIELDS) - keys)}, "
                       f"extra {sorted(keys - set(EVENT_FIELDS))}")
        if not isinstance(ev.get("event_id"), str) or not ev.get("event_id"):
            out.append(f"event_id {ev.get('event_id')!r}")
        if (ev.get("site"), ev.get("page_type")) != (self.site, self.page_type):
            out.append(f"site, page_type {ev.get('site')!r}, {ev.get('page_type')!r}")
        where = locate(self.sc, ev.get("url"))
        if where is None or where[1] != x.path:
            out.append(f"url {ev.get('url')!r}, expected path {x.path}")
        if locate(self.sc, ev.get("canonical_url")) != where:
            out.append(f"canonical_url {ev.get('canonical_url')!r}")
        if not _near(ev.get("detected_at"), x.times):
            out.append(f"detected_at {ev.get('detected_at')!r}, fetched at {list(x.times)}")
        previous_at = ev.get("previous_fetch_at")
        held = previous_at is None if x.kind == "new" else _near(previous_at, x.previous_times)
        if not held:
            out.append(f"previous_fetch_at {previous_at!r}, held at {list(x.previous_times)}")
        out += self._records(x, ev, page)
        moved_to = locate(self.sc, ev.get("moved_to"))
        if x.kind == "moved" and (moved_to is None or moved_to[1] != x.moved_to):
            out.append(f"moved_to {ev.get('moved_to')!r}, expected path {x.moved_to}")
        if x.kind != "moved" and ev.get("moved_to") is not None:
            out.append(f"moved_to {ev.get('moved_to')!r} on a {x.kind} event")
        if ev.get("status") not in x.statuses:
            out.append(f"status {ev.get('status')!r}, served {list(x.statuses)}")
        return out

    def _records(self, x: Expected, ev: dict[str, Any], page: Page) -> list[str]:
        out = []
        record, previous, changed = ev.get("record"), ev.get("previous"), ev.get("changed_fields")
        current = None
        if x.kind == "removed":
            if record is not None:
                out.append("record not null on removed")
        elif not isinstance(record, dict) or set(record) != self.fields:
            out.append(f"record fields {sorted(record) if isinstance(record, dict) else record!r}")
        if x.kind != "removed" and (current := self._current(x, record)) is None:
            out.append(f"record {record!r} is no served version {list(x.records)}")
        if x.previous is None:
            if previous is not None:
                out.append("previous not null on new")
        elif not self._is(page, previous, x.previous):
            out.append(f"previous {previous!r} is not version {x.previous}")
        if x.kind in ("new", "removed") or x.previous is None:
            if changed not in (None, {}):
                out.append(f"changed_fields {changed!r} on {x.kind}")
            return out
        if current is None:
            return out
        before, after = self.sc.record(page, x.previous), self.sc.record(page, current)
        want = {f for f in self.scored if TRUTH[f](before) != TRUTH[f](after)}
        if not isinstance(changed, dict) or set(changed) != want:
            got = sorted(changed) if isinstance(changed, dict) else changed
            out.append(f"changed_fields {got!r}, expected {sorted(want)}")
        else:
            for f, pair in changed.items():
                if not (isinstance(pair, dict) and same_value(f, pair.get("previous"), before)
                        and same_value(f, pair.get("current"), after)):
                    out.append(f"changed_fields[{f}] {pair!r}")
        return out
