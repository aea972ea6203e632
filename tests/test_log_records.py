"""webcrawl.commands._logging: with Scrapy's root handler at INFO, DEBUG calls build no record;
with another handler on the root logger, or at DEBUG, nothing changes. In a process of its own
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
    engine = logging.getLogger("scrapy.core.engine")
    before = engine.isEnabledFor(logging.DEBUG)
    raised = skip_unprinted_records()
    print(before, raised, engine.isEnabledFor(logging.DEBUG), engine.isEnabledFor(logging.INFO))
""")


@pytest.mark.parametrize(("level", "extra", "expected"), [
    ("INFO", "none", ["True", "True", "False", "True"]),
    ("DEBUG", "none", ["True", "True", "True", "True"]),
    ("INFO", "extra", ["True", "False", "True", "True"]),
])
def test_debug_records_are_skipped_only_where_nothing_would_print_them(
        level: str, extra: str, expected: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(REPO), level, extra],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected
