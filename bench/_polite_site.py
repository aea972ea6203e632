"""The generated site of the politeness benchmark: many hosts, a few small pages each.

Host ``i`` is the address ``127.0.{10 + i // 250}.{1 + i % 250}`` (inside 127.0.0.0/8, away from
the 127.0.0.x addresses tests use). Each host has ``pages`` pages: ``/`` and ``/p/1.html`` ..
``/p/{pages - 1}.html``, 2-6 KB each. Page ``k`` links to pages ``2k + 1`` and ``2k + 2`` of its
host (a binary tree, so a crawl discovers a host's pages a few at a time, as on a real site), back
to ``/``, and to the next host's ``/``. Every page of every host is reachable from that host's ``/``.
"""

from __future__ import annotations

import ipaddress
import json
import random

FIRST_NETWORK = 10
PER_NETWORK = 250
ROBOTS = b"User-agent: *\nAllow: /\n"


def host_address(i: int) -> str:
    if not 0 <= i < 240 * PER_NETWORK:
        raise ValueError(f"host index {i} out of range")
    return f"127.0.{FIRST_NETWORK + i // PER_NETWORK}.{1 + i % PER_NETWORK}"


def hosts_network(count: int) -> str:
    """The smallest CIDR network holding hosts 0 .. count - 1."""
    last = ipaddress.ip_address(host_address(count - 1))
    for prefix in range(32, 7, -1):
        network = ipaddress.ip_network(f"{host_address(0)}/{prefix}", strict=False)
        if last in network:
            return str(network)
    raise AssertionError("unreachable: 127.0.0.0/8 holds every host")


def page_path(k: int) -> str:
    return "/" if k == 0 else f"/p/{k}.html"


class PoliteSite:
    """``hosts`` x ``pages`` small pages, deterministic for a seed."""

    def __init__(self, hosts: int = 500, pages: int = 20, seed: int = 0) -> None:
        if hosts < 1 or pages < 1:
            raise ValueError(f"need hosts >= 1 and pages >= 1, got {hosts}, {pages}")
        self.hosts = [host_address(i) for i in range(hosts)]
        self.pages = pages
        self.port = 0
        rng = random.Random(seed)
        words = ["crawl", "delay", "host", "page", "fresh", "polite", "queue", "fetch", "robots",
                 "budget", "record", "change", "link", "server", "cycle", "store"]
        self._filler = [" ".join(rng.choice(words) for _ in range(rng.randint(300, 900)))
                        for _ in range(64)]
        self._bodies: dict[tuple[str, str], bytes] = {}

    def links(self, h: int, k: int) -> list[tuple[int, int]]:
        """``(host index, page index)`` targets of page ``k`` of host ``h``."""
        own = [(h, j) for j in (2 * k + 1, 2 * k + 2) if j < self.pages]
        return own + [(h, 0), ((h + 1) % len(self.hosts), 0)]

    def url(self, h: int, k: int) -> str:
        return f"http://{self.hosts[h]}:{self.port}{page_path(k)}"

    def bind(self, port: int, render: bool = True) -> None:
        """Serve on ``port``: render every body for it (links are absolute only across hosts)."""
        self.port = port
        if not render:
            return
        for h, host in enumerate(self.hosts):
            for k in range(self.pages):
                anchors = "".join(
                    f'<li><a href="{page_path(j) if g == h else self.url(g, j)}">page {g}-{j}</a></li>'
                    for g, j in self.links(h, k))
                body = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{host} {k}</title>"
                        f"</head><body><h1>Host {h} page {k}</h1><ul>{anchors}</ul>"
                        f"<p>{self._filler[(h * 31 + k) % len(self._filler)]}</p></body></html>")
                self._bodies[host, page_path(k)] = body.encode()

    def respond(self, host: str, path: str) -> tuple[int, bytes, bytes]:
        """``(status, content type, body)`` of a GET."""
        path = path.split("?", 1)[0]
        if path == "/robots.txt":
            return 200, b"text/plain", ROBOTS
        body = self._bodies.get((host, path))
        if body is None:
            return 404, b"text/plain", b"not found"
        return 200, b"text/html; charset=utf-8", body

    def reachable(self) -> set[tuple[str, str]]:
        """Every ``(host, path)`` reachable from the hosts' ``/``: all pages, by construction,
        checked by walking the link graph."""
        seen = {(h, 0) for h in range(len(self.hosts))}
        todo = list(seen)
        while todo:
            for target in self.links(*todo.pop()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return {(self.hosts[h], page_path(k)) for h, k in seen}

    def site_file(self, name: str, delay: float) -> str:
        """A site file (TOML) crawling every host at ``delay`` seconds per host."""
        return _SITE_FILE.format(name=name, delay=delay, network=hosts_network(len(self.hosts)),
                                 seeds=json.dumps([self.url(h, 0) for h in range(len(self.hosts))]),
                                 hosts=json.dumps(self.hosts))


_SITE_FILE = """\
name = "{name}"
seeds = {seeds}
allowed_domains = {hosts}
allowed_private_networks = ["{network}"]

[politeness]
user_agent = "webcrawl-bench/0.1 (+https://example.invalid/bench; bench@example.invalid)"
min_delay_seconds = {delay}

[budget]
billing = "requests"
amount_per_cycle = 10000000
cycle_seconds = 86400

[limits]
max_depth = 100

[[page_types]]
name = "page"
url_pattern = '/(p/\\d+\\.html)?$'
[page_types.fields]
title = "h1"
"""
