"""A write batch reaches Redis lands first, pushes after: a pipeline is not atomic, and another
process's pop between a push and the land that moves the pushed URLs' host's turn (a fetch just
finished) could take one of them in that fetch's turn. Watched on a real redis-server with MONITOR.
"""

from __future__ import annotations

import hashlib

import redis
from w3lib.url import canonicalize_url

from tests.runtimes import runtime_for
from webcrawl.state.hosts import finished_op
from webcrawl.state.queue import Entry


def test_a_batch_lands_a_finished_fetch_before_it_pushes_what_the_page_linked(
        redis_url: str) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_CRAWL_NAME": "batch-order"})
    watcher = redis.Redis.from_url(redis_url)
    try:
        sha = {name: hashlib.sha1(runtime.scripts.source(name).encode()).hexdigest()
               for name in ("land", "push")}
        host, url = "a.example", "http://a.example/next"
        # What a crawl queues in one turn: the page's fetch finished, then its links.
        runtime.batch.land(host, finished_op(runtime.clock.time()))
        offsets = runtime.bloom.offsets_function()(canonicalize_url(url))
        pushed: list[int] = []
        runtime.batch.push(Entry(host, 0, '{"url": "%s"}' % url, offsets), pushed.append)
        with watcher.monitor() as monitor:
            assert runtime.batch.flush()
            seen: list[str] = []
            while len(seen) < 2:
                words = monitor.next_command()["command"].split()
                if words[0].upper() == "EVALSHA":
                    seen.append(next(name for name, s in sha.items() if s == words[1]))
        assert seen == ["land", "push"] and len(pushed) == 1
    finally:
        watcher.close()
        runtime.close()
