"""The two database engines the local copy lives in, behind one small interface.

:func:`open_database` takes ``WEBCRAWL_DATABASE_URL``: ``postgresql://...`` (PostgreSQL through
psycopg 3 and a connection pool), ``sqlite:///path`` or a plain path (SQLite, the embedded
default: ``<WEBCRAWL_DATA_DIR>/webcrawl.db``). Both give a :class:`Database` whose
:meth:`~Database.transaction` yields a :class:`Tx`: statements written once, with ``%s``
placeholders and three dialect words (``{json}`` the JSON column type, ``{greatest}`` /
``{least}``), run on either engine.

SQLite with several crawl processes on one machine: WAL (readers never block the writer), one
writer at a time (``BEGIN IMMEDIATE``), a busy timeout, and a retry of the whole transaction when
the file stays locked. PostgreSQL: a pool of a few connections (``psycopg_pool``).

Errors: :class:`DatabaseUnavailable` for a database that does not answer (the writer waits it
out); anything else is the caller's bug or a schema problem.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["Database", "DatabaseUnavailable", "Tx", "describe", "open_database"]

_WORDS = {"sqlite": {"json": "TEXT", "greatest": "MAX", "least": "MIN"},
          "postgresql": {"json": "JSONB", "greatest": "GREATEST", "least": "LEAST"}}
_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")


class DatabaseUnavailable(Exception):
    """The database did not answer (down, unreachable, locked past the retries)."""


def describe(url: str) -> str:
    """The URL for messages, its password left out."""
    return _PASSWORD.sub(r"\1***@", url)


class Tx:
    """One transaction's statements (see the module docstring)."""

    def __init__(self, cursor: Any, kind: str) -> None:
        self.cursor = cursor
        self.kind = kind

    def sql(self, text: str) -> str:
        text = text.format(**_WORDS[self.kind])
        return text.replace("%s", "?") if self.kind == "sqlite" else text

    def execute(self, text: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the rows it changed."""
        self.cursor.execute(self.sql(text), params)
        return int(self.cursor.rowcount)

    def executemany(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.cursor.executemany(self.sql(text), rows)

    def inserted(self, text: str, rows: Sequence[Sequence[Any]]) -> set[Any]:
        """Run an ``INSERT ... ON CONFLICT DO NOTHING RETURNING <key>`` for each row (pipelined on
        PostgreSQL); the keys of the rows that went in."""
        found: set[Any] = set()
        if not rows:
            return found
        if self.kind == "sqlite":
            for row in rows:
                self.cursor.execute(self.sql(text), row)
                found.update(r[0] for r in self.cursor.fetchall())
            return found
        self.cursor.executemany(self.sql(text), rows, returning=True)
        while True:
            found.update(r[0] for r in self.cursor.fetchall())
            if not self.cursor.nextset():
                return found

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.cursor.execute(self.sql(text), params)
        return [tuple(r) for r in self.cursor.fetchall()]

    def value(self, text: str, params: Sequence[Any] = ()) -> Any:
        found = self.rows(text, params)
        return found[0][0] if found else None

    def json(self, value: Any) -> Any:
        """A JSON column's value as read back (PostgreSQL parses it, SQLite gives the text)."""
        return json.loads(value) if isinstance(value, str) else value


class Database:
    """An open database; :meth:`transaction` is the only way in (module docstring)."""

    kind: str
    url: str

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        raise NotImplementedError
        yield  # pragma: no cover

    def close(self) -> None:
        raise NotImplementedError


class SQLiteDatabase(Database):
    kind = "sqlite"
    RETRIES = 20

    def __init__(self, path: Path, *, busy_seconds: float = 5.0) -> None:
        self.path = path
        self.url = str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_seconds = busy_seconds
        self._conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.busy_seconds, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        for attempt in range(self.RETRIES):
            try:
                self._conn.execute("BEGIN IMMEDIATE")  # the one writer, until COMMIT
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise DatabaseUnavailable(f"SQLite database {self.path}: {exc}") from exc
                time.sleep(min(0.05 * 2 ** attempt, 1.0))
        else:
            raise DatabaseUnavailable(f"SQLite database {self.path} stayed locked")
        cursor = self._conn.cursor()
        try:
            yield Tx(cursor, self.kind)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")
        finally:
            cursor.close()

    def close(self) -> None:
        self._conn.close()


class PostgresDatabase(Database):
    kind = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 4, connect_seconds: float = 10.0) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        self.url = url
        self._errors = (psycopg.OperationalError, psycopg.InterfaceError)
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False,
                                    timeout=connect_seconds, kwargs={"autocommit": False})
        try:
            self._pool.open(wait=True, timeout=connect_seconds)
        except Exception as exc:  # noqa: BLE001 - the pool's own error says why
            self._pool.close()
            raise DatabaseUnavailable(f"PostgreSQL at {describe(url)}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
                yield Tx(cursor, self.kind)
        except self._errors as exc:
            raise DatabaseUnavailable(f"PostgreSQL at {describe(self.url)}: {exc}") from exc
        except Exception as exc:
            if type(exc).__name__ == "PoolTimeout":
                raise DatabaseUnavailable(f"PostgreSQL at {describe(self.url)}: {exc}") from exc
            raise

    def close(self) -> None:
        self._pool.close()


def open_database(url: str | Path) -> Database:
    """The database of ``url`` (module docstring). Raises :class:`DatabaseUnavailable` when a
    PostgreSQL server does not answer, ``ValueError`` for a URL of another kind."""
    text = str(url)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(text)
    if text.startswith("sqlite:///"):
        return SQLiteDatabase(Path(text[len("sqlite:///"):]))  # sqlite:////abs, sqlite:///rel
    if "://" in text:
        raise ValueError(f"WEBCRAWL_DATABASE_URL={describe(text)!r}: expected postgresql://..., "
                         "sqlite:///path or a file path")
    return SQLiteDatabase(Path(text))
