"""Change detection, pure: record hashes, validator trust per host, change events.

No Scrapy, no Redis, no clock: the pipelines and the conditional-request middleware wire it in
(see docs/change-detection.md).
"""

from __future__ import annotations

from webcrawl.change.record import RECORD_HASH_VERSION, canonical_json, normalise, record_hash
from webcrawl.change.trust import EVENTS, STATES, Event, State, TrustPolicy, ValidatorTrust

__all__ = [
    "EVENTS",
    "RECORD_HASH_VERSION",
    "STATES",
    "Event",
    "State",
    "TrustPolicy",
    "ValidatorTrust",
    "canonical_json",
    "normalise",
    "record_hash",
]
