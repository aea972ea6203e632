"""Politeness as the server saw it: gaps between request arrivals per host, and requests sent
into a 429 window sooner than its Retry-After allowed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench.liveweb.scenario import Scenario

__all__ = ["politeness"]


def politeness(entries: Sequence[dict[str, Any]], sc: Scenario, slack: float = 0.0,
               ) -> dict[str, Any]:
    """Per host: ``gaps`` (arrivals), ``short_gaps`` (gaps under the host's delay minus
    ``slack``), ``min_gap``; on the Crawl-delay host the delay is the Crawl-delay for every gap
    that starts at or after its first robots.txt request, ``params.min_delay`` before. On a
    throttled host, ``early_in_429`` counts requests inside the throttle window that arrived
    less than Retry-After seconds after the previous 429 answer."""
    p = sc.params
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        by_host[e["host"]].append(e)
    hosts: dict[str, Any] = {}
    for shop, host in enumerate(sc.hosts):
        spec = p.shops[shop]
        seen = sorted(by_host.get(host, []), key=lambda e: e["t"])
        robots = next((e["t"] for e in seen if e["kind"] == "robots"), None)
        short, min_gap = 0, None
        for before, after in zip(seen, seen[1:]):
            gap = after["t"] - before["t"]
            delay = p.min_delay
            if spec.crawl_delay > 0 and robots is not None and before["t"] >= robots:
                delay = max(delay, spec.crawl_delay)
            short += gap < delay - slack
            min_gap = gap if min_gap is None else min(min_gap, gap)
        early = 0
        if spec.throttled:
            a, b = p.window
            last_429 = None
            for e in seen:
                if not a <= e["t"] < b:
                    continue
                if last_429 is not None and e["t"] < last_429 + p.retry_after_seconds:
                    early += 1
                if e["status"] == 429:
                    last_429 = e["t"]
        hosts[host] = {"requests": len(seen), "short_gaps": short, "min_gap": min_gap,
                       "early_in_429": early,
                       "delay": max(p.min_delay, spec.crawl_delay)}
    return {"hosts": hosts,
            "short_gaps": sum(h["short_gaps"] for h in hosts.values()),
            "early_in_429": sum(h["early_in_429"] for h in hosts.values())}
