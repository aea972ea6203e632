"""Applying change events and checks to the tables, idempotently and in any order.

Each event (``Delivered`` from :class:`webcrawl.state.eventlog.EventLog`) opens one row of
``versions`` keyed by its ``event_id``: a redelivered event finds its row and changes nothing. The
version's page is the event's page, or for ``moved`` the page it moved to (its history follows
it: the old page's versions are closed at the move, the new one's open there). A version's
``valid_to`` is the next version's ``valid_from`` of the same page, kept whatever order the
events arrive in (two writers may apply a page's events in either order): inserting a version
closes the one before it and takes the start of the one after it. ``pages`` keeps each page's
latest state, guarded by the time of the event it reflects (``event_at``).

Each check (an entry of the ``checks`` streams) is one row of ``checks`` keyed by its stream
entry (``check_id``) and updates its page's ``last_checked`` and ``last_status``.

:func:`roll_up` moves the checks older than the retention into ``check_days``: one row per page
and day, summed, in the same transaction that deletes them (so a check is never counted twice).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webcrawl.change import record_hash
from webcrawl.change.events import event_id

__all__ = ["apply_checks", "apply_events", "check_row", "forget_site", "roll_up", "typed_values"]

#: The outcomes a check counts as a change in ``check_days``.
CHANGES = frozenset(("new", "changed", "moved", "restored", "removed"))
UNCHANGED = frozenset(("unchanged", "not_modified"))


def typed_values(record: Mapping[str, Any] | None) -> list[tuple[str, str | None, float | None, str | None]]:
    """``(field, text, number, currency)`` per field of a record: a price's amount and currency,
    a number, or the text (other values as JSON); missing values left out."""
    out = []
    for name, value in (record or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out.append((name, str(value).lower(), None, None))
        elif isinstance(value, (int, float)):
            out.append((name, None, float(value), None))
        elif isinstance(value, Mapping) and "amount" in value:
            amount = value.get("amount")
            out.append((name, None, float(amount) if amount is not None else None,
                        value.get("currency")))
        elif isinstance(value, str):
            out.append((name, value, None, None))
        else:
            out.append((name, json.dumps(value, ensure_ascii=False, sort_keys=True), None, None))
    return out


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


_INSERT_VERSION = (
    "INSERT INTO versions (event_id, site, canonical_url, url, kind, record, valid_from, body, event)"
    " VALUES (%s, %s, %s, %s, %s, CAST(%s AS {json}), %s, %s, CAST(%s AS {json}))"
    " ON CONFLICT (event_id) DO NOTHING RETURNING event_id")
_INSERT_VALUE = ("INSERT INTO version_values (event_id, field, text_value, number_value, currency)"
                 " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (event_id, field) DO NOTHING")
#: A version starting at t closes the page's version before it...
_CLOSE_BEFORE = ("UPDATE versions SET valid_to = %s WHERE site = %s AND canonical_url = %s"
                 " AND valid_from < %s AND (valid_to IS NULL OR valid_to > %s)")
#: ... and ends where the page's next version starts (NULL: it is current).
_END_AT_NEXT = ("UPDATE versions SET valid_to = (SELECT MIN(v.valid_from) FROM versions v"
                " WHERE v.site = %s AND v.canonical_url = %s AND v.valid_from > %s)"
                " WHERE event_id = %s")


def apply_events(tx: Any, delivered: Iterable[Any]) -> int:
    """Apply events (each with ``.event`` and ``.fields``); returns how many were new here. One
    statement kind at a time over the whole batch (pipelined on PostgreSQL): right whatever the
    order, as the module docstring says."""
    items = []
    for item in delivered:
        event = item.event
        moved = event["kind"] == "moved"
        items.append((event, item.fields.get("b") or None,
                      [v for v in (item.fields.get("v") or "").split(",") if v],
                      event["moved_to"] if moved else event["canonical_url"],
                      event["moved_to"] if moved else event["url"], float(event["detected_at"])))
    new = tx.inserted(_INSERT_VERSION, [
        (e["event_id"], e["site"], page, url, e["kind"], _dump(e["record"]), t, body, _dump(dict(e)))
        for e, body, _, page, url, t in items])
    fresh = [i for i in items if i[0]["event_id"] in new]  # a redelivery changes nothing
    tx.executemany(_INSERT_VALUE, [(e["event_id"], *v) for e, *_ in fresh
                                   for v in typed_values(e["record"])])
    tx.executemany(_CLOSE_BEFORE, [(t, e["site"], page, t, t) for e, _, _, page, _, t in fresh])
    tx.executemany(_END_AT_NEXT, [(e["site"], page, t, e["event_id"])
                                  for e, _, _, page, _, t in fresh])
    moves = [i for i in fresh if i[0]["kind"] == "moved"]
    # The old page's last version ends at the move; the old page is marked moved.
    tx.executemany(_CLOSE_BEFORE, [(t, e["site"], e["canonical_url"], t, t)
                                   for e, _, _, _, _, t in moves])
    _pages(tx, [(e["site"], e["canonical_url"], e["url"], e["page_type"], "moved", e["moved_to"],
                 None, None, t, None, e["canonical_url"]) for e, _, _, _, _, t in moves])
    _pages(tx, [(e["site"], page, url, e["page_type"],
                 "removed" if e["kind"] == "removed" else "alive", None, e["record"],
                 record_hash(e["record"], None, volatile) if e["record"] is not None else None,
                 t, e["status"], e["canonical_url"]) for e, _, volatile, page, url, t in fresh])
    return len(fresh)


def _pages(tx: Any, rows: list[tuple[Any, ...]]) -> None:
    """Upsert pages' rows from events (site, page, url, page type, state, moved to, record,
    record hash, time, status, page its history comes from): grouped by whether they carry a
    record (one without, a removal or a move, keeps the record the row has)."""
    with_record = [r for r in rows if r[6] is not None]
    without = [r for r in rows if r[6] is None]
    for group, keep in ((with_record, True), (without, False)):
        if group:
            tx.executemany(_page_sql(keep), [
                (site, page, url, ptype, state, moved_to, _dump(record), digest,
                 t, site, origin, t, t, status, t)
                for site, page, url, ptype, state, moved_to, record, digest, t, status, origin in group])


def _page_sql(with_record: bool) -> str:
    """Upsert a page's row from an event: its state, record and URL only when no later event was
    applied (``event_at``); its first sighting the earliest known (the page it moved from too)."""
    newer = "pages.event_at IS NULL OR excluded.event_at >= pages.event_at"
    return (
        "INSERT INTO pages (site, canonical_url, url, page_type, state, moved_to, record,"
        " record_hash, first_seen, last_changed, last_status, event_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, CAST(%s AS {json}), %s,"
        " {least}(%s, COALESCE((SELECT p.first_seen FROM pages p WHERE p.site = %s"
        "   AND p.canonical_url = %s), %s)),"
        " %s, %s, %s)"
        " ON CONFLICT (site, canonical_url) DO UPDATE SET"
        f" url = CASE WHEN {newer} THEN excluded.url ELSE pages.url END,"
        " page_type = COALESCE(excluded.page_type, pages.page_type),"
        f" state = CASE WHEN {newer} THEN excluded.state ELSE pages.state END,"
        f" moved_to = CASE WHEN {newer} THEN excluded.moved_to ELSE pages.moved_to END,"
        + (f" record = CASE WHEN {newer} THEN excluded.record ELSE pages.record END,"
           f" record_hash = CASE WHEN {newer} THEN excluded.record_hash ELSE pages.record_hash END,"
           if with_record else "")
        + " first_seen = {least}(COALESCE(pages.first_seen, excluded.first_seen),"
        "   COALESCE(excluded.first_seen, pages.first_seen)),"
        " last_changed = {greatest}(COALESCE(pages.last_changed, excluded.last_changed),"
        "   COALESCE(excluded.last_changed, pages.last_changed)),"
        " last_status = CASE WHEN excluded.last_status IS NOT NULL AND (" + newer + ")"
        "   THEN excluded.last_status ELSE pages.last_status END,"
        " event_at = {greatest}(COALESCE(pages.event_at, excluded.event_at), excluded.event_at)")


def check_row(crawl: str, shard: int, entry_id: str, fields: Mapping[str, str]) -> tuple[Any, ...]:
    """A ``checks`` row of one check-log entry (its id: like an event's, from its entry)."""
    cost, size = fields.get("$") or "", fields.get("n") or ""
    status = fields.get("h") or ""
    # "c" is "" where the canonical URL is the URL fetched ("u").
    return (event_id(crawl, shard, entry_id), fields.get("s") or "",
            fields.get("c") or fields.get("u") or "",
            fields.get("u") or "", fields.get("p") or None, float(fields.get("t") or 0.0),
            int(status) if status.isdigit() else None, fields.get("o") or "",
            float(cost) if cost else None, int(size) if size.isdigit() else None,
            fields.get("b") or None, fields.get("e") or None)


def apply_checks(tx: Any, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert checks (:func:`check_row`) and update their pages' last check."""
    tx.executemany(
        "INSERT INTO checks (check_id, site, canonical_url, url, page_type, time, status, outcome,"
        " cost, bytes, body, event_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (check_id) DO NOTHING", rows)
    tx.executemany(
        "INSERT INTO pages (site, canonical_url, url, page_type, state, first_seen, last_checked,"
        " last_status) VALUES (%s, %s, %s, %s, 'alive', %s, %s, %s)"
        " ON CONFLICT (site, canonical_url) DO UPDATE SET"
        " page_type = COALESCE(pages.page_type, excluded.page_type),"
        " first_seen = {least}(COALESCE(pages.first_seen, excluded.first_seen), excluded.first_seen),"
        " last_status = CASE WHEN pages.last_checked IS NULL OR excluded.last_checked >= pages.last_checked"
        "   THEN excluded.last_status ELSE pages.last_status END,"
        " last_checked = {greatest}(COALESCE(pages.last_checked, excluded.last_checked), excluded.last_checked)",
        [(r[1], r[2], r[3], r[4], r[5], r[5], r[6]) for r in rows])


def forget_site(tx: Any, site: str) -> int:
    """Delete everything the database holds of ``site`` (a crawl started over); rows deleted."""
    deleted = tx.execute("DELETE FROM version_values WHERE event_id IN"
                         " (SELECT event_id FROM versions WHERE site = %s)", (site,))
    for table in ("versions", "checks", "check_days", "pages"):
        deleted += tx.execute(f"DELETE FROM {table} WHERE site = %s", (site,))
    return deleted


def roll_up(tx: Any, cutoff: float) -> int:
    """Sum the checks before ``cutoff`` into ``check_days`` and delete them; how many."""
    day = ("strftime('%Y-%m-%d', time, 'unixepoch')" if tx.kind == "sqlite"
           else "to_char(to_timestamp(time) AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
    changes = ", ".join(f"'{c}'" for c in sorted(CHANGES))
    unchanged = ", ".join(f"'{c}'" for c in sorted(UNCHANGED))
    tx.execute(
        "INSERT INTO check_days (site, canonical_url, day, checks, changed, unchanged, errors,"
        " cost, bytes, first_check, last_check)"
        f" SELECT site, canonical_url, {day}, COUNT(*),"
        f" SUM(CASE WHEN outcome IN ({changes}) THEN 1 ELSE 0 END),"
        f" SUM(CASE WHEN outcome IN ({unchanged}) THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END),"
        " COALESCE(SUM(cost), 0), COALESCE(SUM(bytes), 0), MIN(time), MAX(time)"
        f" FROM checks WHERE time < %s GROUP BY site, canonical_url, {day}"
        " ON CONFLICT (site, canonical_url, day) DO UPDATE SET"
        " checks = check_days.checks + excluded.checks,"
        " changed = check_days.changed + excluded.changed,"
        " unchanged = check_days.unchanged + excluded.unchanged,"
        " errors = check_days.errors + excluded.errors, cost = check_days.cost + excluded.cost,"
        " bytes = check_days.bytes + excluded.bytes,"
        " first_check = {least}(check_days.first_check, excluded.first_check),"
        " last_check = {greatest}(check_days.last_check, excluded.last_check)", (cutoff,))
    return tx.execute("DELETE FROM checks WHERE time < %s", (cutoff,))

