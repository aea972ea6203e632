"""The crawl's shared spend bucket (crawl-wide slot): the budget rate, shared by every process.

Tokens are in the site's cost unit and refill at the budget rate (a cycle's budget over its
length) up to a small cap, so spending is smooth; a one-run cycle gets its whole budget at once
and no refill. Processes take tokens in small grants before they pop work and give back what
they did not use, and every fetch's actual cost is reconciled against what was taken for it, so
the bucket's books are the crawl's spend. Tokens that overflow the cap are budget nobody could
use (nothing was due): the cycle's idle share. See ``lua2/bucket.lua``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.state.scripts import new_op_id

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout
    from webcrawl.state.scripts import ScriptSet

__all__ = ["BucketState", "SpendBucket"]


@dataclass(frozen=True)
class BucketState:
    tokens: float
    rate: float
    cap: float
    wasted: float
    granted: float
    cycle: str


class SpendBucket:
    def __init__(self, scripts: ScriptSet, layout: CrawlLayout) -> None:
        self.scripts = scripts
        self.layout = layout

    def _call(self, *args: Any) -> list[Any]:
        return self.scripts.call_keys("bucket", [self.layout.bucket, self.layout.op(new_op_id())],
                                      [*args, self.scripts.op_ttl])

    def configure(self, rate: float, cap: float, cycle_id: int, tokens: float | None = None) -> None:
        """Set the refill rate and cap for ``cycle_id``; ``tokens``: start over with that many
        (a new cycle's budget), else keep what is there."""
        self._call("configure", repr(float(rate)), repr(float(cap)), str(cycle_id),
                   "" if tokens is None else repr(float(tokens)))

    def take(self, want: float) -> tuple[float, float, float]:
        """``(granted, tokens left, rate)``: at most ``want`` and at most what is there."""
        granted, left, rate = self._call("take", repr(float(want)))
        return float(granted), float(left), float(rate)

    def give(self, amount: float) -> None:
        if amount:
            self._call("give", repr(float(amount)))

    def read(self) -> BucketState:
        _, tokens, rate, cap, wasted, granted, cycle = self._call("read")
        return BucketState(float(tokens), float(rate), float(cap), float(wasted), float(granted),
                           cycle.decode() if isinstance(cycle, bytes) else str(cycle))
