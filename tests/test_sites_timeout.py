"""``limits.timeout_seconds`` of a site file: validated with one exact message, and applied as the
spider's ``DOWNLOAD_TIMEOUT`` (the crawl's own default when the file does not set it)."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.settings import Settings

from tests.test_sites_schema import changed
from webcrawl.sites import SiteConfigError, site_from_dict
from webcrawl.spiderloader import site_settings

EXPECTED = "a number >= 1 and <= 3_600 (seconds a whole answer may take)"


@pytest.mark.parametrize("value", [0, 0.5, 3601, "30", True, float("nan")])
def test_a_bad_timeout_gives_one_message_naming_file_field_and_value(value: Any) -> None:
    with pytest.raises(SiteConfigError) as info:
        site_from_dict(changed("limits.timeout_seconds", value), "sites/shop.toml", {})
    assert str(info.value) == (f"sites/shop.toml: limits.timeout_seconds: got {value!r}, "
                               f"expected {EXPECTED}")
    assert "\n" not in str(info.value)


def test_the_timeout_becomes_the_spiders_download_timeout() -> None:
    site = site_from_dict(changed("limits.timeout_seconds", 12.5), "sites/shop.toml", {})
    assert site.limits.timeout_seconds == 12.5
    assert site_settings(site)["DOWNLOAD_TIMEOUT"] == 12.5


def test_without_it_the_crawls_default_applies() -> None:
    from webcrawl import settings as project

    site = site_from_dict(changed("limits.max_depth", 3), "sites/shop.toml", {})
    assert site.limits.timeout_seconds is None
    assert "DOWNLOAD_TIMEOUT" not in site_settings(site)
    # A default a crawler of many sites would choose: not Scrapy's three minutes.
    assert Settings({"DOWNLOAD_TIMEOUT": project.DOWNLOAD_TIMEOUT}).getfloat("DOWNLOAD_TIMEOUT") == 30
