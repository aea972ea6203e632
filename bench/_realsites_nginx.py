"""nginx serving folders on loopback addresses, with a request log the benchmark reads.

:class:`Nginx` writes its own configuration into a temporary folder (no system file is touched:
pid, logs and temp paths all live there), runs ``nginx -g 'daemon off;'`` as a child process with
one worker, and stops it at the end. Each site is one ``server`` per :class:`Listener` on its own
127.0.0.x address; each listener has one port, picked free on every address. A listener is plain
http or https (with the benchmark's certificate), keeps connections alive or closes each after one
answer (``keepalive_timeout 0``), and lets TLS sessions be resumed (a shared session cache and
session tickets) or not. Every request is logged, unbuffered, with the file it was answered from
(after ``/dir/`` became ``dir/index.html``), so what a crawl fetched is read from the server's
side, not from the crawler's own account; and with its connection's serial number and whether
that connection's TLS handshake resumed a session (``$ssl_session_reused``).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from bench._scheduler_redis import cpu_seconds, wait_until

MIME_TYPES = Path("/etc/nginx/mime.types")

_CONFIG = """\
{user}worker_processes 1;
error_log {folder}/error.log warn;
pid {folder}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    {types}
    default_type application/octet-stream;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    absolute_redirect off;
    log_not_found off;
    client_body_temp_path {folder}/tmp/body;
    proxy_temp_path {folder}/tmp/proxy;
    fastcgi_temp_path {folder}/tmp/fastcgi;
    uwsgi_temp_path {folder}/tmp/uwsgi;
    scgi_temp_path {folder}/tmp/scgi;
    log_format bench '$msec $status $body_bytes_sent "$request_filename" "$request_uri" '
                     '$connection $connection_requests "$ssl_session_reused" "$ssl_protocol"';
{servers}
}}
"""
_SERVER = """\
    server {{
        listen {address}:{port}{ssl};
        root {root};
        index index.html;
        access_log {log} bench;
        keepalive_timeout {keepalive};
{tls}    }}
"""
_TLS = """\
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate {certificate};
        ssl_certificate_key {key};
        ssl_session_cache {cache};
        ssl_session_tickets {tickets};
"""
_LINE = re.compile(r'^(\d+\.\d+) (\d{3}) (\d+) "(.*)" "(.*)" (\d+) (\d+) "(.*)" "(.*)"$')


@dataclass(frozen=True)
class Listener:
    """How one port of the server answers: http or https, connections kept alive (65 s, a
    million requests) or closed after each answer, TLS sessions resumable or not."""

    tls: bool = False
    keepalive: bool = True
    resume: bool = True

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"


HTTP = Listener()


@dataclass(frozen=True)
class Access:
    """One request as nginx logged it: ``file`` relative to the site's root ('' outside it)."""

    time: float
    status: int
    bytes: int
    file: str
    uri: str
    connection: int = 0  # nginx's serial number of the connection
    connection_requests: int = 1  # 1: the first request of its connection
    resumed: bool = False  # the connection's TLS handshake resumed a session
    protocol: str = ""  # TLSv1.3, TLSv1.2; '' over http


