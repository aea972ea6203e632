"""The multi-host demo server, its subprocess mode, and the generated benchmark site.

Real servers on 127.0.0.x, real HTTP; no sleeps: every wait is a condition with a deadline.
"""

from __future__ import annotations

import http.client
import re
import signal
import socket
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from webcrawl.demo.generated import GeneratedSite
from webcrawl.demo.serve import start_server_process
from webcrawl.demo.server import Headers, MultiHostServer, Response, default_hosts, read_log


class EchoSite:
    """Answers with the address and path it saw; /boom raises."""

    def bind(self, hosts: Sequence[str], port: int) -> None:
        self.bound = (list(hosts), port)

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        if path == "/boom":
            raise RuntimeError("site failure")
        return 200, {"Content-Type": "text/plain"}, f"{host} {path}".encode()


def fetch(url: str, method: str = "GET") -> tuple[int, http.client.HTTPMessage, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""))
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def test_default_hosts() -> None:
    assert default_hosts(3) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    with pytest.raises(ValueError):
        default_hosts(2, "10.0.0.1")


def test_each_host_answers_on_one_port_and_is_logged(tmp_path: Path) -> None:
    site = EchoSite()
    before = time.monotonic()
    with MultiHostServer(site, hosts=3, log_path=tmp_path / "log.jsonl") as server:
        assert site.bound == (server.hosts, server.port) and server.port > 0
        for host in server.hosts:
            status, headers, body = fetch(server.base_url(host) + "/a?b=1")
            assert (status, body) == (200, f"{host} /a?b=1".encode())
            assert headers["Content-Length"] == str(len(body))
        assert fetch(server.base_url(1) + "/boom")[0] == 500
        log = server.log()
    assert [(e.host, e.path, e.status) for e in log] == [
        *((h, "/a?b=1", 200) for h in server.hosts), (server.hosts[1], "/boom", 500)]
    assert all(before <= e.mono <= time.monotonic() and e.method == "GET" for e in log)
    assert all(abs(e.wall - time.time()) < 60 and e.bytes > len("127.0.0.2 /a?b=1") for e in log)
    assert [e.mono for e in log] == sorted(e.mono for e in log)
    assert read_log(tmp_path / "log.jsonl") == log


def test_keep_alive_and_head() -> None:
    with MultiHostServer(EchoSite(), hosts=1) as server:
        conn = http.client.HTTPConnection(server.hosts[0], server.port, timeout=10)
        try:
            conn.request("GET", "/one")
            assert conn.getresponse().read() == b"127.0.0.2 /one"
            sock = conn.sock
            conn.request("HEAD", "/two")
            head = conn.getresponse()
            assert head.read() == b"" and head.headers["Content-Length"] == str(len("127.0.0.2 /two"))
            conn.request("GET", "/three")
            assert conn.getresponse().read() == b"127.0.0.2 /three"
            assert conn.sock is sock, "the connection was not kept alive"
        finally:
            conn.close()
        assert [(e.method, e.path) for e in server.log()] == [
            ("GET", "/one"), ("HEAD", "/two"), ("GET", "/three")]


def test_explicit_port_taken_on_one_host_is_an_error() -> None:
    blocker = socket.socket()
    try:
        blocker.bind(("127.0.0.3", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(OSError):
            MultiHostServer(EchoSite(), hosts=2, port=port).start()
        # Port 0 finds a port free on every host despite the blocker.
        with MultiHostServer(EchoSite(), hosts=2) as server:
            assert fetch(server.base_url(1) + "/")[0] == 200
    finally:
        blocker.close()


def test_subprocess_mode_ready_log_and_stop(tmp_path: Path) -> None:
    log_path = tmp_path / "requests.jsonl"
    with start_server_process("shop", 3, log_path, seed=5, large_page_kb=64) as child:
        assert child.hosts == default_hosts(3) and child.ready["pid"] == child.process.pid
        for host in child.hosts:
            assert fetch(child.base_url(host) + "/robots.txt")[0] == 200
        url = child.site.product_url(7)
        status, _, body = fetch(url)
        assert status == 200 and b'class="name"' in body
        entries = child.read_log()
        assert [(e.host, e.path) for e in entries][-1] == (urlsplit(url).hostname, urlsplit(url).path)
        assert len(entries) == 4
        assert child.stop() == 0  # SIGTERM is a clean shutdown
    assert len(read_log(log_path)) == 4


def test_subprocess_rejects_options_of_another_site(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="do not apply"):
        start_server_process("shop", 2, tmp_path / "log", pages=10)


@pytest.mark.parametrize(("min_kb", "max_kb", "hosts"), [(20, 150, 3), (30, 40, 2), (60, 60, 1)])
def test_generated_page_sizes_within_bounds(min_kb: int, max_kb: int, hosts: int) -> None:
    site = GeneratedSite(seed=1, pages=120, hosts=hosts, min_kb=min_kb, max_kb=max_kb)
    site.bind(default_hosts(hosts), 8080)
    sizes = [len(site.body(url)) for url in site.urls()[hosts:]]
    assert len(sizes) == 120
    assert min_kb * 1024 <= min(sizes) and max(sizes) <= max_kb * 1024
    graph = site.link_graph()
    assert all(len(graph[url]) > 30 for url in site.urls()[hosts:])


def test_generated_is_deterministic() -> None:
    a, b = GeneratedSite(seed=4, pages=50), GeneratedSite(seed=4, pages=50)
    for site in (a, b):
        site.bind(default_hosts(3), 9000)
    assert a.link_graph() == b.link_graph()
    assert all(a.body(u) == b.body(u) for u in a.urls())


def test_generated_every_page_reachable_by_a_real_walk() -> None:
    """Crawl over HTTP, resolving links the way a crawler must; compare with the site's graph."""
    site = GeneratedSite(seed=2, pages=240, hosts=3, min_kb=20, max_kb=60)
    with MultiHostServer(site, hosts=3) as server:
        prefixes = tuple(server.base_url(h) for h in server.hosts)
        graph, links_per_page = site.link_graph(), []
        queue, seen = deque([site.seeds()[1]]), {site.seeds()[1]}
        while queue:
            url = queue.popleft()
            status, _, body = fetch(url)
            assert status == 200, url
            hrefs = re.findall(r'href="([^"]*)"', body.decode())
            links_per_page.append(len(hrefs))
            targets = list(dict.fromkeys(urldefrag(urljoin(url, h))[0] for h in hrefs))
            assert targets == graph[url]
            for target in targets:
                if target.startswith(prefixes) and target not in seen:
                    seen.add(target)
                    queue.append(target)
    assert seen == set(site.urls()) == site.reachable()
    assert sorted(links_per_page)[len(links_per_page) // 2] >= 140
    for seed_url in site.seeds():  # each host's pages are reachable without leaving the host
        host = urlsplit(seed_url).hostname
        assert {u for u in site.urls() if urlsplit(u).hostname == host} == \
            site.reachable([seed_url], same_host=True)


def test_subprocess_generated_site_stops_on_sigint(tmp_path: Path) -> None:
    with start_server_process("generated", 2, tmp_path / "log", seed=9, pages=30,
                              min_kb=20, max_kb=30) as child:
        urls = child.site.urls()
        for url in urls:
            status, _, body = fetch(url)
            assert status == 200 and body == child.site.body(url)
        assert sorted(e.path for e in child.read_log()) == sorted(urlsplit(u).path for u in urls)
        child.process.send_signal(signal.SIGINT)
        assert child.process.wait(timeout=10) == 0
