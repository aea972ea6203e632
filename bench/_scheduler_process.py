"""Crawl processes of the benchmarks: how they are started, and what they cost.

Two kinds of ``scrapy crawl`` child, each with its own settings module:

- webcrawl: ``SCRAPY_SETTINGS_MODULE=webcrawl.settings`` (the project as users run it);
- the baseline: ``SCRAPY_SETTINGS_MODULE=vanillabench.settings`` from ``bench/vanilla/``, a plain
  Scrapy project with nothing of webcrawl (:func:`webcrawl_components` checks its log for that).

Each child is reaped with ``os.wait4``, which gives its own CPU time and peak RSS (the
whole-process figures of ``/usr/bin/time -v``), and its stats are read from the end of its log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.crawls import REPO, stats_of

VANILLA_PROJECT = REPO / "bench" / "vanilla"


def scrapy_command(spider: str, settings: dict[str, object], args: dict[str, str] | None = None,
                   *, module: str = "scrapy") -> list[str]:
    """``python -m <module> crawl <spider> -a ... -s ...``; ``module`` runs Scrapy's command line
    after a set-up of its own."""
    command = [sys.executable, "-m", module, "crawl", spider]
    for key, value in (args or {}).items():
        command += ["-a", f"{key}={value}"]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return command


def project_env(project: str) -> dict[str, str]:
    """Environment of a child running ``project``: ``webcrawl`` or ``vanilla``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    if project == "webcrawl":
        env["SCRAPY_SETTINGS_MODULE"] = "webcrawl.settings"
        env["PYTHONPATH"] = str(REPO)
    elif project == "vanilla":
        env["SCRAPY_SETTINGS_MODULE"] = "vanillabench.settings"
        env["PYTHONPATH"] = str(VANILLA_PROJECT)
    else:
        raise ValueError(f"unknown project {project!r}")
    return env


def webcrawl_components(log: str) -> list[str]:
    """webcrawl's classes among the enabled middlewares, extensions and pipelines of a crawl log
    (the scheduler is not listed there)."""
    found = []
    for block in re.findall(r"Enabled [a-z ]+:\n(\[.*?\])", log, re.S):
        found += re.findall(r"'(webcrawl\.[\w.]+)'", block)
    return found


@dataclass
class Crawl:
    """A finished (or killed) crawl process and what it cost."""

    returncode: int
    wall: float
    cpu: float
    max_rss_mb: float
    stats: dict[str, object] = field(default_factory=dict)
    log: str = ""

    def stat(self, key: str) -> float:
        value = self.stats.get(key, 0)
        return float(value) if isinstance(value, int | float) else 0.0


class Child:
    """One crawl process; its output goes to ``cwd / log_name``."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, log_name: str,
                 profile: Path | None = None) -> None:
        if profile is not None:
            command = [command[0], "-m", "cProfile", "-o", str(profile), *command[1:]]
        self.log = cwd / log_name
        self.started = time.monotonic()
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                            stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        # WNOWAIT: look without reaping, so that wait() still gets the child's resource usage.
        return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None

    def wait(self, timeout: float = 300.0, kill: bool = False) -> Crawl:
        """Reap the child (SIGKILL it first with ``kill``, or past ``timeout``)."""
        if kill:
            self.process.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.process.send_signal(signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.01)
        wall = time.monotonic() - self.started
        self.process.returncode = os.waitstatus_to_exitcode(status)
        text = self.log.read_text(errors="replace")
        return Crawl(self.process.returncode, wall, usage.ru_utime + usage.ru_stime,
                     usage.ru_maxrss / 1024, stats_of(text), text)


def extra_settings(bench: str) -> dict[str, str]:
    """Settings added to every webcrawl crawl of ``./run bench <bench>``, from
    ``BENCH_<BENCH>_WEBCRAWL_SETTINGS`` (``NAME=value`` pairs separated by spaces), for A/B runs of
    one setting such as ``WEBCRAWL_HTTP_CLIENT=twisted``."""
    text = os.environ.get(f"BENCH_{bench.upper()}_WEBCRAWL_SETTINGS", "")
    pairs = [item.partition("=") for item in text.split()]
    bad = [name for name, eq, _ in pairs if not eq or not name]
    if bad:
        raise SystemExit(f"BENCH_{bench.upper()}_WEBCRAWL_SETTINGS: {bad[0]!r} is not NAME=value")
    return {name: value for name, _, value in pairs}


def reproduce(bench: str) -> str:
    """The command that reproduces a run of ``./run bench <bench>``, with the ``BENCH_<BENCH>_*``
    settings it was given (those that only keep logs or skip writing left out)."""
    prefix = f"BENCH_{bench.upper()}_"
    knobs = [f"{k}={v}" for k, v in sorted(os.environ.items())
             if k.startswith(prefix) and k.removeprefix(prefix) not in ("WRITE", "KEEP")]
    return " ".join([*knobs, f"./run bench {bench}"])
