"""One page in, plain results out: the entry point of the parsing layer.

``PageParser(rules).parse(body, url, depth=..., encoding=...)`` truncates and decodes the body,
parses it once with selectolax's Lexbor parser, and extracts the links, the page type's record
and its listing items. It never raises for any body; the outcome and every oddity are in the
result's ``kind`` and ``counts``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from webcrawl.parse.canonical import Canonicalizer
from webcrawl.parse.decode import prepare_body
from webcrawl.parse.join import Base
from webcrawl.parse.links import LinkFilter, extract_links
from webcrawl.parse.listing import ListingItem, extract_listing
from webcrawl.parse.record import extract_fields
from webcrawl.parse.rules import PARSE_CACHE_SIZE, ParseRules
from webcrawl.parse.structured import StructuredData

__all__ = ["PageParser", "ParseResult"]


@dataclass(frozen=True)
class ParseResult:
    """What one page yielded.

    ``kind``: ``html`` (parsed), ``empty``, ``pdf``, ``binary`` (not parsed), ``badurl`` (the
    page URL is not an absolute http(s) URL), ``unparsable`` (the parser failed).
    ``url``: the canonical page URL (the given URL for ``badurl``). ``page_type``: the first
    matching page type's name or ``None``; ``record`` its fields (``None`` without a page type
    or when not parsed); ``volatile`` its volatile field names. ``counts``: counters for the
    caller's stats, keys as in ``links``, ``listing`` and ``pages/<kind>``, ``truncated``,
    ``encoding/replaced`` (bad byte sequences), ``encoding/broken`` (pages with any),
    ``encoding/guessed``, ``record/errors`` (fields that did not convert) next to
    ``record/errors/<field>``, ``record/jsonld/broken`` and ``record/microdata/broken``.

    ``errors`` maps each record field whose value was present but did not convert to its type
    (a price without an amount, an unknown availability text) to that value's text, at most 200
    characters; the field is ``None`` in ``record``. A result with ``errors`` is an extraction
    error, not a record: the caller must not store or hash ``record`` as the page's new state
    (a field that failed to parse is not a field that disappeared), and counts the page as an
    extraction error instead. A missing element or attribute is no error: its field is ``None``.
    """

    url: str
    kind: str
    page_type: str | None = None
    links: tuple[str, ...] = ()
    record: dict[str, Any] | None = None
    volatile: frozenset[str] = frozenset()
    listing: tuple[ListingItem, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    encoding: str = "utf-8"
    truncated: bool = False
    errors: dict[str, str] = field(default_factory=dict)

    def stable_record(self) -> dict[str, Any] | None:
        """The record without its volatile fields: what a change test should hash."""
        if self.record is None:
            return None
        return {k: v for k, v in self.record.items() if k not in self.volatile}


def _base_href(tree: Any) -> str | None:
    """The href of the first ``<base href>`` in ``<head>``.

    Only <head> is searched: a miss over the whole tree costs about 180 us a page (a byte search
    for "<base" in the text, 70 us), more than joining every link, and almost no page has a
    <base>, let alone one outside <head> (invalid HTML, ignored here)."""
    head = tree.head
    node = head.css_first("base[href]") if head is not None else None
    return node.attrs.get("href") if node is not None else None


class PageParser:
    """Parses the pages of one site with one ``ParseRules``. Holds bounded memo tables (hrefs
    resolved per directory, canonical URLs, link verdicts) shared by the pages it parses: build
    one per site and process and reuse it. Not thread-safe (Scrapy parses on one thread)."""

    def __init__(self, rules: ParseRules, canonicalizer: Canonicalizer | None = None, *,
                 cache_size: int = PARSE_CACHE_SIZE) -> None:
        self.rules = rules
        self.cache_size = cache_size
        self.canonicalizer = canonicalizer or Canonicalizer(rules.links.session_params,
                                                            cache_size=cache_size)
        self.link_filter = LinkFilter(rules.links, cache_size=cache_size)

    def parse(self, body: bytes, url: str, *, depth: int = 0, encoding: str | None = None) -> ParseResult:
        """Parse ``body`` fetched from ``url`` at crawl depth ``depth``; ``encoding`` is the
        Content-Type header's charset, if any."""
        counts: Counter[str] = Counter()
        counts["pages"] = 1
        canonical = self.canonicalizer.canonical(url)
        if canonical is None:
            counts["pages/badurl"] = 1
            return ParseResult(url, "badurl", counts=dict(counts))
        prepared = prepare_body(body, self.rules.max_body_bytes, encoding)
        counts["pages/" + prepared.kind] = 1
        if prepared.truncated:
            counts["truncated"] = 1
        if prepared.replaced:
            counts["encoding/replaced"] = prepared.replaced
            counts["encoding/broken"] = 1
        if prepared.guessed:
            counts["encoding/guessed"] = 1
        page_type = self.rules.page_type(canonical)
        name = page_type.name if page_type is not None else None
        volatile = page_type.volatile if page_type is not None else frozenset()
        if prepared.kind != "html":
            return ParseResult(canonical, prepared.kind, name, volatile=volatile, counts=dict(counts),
                               encoding=prepared.encoding, truncated=prepared.truncated)
        try:
            tree = LexborHTMLParser(prepared.data)
        except Exception:  # noqa: BLE001 - a parser failure is one page's problem, counted
            counts["pages/unparsable"] = 1
            del counts["pages/html"]
            return ParseResult(canonical, "unparsable", name, counts=dict(counts), encoding=prepared.encoding)
        base_href = _base_href(tree)
        base = Base(self.canonicalizer, canonical, base_href)
        links = extract_links(tree, base, canonical, self.link_filter, depth, counts)
        record = None
        errors: dict[str, str] = {}
        listing: list[ListingItem] = []
        if page_type is not None:
            structured = (StructuredData(tree, prepared.data, base.url, counts)
                          if page_type.structured else None)
            record = extract_fields(tree, page_type.fields, base, structured=structured,
                                    errors=errors)
            if errors:
                counts["record/errors"] = len(errors)
                for field_name in errors:
                    counts["record/errors/" + field_name] = 1
            if page_type.listing is not None:
                listing = extract_listing(tree, page_type.listing, base, self.link_filter, counts)
        return ParseResult(
            canonical, "html", name, tuple(links), record, volatile, tuple(listing),
            dict(counts), prepared.encoding, prepared.truncated, errors,
        )
