"""SiteSpiderLoader: Python spiders and site files side by side, as Scrapy's loader interface."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import UsageError
from scrapy.settings import Settings
from scrapy.spiderloader import get_spider_loader

from webcrawl.sites import SiteConfigError
from webcrawl.spiderloader import (
    SiteConfigWarning,
    SiteLoadError,
    SiteSpiderLoader,
    spider_class_for,
)
from webcrawl.spiders.site import SiteSpider

SITE = """\
name = "{name}"
seeds = ["http://{host}:${{TEST_PORT:-8000}}/"]
allowed_domains = ["{host}"]
{extra}
[politeness]
user_agent = "testbot/1.0 (+https://bots.example/testbot)"

[budget]
billing = "requests"
amount_per_cycle = 100
cycle_seconds = 60

[limits]
max_download_bytes = 65536

[[page_types]]
name = "page"
url_pattern = "."
"""

SPIDERS = """\
import scrapy
from webcrawl.spiders.site import SiteSpider


class PlainSpider(scrapy.Spider):
    name = "plain"
    allowed_domains = ["plain.example"]


class ClashSpider(scrapy.Spider):
    name = "clash"


class ShopSpider(SiteSpider):
    \"\"\"A site's own spider: no name, the loader gives it one per site.\"\"\"

    custom_settings = {"COOKIES_ENABLED": True, "DOWNLOAD_TIMEOUT": 7}


class NotASiteSpider(scrapy.Spider):
    pass
