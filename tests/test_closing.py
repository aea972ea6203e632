"""The closing note: one WARNING at close saying why a crawl fetched nothing, from its stats; real
crawls refused by the SSRF guard, by an unreachable robots.txt and by the exclusion list."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._cli import scrapy
from tests.crawls import pages
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.extensions.closing import reasons, summary

SSRF = {"ssrf/refused": 3, "ssrf/refused/loopback": 3,
        "downloader/exception_type_count/scrapy.exceptions.IgnoreRequest": 3}


@pytest.mark.parametrize(("stats", "expected"), [
    (SSRF, ["Fetched no pages: SSRF guard refused 3 (loopback 3; allow the network with "
            "allowed_private_networks in the site file"]),
    ({"ssrf/refused": 1, "ssrf/refused/metadata": 1}, ["metadata addresses are never fetched"]),
    ({"scheduler/excluded": 5}, ["host excluded: 5 (", "scrapy exclude <domain> --remove"]),
    ({"robotstxt/request_count": 2, "robotstxt/exception_count/DownloadConnectionRefusedError": 2,
      "robotstxt/forbidden": 4,
      "downloader/exception_type_count/scrapy.exceptions.DownloadConnectionRefusedError": 2},
     ["robots.txt unreachable for 2 hosts, so 4 requests refused", "up to 300 s"]),
    ({"robotstxt/forbidden": 2}, ["robots.txt refused 2 (disallowed, or robots.txt was "
                                  "unreachable on an earlier run"]),
    ({"dupefilter/filtered": 1}, ["already seen: 1", "WEBCRAWL_RESET"]),
    ({"downloader/exception_type_count/twisted.internet.error.TimeoutError": 2},
     ["download errors: 2 (TimeoutError 2"]),
    ({"downloader/response_count": 2, "ssrf/refused": 7, "ssrf/refused/private": 7},
     ["Refused more requests (7) than it fetched (2): SSRF guard refused 7"]),
])
def test_summary_names_reasons_counts_and_fixes(stats: dict[str, int], expected: list[str]
                                                ) -> None:
    text = summary(stats)
    assert text is not None and "\n" not in text
    for fragment in expected:
        assert fragment in text


def test_robots_expiry_time_is_shown_when_recorded() -> None:
    until = time.mktime((2026, 1, 1, 14, 5, 0, 0, 0, -1))
    found = reasons({"robotstxt/forbidden": 3, "webcrawl/refused/robots_unreachable": 3,
                     "webcrawl/refused/robots_until": until, "webcrawl/refused/noted": 3})
    assert found == ["robots.txt unreachable (an earlier answer), so 3 requests refused "
                     "(cached until 14:05; retried then)",
                     "3 refused URLs noted: queued again when the crawl next meets them (a seed: "
                     "at the next run), and fetched once the reason is gone"]


def test_budget_spent_is_named_only_as_why_nothing_was_fetched() -> None:
    # The budget refuses nothing (work waits for its tokens): a one-run cycle whose budget is
    # spent closes with its work queued for the next cycle.
    text = summary({"scheduler/enqueued": 4}, close_reason="cycle_budget_spent")
    assert text is not None and text.startswith("Fetched no pages: budget spent: the cycle's budget")
    assert "nothing was refused" in text and "budget.amount_per_cycle" in text
    assert summary({"downloader/response_count": 5}, close_reason="cycle_budget_spent") is None


@pytest.mark.parametrize("stats", [
    {},  # nothing to do: no request, nothing refused
    {"downloader/response_count": 40, "robotstxt/response_count": 1, "robotstxt/forbidden": 3},
    {"downloader/response_count": 5, "scheduler/enqueued": 50},  # a budgeted cycle at work
])
def test_no_note_when_nothing_needs_explaining(stats: dict[str, int]) -> None:
    assert summary(stats) is None


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ServerProcess]:
    with start_server_process("generated", 1, tmp_path / "server.log", pages=6, min_kb=1,
                              max_kb=2, links=10) as server:
        yield server


def closing_warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if "[webcrawl.extensions.closing] WARNING" in line]


def test_crawl_refused_by_the_ssrf_guard_says_so(site: ServerProcess, redis_url: str,
                                                 tmp_path: Path) -> None:
    done = scrapy(["crawl", "follow", "-a", f"seeds={site.base_url()}/",
                   "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]  # the crawl ran; the note says why it did nothing
    assert pages(site.read_log()) == []
    [warning] = closing_warnings(done.stderr)
    assert "Fetched no pages: SSRF guard refused 1 (loopback 1; allow the network with " \
           "allowed_private_networks in the site file or WEBCRAWL_ALLOWED_PRIVATE_NETWORKS)" in warning
    assert "'webcrawl/closing/warned': 1" in done.stderr


def test_crawl_with_robots_unreachable_says_so(redis_url: str, tmp_path: Path) -> None:
    # Nothing listens on port 9 of 127.0.0.2: robots.txt is unreachable, so every page is refused.
    done = scrapy(["crawl", "follow", "-a", "seeds=http://127.0.0.2:9/", "-s",
                   f"WEBCRAWL_REDIS_URL={redis_url}", "-s",
                   "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [warning] = closing_warnings(done.stderr)
    assert "robots.txt unreachable for 1 host, so 1 request refused" in warning
    assert "download errors" not in warning  # the robots.txt fetch is not counted twice


def test_crawl_of_an_excluded_host_says_so(site: ServerProcess, redis_url: str,
                                           tmp_path: Path) -> None:
    excluded = scrapy(["exclude", "127.0.0.2", "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], tmp_path)
    assert excluded.returncode == 0, excluded.stderr
    done = scrapy(["crawl", "follow", "-a", f"seeds={site.base_url()}/", "-s",
                   f"WEBCRAWL_REDIS_URL={redis_url}", "-s",
                   "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert pages(site.read_log()) == []
    [warning] = closing_warnings(done.stderr)
    assert "host excluded: 1" in warning
