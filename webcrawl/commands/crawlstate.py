"""``scrapy crawlstate <crawl> [--queue | --clear] [--yes]``: what a crawl holds in Redis, or
clear part or all of it.

Without options it prints the crawl's state shard by shard: queued and in-flight requests,
scheduled revisits, known pages, seen URLs, refused URLs noted for another try
(:mod:`webcrawl.state.refused`), hosts, the largest frontiers. ``--queue`` deletes the queue only
(frontiers, ready hosts, leases); ``--clear`` deletes everything the crawl knows (the queue, the
revisits, the seen filter, page records, their latest records and the change events, learned statistics, every
cycle). Either first lists what it will
delete, with counts, and asks; ``--yes`` skips the question (needed when stdin is not a
terminal; declining exits with status 1). Which keys each covers is :mod:`webcrawl.state.clearing`'s business.

Closing a crawl never deletes its shared state; this command (or ``WEBCRAWL_RESET``) is how a user
starts one afresh. A crawl with no keys in Redis is an error (exit status 2), naming the crawls
that are there.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webcrawl.commands._errors import fail
from webcrawl.commands._oneshot import command_redis
from webcrawl.state import clearing
from webcrawl.state.inspect import ShardFigures, server_time, shard_figures
from webcrawl.state.layout import CrawlLayout, validate_crawl_name

if TYPE_CHECKING:
    from webcrawl.commands._oneshot import CommandRedis


def _line(name: str, value: object) -> str:
    """One ``name: value`` line, aligned (scripts read these lines)."""
    return f"  {name + ':':<22}{value!s:>9}"


def _report(client: Any, layout: CrawlLayout, top: int) -> list[str]:
    """The crawl's queues (over every shard, then per shard when there are several), and the
    hosts with the most queued requests."""
    now = server_time(client)
    shards = shard_figures(client, layout, now)

    def total(name: str) -> int:
        return sum(getattr(s, name) for s in shards)

    lines = [f"crawl {layout.crawl!r} ({layout.shards} shard{'s' if layout.shards != 1 else ''})",
             _line("queued requests", total("queued")),
             _line("revisits scheduled", total("revisits")),
             _line("in flight (leased)", total("leased")),
             _line("known pages", total("pages")),
             _line("seen URLs", total("seen")),
             _line("seen false positives", _false_positives(shards)),
             _line("refused (to retry)", total("refused")),
             _line("hosts queued", f"{total('hosts_queued')}") + f" ({total('ready_now')} host "
             "turns ready now)"]
    if layout.shards > 1:
        lines.append("  per shard:")
        lines += [f"    shard {s.index}: {s.queued} queued, {s.revisits} revisits scheduled, "
                  f"{s.leased} in flight, {s.pages} known pages, {s.seen} seen URLs, "
                  f"{s.hosts_queued} hosts queued" for s in shards]
    hosts = [f for s in shards for f in s.frontiers]
    if hosts:
        lines.append("  largest frontiers:")
        lines += [f"    {d:<40} {n:>8} requests, next fetch in {max(0.0, t - now):7.2f} s"
                  for n, d, t in sorted(hosts, reverse=True)[:top]]
    return lines


def _false_positives(shards: list[ShardFigures]) -> str:
    """The chance a new URL is taken for a seen one at the filter's current fill: the highest
    of the shards, and its bound (of a filter of the layout before: what a full generation was
    sized for)."""
    rates = [(s.seen_false_positive_rate, s) for s in shards if s.seen_false_positive_rate is not None]
    if not rates:
        return "- (nothing seen yet)"
    rate, worst = max(rates, key=lambda r: r[0])
    legacy = worst.seen_params is not None and worst.seen_params.legacy
    bound = (f"sized for {100 * worst.seen_error_rate:g}% a full generation" if legacy
             else f"at most {100 * worst.seen_error_rate:g}% as it grows")
    return (f"{100 * rate:.4f}% now ({bound}; "
            f"{worst.seen_generations} generation{'s' if worst.seen_generations != 1 else ''})")


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        fail("not deleting without confirmation: stdin is not a terminal",
             "add --yes to delete without asking")
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<crawl> [--queue | --clear] [--yes]"

    def short_desc(self) -> str:
        return "Show a crawl's queue in Redis, or clear its queue (--queue) or all its state (--clear)"

    def long_desc(self) -> str:
        return (
            "Print a crawl's state in Redis, shard by shard: queued and in-flight requests, "
            "scheduled revisits, known pages, hosts, the largest frontiers. --queue deletes the "
            "queue only (frontiers, ready hosts, leases); scheduled revisits, the seen filter, "
            "page records and cycles stay. --clear deletes everything the crawl knows: the "
            "queue, the revisits, the seen filter, page records, their latest records and the change events "
            "(the bodies on disk stay), learned statistics and every cycle (the report's "
            "history). Both list what they will delete, with counts, and ask first; --yes "
            "deletes without asking."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--queue", action="store_true",
                            help="delete the queue only (frontiers, ready hosts, leases)")
        parser.add_argument("--clear", action="store_true",
                            help="delete everything the crawl knows (queue, revisits, seen "
                                 "filter, page records, cycles)")
        parser.add_argument("--yes", "-y", action="store_true",
                            help="delete without asking")
        parser.add_argument("--top", type=int, default=10, help="frontiers to list (default 10)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one crawl (a spider name, or its WEBCRAWL_CRAWL_NAME)")
        if opts.queue and opts.clear:
            raise UsageError("give --queue or --clear, not both")
        assert self.settings is not None
        try:
            name = validate_crawl_name(args[0])
        except ValueError as exc:
            fail(str(exc))
        with command_redis(self.settings, args[0], must_exist=True) as redis_:
            layout = clearing.layout_of(redis_.client, name)
            if not clearing.crawl_has_keys(redis_.client, layout):
                self._unknown(redis_, name)
            if opts.queue or opts.clear:
                done = self._clear(redis_.client, layout, everything=opts.clear, yes=opts.yes)
                self.exitcode = 0 if done else 1
            else:
                print("\n".join(_report(redis_.client, layout, opts.top)))

    @staticmethod
    def _unknown(redis_: CommandRedis, crawl: str) -> None:
        others = clearing.known_crawls(redis_.client)
        there = ("crawls there: " + ", ".join(others)) if others else "it holds no crawl"
        fail(f"no crawl {crawl!r} in {redis_.where}", there)

    @staticmethod
    def _clear(client: Any, layout: CrawlLayout, *, everything: bool, yes: bool) -> bool:
        """List what goes, ask, delete; whether it deleted."""
        plan = clearing.everything(client, layout) if everything else clearing.queue(client, layout)
        what = "everything the crawl knows" if everything else "the queue"
        print(f"crawl {layout.crawl!r}: deleting {what}, {plan.keys} Redis "
              f"key{'s' if plan.keys != 1 else ''}:")
        for group in plan.groups:
            print("  " + group.line())
        if not everything:
            print("  kept: the seen filter (URLs already met are not queued again), refused URLs "
                  "to retry, scheduled revisits, page records, cycles")
        if not yes and not _confirm("Delete them?"):
            print("nothing deleted")
            return False
        deleted = (clearing.clear_everything(client, layout) if everything
                   else clearing.clear_queue(client, layout))
        print(f"crawl {layout.crawl!r}: {what} cleared, {deleted} keys deleted")
        return True
