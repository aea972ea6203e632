"""Help texts speak to users: no Sphinx markup, no notes about how the code was made, no paths of
the machine that wrote it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._cli import scrapy

# Sphinx roles and literals, words about the code's making, absolute paths of a machine.
UNWANTED = re.compile(r":(class|func|meth|mod|attr):|``|\bissues?\b|\bsessions?\b|"
                      r"(?<![\w.])/(usr|home|work|tmp|opt|root)/", re.I)


@pytest.mark.parametrize("command", ["crawl", "crawlstate", "exclude", "body", "checksites"])
def test_command_help(command: str, tmp_path: Path) -> None:
    done = scrapy([command, "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert not UNWANTED.findall(done.stdout), done.stdout


def test_demo_server_help() -> None:
    done = subprocess.run([sys.executable, "-m", "webcrawl.demo.serve", "--help"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert "READY" in done.stdout and "--root" in done.stdout
    assert not UNWANTED.findall(done.stdout), done.stdout
