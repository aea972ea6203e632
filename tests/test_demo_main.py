"""``python -m webcrawl.demo`` as a user runs it: a real child process serving the shop and running
``scrapy crawl demo`` with the embedded Redis in a temporary data folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.crawls import REPO

PRODUCTS = 200  # the shop's default catalog


def run_demo(cwd: Path, data: Path, *args: str) -> tuple[str, float]:
    env = dict(os.environ, WEBCRAWL_DATA_DIR=str(data),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SCRAPY_SETTINGS_MODULE", None)  # the runner must set it itself
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "webcrawl.demo", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, time.monotonic() - started


def row(output: str, page_type: str) -> list[int]:
    """The numbers of a page type's row in the printed table."""
    match = re.search(rf"^{page_type}\s+([\d ]+)$", output, re.M)
    assert match, output
    return [int(n) for n in match.group(1).split()]


def test_demo_crawls_the_shop_then_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first, seconds = run_demo(tmp_path, data, "--fresh", "--port", "0", "--cycles", "1")
    assert seconds < 120, f"the demo took {seconds:.0f} s"
    assert "crawl finished (finished)" in first, first
    pages, records, *_, listed = row(first, "product")
    assert pages == records == PRODUCTS and listed == 0
    assert row(first, "category")[-1] == PRODUCTS  # every product listed once
    assert "robots.txt      4 fetched" in first and "sitemaps        4 read" in first
    for odd in ("binary 1", "encoding/broken 1", "truncated 1"):
        assert odd in first, first

    folder = data / "demo"
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"
    assert stats["webcrawl/parse/page_type/product"] == PRODUCTS
    changes = [json.loads(line) for line in (folder / "changes.jsonl").read_text().splitlines()]
    assert sum(c["page_type"] == "product" for c in changes) == PRODUCTS
    assert all("body" not in c and c["record"] for c in changes if c["page_type"] == "product")
    assert (data / "appendonly.aof").exists(), "the embedded Redis keeps its data in the data dir"
    assert not (tmp_path / ".webcrawl").exists(), "WEBCRAWL_DATA_DIR was not respected"

    # Same port, same crawl state, the shop's clock going on: two budgeted revisit cycles, each
    # within its budget, that find changed records, then the report over all cycles.
    port = re.search(r"port (\d+)", first)
    assert port, first
    second, _ = run_demo(tmp_path, data, "--port", port.group(1), "--cycles", "2",
                         "--budget", "40")
    cycles = re.findall(r"^cycle (\d+): (\w+) in [\d.]+ s, (\d+) requests", second, re.M)
    assert [c[0] for c in cycles] == ["1", "2"], second
    assert all(int(requests) <= 40 + 8 for _, _, requests in cycles), second  # + what was in flight
    assert "no pages parsed: every URL is known" not in second
    report = second.split("webcrawl report", 1)[1]
    for budget, spent in re.findall(r"^\d+\s+\S+ \S+\s+([\d,]+)\s+([\d,]+)\s", report, re.M):
        assert int(spent.replace(",", "")) <= int(budget.replace(",", "")), report
    product = re.search(r"^product\s+(\d+)\s+(\d+)\s+(\d+)", report, re.M)
    assert product and int(product.group(3)) > 0, f"no change found: {report}"
    assert (folder / "report.html").read_text().startswith("<!DOCTYPE html>")
