"""The seen-URL filter: a bloom filter kept in a Redis bitmap, shared by every process of a crawl.

Bit positions come from pybloom-live's hash functions, laid out like its ``BloomFilter``: ``k``
slices of ``bits_per_slice`` bits, slice ``i`` starting at ``i * bits_per_slice``. The sizing is
pybloom-live's too, so for capacity ``n`` and false-positive rate ``p``::

    k = ceil(log2(1 / p))
    bits_per_slice = ceil(n * |ln p| / (k * ln(2)^2))
    bitmap bytes = ceil(k * bits_per_slice / 8)        (about 1.2 bytes per URL at p = 1%)

The test-and-set itself runs inside the scheduler's push script (one atomic step for a batch of
URLs); :meth:`SeenFilter.test_and_set` offers the same operation on its own for the dupefilter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pybloom_live.pybloom import make_hashfuncs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import redis

# Redis strings (and so bitmaps) stop at 512 MB.
MAX_BITS = 512 * 1024 * 1024 * 8

_TEST_AND_SET = """
local all_set = true
for j = 1, #ARGV do
  if redis.call('GETBIT', KEYS[1], ARGV[j]) == 0 then all_set = false break end
end
if all_set then return 1 end
for j = 1, #ARGV do redis.call('SETBIT', KEYS[1], ARGV[j], 1) end
return 0
"""


@dataclass(frozen=True)
class BloomParams:
    """Size of a bloom filter for ``capacity`` items at ``error_rate`` false positives."""

    capacity: int
    error_rate: float

    def __post_init__(self) -> None:
        if not 0 < self.error_rate < 1:
            raise ValueError(f"bloom filter error rate {self.error_rate!r} must be between 0 and 1")
        if self.capacity <= 0:
            raise ValueError(f"bloom filter capacity {self.capacity!r} must be positive")
        if self.num_bits > MAX_BITS:
            raise ValueError(
                f"a bloom filter for {self.capacity} URLs at {self.error_rate} needs "
                f"{self.num_bits} bits, more than a Redis bitmap holds ({MAX_BITS})"
            )

    @property
    def num_slices(self) -> int:
        return int(math.ceil(math.log(1.0 / self.error_rate, 2)))

    @property
    def bits_per_slice(self) -> int:
        return int(
            math.ceil(
                self.capacity * abs(math.log(self.error_rate))
                / (self.num_slices * math.log(2) ** 2)
            )
        )

    @property
    def num_bits(self) -> int:
        return self.num_slices * self.bits_per_slice

    @property
    def num_bytes(self) -> int:
        return (self.num_bits + 7) // 8

    def offsets_function(self) -> Callable[[str], list[int]]:
        """A function mapping a key to its ``k`` bit offsets in the bitmap."""
        hashes, _ = make_hashfuncs(self.num_slices, self.bits_per_slice)
        starts = [i * self.bits_per_slice for i in range(self.num_slices)]

        def offsets(key: str) -> list[int]:
            return [s + h for s, h in zip(starts, hashes(key))]

        return offsets


class SeenFilter:
    """Test-and-set of keys (canonical URLs) in the bitmap at ``key``."""

    def __init__(self, client: redis.Redis, key: str, params: BloomParams) -> None:
        self.client = client
        self.key = key
        self.params = params
        self.offsets = params.offsets_function()
        self._script = client.register_script(_TEST_AND_SET)

    def test_and_set(self, item: str) -> bool:
        """Mark ``item`` seen; return whether it (probably) was already."""
        return bool(self._script(keys=[self.key], args=self.offsets(item)))

    def test_and_set_many(self, items: Iterable[str]) -> Iterator[bool]:
        """The same for many items, in one pipelined round trip."""
        pipe = self.client.pipeline(transaction=False)
        for item in items:
            self._script(keys=[self.key], args=self.offsets(item), client=pipe)
        return (bool(v) for v in pipe.execute())
