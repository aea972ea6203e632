"""The seen-URL filter: a scalable bloom filter kept in a Redis bitmap, one slice per shard, shared
by every process of a crawl. It starts small and grows with what it takes in.

**Generations.** A slice is a chain of bloom filters, *generations*, laid end to end in one Redis
string. Generation ``g`` holds ``capacity * growth^g`` URLs (``growth`` = :data:`GROWTH`, 2) and
is sized for a false-positive rate ``p_g = p * (1 - t) * t^g`` (``t`` = :data:`TIGHTENING`, 0.9;
``p`` = ``WEBCRAWL_BLOOM_ERROR_RATE``), with ``k_g`` slices of ``m_g`` bits::

    k_g = ceil(log2(1 / p_g))
    m_g = max(ceil(capacity * growth^g * |ln p_g| / (k_g * ln(2)^2)), MIN_SLICE_BITS)

A URL is seen when all its bits are set in any generation, and a new one is marked in the newest;
when that one has taken its capacity, the next one is allocated after it. A new URL is taken for
a seen one with a chance of at most ``1 - prod(1 - p_g) < sum(p_g) = p``, however far the slice
grows (:meth:`BloomParams.false_positive_rate_at` tells it at a given fill). An empty slice costs
its first generation (:attr:`BloomParams.num_bytes`: about 3.6 KB for 2,000 URLs at 1 %); a slice
that took ``n`` URLs costs about 2 to 3.5 bytes per URL, the newest generation's unused part
included (a filter sized up front for ``n`` at 1 % would take 1.2). Growth stops when the string
would pass Redis's 512 MB (:attr:`BloomParams.max_generations`: 16 generations, about 130
million URLs a shard with the defaults); past that the newest generation fills up and false
positives rise.

**Bit positions.** A URL's key is three 40-bit words from BLAKE2b of its canonical form
(:meth:`BloomParams.offsets_function`); in slice ``i`` of generation ``g`` its bit is
``i * m_g + (h1 + i * h2 + i^2 * h3) % m_g`` (triple hashing: with double hashing, two URLs
share all their bits with a chance of 1/m^2, which doubled the false positives of small
generations; slices of at least :data:`MIN_SLICE_BITS` for the same reason). The key is also
what the push script stores with a queued request and what notes of refused URLs are filed under
(:mod:`webcrawl.state.refused`).

**One rule, in Lua.** Test-and-set, growth and sizing are written once, in ``lua2/seen.lua``: the
scheduler's push script (``lua2/push.lua``, one atomic step for a batch) and :class:`SeenFilter`
(the dupefilter, checks) both run it. Each generation's ``k:m`` is recorded in the shard's
``seen:meta`` when it is made (``sizes``), with ``capacity``, ``error_rate``, ``growth``,
``tightening``, ``generations`` and ``count`` (URLs taken in as new); the sizes recorded when a
crawl's filter is first opened (:func:`open_filters`) are the crawl's for good, whatever the
settings of later processes. The Python sizing here is the same formula, for the figures (false
positives, generations at a fill).

**Filters of the layout before** (``seen:meta`` with ``capacity`` and no ``growth``): equal
generations of ``capacity`` URLs at ``error_rate`` each, ``stride`` bits apart, allocated at once,
keys being pybloom-live's ``k`` bit offsets. They are read and grown as they were
(:attr:`BloomParams.legacy`), so a crawl made by the previous version keeps its filter.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any

from pybloom_live.pybloom import make_hashfuncs
from redis.exceptions import NoScriptError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    import redis

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_ERROR_RATE", "GROWTH", "LUA", "MAX_BITS", "MIN_SLICE_BITS",
           "TIGHTENING", "BloomParams", "Generation", "SeenFilter", "SeenState", "open_filters",
           "params_from_meta", "seen_state"]

# Redis strings (and so bitmaps) stop at 512 MB.
MAX_BITS = 512 * 1024 * 1024 * 8
#: The defaults of ``WEBCRAWL_BLOOM_CAPACITY`` (URLs of the first generation, for a whole crawl)
#: and ``WEBCRAWL_BLOOM_ERROR_RATE`` (webcrawl.config), and the sizes the scripts give a filter
#: that nothing recorded.
DEFAULT_CAPACITY = 2_000
DEFAULT_ERROR_RATE = 0.01
#: Each generation holds this many times the URLs of the one before.
GROWTH = 2
#: Each generation is sized for this times the false-positive rate of the one before.
TIGHTENING = 0.9
#: The fewest bits of a slice of a generation: in smaller ones the bits a URL's key gives its
#: slices are not independent enough (tiny first generations of a crawl split over many shards).
MIN_SLICE_BITS = 1024
#: The three words of a URL's key are this many bits each (every sum the Lua makes of them stays an
#: exact integer in a double).
WORD_BITS = 40
_WORD_MASK = (1 << WORD_BITS) - 1


def _lua_string(value: object) -> str:
    return "'" + str(value) + "'"


#: ``lua2/seen.lua`` with the sizes a filter that nothing recorded takes (the settings' defaults)
#: and the fewest bits of a slice.
LUA = ("local SEEN_DEFAULTS = {" + ", ".join(_lua_string(v) for v in (
    DEFAULT_CAPACITY, repr(DEFAULT_ERROR_RATE),
    GROWTH, repr(TIGHTENING))) + "}\n"
       + f"local SEEN_MIN_SLICE = {MIN_SLICE_BITS}\n"
       + resources.files("webcrawl.state").joinpath("lua2/seen.lua").read_text())

# KEYS: bitmap, meta. ARGV: a URL's key.
_TEST_AND_SET = LUA + """
local s = seen_open(KEYS[1], KEYS[2], true)
if not seen_fits(s, #ARGV) then return redis.error_reply('seen filter: key of the wrong size') end
local seen = seen_test(s, 1, #ARGV)
if not seen then seen_mark(s, 1, #ARGV) end
return {seen and 1 or 0, seen_close(s), s.gens}
"""
_CONTAINS = LUA + """
local s = seen_open(KEYS[1], KEYS[2], false)
return {seen_test(s, 1, #ARGV) and 1 or 0, s.count, s.gens}
"""
# ARGV: capacity, error rate, growth, tightening, recorded unless the filter has its sizes. Returns
# what is recorded: capacity, error_rate, growth (false: the layout before), tightening.
_OPEN = LUA + """
if redis.call('HEXISTS', KEYS[2], 'capacity') == 0 then seen_record(KEYS[2], ARGV) end
seen_open(KEYS[1], KEYS[2], true)
return redis.call('HMGET', KEYS[2], 'capacity', 'error_rate', 'growth', 'tightening')
"""


@dataclass(frozen=True)
class Generation:
    """One generation of a slice: the URLs it holds, ``k`` slices of ``m`` bits from bit
    ``start``, and the false-positive rate it is sized for when full."""

    capacity: int
    k: int
    m: int
    start: int
    error_rate: float

    @property
    def stop(self) -> int:
        """The bit after it (generations start on a byte)."""
        return self.start + 8 * -(-self.k * self.m // 8)

    def rate_at(self, held: int) -> float:
        """The chance a URL not in it has its ``k`` bits set once it holds ``held`` URLs."""
        if held <= 0:
            return 0.0
        return float((1.0 - math.exp(-held / self.m)) ** self.k)


def _words(key: str) -> list[int]:
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=15).digest()
    value = int.from_bytes(digest, "big")
    return [value >> 2 * WORD_BITS, value >> WORD_BITS & _WORD_MASK, value & _WORD_MASK]


@dataclass(frozen=True)
class BloomParams:
    """The sizes of a seen-filter slice: its first generation holds ``capacity`` URLs, and all its
    generations together take a new URL for a seen one with a chance under ``error_rate``.

    ``legacy``: a filter of the layout before (equal generations of ``capacity`` URLs, each at
    ``error_rate``; pybloom-live's bit offsets as keys)."""

    capacity: int
    error_rate: float
    growth: int = GROWTH
    tightening: float = TIGHTENING
    legacy: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.error_rate < 1:
            raise ValueError(f"bloom filter error rate {self.error_rate!r} must be between 0 and 1")
        if self.capacity <= 0:
            raise ValueError(f"bloom filter capacity {self.capacity!r} must be positive")
        if not self.legacy and (self.growth < 2 or not 0 < self.tightening < 1):
            raise ValueError(f"bloom filter growth {self.growth!r} must be 2 or more and its "
                             f"tightening {self.tightening!r} between 0 and 1")
        if not self.legacy and self._chain[-1].k >= 64:
            raise ValueError(f"bloom filter error rate {self.error_rate!r} is too small: its "
                             "generations would need 64 or more bits per URL")
        if self.generation(0).stop > MAX_BITS:
            raise ValueError(
                f"a bloom filter for {self.capacity} URLs at {self.error_rate} needs "
                f"{self.generation(0).stop} bits, more than a Redis bitmap holds ({MAX_BITS})"
            )

    # -- sizes ----------------------------------------------------------------------------------

    def _size(self, g: int) -> tuple[int, int, float]:
        """``k``, ``m`` and the sized rate of generation ``g`` (seen.lua's ``seen_size``, the same
        operations in the same order)."""
        if self.legacy:
            k = int(math.ceil(math.log(1.0 / self.error_rate, 2)))
            m = int(math.ceil(self.capacity * abs(math.log(self.error_rate))
                              / (k * math.log(2) ** 2)))
            return k, m, self.error_rate
        p = self.error_rate * (1 - self.tightening) * self.tightening ** g
        k = int(math.ceil(math.log(1 / p) / math.log(2)))
        m = int(math.ceil(self.capacity * self.growth ** g * abs(math.log(p))
                          / (k * math.log(2) ** 2)))
        return k, max(m, MIN_SLICE_BITS), p

    def generation(self, g: int) -> Generation:
        """Generation ``g`` (0: the first; at most :attr:`max_generations` - 1)."""
        if self.legacy:
            k, m, p = self._size(0)
            return Generation(self.capacity, k, m, g * 8 * self.num_bytes, p)
        return self._chain[g]

    @cached_property
    def _chain(self) -> tuple[Generation, ...]:
        """Every generation a scalable slice can grow to within one Redis string."""
        out: list[Generation] = []
        start = 0
        while True:
            g = len(out)
            k, m, p = self._size(g)
            generation = Generation(self.capacity * self.growth ** g, k, m, start, p)
            if generation.stop > MAX_BITS and out:
                return tuple(out)
            out.append(generation)
            start = generation.stop

    @property
    def num_slices(self) -> int:
        """Slices of the first generation."""
        return self._size(0)[0]

    @property
    def bits_per_slice(self) -> int:
        """Bits of each slice of the first generation."""
        return self._size(0)[1]

    @property
    def num_bits(self) -> int:
        """Bits of the first generation."""
        k, m, _ = self._size(0)
        return k * m

    @property
    def num_bytes(self) -> int:
        """Bytes of the first generation: what an empty slice costs (a slice of the layout before
        was allocated at this size, and grew by as much each time)."""
        return (self.num_bits + 7) // 8

    @property
    def key_words(self) -> int:
        """Numbers in a URL's key: three words, or the ``k`` bit offsets of the layout before."""
        return self.num_slices if self.legacy else 3

    @property
    def max_generations(self) -> int:
        """Generations a slice can grow to within one Redis string."""
        if self.legacy:
            return MAX_BITS // (8 * self.num_bytes)
        return len(self._chain)

    # -- figures --------------------------------------------------------------------------------

    def false_positive_rate(self, generations: int) -> float:
        """The chance a new URL is taken for a seen one once ``generations`` are full."""
        if self.legacy:
            return 1.0 - (1.0 - self.error_rate) ** generations
        clear = 1.0
        for generation in self._chain[:generations]:
            clear *= 1.0 - generation.error_rate
        return 1.0 - clear

    def generations_at(self, count: int) -> int:
        """The generations a slice has grown to once it took ``count`` URLs (it grows when the
        newest is full, up to :attr:`max_generations`)."""
        if self.legacy:
            return min(count // self.capacity + 1, self.max_generations)
        full = 0
        for g, generation in enumerate(self._chain):
            full += generation.capacity
            if count < full:
                return g + 1
        return self.max_generations

    def false_positive_rate_at(self, count: int) -> float:
        """The chance a new URL is taken for a seen one now that the slice took ``count`` URLs:
        each full generation answers yes with its fill's chance, the newest with its own."""
        generations = self.generations_at(count)
        if self.legacy:  # every full generation alike
            full = self.generation(0)
            newest = count - (generations - 1) * self.capacity
            return 1.0 - ((1.0 - full.rate_at(self.capacity)) ** (generations - 1)
                          * (1.0 - full.rate_at(newest)))
        clear, left = 1.0, count
        for g in range(generations):
            generation = self._chain[g]
            held = left if g == generations - 1 else min(left, generation.capacity)
            clear *= 1.0 - generation.rate_at(held)
            left -= held
        return 1.0 - clear

    # -- keys -----------------------------------------------------------------------------------

    def offsets_function(self) -> Callable[[str], list[int]]:
        """A function mapping a key (a canonical URL) to its key in the filter: three words, or for
        a filter of the layout before, its ``k`` bit offsets in a generation."""
        if not self.legacy:
            return _words
        k, m, _ = self._size(0)
        hashes, _ = make_hashfuncs(k, m)
        starts = [i * m for i in range(k)]

        def offsets(key: str) -> list[int]:
            return [s + h for s, h in zip(starts, hashes(key))]

        return offsets


def params_from_meta(capacity: Any, error_rate: Any, growth: Any = None,
                     tightening: Any = None) -> BloomParams | None:
    """The :class:`BloomParams` a slice's ``seen:meta`` records (None: nothing recorded)."""
    if capacity is None or error_rate is None or not int(capacity) or not 0 < float(error_rate) < 1:
        return None
    if growth is None:
        return BloomParams(int(capacity), float(error_rate), legacy=True)
    return BloomParams(int(capacity), float(error_rate), int(growth),
                       float(tightening if tightening is not None else TIGHTENING))


@dataclass(frozen=True)
class SeenState:
    """What one slice holds: URLs taken in, its first generation's capacity (0: not recorded)
    and its generations."""

    count: int
    capacity: int
    generations: int


def seen_state(client: Any, meta_keys: Iterable[str]) -> list[SeenState]:
    """The :class:`SeenState` of each slice, from its ``seen:meta`` key (one round trip)."""
    pipe = client.pipeline(transaction=False)
    for key in meta_keys:
        pipe.hmget(key, "count", "capacity", "generations")
    return [SeenState(int(c or 0), int(cap or 0), int(g or 1)) for c, cap, g in pipe.execute()]


def _evalsha_all(client: Any, script: Any,
                 calls: Sequence[tuple[list[str], list[Any]]]) -> list[Any]:
    """``script`` once per ``(keys, args)``, pipelined: bare EVALSHA (a cluster pipeline refuses
    Script objects, and they would cost a SCRIPT EXISTS round trip first); a server that lost its
    scripts (a restart) gets them again."""
    def send() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return list(pipe.execute())

    try:
        return send()
    except NoScriptError:
        client.script_load(script.script)
        return send()


def open_filters(client: Any, slices: Iterable[tuple[str, str]],
                 params: BloomParams) -> list[BloomParams]:
    """Open the slices ``(bitmap, meta)``: one that nothing recorded yet is recorded with
    ``params`` and gets its first generation. Returns the sizes each slice records."""
    script = client.register_script(_OPEN)
    client.script_load(script.script)  # on a cluster: on every primary, no NOSCRIPT answered
    wanted = [params.capacity, repr(float(params.error_rate)), params.growth,
              repr(float(params.tightening))]
    replies = _evalsha_all(client, script, [([bitmap, meta], wanted) for bitmap, meta in slices])
    out = []
    for capacity, error_rate, growth, tightening in replies:
        recorded = params_from_meta(*(v.decode() if isinstance(v, bytes) else v
                                      for v in (capacity, error_rate, growth, tightening)))
        assert recorded is not None
        out.append(recorded)
    return out


class SeenFilter:
    """Test-and-set of keys (canonical URLs) in the bitmap at ``key``, counted and grown in
    ``meta_key`` (default: ``key + ":meta"``, which is where a shard keeps it). Opening it records
    ``params`` if nothing did; :attr:`params` are the sizes the slice records."""

    def __init__(self, client: redis.Redis, key: str, params: BloomParams,
                 meta_key: str | None = None) -> None:
        self.client = client
        self.key = key
        self.meta_key = meta_key or key + ":meta"
        (self.params,) = open_filters(client, [(self.key, self.meta_key)], params)
        self.offsets = self.params.offsets_function()
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
        keys = self._keys()
        return _evalsha_all(self.client, script, [(keys, self.offsets(item)) for item in items])
