"""Structured data of a page (JSON-LD, microdata) and the paths record fields read it by.

A path such as ``Product.offers.price`` names a schema.org type, then keys: the value is taken
from the first item of that ``@type`` on the page (document order, depth first, so an item inside
``@graph`` or nested in another item counts; ``@type`` may be a list, and a type is compared by
its local name, so ``http://schema.org/Product`` and ``schema:Product`` are ``Product``), then
key by key; a list met along the way gives its first element. Microdata items (extracted by
extruct as ``{"type": ..., "properties": {...}}``) are first put in the JSON-LD shape
(``{"@type": ..., key: value}``) so one lookup serves both.

The page is read with the ``extruct`` library, and only when a page type has a structured field
(:class:`StructuredData` extracts on first use, once a page): JSON-LD from the ``<script
type="application/ld+json">`` elements of the already parsed tree, each decoded alone, so a
broken one (counted as ``record/jsonld/broken``) spoils no other; microdata from an lxml parse of
the outermost ``itemscope`` elements (of the whole body when the page uses ``itemref``), skipped
when the tree has none or more than ``MAX_MICRODATA_ITEMS`` (``record/microdata/skipped``; a
failure is ``record/microdata/broken``).
``extruct`` (which imports rdflib) is imported on first use, so a site without structured fields
never loads it.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_MICRODATA_ITEMS", "PATH_PATTERN", "SYNTAXES", "StructuredData", "find",
           "parse_path"]

SYNTAXES: tuple[str, ...] = ("jsonld", "microdata")
#: More ``itemscope`` elements than this and the page's microdata is not read (a structured
#: field falls back to CSS; ``record/microdata/skipped``): extruct's cost grows faster than the
#: item count (1,000 flat items cost 28 ms, 3,000 cost 240 ms), and no product page needs as many.
MAX_MICRODATA_ITEMS = 1000
#: A path: a schema.org type name, then one or more keys (JSON-LD keys as written, ``@id`` too).
PATH_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z_@][\w@:-]*)+")
_TYPE_SEPARATORS = re.compile(r"[/#:]")
# Control characters lxml refuses in a text node; JSON allows none of them raw (extruct's lenient
# decoding would), so a space stands in for each.
_NOT_XML = dict.fromkeys([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)], " ")


def parse_path(path: str) -> tuple[str, ...]:
    """``"Product.offers.price"`` as ``("Product", "offers", "price")``; ``ValueError`` when
    the path is not a type name followed by keys (see ``PATH_PATTERN``)."""
    if not isinstance(path, str) or not PATH_PATTERN.fullmatch(path):
        raise ValueError(f"{path!r} is not a path like 'Product.offers.price'")
    return tuple(path.split("."))


def _has_type(declared: Any, name: str) -> bool:
    names = declared if isinstance(declared, list) else (declared,)
    return any(isinstance(t, str) and _TYPE_SEPARATORS.split(t.strip())[-1] == name
               for t in names)


def find(items: list[Any], path: tuple[str, ...]) -> tuple[Any, Mapping[str, Any] | None] | None:
    """The value at ``path`` in ``items`` and the object holding it (for a sibling such as
    ``priceCurrency``), or ``None`` when there is no item of the type or no value at the path."""
    item = _first_of_type(items, path[0])
    if item is None:
        return None
    node: Any = item
    parent: Mapping[str, Any] | None = None
    for key in path[1:]:
        if isinstance(node, list):
            node = node[0] if node else None
        if not isinstance(node, Mapping) or node.get(key) is None:
            return None
        parent, node = node, node[key]
    return node, parent


def _first_of_type(items: list[Any], name: str) -> Mapping[str, Any] | None:
    # Iterative: a hostile document's nesting must not reach the recursion limit.
    stack: list[Any] = list(reversed(items))
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if _has_type(node.get("@type"), name):
                return node
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return None


def _from_microdata(value: Any) -> Any:
    """extruct's microdata item as a JSON-LD object: ``@type`` plus its properties."""
    if isinstance(value, list):
        return [_from_microdata(v) for v in value]
    if not isinstance(value, dict) or ("type" not in value and "properties" not in value):
        return value
    item: dict[str, Any] = {"@type": value.get("type")}
    if "id" in value:
        item["@id"] = value["id"]
    if "value" in value:
        item["@value"] = value["value"]
    for key, prop in value.get("properties", {}).items():
        item[key] = _from_microdata(prop)
    return item


