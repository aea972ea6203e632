"""``scrapy crawlstate --queue / --clear`` on the state a real crawl left: each lists what it will
delete with counts, asks (or takes --yes), and deletes only that. One-shot commands never leave
the embedded redis-server running, whichever way they end."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._cli import SHOP_SITE, redis_servers_under, scrapy
from webcrawl.demo.serve import ServerProcess, start_server_process

CRAWL = "shop-clear"


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ServerProcess]:
    (tmp_path / "sites").mkdir()
    (tmp_path / "sites" / f"{CRAWL}.toml").write_text(SHOP_SITE % {"name": CRAWL, "budget": 8})
    with start_server_process("shop", 1, tmp_path / "server.log", seed=5, products=30,
                              categories=3, blog_posts=0) as server:
        yield server


def counts(text: str) -> dict[str, int]:
    """``name: number`` lines of crawlstate's output."""
    return {m[1].strip(): int(m[2]) for m in re.finditer(r"^\s+([a-z][a-z ()-]+):\s+(\d+)", text,
                                                         re.M)}


def test_queue_then_everything(shop: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    common = ["-s", f"WEBCRAWL_REDIS_URL={redis_url}", "-s", "WEBCRAWL_SITES_DIR=sites",
              "-s", f"WEBCRAWL_DEMO_PORT={shop.port}", "-s", f"WEBCRAWL_DATA_DIR={tmp_path / 'data'}"]
    crawl = scrapy(["crawl", CRAWL, *common], tmp_path)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    before = counts(scrapy(["crawlstate", CRAWL, *common], tmp_path).stdout)
    assert before["queued requests"] > 0  # the budget ran out with the shop half discovered

    asked = scrapy(["crawlstate", CRAWL, "--queue", *common], tmp_path)
    assert asked.returncode == 2 and "add --yes" in asked.stderr
    listed = counts(asked.stdout)
    assert listed["frontiers"] == before["queued requests"] and listed["ready hosts"] == 1
    assert "kept: the seen filter" in asked.stdout
    assert counts(scrapy(["crawlstate", CRAWL, *common], tmp_path).stdout) == before

    cleared = scrapy(["crawlstate", CRAWL, "--queue", "--yes", *common], tmp_path)
    assert cleared.returncode == 0 and "the queue cleared" in cleared.stdout, cleared.stderr

    asked = scrapy(["crawlstate", CRAWL, "--clear", *common], tmp_path)
    assert asked.returncode == 2, asked.stderr
    listed = counts(asked.stdout)
    # (No deferred requests: work the budget cannot pay for yet waits in the queue.)
    assert [listed[name] for name in ("frontiers", "ready hosts", "leases")] == [0, 0, 0]
    assert listed["page records"] > 0 and listed["cycles"] == 1  # the rest was kept
    assert listed["latest records"] > 0 and listed["change events"] > 0 and listed["seen filter"] > 0

    cleared = scrapy(["crawlstate", CRAWL, "--clear", "-y", *common], tmp_path)
    assert cleared.returncode == 0 and "everything the crawl knows cleared" in cleared.stdout
    gone = scrapy(["crawlstate", CRAWL, *common], tmp_path)
    assert gone.returncode == 2 and f"no crawl {CRAWL!r}" in gone.stderr
    assert (tmp_path / "data" / CRAWL / "bodies").is_dir()  # the bodies on disk stay


def test_one_shot_commands_stop_the_embedded_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"WEBCRAWL_DATA_DIR": str(data)}
    runs = [
        (["exclude", "example.org"], 0),
        (["exclude", "--list"], 0),
        (["crawlstate", "nosuch"], 2),  # fails after the server started
        (["crawl", "follow", "-a", "seeds=http://127.0.0.2:9/", "-s",
          "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"], 0),
        (["crawlstate", "follow"], 0),
        (["crawlstate", "follow", "--clear"], 2),  # no terminal to ask: refuses
        (["crawlstate", "follow", "--queue", "--yes"], 0),
    ]
    for args, status in runs:
        done = scrapy(args, tmp_path, env=env)
        assert done.returncode == status, (args, done.stderr[-3000:])
        assert (data / "appendonly.aof").exists(), "the embedded server ran"
        assert redis_servers_under(data) == [], f"redis-server left running after {args}"
