"""The benchmarks' baseline: a plain Scrapy project, nothing of webcrawl, crawling one prefix whole."""

from __future__ import annotations

import re
from pathlib import Path

from bench._realsites_corpus import reachable_files
from bench._scheduler_process import VANILLA_PROJECT, Child, project_env, scrapy_command, webcrawl_components
from webcrawl.demo.serve import start_server_process


def test_the_project_imports_nothing_of_webcrawl() -> None:
    sources = {p: p.read_text() for p in VANILLA_PROJECT.rglob("*.py")}
    assert len(sources) >= 4
    for path, text in sources.items():
        assert not re.search(r"^\s*(from|import)\s+webcrawl\b", text, re.M), path
        assert "'webcrawl." not in text and '"webcrawl.' not in text, path


def test_the_docs_spider_crawls_its_prefix_whole_and_nothing_else(tmp_path: Path) -> None:
    site = tmp_path / "site"
    pages = {
        "index.html": '<a href="docs/">docs</a>',
        "docs/index.html": '<h1>Docs</h1><a href="a.html">a</a> <a href="/other.html">out</a>',
        "docs/a.html": '<h1>A</h1><a href="sub/b.html#x">b</a> <a href="../index.html">root</a>',
        "docs/sub/b.html": '<h1>B</h1><h2>One</h2><a href="/docs/a.html">a</a><a href="c.png">c</a>',
        "other.html": "<h1>Other</h1>",
    }
    for name, text in pages.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(f"<html><body>{text}</body></html>")
    with start_server_process("static", 1, tmp_path / "server.log", root=str(site)) as server:
        seed = server.base_url(0) + "/docs/index.html"
        crawl = Child(scrapy_command("docs", {}, {"seeds": seed, "prefix": "/docs/"}),
                      project_env("vanilla"), tmp_path, "crawl.log").wait(120)
        fetched = {e.path.lstrip("/") for e in server.read_log() if e.path != "/robots.txt"}
    assert crawl.returncode == 0, crawl.log[-2000:]
    assert fetched == set(reachable_files(site, "/docs/index.html", "/docs/"))
    assert fetched == {"docs/index.html", "docs/a.html", "docs/sub/b.html"}
    assert crawl.stats["item_scraped_count"] == 3 and crawl.stats["robotstxt/request_count"] == 1
    assert crawl.stats["scheduler/enqueued/memory"] >= 3
    assert webcrawl_components(crawl.log) == [] and "Enabled downloader middlewares" in crawl.log


def test_the_fetch_spider_fetches_each_listed_url_once_and_nothing_else(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    for name in ("index.html", "a.html", "b.html", "c.html"):
        (site / name).write_text(f'<html><body><a href="/{name}x">more</a></body></html>')
    with start_server_process("static", 1, tmp_path / "server.log", root=str(site)) as server:
        base = server.base_url(0)
        urls = tmp_path / "urls.txt"
        urls.write_text(f"{base}/a.html\n\n{base}/b.html\n{base}/c.html\n{base}/a.html\n")
        crawl = Child(scrapy_command("fetch", {"ROBOTSTXT_OBEY": False}, {"urls": str(urls)}),
                      project_env("vanilla"), tmp_path, "fetch.log").wait(120)
        fetched = sorted(e.path for e in server.read_log())
    assert crawl.returncode == 0, crawl.log[-2000:]
    assert fetched == ["/a.html", "/a.html", "/b.html", "/c.html"], "each line once, no link"
    assert "item_scraped_count" not in crawl.stats
    assert webcrawl_components(crawl.log) == []
