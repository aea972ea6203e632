"""The seen-URL filter: a bloom filter kept in a Redis bitmap, one slice per shard, shared by every
process of a crawl; it counts what it holds and grows past its capacity.

Bit positions come from pybloom-live's hash functions, laid out like its ``BloomFilter``: ``k``
slices of ``bits_per_slice`` bits, slice ``i`` starting at ``i * bits_per_slice``. The sizing is
pybloom-live's too, so for capacity ``n`` and false-positive rate ``p``::

    k = ceil(log2(1 / p))
    bits_per_slice = ceil(n * |ln p| / (k * ln(2)^2))
    bitmap bytes = ceil(k * bits_per_slice / 8)        (about 1.2 bytes per URL at p = 1%)

Counting and growth. Each shard's ``seen:meta`` hash holds the slice's ``capacity`` and
``error_rate`` (recorded by the crawl's first user), ``count`` (URLs it took in as new: every
test-and-set that found a URL new adds one, the scheduler's push and :class:`SeenFilter` alike),
and, once it has grown, ``generations`` and ``stride``. When the newest generation has taken
``capacity`` URLs, the slice grows a new *generation*: a bitmap of the same size, ``stride`` bits
after the previous one in the same Redis string (``stride``: the first generation's size, fixed
at the first growth). A URL is seen when all its bits are set in any generation; a new one is
marked in the newest only. Each full generation adds about ``p`` to the false-positive rate, so
after growing to ``g`` generations a new URL is taken for a seen one with probability about
``1 - (1 - p)^g`` (``g * p``), where a single full bitmap would reach 16% at twice its capacity.
Growth stops when the string would pass Redis's 512 MB (:attr:`BloomParams.max_generations`).

The test-and-set runs inside the scheduler's push script (``lua2/push.lua``, one atomic step for
a batch of URLs, the same rules); :class:`SeenFilter` offers it on its own for the dupefilter,
and a read-only test for checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybloom_live.pybloom import make_hashfuncs
from redis.exceptions import NoScriptError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import redis

__all__ = ["MAX_BITS", "BloomParams", "SeenFilter", "SeenState", "seen_state"]

# Redis strings (and so bitmaps) stop at 512 MB.
MAX_BITS = 512 * 1024 * 1024 * 8

# KEYS: bitmap, meta. ARGV: the k bit offsets of one URL. Reads the generations (shared head).
_HEAD = """
local meta = redis.call('HMGET', KEYS[2], 'count', 'capacity', 'error_rate', 'generations', 'stride')
local count, capacity, rate = tonumber(meta[1] or 0), tonumber(meta[2] or 0), tonumber(meta[3] or 0)
local gens, stride = tonumber(meta[4] or 1), tonumber(meta[5] or 0)
local function held(base)
  for j = 1, #ARGV do
    if redis.call('GETBIT', KEYS[1], base + ARGV[j]) == 0 then return false end
  end
  return true
end
local seen = 0
for g = 0, gens - 1 do
  if held(g * stride) then seen = 1 break end
end
"""
# Read-only: {seen, count, generations}.
_CONTAINS = _HEAD + "return {seen, count, gens}\n"
# Test-and-set: a new URL is marked in the newest generation and counted; the newest one full,
# a next one is allocated after it. Returns {seen, count, generations}.
_TEST_AND_SET = _HEAD + f"""
if seen == 1 then return {{1, count, gens}} end
for j = 1, #ARGV do redis.call('SETBIT', KEYS[1], (gens - 1) * stride + ARGV[j], 1) end
count = redis.call('HINCRBY', KEYS[2], 'count', 1)
if capacity > 0 and count >= gens * capacity then
  if stride == 0 then
    local k = #ARGV
    local bits = k * math.ceil(capacity * math.abs(math.log(rate)) / (k * math.log(2) ^ 2))
    stride = 8 * math.max(redis.call('STRLEN', KEYS[1]), math.ceil(bits / 8))
  end
  if (gens + 1) * stride <= {MAX_BITS} then
    gens = gens + 1
    redis.call('SETBIT', KEYS[1], gens * stride - 1, 0)
    redis.call('HSET', KEYS[2], 'generations', gens, 'stride', stride)
  end
