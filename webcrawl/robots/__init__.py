"""robots.txt per RFC 9309: answers (:mod:`.policy`) and their shared cache (:mod:`.cache`)."""

from __future__ import annotations

from webcrawl.robots.policy import (
    MAX_CACHE_SECONDS,
    MIN_PARSE_BYTES,
    Kind,
    RobotsPolicy,
    Verdict,
    product_token,
    verdict_for_error,
    verdict_for_response,
)

__all__ = [
    "MAX_CACHE_SECONDS", "MIN_PARSE_BYTES", "Kind", "RobotsPolicy", "Verdict", "product_token",
    "verdict_for_error", "verdict_for_response",
]
