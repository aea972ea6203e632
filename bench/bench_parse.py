"""Parse throughput per core: webcrawl's parsing layer against Scrapy's LinkExtractor and parsel.

Every contender parses the same pages (Debian's python3.11-doc HTML, served as if from
https://docs.python.org/3.11/; generated 40-150 KB pages when that package is missing) and
yields absolute links; webcrawl also canonicalises, filters and extracts a three-field record.
Contenders alternate in rotating order over several rounds; each figure is the median over the
rounds of pages / CPU second (``time.process_time``), one process, one core.

``./run bench parse`` (or ``python -m bench parse``); ``BENCH_PARSE_ROUNDS`` sets the rounds.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin

from bench._report import table, write_section

DOCS = Path("/usr/share/doc/python3.11/html")
ORIGIN = "https://docs.python.org/3.11/"
TRUNCATE = 256 * 1024
NO_LIMIT = 1 << 40
Page = tuple[str, bytes]


def load_corpus() -> tuple[str, list[Page]]:
    if DOCS.is_dir():
        files = sorted(DOCS.rglob("*.html"))
        pages = [(ORIGIN + str(f.relative_to(DOCS)), f.read_bytes()) for f in files]
        return "python3.11-doc HTML", pages
    return "generated pages (python3.11-doc missing)", generated_corpus()


def generated_corpus(count: int = 300, seed: int = 7) -> list[Page]:
    """Doc-like pages of 40-150 KB: navigation, prose, many relative and absolute links."""
    rng = random.Random(seed)
    words = "crawler page link index value change cost fetch domain queue record parse".split()
    pages = []
    for i in range(count):
        target = rng.randint(40_000, 150_000)
        parts = [f"<html><head><title>Page {i}</title></head><body><h1>Page {i}</h1><nav>"]
        parts += [f'<a href="../section{j}/index.html">Section {j}</a>' for j in range(30)]
        parts.append("</nav>")
        size = sum(map(len, parts))
        while size < target:
            para = " ".join(rng.choice(words) for _ in range(60))
            link = rng.choice([
                f'<a href="page{rng.randrange(count)}.html#s{rng.randrange(9)}">rel</a>',
                f'<a href="/docs/page{rng.randrange(count)}.html">root</a>',
                f'<a href="https://example.org/docs/page{rng.randrange(count)}.html?b=2&a=1">abs</a>',
                '<a href="#top">top</a>',
            ])
            chunk = f"<p>{para} {link}</p>\n"
            parts.append(chunk)
            size += len(chunk)
        parts.append("</body></html>")
        pages.append((f"https://example.org/docs/page{i}.html", "".join(parts).encode()))
    return pages


def webcrawl_contender(limit: int, memo: bool, record: bool = True) -> Callable[[list[Page]], int]:
    from webcrawl.parse import Canonicalizer, FieldRule, LinkRules, PageParser, PageType, ParseRules

    fields = (
        FieldRule.parse("title", "h1"),
        FieldRule.parse("next", "a[accesskey=N]::attr(href)"),
        FieldRule.parse("sections", "h2", many=True),
    )
    rules = ParseRules(
        links=LinkRules(allowed_domains=("docs.python.org", "example.org")),
        page_types=(PageType("doc", r".", fields),) if record else (),
        max_body_bytes=limit,
    )

    def run(pages: list[Page]) -> int:
        # A fresh parser per round: its memo tables warm up within the round as in a crawl.
        size = 100_000 if memo else 1
        parser = PageParser(rules, Canonicalizer(rules.links.session_params, cache_size=size))
        parser.link_filter.cache_size = size
        return sum(len(parser.parse(body, url).links) for url, body in pages)

    return run


def link_extractor_contender(limit: int) -> Callable[[list[Page]], int]:
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    extractor = LinkExtractor(allow_domains=["docs.python.org", "example.org"])

    def run(pages: list[Page]) -> int:
        total = 0
        for url, body in pages:
            response = HtmlResponse(url, body=body[:limit], encoding="utf-8")
            total += len(extractor.extract_links(response))
        return total

    return run


def parsel_contender(limit: int) -> Callable[[list[Page]], int]:
    from scrapy.http import HtmlResponse

    def run(pages: list[Page]) -> int:
        total = 0
        for url, body in pages:
            response = HtmlResponse(url, body=body[:limit], encoding="utf-8")
            hrefs = response.css("a::attr(href), area::attr(href)").getall()
            total += len({response.urljoin(h) for h in hrefs})
        return total

    return run


def selectolax_contender(limit: int, join: bool) -> Callable[[list[Page]], int]:
    from selectolax.lexbor import LexborHTMLParser

    def run(pages: list[Page]) -> int:
        total = 0
        for url, body in pages:
            tree = LexborHTMLParser(body[:limit])
            hrefs = [n.attrs.get("href") or "" for n in tree.css("a[href], area[href]")]
            total += len({urljoin(url, h) for h in hrefs}) if join else len(hrefs)
        return total

    return run


def measure(contenders: dict[str, Callable[[list[Page]], int]], pages: list[Page], rounds: int) -> dict[str, list[float]]:
    """pages per CPU second of each contender, one figure per round, in rotating order."""
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            start = time.process_time()
            contenders[name](pages)
            rates[name].append(len(pages) / (time.process_time() - start))
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {rates[n][-1]:.0f}" for n in names), flush=True)
    return rates


def main() -> None:
    rounds = int(os.environ.get("BENCH_PARSE_ROUNDS", "5"))
    corpus_name, pages = load_corpus()
    total_bytes = sum(len(b) for _, b in pages)
    sizes = sorted(len(b) for _, b in pages)
    contenders = {
        "Scrapy LinkExtractor (lxml)": link_extractor_contender(NO_LIMIT),
        "Scrapy LinkExtractor, body cut at 256 KB": link_extractor_contender(TRUNCATE),
        "parsel css + urljoin": parsel_contender(NO_LIMIT),
        "parsel css + urljoin, cut at 256 KB": parsel_contender(TRUNCATE),
        "selectolax + urljoin (the brief's baseline)": selectolax_contender(NO_LIMIT, True),
        "webcrawl PageParser: links + record": webcrawl_contender(NO_LIMIT, True),
        "webcrawl PageParser, cut at 256 KB": webcrawl_contender(TRUNCATE, True),
        "webcrawl PageParser, memo tables off": webcrawl_contender(NO_LIMIT, False),
        "webcrawl PageParser, links only (no record)": webcrawl_contender(NO_LIMIT, True, record=False),
        "selectolax parse + hrefs only (ceiling)": selectolax_contender(NO_LIMIT, False),
    }
    rates = measure(contenders, pages, rounds)
    base = statistics.median(rates["Scrapy LinkExtractor (lxml)"])
    rows = []
    for name, values in rates.items():
        median = statistics.median(values)
        rows.append([name, median, 1000.0 / median, median / base, f"{min(values):.0f}-{max(values):.0f}"])
    body = (
        f"Corpus: {corpus_name}, {len(pages)} pages, {total_bytes / len(pages) / 1024:.0f} KB mean, "
        f"{sizes[len(sizes) // 2] / 1024:.0f} KB median, {sizes[-1] / 1024:.0f} KB largest. "
        f"{rounds} rounds, contenders alternating in rotating order; medians of pages per CPU second "
        "(`time.process_time`, one process). Every contender gets bytes and returns absolute links "
        "of `a` and `area`; LinkExtractor and parsel build a Scrapy `HtmlResponse` as a spider "
        "would. webcrawl's figure also includes truncation, non-HTML and encoding checks, "
        "canonicalisation (w3lib form), deduplication, scope/extension/trap filters and a "
        "three-field record (h1 text, next-link URL, all h2 texts); 'links only' drops the record. "
        "'memo tables off' disables the per-process memo of resolved hrefs, canonical URLs and "
        "link verdicts (the cost on a site whose links never repeat). The ceiling is selectolax "
        "parsing plus reading every href, nothing else.\n\n"
        + table(["contender", "pages/s per core", "ms CPU per page", "x LinkExtractor", "range over rounds"], rows)
    )
    print(body)
    write_section("parse", "Parse throughput per core", "./run bench parse", body)


if __name__ == "__main__":
    main()
