"""The typed rules the parsing layer takes: links, traps, record fields, listings, page types.

Every rule object is a frozen dataclass validated in ``__post_init__``: a bad value raises
``ValueError`` naming the field, the value and what was expected, so the site-file loader can
build these once at start-up and stop the crawl before its first request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from selectolax.lexbor import LexborHTMLParser, SelectolaxError
from w3lib.url import canonicalize_url

from webcrawl.parse.amounts import CURRENCY_CODES
from webcrawl.parse.structured import SYNTAXES, parse_path
from webcrawl.parse.typed import FIELD_TYPES, check_date_format

__all__ = [
    "DEFAULT_SESSION_PARAMS",
    "IGNORED_EXTENSIONS",
    "FieldRule",
    "LinkRules",
    "ListingRule",
    "PageType",
    "ParseRules",
    "TrapRules",
]

# Scrapy's scrapy.linkextractors.IGNORED_EXTENSIONS, copied so that the parsing layer does not
# import Scrapy. Compared, lower-cased, with the text after the last dot of the last path segment.
IGNORED_EXTENSIONS: frozenset[str] = frozenset(
    """7z 7zip bz2 rar tar tar.gz xz zip mng pct bmp gif jpg jpeg png pst psp tif tiff ai drw dxf
    eps ps svg cdr ico webp mp3 wma ogg wav ra aac mid au aiff 3gp asf asx avi mov mp4 mpg qt rm
    swf wmv m4a m4v flv webm xls xlsm xlsx xltm xltx potm potx ppt pptm pptx pps doc docb docm
    docx dotm dotx odt ods odg odp css pdf exe bin rss dmg iso apk jar sh rb js hta bat cpl msi
    msp py gz""".split()
)

#: Entries of each parse memo table (``WEBCRAWL_PARSE_CACHE_SIZE``): a site's navigation links,
#: which come back on every page, fit many times over; a table that fills is emptied at once.
PARSE_CACHE_SIZE = 20_000

# Query parameters (and ``;name=`` path parameters) that carry a session and never name content.
# Compared lower-cased; ``aspsessionid`` also matches its random suffix (ASPSESSIONIDQASDQSCR).
DEFAULT_SESSION_PARAMS: frozenset[str] = frozenset(
    "sid sessionid session_id sessid jsessionid phpsessid aspsessionid cfid cftoken oscsid zenid"
    .split()
)

_ATTR_SPEC = re.compile(r"^(?P<css>.*?)::attr\((?P<attr>[^()\s]+)\)$", re.S)
_TEXT_SPEC = re.compile(r"^(?P<css>.*?)::text$", re.S)


def _compile(name: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{name}: {pattern!r} is not a valid regular expression ({exc})") from None


_PROBE = LexborHTMLParser("<p></p>")


def _idna_host(host: str) -> str:
    """``host`` as canonical URLs spell it (w3lib's IDNA encoding)."""
    try:
        return urlsplit(canonicalize_url(f"http://{host}/")).hostname or host
    except ValueError:
        raise ValueError(f"links allowed_domains: {host!r} is not a valid host name") from None


def _check_css(where: str, css: str) -> None:
    """Refuse a selector that selectolax cannot parse now, not on the first page."""
    if not css.strip():
        raise ValueError(f"{where}: css {css!r} is empty; expected a CSS selector")
    try:
        _PROBE.css(css)
    except SelectolaxError:
        raise ValueError(f"{where}: css {css!r} is not a CSS selector selectolax can parse") from None


@dataclass(frozen=True)
class FieldRule:
    """One record field: the first element matching ``css`` gives its whitespace-normalised text,
    or the stripped value of attribute ``attr``; ``many=True`` gives the list over all matches.

    Attributes named ``href`` or ``src`` are returned as absolute canonical URLs (session
    parameters stripped) so that a record's hash does not change with a session token.

    ``type`` (one of ``FIELD_TYPES``, see :mod:`webcrawl.parse.typed`) converts the value:
    ``currency`` (an ISO 4217 code) is a price's default currency, ``date_format`` a date's
    ``strptime`` format. ``jsonld`` and ``microdata`` are paths into the page's structured data
    (``"Product.offers.price"``, see :mod:`webcrawl.parse.structured`): tried in that order, the
    first value found wins and ``css`` is the fallback. ``css`` may be ``None`` only beside a
    structured path. ``plain`` is true for a text field read by CSS alone (the fast path).
    """

    name: str
    css: str | None = None
    attr: str | None = None
    many: bool = False
    type: str = "text"
    currency: str | None = None
    date_format: str | None = None
    jsonld: str | None = None
    microdata: str | None = None
    plain: bool = field(init=False, repr=False, compare=False)
    paths: tuple[tuple[str, tuple[str, ...]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"field {self.name!r}"
        if not self.name:
            raise ValueError(f"field name: {self.name!r} is empty; expected a non-empty name")
        if self.css is not None:
            _check_css(where, self.css)
        elif self.attr is not None or (self.jsonld is None and self.microdata is None):
            raise ValueError(f"{where}: css is None; expected a CSS selector"
                             + (" (attr reads an attribute of the css match)" if self.attr else
                                " or a jsonld or microdata path"))
        if self.type not in FIELD_TYPES:
            raise ValueError(f"{where}: type {self.type!r}; expected one of {FIELD_TYPES}")
        if self.currency is not None and (self.type != "price"
                                          or self.currency not in CURRENCY_CODES):
            raise ValueError(f"{where}: currency {self.currency!r}; expected an ISO 4217 code "
                             "on a field of type 'price'")
        if self.date_format is not None and (self.type != "date"
                                             or not check_date_format(self.date_format)):
            raise ValueError(f"{where}: date_format {self.date_format!r}; expected a strptime "
                             "format with day, month and year on a field of type 'date'")
        paths = []
        for syntax in SYNTAXES:
            path = getattr(self, syntax)
            if path is not None:
                try:
                    paths.append((syntax, parse_path(path)))
                except ValueError as exc:
                    raise ValueError(f"{where}: {syntax} {exc}") from None
        object.__setattr__(self, "paths", tuple(paths))
        object.__setattr__(self, "plain", self.type == "text" and not paths)

    @classmethod
    def parse(cls, name: str, spec: str, *, many: bool = False, **options: Any) -> FieldRule:
        """``"h1.title"`` or ``"h1::text"`` takes text; ``"img.main::attr(src)"`` takes an
        attribute. ``options`` are the other fields (``type="price"``, ``jsonld=...``)."""
        if m := _ATTR_SPEC.match(spec):
            return cls(name, m["css"].strip(), m["attr"], many, **options)
        if m := _TEXT_SPEC.match(spec):
            return cls(name, m["css"].strip(), None, many, **options)
        return cls(name, spec.strip(), None, many, **options)


@dataclass(frozen=True)
class ListingRule:
    """A listing page: each ``item`` element holds a link (the first element matching ``link``
    inside the item, the item itself included; its ``link_attr`` attribute is the URL) and
    summary fields, searched inside the item. The caller fetches an item only when its summary
    changed."""

    item: str
    link: str = "a[href]"
    summary: tuple[FieldRule, ...] = ()
    link_attr: str = "href"

    def __post_init__(self) -> None:
        _check_css("listing item", self.item)
        _check_css("listing link", self.link)


@dataclass(frozen=True)
class PageType:
    """A kind of page, matched by ``re.search(url_pattern, url)`` on the canonical page URL
    (``url_pattern`` a string or a compiled pattern).

    ``volatile`` names fields that change on every load (timestamps, counters): they are still
    extracted, and excluded from the record hash by the caller (see ``ParseResult.stable_record``).
    ``structured`` is true when a field reads JSON-LD or microdata: only then does a page of the
    type pay for extracting them.
    """

    name: str
    url_pattern: str | re.Pattern[str]
    fields: tuple[FieldRule, ...] = ()
    volatile: frozenset[str] = frozenset()
    listing: ListingRule | None = None
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    structured: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "structured", any(f.paths for f in self.fields))
        pattern = self.url_pattern
        regex = pattern if isinstance(pattern, re.Pattern) else _compile(f"page type {self.name!r} url_pattern", pattern)
        object.__setattr__(self, "regex", regex)
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"page type {self.name!r}: fields {names!r} repeat a name; expected unique names")
        unknown = set(self.volatile) - set(names)
        if unknown:
            raise ValueError(
                f"page type {self.name!r}: volatile {sorted(unknown)!r} are not fields; expected some of {names!r}"
            )


@dataclass(frozen=True)
class TrapRules:
    """Links that lead into endless URL spaces.

    - ``max_segment_repeats``: a path segment occurring more often than this (``/a/b/a/b/a/b``).
    - ``max_path_segments``: more path segments than this.
    - calendars: a year (a 4-digit path segment, or the year of a ``YYYY-MM[-DD]`` token in the
      path or in a query value) outside ``[current_year - years_back, current_year + years_ahead]``;
      a date token in a path segment deeper than ``max_date_depth``; two date tokens in one URL;
      a query key in ``calendar_params`` (``month=...``) whose URL's year lies further than
      ``calendar_window_years`` from now, or that carries no year at all.
    ``current_year`` ``None`` means the year at which the extractor is built (the caller injects
    its clock's year for tests and simulations).
    """

    max_segment_repeats: int = 2
    max_path_segments: int = 20
    years_back: int = 30
    years_ahead: int = 2
    max_date_depth: int = 4
    calendar_params: frozenset[str] = frozenset(("month", "year", "day", "date", "week", "cal", "calendar"))
    calendar_window_years: int = 1
    current_year: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_segment_repeats", "max_path_segments", "years_back", "years_ahead", "max_date_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"traps {name}: {value!r}; expected an integer >= 1")


