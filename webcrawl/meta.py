"""Every ``Request.meta`` key webcrawl reads or writes, in one place.

| key | set by | meaning |
| --- | --- | --- |
| ``webcrawl_purpose`` | spider, scheduler, priority middleware, robots | why the request exists: discovery, revisit, sitemap, robots (listing pages and verification samples are revisits) |
| ``webcrawl_page_type`` | spider, scheduler | the page type its URL matches (or None) |
| ``webcrawl_canonical_url`` | scheduler, priority middleware | the canonical form of the URL (the page's key) |
| ``webcrawl_known`` | scheduler | True: a revisit of a known page, popped from its host's due queue |
| ``webcrawl_newly_listed`` | spider | True: a URL first listed by a page or sitemap read again (likely a new page: fetched before other new URLs) |
| ``webcrawl_links`` | scheduler | a listing page's or hub's typed links at its latest reading, when popped (the spider rechecks those it no longer shows) |
| ``webcrawl_hub_candidate`` | spider | True: a page without a page type linked from a hub or a seed (likely a hub itself: found before other new pages without one) |
| ``webcrawl_recheck`` | spider | True: a known page a listing page or hub stopped showing, fetched at once to see whether it died or moved |
| ``webcrawl_lease`` | scheduler | the lease of a request popped from the crawl's queue (absent: it did not come from there) |
| ``webcrawl_validators`` | scheduler | ``[etag, last_modified]`` stored for a known page, read when it was popped |
| ``webcrawl_page_stats`` | scheduler | a known page's ``last_fetched``, ``changes``, ``seconds``, ``mean_cost``, ``hash8`` and ``body8`` (hex of the first 8 bytes of its record hash and of its latest stored body's hash) when popped |
| ``webcrawl_expected_cost`` | priority middleware | expected cost of the fetch in the site's billing unit |
| ``webcrawl_priority`` | priority middleware | value x gain / expected cost, before mapping to ``Request.priority`` |
| ``webcrawl_charged`` | spend controller | what the wallet paid for the fetch, until the cost middleware settles it |
| ``webcrawl_billed`` | cost middleware | what the fetch's answer cost (site unit), for the page's own cost |
| ``webcrawl_wire_bytes`` | cost middleware | bytes of the fetch on the wire (request and answer) |
| ``webcrawl_lastmod`` | spider | a sitemap's ``<lastmod>`` for the URL, seconds since the epoch |
| ``webcrawl_sitemap_level`` | spider | nesting level of a sitemap request |
| ``webcrawl_conditional`` | spider | False: send no validators (sitemaps) |
| ``webcrawl_validators_for``, ``webcrawl_verify_304``, ``webcrawl_wire_bytes_before`` | conditional middleware | which URL the validators belong to; the time of the 304 a verification fetch checks; bytes counted before a redirect |
| ``webcrawl_trigger`` | robots middleware | the request whose robots.txt fetch this is |
| ``webcrawl_turn_taken`` | robots middleware | True: a robots.txt fetch made for a request popped from the crawl's queue; it goes in that pop's turn at the host (no claim of its own), and the request waits the delay after it |
"""

from __future__ import annotations

PURPOSE = "webcrawl_purpose"
PAGE_TYPE = "webcrawl_page_type"
CANONICAL_URL = "webcrawl_canonical_url"
KNOWN = "webcrawl_known"
#: A discovery request for a URL first listed by a page or sitemap read again (likely a new page).
NEWLY_LISTED = "webcrawl_newly_listed"
LINKS = "webcrawl_links"
RECHECK = "webcrawl_recheck"
HUB_CANDIDATE = "webcrawl_hub_candidate"
LEASE = "webcrawl_lease"
VALIDATORS = "webcrawl_validators"
PAGE_STATS = "webcrawl_page_stats"
EXPECTED_COST = "webcrawl_expected_cost"
PRIORITY = "webcrawl_priority"
CHARGED = "webcrawl_charged"
BILLED = "webcrawl_billed"
WIRE_BYTES = "webcrawl_wire_bytes"
LASTMOD = "webcrawl_lastmod"
SITEMAP_LEVEL = "webcrawl_sitemap_level"
CONDITIONAL = "webcrawl_conditional"
VALIDATORS_FOR = "webcrawl_validators_for"
VERIFY_304 = "webcrawl_verify_304"
WIRE_BYTES_BEFORE = "webcrawl_wire_bytes_before"
TRIGGER = "webcrawl_trigger"
TURN_TAKEN = "webcrawl_turn_taken"
