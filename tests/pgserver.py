"""A real PostgreSQL for the tests, started by the tests themselves from Debian's package.

:class:`LocalPostgres` runs ``initdb`` into a temporary folder and ``pg_ctl start`` on it: the
server listens on 127.0.0.1 only, on a free port, and on a unix socket in that folder; every local
connection is trusted; the superuser and the first database are both ``webcrawl``. Durability is
traded for speed (``fsync=off``, ``full_page_writes=off``) as far as an operating-system crash
goes, but not further: ``synchronous_commit`` stays on, so a commit has reached the kernel when it
returns and :meth:`LocalPostgres.kill` (SIGKILL of the whole server) loses nothing committed, as a
real database that crashes and comes back loses nothing committed. With ``fsync=off`` that
costs one ``write()`` per commit.

``initdb`` and ``postgres`` refuse to run as root. As root, they run as the ``postgres`` user
that Debian's package creates (through ``runuser``), in a folder that user owns; otherwise as
the current user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

INSTALL_HINT = ("the PostgreSQL tests need the server from Debian's `postgresql` package: "
                "install it with `apt-get install -y postgresql` (.ci/run does it)")
SUPERUSER = "webcrawl"
DATABASE = "webcrawl"
SERVER_USER_AS_ROOT = "postgres"  # created by Debian's postgresql-common
START_TIMEOUT_SECONDS = 60.0  # initdb and start each; generous for a loaded 2-core machine
STOP_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10
PORT_ATTEMPTS = 3  # a free port may be taken by another process before the server binds it
# What makes a throwaway server fast; the port goes in the same file (see _write_settings).
FAST_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "on",  # see the module docstring: kill() must not lose commits
    "shared_buffers": "'32MB'",
    "max_connections": "100",
    "log_min_messages": "warning",
}


class PostgresNotInstalled(RuntimeError):
    """Debian's PostgreSQL server binaries (or, as root, its ``postgres`` user) are missing."""


class PostgresStartError(RuntimeError):
    """initdb or the server failed; the message names the log file and quotes its end."""


