"""Typed record values: a field's raw value (page text, an attribute, a JSON-LD value) turned
into a value compared as a value, so ``"$12.00"`` and ``"$12"`` are one price and a change of
markup around a date is no change of the date.

Types (``FIELD_TYPES``): ``text`` (the raw text, unchanged), ``number`` (a float), ``price``
(``{"amount": float, "currency": ISO code or None}``, see :mod:`webcrawl.parse.amounts`),
``availability`` (a schema.org ``ItemAvailability`` member name) and ``date`` (an ISO 8601
string: ``YYYY-MM-DD`` for a date, ``YYYY-MM-DDTHH:MM:SSZ`` in UTC for a date-time).

:func:`convert` raises ``ValueError`` for a value that does not convert; the record extraction
then names the field and its text as an error (``ParseResult.errors``) rather than passing the
field off as missing. Pure functions, no Scrapy.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from webcrawl.parse.amounts import to_number, to_price

__all__ = ["AVAILABILITY", "DATE_FORMATS", "FIELD_TYPES", "check_date_format", "convert",
           "to_availability", "to_date"]

FIELD_TYPES: tuple[str, ...] = ("text", "number", "price", "availability", "date")

#: schema.org ItemAvailability members (https://schema.org/ItemAvailability).
AVAILABILITY: tuple[str, ...] = (
    "BackOrder", "Discontinued", "InStock", "InStoreOnly", "LimitedAvailability", "MadeToOrder",
    "OnlineOnly", "OutOfStock", "PreOrder", "PreSale", "Reserved", "SoldOut")
_MEMBERS = {m.lower(): m for m in AVAILABILITY}
_SCHEMA_NAME = re.compile(r"(?:(?:https?://)?(?:www\.)?schema\.org/|schema:)?(\w+)/?", re.I)

# Page texts, lower-cased with whitespace collapsed, searched in this order: the first pattern
# found names the member. Negations come before the words they negate ("not in stock"),
# "only 2 left (in stock)" before "in stock", "available for pre-order" before "available".
_AVAILABILITY_TEXTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), member) for pattern, member in (
        (r"\bdiscontinued\b|\bno longer (available|sold|made)\b", "Discontinued"),
        (r"\bsold out\b", "SoldOut"),
        (r"\bout of stock\b|\bnot (currently )?(in stock|available)\b|\bunavailable\b"
         r"|\bno stock\b", "OutOfStock"),
        (r"\bpre-? ?orders?\b|\bpre-? ?ordering\b", "PreOrder"),
        (r"\bpre-? ?sale\b", "PreSale"),
        (r"\bback-? ?order", "BackOrder"),
        (r"\bmade to order\b", "MadeToOrder"),
        (r"\b(in[- ]store|in shops?) only\b|\bonly (in[- ]store|in shops?)\b", "InStoreOnly"),
        (r"\bonline only\b|\bonly online\b", "OnlineOnly"),
        (r"\breserved\b", "Reserved"),
        (r"\b(only|just) \d+ left\b|\blow stock\b|\blimited (stock|availability)\b"
         r"|\bfew left\b", "LimitedAvailability"),
        (r"\bin stock\b|\bavailable\b", "InStock"),
    ))

#: Formats tried after ISO 8601 and RFC 2822, in order (``strptime``, English month names).
#: Day-first with dots (``05.03.2026``) is unambiguous; ``05/03/2026`` is not and is refused:
#: give such a field a ``format``.
DATE_FORMATS: tuple[str, ...] = (
    "%d %B %Y", "%d %b %Y", "%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y", "%b. %d, %Y",
    "%Y/%m/%d", "%Y.%m.%d", "%d.%m.%Y")
_ORDINAL = re.compile(r"(?<=\d)(st|nd|rd|th)\b", re.I)
_WEEKDAY = re.compile(r"^(mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+", re.I)


def convert(kind: str, value: Any, *, currency: str | None = None,
            structured_currency: str | None = None, date_format: str | None = None,
            structured: bool = False) -> Any:
    """``value`` (a string, or a JSON number from structured data) as a value of type ``kind``.

    ``currency``, ``structured_currency`` and ``structured`` (the value comes from JSON-LD or
    microdata) are for prices (see ``to_price``), ``date_format`` for dates. Raises
    ``ValueError`` when the value does not convert.
    """
    if kind == "number":
        return to_number(value)
    if kind == "price":
        return to_price(value, currency, structured_currency, structured=structured)
    if kind == "availability":
        return to_availability(_text(value))
    if kind == "date":
        return to_date(_text(value), date_format)
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return " ".join(str(value).split())


def to_availability(text: str) -> str:
    """The ItemAvailability member a text or URL names: ``https://schema.org/InStock``,
    ``schema:InStock`` or ``InStock`` (any case), or a page text such as ``In stock: 5``,
    ``Only 2 left``, ``Currently unavailable``, ``Pre-order`` (see ``_AVAILABILITY_TEXTS``).
    Raises ``ValueError`` for anything else."""
    m = _SCHEMA_NAME.fullmatch(text.strip())
    if m and m[1].lower() in _MEMBERS:
        return _MEMBERS[m[1].lower()]
    words = " ".join(text.lower().split())
    for pattern, member in _AVAILABILITY_TEXTS:
        if pattern.search(words):
            return member
    raise ValueError("no availability")


def to_date(text: str, date_format: str | None = None) -> str:
    """``YYYY-MM-DD`` for a date, ``YYYY-MM-DDTHH:MM:SSZ`` (UTC, seconds) for a date-time.

    With ``date_format`` only that ``strptime`` format is tried. Otherwise: ISO 8601 (``date``
    and ``datetime.fromisoformat``), RFC 2822 (``Thu, 05 Mar 2026 10:00:00 GMT``), then
    ``DATE_FORMATS``, after dropping a leading weekday and ordinal suffixes (``5th``). A
    date-time without an offset is taken as UTC. Raises ``ValueError`` for anything else.
    """
    text = text.strip()
    if date_format is not None:
        return _iso(datetime.strptime(text, date_format), _has_time(date_format))
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    try:
        return _iso(datetime.fromisoformat(text), True)
    except (ValueError, OverflowError):  # a date shifted to UTC may leave years 1 to 9999
        pass
    try:
        return _iso(parsedate_to_datetime(text), True)
    except (TypeError, ValueError, IndexError, OverflowError):
        pass
    plain = _ORDINAL.sub("", _WEEKDAY.sub("", text))
    for fmt in DATE_FORMATS:
        try:
            return _iso(datetime.strptime(plain, fmt), False)
        except ValueError:
            pass
    raise ValueError("no date")


def _has_time(fmt: str) -> bool:
    return any(d in fmt for d in ("%H", "%I", "%M", "%S", "%X", "%c", "%s", "%z"))


def _iso(value: date | datetime, with_time: bool) -> str:
    if not isinstance(value, datetime):
        return value.isoformat()
    if not with_time:
        return value.date().isoformat()
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.replace(microsecond=0).isoformat() + "Z"


def check_date_format(fmt: str) -> bool:
    """Whether ``fmt`` is a ``strptime`` format that gives back the date it wrote: every
    directive known, and a day, a month and a year among them."""
    sample = datetime(2026, 3, 5, 14, 7, 9, tzinfo=UTC)
    try:
        return datetime.strptime(sample.strftime(fmt), fmt).date() == sample.date()
    except ValueError:
        return False
