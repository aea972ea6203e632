"""``scrapy crawl`` with a continuous crawl's stop conditions given as settings
(``WEBCRAWL_STOP_AFTER_CYCLES``, ``WEBCRAWL_STOP_AFTER_SECONDS``): a real crawl of the demo shop
stopping after its cycles, and one-line errors for values it cannot take."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import _shopcrawl as shop
from tests._cli import scrapy
from tests.crawls import finish, start_crawl, stats_of
from webcrawl.demo.serve import ServerProcess, start_server_process


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with start_server_process("shop", 3, tmp_path / "server.log", products=12, categories=2,
                              blog_posts=0) as process:
        yield process


def test_a_one_run_site_runs_two_continuous_cycles_by_settings(
        server: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    shop.write_site(tmp_path, budget=20, cycle_seconds=3600)  # a one-run site file
    settings = shop.settings(redis_url, tmp_path, server.port, "stops",
                             WEBCRAWL_CYCLE_CONTINUOUS=True, WEBCRAWL_CYCLE_SECONDS=2,
                             WEBCRAWL_STOP_AFTER_CYCLES=2)
    assert finish(start_crawl(shop.SPIDER, settings, tmp_path), 90) == 0
    stats = stats_of((tmp_path / "crawl.log").read_text())
    assert stats["finish_reason"] == "stop_after_cycles"
    ledger = shop.cycles(redis_url, "stops")
    assert len(ledger) == 2 and stats["webcrawl/cycles/started"] == 2
    assert all(c["ends"] - c["started"] == pytest.approx(2.0) for c in ledger)
    assert all("fetched" in c for c in ledger), "each cycle closed with its figures"


@pytest.mark.parametrize(("settings", "expected"), [
    (["WEBCRAWL_STOP_AFTER_CYCLES=2"], "WEBCRAWL_STOP_AFTER_CYCLES='2': a stop condition needs "
                                       "continuous mode"),
    (["WEBCRAWL_CYCLE_CONTINUOUS=true", "WEBCRAWL_STOP_AFTER_CYCLES=0"],
     "WEBCRAWL_STOP_AFTER_CYCLES='0': expected an integer >= 1"),
    (["WEBCRAWL_CYCLE_CONTINUOUS=true", "WEBCRAWL_STOP_AFTER_SECONDS=soon"],
     "WEBCRAWL_STOP_AFTER_SECONDS='soon': expected a number of seconds > 0"),
])
def test_a_stop_it_cannot_take_is_one_line(settings: list[str], expected: str,
                                           tmp_path: Path) -> None:
    shop.write_site(tmp_path, budget=20)
    args = ["crawl", shop.SPIDER, "-s", f"WEBCRAWL_SITES_DIR={tmp_path / 'sites'}",
            "-s", "WEBCRAWL_DEMO_PORT=9"]
    for setting in settings:
        args += ["-s", setting]
    done = scrapy(args, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("scrapy: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert expected in done.stderr
    assert not (tmp_path / ".webcrawl").exists(), "a refused command started nothing"


def test_a_python_spider_has_no_cycles_to_stop(tmp_path: Path) -> None:
    done = scrapy(["crawl", "follow", "-a", "seeds=http://127.0.0.2:9/", "-s",
                   "WEBCRAWL_STOP_AFTER_CYCLES=1"], tmp_path)
    assert done.returncode == 2 and "this spider has no site file" in done.stderr, done.stderr
