"""Politeness read from the server's own request log: utilisation and gaps under the delay.

Utilisation is the achieved request rate over the bound ``H / d`` (H hosts, each allowed one
request every d seconds), over the crawl's busy period, from its first request to its last. The
achieved rate counts, per host, the requests after the host's first one (``n_h - 1``): a crawl
that hits every host exactly every d seconds from start to end scores 1.0. robots.txt requests
count like any other: they take a host's turn.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from bench._polite_server import Request


@dataclass(frozen=True)
class Verdict:
    requests: int
    pages: int  # distinct reachable pages answered 200
    reachable: int
    busy: float  # seconds from the first request to the last
    rate: float  # achieved requests per second, as defined above
    utilisation: float
    gaps: int
    short_gaps: int  # gaps under the delay: must be 0
    shortest: float  # seconds


def judge(log: Iterable[Request], hosts: int, delay: float, reachable: set[tuple[str, str]],
          ) -> Verdict:
    entries = sorted(log, key=lambda e: e.mono)
    times: dict[str, list[float]] = defaultdict(list)
    for entry in entries:
        times[entry.host].append(entry.mono)
    gaps = [b - a for ts in times.values() for a, b in zip(ts, ts[1:])]
    busy = entries[-1].mono - entries[0].mono if len(entries) > 1 else 0.0
    rate = sum(len(ts) - 1 for ts in times.values()) / busy if busy > 0 else 0.0
    pages = {(e.host, e.path) for e in entries if e.status == 200} & reachable
    return Verdict(len(entries), len(pages), len(reachable), busy, rate, rate / (hosts / delay),
                   len(gaps), sum(g < delay for g in gaps), min(gaps, default=float("nan")))