"""


@dataclass
class Project:
    root: Path
    package: str
    sites: Path

    def site(self, filename: str, name: str, host: str = "alpha.example", extra: str = "") -> Path:
        path = self.sites / filename
        path.write_text(SITE.format(name=name, host=host, extra=extra), encoding="utf-8")
        return path

    def settings(self, **values: Any) -> Settings:
        return Settings({"SPIDER_MODULES": [f"{self.package}.spiders"],
                         "SPIDER_LOADER_CLASS": "webcrawl.spiderloader.SiteSpiderLoader",
                         "WEBCRAWL_SITES_DIR": str(self.sites), **values})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    # A fresh package name per test: Python caches imported modules by name.
    package = f"wctest_{uuid.uuid4().hex[:10]}"
    (tmp_path / package / "spiders").mkdir(parents=True)
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "spiders" / "__init__.py").write_text("")
    (tmp_path / package / "spiders" / "shop.py").write_text(SPIDERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sites = tmp_path / "sites"
    sites.mkdir()
    p = Project(tmp_path, package, sites)
    p.site("alpha.toml", "alpha")
    p.site("custom.toml", "custom", host="custom.example",
           extra=f'spider = "{package}.spiders.shop.ShopSpider"\ncookies_enabled = false\n')
    return p


def test_lists_python_spiders_and_site_files(project: Project) -> None:
    loader = get_spider_loader(project.settings())
    assert isinstance(loader, SiteSpiderLoader)
    assert sorted(loader.list()) == ["alpha", "books", "clash", "custom", "demo", "plain"]


def test_site_spider_is_a_site_spider_subclass_with_its_site(project: Project) -> None:
    loader = SiteSpiderLoader.from_settings(project.settings())
    cls = loader.load("alpha")
    assert issubclass(cls, SiteSpider) and cls is not SiteSpider
    assert cls.name == "alpha"
    assert cls.site is not None and cls.site.name == "alpha"  # type: ignore[attr-defined]
    assert cls.allowed_domains == ["alpha.example"]
    assert cls.custom_settings == {
        "CONCURRENT_ITEMS": 1,  # SiteSpider's own (see its docstring)
        "USER_AGENT": "testbot/1.0 (+https://bots.example/testbot)",
        "COOKIES_ENABLED": False, "DOWNLOAD_MAXSIZE": 65536,
        "WEBCRAWL_DOMAIN_DELAY_SECONDS": 1.0, "WEBCRAWL_FRONTIER_MAX_PER_DOMAIN": 100_000,
        "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": [],
        # the site file's [network] table, here its defaults: no proxy, certificates verified
        "WEBCRAWL_PROXIES": [], "WEBCRAWL_PROXY_ROTATION": "host", "WEBCRAWL_TLS_VERIFY": True}
    assert SiteSpider.site is None and getattr(SiteSpider, "name", None) is None
    assert cls.site.seeds == ("http://alpha.example:8000/",)  # type: ignore[attr-defined]


def test_a_sites_own_spider_class_is_subclassed(project: Project) -> None:
    loader = SiteSpiderLoader.from_settings(project.settings())
    cls = loader.load("custom")
    shop = sys.modules[f"{project.package}.spiders.shop"].ShopSpider
    assert issubclass(cls, shop) and cls is not shop and cls.name == "custom"
    assert getattr(shop, "name", None) is None and shop.site is None
    # The site file's settings win over the class's; the class keeps its others.
    assert cls.custom_settings["COOKIES_ENABLED"] is False
    assert cls.custom_settings["DOWNLOAD_TIMEOUT"] == 7


def test_python_spiders_still_load(project: Project) -> None:
    loader = SiteSpiderLoader.from_settings(project.settings())
    assert loader.load("plain").__name__ == "PlainSpider"
    with pytest.raises(KeyError, match="Spider not found: nothing"):
        loader.load("nothing")


def test_find_by_request(project: Project) -> None:
    loader = SiteSpiderLoader.from_settings(project.settings())
    assert loader.find_by_request(Request("http://alpha.example/p")) == ["alpha"]
    assert loader.find_by_request(Request("http://plain.example/")) == ["plain"]


def test_placeholders_take_settings_before_environment(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_PORT", "1111")
    loader = SiteSpiderLoader.from_settings(project.settings())
    assert loader.load("alpha").site.seeds == ("http://alpha.example:1111/",)  # type: ignore
    loader = SiteSpiderLoader.from_settings(project.settings(TEST_PORT=2222))
    assert loader.load("alpha").site.seeds == ("http://alpha.example:2222/",)  # type: ignore


def test_a_broken_file_is_left_out_of_the_list_and_fails_to_load(project: Project) -> None:
    bad = project.site("bad.toml", "bad", extra='objective = "speed"\n')
    loader = SiteSpiderLoader.from_settings(project.settings())
    message = f"{bad}: objective: got 'speed', expected one of 'freshness', 'events'"
    with pytest.warns(SiteConfigWarning) as record:
        names = loader.list()
    assert "bad" not in names and "alpha" in names
    assert [str(w.message) for w in record] == [f"site file left out: {message}"]
    with pytest.raises(SiteLoadError) as info:
        loader.load("bad")
    assert str(info.value) == message
    assert isinstance(info.value, SiteConfigError) and isinstance(info.value, UsageError)
    assert info.value.print_help is False
    assert [o.ok for o in loader.site_files if o.source == str(bad)] == [False]


def test_an_unparsable_file_fails_to_load_by_its_stem(project: Project) -> None:
    (project.sites / "torn.toml").write_text('name = "torn"\nseeds = [')
    loader = SiteSpiderLoader.from_settings(project.settings())
    with pytest.raises(SiteLoadError, match=r"torn\.toml: not valid TOML"):
        loader.load("torn")
    (project.sites / "torn.toml").write_text("= nothing")
    with pytest.raises(SiteLoadError, match=r"torn\.toml: not valid TOML"):
        SiteSpiderLoader.from_settings(project.settings()).load("torn")


@pytest.mark.parametrize(("spider", "problem"), [
    ("{package}.spiders.shop.NotASiteSpider", "which is not a SiteSpider subclass"),
    ("{package}.spiders.shop.Missing", "which cannot be imported (NameError: Module "),
    ("{package}.nowhere.Spider", "which cannot be imported (ModuleNotFoundError: "),
])
def test_a_bad_spider_class_is_a_config_error(project: Project, spider: str, problem: str
                                              ) -> None:
    path = spider.format(package=project.package)
    bad = project.site("own.toml", "own", extra=f'spider = "{path}"\n')
    loader = SiteSpiderLoader.from_settings(project.settings())
    with pytest.raises(SiteLoadError) as info:
        loader.load("own")
    assert str(info.value).startswith(f"{bad}: spider: got {path!r}, {problem}")
    assert str(info.value).endswith(", expected the dotted path of a Python class that "
                                    "subclasses webcrawl.spiders.site.SiteSpider")


def test_a_site_named_like_a_python_spider_is_refused(project: Project) -> None:
    clash = project.site("clash.toml", "clash")
    loader = SiteSpiderLoader.from_settings(project.settings())
    with pytest.raises(SiteLoadError) as info:
        loader.load("clash")
    assert str(info.value) == (
        f"{clash}: name: 'clash' is also the name of the Python spider "
        f"{project.package}.spiders.shop.ClashSpider, expected a name that no Python spider "
        "of SPIDER_MODULES uses")
    with pytest.warns(SiteConfigWarning):
        assert "clash" not in loader.list()


def test_spider_class_for_two_sites_sharing_a_class(project: Project) -> None:
    loader = SiteSpiderLoader.from_settings(project.settings())
    site = loader.load("alpha").site  # type: ignore[attr-defined]
    one, two = spider_class_for(site), spider_class_for(site)
    assert one is not two and one.site is two.site


def test_missing_sites_dir_is_a_settings_error(project: Project) -> None:
    with pytest.raises(ValueError, match="WEBCRAWL_SITES_DIR"):
        SiteSpiderLoader.from_settings(project.settings(WEBCRAWL_SITES_DIR=str(project.root / "x")))


def scrapy(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``scrapy <args>`` in the project folder as a user would, with webcrawl's settings."""
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=os.pathsep.join([str(project.root), os.environ.get("PYTHONPATH", "")]))
    env.pop("TEST_PORT", None)
    settings = ["-s", "SPIDER_LOADER_CLASS=webcrawl.spiderloader.SiteSpiderLoader",
                "-s", f"SPIDER_MODULES={project.package}.spiders",
                "-s", f"WEBCRAWL_SITES_DIR={project.sites}"]
    command, *rest = args
    return subprocess.run([sys.executable, "-m", "scrapy", command, *settings, *rest],
                          cwd=project.root, env=env, capture_output=True, text=True, timeout=60)


def test_scrapy_list_shows_sites_and_reports_broken_files(project: Project) -> None:
    bad = project.site("bad.toml", "bad", extra="cookies_enabled = 1\n")
    run = scrapy(project, "list")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["alpha", "books", "clash", "custom", "demo", "plain"]
    assert (f"SiteConfigWarning: site file left out: {bad}: cookies_enabled: got 1, expected "
            "true or false") in run.stderr


def test_scrapy_crawl_of_a_broken_site_stops_before_any_request(project: Project) -> None:
    bad = project.site("bad.toml", "bad", extra="cookies_enabled = 1\n")
    run = scrapy(project, "crawl", "bad")
    assert run.returncode == 2
    assert f"error: {bad}: cookies_enabled: got 1, expected true or false" in run.stderr
    assert "Traceback" not in run.stderr and "Spider opened" not in run.stderr
