"""Run a demo site in its own process, and start such a process from tests and benchmarks.

Command line::

    python -m webcrawl.demo.serve --site shop|generated --hosts 4 [--port N] [--log FILE]
        [--first-host 127.0.0.2] [--seed S] [site options, e.g. --time-scale 3600 --pages 600]

prints one line ``READY {"hosts": [...], "port": N, "site": ..., "pid": ..., ...}`` on stdout once
every host is listening, then serves until SIGTERM or SIGINT. Site options are the keyword
arguments of :class:`~webcrawl.demo.shop.ShopSite` / :class:`~webcrawl.demo.generated.GeneratedSite`
with dashes (``--time-scale``); tuple options take comma-separated integers (``--lying-validators 2``);
the shop's ``--lifecycle`` takes ``on`` or ``key=value,...`` (:meth:`Lifecycle.parse`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from webcrawl.demo.generated import GeneratedSite
from webcrawl.demo.lifecycle import Lifecycle
from webcrawl.demo.server import LogEntry, MultiHostServer, Site, default_hosts, read_log
from webcrawl.demo.shop import ShopSite
from webcrawl.demo.static import StaticSite

SITES: dict[str, type] = {"shop": ShopSite, "generated": GeneratedSite, "static": StaticSite}
_NOT_OPTIONS = {"self", "seed", "hosts", "prerender"}

# The --help text (the module docstring is for readers of the code).
_HELP = """\
Serve a demo site on several loopback addresses (127.0.0.2, 127.0.0.3, ...), one port for all.

Once every host listens, prints one line on stdout:
  READY {"hosts": [...], "port": N, "site": ..., "pid": ..., ...}
then serves until stopped (SIGTERM or Ctrl-C).

