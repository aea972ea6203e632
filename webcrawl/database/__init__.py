"""The local copy in a real database: every page's current record, every version, a log of every
check (docs/database.md). SQLite in the data folder by default, PostgreSQL for crawls spread over
several machines; fed from the crawl state's durable records of change events and checks, each
applied once, off the crawl's hot path. No Scrapy here: the crawl runs the writer from an
extension (webcrawl/extensions/database.py), ``scrapy dbwriter`` runs it alone."""

from __future__ import annotations

from webcrawl.database.engine import Database, DatabaseUnavailable, describe, open_database
from webcrawl.database.schema import SCHEMA_VERSION, SchemaTooNew, migrate
from webcrawl.database.writer import GROUP, DatabaseWriter

__all__ = ["GROUP", "SCHEMA_VERSION", "Database", "DatabaseUnavailable", "DatabaseWriter",
           "SchemaTooNew", "describe", "migrate", "open_database"]
