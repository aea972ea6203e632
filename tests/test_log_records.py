"""webcrawl.commands._logging: with Scrapy's root handler at INFO, DEBUG calls build no record;
another handler on the root logger keeps what its level takes (one with no level: everything). In a process of its own
(it sets up logging the way ``scrapy crawl`` does)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

_SCRIPT = textwrap.dedent("""
    import logging, sys
    sys.path.insert(0, sys.argv[1])
    from scrapy.settings import Settings
    from scrapy.utils.log import configure_logging
    from webcrawl.commands._logging import skip_unprinted_records
    configure_logging(Settings({"LOG_LEVEL": sys.argv[2]}))
    if sys.argv[3] == "extra":
        logging.getLogger().addHandler(logging.NullHandler())
    elif sys.argv[3] != "none":  # a handler at a level, as Scrapy's LogCount extension adds one
        logging.getLogger().addHandler(logging.Handler(getattr(logging, sys.argv[3])))
    engine = logging.getLogger("scrapy.core.engine")
    before = engine.isEnabledFor(logging.DEBUG)
    raised = skip_unprinted_records()
    print(before, raised, engine.isEnabledFor(logging.DEBUG), engine.isEnabledFor(logging.INFO))
""")


@pytest.mark.parametrize(("level", "extra", "expected"), [
    ("INFO", "none", ["True", "True", "False", "True"]),
    ("DEBUG", "none", ["True", "True", "True", "True"]),
    ("INFO", "extra", ["True", "False", "True", "True"]),
    ("INFO", "INFO", ["True", "True", "False", "True"]),
    ("INFO", "DEBUG", ["True", "True", "True", "True"]),
    ("WARNING", "INFO", ["True", "True", "False", "True"]),
])
def test_debug_records_are_skipped_only_where_nothing_would_print_them(
        level: str, extra: str, expected: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(REPO), level, extra],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


def test_a_real_crawl_at_info_builds_no_debug_records(tmp_path: Path) -> None:
    """``scrapy crawl`` as a user runs it: Scrapy's LogCount extension puts a counting handler
    beside Scrapy's own on the root logger, and the DEBUG lines are still skipped."""
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from tests.crawls import finish, start_crawl

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<html><body><h1>one</h1></body></html>")

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(tmp_path / "site"), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        process = start_crawl("follow", {
            "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8", "WEBCRAWL_DATA_DIR": tmp_path / "data",
            "LOG_LEVEL": "INFO", "EXTENSIONS": '{"tests._levelprobe.LevelProbe": 0}'},
            tmp_path, args={"seeds": f"http://127.0.0.1:{server.server_address[1]}/"})
        assert finish(process) == 0
    finally:
        server.shutdown()
        server.server_close()
    log = (tmp_path / "crawl.log").read_text()
    assert "probe: engine DEBUG enabled=False" in log, log[-3000:]
