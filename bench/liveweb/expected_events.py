"""The change events a correct crawler owes for the fetches it made, read from the server's log.

The log holds every request of the crawl with its status, the version served (200) or confirmed
(304) and the product's lifecycle answer (``life``). Replaying a product's GETs in time order,
with the crawler's view as state (a history per URL; a moved page's history follows it to its
new URL), gives the events of the contract (docs: webcrawl/change/events.py):

- the first 200 of a page: ``new``. A page whose new URL the crawler fetched before it saw the
  301 from the old one could not know they were one page: that ``new`` is *tolerated* (neither
  owed nor false); a page first met through a 301 from a URL the crawler never fetched is
  ``new`` at the URL it led to;
- a 200 whose record differs from the one held (the versions' records, not the versions: two
  changes may cancel out): ``changed``;
- a known page answering 404/410 twice in a row (the fetch and its confirmation): ``removed``
  at the second; a 200 after that: ``restored``;
- a 301/308 from a known URL: ``moved`` (``url`` the old URL, ``moved_to`` the new), its record
  from the new URL's next fetch (or the one it held); the new URL is never ``new``;
- nothing for 302/307, 304, a 404 before a page exists, or anything on a retired old URL.

Each :class:`Expected` lists what a matching event may carry: the detecting fetch's times and
statuses, the previous version and the times it was held, the acceptable current versions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.liveweb.scenario import Page, Scenario

__all__ = ["Expected", "expected_events", "product_fetches"]


@dataclass
class Expected:
    """One event owed (``required``) or tolerated. Times are epoch seconds (the log's
    ``wall``); versions index the page's records; ``records`` empty: the event's record is
    null (``removed``); ``moved_to`` a path."""

    kind: str
    page: int
    path: str
    times: tuple[float, ...]
    statuses: tuple[int, ...]
    previous: int | None = None
    previous_times: tuple[float, ...] = ()
    records: tuple[int, ...] = ()
    moved_to: str | None = None
    required: bool = True


@dataclass
class _History:
    """The crawler's view of one URL: the version of its record, the fetches that gave or
    confirmed it, and its removal state."""

    version: int
    times: list[float] = field(default_factory=list)
    suspect: bool = False
    removed: bool = False


def product_fetches(entries: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The GETs of each product page (by page id), in arrival order."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted(entries, key=lambda e: e["t"]):
        if (e.get("kind") == "product" and e.get("page") is not None
                and e.get("method", "GET") == "GET"):
            out[int(e["page"])].append(e)
    return dict(out)


def expected_events(sc: Scenario, entries: Iterable[dict[str, Any]]) -> list[Expected]:
    """Every event owed or tolerated for the product fetches of ``entries``, in time order."""
    out: list[Expected] = []
    for pid, log in product_fetches(entries).items():
        out += _page_events(sc, sc.pages[pid], log)
    return sorted(out, key=lambda x: x.times[0])


def _page_events(sc: Scenario, page: Page, log: list[dict[str, Any]]) -> list[Expected]:
    def same(a: int, b: int) -> bool:
        return sc.record(page, a) == sc.record(page, b)

    out: list[Expected] = []
    urls: dict[str, _History] = {}
    awaiting: Expected | None = None  # a move whose record the new URL's next fetch gives

    def owe(kind: str, path: str, e: dict[str, Any], h: _History | None = None,
            records: tuple[int, ...] = (), required: bool = True) -> Expected:
        x = Expected(kind, page.pid, path, (e["wall"],), (e["status"],),
                     h.version if h else None, tuple(h.times) if h else (), records,
                     required=required)
        out.append(x)
        return x

    for e in log:
        path, status, h = e["path"], e["status"], urls.get(e["path"])
        if status == 200:
            version = int(e["version"])
            if awaiting is not None and path == awaiting.moved_to:
                awaiting.records += (version,)
                awaiting.times += (e["wall"],)
                awaiting.statuses += (200,)
                awaiting = None
                urls[path] = _History(version, [e["wall"]])
            elif h is None:  # tolerated: the same page is known at its other URL
                owe("new", path, e, records=(version,), required=not urls)
                urls[path] = _History(version, [e["wall"]])
            elif h.removed:
                owe("restored", path, e, h, (version,))
                urls[path] = _History(version, [e["wall"]])
            elif not same(h.version, version):
                owe("changed", path, e, h, (version,))
                urls[path] = _History(version, [e["wall"]])
            else:
                h.times.append(e["wall"])
                h.suspect = False
        elif status == 304 and h is not None and not h.removed:
            h.times.append(e["wall"])
            h.suspect = False
        elif status in (404, 410) and e.get("life") == "dead" and h is not None and not h.removed:
            if h.suspect:
                owe("removed", path, e, h)
                h.removed = True
            else:
                h.suspect = True
        elif status in (301, 308) and e.get("life") == "moved" and h is not None \
                and not h.removed and page.fate is not None:
            new_path = page.fate.new_path
            held = urls.get(new_path)
            awaiting = owe("moved", path, e, h, (held.version,) if held else ())
            awaiting.moved_to = new_path
            del urls[path]  # retired: the history lives at the new URL from now on
    return out

