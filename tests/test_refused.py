"""A URL the crawl refused (the SSRF guard, robots.txt) is not lost to the seen filter: it is noted
in the crawl state and queued again when met again, so a later run fetches it once the reason is
gone. The push script on a real redis-server, then real crawls: refused by the SSRF guard, then
run with the network allowed; refused because robots.txt was unreachable, run again while that
answer is cached (refused again, saying until when), then after it expired."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import redis

from tests._cli import scrapy
from tests.crawls import pages, wait_for
from webcrawl.demo.serve import start_server_process
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import EXCLUDED, FILTERED, PUSHED, CrawlQueue, Entry
from webcrawl.state.refused import RefusedStore
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import BloomParams

AGAIN = 4  # push.lua: pushed again, it had been refused
CRAWL = "refusals"


def test_a_noted_url_is_let_in_once(redis_client: redis.Redis) -> None:
    layout = CrawlLayout("noted", 2)
    bloom = BloomParams(10_000, 0.01)
    offsets = bloom.offsets_function()
    queue = CrawlQueue(redis_client, ScriptSet(redis_client), layout, cap=0, default_delay=1.0,
                       lease_seconds=60.0)
    queue.check_seen_filter(bloom)
    store = RefusedStore(redis_client, ScriptSet(redis_client), layout, offsets, limit=1)
    url, other = "http://a.example/x", "http://a.example/y"

    def push(address: str) -> int:
        entry = Entry("a.example", 0, '{"url": "%s"}' % address, offsets(address))
        statuses, _, _ = queue.push_reply(queue.push(layout.shard("a.example"), [entry],
                                                     bloom.num_slices))
        return statuses[0]

    assert [push(url), push(url), push(other)] == [PUSHED, FILTERED, PUSHED]
    store.note(other, "a.example", "robots:disallowed", 1.0)
    store.note(url, "a.example", "ssrf:loopback", 2.0)  # the shard holds 1 note: the oldest goes
    assert store.counts() == [0, 1] or store.counts() == [1, 0]
    [noted] = list(store.entries())
    assert (noted.reason, noted.url) == ("ssrf:loopback", url)
    # Met again, it is queued again, once; the other (its note aged out) stays seen.
    assert [push(url), push(url), push(other)] == [AGAIN, FILTERED, FILTERED]
    assert sum(store.counts()) == 0
    queued, _, _ = queue.counts()
    assert queued == 3
    # An excluded host's URL is refused before the seen filter: never marked seen.
    redis_client.sadd(layout.shard("b.example").excluded, "b.example")
    entry = Entry("b.example", 0, '{"url": "http://b.example/"}', offsets("http://b.example/"))
    statuses, _, _ = queue.push_reply(queue.push(layout.shard("b.example"), [entry], bloom.num_slices))
    assert statuses == [EXCLUDED]
    redis_client.srem(layout.shard("b.example").excluded, "b.example")
    statuses, _, _ = queue.push_reply(queue.push(layout.shard("b.example"), [entry], bloom.num_slices))
    assert statuses == [PUSHED]


def closing_warning(log: str) -> str:
    [line] = [line for line in log.splitlines() if "[webcrawl.extensions.closing] WARNING" in line]
    return line


def follow(seed: str, redis_url: str, cwd: Path, *settings: str) -> str:
    args = ["crawl", "follow", "-a", f"seeds={seed}", "-s", f"WEBCRAWL_REDIS_URL={redis_url}",
            "-s", f"WEBCRAWL_CRAWL_NAME={CRAWL}", "-s", f"WEBCRAWL_DATA_DIR={cwd / 'data'}"]
    for setting in settings:
        args += ["-s", setting]
    done = scrapy(args, cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def refused_to_retry(redis_url: str, cwd: Path) -> int:
    shown = scrapy(["crawlstate", CRAWL, "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], cwd)
    assert shown.returncode == 0, shown.stderr
    match = re.search(r"^  refused \(to retry\):\s+(\d+)$", shown.stdout, re.M)
    assert match, shown.stdout
    return int(match.group(1))


def test_refused_by_the_ssrf_guard_then_fetched_once_allowed(redis_url: str, tmp_path: Path
                                                              ) -> None:
    with start_server_process("generated", 1, tmp_path / "server.log", pages=5, min_kb=1,
                              max_kb=2, links=10) as site:
        seed = site.base_url() + "/"
        log = follow(seed, redis_url, tmp_path)
        assert pages(site.read_log()) == []
        warning = closing_warning(log)
        assert "SSRF guard refused 1 (loopback 1; allow the network with " in warning
        assert "1 refused URL noted: queued again when the crawl next meets it" in warning
        assert refused_to_retry(redis_url, tmp_path) == 1

        log = follow(seed, redis_url, tmp_path, "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8")
        fetched = {e.path for e in pages(site.read_log())}
        assert "/" in fetched and len(fetched) == len(site.site.reachable()), fetched
        assert "[webcrawl.extensions.closing] WARNING" not in log
        assert refused_to_retry(redis_url, tmp_path) == 0


def free_port(host: str = "127.0.0.2") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_refused_while_robots_txt_was_unreachable_then_fetched_once_it_expired(
        redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    port = free_port()
    seed = f"http://127.0.0.2:{port}/"
    robots_key = CrawlLayout(CRAWL).shard("127.0.0.2").robots(f"http://127.0.0.2:{port}")
    allow = ["WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8",
             "WEBCRAWL_ROBOTS_ERROR_CACHE_SECONDS=12"]
    # The site is down: robots.txt is unreachable, which means "disallow all" for 12 s.
    warning = closing_warning(follow(seed, redis_url, tmp_path, *allow))
    until = time.strftime("%H:%M", time.localtime(float(redis_client.hget(robots_key, "expires"))))
    assert f"robots.txt unreachable for 1 host, so 1 request refused (cached until {until}" in warning
    assert "1 refused URL noted" in warning
    with start_server_process("generated", 1, tmp_path / "server.log", port=port, pages=5,
                              min_kb=1, max_kb=2, links=10) as site:
        # Up again, but the answer is still cached: refused again, and the warning says till when.
        warning = closing_warning(follow(seed, redis_url, tmp_path, *allow))
        assert redis_client.exists(robots_key), "the cached answer expired before the second run"
        assert pages(site.read_log()) == []
        assert "robots.txt unreachable (an earlier answer), so 1 request refused (cached until " \
               f"{until}; retried then)" in warning
        assert refused_to_retry(redis_url, tmp_path) == 1
        # Once the answer expired, robots.txt is read again and the seed is fetched.
        wait_for(lambda: not redis_client.exists(robots_key), 30, "the cached answer to expire")
        log = follow(seed, redis_url, tmp_path, *allow)
        fetched = {e.path for e in site.read_log()}
        assert {"/robots.txt", "/"} <= fetched and len(fetched) == len(site.site.reachable()) + 1
        assert "[webcrawl.extensions.closing] WARNING" not in log
