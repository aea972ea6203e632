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

__all__ = ["apply_checks", "apply_events", "check_row", "roll_up", "typed_values"]

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


def apply_events(tx: Any, delivered: Iterable[Any]) -> int:
    """Apply events (each with ``.event`` and ``.fields``); returns how many were new here."""
    applied = 0
    for item in delivered:
        if _apply_event(tx, item.event, item.fields.get("b") or None,
                        [v for v in (item.fields.get("v") or "").split(",") if v]):
            applied += 1
    return applied


def _apply_event(tx: Any, event: Mapping[str, Any], body: str | None, volatile: list[str]) -> bool:
    kind, site, t = event["kind"], event["site"], float(event["detected_at"])
    page = event["moved_to"] if kind == "moved" else event["canonical_url"]
    url = event["moved_to"] if kind == "moved" else event["url"]
    record = event["record"]
    inserted = tx.execute(
        "INSERT INTO versions (event_id, site, canonical_url, url, kind, record, valid_from, body,"
        " event) VALUES (%s, %s, %s, %s, %s, CAST(%s AS {json}), %s, %s, CAST(%s AS {json}))"
        " ON CONFLICT (event_id) DO NOTHING",
        (event["event_id"], site, page, url, kind, _dump(record), t, body, _dump(dict(event))))
    if not inserted:
        return False  # applied before (a redelivery)
    tx.executemany("INSERT INTO version_values (event_id, field, text_value, number_value, currency)"
                   " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (event_id, field) DO NOTHING",
                   [(event["event_id"], *v) for v in typed_values(record)])
    _chain(tx, site, page, t, event["event_id"])
    if kind == "moved":  # the old page's last version ends at the move
        tx.execute("UPDATE versions SET valid_to = %s WHERE site = %s AND canonical_url = %s"
                   " AND valid_from < %s AND (valid_to IS NULL OR valid_to > %s)",
                   (t, site, event["canonical_url"], t, t))
        _page(tx, site, event["canonical_url"], event["url"], event["page_type"], "moved",
              event["moved_to"], None, None, t, changed=True)
        first = tx.value("SELECT first_seen FROM pages WHERE site = %s AND canonical_url = %s",
                         (site, event["canonical_url"]))
    else:
        first = None
    state = "removed" if kind == "removed" else "alive"
    digest = record_hash(record, None, volatile) if record is not None else None
    _page(tx, site, page, url, event["page_type"], state, None,
          record if record is not None else None, digest, t, changed=True,
          first_seen=first if first is not None else t, status=event["status"])
    return True


def _chain(tx: Any, site: str, page: str, t: float, identifier: str) -> None:
    """Keep ``valid_to`` = the next version's ``valid_from`` around a version starting at ``t``."""
    tx.execute("UPDATE versions SET valid_to = %s WHERE site = %s AND canonical_url = %s"
               " AND valid_from < %s AND (valid_to IS NULL OR valid_to > %s)",
               (t, site, page, t, t))
    tx.execute("UPDATE versions SET valid_to = (SELECT MIN(v.valid_from) FROM versions v"
               " WHERE v.site = %s AND v.canonical_url = %s AND v.valid_from > %s)"
               " WHERE event_id = %s", (site, page, t, identifier))


def _page(tx: Any, site: str, page: str, url: str, page_type: str | None, state: str,
          moved_to: str | None, record: Any, digest: str | None, t: float, *, changed: bool,
          first_seen: float | None = None, status: int | None = None) -> None:
    """Upsert a page's row from an event at ``t``: its state and record only when no later event
    was applied (``event_at``); its first sighting the earliest known."""
    keep_record = record is not None
    tx.execute(
        "INSERT INTO pages (site, canonical_url, url, page_type, state, moved_to, record,"
        " record_hash, first_seen, last_changed, last_status, event_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, CAST(%s AS {json}), %s, %s, %s, %s, %s)"
        " ON CONFLICT (site, canonical_url) DO UPDATE SET"
        " url = CASE WHEN pages.event_at IS NULL OR excluded.event_at >= pages.event_at"
        "   THEN excluded.url ELSE pages.url END,"
        " page_type = COALESCE(excluded.page_type, pages.page_type),"
        " state = CASE WHEN pages.event_at IS NULL OR excluded.event_at >= pages.event_at"
        "   THEN excluded.state ELSE pages.state END,"
        " moved_to = CASE WHEN pages.event_at IS NULL OR excluded.event_at >= pages.event_at"
        "   THEN excluded.moved_to ELSE pages.moved_to END,"
        + (" record = CASE WHEN pages.event_at IS NULL OR excluded.event_at >= pages.event_at"
           "   THEN excluded.record ELSE pages.record END,"
           " record_hash = CASE WHEN pages.event_at IS NULL OR excluded.event_at >= pages.event_at"
           "   THEN excluded.record_hash ELSE pages.record_hash END," if keep_record else "")
        + " first_seen = {least}(COALESCE(pages.first_seen, excluded.first_seen),"
        "   COALESCE(excluded.first_seen, pages.first_seen)),"
        " last_changed = {greatest}(COALESCE(pages.last_changed, excluded.last_changed),"
        "   COALESCE(excluded.last_changed, pages.last_changed)),"
        " last_status = CASE WHEN excluded.last_status IS NOT NULL AND (pages.event_at IS NULL"
        "   OR excluded.event_at >= pages.event_at) THEN excluded.last_status ELSE pages.last_status END,"
        " event_at = {greatest}(COALESCE(pages.event_at, excluded.event_at), excluded.event_at)",
        (site, page, url, page_type, state, moved_to, _dump(record), digest, first_seen,
         t if changed else None, status, t))


def check_row(crawl: str, shard: int, entry_id: str, fields: Mapping[str, str]) -> tuple[Any, ...]:
    """A ``checks`` row of one check-log entry (its id: like an event's, from its entry)."""
    cost, size = fields.get("$") or "", fields.get("n") or ""
    status = fields.get("h") or ""
    return (event_id(crawl, shard, entry_id), fields.get("s") or "", fields.get("c") or "",
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

