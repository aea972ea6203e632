"""Fill a crawl's state the way a crawl does, for the state-memory benchmark.

Every write goes through the crawl state's own operations, in the batches a crawl sends: new URLs
are pushed (:class:`~webcrawl.state.queue.CrawlQueue` push through the
:class:`~webcrawl.state.batch.WriteBatch`, tested against the seen filter), popped under leases,
landed as fetches (a page observation with its validators, its stored body's pointer, the
host's finished fetch) and acknowledged, then given a revisit interval as the allocator does.
No key is written by hand.

URLs look like a broad crawl's: about a thousand hosts of assorted names, product, article,
category and tag pages, some with query strings (about 70 characters on average). Two thirds of
the pages answer with an ETag, about half with a Last-Modified date.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from webcrawl.state.hosts import finished_op
from webcrawl.change.events import encode_record
from webcrawl.state.pagestore import EventArgs, interval_op, observe_op
from webcrawl.state.batch import WriteBatch
from webcrawl.state.queue import CrawlQueue, Entry

WORDS = ("red", "blue", "garden", "summer", "classic", "wool", "steel", "linen", "coffee", "table",
         "lamp", "chair", "river", "mountain", "travel", "guide", "review", "news", "market",
         "kitchen", "winter", "organic", "vintage", "modern", "city", "local", "daily", "tech",
         "phone", "cable", "shoes", "jacket", "bag", "book", "music", "studio", "north", "green")
TLDS = (".com", ".com", ".com", ".org", ".net", ".co.uk", ".de", ".fr", ".io", ".info")


def hosts(n: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(n):
        sub = rng.choice(("www.", "www.", "shop.", "blog.", "", "news."))
        out.append(f"{sub}{rng.choice(WORDS)}{rng.choice(WORDS)}{i}{rng.choice(TLDS)}")
    return out


def _path(rng: random.Random, i: int) -> str:
    slug = "-".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5)))
    shape = rng.random()
    if shape < 0.4:
        return f"/products/{slug}-{i}"
    if shape < 0.65:
        return f"/{rng.randint(2015, 2025)}/{rng.randint(1, 12):02d}/{slug}.html"
    if shape < 0.85:
        return f"/category/{rng.choice(WORDS)}/{rng.choice(WORDS)}?page={rng.randint(1, 40)}&id={i}"
    return f"/tag/{slug}/{i}"


def urls(n: int, host_names: list[str], seed: int = 7) -> Iterator[str]:
    """``n`` distinct URLs spread over ``host_names`` (page ``i`` on host ``i % len``)."""
    rng = random.Random(seed)
    for i in range(n):
        yield f"https://{host_names[i % len(host_names)]}{_path(rng, i)}"


def host_of(url: str) -> str:
    return url.split("/", 3)[2]


def payload(url: str) -> str:
    """A request as the scheduler queues it (webcrawl.requestcodec's JSON of a plain Request
    with the depth Scrapy notes)."""
    return json.dumps({"url": url, "callback": None, "errback": None, "method": "GET",
                       "headers": [], "body": "", "cookies": {}, "meta": {"depth": 2},
                       "encoding": "utf-8", "priority": 0, "dont_filter": False, "flags": [],
                       "cb_kwargs": {}}, separators=(",", ":"))


def shop_record(rng: random.Random) -> dict[str, object]:
    """A product record as a shop's site file extracts it (about 170 bytes of JSON)."""
    return {"name": f"{rng.choice(('Alpine', 'Cedar', 'Ember'))} {rng.choice(('Kettle', 'Lamp'))} "
                    f"{rng.randint(1, 999)}",
            "price": {"amount": round(rng.uniform(3, 900), 2), "currency": "EUR"},
            "availability": rng.choice(("InStock", "OutOfStock", "LimitedAvailability")),
            "sku": f"SKU-{rng.getrandbits(40):010x}", "category": rng.choice(("Kitchen", "Garden")),
            "rating": round(rng.uniform(1, 5), 1)}


@dataclass
class Filler:
    """Drives a runtime-like set of state objects: ``queue``, ``batch`` (no schedule: flushed
    here every ``every`` operations), ``offsets`` (the seen filter's bit offsets of a URL)."""

    queue: CrawlQueue
    batch: WriteBatch
    offsets: Callable[[str], list[int]]
    every: int = 2000

    def push_all(self, all_urls: list[str]) -> int:
        pushed = []
        for n, url in enumerate(all_urls, 1):
            self.batch.push(Entry(host_of(url), 0, payload(url), self.offsets(url)),
                            pushed.append)
            if n % self.every == 0:
                self.batch.flush()
        self.batch.flush()
        return sum(1 for s in pushed if s == 1)

    def fetch_all(self, now: float, owner: str = "bench", per_pop: int = 2000) -> int:
        """Pop every queued request and land it as a fetched page; returns pages landed."""
        rng = random.Random(11)
        counter = done = 0
        while True:
            popped = self.queue.pop(0, owner, counter, per_pop, "n")
            if not popped.items:
                return done
            counter += len(popped.items)
            for item in popped.items:
                url = json.loads(item.item)["url"]
                etag = f'"{rng.getrandbits(48):x}-{rng.getrandbits(32):x}"' if rng.random() < 0.67 else None
                modified = "Tue, 14 Jan 2025 10:22:31 GMT" if rng.random() < 0.5 else None
                t = now + done * 1e-3
                pointer = f"crawl-1/w0/{done // 50_000}:{rng.getrandbits(30)}:{rng.randint(2_000, 60_000)}"
                self.batch.land(item.host, observe_op(
                    url, full=True, time=t, record_hash=f"{rng.getrandbits(64):016x}",
                    validators=(etag, modified), type_id=1 + done % 3,
                    billed=float(rng.randint(5_000, 120_000)),
                    event=EventArgs(site="bench", page_type="product", url=url, status=200,
                                    record=encode_record(shop_record(rng)), pointer=pointer,
                                    body8=rng.getrandbits(64).to_bytes(8, "little"))))
                self.batch.land(item.host, finished_op(t))
                self.batch.ack(item.shard, owner, item.lease)
                done += 1
            self.batch.flush()

    def schedule_all(self, all_urls: list[str]) -> None:
        """What the allocator writes for every page: its revisit interval (an hour to a month)."""
        rng = random.Random(13)
        for n, url in enumerate(all_urls, 1):
            self.batch.land(host_of(url), interval_op(url, rng.uniform(3600.0, 30 * 86_400.0)))
            if n % self.every == 0:
                self.batch.flush()
        self.batch.flush()