def postgres_bindir() -> Path:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres``: ``pg_config --bindir`` when that
    holds them (Debian's ``libpq-dev`` ships a ``pg_config`` without the server), else the
    newest ``/usr/lib/postgresql/<version>/bin`` that does."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        answer = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                timeout=30, check=False)
        if answer.returncode == 0 and answer.stdout.strip():
            candidates.append(Path(answer.stdout.strip()))
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(versions, key=_version_key, reverse=True)
    for folder in candidates:
        if all(os.access(folder / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise PostgresNotInstalled(f"{INSTALL_HINT}; no initdb, pg_ctl and postgres in "
                               f"{', '.join(map(str, candidates)) or '/usr/lib/postgresql/*/bin'}")


def _version_key(bindir: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", bindir.parent.name)) or (0,)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux ``/proc``)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # Field 4 is the parent; the command name in field 2 may hold spaces and ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


class LocalPostgres:
    """A throwaway PostgreSQL cluster in a temporary folder, on 127.0.0.1:``port``.

    :meth:`start` it, then :meth:`stop` it (which removes the folder); :meth:`stop` is safe
    at any point and more than once. In between, :meth:`kill` / :meth:`restart` make the
    database go away and come back (same port, same data), :meth:`pause` / :meth:`resume`
    make it hang and go on.
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        """``settings``: server settings over :data:`FAST_SETTINGS` (a benchmark puts
        ``fsync`` back on)."""
        self.settings = {**FAST_SETTINGS, **(settings or {})}
        self.bindir = postgres_bindir()
        self.run_as: str | None = None  # the user the server runs as, when that is not us
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(SERVER_USER_AS_ROOT)
            except KeyError:
                raise PostgresNotInstalled(
                    f"{INSTALL_HINT}; PostgreSQL refuses to run as root and there is no "
                    f"{SERVER_USER_AS_ROOT!r} user to run it as") from None
            self.run_as = SERVER_USER_AS_ROOT
        self.folder: Path | None = None
        self.port = 0
        self._paused: list[int] = []

    # -- where it is ------------------------------------------------------------------------

    @property
    def data(self) -> Path:
        assert self.folder is not None, "the server was not started"
        return self.folder / "data"

    @property
    def log_file(self) -> Path:
        """The server's log (``pg_ctl -l``); initdb's and pg_ctl's own output go to
        ``commands.log`` beside it (a file the server user need not write)."""
        assert self.folder is not None, "the server was not started"
        return self.folder / "postgres.log"

    @property
    def url(self) -> str:
        """URL of the server's own ``webcrawl`` database, as its superuser."""
        return self.url_for(DATABASE)

    def url_for(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Create the cluster and start the server; raise :class:`PostgresStartError` naming
        the log file (and leaving the folder for a look) if it does not come up."""
        self.folder = Path(tempfile.mkdtemp(prefix="webcrawl-postgres-", dir=self._temp_root()))
        if self.run_as is not None:
            user = pwd.getpwnam(self.run_as)
            os.chown(self.folder, user.pw_uid, user.pw_gid)
        self._run(self._command("initdb", "-D", str(self.data), "-U", SUPERUSER,
                                "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"),
                  "initdb", START_TIMEOUT_SECONDS)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("include 'webcrawl-test.conf'\n")
        try:
            self._start_on_a_free_port()
            self._create_database(DATABASE)
        except BaseException:
            self.kill()  # a server half set up is of no use; its folder stays for a look
            raise

    def _start_on_a_free_port(self) -> None:
        tried: set[int] = set()
        for attempt in range(PORT_ATTEMPTS):
            port = _free_port()
            while port in tried:
                port = _free_port()
            tried.add(port)
            self.port = port
            self._write_settings()
            try:
                self._pg_ctl_start()
                return
            except PostgresStartError:
                if attempt + 1 == PORT_ATTEMPTS or "could not bind" not in self._log_tail():
                    raise

    def stop(self) -> None:
        """Fast shutdown (SIGKILL if that takes too long), then remove the folder. Idempotent."""
        if self.folder is None:
            return
        self.resume()
        if self.running:
            try:
                subprocess.run(self._command("pg_ctl", "stop", "-D", str(self.data), "-m", "fast",
                                             "-w", "-t", str(int(STOP_TIMEOUT_SECONDS))),
                               cwd=self.folder, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=STOP_TIMEOUT_SECONDS + 10,
                               check=False)
            except subprocess.TimeoutExpired:
                pass
            if self.running:
                self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def kill(self) -> None:
        """SIGKILL the postmaster and every process of the server: the database is gone, its
        connections break, until :meth:`restart`."""
        pid = self.postmaster_pid
        if pid is None:
            return
        family = [pid, *_children_of(pid)]
        for member in family:
            self._signal(member, signal.SIGKILL)  # also ends a paused (stopped) process
        self._paused = []
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while any(Path(f"/proc/{member}").exists() and not _is_zombie(member) for member in family):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL processes {family} outlived SIGKILL")
            time.sleep(0.01)

    def restart(self) -> None:
        """Start the server again on the same port and data folder (after :meth:`kill`, it
        runs crash recovery first: committed data is all there)."""
        if self.running:
            raise RuntimeError(f"PostgreSQL on port {self.port} is still running")
        # A killed postmaster may stay a zombie until init reaps it, and the server takes any
        # process with the pid in its lock files for "another server running here".
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        assert self.folder is not None
        (self.folder / f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)
        self._pg_ctl_start()

    def pause(self) -> None:
        """SIGSTOP the postmaster and its children: connections and queries hang (the kernel
        still accepts TCP connections) until :meth:`resume`."""
        pid = self.postmaster_pid
        if pid is None or self._paused:
            return
        # The postmaster first: stopped, it starts no new child while its children are stopped.
        self._signal(pid, signal.SIGSTOP)
        self._paused = [pid, *_children_of(pid)]
        for child in self._paused[1:]:
            self._signal(child, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT what :meth:`pause` stopped. Idempotent."""
        for pid in reversed(self._paused):
            self._signal(pid, signal.SIGCONT)
        self._paused = []

    @property
    def paused(self) -> bool:
        return bool(self._paused)

    @property
    def running(self) -> bool:
        return self.postmaster_pid is not None

    @property
    def postmaster_pid(self) -> int | None:
        """The live postmaster's pid (from ``postmaster.pid``), or None."""
        if self.folder is None:
            return None
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        alive = Path(f"/proc/{pid}").exists() and not _is_zombie(pid)
        return pid if alive else None

    # -- what tests use ---------------------------------------------------------------------

    def new_database(self, name: str) -> str:
        """CREATE DATABASE ``name`` (empty) and return its URL."""
        self._create_database(name)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE ``name``, ending any connection still open to it."""
        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))

    # -- helpers ----------------------------------------------------------------------------

    def _temp_root(self) -> str | None:
        """Where the folder goes: the usual temporary folder, unless the server runs as another
        user who cannot reach it (TMPDIR under /root), then /tmp."""
        if self.run_as is None:
            return None
        path = Path(tempfile.gettempdir()).resolve()
        reachable = all(part.stat().st_mode & 0o001 for part in (path, *path.parents))
        return None if reachable else "/tmp"

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.bindir / program), *args]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        return command

    def _run(self, command: list[str], what: str, timeout: float) -> None:
        assert self.folder is not None
        with (self.folder / "commands.log").open("ab") as log:
            try:
                # cwd: the server user may not be allowed into ours (/root), which it would say.
                done = subprocess.run(command, cwd=self.folder, stdout=log,
                                      stderr=subprocess.STDOUT, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                failure = self._failure(f"{what} took over {timeout:.0f} s")
                raise PostgresStartError(failure) from None
        if done.returncode != 0:
            raise PostgresStartError(self._failure(f"{what} exited with {done.returncode}"))

    def _write_settings(self) -> None:
        settings = {**self.settings, "port": str(self.port),
                    "unix_socket_directories": f"'{self.folder}'"}
        text = "".join(f"{name} = {value}\n" for name, value in settings.items())
        (self.data / "webcrawl-test.conf").write_text(text)
        os.chmod(self.data / "webcrawl-test.conf", 0o644)

    def _pg_ctl_start(self) -> None:
        # pg_ctl -w returns once the server accepts connections, or as soon as it has exited.
        self._run(self._command("pg_ctl", "start", "-D", str(self.data), "-l",
                                str(self.log_file), "-w", "-s",
                                "-t", str(int(START_TIMEOUT_SECONDS))),
                  f"the server on 127.0.0.1:{self.port}", START_TIMEOUT_SECONDS + 10)

    def _create_database(self, name: str) -> None:
        with self._admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def _admin(self) -> psycopg.Connection:
        # The maintenance database: CREATE and DROP DATABASE cannot run inside a transaction.
        return psycopg.connect(self.url_for("postgres"), autocommit=True,
                               connect_timeout=CONNECT_TIMEOUT_SECONDS)

    def _signal(self, pid: int, signum: signal.Signals) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    def _log_tail(self, lines: int = 20) -> str:
        assert self.folder is not None
        text = ""
        for name in ("commands.log", "postgres.log"):
            try:
                text += (self.folder / name).read_text(errors="replace")
            except OSError:
                pass
        return "\n".join(text.splitlines()[-lines:])

    def _failure(self, what: str) -> str:
        assert self.folder is not None
        return (f"test PostgreSQL: {what}; see {self.log_file} and "
                f"{self.folder / 'commands.log'} (the folder is left for a look):\n"
                f"{self._log_tail()}")


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
