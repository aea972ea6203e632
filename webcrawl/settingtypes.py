"""Reading typed values out of Scrapy settings, with one-line errors that name the setting.

A setting can arrive as a Python value (``settings.py``, a site file, an add-on) or as text
(``-s NAME=value``, scrapyd's ``setting=NAME=value``, the environment). List settings accept
every form a user would try:

- a list or tuple: its elements;
- ``a,b,c``: split on the separator (``,``; ``os.pathsep`` for folder lists), blanks dropped;
- a JSON list, ``["a", "b"]``: what the README's ``[]`` defaults suggest.

A bad value raises :class:`SettingError`, a ``ValueError`` whose message starts with the
setting's name; ``scrapy crawl`` prints it as one ``scrapy: error:`` line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["LIST_SETTINGS", "PATH_SEPARATOR", "SettingError", "get_list", "parse_list"]

T = TypeVar("T")

#: webcrawl's list settings that components read with ``settings.getlist``, and their separators
#: when given as text. ``scrapy crawl`` turns text values of these into lists before any
#: component reads them (``getlist`` alone splits a JSON list on its commas).
LIST_SETTINGS: dict[str, str] = {
    "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": ",",
    "WEBCRAWL_HEALTH_HTTP_CODES": ",",
}
#: Folder lists (``WEBCRAWL_SITES_DIR``) are separated by ``os.pathsep``, as in ``PATH``.
PATH_SEPARATOR = os.pathsep


class SettingError(ValueError):
    """A setting holds a value of the wrong form; the message names the setting."""


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_list(name: str, value: object, *, separator: str = ",",
               item: Callable[[str], T] | None = None) -> list[Any]:
    """``value`` as a list of items (strings, or ``item(text)`` of each).

    ``None`` and the empty string are the empty list. Raises :class:`SettingError` naming
    ``name`` when the value is neither a list, separated text nor a JSON list of scalars, or when
    ``item`` rejects an element (its ``ValueError``/``TypeError`` message is kept).
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                decoded = json.loads(text)
            except ValueError as exc:
                raise SettingError(f"{name}={_describe(value)} is not a JSON list ({exc.msg}): "
                                   f"expected a{separator}b or a JSON list such as "
                                   '["a", "b"]') from None
            elements: Iterable[object] = decoded
        else:
            elements = (part.strip() for part in text.split(separator))
    elif isinstance(value, (list, tuple)):
        elements = value
    else:
        raise SettingError(f"{name}={_describe(value)} is not a list: expected a{separator}b or "
                           'a JSON list such as ["a", "b"]')
    out: list[Any] = []
    for element in elements:
        if isinstance(element, (dict, list)):
            raise SettingError(f"{name}={_describe(value)}: {_describe(element)} is not a "
                               "single value")
        text = str(element).strip()
        if not text:
            continue
        if item is None:
            out.append(text)
            continue
        try:
            out.append(item(text))
        except (TypeError, ValueError) as exc:
            raise SettingError(f"{name}={_describe(value)}: {_describe(text)} is not valid "
                               f"({exc})") from None
    return out


def get_list(settings: BaseSettings, name: str, default: Iterable[Any] = (), *,
             separator: str | None = None, item: Callable[[str], T] | None = None) -> list[Any]:
    """The list setting ``name`` (see :func:`parse_list`); ``default`` when it is unset.

    ``separator`` defaults to the one :data:`LIST_SETTINGS` gives the setting, else ``,``.
    """
    value = settings.get(name)
    if value is None:
        value = list(default)
    sep = separator or LIST_SETTINGS.get(name, ",")
    return parse_list(name, value, separator=sep, item=item)
