"""scrapyd deployment, for real: build the project's egg, start scrapyd on 127.0.0.1 in a temporary
folder, deploy the egg, find every bundled site in listspiders.json, schedule a crawl of the demo
shop (served by the test on 127.0.0.2-5) and check what the job fetched from the shop's own log.
And a project of its own with webcrawl's add-on line alone, deployed: listspiders.json offers
its site files."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests._addonproject import new_project
from tests.crawls import REPO, stats_of
from webcrawl.demo.serve import ServerProcess, start_server_process

PROJECT = "webcrawl"
EGG_ONLY = "eggonly"
DEADLINE_SECONDS = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bundled_sites() -> set[str]:
    """The ``name`` of every site file shipped inside the package."""
    return {tomllib.loads(f.read_text())["name"] for f in (REPO / "webcrawl" / "sites").glob("*.toml")}


def build_egg(folder: Path) -> Path:
    """``scrapyd-deploy --build-egg`` in a copy of the project (it writes build/ next to setup.py)."""
    source = folder / "project"
    source.mkdir()
    for name in ("setup.py", "scrapy.cfg"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "webcrawl", source / "webcrawl",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # A site file only the egg has: listed by scrapyd only if the jobs read the egg's sites.
    demo = (source / "webcrawl" / "sites" / "demo.toml").read_text()
    (source / "webcrawl" / "sites" / f"{EGG_ONLY}.toml").write_text(
        demo.replace('name = "demo"', f'name = "{EGG_ONLY}"', 1))
    egg = folder / f"{PROJECT}.egg"
    deploy = Path(sys.executable).with_name("scrapyd-deploy")
    subprocess.run([str(deploy), f"--build-egg={egg}"], cwd=source, check=True,
                   capture_output=True, timeout=60)
    return egg


@dataclass
class Scrapyd:
    process: subprocess.Popen[bytes]
    url: str
    folder: Path

    def get(self, endpoint: str, **params: str) -> dict[str, Any]:
        answer = requests.get(f"{self.url}/{endpoint}", params=params, timeout=30)
        answer.raise_for_status()
        return dict(answer.json())

    def post(self, endpoint: str, data: list[tuple[str, str]], **files: Any) -> dict[str, Any]:
        answer = requests.post(f"{self.url}/{endpoint}", data=data, files=files or None, timeout=60)
        answer.raise_for_status()
        result = dict(answer.json())
        assert result["status"] == "ok", result
        return result


def wait_until(condition: Any, what: str, deadline: float) -> Any:
    """Poll ``condition`` until it returns something truthy (no sleep beyond the polling step)."""
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def scrapyd(tmp_path: Path) -> Iterator[Scrapyd]:
    folder = tmp_path / "scrapyd"
    folder.mkdir()
    port = free_port()
    dirs = {name: folder / name for name in ("eggs", "logs", "dbs", "items")}
    (folder / "scrapyd.conf").write_text(
        "[scrapyd]\nbind_address = 127.0.0.1\n"
        f"http_port = {port}\npoll_interval = 0.2\nmax_proc = 2\n"
        + "".join(f"{name}_dir = {path}\n" for name, path in dirs.items()))
    # The jobs must import webcrawl from the deployed egg, not from this checkout.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE")}
    with open(folder / "scrapyd.out", "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).with_name("scrapyd"))], cwd=folder,
                                   env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Scrapyd(process, f"http://127.0.0.1:{port}", folder)

    def up() -> bool:
        try:
            return server.get("daemonstatus.json")["status"] == "ok"
        except requests.RequestException:
            assert process.poll() is None, (folder / "scrapyd.out").read_text()
            return False

    try:
        wait_until(up, "scrapyd to answer", time.monotonic() + 30)
        yield server
    finally:
        process.terminate()
        process.wait(15)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_server_process("shop", 4, tmp_path / "shop.log")
    yield server
    server.stop()


def test_deploy_list_schedule_and_crawl(scrapyd: Scrapyd, shop: ServerProcess, redis_url: str,
                                        tmp_path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    egg = build_egg(tmp_path)
    with egg.open("rb") as payload:
        added = scrapyd.post("addversion.json", [("project", PROJECT), ("version", "1")],
                             egg=payload)
    assert added["spiders"] >= len(bundled_sites())
    spiders = set(scrapyd.get("listspiders.json", project=PROJECT)["spiders"])
    assert bundled_sites() <= spiders, f"bundled sites missing from scrapyd: {bundled_sites() - spiders}"
    assert EGG_ONLY in spiders and EGG_ONLY not in bundled_sites()

    data = tmp_path / "data"
    job = scrapyd.post("schedule.json", [
        ("project", PROJECT), ("spider", "demo"),
        ("setting", f"WEBCRAWL_DEMO_PORT={shop.port}"),
        ("setting", f"WEBCRAWL_REDIS_URL={redis_url}"),
        ("setting", f"WEBCRAWL_DATA_DIR={data}"),
        ("setting", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"),
    ])["jobid"]

    def finished() -> bool:
        jobs = scrapyd.get("listjobs.json", project=PROJECT)
        return any(j["id"] == job for j in jobs["finished"])

    wait_until(finished, f"job {job} to finish", deadline)
    log = (scrapyd.folder / "logs" / PROJECT / "demo" / f"{job}.log").read_text()
    stats = stats_of(log)
    assert stats.get("finish_reason") == "finished", log[-3000:]
    assert "Traceback" not in log, log[-3000:]

    # What it fetched, from the shop's own request log.
    fetched = {(e.host, e.path) for e in shop.read_log()}
    site = shop.site
    products = {(u.split("/")[2].split(":")[0], "/" + u.split("/", 3)[3])
                for u in map(site.product_url, range(len(site.catalog)))}
    assert products <= fetched, f"{len(products - fetched)} product pages not fetched"
    assert {(h, "/robots.txt") for h in shop.hosts} <= fetched
    assert {(h, "/sitemap.xml") for h in shop.hosts} <= fetched
    assert not any(path.startswith(("/cart", "/search")) for _, path in fetched)
    assert stats["webcrawl/parse/page_type/product"] == len(site.catalog)
    # The job's items feed (scrapyd's items_dir) has the records.
    feeds = list((scrapyd.folder / "items" / PROJECT / "demo").glob(f"{job}.*"))
    assert feeds and feeds[0].read_text().count('"page_type": "product"') == len(site.catalog)


def test_a_project_with_the_addon_line_alone_offers_its_site_files(scrapyd: Scrapyd,
                                                                   tmp_path: Path) -> None:
    """scrapyd lists a project's spiders with ``scrapy list``, which builds its spider loader
    before add-ons run: webcrawl's own ``list`` (an entry point of its package) runs them first."""
    sites = tmp_path / "sites"
    sites.mkdir()
    books = (REPO / "webcrawl" / "sites" / "books.toml").read_text()
    (sites / "mybooks.toml").write_text(books.replace('name = "books"', 'name = "mybooks"', 1))
    project = new_project(tmp_path, "shopwatch", more=f"\nWEBCRAWL_SITES_DIR = {str(sites)!r}\n")
    egg = tmp_path / "shopwatch.egg"
    deploy = Path(sys.executable).with_name("scrapyd-deploy")
    subprocess.run([str(deploy), f"--build-egg={egg}"], cwd=project, check=True,
                   capture_output=True, timeout=60)
    with egg.open("rb") as payload:
        added = scrapyd.post("addversion.json", [("project", "shopwatch"), ("version", "1")],
                             egg=payload)
    expected = bundled_sites() | {"mybooks"}
    assert added["spiders"] == len(expected)
    listed = scrapyd.get("listspiders.json", project="shopwatch")["spiders"]
    assert sorted(listed) == sorted(expected)
