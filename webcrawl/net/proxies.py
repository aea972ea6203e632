"""Forward proxies a crawl goes through: one proxy, a pool, or a provider's gateway.

``WEBCRAWL_PROXIES`` (a site file's ``network.proxies``) lists ``http://`` or ``https://`` proxy
URLs, credentials in the URL (``http://user:secret@gw.example:8000``). One URL is one proxy, or a
gateway that picks its own exits; several are a pool. ``WEBCRAWL_PROXY_ROTATION`` says how a pool
is used: ``host`` (the default) keeps each host on one proxy (chosen by a hash of the host name,
so the proxy's connections are reused and a site sees one client), ``request`` takes them in turn.
A request's own ``meta["proxy"]`` (Scrapy's way) wins over the list.

Every byte through a proxy is counted at the socket (:mod:`webcrawl.net.meter`): the request
and answer, the ``CONNECT`` exchange of an https target, TLS, failed transfers.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["ROTATIONS", "Proxy", "ProxyPool", "parse_proxy"]

ROTATIONS = ("host", "request")


@dataclass(frozen=True)
class Proxy:
    """A proxy: its URL without credentials, and the credentials (``None``: none)."""

    url: str
    user: str | None = None
    password: str | None = None

    def __str__(self) -> str:
        return self.url


def parse_proxy(value: str, setting: str = "WEBCRAWL_PROXIES") -> Proxy:
    """A proxy URL checked (``http`` or ``https``, a host, a port that parses); ``ValueError``
    naming ``setting`` otherwise. The error never repeats the credentials."""
    text = str(value).strip()
    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or (
            parts.path not in ("", "/")):
        shown = text.rpartition("@")[2]
        raise ValueError(f"{setting}: {shown!r} is not a proxy URL; expected "
                         "'http://host:port' or 'https://user:password@host:port'")
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if port is not None:
        netloc += f":{port}"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return Proxy(f"{parts.scheme}://{netloc}", user, password)


class ProxyPool:
    """The crawl's proxies and how a request gets one (see the module docstring)."""

    def __init__(self, proxies: Sequence[Proxy], rotation: str = "host") -> None:
        if rotation not in ROTATIONS:
            raise ValueError(f"WEBCRAWL_PROXY_ROTATION={rotation!r}: expected one of "
                             f"{', '.join(ROTATIONS)}")
        self.proxies = tuple(proxies)
        self.rotation = rotation
        self._turns = itertools.cycle(self.proxies) if self.proxies else None

    @classmethod
    def from_settings(cls, urls: Sequence[str], rotation: str) -> ProxyPool:
        return cls([parse_proxy(u) for u in urls], rotation)

    def __bool__(self) -> bool:
        return bool(self.proxies)

    def choose(self, host: str) -> Proxy | None:
        if not self.proxies:
            return None
        if len(self.proxies) == 1:
            return self.proxies[0]
        if self.rotation == "host":
            return self.proxies[zlib.crc32(host.lower().encode()) % len(self.proxies)]
        assert self._turns is not None
        return next(self._turns)