end
return {{0, count, gens}}
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

    @property
    def max_generations(self) -> int:
        """Generations a slice can grow to within one Redis string."""
        return MAX_BITS // (8 * self.num_bytes)

    def false_positive_rate(self, generations: int) -> float:
        """The chance a new URL is taken for a seen one once ``generations`` are full."""
        return 1.0 - (1.0 - self.error_rate) ** generations

    def generations_at(self, count: int) -> int:
        """The generations a slice has grown to once it took ``count`` URLs (it grows when the
        newest is full, up to :attr:`max_generations`)."""
        return min(count // self.capacity + 1, self.max_generations)

    def false_positive_rate_at(self, count: int) -> float:
        """The chance a new URL is taken for a seen one now that the slice took ``count`` URLs:
        each full generation answers yes with its fill's chance, the newest with its own."""
        generations = self.generations_at(count)
        newest = count - (generations - 1) * self.capacity

        def one(held: int) -> float:  # a URL's k bits all set, one bit per slice of b bits
            return float((1.0 - math.exp(-held / self.bits_per_slice)) ** self.num_slices)

        return 1.0 - (1.0 - one(self.capacity)) ** (generations - 1) * (1.0 - one(newest))

    def offsets_function(self) -> Callable[[str], list[int]]:
        """A function mapping a key to its ``k`` bit offsets in the bitmap."""
        hashes, _ = make_hashfuncs(self.num_slices, self.bits_per_slice)
        starts = [i * self.bits_per_slice for i in range(self.num_slices)]

        def offsets(key: str) -> list[int]:
            return [s + h for s, h in zip(starts, hashes(key))]

        return offsets


@dataclass(frozen=True)
class SeenState:
    """What one slice holds: URLs taken in, its capacity (0: not recorded) and generations."""

    count: int
    capacity: int
    generations: int

    @property
    def over_capacity(self) -> int:
        """URLs past the first generation's capacity (0 while within it)."""
        return max(self.count - self.capacity, 0) if self.capacity else 0


def seen_state(client: Any, meta_keys: Iterable[str]) -> list[SeenState]:
    """The :class:`SeenState` of each slice, from its ``seen:meta`` key (one round trip)."""
    pipe = client.pipeline(transaction=False)
    for key in meta_keys:
        pipe.hmget(key, "count", "capacity", "generations")
    return [SeenState(int(c or 0), int(cap or 0), int(g or 1)) for c, cap, g in pipe.execute()]


class SeenFilter:
    """Test-and-set of keys (canonical URLs) in the bitmap at ``key``, counted and grown in
    ``meta_key`` (default: ``key + ":meta"``, which is where a shard keeps it)."""

    def __init__(self, client: redis.Redis, key: str, params: BloomParams,
                 meta_key: str | None = None) -> None:
        self.client = client
        self.key = key
        self.meta_key = meta_key or key + ":meta"
        self.params = params
        self.offsets = params.offsets_function()
        self._script = client.register_script(_TEST_AND_SET)
        self._contains = client.register_script(_CONTAINS)
        for script in (self._script, self._contains):
            client.script_load(script.script)
        #: the slice's URL count and generations as of the last answer
        self.count = 0
        self.generations = 1

    def _keys(self) -> list[str]:
        return [self.key, self.meta_key]

    def _note(self, reply: list[Any]) -> bool:
        self.count, self.generations = int(reply[1]), int(reply[2])
        return bool(reply[0])

    def test_and_set(self, item: str) -> bool:
        """Mark ``item`` seen; return whether it (probably) was already."""
        return self._note(self._script(keys=self._keys(), args=self.offsets(item)))

    def test_and_set_many(self, items: Iterable[str]) -> Iterator[bool]:
        """The same for many items, in one pipelined round trip."""
        return (self._note(reply) for reply in self._pipelined(self._script, items))

    def contains_many(self, items: Iterable[str]) -> list[bool]:
        """Whether each item would be taken for a seen one, marking nothing."""
        return [bool(reply[0]) for reply in self._pipelined(self._contains, items)]

    def _pipelined(self, script: Any, items: Iterable[str]) -> list[Any]:
        # Bare EVALSHA: a cluster pipeline refuses Script objects, and they would cost a SCRIPT
        # EXISTS round trip first. A server that lost its scripts (restart) gets them again.
        keys = self._keys()
        calls = [self.offsets(item) for item in items]

        def send() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for offsets in calls:
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *offsets)
            return list(pipe.execute())

        try:
            return send()
        except NoScriptError:
            self.client.script_load(script.script)
            return send()
