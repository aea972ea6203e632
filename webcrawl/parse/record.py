"""Record fields of a page, from CSS selectors: the data whose change a revisit detects.

A field's value is the whitespace-normalised text content of the first matching element (text
nodes joined as they are, like the DOM's ``textContent``, then runs of whitespace collapsed to one
space and the ends stripped), or the stripped value of an attribute; ``None`` when nothing
matches (or the attribute is missing). ``many=True`` fields give a list over every match, missing
values left out. ``href`` and ``src`` attributes are resolved to canonical absolute URLs.
"""

from __future__ import annotations

from typing import Any

from webcrawl.parse.join import Base
from webcrawl.parse.rules import FieldRule

__all__ = ["extract_fields", "field_value"]

_URL_ATTRS = frozenset(("href", "src"))


def field_value(node: Any, rule: FieldRule, base: Base) -> str | None:
    """The value ``rule`` takes from one selectolax node."""
    if rule.attr is None:
        return " ".join(node.text(deep=True).split())
    value: str | None = node.attrs.get(rule.attr)
    if value is None:
        return None
    if rule.attr in _URL_ATTRS:
        return base.join(value)
    return value.strip()


def extract_fields(root: Any, rules: tuple[FieldRule, ...], base: Base) -> dict[str, Any]:
    """``{field name: value}`` for every rule, searched inside ``root`` (a selectolax parser or
    node; a node matches its own selector too), in the order of ``rules``."""
    record: dict[str, Any] = {}
    for rule in rules:
        if rule.many:
            values = (field_value(node, rule, base) for node in root.css(rule.css))
            record[rule.name] = [v for v in values if v is not None]
        else:
            node = root.css_first(rule.css)
            record[rule.name] = None if node is None else field_value(node, rule, base)
    return record
