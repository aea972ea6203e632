"""Start requests reach the scheduler as they come (webcrawl.middlewares.startfeed), not one per
turn of the engine's loop: real Scrapy crawls, in a process of their own, of a real HTTP server on
127.0.0.1, with Scrapy's own scheduler (the middleware needs no Redis)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

CRAWL = r"""
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from webcrawl.middlewares import startfeed

config = json.loads(sys.argv[1])
if config["chunk"]:
    startfeed.CHUNK = config["chunk"]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<html><body>ok</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


server = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"
out = {"scheduled": [], "first": None, "responses": 0, "items": 0, "turns": 0}
# A loop turn counter: the first request scheduled after a turn began asks for a mark at the next
# turn, so "turns" counts the loop turns over which the start requests were scheduled.
turn = {"marked": False}


def mark():
    turn["marked"] = False


class Seeds(scrapy.Spider):
    name = "seeds"

    async def start(self):
        yield {"from": "start"}
        for i in range(config["requests"]):
            yield scrapy.Request(f"{base}/{i}", dont_filter=True)

    def parse(self, response):
        if out["first"] is None:
            out["first"] = len(out["scheduled"])
        out["responses"] += 1


def scheduled(request, spider):
    out["scheduled"].append(int(request.url.rsplit("/", 1)[1]))
    if not turn["marked"]:
        from twisted.internet import reactor
        turn["marked"] = True
        out["turns"] += 1
        reactor.callLater(0, mark)


def scraped(item, response, spider):
    out["items"] += 1


middlewares = {"webcrawl.middlewares.startfeed.StartFeedMiddleware": 10} if config["feed"] else {}
process = CrawlerProcess({"SPIDER_MIDDLEWARES": middlewares, "LOG_LEVEL": "WARNING",
                          "TELNETCONSOLE_ENABLED": False, "CONCURRENT_REQUESTS": 256,
                          "ROBOTSTXT_OBEY": False, "RETRY_ENABLED": False})
crawler = process.create_crawler(Seeds)
crawler.signals.connect(scheduled, signals.request_scheduled)
crawler.signals.connect(scraped, signals.item_scraped)
process.crawl(crawler)
process.start()
server.shutdown()
print("RESULT " + json.dumps(out))
"""


def crawl(feed: bool, requests: int, chunk: int = 0) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    done = subprocess.run([sys.executable, "-c", CRAWL, json.dumps(
        {"feed": feed, "requests": requests, "chunk": chunk})], env=env, capture_output=True,
        text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def test_every_start_request_is_scheduled_before_the_first_response() -> None:
    out = crawl(feed=True, requests=200)
    assert out["first"] == 200, "start requests waited for the engine's loop"
    assert out["turns"] == 1, f"scheduled over {out['turns']} turns of the event loop"
    assert out["scheduled"] == list(range(200)), "each once, in the spider's order"
    assert out["responses"] == 200 and out["items"] == 1


def test_without_it_the_engine_takes_them_one_turn_at_a_time() -> None:
    """The behaviour it replaces, so the test above can tell the two apart: a turn of the loop
    for each request (however quickly the first response comes back on a loaded machine)."""
    out = crawl(feed=False, requests=200)
    assert out["turns"] >= 200, f"scheduled over {out['turns']} turns of the event loop"
    assert out["scheduled"] == list(range(200)) and out["responses"] == 200


@pytest.mark.parametrize("chunk", [1, 7])
def test_every_chunk_th_request_goes_the_engines_way_and_none_is_lost(chunk: int) -> None:
    out = crawl(feed=True, requests=50, chunk=chunk)
    assert out["scheduled"] == list(range(50))
    assert out["responses"] == 50 and out["items"] == 1
