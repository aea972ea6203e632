"""Help texts speak to users: no Sphinx markup, no notes about how the code was made, no paths of
the machine that wrote it. Built as ``scrapy <command> --help`` and ``--help`` build them."""

from __future__ import annotations

import argparse
import re
from importlib import import_module

import pytest
from scrapy.commands import ScrapyHelpFormatter
from scrapy.settings import Settings

from webcrawl.demo import serve

# Sphinx roles and literals, words about the code's making, absolute paths of a machine.
UNWANTED = re.compile(r":(class|func|meth|mod|attr):|``|\bissues?\b|\bsessions?\b|"
                      r"(?<![\w.])/(usr|home|work|tmp|opt|root)/", re.I)


@pytest.mark.parametrize("name", ["crawl", "crawlstate", "exclude", "body", "checksites", "report",
                                  "events", "records", "history", "dbwriter"])
def test_command_help(name: str) -> None:
    command = import_module(f"webcrawl.commands.{name}").Command()
    command.settings = Settings()
    parser = argparse.ArgumentParser(formatter_class=ScrapyHelpFormatter,
                                     usage=f"scrapy {name} {command.syntax()}",
                                     description=command.long_desc(), conflict_handler="resolve")
    command.add_options(parser)
    text = parser.format_help()
    assert command.short_desc() and not UNWANTED.findall(command.short_desc())
    assert not UNWANTED.findall(text), text


def test_demo_server_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        serve.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "READY" in text and "--root" in text
    assert not UNWANTED.findall(text), text


def test_user_facing_text_never_speaks_of_how_it_was_built() -> None:
    """README, docs and the package's own text name the product, never work items ("issue 5")."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [root / "README.md", *(root / "docs").glob("*.md"), *(root / "webcrawl").rglob("*.py")]
    pattern = re.compile(r"\bissues? #?\d+", re.I)
    found = [f"{f.relative_to(root)}:{n}" for f in files
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, found
