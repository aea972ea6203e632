"""webcrawl.optional: Scrapy components a crawl turns off are not even imported, and the same
settings turned on give Scrapy's own components back."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware as ScrapyCookies
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from webcrawl.optional import CookiesMiddleware, RemoteControl

REPO = Path(__file__).resolve().parent.parent


def test_a_crawler_with_webcrawls_settings_never_imports_the_components_it_turns_off() -> None:
    """Every component the project's settings enable is loaded as Scrapy's managers load them, in
    a fresh process: neither aiohttp nor the cookies middleware was imported."""
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from scrapy.settings import Settings
        from scrapy.utils.conf import build_component_list
        from scrapy.utils.misc import load_object
        import webcrawl.settings as project
        settings = Settings()
        settings.setmodule(project, priority="project")
        for name in ("EXTENSIONS", "DOWNLOADER_MIDDLEWARES"):
            for path in build_component_list(settings.getwithbase(name)):
                load_object(path)
        print("aiohttp" in sys.modules, "scrapy.downloadermiddlewares.cookies" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(REPO)], capture_output=True,
                          text=True, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_turned_on_they_are_scrapys_own_components() -> None:
    crawler = get_crawler(settings_dict={"COOKIES_ENABLED": True})
    assert isinstance(CookiesMiddleware.from_crawler(crawler), ScrapyCookies)
    with pytest.raises(NotConfigured, match="COOKIES_ENABLED is off"):
        CookiesMiddleware.from_crawler(get_crawler(settings_dict={"COOKIES_ENABLED": False}))
    with pytest.raises(NotConfigured, match="REMOTE_CONTROL_ENABLED is off"):
        RemoteControl.from_crawler(get_crawler(settings_dict={"REMOTE_CONTROL_ENABLED": False}))
