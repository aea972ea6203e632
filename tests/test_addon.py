"""The Scrapy add-on: ``ADDONS = {"webcrawl.addon.Addon": 0}`` in a project made by ``scrapy
startproject`` lists its site files (``scrapy list``) and crawls the demo shop as webcrawl's own
project does (same pages, each once, read from the shop's request log), and applies webcrawl's
settings from their one source, ``webcrawl/settings.py``."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

from scrapy.settings import Settings
from scrapy.utils.misc import load_object

from tests import _shopcrawl as shop
from tests._addonproject import new_project, project_env
from tests.crawls import stats_of
from webcrawl import addon, settings as reference
from webcrawl.demo.serve import start_server_process

#: What ``scrapy startproject`` writes into a new project's settings.py (Scrapy 2.13 and later).
TEMPLATE = {"BOT_NAME": "shopwatch", "SPIDER_MODULES": ["shopwatch.spiders"],
            "NEWSPIDER_MODULE": "shopwatch.spiders", "ROBOTSTXT_OBEY": True,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": 1,
            "FEED_EXPORT_ENCODING": "utf-8"}


def test_every_setting_of_webcrawls_project_has_its_place() -> None:
    """A setting added to webcrawl/settings.py must be given to the add-on's projects, or be
    named as one a project keeps for itself."""
    tree = ast.parse(Path(reference.__file__).read_text())
    names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name) and t.id.isupper()}
    placed = [*addon.PRE_CRAWLER, *addon.PRE_CRAWLER_DEFAULTS, *addon.REQUIRED, *addon.COMPONENTS,
              *addon.BASES, *addon.DEFAULTS, *addon.PROJECT_ONLY]
    assert len(placed) == len(set(placed)), "a setting placed twice"
    assert names == set(placed), (names - set(placed), set(placed) - names)


def test_applied_over_a_new_projects_settings() -> None:
    settings = Settings()
    settings.setdict(TEMPLATE, priority="project")
    settings.set("SCHEDULER", "scrapy.core.scheduler.Scheduler", priority="project")
    settings.set("COOKIES_ENABLED", True, priority="project")  # the project's own choice
    settings.set("DOWNLOAD_TIMEOUT", 5, priority="cmdline")  # -s wins over everything
    addon.Addon.update_pre_crawler_settings(settings)
    addon.Addon().update_settings(settings)
    for name in (*addon.PRE_CRAWLER, *addon.REQUIRED):
        expected = getattr(reference, name)
        if name == "DOWNLOAD_HANDLERS":
            assert {k: settings.getdict(name)[k] for k in expected} == expected
        else:
            assert settings[name] == expected, name
    for name in addon.COMPONENTS:
        merged = {load_object(k) if isinstance(k, str) else k: v
                  for k, v in settings.getdict(name).items()}
        for path, order in getattr(reference, name).items():
            assert merged[load_object(path)] == order, (name, path)
    # Scrapy's remote control and cookies components: stand-ins at their orders in the bases.
    bases = {**settings.getdict("EXTENSIONS_BASE"), **settings.getdict("DOWNLOADER_MIDDLEWARES_BASE")}
    assert bases["webcrawl.optional.RemoteControl"] == 0
    assert bases["webcrawl.optional.CookiesMiddleware"] == 700
    assert "scrapy.downloadermiddlewares.cookies.CookiesMiddleware" not in bases
    # What the project set stays; what it did not takes webcrawl's value.
    assert settings.getbool("COOKIES_ENABLED") and settings.getint("DOWNLOAD_TIMEOUT") == 5
    assert settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN") == 1
    assert settings.getbool("TELNETCONSOLE_ENABLED") is False
    assert settings.getbool("REMOTE_CONTROL_ENABLED") is False
    assert settings.getint("DOWNLOAD_MAXSIZE") == reference.DOWNLOAD_MAXSIZE
    # The project's robots.txt and delay wishes, kept by webcrawl's equivalents.
    assert settings.getbool("WEBCRAWL_ROBOTS_ENABLED", True)
    assert settings.getfloat("WEBCRAWL_DOMAIN_DELAY_SECONDS") == 1.0
    settings.set("SCHEDULER", "elsewhere.Scheduler", priority="cmdline")
    addon.Addon().update_settings(settings)
    assert settings["SCHEDULER"] == "elsewhere.Scheduler"


def test_scrapy_list_shows_the_site_files_with_the_addon_line_alone(tmp_path: Path) -> None:
    """Scrapy's ``list`` builds its spider loader before add-ons run: webcrawl's ``list``
    command (an entry point of its package) runs their pre-crawler hooks first."""
    sites = shop.write_site(tmp_path, budget=100).parent  # sites/shop-alloc.toml
    project = new_project(tmp_path, more=f"\nWEBCRAWL_SITES_DIR = {str(sites)!r}\n")
    (project / "shopwatch" / "spiders" / "pages.py").write_text(
        "import scrapy\n\n\nclass Pages(scrapy.Spider):\n    name = 'pages'\n")
    bundled = {tomllib.loads(f.read_text())["name"]
               for f in Path(reference.__file__).parent.joinpath("sites").glob("*.toml")}

    def listed(**env: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "scrapy", "list"], cwd=project,
                              env=project_env(WEBCRAWL_DEMO_PORT="8000", **env),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "left out" not in done.stderr, done.stderr
        return done.stdout.split()

    assert listed() == sorted({"pages", shop.SPIDER, *bundled})
    # The sites folder may come from the environment instead (scrapyd, containers).
    settings = project / "shopwatch" / "settings.py"
    settings.write_text(settings.read_text().replace(f"WEBCRAWL_SITES_DIR = {str(sites)!r}", ""))
    assert listed() == sorted({"pages", *bundled})
    assert listed(WEBCRAWL_SITES_DIR=str(sites)) == sorted({"pages", shop.SPIDER, *bundled})


def _crawl(cwd: Path, env: dict[str, str], port: int, crawl: str, log: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "scrapy", "crawl", shop.SPIDER, "-s",
                           f"WEBCRAWL_DEMO_PORT={port}", "-s", f"WEBCRAWL_CRAWL_NAME={crawl}",
                           "-s", f"LOG_FILE={log}", "-s", "LOG_LEVEL=INFO"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    text = log.read_text() if log.exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + text[-3000:]
    return stats_of(text)


def test_a_new_scrapy_project_crawls_the_shop_with_one_line(redis_url: str, tmp_path: Path) -> None:
    project = new_project(tmp_path)
    shop.write_site(tmp_path, budget=2000)  # tmp_path/sites/shop-alloc.toml
    env = project_env(WEBCRAWL_REDIS_URL=redis_url, WEBCRAWL_SITES_DIR=str(tmp_path / "sites"),
                      WEBCRAWL_DATA_DIR=str(tmp_path / "data"))
    with start_server_process("shop", 3, tmp_path / "server.log", products=24, categories=2,
                              blog_posts=0) as server:
        stats = _crawl(project, env, server.port, "addon", tmp_path / "addon.log")
        by_addon = Counter((e.host, e.path) for e in server.read_log())
        # The same site with webcrawl's own project, as a baseline of what must be fetched.
        bundled = _crawl(tmp_path, {**env, "SCRAPY_SETTINGS_MODULE": "webcrawl.settings"},
                         server.port, "bundled", tmp_path / "bundled.log")
        both = Counter((e.host, e.path) for e in server.read_log())
    by_bundled = both - by_addon
    assert set(by_addon) == set(by_bundled), (set(by_addon) ^ set(by_bundled))
    assert max(by_addon.values()) == 1, [p for p, n in by_addon.items() if n > 1]
    products = {p for _, p in by_addon if p.startswith("/product/")}
    assert len(products) >= 24, sorted(products)
    assert {h for h, p in by_addon if p == "/robots.txt"} == {"127.0.0.2", "127.0.0.3", "127.0.0.4"}
    # webcrawl's components did the work in the add-on's project.
    log = (tmp_path / "addon.log").read_text()
    assert "webcrawl.addon.Addon" in log and "webcrawl.scheduler.ReadyQueueScheduler" in log
    for key in ("webcrawl/allocator/runs", "webcrawl/records/new", "robotstxt/cache/miss"):
        assert stats.get(key), (key, sorted(stats))
    assert stats.get("downloader/request_count") == bundled.get("downloader/request_count")
