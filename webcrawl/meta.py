"""Every ``Request.meta`` key webcrawl reads or writes, in one place.

| key | set by | meaning |
| --- | --- | --- |
| ``webcrawl_purpose`` | spider, planner, priority middleware, robots | why the request exists: discovery, revisit, reestimation, verification, robots, sitemap, listing |
| ``webcrawl_page_type`` | spider, planner | the page type its URL matches (or None) |
| ``webcrawl_canonical_url`` | planner, priority middleware | the canonical form of the URL (page history key) |
| ``webcrawl_expected_cost`` | priority middleware, planner | expected cost of the fetch in the site's billing unit |
| ``webcrawl_priority`` | priority middleware, planner | value x gain / expected cost, before mapping to ``Request.priority`` |
| ``webcrawl_planned`` | planner | id of the cycle whose plan holds this visit |
| ``webcrawl_cycle``, ``webcrawl_reserved`` | budget middleware | the cycle the fetch is booked to, and the cost reserved for it |
| ``webcrawl_lastmod`` | spider | a sitemap's ``<lastmod>`` for the URL, seconds since the epoch |
| ``webcrawl_sitemap_level`` | spider | nesting level of a sitemap request |
| ``webcrawl_conditional`` | spider | False: send no validators (sitemaps) |
| ``webcrawl_validators_for``, ``webcrawl_verify_304``, ``webcrawl_wire_bytes_before`` | conditional middleware | which URL the validators belong to; a verification fetch of a 304; bytes counted before a redirect |
| ``webcrawl_trigger`` | robots middleware | the request whose robots.txt fetch this is |
"""

from __future__ import annotations

PURPOSE = "webcrawl_purpose"
PAGE_TYPE = "webcrawl_page_type"
CANONICAL_URL = "webcrawl_canonical_url"
EXPECTED_COST = "webcrawl_expected_cost"
PRIORITY = "webcrawl_priority"
PLANNED = "webcrawl_planned"
CYCLE = "webcrawl_cycle"
RESERVED = "webcrawl_reserved"
LASTMOD = "webcrawl_lastmod"
SITEMAP_LEVEL = "webcrawl_sitemap_level"
CONDITIONAL = "webcrawl_conditional"
VALIDATORS_FOR = "webcrawl_validators_for"
VERIFY_304 = "webcrawl_verify_304"
WIRE_BYTES_BEFORE = "webcrawl_wire_bytes_before"
TRIGGER = "webcrawl_trigger"
