"""The real-site benchmark's nginx: what it logs is the file it answered from."""

from __future__ import annotations

import http.client
import shutil
import time
from pathlib import Path

import pytest

from bench._realsites_nginx import Nginx

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists(),
                                reason="nginx is not installed (bench realsites installs it)")


def test_nginx_logs_the_file_behind_each_url(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text("<h1>home</h1>")
    (root / "sub" / "index.html").write_text("<h1>sub</h1>")
    with Nginx(tmp_path / "nginx", {"one": ("127.0.0.24", root)}) as nginx:
        connection = http.client.HTTPConnection("127.0.0.24", nginx.port, timeout=10)
        statuses = []
        for path in ("/", "/sub", "/sub/", "/missing.html"):
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        connection.close()
        # nginx writes an access-log line after its answer has gone: wait for the four.
        deadline = time.monotonic() + 10
        while len(nginx.read_log("one")) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        log = nginx.read_log("one")
        assert nginx.cpu_seconds() >= 0
    assert statuses == [200, 301, 200, 404]
    assert [(e.uri, e.status, e.file) for e in log] == [
        ("/", 200, "index.html"), ("/sub", 301, "sub"), ("/sub/", 200, "sub/index.html"),
        ("/missing.html", 404, "missing.html")]
    assert log[0].bytes == len("<h1>home</h1>")
    assert len({e.connection for e in log}) == 1  # one kept connection
    assert [e.connection_requests for e in log] == [1, 2, 3, 4]
    assert [(e.resumed, e.protocol) for e in log] == [(False, "")] * 4  # plain http
    assert not (tmp_path / "nginx" / "nginx.pid").exists()  # stopped
