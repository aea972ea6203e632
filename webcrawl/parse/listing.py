"""Listing pages: the items they list, each with its URL and its summary.

A crawl fetches a listed item only when its summary changed since the last visit, so the summary
fields should be the ones that move when the item does (price, stock, title, date).

Counters: ``listing/items`` (item elements), ``listing/nolink`` (an item without a usable link),
``listing/duplicate`` (an item URL listed before on this page: the first wins),
``listing/filtered/<reason>`` (the link filter's reasons, as for links, plus ``scheme``),
``listing/kept``, ``listing/errors`` (summary values that did not convert to their field's type:
they stay as their text).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from webcrawl.parse.join import Base
from webcrawl.parse.links import LinkFilter
from webcrawl.parse.record import extract_fields
from webcrawl.parse.rules import ListingRule

__all__ = ["ListingItem", "extract_listing"]


@dataclass(frozen=True)
class ListingItem:
    """One listed item: its canonical absolute URL and its summary fields."""

    url: str
    summary: dict[str, Any]


def extract_listing(
    tree: Any, rule: ListingRule, base: Base, link_filter: LinkFilter, counts: Counter[str]
) -> list[ListingItem]:
    """The items of ``tree`` per ``rule``, in document order, one per URL, filtered like links
    (scope, extension, length, patterns, traps; depth is not applied: an item is one step away
    and the caller decides whether to fetch it)."""
    items: list[ListingItem] = []
    seen: set[str] = set()
    nodes = tree.css(rule.item)
    counts["listing/items"] += len(nodes)
    for node in nodes:
        link = node.css_first(rule.link)
        href = link.attrs.get(rule.link_attr) if link is not None else None
        if not href or not href.strip():
            counts["listing/nolink"] += 1
            continue
        url = base.join(href)
        if url is None:
            counts["listing/filtered/scheme"] += 1
            continue
        if url in seen:
            counts["listing/duplicate"] += 1
            continue
        seen.add(url)
        reason = link_filter.reason(url)
        if reason is not None:
            counts["listing/filtered/" + reason] += 1
            continue
        errors: dict[str, str] = {}
        summary = extract_fields(node, rule.summary, base, errors=errors)
        if errors:
            # A summary only decides whether to fetch the item: a value that does not convert
            # stays as its text, so that its change still sends the crawl to the item's page
            # (whose record then reports the error).
            counts["listing/errors"] += len(errors)
            summary.update(errors)
        items.append(ListingItem(url, summary))
    counts["listing/kept"] += len(items)
    return items
