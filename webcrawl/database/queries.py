"""Reading the local copy back: the copy now or at a past time, a page's history, old events.

The copy's lines (:data:`COPY_FIELDS`): ``site``, ``canonical_url``, ``url``, ``page_type``,
``state`` (``alive``, ``removed`` or ``moved``), ``moved_to``, ``record``, ``first_seen``,
``last_checked``, ``last_changed`` (epoch seconds). A removed page keeps its last record; a page
whose move the crawl followed is one line, at its new URL (its first sighting its old URL's).
Only pages with a page type are records (hubs are pages the crawl reads, not records).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from webcrawl.change.events import EVENT_FIELDS, changed_fields

__all__ = ["COPY_FIELDS", "copy_as_of", "copy_now", "events_since", "history"]

COPY_FIELDS = ("site", "canonical_url", "url", "page_type", "state", "moved_to", "record",
               "first_seen", "last_checked", "last_changed")


def copy_now(tx: Any, site: str) -> Iterator[dict[str, Any]]:
    """Every page's line as the copy stands (module docstring)."""
    rows = tx.rows(
        "SELECT p.site, p.canonical_url, p.url, p.page_type, p.state, p.moved_to, p.record,"
        " p.first_seen, p.last_checked, p.last_changed FROM pages p"
        " WHERE p.site = %s AND p.page_type IS NOT NULL AND p.record IS NOT NULL"
        " AND NOT (p.state = 'moved' AND EXISTS (SELECT 1 FROM pages q"
        "   WHERE q.site = p.site AND q.canonical_url = p.moved_to))"
        " ORDER BY p.canonical_url", (site,))
    for row in rows:
        line = dict(zip(COPY_FIELDS, row, strict=True))
        line["record"] = tx.json(line["record"])
        yield line


def copy_as_of(tx: Any, site: str, at: float) -> Iterator[dict[str, Any]]:
    """Every page's line as the copy stood at ``at``: the versions valid then (a removal's
    version: state ``removed`` with the record before it), the checks made by then."""
    rows = tx.rows(
        "SELECT v.canonical_url, v.url, v.kind, v.record, v.event, v.valid_from,"
        " (SELECT MIN(w.valid_from) FROM versions w WHERE w.site = v.site"
        "   AND w.canonical_url = v.canonical_url),"
        " (SELECT MAX(w.valid_from) FROM versions w WHERE w.site = v.site"
        "   AND w.canonical_url = v.canonical_url AND w.valid_from <= %s),"
        " (SELECT MAX(c.time) FROM checks c WHERE c.site = v.site"
        "   AND c.canonical_url = v.canonical_url AND c.time <= %s),"
        " (SELECT MAX(d.last_check) FROM check_days d WHERE d.site = v.site"
        "   AND d.canonical_url = v.canonical_url AND d.last_check <= %s)"
        " FROM versions v WHERE v.site = %s AND v.valid_from <= %s"
        " AND (v.valid_to IS NULL OR v.valid_to > %s) ORDER BY v.canonical_url",
        (at, at, at, site, at, at))
    moved_from = _moved_from(tx, site)
    for url, fetched, kind, record, event, _, first, last_changed, checked, rolled in rows:
        event = tx.json(event)
        removed = kind == "removed"
        first = min([first, *[_first_seen(tx, site, old) for old in moved_from.get(url, ())]])
        yield {"site": site, "canonical_url": url, "url": fetched, "page_type": event["page_type"],
               "state": "removed" if removed else "alive", "moved_to": None,
               "record": event["previous"] if removed else tx.json(record), "first_seen": first,
               "last_checked": max([t for t in (checked, rolled) if t is not None], default=None),
               "last_changed": last_changed}


def _moved_from(tx: Any, site: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for old, new in tx.rows("SELECT canonical_url, moved_to FROM pages WHERE site = %s"
                            " AND state = 'moved'", (site,)):
        out.setdefault(new, []).append(old)
    return out


def _first_seen(tx: Any, site: str, url: str) -> float:
    return tx.value("SELECT MIN(valid_from) FROM versions WHERE site = %s AND canonical_url = %s",
                    (site, url)) or float("inf")


def _chain(tx: Any, site: str, url: str) -> list[str]:
    """``url`` and the URLs it moved from, oldest first."""
    chain, seen = [url], {url}
    while True:
        older = tx.value("SELECT canonical_url FROM pages WHERE site = %s AND moved_to = %s",
                         (site, chain[0]))
        if older is None or older in seen:
            return chain
        chain.insert(0, older)
        seen.add(older)


def history(tx: Any, site: str, url: str) -> list[dict[str, Any]]:
    """Every version of the page at ``url`` (and of the URLs it moved from), oldest first, each
    with its field diff against the one before and the checks made while it was current
    (``checks``: count and outcomes within the retention; ``rolled_up``: days summed after it)."""
    out: list[dict[str, Any]] = []
    previous = None
    for page in _chain(tx, site, url):
        for event_id, kind, record, start, end, body, event in tx.rows(
                "SELECT event_id, kind, record, valid_from, valid_to, body, event FROM versions"
                " WHERE site = %s AND canonical_url = %s ORDER BY valid_from", (site, page)):
            record = tx.json(record)
            volatile: list[str] = []
            until = "" if end is None else " AND time < %s"
            checks = tx.rows(
                "SELECT time, status, outcome FROM checks WHERE site = %s AND canonical_url = %s"
                " AND time >= %s" + until + " ORDER BY time",
                (site, page, start) + (() if end is None else (end,)))
            rolled = tx.rows(
                "SELECT day, checks, changed, unchanged, errors FROM check_days WHERE site = %s"
                " AND canonical_url = %s AND last_check >= %s"
                + ("" if end is None else " AND first_check < %s") + " ORDER BY day",
                (site, page, start) + (() if end is None else (end,)))
            out.append({
                "event_id": event_id, "kind": kind, "canonical_url": page, "valid_from": start,
                "valid_to": end, "record": record, "body": body,
                "changed_fields": tx.json(event)["changed_fields"] if kind != "removed" else
                changed_fields(previous, record, volatile),
                "checks": [{"time": t, "status": s, "outcome": o} for t, s, o in checks],
                "rolled_up": [dict(zip(("day", "checks", "changed", "unchanged", "errors"), r,
                                       strict=True)) for r in rolled]})
            if record is not None:
                previous = record
    return out


def events_since(tx: Any, site: str, since: float | None, until: float | None) -> Iterator[dict[str, Any]]:
    """The events the database keeps for ``site``, detected from ``since`` until before
    ``until`` (either open), in detection order."""
    text, params = "SELECT event FROM versions WHERE site = %s", [site]
    if since is not None:
        text, params = text + " AND valid_from >= %s", [*params, since]
    if until is not None:
        text, params = text + " AND valid_from < %s", [*params, until]
    for (event,) in tx.rows(text + " ORDER BY valid_from, event_id", params):
        event = tx.json(event)
        yield {name: event.get(name) for name in EVENT_FIELDS}
