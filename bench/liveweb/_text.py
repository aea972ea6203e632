"""Deterministic ASCII text for the test web: product names, descriptions and padding.

Everything here is a pure function of its arguments (string-seeded ``random.Random``), so the
server and the evaluator render the same words. ASCII only: a page's length in characters is its
length in bytes, which lets the pages pad themselves to an exact size.
"""

from __future__ import annotations

import random
from functools import lru_cache

ADJECTIVES = (
    "sturdy", "compact", "classic", "modern", "rustic", "bright", "quiet", "smart", "light",
    "heavy", "portable", "elegant", "simple", "deluxe", "tiny", "grand", "soft", "rapid", "eco",
    "vintage", "nordic", "urban", "coastal", "alpine", "golden", "silver", "midnight", "sunny",
)
MATERIALS = (
    "oak", "walnut", "steel", "copper", "linen", "wool", "ceramic", "glass", "bamboo", "cotton",
    "leather", "marble", "brass", "cork", "felt", "stone", "aluminium", "hemp", "clay", "maple",
)
NOUNS = (
    "lamp", "kettle", "chair", "backpack", "blanket", "mug", "teapot", "stool", "planter", "clock",
    "shelf", "bowl", "vase", "jacket", "scarf", "notebook", "pen", "tray", "mirror", "rug",
    "cushion", "bottle", "basket", "candle", "speaker", "headphones", "grinder", "skillet",
)
CATEGORIES = (
    "kitchen", "living", "garden", "office", "outdoor", "travel", "bath", "lighting", "textiles",
    "storage", "decor", "tableware", "audio", "stationery", "kids", "pets", "tools", "crafts",
    "sports", "wellness", "bedroom", "hallway", "workshop", "picnic", "camping", "seasonal",
)
WORDS = (
    "the", "a", "with", "and", "for", "every", "day", "made", "from", "finish", "hand", "crafted",
    "durable", "design", "comfort", "quality", "easy", "care", "clean", "warm", "cool", "fits",
    "most", "homes", "gift", "idea", "built", "last", "years", "tested", "by", "our", "team",
    "size", "weight", "colour", "natural", "texture", "smooth", "edge", "base", "handle", "lid",
    "matte", "gloss", "recycled", "packaging", "ships", "within", "two", "days", "warranty",
    "included", "customers", "love", "this", "piece", "because", "it", "works", "well", "in",
    "small", "spaces", "large", "rooms", "alike", "pairs", "nicely", "other", "items", "range",
)


def rng_for(*parts: object) -> random.Random:
    """A generator seeded by the parts (string seeding is stable across runs and machines)."""
    return random.Random(":".join(str(p) for p in parts))


def product_name(rng: random.Random) -> str:
    return " ".join(w.capitalize() for w in (rng.choice(ADJECTIVES), rng.choice(MATERIALS),
                                             rng.choice(NOUNS)))


def slug(text: str) -> str:
    return "-".join(text.lower().split())


def sentence(rng: random.Random, words: int = 12) -> str:
    picked = [rng.choice(WORDS) for _ in range(words)]
    return " ".join(picked).capitalize() + "."


def description(seed: int, pid: int, revision: int) -> str:
    """The description text of a product at one revision (a record field)."""
    rng = rng_for(seed, "desc", pid, revision)
    return " ".join(sentence(rng, rng.randint(8, 16)) for _ in range(rng.randint(2, 4)))


@lru_cache(maxsize=8)
def filler(seed: int, length: int = 200_000) -> str:
    """A long run of sentences, sliced for page padding (generated once per seed)."""
    rng = rng_for(seed, "filler")
    parts: list[str] = []
    total = 0
    while total < length:
        s = sentence(rng, rng.randint(6, 20)) + " "
        parts.append(s)
        total += len(s)
    return "".join(parts)[:length]


def padding(seed: int, key: int, length: int) -> str:
    """``length`` characters of filler text starting at a place that depends on ``key``."""
    if length <= 0:
        return ""
    text = filler(seed)
    start = (key * 7919) % (len(text) - 1)
    out = text[start:start + length]
    while len(out) < length:  # wrap around for long pads
        out += text[:length - len(out)]
    return out
