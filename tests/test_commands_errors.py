"""A user's mistake ends a command with one ``scrapy: error:`` line and a non-zero status, never a
traceback; a bug in code keeps its traceback. Every case runs the real command in a subprocess."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests._cli import REPO, SHOP_SITE, error_lines, scrapy

SEEDS = "seeds=http://127.0.0.2:9/"


CASES: list[tuple[list[str], list[str]]] = [
    (["crawl", "deom"], ["Spider not found: deom", "did you mean 'demo'?", "webcrawl/sites/",
                         "WEBCRAWL_SITES_DIR (not set)"]),
    (["crawl", "nonexistent"], ["Spider not found: nonexistent", "scrapy list"]),
    (["crawl", "demo", "-s", "WEBCRAWL_SITES_DIR=/nope"],
     ["WEBCRAWL_SITES_DIR='/nope'", "'/nope' is not a folder"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_DOMAIN_DELAY_SECONDS=abc"],
     ["WEBCRAWL_DOMAIN_DELAY_SECONDS='abc' is not a number"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_GC_THRESHOLD=lots"],
     ["WEBCRAWL_GC_THRESHOLD='lots' is not an integer"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_GC_THRESHOLD=-5"],
     ["WEBCRAWL_GC_THRESHOLD='-5' is out of range"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=nonsense"],
     ["WEBCRAWL_ALLOWED_PRIVATE_NETWORKS", "'nonsense' is not an IP network"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=[\"10.0.0.0/8\""],
     ["WEBCRAWL_ALLOWED_PRIVATE_NETWORKS", "is not a JSON list"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_HTTP_CLIENT=curl"],
     ["WEBCRAWL_HTTP_CLIENT='curl'", "the setting is gone"]),
    (["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_REDIS_URL=redis://127.0.0.1:1"],
     ["Redis at redis://127.0.0.1:1 does not answer", "WEBCRAWL_REDIS_URL"]),
    (["checksites", "-s", "WEBCRAWL_SITES_DIR=/nope"], ["WEBCRAWL_SITES_DIR='/nope'"]),
    (["body", "nosuchsite", "http://127.0.0.2/"], ["no body store for site 'nosuchsite'",
                                                   "WEBCRAWL_DATA_DIR"]),
    (["exclude", "not/a/host"], ["'not/a/host' is not a host name"]),
    (["crawlstate", "nosuch"], ["no crawl 'nosuch'", "holds no crawl state"]),
    (["crawlstate", "demo", "-s", "WEBCRAWL_REDIS_URL=redis://127.0.0.1:1"],
     ["Redis at redis://127.0.0.1:1 does not answer", "WEBCRAWL_REDIS_URL"]),
    (["report", "demo", "-s", "WEBCRAWL_REDIS_URL=redis://127.0.0.1:1"],
     ["Redis at redis://127.0.0.1:1 does not answer", "WEBCRAWL_REDIS_URL"]),
    (["exclude", "example.org", "-s", "WEBCRAWL_REDIS_URL=redis://127.0.0.1:1"],
     ["Redis at redis://127.0.0.1:1 does not answer", "WEBCRAWL_REDIS_URL"]),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory
             ) -> dict[int, tuple[Path, subprocess.CompletedProcess[str]]]:
    """Every case's command, run side by side (each in its own folder): they only start Python."""
    folders = [tmp_path_factory.mktemp("case") for _ in CASES]
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda i: scrapy(CASES[i][0], folders[i]), range(len(CASES))))
    return {i: (folders[i], done[i]) for i in range(len(CASES))}


@pytest.mark.parametrize("case", range(len(CASES)), ids=[" ".join(c[0][:2]) + (" redis" if "REDIS_URL" in " ".join(c[0]) else "") for c in CASES])
def test_mistake_before_start_is_one_line(
        case: int, outcomes: dict[int, tuple[Path, subprocess.CompletedProcess[str]]]) -> None:
    folder, done = outcomes[case]
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("scrapy: error: "), done.stderr
    for text in CASES[case][1]:
        assert text in done.stderr
    assert not (folder / ".webcrawl").exists(), "a failed command started nothing"


def test_unknown_crawl_names_the_crawls_there(redis_url: str, tmp_path: Path) -> None:
    done = scrapy(["crawlstate", "nosuch", "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], tmp_path)
    assert done.returncode == 2 and "holds no crawl" in done.stderr, done.stderr
    done = scrapy(["crawl", "follow", "-a", SEEDS, "-s", f"WEBCRAWL_REDIS_URL={redis_url}",
                   "-s", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = scrapy(["crawlstate", "folow", "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert error_lines(done.stderr) == [done.stderr.strip()]
    assert "no crawl 'folow' in Redis at" in done.stderr and "crawls there: follow" in done.stderr


def test_setting_a_component_rejects_is_named_in_one_line(redis_url: str, tmp_path: Path) -> None:
    # Read by the robots.txt middleware when the crawler is built, not by the command's checks.
    done = scrapy(["crawl", "follow", "-a", SEEDS, "-s", "WEBCRAWL_ROBOTS_CACHE_SECONDS=abc",
                   "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "WEBCRAWL_ROBOTS_CACHE_SECONDS" in lines[0]
    assert done.stderr.strip().endswith(lines[0])


BROKEN_SPIDER = '''
from webcrawl.spiders.site import SiteSpider


class Broken(SiteSpider):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("a bug in the spider")
'''


def test_a_bug_keeps_its_traceback(tmp_path: Path) -> None:
    (tmp_path / "sites").mkdir()
    site = SHOP_SITE % {"name": "broken", "budget": 10}
    (tmp_path / "sites" / "broken.toml").write_text(
        site.replace('allowed_domains =', 'spider = "brokenspider.Broken"\nallowed_domains ='))
    (tmp_path / "brokenspider.py").write_text(BROKEN_SPIDER)
    done = scrapy(["crawl", "broken", "-s", "WEBCRAWL_SITES_DIR=sites", "-s",
                   "WEBCRAWL_DEMO_PORT=9"], tmp_path,
                  env={"PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"})
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: a bug in the spider" in done.stderr
    assert not error_lines(done.stderr)
