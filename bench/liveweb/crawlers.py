"""The crawlers the benchmark runs against the test web, each as its own ``scrapy crawl`` process.

:func:`webcrawl_invocation` is the one place that knows how webcrawl is told to crawl the test
web continuously at a budget rate and stop after a time; :func:`roundrobin_invocation` does the
same for the baseline, which runs with its own settings module and nothing from webcrawl.
:func:`run_crawler` runs one (and can kill it with SIGKILL once and start it again);
:func:`crawl_events` reads a finished webcrawl crawl's change events (``scrapy events``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.liveweb.params import ScenarioParams
from bench.liveweb.process import REPO

__all__ = ["CRAWLERS", "Invocation", "NEWCOMER_SITE_FILE", "SITE_FILE", "crawl_estimate",
           "crawl_events", "newcomer_site_text", "run_crawler", "roundrobin_invocation",
           "site_urls", "webcrawl_invocation"]

SITES_DIR = Path(__file__).resolve().parent / "sites"
SITE_FILE = SITES_DIR / "liveweb.toml"
#: The lifecycle web as a newcomer describes it (product pages only); its site is ``shops``.
NEWCOMER_SITE_FILE = SITES_DIR / "newcomer.toml"
CRAWLERS = ("webcrawl", "roundrobin")


@dataclass(frozen=True)
class Invocation:
    """A crawler's command line and environment; ``pidfiles`` name daemons it may start (they
    leave its process group) that must not outlive the run."""

    argv: list[str]
    env: dict[str, str]
    pidfiles: tuple[Path, ...] = ()


def _env(source: Path = REPO, **extra: str) -> dict[str, str]:
    path = str(source) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=path, **extra)


def webcrawl_invocation(port: int, seconds: float, budget_rate: float, data_dir: Path,
                        cycle_seconds: float = 60.0, source: Path = REPO, site: str = "liveweb",
                        sites_dir: Path = SITES_DIR,
                        settings: dict[str, str] | None = None) -> Invocation:
    """``scrapy crawl liveweb`` with the project's settings: the site file's continuous 60-second
    cycles, whose budget is ``budget_rate`` credits per second, stopping after ``seconds``; its
    Redis and stored bodies in ``data_dir``; webcrawl imported from ``source`` (a checkout;
    default this one). ``site`` names another site of the site files in ``sites_dir``;
    ``settings`` are more ``-s NAME=VALUE``."""
    argv = [sys.executable, "-m", "scrapy", "crawl", site,
            "-s", f"WEBCRAWL_CYCLE_SECONDS={cycle_seconds:g}",
            "-s", f"WEBCRAWL_BUDGET_PER_CYCLE={budget_rate * cycle_seconds:g}",
            "-s", f"CLOSESPIDER_TIMEOUT={seconds:g}"]
    for name, value in (settings or {}).items():
        argv += ["-s", f"{name}={value}"]
    env = _env(source, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               WEBCRAWL_SITES_DIR=str(sites_dir), WEBCRAWL_DATA_DIR=str(data_dir),
               LIVEWEB_PORT=str(port))
    return Invocation(argv, env, pidfiles=(data_dir / "redis.pid",))  # its embedded Redis


def crawl_estimate(invocation: Invocation, folder: Path, info: dict[str, Any], start: float,
                   end: float) -> float | None:
    """webcrawl's own estimate of its copy's value-weighted freshness over the scored window
    (``scrapy report liveweb --json``: each cycle's time-averaged estimate, weighted by how much
    of the cycle falls inside the window); ``None`` when the crawl recorded none."""
    argv = [sys.executable, "-m", "scrapy", "report", "liveweb", "--json"]
    done = subprocess.run(argv, cwd=folder, env=invocation.env, capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        return None
    origin = float(info["origin"])
    total = weight = 0.0
    for cycle in json.loads(done.stdout)["cycles"].values():
        if "freshness_value_mean" not in cycle:
            continue
        lo = max(cycle["started"] - origin, start)
        hi = min(cycle.get("ends", cycle["started"]) - origin, end)
        if hi > lo:
            total += cycle["freshness_value_mean"] * (hi - lo)
            weight += hi - lo
    return total / weight if weight else None


def newcomer_site_text(params: ScenarioParams) -> str:
    """The newcomer's site file, its ``sitemaps`` naming those of the shops of ``params`` that
    have one (the file as it is for the default, shops 2 and 3 without)."""
    text = NEWCOMER_SITE_FILE.read_text()
    urls = "".join(f'    "http://{host}:${{LIVEWEB_PORT}}/sitemap.xml",\n'
                   for host, shop in zip(params.hosts, params.shops) if shop.sitemap)
    return re.sub(r"^sitemaps = \[\n.*?^\]\n", lambda _: f"sitemaps = [\n{urls}]\n", text,
                  count=1, flags=re.M | re.S)


def site_urls(port: int) -> tuple[list[str], list[str]]:
    """The site file's seeds and sitemaps for a server on ``port``."""
    site = tomllib.loads(SITE_FILE.read_text())

    def expand(url: str) -> str:
        return url.replace("${LIVEWEB_PORT}", str(port))

    return [expand(u) for u in site["seeds"]], [expand(u) for u in site["sitemaps"]]


