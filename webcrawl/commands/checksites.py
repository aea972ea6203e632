"""``scrapy checksites``: check every site file the project would load, one line per file.

Checks what ``scrapy crawl`` would: the bundled site files and those in ``WEBCRAWL_SITES_DIR``,
with placeholders resolved from the settings (``-s NAME=value``) and the environment, each site's
Python spider class, and name clashes. Given file arguments, checks only those files. Exits with
status 1 when any file is broken, 2 (one ``scrapy: error:`` line) when a folder or file named
does not exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand

from webcrawl.commands._errors import fail
from webcrawl.sites import SiteConfigError, SiteFile, load_site_file
from webcrawl.spiderloader import SiteSpiderLoader, placeholder_lookup, spider_class_for

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] [site-file ...]"

    def short_desc(self) -> str:
        return "Check every site file (or the given ones); exit status 1 if any is broken"

    def long_desc(self) -> str:
        return (
            "Validate the site files that 'scrapy crawl' would load (bundled in webcrawl/sites/ "
            "and in the folders of WEBCRAWL_SITES_DIR), or only the files given, and print one "
            "line per file: 'ok <file> (<site>)' or 'error <file>: <field>: <what is wrong>'. "
            "Placeholders such as ${WEBCRAWL_DEMO_PORT} take their values from -s settings and "
            "the environment."
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if args:
            outcomes = [_check_path(a, self.settings) for a in args]
        else:
            try:
                outcomes = SiteSpiderLoader.from_settings(self.settings).site_files
            except ValueError as exc:  # a bad WEBCRAWL_SITES_DIR
                fail(str(exc))
        for outcome in outcomes:
            if outcome.error is None:
                print(f"ok    {outcome.source} ({outcome.name})")
            else:
                print(f"error {outcome.error}")
        self.exitcode = 0 if all(o.ok for o in outcomes) else 1


def _check_path(path: str, settings: Any) -> SiteFile:
    if not Path(path).is_file():
        fail(f"{path!r} is not a file; expected site files (*.toml)")
    try:
        site = load_site_file(path, placeholder_lookup(settings))
        spider_class_for(site)
    except SiteConfigError as error:
        return SiteFile(path, Path(path).stem, error=error, declared=False)
    return SiteFile(path, site.name, site=site)