def _outermost(nodes: list[Any]) -> list[Any]:
    """The nodes (selectolax) that have no ``itemscope`` ancestor."""
    kept = []
    for node in nodes:
        parent = node.parent
        while parent is not None and "itemscope" not in (parent.attributes or {}):
            parent = parent.parent
        if parent is None:
            kept.append(node)
    return kept


@functools.cache
def _extruct() -> tuple[Callable[[str], list[Any]], Callable[[bytes, str], list[Any]]]:
    """extruct's two extractors, imported on first use (with rdflib, 0.3 s to import)."""
    from extruct import JsonLdExtractor, MicrodataExtractor
    from extruct.utils import parse_html
    from lxml import etree

    def jsonld(text: str) -> list[Any]:
        # The script alone in a holder: extruct reads it as it would in the whole page, without
        # a second parse of the page.
        holder = etree.Element("div")
        etree.SubElement(holder, "script", type="application/ld+json").text = \
            text.translate(_NOT_XML)
        return list(JsonLdExtractor().extract_items(holder))

    def microdata(body: bytes, base_url: str) -> list[Any]:
        return list(MicrodataExtractor().extract_items(parse_html(body, "utf-8"), base_url))

    return jsonld, microdata


class StructuredData:
    """The JSON-LD and microdata items of one page, each extracted on first use.

    ``tree`` is the page's selectolax tree, ``body`` the text it was parsed from (bytes are
    UTF-8), ``base_url`` resolves microdata URLs, ``counts`` receives ``record/jsonld/broken``,
    ``record/microdata/broken`` and ``record/microdata/skipped``.
    """

    def __init__(self, tree: Any, body: bytes | str, base_url: str,
                 counts: Counter[str]) -> None:
        self.tree = tree
        self.body = body
        self.base_url = base_url
        self.counts = counts

    @functools.cached_property
    def jsonld(self) -> list[Any]:
        scripts = self.tree.css('script[type="application/ld+json" i]')
        if not scripts:
            return []
        decode = _extruct()[0]
        items: list[Any] = []
        for script in scripts:
            try:
                items.extend(decode(script.text(deep=True)))
            except (ValueError, RecursionError):
                self.counts["record/jsonld/broken"] += 1
        return items

    @functools.cached_property
    def microdata(self) -> list[Any]:
        scopes = self.tree.css("[itemscope]")
        if not scopes:
            return []
        if len(scopes) > MAX_MICRODATA_ITEMS:
            self.counts["record/microdata/skipped"] += 1
            return []
        if self.tree.css_first("[itemref]") is None:
            # Only the outermost items, serialised: lxml then parses a few hundred bytes, not
            # the page (0.45 ms for 95 KB), and extruct searches them alone. An itemref may
            # point anywhere in the page: then the whole body is read.
            html = "".join(node.html or "" for node in _outermost(scopes))
            body = f"<html><body>{html}</body></html>".encode()
        else:
            body = self.body if isinstance(self.body, bytes) else self.body.encode("utf-8")
        try:
            return [_from_microdata(item) for item in _extruct()[1](body, self.base_url)]
        except Exception:  # noqa: BLE001 - lxml or extruct failing on one page is counted
            self.counts["record/microdata/broken"] += 1
            return []

    def find(self, syntax: str, path: tuple[str, ...]
             ) -> tuple[Any, Mapping[str, Any] | None] | None:
        """:func:`find` over this page's ``jsonld`` or ``microdata`` items."""
        return find(self.jsonld if syntax == "jsonld" else self.microdata, path)
