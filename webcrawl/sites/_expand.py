"""``${NAME}`` placeholders in the string values of a site file.

A site file may say ``seeds = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT:-8000}/"]`` so that one file
serves a server whose port is chosen at run time (the demo, tests, a staging host). ``NAME`` is
looked up by the caller's ``lookup`` (the spider loader asks Scrapy settings first, then the
environment); ``${NAME:-default}`` falls back to ``default``; ``$${`` is a literal ``${``. A lone
``$`` is left alone, so regex anchors need no escaping. Only string values are expanded: numbers
and booleans stay typed in the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from webcrawl.sites.errors import SiteConfigError

Lookup = Callable[[str], "str | None"]

_TOKEN = re.compile(r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\})?")


def expand(document: Any, source: str, lookup: Lookup, path: str = "") -> Any:
    """A copy of ``document`` with every placeholder in its strings replaced.

    Raises :class:`SiteConfigError` for a malformed placeholder or an undefined name without
    a default.
    """
    if isinstance(document, str):
        return _expand_text(document, source, lookup, path) if "${" in document else document
    if isinstance(document, dict):
        return {k: expand(v, source, lookup, f"{path}.{k}" if path else k)
                for k, v in document.items()}
    if isinstance(document, list):
        return [expand(v, source, lookup, f"{path}[{i}]") for i, v in enumerate(document)]
    return document


def _expand_text(text: str, source: str, lookup: Lookup, path: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group("name")
        if name is None:
            raise SiteConfigError(source, path, text,
                                  "placeholders written ${NAME} or ${NAME:-default}")
        value = lookup(name)
        if value is not None:
            return value
        if match.group("default") is not None:
            return match.group("default")
        raise SiteConfigError(
            source, path, text,
            f"{name} to be defined (as a Scrapy setting or an environment variable), "
            f"or a default: ${{{name}:-value}}",
            problem=f"got {text!r} with {name} undefined",
        )

    return _TOKEN.sub(replace, text)
