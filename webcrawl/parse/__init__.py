"""The parsing layer: bytes + URL + rules in, links, record and listing items out.

No Scrapy, no Redis: the generic spider calls ``PageParser.parse`` and turns the result's
``counts`` into stats. See docs/parsing.md.
"""

from __future__ import annotations

from webcrawl.parse.canonical import Canonicalizer
from webcrawl.parse.decode import Body, prepare_body
from webcrawl.parse.join import Base
from webcrawl.parse.links import LinkFilter, extract_links
from webcrawl.parse.listing import ListingItem, extract_listing
from webcrawl.parse.page import PageParser, ParseResult
from webcrawl.parse.record import extract_fields
from webcrawl.parse.rules import (
    DEFAULT_SESSION_PARAMS,
    IGNORED_EXTENSIONS,
    FieldRule,
    LinkRules,
    ListingRule,
    PageType,
    ParseRules,
    TrapRules,
)
from webcrawl.parse.site import rules_for_site
from webcrawl.parse.traps import TrapDetector

__all__ = [
    "DEFAULT_SESSION_PARAMS",
    "IGNORED_EXTENSIONS",
    "Base",
    "Body",
    "Canonicalizer",
    "FieldRule",
    "LinkFilter",
    "LinkRules",
    "ListingItem",
    "ListingRule",
    "PageParser",
    "PageType",
    "ParseResult",
    "ParseRules",
    "TrapDetector",
    "TrapRules",
    "extract_fields",
    "extract_links",
    "extract_listing",
    "prepare_body",
    "rules_for_site",
]
