"""List settings: ``a,b``, a JSON list or a Python list, one error naming the setting otherwise;
and a real crawl that takes its network allowance as a JSON list from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scrapy.settings import Settings

from tests._cli import scrapy
from tests.crawls import pages, stats_of
from webcrawl.demo.serve import start_server_process
from webcrawl.settingtypes import SettingError, get_list, parse_list

NAME = "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"


@pytest.mark.parametrize(("value", "expected"), [
    (None, []),
    ("", []),
    ("127.0.0.0/8", ["127.0.0.0/8"]),
    ("127.0.0.0/8, 10.0.0.0/8,", ["127.0.0.0/8", "10.0.0.0/8"]),
    ('["127.0.0.0/8"]', ["127.0.0.0/8"]),
    (' [ "127.0.0.0/8", "10.0.0.0/8" ] ', ["127.0.0.0/8", "10.0.0.0/8"]),
    ("[]", []),
    (["127.0.0.0/8"], ["127.0.0.0/8"]),
    (("a", " b "), ["a", "b"]),
])
def test_list_forms(value: object, expected: list[str]) -> None:
    assert parse_list(NAME, value) == expected


@pytest.mark.parametrize(("value", "fragment"), [
    ('["127.0.0.0/8"', "is not a JSON list"),
    ("[1, [2]]", "is not a single value"),
    ({"a": 1}, "is not a list"),
    (42, "is not a list"),
])
def test_bad_lists_name_the_setting(value: object, fragment: str) -> None:
    with pytest.raises(SettingError, match=fragment) as caught:
        parse_list(NAME, value)
    assert str(caught.value).startswith(NAME)
    assert "\n" not in str(caught.value)


def test_items_are_converted_and_checked() -> None:
    assert parse_list("CODES", "429, 503", item=int) == [429, 503]
    assert parse_list("CODES", "[429, 503]", item=int) == [429, 503]
    with pytest.raises(SettingError, match=r"^CODES=.*'x' is not valid"):
        parse_list("CODES", "429,x", item=int)


def test_get_list_reads_settings_and_defaults() -> None:
    settings = Settings({"A": '["x", "y"]', "DIRS": "/a:/b"})
    assert get_list(settings, "A") == ["x", "y"]
    assert get_list(settings, "DIRS", separator=":") == ["/a", "/b"]
    assert get_list(settings, "MISSING", [429, 503], item=int) == [429, 503]


def test_crawl_takes_a_json_list_from_the_command_line(redis_url: str, tmp_path: Path) -> None:
    with start_server_process("generated", 1, tmp_path / "server.log", pages=6, min_kb=1,
                              max_kb=2, links=10) as site:
        done = scrapy(["crawl", "follow", "-a", f"seeds={site.base_url()}/",
                       "-s", f"{NAME}={json.dumps(['127.0.0.0/8'])}",
                       "-s", f"WEBCRAWL_REDIS_URL={redis_url}",
                       "-s", "WEBCRAWL_DOMAIN_DELAY_SECONDS=0"], tmp_path)
        fetched = pages(site.read_log())
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(fetched) >= 6
    stats = stats_of(done.stderr)
    assert stats and not any(k.startswith("ssrf/refused") for k in stats)
