"""The real-site benchmark over https: its own authority, nginx's https listeners, and the counts
of connections and resumed TLS sessions read from nginx's log."""

from __future__ import annotations

import http.client
import shutil
import ssl
import time
from pathlib import Path

import pytest

from bench._realsites_nginx import Access, Nginx
from bench._realsites_tls import (
    HTTPS_SERVERS, connection_counts, listeners, make_certificates, resumption_probe,
)

needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists(),
                                 reason="nginx is not installed (bench realsites installs it)")


def wait_for(nginx: Nginx, count: int) -> list[Access]:
    deadline = time.monotonic() + 10  # a line is written after the answer has gone
    while len(nginx.read_log("one")) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return nginx.read_log("one")


@needs_nginx
def test_https_listeners_verify_through_the_benchmarks_authority_and_log_resumption(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "index.html").write_text("<h1>home</h1>")
    files = make_certificates(tmp_path / "tls", ["127.0.0.24"])
    chosen = {f"https {name}": HTTPS_SERVERS[name] for name in ("keepalive", "close", "close-noresume")}
    with Nginx(tmp_path / "nginx", {"one": ("127.0.0.24", root)}, chosen, (files.chain, files.key)) as nginx:
        assert nginx.base_url("one", "https close").startswith("https://127.0.0.24:")
        context = ssl.create_default_context(cafile=str(files.ca))  # verifies chain and address
        for name, nth in (("https keepalive", 2), ("https close", 1)):
            connection = http.client.HTTPSConnection("127.0.0.24", nginx.ports[name], context=context,
                                                     timeout=10)
            connection.request("GET", "/")
            response = connection.getresponse()
            assert (response.status, response.read()) == (200, b"<h1>home</h1>")
            assert (response.getheader("Connection") == "close") == (name == "https close")
            if nth == 2:
                connection.request("GET", "/")
                connection.getresponse().read()
            connection.close()
        probes = {name: resumption_probe("127.0.0.24", nginx.ports[name], files.ca, count=2)
                  for name in chosen}
        log = wait_for(nginx, 3 + 4 * len(chosen))
        with pytest.raises(ssl.SSLCertVerificationError):  # the system's authorities do not know it
            http.client.HTTPSConnection("127.0.0.24", nginx.ports["https keepalive"], timeout=10,
                                        context=ssl.create_default_context()).request("GET", "/")
    assert [(e.connection_requests, e.protocol) for e in log[:3]] == [(1, "TLSv1.3"), (2, "TLSv1.3"),
                                                                      (1, "TLSv1.3")]
    assert connection_counts(log[:3]) == (2, 0, "TLSv1.3")
    assert {name: (p.resumed, p.offered, p.protocol) for name, p in probes.items()} == {
        "https keepalive": (2, 2, "TLSv1.3"), "https close": (2, 2, "TLSv1.3"),
        "https close-noresume": (0, 2, "TLSv1.3")}
    assert all(p.new_ms > 0 and p.offered_ms > 0 for p in probes.values())
    assert connection_counts(log[3:]) == (12, 4, "TLSv1.3")  # the offered sessions, where resumable


def test_the_schemes_and_listeners_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_REALSITES_SCHEMES", raising=False)
    monkeypatch.delenv("BENCH_REALSITES_HTTPS_SERVERS", raising=False)
    assert list(listeners()) == ["http", "https keepalive", "https close", "https close-noresume"]
    monkeypatch.setenv("BENCH_REALSITES_SCHEMES", "https")
    monkeypatch.setenv("BENCH_REALSITES_HTTPS_SERVERS", "close")
    assert list(listeners()) == ["https keepalive", "https close"]  # the targets' listener always
    monkeypatch.setenv("BENCH_REALSITES_SCHEMES", "http,ftp")
    with pytest.raises(SystemExit, match="'ftp' is not one of http, https"):
        listeners()
