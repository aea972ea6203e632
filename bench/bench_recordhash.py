"""Record-hash cost per page, and the page-record Redis work around it.

Pages: the demo shop's product pages (``ShopSite.respond``, no server), parsed once with
webcrawl's parser into their records (7 fields, one volatile). Measured per page, median over
rounds of ``time.process_time`` (hashing) or ``time.perf_counter`` (Redis, a round trip waits):

- parse: ``PageParser.parse`` of the page (for scale: the hash must be a small share of it);
- record hash: ``record_hash`` of the record (canonical JSON, NFC, BLAKE2b-128);
- raw-body hash: ``body_hash`` of the whole page (what body-hash mode costs instead);
- record update alone: one observation landed and flushed per page (``WriteBatch``: one land
  script call, one round trip) on a redis-server over a unix socket;
- record update, batched: the observations of 32 pages in one flush, as a crawl's reactor turn
  sends them (per page). Validators need no read: they come with the popped revisit.

``./run bench recordhash`` (or ``python -m bench recordhash``); ``BENCH_RECORDHASH_ROUNDS``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import redis

from bench._report import table, write_section
from webcrawl.change import record_hash
from webcrawl.demo.shop import ShopSite
from webcrawl.parse import PageParser, rules_for_site
from webcrawl.sites import load_site_file
from webcrawl.state.embedded import redis_server_binary
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import observe_op
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet
from webcrawl.store import body_hash

T = TypeVar("T")
PAGES = 200
BATCH = 32  # observations a reactor turn lands together
SITE_FILE = Path(__file__).resolve().parent.parent / "webcrawl" / "sites" / "demo.toml"


def corpus() -> tuple[list[tuple[str, bytes]], PageParser, tuple[str, ...], frozenset[str]]:
    site = load_site_file(SITE_FILE, {"WEBCRAWL_DEMO_PORT": "8000"})
    shop = ShopSite(seed=1)
    shop.bind(["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], 8000)
    pages = []
    for i in range(PAGES):
        url = shop.product_url(i)
        _, _, body = shop.respond(url.split("/")[2].split(":")[0], url.split(":8000", 1)[1], {})
        pages.append((url, body))
    product = next(p for p in site.page_types if p.name == "product")
    return pages, PageParser(rules_for_site(site)), tuple(f.name for f in product.fields), frozenset(product.volatile)


def per_item(items: Sequence[T], work: Callable[[T], object], clock: Callable[[], float]) -> float:
    start = clock()
    for item in items:
        work(item)
    return (clock() - start) / len(items)


def start_redis(folder: str) -> tuple[subprocess.Popen[bytes], redis.Redis]:
    sock = os.path.join(folder, "redis.sock")
    process = subprocess.Popen([redis_server_binary(), "--port", "0", "--unixsocket", sock, "--save", "",
                                "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(unix_socket_path=sock)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if os.path.exists(sock) and client.ping():
                return process, client
        except redis.RedisError:
            pass
        time.sleep(0.01)
    raise RuntimeError("redis-server did not start")


def main() -> None:
    rounds = int(os.environ.get("BENCH_RECORDHASH_ROUNDS", "7"))
    pages, parser, fields, volatile = corpus()
    results = [parser.parse(body, url, encoding="utf-8") for url, body in pages]
    records: list[dict[str, Any]] = [r.record or {} for r in results]
    urls = [r.url for r in results]
    figures: dict[str, list[float]] = {k: [] for k in ("parse", "record", "body", "observe", "batched")}
    with tempfile.TemporaryDirectory() as folder:
        process, client = start_redis(folder)
        try:
            layout = CrawlLayout("bench", 1)
            scripts = ScriptSet(client)
            queue = CrawlQueue(client, scripts, layout, cap=0, default_delay=0.0, lease_seconds=30)
            batch = WriteBatch(client, scripts, layout, queue, LandSettings(0.0), bloom_slices=7)
            now = [1.7e9]

            def land(url: str) -> None:
                now[0] += 60.0
                batch.land(url.split("/")[2], observe_op(
                    url, full=True, time=now[0], record_hash="ab" * 8, billed=1.0,
                    validators=('"p1-v1"', "Thu, 01 Jan 2026 00:00:00 GMT")))

            def observe(url: str) -> None:
                land(url)
                batch.flush()

            def batched(group: Sequence[str]) -> None:
                for url in group:
                    land(url)
                batch.flush()

            groups = [urls[i:i + BATCH] for i in range(0, len(urls), BATCH)]
            for _ in range(rounds):
                figures["parse"].append(per_item(pages, lambda p: parser.parse(p[1], p[0], encoding="utf-8"),
                                                 time.process_time))
                figures["record"].append(per_item(records, lambda r: record_hash(r, fields, volatile),
                                                  time.process_time))
                figures["body"].append(per_item(pages, lambda p: body_hash(p[1]), time.process_time))
                figures["observe"].append(per_item(urls, observe, time.perf_counter))
                figures["batched"].append(per_item(groups, batched, time.perf_counter) * len(groups)
                                          / len(urls))
        finally:
            client.close()
            process.kill()
            process.wait()
    med = {k: statistics.median(v) * 1e6 for k, v in figures.items()}
    size = statistics.median(len(b) for _, b in pages) / 1024
    rows = [
        ["parse the page (for scale)", med["parse"], "CPU"],
        ["record hash (7 fields, 1 volatile)", med["record"], "CPU"],
        ["raw-body hash, BLAKE2b (body-hash mode)", med["body"], "CPU"],
        ["record update, one land call per page", med["observe"], "wall, unix socket"],
        [f"record update, {BATCH} pages per land call (per page)", med["batched"], "wall, unix socket"],
    ]
    body = (
        f"{PAGES} demo-shop product pages (median {size:.0f} KiB), median of {rounds} rounds, one core.\n\n"
        + table(["per page", "microseconds", "clock"], rows)
        + f"\n\nThe record hash costs {100 * med['record'] / med['parse']:.1f}% of parsing the page; "
        f"a crawl lands a reactor turn's observations in one call per shard ({BATCH} here), "
        "and reads no validators (they come with the popped revisit)."
    )
    print(body)
    write_section("recordhash", "Record hash and page records", "./run bench recordhash", body)


if __name__ == "__main__":
    main()
