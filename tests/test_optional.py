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
    """The component lists of the project's settings are read and loaded as Scrapy's managers
    read and load them, in a fresh process: neither aiohttp nor the cookies middleware was
    imported, and the stand-ins are listed at their components' orders."""
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from scrapy.settings import Settings
        from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
        from scrapy.extension import ExtensionManager
        from scrapy.utils.misc import load_object
        import webcrawl.settings as project
        settings = Settings()
        settings.setmodule(project, priority="project")
        listed = []
        for manager in (ExtensionManager, DownloaderMiddlewareManager):
            for path in manager._get_mwlist_from_settings(settings):
                load_object(path)
                listed.append(path if isinstance(path, str) else path.__module__ + "." + path.__qualname__)
        print("aiohttp" in sys.modules, "scrapy.downloadermiddlewares.cookies" in sys.modules,
              "webcrawl.optional.RemoteControl" in listed, "webcrawl.optional.CookiesMiddleware" in listed)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(REPO)], capture_output=True,
                          text=True, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True", "True"]


def test_turned_on_they_are_scrapys_own_components() -> None:
    crawler = get_crawler(settings_dict={"COOKIES_ENABLED": True})
    assert isinstance(CookiesMiddleware.from_crawler(crawler), ScrapyCookies)
    with pytest.raises(NotConfigured):
        CookiesMiddleware.from_crawler(get_crawler(settings_dict={"COOKIES_ENABLED": False}))
    with pytest.raises(NotConfigured):
        RemoteControl.from_crawler(get_crawler(settings_dict={"REMOTE_CONTROL_ENABLED": False}))
