"""``scrapy list`` that lets the project's add-ons choose the spider loader first.

Scrapy's ``list`` builds its spider loader from the project's settings alone, before any add-on
has run (``scrapy crawl`` runs the add-ons' ``update_pre_crawler_settings`` first, through its
crawler process). So a project whose only line for webcrawl is ``ADDONS =
{"webcrawl.addon.Addon": 0}`` would list its Python spiders and none of its site files, and
scrapyd, which lists a project's spiders with this command, would offer none of them.

This command runs those pre-crawler hooks first
(:meth:`scrapy.addons.AddonManager.load_pre_crawler_settings`, as Scrapy's crawler process does)
and then lists as Scrapy's does. webcrawl's package
registers it as the ``list`` entry point of the ``scrapy.commands`` group, so it replaces
Scrapy's in every project of an environment where webcrawl is installed; a project without
add-ons lists what Scrapy's own command lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.addons import AddonManager
from scrapy.commands.list import Command as ScrapyListCommand

if TYPE_CHECKING:
    import argparse

__all__ = ["Command"]


class Command(ScrapyListCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        AddonManager.load_pre_crawler_settings(self.settings)
        super().run(args, opts)
