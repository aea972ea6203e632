"""Record fields of a page: the data whose change a revisit detects.

A field's raw value comes from the page's structured data when the rule names a path (JSON-LD,
then microdata; see :mod:`webcrawl.parse.structured`) and one is found there, else from CSS: the
whitespace-normalised text content of the first matching element (text nodes joined as they are,
like the DOM's ``textContent``, then runs of whitespace collapsed to one space and the ends
stripped), or the stripped value of an attribute; ``None`` when nothing matches (or the attribute
is missing). ``many=True`` fields give a list over every match, missing values left out. ``href``
and ``src`` attributes are resolved to canonical absolute URLs.

A typed field (``type`` other than ``text``) then converts the raw value
(:func:`webcrawl.parse.typed.convert`). An empty raw value is no value of a typed field
(``None``, or left out of a ``many`` list); a blank structured value is none either, and the next
source is tried. A value that does not convert is an error, never a quiet ``None``: the field is
``None`` in the record and ``errors`` maps its name to the text (at most 200 characters).
"""

from __future__ import annotations

import json
from typing import Any

from webcrawl.parse.join import Base
from webcrawl.parse.rules import FieldRule
from webcrawl.parse.structured import StructuredData
from webcrawl.parse.typed import convert

__all__ = ["ERROR_TEXT_CHARS", "extract_fields", "field_value"]

_URL_ATTRS = frozenset(("href", "src"))
#: Keys whose value is an amount that a sibling ``priceCurrency`` qualifies (schema.org Offer,
#: AggregateOffer, PriceSpecification).
_PRICE_KEYS = frozenset(("price", "lowPrice", "highPrice", "minPrice", "maxPrice"))
#: How much of a value that did not convert ``errors`` keeps.
ERROR_TEXT_CHARS = 200


class _Unconvertible(ValueError):
    """A raw value of a typed field that does not convert; ``text`` is what to report."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text[:ERROR_TEXT_CHARS]


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


def extract_fields(root: Any, rules: tuple[FieldRule, ...], base: Base, *,
                   structured: StructuredData | None = None,
                   errors: dict[str, str] | None = None) -> dict[str, Any]:
    """``{field name: value}`` for every rule, searched inside ``root`` (a selectolax parser or
    node; a node matches its own selector too), in the order of ``rules``.

    ``structured`` is the page's structured data (without it, structured paths are skipped and
    CSS alone is read). Fields whose value does not convert to their type are ``None`` and
    named in ``errors`` (name -> text), when given.
    """
    record: dict[str, Any] = {}
    for rule in rules:
        if rule.plain:  # the fast path: text by CSS, as before types existed
            if rule.many:
                values = (field_value(node, rule, base) for node in root.css(rule.css))
                record[rule.name] = [v for v in values if v is not None]
            else:
                node = root.css_first(rule.css)
                record[rule.name] = None if node is None else field_value(node, rule, base)
            continue
        try:
            record[rule.name] = _typed_value(root, rule, base, structured)
        except _Unconvertible as exc:
            record[rule.name] = None
            if errors is not None:
                errors[rule.name] = exc.text
    return record


def _typed_value(root: Any, rule: FieldRule, base: Base,
                 structured: StructuredData | None) -> Any:
    if structured is not None:
        for syntax, path in rule.paths:
            found = structured.find(syntax, path)
            if found is None:
                continue
            value, parent = found
            values = _scalars(value if isinstance(value, list) else [value])
            if not values:
                continue
            currency = None
            if rule.type == "price" and path[-1] in _PRICE_KEYS and parent is not None:
                sibling = parent.get("priceCurrency")
                currency = sibling if isinstance(sibling, str) else None
            return _converted(rule, values if rule.many else values[:1], currency, True)
    if rule.css is None:
        return [] if rule.many else None
    # An empty text is a text field's value, as on the fast path, and no value of another type.
    empty_ok = rule.type == "text"
    if rule.many:
        raw = [field_value(node, rule, base) for node in root.css(rule.css)]
        return _converted(rule, [v for v in raw if v or (empty_ok and v is not None)])
    node = root.css_first(rule.css)
    text = None if node is None else field_value(node, rule, base)
    return _converted(rule, [text] if text or (empty_ok and text is not None) else [])


def _scalars(values: list[Any]) -> list[Any]:
    """Structured values as raw field values: a JSON-LD value object (``{"@value": ...}``) or
    node reference (``{"@id": ...}``) gives its value; blank strings and nulls are no value;
    any other object is an error (the path should go on to one of its keys)."""
    out = []
    for value in values:
        if isinstance(value, dict):
            if "@value" in value:
                value = value["@value"]
            elif isinstance(value.get("@id"), str) and not set(value) - {"@id", "@type"}:
                value = value["@id"]
            else:
                raise _Unconvertible(json.dumps(value, ensure_ascii=False, default=str))
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if isinstance(value, list | dict):
            raise _Unconvertible(json.dumps(value, ensure_ascii=False, default=str))
        out.append(value)
    return out


def _converted(rule: FieldRule, values: list[Any], structured_currency: str | None = None,
               structured: bool = False) -> Any:
    """``values`` converted to ``rule.type``: the list for a ``many`` field, else the first
    value (``None`` without one). ``structured``: they come from JSON-LD or microdata."""
    out = []
    for value in values:
        try:
            out.append(convert(rule.type, value, currency=rule.currency,
                               structured_currency=structured_currency,
                               date_format=rule.date_format, structured=structured))
        except ValueError:
            raise _Unconvertible(value if isinstance(value, str) else repr(value)) from None
    if rule.many:
        return out
    return out[0] if out else None
