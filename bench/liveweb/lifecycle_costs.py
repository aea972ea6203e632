"""What the products' lifecycle cost a crawl in fetches, and how fast it found births, from the
server's log and the scenario alone (no events needed).

- **dead pages**: per product death the crawler saw (a 404/410 while dead), the fetches of its
  URL after that first 404/410 while it stays dead, not counting those at least a probe interval
  after the previous fetch of the URL (restore probes, allowed :data:`PROBE_SLACK` of jitter).
  The target: at most two (the confirmation, and one more).
- **restores**: products restored before the end whose death the crawler saw, how many of
  them it fetched again (a 200) after the restore, and the longest wait from restore to 200.
- **moved pages**: per move the crawler saw (a 301/308), the fetches of the old URL after the
  first. The target: at most one.
- **temporary redirects**: products whose 302/307 the crawler met.
- **births**: products born in [warm-up, end - 2 cycles], shops without a sitemap apart from
  the others: the time from birth to the first 200, in cycles; the target: all within two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from bench.liveweb.expected_events import product_fetches
from bench.liveweb.scenario import Scenario

__all__ = ["PROBE_SLACK", "births_found", "lifecycle_costs"]

#: A fetch this share of the probe interval early still counts as a restore probe (a crawl
#: plans its fetches a few seconds apart from their due time).
PROBE_SLACK = 0.1


def _distribution(counts: list[int]) -> dict[str, Any]:
    return {"pages": len(counts), "max": max(counts) if counts else None,
            "distribution": {str(k): v for k, v in sorted(Counter(counts).items())}}


def lifecycle_costs(sc: Scenario, entries: Iterable[dict[str, Any]], *, probe_seconds: float,
                    end: float | None = None) -> dict[str, Any]:
    """Refetches of dead pages and of moved pages' old URLs, restores and temporary redirects
    seen, over the log up to ``end`` (default: the run's duration)."""
    end = sc.params.duration if end is None else end
    fetches = product_fetches(e for e in entries if e["t"] < end)
    dead, moved, restore_waits, temp = [], [], [], 0
    restored = 0
    for pid, log in fetches.items():
        fate = sc.pages[pid].fate
        if fate is None:
            continue
        old = [e for e in log if e["path"] == sc.pages[pid].path]
        if fate.kind == "death":
            inside = [e for e in old if fate.start <= e["t"] < fate.end]
            first = next((i for i, e in enumerate(inside) if e["status"] in (404, 410)), None)
            if first is not None:
                after = zip(inside[first:], inside[first + 1:])
                limit = probe_seconds * (1 - PROBE_SLACK)
                dead.append(sum(b["t"] - a["t"] < limit for a, b in after))
            if first is not None and fate.restored and fate.end < end:
                restored += 1
                back = next((e["t"] for e in old if e["t"] >= fate.end and e["status"] == 200),
                            None)
                if back is not None:
                    restore_waits.append(back - fate.end)
        elif fate.kind == "move":
            hops = [i for i, e in enumerate(old) if e["status"] in (301, 308)]
            if hops:
                moved.append(len(old) - hops[0] - 1)
        elif any(e["status"] in (302, 307) for e in old):
            temp += 1
    return {
        "probe_seconds": probe_seconds,
        "dead": dict(_distribution(dead), over_two=sum(c > 2 for c in dead)),
        "moved": dict(_distribution(moved), over_one=sum(c > 1 for c in moved)),
        "restores": {"restored": restored, "seen": len(restore_waits),
                     "max_wait": max(restore_waits) if restore_waits else None},
        "temporary_redirects_met": temp,
    }


def births_found(sc: Scenario, entries: Iterable[dict[str, Any]], *, warmup: float, cycle: float,
                 end: float | None = None) -> dict[str, Any]:
    """Births in [warmup, end - 2 cycles] and how many cycles each waited for its first 200;
    ``no_sitemap`` for the shops without a sitemap, ``sitemap`` for the others."""
    end = sc.params.duration if end is None else end
    first: dict[int, float] = {}
    for pid, log in product_fetches(e for e in entries if e["t"] < end).items():
        t = next((e["t"] for e in log if e["status"] == 200), None)
        if t is not None:
            first[pid] = t
    out: dict[str, Any] = {"cycle": cycle, "scored_from": warmup, "scored_to": end - 2 * cycle}
    for group, has_sitemap in (("no_sitemap", False), ("sitemap", True)):
        born = [p for p in sc.pages if p.kind == "product" and p.born_in_run
                and sc.params.shops[p.shop].sitemap is has_sitemap
                and warmup <= p.birth <= end - 2 * cycle]
        waits = [(first[p.pid] - p.birth) / cycle for p in born if p.pid in first]
        out[group] = {"pages": len(born), "found": len(waits),
                      "within_two": sum(w <= 2 for w in waits),
                      "max_cycles": float(max(waits)) if waits else None,
                      "median_cycles": float(np.median(waits)) if waits else None}
    return out