class Nginx:
    """``sites`` maps a name to ``(address, root folder)``; ``listeners`` a name to a
    :class:`Listener` (one plain http listener, ``"http"``, by default); ``certificate`` is the
    ``(certificate chain, key)`` PEM files of the https listeners."""

    def __init__(self, folder: Path, sites: dict[str, tuple[str, Path]],
                 listeners: dict[str, Listener] | None = None,
                 certificate: tuple[Path, Path] | None = None) -> None:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if binary is None:
            raise RuntimeError("nginx is not installed (apt-get install nginx)")
        self.binary, self.folder, self.sites = binary, folder, sites
        self.listeners = listeners or {"http": HTTP}
        if certificate is None and any(listener.tls for listener in self.listeners.values()):
            raise ValueError("https listeners need a certificate")
        self.certificate = certificate
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen[bytes] | None = None

    def log_path(self, name: str) -> Path:
        return self.folder / f"{name}.access.log"

    def start(self) -> Nginx:
        (self.folder / "tmp").mkdir(parents=True, exist_ok=True)
        for _ in range(10):  # another process may take a port between probing and binding
            self.ports = {}
            for name in self.listeners:
                self.ports[name] = _port_free_on([address for address, _ in self.sites.values()],
                                                 set(self.ports.values()))
            (self.folder / "nginx.conf").write_text(self._config())
            self.process = subprocess.Popen(
                [self.binary, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf"),
                 "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if wait_until(lambda: self.process.poll() is not None or self._listening(), 20) \
                    and self.process.poll() is None:
                return self
            self.stop()
        raise RuntimeError(f"nginx did not start: {(self.folder / 'error.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish, logs are flushed
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The first listener's port."""
        return self.ports[next(iter(self.listeners))]

    def base_url(self, name: str, listener: str | None = None) -> str:
        """``scheme://address:port`` of site ``name`` on ``listener`` (the first by default)."""
        listener = listener or next(iter(self.listeners))
        return f"{self.listeners[listener].scheme}://{self.sites[name][0]}:{self.ports[listener]}"

    def read_log(self, name: str) -> list[Access]:
        """Every request to site ``name`` so far, in the order nginx finished them."""
        root = str(self.sites[name][1]).rstrip("/") + "/"
        entries = []
        with open(self.log_path(name), encoding="utf-8", errors="replace") as f:
            for line in f:
                match = _LINE.match(line.rstrip("\n"))
                if match is None:
                    continue  # a torn last line
                at, status, size, filename, uri, serial, nth, reused, protocol = match.groups()
                file = filename[len(root):] if filename.startswith(root) else ""
                entries.append(Access(float(at), int(status), int(size), file, uri, int(serial),
                                      int(nth), reused == "r", protocol.strip("-")))
        return entries

    def cpu_seconds(self) -> float:
        """CPU seconds of the master and its workers so far."""
        assert self.process is not None
        pids = [self.process.pid]
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        if children.exists():
            pids += [int(p) for p in children.read_text().split()]
        total = 0.0
        for pid in pids:
            try:
                total += cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
        return total

    def _config(self) -> str:
        types = f"include {MIME_TYPES};" if MIME_TYPES.exists() else \
            "types { text/html html htm; text/plain txt; text/css css; }"
        servers = "".join(self._server(address, root, self.log_path(name), listener)
                          for name, (address, root) in self.sites.items()
                          for listener in self.listeners)
        # Started by root, nginx would run its worker as nobody, who may not read the caller's
        # folders: the worker stays the caller (it serves loopback only).
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        return _CONFIG.format(user=user, folder=self.folder, types=types, servers=servers)

    def _server(self, address: str, root: Path, log: Path, name: str) -> str:
        listener = self.listeners[name]
        tls = ""
        if listener.tls:
            assert self.certificate is not None
            # "off", not "none": nginx then tells clients that sessions may not be reused.
            tls = _TLS.format(certificate=self.certificate[0], key=self.certificate[1],
                              cache="shared:bench:10m" if listener.resume else "off",
                              tickets="on" if listener.resume else "off")
        return _SERVER.format(address=address, port=self.ports[name], root=root, log=log,
                              ssl=" ssl" if listener.tls else "", tls=tls,
                              keepalive="65" if listener.keepalive else "0")

    def _listening(self) -> bool:
        for address, _ in self.sites.values():
            for port in self.ports.values():
                try:
                    socket.create_connection((address, port), timeout=1).close()
                except OSError:
                    return False
        return True


def _port_free_on(addresses: list[str], taken: Collection[int] = ()) -> int:
    """A port free on every address (and not in ``taken``): the first one's free port, checked
    on the others."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = int(probe.getsockname()[1])
        if port in taken:
            continue
        try:
            for address in addresses[1:]:
                with socket.socket() as other:
                    other.bind((address, port))
            return port
        except OSError:
            continue
    raise OSError(f"no port free on all of {addresses}")
