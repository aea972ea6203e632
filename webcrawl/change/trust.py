"""Validator trust per host: a small state machine, earned and lost (revisit-model.md section 6).

A conditional request (If-None-Match / If-Modified-Since) is worth sending only to a host that
answers 304 when, and only when, the page's record has not changed. Every host starts
``learning``: it gets conditional requests and each 304 it answers is *verified* (the page is
fetched again without validators and its record compared with the stored one). Evidence:

- ``confirmed``: a verified 304 whose record had indeed not changed (agreement);
- ``lied``: a verified 304 whose record had changed: the host answers 304 regardless;
- ``ignored``: a 200 to a conditional request whose record had not changed: the host sends
  validators but does not honour them (a 200 with a changed record is no evidence either way);
- ``not_modified``: an unverified 304 (no evidence, but it shows the host does answer 304).

``learning`` becomes ``trusted`` after ``earn_after`` confirmations. ``trusted`` keeps sending
conditional requests and verifies only a share of its 304s. Either state becomes ``distrusted``
on ``lie_limit`` lies, or on ``ignore_limit`` ignored conditional requests in a row (any 304
ends the run). A ``distrusted`` host gets no conditional headers until ``retry_seconds`` have
passed; then it starts ``learning`` again from nothing: trust lost is earned again, never assumed.

Pure: no I/O, no clock (``now`` is passed in). :mod:`webcrawl.state.trust` keeps one per host in
Redis.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["EVENTS", "STATES", "Event", "State", "TrustPolicy", "ValidatorTrust"]

State = Literal["learning", "trusted", "distrusted"]
Event = Literal["confirmed", "lied", "ignored", "not_modified"]
STATES: tuple[State, ...] = ("learning", "trusted", "distrusted")
EVENTS: tuple[Event, ...] = ("confirmed", "lied", "ignored", "not_modified")


@dataclass(frozen=True)
class TrustPolicy:
    """The thresholds of the state machine (see the module docstring)."""

    earn_after: int = 3
    ignore_limit: int = 3
    lie_limit: int = 1
    retry_seconds: float = 7 * 86_400.0
    verify_share: float = 0.05

    def __post_init__(self) -> None:
        if self.earn_after < 0 or self.ignore_limit < 1 or self.lie_limit < 1:
            raise ValueError(f"{self!r}: need earn_after >= 0, ignore_limit >= 1, lie_limit >= 1")
        if not 0 <= self.verify_share <= 1 or not self.retry_seconds >= 0:
            raise ValueError(f"{self!r}: need 0 <= verify_share <= 1 and retry_seconds >= 0")


@dataclass
class ValidatorTrust:
    """One host's trust in its validators. ``reason`` says why it was last distrusted."""

    state: State = "learning"
    confirmed: int = 0
    ignored_run: int = 0
    lies: int = 0
    not_modified: int = 0
    since: float = 0.0
    reason: str = ""

    def sends_validators(self, now: float, policy: TrustPolicy) -> bool:
        """Whether a request to this host may carry conditional headers at ``now``."""
        return self.state != "distrusted" or now >= self.since + policy.retry_seconds

    def verify_share(self, policy: TrustPolicy) -> float:
        """The share of this host's 304s to verify: all of them until trust is earned."""
        return policy.verify_share if self.state == "trusted" else 1.0

    def observe(self, event: Event, now: float, policy: TrustPolicy) -> State | None:
        """Apply one piece of evidence; return the new state when it changed, else ``None``."""
        if event not in EVENTS:
            raise ValueError(f"unknown trust event {event!r}; expected one of {EVENTS}")
        before = self.state
        if self.state == "distrusted":
            if now < self.since + policy.retry_seconds:
                return None  # late evidence from requests sent before trust was lost
            self._restart(now)
        if event == "lied":
            self.lies += 1
            if self.lies >= policy.lie_limit:
                self._distrust(now, "answers 304 while the record changed")
        elif event == "ignored":
            self.ignored_run += 1
            if self.ignored_run >= policy.ignore_limit:
                self._distrust(now, "answers 200 to conditional requests for unchanged records")
        else:
            self.ignored_run = 0
            self.not_modified += 1
            if event == "confirmed":
                self.confirmed += 1
                if self.state == "learning" and self.confirmed >= policy.earn_after:
                    self.state, self.since = "trusted", now
        return self.state if self.state != before else None

    def _restart(self, now: float) -> None:
        self.state, self.confirmed, self.ignored_run, self.lies, self.since = "learning", 0, 0, 0, now

    def _distrust(self, now: float, reason: str) -> None:
        self.state, self.since, self.reason = "distrusted", now, reason
        self.confirmed, self.ignored_run, self.lies = 0, 0, 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidatorTrust:
        """The inverse of :meth:`to_dict`; unknown keys are ignored, a bad state restarts learning."""
        trust = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        if trust.state not in STATES:
            trust.state = "learning"
        return trust
