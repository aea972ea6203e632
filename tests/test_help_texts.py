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


@pytest.mark.parametrize("name", ["crawl", "crawlstate", "exclude", "body", "checksites"])
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