Sites: shop (a catalog whose records change over time), generated (pages of chosen sizes and
links), static (a folder of files, e.g. Debian's Python HTML documentation). The options below
each apply to one site (named in their help); list options take comma-separated integers
(--lying-validators 2,3).

The shop's products are born, die (404 or 410), come back, move (301 or 308) and redirect for a
while (302 or 307) with --lifecycle on, or with chosen shares and times (simulated seconds after
--epoch): --lifecycle start=20,span=15,death_share=0.1,dead_for=10:20 (see docs/demo.md).
"""
# Defaults that are paths on the machine that wrote the code: described, not printed.
_PATH_DEFAULTS = {"root": "Debian's Python HTML documentation (python3.11-doc)"}


def site_options(name: str) -> dict[str, inspect.Parameter]:
    """The keyword options a site class accepts (besides seed and hosts)."""
    params = inspect.signature(SITES[name]).parameters
    return {k: p for k, p in params.items() if k not in _NOT_OPTIONS}


def build_site(name: str, hosts: int, seed: int = 0, **options: Any) -> Site:
    """A site by name; ``hosts`` is passed on to sites whose structure depends on it."""
    if name not in SITES:
        raise ValueError(f"unknown site {name!r}, expected one of {sorted(SITES)}")
    cls = SITES[name]
    if "hosts" in inspect.signature(cls).parameters:
        options["hosts"] = hosts
    if isinstance(options.get("lifecycle"), str):  # the command line's text (and READY's)
        options["lifecycle"] = Lifecycle.parse(options["lifecycle"])
    site: Site = cls(seed, **options)
    return site


def _parse_ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _lifecycle_text(text: str) -> str:
    """A valid ``--lifecycle`` as given: the text, not the object, goes into READY's options."""
    try:
        Lifecycle.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _add_site_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per option of any site; the annotation string says how to parse it."""
    seen: set[str] = set()
    for name in SITES:
        for key, param in site_options(name).items():
            if key in seen:
                continue
            seen.add(key)
            flag, kind = "--" + key.replace("_", "-"), str(param.annotation)
            if "Lifecycle" in kind:
                parser.add_argument(flag, dest=key, type=_lifecycle_text, default=None,
                                    metavar="on|KEY=VALUE,...",
                                    help=f"{name} option: products born, dying, coming back, moving "
                                         "and redirecting for a while (default off)")
            elif kind == "bool":
                parser.add_argument(flag, dest=key, action=argparse.BooleanOptionalAction,
                                    default=None)
            else:
                convert = _parse_ints if kind.startswith("tuple") else (
                    float if "float" in kind else int if kind == "int" else str)
                default = _PATH_DEFAULTS.get(key, repr(param.default))
                parser.add_argument(flag, dest=key, type=convert, default=None,
                                    help=f"{name} option (default {default})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webcrawl.demo.serve", description=_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", choices=sorted(SITES), default="shop",
                        help="the site to serve (default shop)")
    parser.add_argument("--hosts", type=int, default=4, help="number of 127.0.0.x addresses")
    parser.add_argument("--first-host", default="127.0.0.2",
                        help="the first loopback address (default 127.0.0.2)")
    parser.add_argument("--port", type=int, default=0, help="0: a port free on every host")
    parser.add_argument("--log", help="append the request log here as JSON lines")
    parser.add_argument("--seed", type=int, default=0,
                        help="the site's random seed: same seed, same site (default 0)")
    _add_site_flags(parser)
    args = vars(parser.parse_args(argv))
    accepted = site_options(args["site"])
    options = {k: v for k, v in args.items() if k in accepted and v is not None}
    ignored = [k for k, v in args.items() if v is not None and k not in accepted
               and k not in ("site", "hosts", "first_host", "port", "log", "seed")]
    if ignored:
        parser.error(f"options {ignored} do not apply to --site {args['site']}")
    site = build_site(args["site"], args["hosts"], args["seed"], **options)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = MultiHostServer(site, default_hosts(args["hosts"], args["first_host"]), args["port"],
                             args["log"])
    try:
        server.start()
    except OSError as exc:
        parser.exit(2, f"{parser.prog}: error: cannot listen on port {args['port']}: "
                       f"{exc.strerror or exc}; --port 0 picks a free port\n")
    try:
        info: dict[str, Any] = getattr(site, "ready_info", dict)()
        ready = {"site": args["site"], "hosts": server.hosts, "port": server.port,
                 "pid": os.getpid(), "seed": args["seed"], "options": options, **info}
        print("READY " + json.dumps(ready), flush=True)
        stop.wait()
    finally:
        server.stop()
    return 0


class ServerProcess:
    """A demo server running in a child process (see :func:`start_server_process`)."""

    def __init__(self, process: subprocess.Popen[bytes], ready: dict[str, Any],
                 log_path: Path, errors: IO[bytes]) -> None:
        self.process, self.ready, self.log_path = process, ready, log_path
        self._errors = errors
        self.hosts: list[str] = ready["hosts"]
        self.port: int = ready["port"]
        self._site: Site | None = None

    def base_url(self, host: str | int = 0) -> str:
        address = self.hosts[host] if isinstance(host, int) else host
        return f"http://{address}:{self.port}"

    def read_log(self) -> list[LogEntry]:
        """The child's request log so far (every completed request, flushed line by line)."""
        return read_log(self.log_path)

    @property
    def site(self) -> Any:
        """A local copy of the served site, bound like it, for truth (records, link graph)."""
        if self._site is None:
            options = dict(self.ready["options"])
            if self.ready["site"] == "shop":
                options["clock_origin"] = self.ready["clock_origin"]
            if self.ready["site"] == "generated":
                options["prerender"] = False
            self._site = build_site(self.ready["site"], len(self.hosts), self.ready["seed"],
                                    **options)
            self._site.bind(self.hosts, self.port)
        return self._site

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM the child and wait for it (SIGKILL after ``timeout``); returns its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._errors.close()
        return self.process.returncode

    def stderr(self) -> str:
        """What the child wrote on stderr so far (for failure messages)."""
        self._errors.seek(0)
        return self._errors.read().decode(errors="replace")

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server_process(site: str, hosts: int, log_path: str | Path, *, seed: int = 0,
                         port: int = 0, first_host: str = "127.0.0.2", timeout: float = 30.0,
                         **options: Any) -> ServerProcess:
    """Start ``python -m webcrawl.demo.serve`` and return once it printed READY.

    ``options`` are site options (``time_scale=3600``); tuples become comma lists, a
    :class:`Lifecycle` its :meth:`~Lifecycle.spec` (or pass that text: ``lifecycle="on"``). Raises
    ``RuntimeError`` with the child's stderr if it exits or stays silent past ``timeout``."""
    argv = [sys.executable, "-m", "webcrawl.demo.serve", "--site", site, "--hosts", str(hosts),
            "--port", str(port), "--log", str(log_path), "--seed", str(seed),
            "--first-host", first_host]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, Lifecycle):
            argv += [flag, value.spec()]
        else:
            text = ",".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
            argv += [flag, text]
    Path(log_path).touch()
    errors = tempfile.TemporaryFile()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors)
    deadline, buffer = time.monotonic() + timeout, b""
    with selectors.DefaultSelector() as selector:
        assert process.stdout is not None
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer or not buffer.startswith(b"READY "):
            if b"\n" in buffer:  # a stray line before READY: drop it
                buffer = buffer.split(b"\n", 1)[1]
                continue
            left = deadline - time.monotonic()
            chunk = os.read(process.stdout.fileno(), 65536) if left > 0 and selector.select(left) else b""
            if not chunk:
                process.kill()
                process.wait()
                errors.seek(0)
                message = errors.read().decode(errors="replace")[-2000:]
                errors.close()
                process.stdout.close()
                raise RuntimeError(f"demo server did not start ({argv}): {message}")
            buffer += chunk
    ready = json.loads(buffer.split(b"\n", 1)[0][len(b"READY "):])
    return ServerProcess(process, ready, Path(log_path), errors)


if __name__ == "__main__":
    sys.exit(main())
