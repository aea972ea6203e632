"""The public schema of the local copy, and its versioned migrations (docs/database.md).

| table | one row per | key |
| --- | --- | --- |
| ``pages`` | page: its current record and state | (site, canonical_url) |
| ``versions`` | change event: the record from then on (``valid_from``) until the next one (``valid_to``, NULL while current); a removal's row has no record | event_id |
| ``version_values`` | field of a version: its typed value (text, number, currency) | (event_id, field) |
| ``checks`` | fetch of a page: time, status, outcome, cost, bytes, body pointer | check_id |
| ``check_days`` | page and day: the checks older than the retention, rolled up | (site, canonical_url, day) |
| ``webcrawl_schema`` | the schema's version | |

A newer webcrawl upgrades an older database when it opens it (:func:`migrate`, under a lock:
one process migrates); a database newer than this webcrawl stops the command or crawl with one
line saying how (:class:`SchemaTooNew`).
"""

from __future__ import annotations

from webcrawl.database.engine import Database

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SchemaTooNew", "migrate", "schema_version"]

#: The statements of each schema version, run in order from the database's version on.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE pages (
             site TEXT NOT NULL, canonical_url TEXT NOT NULL, url TEXT NOT NULL, page_type TEXT,
             state TEXT NOT NULL, moved_to TEXT, record {json}, record_hash TEXT,
             first_seen DOUBLE PRECISION, last_checked DOUBLE PRECISION,
             last_changed DOUBLE PRECISION, last_status INTEGER, event_at DOUBLE PRECISION,
             PRIMARY KEY (site, canonical_url))""",
        """CREATE TABLE versions (
             event_id TEXT PRIMARY KEY, site TEXT NOT NULL, canonical_url TEXT NOT NULL,
             url TEXT NOT NULL, kind TEXT NOT NULL, record {json},
             valid_from DOUBLE PRECISION NOT NULL, valid_to DOUBLE PRECISION, body TEXT,
             event {json} NOT NULL)""",
        "CREATE INDEX versions_page ON versions (site, canonical_url, valid_from)",
        "CREATE INDEX versions_time ON versions (site, valid_from)",
        """CREATE TABLE version_values (
             event_id TEXT NOT NULL, field TEXT NOT NULL, text_value TEXT,
             number_value DOUBLE PRECISION, currency TEXT, PRIMARY KEY (event_id, field))""",
        """CREATE TABLE checks (
             check_id TEXT PRIMARY KEY, site TEXT NOT NULL, canonical_url TEXT NOT NULL,
             url TEXT NOT NULL, page_type TEXT, time DOUBLE PRECISION NOT NULL, status INTEGER,
             outcome TEXT NOT NULL, cost DOUBLE PRECISION, bytes BIGINT, body TEXT,
             event_id TEXT)""",
        "CREATE INDEX checks_page ON checks (site, canonical_url, time)",
        "CREATE INDEX checks_time ON checks (time)",
        """CREATE TABLE check_days (
             site TEXT NOT NULL, canonical_url TEXT NOT NULL, day TEXT NOT NULL,
             checks BIGINT NOT NULL, changed BIGINT NOT NULL, unchanged BIGINT NOT NULL,
             errors BIGINT NOT NULL, cost DOUBLE PRECISION NOT NULL, bytes BIGINT NOT NULL,
             first_check DOUBLE PRECISION NOT NULL, last_check DOUBLE PRECISION NOT NULL,
             PRIMARY KEY (site, canonical_url, day))""",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)


class SchemaTooNew(Exception):
    """The database was written by a newer webcrawl (one line saying what to do)."""


def schema_version(db: Database) -> int:
    """The database's schema version (0: empty)."""
    with db.transaction() as tx:
        return _version(tx)


def _version(tx: object) -> int:
    tx.execute("CREATE TABLE IF NOT EXISTS webcrawl_schema (version INTEGER NOT NULL)")  # type: ignore[attr-defined]
    found = tx.value("SELECT MAX(version) FROM webcrawl_schema")  # type: ignore[attr-defined]
    return int(found or 0)


def migrate(db: Database) -> int:
    """Bring the database to :data:`SCHEMA_VERSION` (nothing when it is there); the version it
    had. Raises :class:`SchemaTooNew` for a database newer than this webcrawl."""
    with db.transaction() as tx:
        if db.kind == "postgresql":  # one migrating process at a time (SQLite: BEGIN IMMEDIATE)
            tx.execute("SELECT pg_advisory_xact_lock(4242001)")
        found = _version(tx)
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the database at {db.url} has schema version {found}, newer than this "
                f"webcrawl's ({SCHEMA_VERSION}): upgrade webcrawl, or set WEBCRAWL_DATABASE_URL to "
                "another database")
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                tx.execute(statement)
            tx.execute("INSERT INTO webcrawl_schema (version) VALUES (%s)", (version,))
        return found
