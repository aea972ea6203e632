"""The politeness benchmark's site, server and judge."""

from __future__ import annotations

import http.client
import time
from pathlib import Path

import pytest

from bench._polite_judge import judge
from bench._polite_server import Request, ServerProcess
from bench._polite_site import PoliteSite, host_address, hosts_network
from webcrawl.sites import load_site_file


def test_hosts_stay_inside_loopback_and_the_network_covers_them() -> None:
    assert host_address(0) == "127.0.10.1" and host_address(499) == "127.0.11.250"
    assert hosts_network(500) == "127.0.10.0/23" and hosts_network(3) == "127.0.10.0/30"
    with pytest.raises(ValueError):
        host_address(240 * 250)


def test_every_page_is_reachable_and_the_site_file_is_valid(tmp_path: Path) -> None:
    site = PoliteSite(hosts=7, pages=20)
    site.bind(8000)
    assert len(site.reachable()) == 7 * 20
    path = tmp_path / "polite.toml"
    path.write_text(site.site_file("polite-test", 1.0))
    config = load_site_file(path)
    assert config.politeness.min_delay_seconds == 1.0 and len(config.seeds) == 7
    assert config.page_type_for(site.url(3, 0)) and config.page_type_for(site.url(3, 19))


def test_the_server_answers_keep_alive_and_logs_each_arrival(tmp_path: Path) -> None:
    with ServerProcess(hosts=3, pages=5, log_path=tmp_path / "log.jsonl") as server:
        site = PoliteSite(3, 5)
        site.bind(server.port)
        connection = http.client.HTTPConnection(site.hosts[1], server.port, timeout=10)
        before = time.monotonic()
        answers = []
        for path in ("/robots.txt", "/", "/p/4.html", "/p/5.html"):
            connection.request("GET", path)
            response = connection.getresponse()
            answers.append((response.status, response.read()))
        after = time.monotonic()
        connection.close()
        log = server.log()
    assert [status for status, _ in answers] == [200, 200, 200, 404]
    assert answers[2][1] == site.respond(site.hosts[1], "/p/4.html")[2]
    assert [(e.host, e.path, e.status) for e in log] == [
        (site.hosts[1], "/robots.txt", 200), (site.hosts[1], "/", 200),
        (site.hosts[1], "/p/4.html", 200), (site.hosts[1], "/p/5.html", 404)]
    assert before <= log[0].mono <= log[-1].mono <= after


def test_judge_counts_gaps_under_the_delay_and_utilisation() -> None:
    a, b = "127.0.10.1", "127.0.10.2"
    log = [Request(a, "/", 100.0, 200), Request(b, "/", 100.0, 200), Request(a, "/p/1.html", 101.0, 200),
           Request(b, "/p/1.html", 100.9, 200), Request(a, "/p/2.html", 102.0, 404)]
    reachable = {(h, p) for h in (a, b) for p in ("/", "/p/1.html", "/p/2.html")}
    verdict = judge(log, hosts=2, delay=1.0, reachable=reachable)
    assert (verdict.gaps, verdict.short_gaps) == (3, 1)
    assert verdict.shortest == pytest.approx(0.9)
    assert verdict.busy == 2.0 and verdict.rate == pytest.approx(1.5)
    assert verdict.utilisation == pytest.approx(0.75)  # 3 follow-up requests in 2 s, bound 2/s
    assert (verdict.pages, verdict.reachable, verdict.requests) == (4, 6, 5)
