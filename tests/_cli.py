"""Running webcrawl's ``scrapy`` commands as real subprocesses, and what they leave behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# A site file for the demo shop served on 127.0.0.2 (port from WEBCRAWL_DEMO_PORT), small enough
# for a crawl of a few seconds. ``%(name)s`` and ``%(budget)s`` are filled in by the tests.
SHOP_SITE = r"""
name = "%(name)s"
seeds = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT}/"]
allowed_domains = ["127.0.0.2"]
allowed_private_networks = ["127.0.0.0/8"]

[politeness]
user_agent = "webcrawl-test/0.1 (+https://example.org/webcrawl-test; test@example.org)"
min_delay_seconds = 0.0

[budget]
billing = "requests"
amount_per_cycle = %(budget)s
cycle_seconds = 3600

[limits]
max_depth = 2
denied_url_patterns = ['/(cart|search)(\?|$)', '/calendar/', '/archive/', '/files/', '/legacy/', '/blog/']

[[page_types]]
name = "product"
url_pattern = '^https?://[^/]+/product/\d+/[a-z0-9-]+'

[page_types.fields]
name = "article.product h1.name"
price = "article.product span.price"
"""


def scrapy(args: list[str], cwd: Path, *, env: dict[str, str] | None = None,
           timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """``python -m scrapy <args>`` in ``cwd`` with webcrawl's settings, stdin closed (never a
    terminal: a command that would ask must not wait)."""
    full = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
                PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in ("WEBCRAWL_REDIS_URL", "WEBCRAWL_DATA_DIR", "WEBCRAWL_SITES_DIR"):
        full.pop(name, None)  # only what the test gives
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=full,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=False)


def redis_servers_under(folder: Path) -> list[int]:
    """Process ids of redis-server processes whose command line names a path under ``folder``
    (the embedded server lists its unix socket there)."""
    needle = str(folder.resolve()).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if b"redis-server" in cmdline and needle in cmdline:
            found.append(int(entry.name))
    return found


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("scrapy: error:")]
