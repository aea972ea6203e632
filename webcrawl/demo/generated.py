"""A generated, link-heavy static site for throughput benchmarks, shaped like documentation.

``pages`` pages spread over the served hosts (page k on host k % hosts), each between ``min_kb``
and ``max_kb`` KiB (log-uniform, so the median sits well below the mean, like real doc sites),
each with about ``links`` links: a host-wide table of contents and a section sidebar (the same on
many pages, so most links are duplicates), prev/next, inline links (some cross-host) and a
footer linking every host's seed. Links come in every form a crawler must resolve: absolute,
root-relative, document-relative, with fragments.

Every page is reachable from any host's seed ``/`` (prev/next chains each host; seeds link to
each other), and from a host's seed through same-host links alone for that host's pages.
Everything is a deterministic function of the options and the seed; bodies are rendered once,
at :meth:`GeneratedSite.bind`, so serving costs a dictionary lookup.
"""

from __future__ import annotations

import json
import math
import posixpath
import random
from collections import deque
from collections.abc import Iterable, Sequence

from webcrawl.demo.server import Headers, Response
from webcrawl.demo.catalog import WORDS, paragraph, seeded

Target = tuple[int, str]  # (host index, path)

_HTML = {"Content-Type": "text/html; charset=utf-8"}


class GeneratedSite:
    """The generated site as a :class:`webcrawl.demo.server.Site`.

    The link structure exists from construction; URLs (:meth:`urls`, :meth:`link_graph`) need the
    addresses and port, so they are available after :meth:`bind`. ``prerender=False`` skips
    rendering the bodies at bind time (for a copy that only answers questions about the graph).
    """

    def __init__(self, seed: int = 0, *, pages: int = 600, hosts: int = 3, min_kb: int = 20,
                 max_kb: int = 150, links: int = 150, cross_host_share: float = 0.1,
                 section_size: int = 25, prerender: bool = True) -> None:
        if pages < 1 or hosts < 1 or not 0 < min_kb <= max_kb or links < 10:
            raise ValueError("need pages >= 1, hosts >= 1, 0 < min_kb <= max_kb and links >= 10, got "
                             f"pages={pages}, hosts={hosts}, min_kb={min_kb}, max_kb={max_kb}, links={links}")
        self.seed, self.count, self.host_count = seed, pages, hosts
        self.min_bytes, self.max_bytes = min_kb * 1024, max_kb * 1024
        self.links, self.cross_host_share, self.section_size = links, cross_host_share, section_size
        self.prerender = prerender
        self.hosts: list[str] = []
        self.port = 0
        self._bodies: dict[tuple[str, str], bytes] = {}
        prose_rng = seeded(seed, "generated-prose")
        # A pool of paragraphs drawn per page: generating every word anew would take seconds.
        self._prose = [paragraph(prose_rng, prose_rng.randint(2, 6)) for _ in range(400)]
        self._by_host = [[k for k in range(pages) if k % hosts == h] for h in range(hosts)]
        self._targets = [self._page_targets(k) for k in range(pages)]
        self._seed_targets = [self._seed_page_targets(h) for h in range(hosts)]

    # -- structure -------------------------------------------------------------------------------

    def page_path(self, k: int) -> str:
        return f"/docs/s{k // self.host_count // self.section_size}/page-{k}.html"

    def _neighbours(self, k: int) -> tuple[list[int], int | None, int | None, list[int]]:
        """(table of contents, previous, next, section) of page ``k``, all on its host."""
        own = self._by_host[k % self.host_count]
        position = k // self.host_count  # own is k % H, k % H + H, ...
        start = position - position % self.section_size
        return (own[:40], own[position - 1] if position else None,
                own[position + 1] if position + 1 < len(own) else None,
                own[start:start + self.section_size])

    def _page_targets(self, k: int) -> list[Target]:
        h, rng = k % self.host_count, seeded(self.seed, "generated-links", k)
        toc, prev, nxt, section = self._neighbours(k)
        nav: list[Target] = [(h, "/")] + [(h, self.page_path(j)) for j in toc + section]
        footer = [(h, self.page_path(j)) for j in (prev, nxt) if j is not None]
        footer += [(g, "/") for g in range(self.host_count)]
        inline: list[Target] = []
        while len(nav) + len(footer) + len(inline) < self.links:
            j = rng.randrange(self.count)
            if self.host_count > 1 and rng.random() >= self.cross_host_share:
                j = rng.choice(self._by_host[h])  # most inline links stay on the host
            inline.append((j % self.host_count, self.page_path(j)))
        return nav + inline + footer  # document order

    def _seed_page_targets(self, h: int) -> list[Target]:
        own = self._by_host[h]
        return ([(h, self.page_path(j)) for j in own[::self.section_size] + own[:1]]
                + [(g, "/") for g in range(self.host_count)])

    # -- URLs and the link graph ------------------------------------------------------------------

    def _url(self, target: Target) -> str:
        return f"http://{self.hosts[target[0]]}:{self.port}{target[1]}"

    def seeds(self) -> list[str]:
        """The seed page ``/`` of every host."""
        return [self._url((h, "/")) for h in range(self.host_count)]

    def urls(self) -> list[str]:
        """Every page URL: the seeds, then pages 0..pages-1."""
        return self.seeds() + [self._url((k % self.host_count, self.page_path(k)))
                               for k in range(self.count)]

    def link_graph(self) -> dict[str, list[str]]:
        """URL -> the distinct absolute URLs it links to (fragments dropped), in document order."""
        graph = {self._url((h, "/")): list(dict.fromkeys(map(self._url, t)))
                 for h, t in enumerate(self._seed_targets)}
        for k, targets in enumerate(self._targets):
            url = self._url((k % self.host_count, self.page_path(k)))
            graph[url] = list(dict.fromkeys(map(self._url, targets)))
        return graph

    def reachable(self, start: Iterable[str] | None = None, same_host: bool = False) -> set[str]:
        """URLs a breadth-first walk from ``start`` (default: all seeds) reaches."""
        graph = self.link_graph()
        queue = deque(self.seeds() if start is None else start)
        seen = set(queue)
        while queue:
            url = queue.popleft()
            host = url.split("/")[2]
            for nxt in graph.get(url, ()):
                if nxt not in seen and (not same_host or nxt.split("/")[2] == host):
                    seen.add(nxt)
                    queue.append(nxt)
        return seen

    # -- Site protocol ----------------------------------------------------------------------------

    def bind(self, hosts: Sequence[str], port: int) -> None:
        if len(hosts) != self.host_count:
            raise ValueError(f"site generated for {self.host_count} hosts, bound to {len(hosts)}")
        self.hosts, self.port = list(hosts), port
        if self.prerender:
            self._bodies = {(self.hosts[h], "/"): self._render_seed(h) for h in range(self.host_count)}
            for k in range(self.count):
                self._bodies[self.hosts[k % self.host_count], self.page_path(k)] = self._render(k)

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        body = self._bodies.get((host, path.split("?", 1)[0]))
        if body is not None:
            return 200, _HTML, body
        if path == "/robots.txt":
            return 200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow:\n"
        return 404, _HTML, b"<html><body><h1>Not found</h1></body></html>"

    def body(self, url: str) -> bytes:
        """The served body of a page URL (renders it if bodies were not pre-rendered)."""
        for h, address in enumerate(self.hosts):
            prefix = f"http://{address}:{self.port}"
            if url.startswith(prefix):
                path = url[len(prefix):]
                if path == "/":
                    return self._bodies.get((address, path)) or self._render_seed(h)
                k = int(path.rsplit("page-", 1)[1].split(".")[0])
                return self._bodies.get((address, path)) or self._render(k)
        raise KeyError(url)

    # -- rendering ---------------------------------------------------------------------------------

    def _href(self, here: Target, there: Target, rng: random.Random) -> str:
        """One of the link forms a crawler must resolve, chosen by ``rng``."""
        roll = rng.random()
        if there[0] != here[0] or roll < 0.15:
            href = self._url(there)
        elif there[1] == "/" or roll < 0.5:
            href = there[1]
        else:
            href = posixpath.relpath(there[1], posixpath.dirname(here[1]))
        return href + (f"#s{int(roll * 100) % 7}" if roll > 0.85 else "")

    def _render(self, k: int) -> bytes:
        h, rng = k % self.host_count, seeded(self.seed, "generated-body", k)
        here, targets = (h, self.page_path(k)), self._targets[k]
        toc, prev, nxt, section = self._neighbours(k)
        count = 1 + len(toc) + len(section)
        nav = "".join(f'<li><a href="{self._href(here, t, rng)}">{self._words(rng)}</a></li>'
                      for t in targets[:count])
        footer_count = self.host_count + (prev is not None) + (nxt is not None)
        inline, bottom = targets[count:-footer_count], targets[-footer_count:]
        paras = []
        for i in range(0, len(inline), 6):
            anchors = " ".join(f'<a href="{self._href(here, t, rng)}">{self._words(rng)}</a>'
                               for t in inline[i:i + 6])
            paras.append(f"<p>{rng.choice(self._prose)} {anchors}</p>\n")
        footer = " | ".join(f'<a href="{self._href(here, t, rng)}">{t[1]}</a>' for t in bottom)
        head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Page {k}'
                f"</title></head><body><nav class=\"toc\"><ul>{nav}</ul></nav><main><h1>Page {k}</h1>\n")
        return self._fill(head, paras, f"</main><footer>{footer}</footer></body></html>\n", rng)

    @staticmethod
    def _words(rng: random.Random) -> str:
        return f"{rng.choice(WORDS)} {rng.choice(WORDS)}".capitalize()

    def _render_seed(self, h: int) -> bytes:
        rng, here = seeded(self.seed, "generated-seed", h), (h, "/")
        items = "".join(f'<li><a href="{self._href(here, t, rng)}">{t[1]}</a></li>'
                        for t in self._seed_targets[h])
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Host {h}</title>'
                f"</head><body><h1>Documentation</h1><ul>{items}</ul></body></html>\n").encode()

    def _fill(self, head: str, paras: list[str], tail: str, rng: random.Random) -> bytes:
        """Pad with prose to a log-uniform size in [min_bytes, max_bytes] (exactly, when it fits)."""
        lo, hi = math.log(self.min_bytes), math.log(self.max_bytes)
        target = min(self.max_bytes, max(self.min_bytes, round(math.exp(lo + (hi - lo) * rng.random()))))
        size = len(head) + len(tail) + sum(map(len, paras))
        if size > self.max_bytes:
            raise ValueError(f"{self.links} links do not fit in max_kb={self.max_bytes // 1024}")
        while size < target:
            gap = target - size  # the last filler is cut to land on the target exactly
            paras.append(f"<p>{rng.choice(self._prose)[:gap - 8]}</p>\n" if gap > 8 else "\n" * gap)
            size += len(paras[-1])
        return (head + "".join(paras) + tail).encode()


_SITE_FILE = """\
name = "{name}"
seeds = {seeds}
allowed_domains = {hosts}
allowed_private_networks = ["127.0.0.0/8"]
[politeness]
user_agent = "webcrawl-{name}/0.1 (+https://example.org/{name}; {name}@example.org)"
min_delay_seconds = 0
[budget]
billing = "requests"
amount_per_cycle = 100000
cycle_seconds = 3600
[limits]
max_depth = 1000
[[page_types]]
name = "doc"
url_pattern = '/docs/s\\d+/page-\\d+\\.html$'
[page_types.fields]
title = "main h1"
"""


def site_file(name: str, seeds: Sequence[str], hosts: Sequence[str]) -> str:
    """A site file (TOML) for a crawl of the generated site: no delay, no depth limit, loopback
    allowed, every page a ``doc`` page whose record is its title."""
    return _SITE_FILE.format(name=name, seeds=json.dumps(list(seeds)), hosts=json.dumps(list(hosts)))
