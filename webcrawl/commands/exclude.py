"""``scrapy exclude <domain> [--remove | --list]``: the shared exclusion list.

A domain on the list is never fetched again by any crawl on this Redis: every running process
obeys at once, and its queued requests are dropped.
"""

from __future__ import annotations

import argparse

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webcrawl.config import StateConfig
from webcrawl.state.connection import RedisUnavailable, open_handle
from webcrawl.state.exclusion import exclude, excluded, unexclude


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<domain> [--remove] | --list"

    def short_desc(self) -> str:
        return "Exclude a domain from every crawl at once (or list / remove exclusions)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--remove", action="store_true", help="take the domain off the list")
        parser.add_argument("--list", action="store_true", help="print the excluded domains")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if opts.list == bool(args) or len(args) > 1:
            raise UsageError("name one domain, or --list")
        assert self.settings is not None
        try:
            config = StateConfig.from_settings(self.settings, "exclude")
            handle = open_handle(config.redis_url, config.data_dir)
        except (ValueError, RedisUnavailable) as exc:
            raise UsageError(str(exc), print_help=False) from exc
        try:
            if opts.list:
                print("\n".join(excluded(handle.client)) or "(no excluded domains)")
            elif opts.remove:
                found = unexclude(handle.client, args[0])
                print(f"{args[0]}: {'removed from' if found else 'was not on'} the exclusion list")
            else:
                dropped = exclude(handle.client, args[0])
                print(f"{args[0]}: excluded; {dropped} queued requests dropped")
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from exc
        finally:
            if handle.embedded is not None:
                handle.embedded.release(handle.client)