@dataclass(frozen=True)
class LinkRules:
    """Which extracted links are kept. Each dropped link is counted by its first failing reason,
    in this order: ``scheme``, ``depth``, ``length``, ``scope``, ``extension``, ``pattern``, ``trap``.

    ``allowed_domains`` empty means every host; otherwise a host matches a domain or any of its
    subdomains. ``max_depth`` ``None`` means unlimited; links from a page at depth ``d`` have
    depth ``d + 1`` and are dropped when that exceeds ``max_depth``.
    """

    allowed_domains: tuple[str, ...] = ()
    denied_extensions: frozenset[str] = IGNORED_EXTENSIONS
    max_url_length: int = 2083
    denied_patterns: tuple[str | re.Pattern[str], ...] = ()
    max_depth: int | None = None
    session_params: frozenset[str] = DEFAULT_SESSION_PARAMS
    traps: TrapRules = TrapRules()
    denied_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_url_length < 16:
            raise ValueError(f"links max_url_length: {self.max_url_length!r}; expected at least 16")
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError(f"links max_depth: {self.max_depth!r}; expected None or >= 0")
        domains = tuple(d.strip().lower().strip(".") for d in self.allowed_domains)
        if any(not d or "/" in d or "@" in d for d in domains):
            raise ValueError(f"links allowed_domains: {self.allowed_domains!r}; expected bare host names")
        # Canonical URLs carry IDNA (punycode) hosts: compare like with like.
        domains = tuple(d if d.isascii() else _idna_host(d) for d in domains)
        object.__setattr__(self, "allowed_domains", domains)
        object.__setattr__(self, "denied_extensions", frozenset(e.lower().lstrip(".") for e in self.denied_extensions))
        object.__setattr__(self, "session_params", frozenset(p.lower() for p in self.session_params))
        sources = [p.pattern if isinstance(p, re.Pattern) else p for p in self.denied_patterns]
        for source in sources:
            _compile("links denied_patterns", source)
        # One alternation: a single search per URL whatever the number of patterns.
        joined = "|".join(f"(?:{p})" for p in sources)
        object.__setattr__(self, "denied_regex", re.compile(joined) if joined else None)


@dataclass(frozen=True)
class ParseRules:
    """Everything one site's pages are parsed with. ``max_body_bytes`` cuts the body before any
    other work (at a UTF-8 character boundary); page types are tried in order, first match wins."""

    links: LinkRules = LinkRules()
    page_types: tuple[PageType, ...] = ()
    max_body_bytes: int = 512 * 1024

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes: {self.max_body_bytes!r}; expected at least 1024")
        names = [p.name for p in self.page_types]
        if len(set(names)) != len(names):
            raise ValueError(f"page_types: {names!r} repeat a name; expected unique names")

    def page_type(self, url: str) -> PageType | None:
        """The first page type whose pattern matches ``url``, or ``None``."""
        for page_type in self.page_types:
            if page_type.regex.search(url):
                return page_type
        return None
