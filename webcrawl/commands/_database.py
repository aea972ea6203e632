"""The crawl's database for a command (``records``, ``history``, ``events``, ``dbwriter``): opened
from ``WEBCRAWL_DATABASE_URL`` (or SQLite in ``WEBCRAWL_DATA_DIR``), its schema checked, closed on
every exit; a database that is missing, newer than this webcrawl or does not answer ends the
command with one ``scrapy: error:`` line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from webcrawl.commands._errors import fail
from webcrawl.config import DEFAULTS
from webcrawl.database import Database, DatabaseUnavailable, SchemaTooNew, migrate, open_database

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["command_database", "database_url_of"]


def database_url_of(settings: BaseSettings) -> str:
    data = settings.get("WEBCRAWL_DATA_DIR") or DEFAULTS["WEBCRAWL_DATA_DIR"]
    return settings.get("WEBCRAWL_DATABASE_URL") or str(Path(data) / "webcrawl.db")


@contextmanager
def command_database(settings: BaseSettings, *, must_exist: bool = True) -> Iterator[Database]:
    url = database_url_of(settings)
    if must_exist and "://" not in url and not Path(url).exists():
        fail(f"no database at {url}", "set WEBCRAWL_DATA_DIR to the crawl's data folder, or "
             "WEBCRAWL_DATABASE_URL to its database")
    try:
        db = open_database(url)
    except (DatabaseUnavailable, ValueError) as exc:
        fail(str(exc))
    try:
        try:
            migrate(db)
        except (SchemaTooNew, DatabaseUnavailable) as exc:
            fail(str(exc))
        yield db
    finally:
        db.close()
