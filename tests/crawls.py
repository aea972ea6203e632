"""Running real ``scrapy crawl`` processes from tests, and reading what they did."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from webcrawl.demo.server import LogEntry

REPO = Path(__file__).resolve().parent.parent


def crawl_command(spider: str, settings: dict[str, object], args: dict[str, str] | None = None,
                  ) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", spider]
    for key, value in (args or {}).items():
        command += ["-a", f"{key}={value}"]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return command


def start_crawl(spider: str, settings: dict[str, object], cwd: Path,
                args: dict[str, str] | None = None, log_name: str = "crawl.log",
                ) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(cwd / log_name, "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(crawl_command(spider, settings, args), cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def finish(process: subprocess.Popen[bytes], timeout: float = 120) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def stats_of(log_text: str) -> dict[str, object]:
    """The stats dict Scrapy dumps at the end of a crawl log."""
    match = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n(?:\d{4}-|$)", log_text, re.S)
    if not match:
        return {}
    text = re.sub(r"datetime\.datetime\([^)]*\)", "None", match.group(1))
    return ast.literal_eval(text)


def pages(log: Iterable[LogEntry]) -> list[LogEntry]:
    return [e for e in log if e.path != "/robots.txt"]


def gaps_by_host(log: Iterable[LogEntry]) -> dict[str, list[float]]:
    """Seconds between consecutive requests to each host, from the server's own log."""
    times: dict[str, list[float]] = defaultdict(list)
    for entry in log:
        times[entry.host].append(entry.mono)
    return {h: [b - a for a, b in zip(sorted(ts), sorted(ts)[1:])] for h, ts in times.items()}
