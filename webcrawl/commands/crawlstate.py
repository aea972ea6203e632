"""``scrapy crawlstate <crawl> [--clear]``: what a crawl holds in Redis, or clear it.

Closing a crawl never deletes its shared state; this command (or ``WEBCRAWL_RESET``) is how a user
starts one afresh.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webcrawl.config import StateConfig
from webcrawl.state.connection import RedisUnavailable, open_handle
from webcrawl.state.frontier import Frontier
from webcrawl.state.keys import CrawlKeys, validate_crawl_name
from webcrawl.state.seen import BloomParams

if TYPE_CHECKING:
    import redis


def _report(client: redis.Redis, keys: CrawlKeys, now: float, top: int) -> list[str]:
    domains = client.zrange(keys.ready, 0, -1, withscores=True)
    queued = int(client.get(keys.queued) or 0)
    lines = [
        f"crawl {keys.crawl!r}",
        f"  queued requests:    {queued}",
        f"  in flight (leased): {client.zcard(keys.leases)}",
        f"  evicted so far:     {int(client.get(keys.evicted) or 0)}",
        f"  domains queued:     {len(domains)} ({sum(1 for _, t in domains if t <= now)} ready now)",
        f"  seen filter:        {client.strlen(keys.seen)} bytes",
    ]
    if domains:
        sizes = sorted(((client.zcard(keys.frontier(d.decode())), d.decode(), t)
                        for d, t in domains), reverse=True)[:top]
        lines.append("  largest frontiers:")
        lines += [f"    {d:<40} {n:>8} requests, next fetch in {max(0.0, t - now):7.2f} s"
                  for n, d, t in sizes]
    return lines


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<crawl> [--clear]"

    def short_desc(self) -> str:
        return "Show a crawl's state in Redis (frontiers, ready domains, leases), or clear it"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--clear", action="store_true", help="delete every key of the crawl")
        parser.add_argument("--top", type=int, default=10, help="frontiers to list (default 10)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one crawl (a spider name, or its WEBCRAWL_CRAWL_NAME)")
        assert self.settings is not None
        try:
            config = StateConfig.from_settings(self.settings, args[0])
            handle = open_handle(config.redis_url, config.data_dir)
        except (ValueError, RedisUnavailable) as exc:
            raise UsageError(str(exc), print_help=False) from exc
        keys = CrawlKeys(validate_crawl_name(args[0]))
        if opts.clear:
            frontier = Frontier(handle.client, keys, BloomParams(1, 0.5), cap=0, default_delay=0,
                                lease_seconds=1)
            print(f"cleared crawl {keys.crawl!r}: {frontier.clear()} keys deleted")
        else:
            print("\n".join(_report(handle.client, keys, time.time(), opts.top)))
        if handle.embedded is not None:
            handle.embedded.release(handle.client)