def roundrobin_invocation(port: int, seconds: float, budget_rate: float) -> Invocation:
    """The round-robin baseline on the same seeds and sitemaps, at the same budget rate."""
    seeds, sitemaps = site_urls(port)
    argv = [sys.executable, "-m", "scrapy", "crawl", "roundrobin",
            "-a", "seeds=" + ",".join(seeds), "-a", "sitemaps=" + ",".join(sitemaps),
            "-a", f"budget={budget_rate:g}", "-s", f"CLOSESPIDER_TIMEOUT={seconds:g}"]
    return Invocation(argv, _env(SCRAPY_SETTINGS_MODULE="bench.liveweb.roundrobin.settings"))


def invocation_for(crawler: str, port: int, seconds: float, budget_rate: float,
                   folder: Path, webcrawl_source: Path = REPO) -> Invocation:
    if crawler == "webcrawl":
        return webcrawl_invocation(port, seconds, budget_rate, (folder / "data").resolve(),
                                   source=webcrawl_source)
    if crawler == "roundrobin":
        return roundrobin_invocation(port, seconds, budget_rate)
    raise ValueError(f"unknown crawler {crawler!r}, expected one of {CRAWLERS}")


def crawl_events(invocation: Invocation, folder: Path, site: str, out: Path,
                 timeout: float = 300.0) -> str | None:
    """``scrapy events SITE -o OUT`` in the crawl's ``folder`` with its environment, then any
    daemon it started is stopped; None when it worked, else why not (its output's tail)."""
    argv = [sys.executable, "-m", "scrapy", "events", site, "-o", str(out)]
    try:
        done = subprocess.run(argv, cwd=folder, env=invocation.env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"scrapy events did not finish in {timeout:g} s"
    finally:
        for pidfile in invocation.pidfiles:
            _stop_daemon(pidfile)
    if done.returncode != 0 or not out.exists():
        return f"scrapy events exited {done.returncode}: {(done.stderr or done.stdout)[-1500:]}"
    return None


def _start(invocation: Invocation, folder: Path, log_name: str) -> subprocess.Popen[bytes]:
    with open(folder / log_name, "wb") as log:
        return subprocess.Popen(invocation.argv, cwd=folder, env=invocation.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def run_crawler(invocation: Invocation, folder: Path, until_monotonic: float,
                grace: float = 60.0, kill_at_monotonic: float | None = None) -> int:
    """Run the crawler in ``folder`` (its working directory; output in ``crawl.log``) until it
    exits or ``until_monotonic``; then SIGINT (Scrapy's graceful stop), and after ``grace``
    seconds SIGKILL to its whole process group (its embedded Redis included). Returns the exit
    status.

    With ``kill_at_monotonic`` (before ``until_monotonic``) the crawl is killed as ``kill -9``
    would (SIGKILL to its process group; its daemons, such as an embedded Redis, live on) at that
    time and started again at once, output in ``crawl-2.log``."""
    folder.mkdir(parents=True, exist_ok=True)
    process = _start(invocation, folder, "crawl.log")
    if kill_at_monotonic is not None and kill_at_monotonic < until_monotonic:
        try:
            process.wait(max(0.0, kill_at_monotonic - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            process = _start(invocation, folder, "crawl-2.log")
    try:
        status = process.wait(max(0.0, until_monotonic - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # the leader only: its Redis must outlive its close
        try:
            status = process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            status = process.wait()
    try:  # anything of the crawl still alive in its group goes too
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    for pidfile in invocation.pidfiles:
        _stop_daemon(pidfile)
    return status


def _stop_daemon(pidfile: Path, timeout: float = 10.0) -> None:
    """Stop the daemon named by ``pidfile`` if it still runs and was started from that folder
    (its command line names it), SIGTERM first, SIGKILL after ``timeout`` seconds."""
    try:
        pid = int(pidfile.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, ValueError):
        return  # no pidfile, or the process is gone
    if str(pidfile.parent) not in command:
        return  # the pid was reused by another process
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it stopped meanwhile


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
