"""Rewriting a robots.txt body into the canonical form that :class:`protego.Protego` reads the way
RFC 9309 (and, where they agree, Google's parser) means it.

Protego alone departs from the RFC in three ways that matter to a crawler; each is undone here,
before or around Protego, rather than by patching it:

- A user-agent line's value is cut to its product token (``[A-Za-z_-]+``, or ``*``): the line
  ``User-agent: Foo Bar`` names the crawler ``foo``. Lines that are not a known directive are
  dropped, so an unknown line between two user-agent lines no longer splits their group.
- Paths are compared octet for octet after percent-encoding what must be encoded (non-ASCII
  characters, as RFC 9309 section 2.2.2 says) and upper-casing the hex digits of existing escapes;
  Protego instead decodes escapes of unreserved characters, so ``/%62%61%7A`` would match ``/baz``.
  Escaping every ``%`` as ``%25`` on both sides makes Protego's own decoding a no-op.
- Lines longer than :data:`MAX_LINE_BYTES` are cut there (Google's limit), so a hostile file
  cannot make one rule arbitrarily expensive to match.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import quote, urlsplit

# Google's parser keeps at most 2083 * 8 - 1 bytes of a line (robots.cc, kMaxLineLen).
MAX_LINE_BYTES = 2083 * 8 - 1

_USER_AGENT = {"user-agent", "useragent", "user agent"}
_ALLOW = {"allow"}
_DISALLOW = {"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"}
_CRAWL_DELAY = {"crawl-delay", "crawl delay"}
_SITEMAP = {"sitemap", "site-map"}
_CANONICAL = (
    [(name, "User-agent") for name in _USER_AGENT]
    + [(name, "Allow") for name in _ALLOW]
    + [(name, "Disallow") for name in _DISALLOW]
    + [(name, "Crawl-delay") for name in _CRAWL_DELAY]
    + [(name, "Sitemap") for name in _SITEMAP]
)
_FIELDS = dict(_CANONICAL)

_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# Characters left as they are when a path or pattern is percent-encoded: RFC 3986's unreserved
# and reserved sets, "%" (existing escapes) and the pattern wildcards.
_SAFE = "/?#[]@!$&'()*+,;=:-._~%"


@lru_cache(maxsize=64)  # asked for every request, of the crawl's one or two user agents
def product_token(value: str) -> str:
    """The product token a user-agent value starts with, lower-cased; ``*`` for the wildcard;
    ``""`` when the value starts with neither."""
    value = value.strip()
    if value == "*" or (value.startswith("*") and value[1:2].isspace()):
        return "*"
    match = _PRODUCT_TOKEN.match(value)
    return match.group(0).lower() if match else ""


def _split_line(line: str) -> tuple[str, str] | None:
    """``(canonical field, value)`` of a directive line, or None for anything else."""
    line = line.split("#", 1)[0].strip()
    if not line:
        return None
    if ":" in line:
        field, _, value = line.partition(":")
    else:
        # Like Google, accept "Disallow /x": a space instead of the missing colon.
        parts = line.split(None, 1)
        field, value = parts[0], parts[1] if len(parts) > 1 else ""
        if field.lower() == "user" and value.lower().startswith("agent "):
            field, value = "user agent", value[6:]
    canonical = _FIELDS.get(field.strip().lower())
    return (canonical, value.strip()) if canonical else None


def _escape(text: str) -> str:
    """Percent-encode what must be encoded, upper-case existing escapes, then hide every escape
    from Protego's decoding by turning its ``%`` into ``%25``."""
    text = quote(text, safe=_SAFE)
    text = _ESCAPE.sub(lambda m: "%" + m.group(1).upper(), text)
    return text.replace("%", "%25")


def canonical_rules(text: str) -> str:
    """The directives of a robots.txt body, one canonical line each, ready for Protego."""
    out: list[str] = []
    for raw in text.splitlines():
        encoded = raw.encode("utf-8", "surrogateescape")
        if len(encoded) > MAX_LINE_BYTES:
            raw = encoded[:MAX_LINE_BYTES].decode("utf-8", "ignore")
        parsed = _split_line(raw)
        if parsed is None:
            continue
        field, value = parsed
        if field == "User-agent":
            value = product_token(value)
        elif field in ("Allow", "Disallow"):
            value = _escape(value)
        out.append(f"{field}: {value}")
    return "\n".join(out) + "\n" if out else ""


def match_target(url: str) -> str:
    """An absolute URL for Protego whose path and query are those of ``url`` with their escapes
    hidden the way :func:`_escape` hides those of patterns, so the comparison Protego makes is the
    octet-by-octet one RFC 9309 describes. The URL is expected percent-encoded already (Scrapy's
    ``Request.url`` always is); like Google's parser, raw non-ASCII characters are not encoded
    here, so they never match an encoded pattern."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query or url.split("#", 1)[0].endswith("?"):
        target += "?" + parts.query
    target = _ESCAPE.sub(lambda m: "%" + m.group(1).upper(), target).replace("%", "%25")
    # A scheme and host keep a path starting with "//" from being read as an authority.
    return "http://robots.invalid" + target
