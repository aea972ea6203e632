"""``rules_for_site``: the parsing rules of a validated site file (``webcrawl.sites.SiteConfig``).

Read by attribute, without importing ``webcrawl.sites``, so the parsing layer stays a leaf: any
object with the attributes listed in the docstring works (a test double, a Python spider's own).
"""

from __future__ import annotations

from typing import Any

from webcrawl.parse.rules import (
    DEFAULT_SESSION_PARAMS,
    FieldRule,
    LinkRules,
    ListingRule,
    PageType,
    ParseRules,
    TrapRules,
)

__all__ = ["rules_for_site"]


def _field(rule: Any) -> FieldRule:
    # The typed attributes are read with defaults: a rule object from before them still works.
    return FieldRule(rule.name, rule.css, rule.attr, bool(rule.many),
                     type=getattr(rule, "type", "text"),
                     currency=getattr(rule, "currency", None),
                     date_format=getattr(rule, "date_format", None),
                     jsonld=getattr(rule, "jsonld", None),
                     microdata=getattr(rule, "microdata", None))


def _page_type(page_type: Any) -> PageType:
    listing = None
    if page_type.listing is not None:
        source = page_type.listing
        link = source.link
        # The site schema gives the link as a field rule (css + attribute); a string is a selector.
        css, attr = (link, "href") if isinstance(link, str) else (link.css, link.attr or "href")
        listing = ListingRule(source.item, css, tuple(_field(f) for f in source.summary), attr)
    return PageType(
        page_type.name,
        page_type.url_pattern,
        tuple(_field(f) for f in page_type.fields),
        frozenset(page_type.volatile),
        listing,
    )


def rules_for_site(
    site: Any,
    *,
    session_params: frozenset[str] = DEFAULT_SESSION_PARAMS,
    traps: TrapRules | None = None,
) -> ParseRules:
    """Build ``ParseRules`` from ``site``, reading ``allowed_domains``, ``page_types`` (``name``,
    ``url_pattern``, ``fields``, ``volatile``, ``listing`` with ``item``, ``link``, ``summary``;
    each field rule's ``name``, ``css``, ``attr``, ``many`` and, when present, ``type``,
    ``currency``, ``date_format``, ``jsonld``, ``microdata``)
    and ``limits`` (``max_depth``, ``max_url_length``, ``parse_bytes``, ``denied_extensions``,
    ``denied_url_patterns``). Session parameters and trap rules are not in the site file (yet):
    pass them here."""
    limits = site.limits
    links = LinkRules(
        allowed_domains=tuple(site.allowed_domains),
        denied_extensions=frozenset(limits.denied_extensions),
        max_url_length=limits.max_url_length,
        denied_patterns=tuple(limits.denied_url_patterns),
        max_depth=limits.max_depth,
        session_params=session_params,
        traps=traps if traps is not None else TrapRules(),
    )
    return ParseRules(
        links=links,
        page_types=tuple(_page_type(p) for p in site.page_types),
        max_body_bytes=limits.parse_bytes,
    )
