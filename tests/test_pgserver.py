"""The test PostgreSQL (tests/pgserver.py): it starts, gives each test its own empty database,
and goes away, comes back and hangs when a test says so."""

from __future__ import annotations

import os
import pwd
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from tests.pgserver import SERVER_USER_AS_ROOT, LocalPostgres

SEEN_DATABASES: list[str] = []


def test_a_query_runs_on_the_test_database(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        name, user, listen, fsync = conn.execute(
            "SELECT current_database(), current_user, current_setting('listen_addresses'),"
            " current_setting('fsync')").fetchone()
        assert conn.execute("SELECT 6 * 7").fetchone() == (42,)
    assert postgres_url.endswith(f"/{name}")
    assert (user, listen, fsync) == ("webcrawl", "127.0.0.1", "off")


def test_the_server_runs_as_postgres_when_we_are_root(postgres_server: LocalPostgres) -> None:
    """initdb and postgres refuse root: as root they run as Debian's postgres user."""
    status = Path(f"/proc/{postgres_server.postmaster_pid}/status").read_text()
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    if os.geteuid() == 0:
        assert uid == pwd.getpwnam(SERVER_USER_AS_ROOT).pw_uid
    else:
        assert uid == os.geteuid()


@pytest.mark.parametrize("turn", [1, 2])
def test_each_test_gets_an_empty_database_of_its_own(postgres_url: str, turn: int) -> None:
    """Both turns create the same table in a database that must be empty: the second finds
    none of the first's (on one worker, as with --dist loadfile, the list shows both names)."""
    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
        conn.execute("CREATE TABLE pages (url text PRIMARY KEY)")
        SEEN_DATABASES.append(conn.execute("SELECT current_database()").fetchone()[0])
    assert len(set(SEEN_DATABASES)) == len(SEEN_DATABASES)


def test_kill_breaks_connections_and_restart_brings_the_data_back(
    postgres_server: LocalPostgres, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        conn.execute("CREATE TABLE pages (url text PRIMARY KEY)")
        conn.execute("INSERT INTO pages VALUES ('http://127.0.0.2/a')")
        conn.commit()
        postgres_server.kill()
        assert not postgres_server.running
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT count(*) FROM pages")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(postgres_url, connect_timeout=10)
    postgres_server.restart()
    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        assert conn.execute("SELECT url FROM pages").fetchall() == [("http://127.0.0.2/a",)]


def test_pause_makes_queries_hang_and_resume_lets_them_finish(
    postgres_server: LocalPostgres, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url, connect_timeout=10) as conn, \
            ThreadPoolExecutor(1) as pool:
        postgres_server.pause()
        started = time.monotonic()
        # libpq rounds connect_timeout up to 2 s.
        with pytest.raises(psycopg.OperationalError, match="timeout"):
            psycopg.connect(postgres_url, connect_timeout=2)
        assert time.monotonic() - started < 15
        query = pool.submit(lambda: conn.execute("SELECT 1").fetchone())
        time.sleep(0.3)
        assert not query.done()
        postgres_server.resume()
        assert query.result(timeout=15) == (1,)
    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
