"""A folder of files served as a site, for benchmarks on real pages (e.g. Debian's
``python3.11-doc``: ``/usr/share/doc/python3.11/html``, the corpus the brief's figures come from).

Every host serves the same tree; ``/`` is ``index.html``. :meth:`StaticSite.reachable` walks the
files' ``href`` links breadth-first with the standard library alone, independently of any crawler.
"""

from __future__ import annotations

import mimetypes
import re
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from webcrawl.demo.server import Headers, Response

PYTHON_DOCS = "/usr/share/doc/python3.11/html"
_HREF = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'#][^"']*|#[^"']*)["']""", re.I)


class StaticSite:
    """Files under ``root``, served on every host."""

    def __init__(self, seed: int = 0, *, root: str = PYTHON_DOCS) -> None:
        self.root = Path(root).resolve()
        if not (self.root / "index.html").is_file():
            raise ValueError(f"{root} has no index.html (for the Python docs: apt-get install "
                             "python3.11-doc)")
        self.hosts: list[str] = []
        self.port = 0

    def bind(self, hosts: Sequence[str], port: int) -> None:
        self.hosts, self.port = list(hosts), port

    def _file(self, path: str) -> Path | None:
        local = unquote(urlsplit(path).path).lstrip("/") or "index.html"
        target = (self.root / local).resolve()
        if self.root not in target.parents or not target.is_file():
            return None
        return target

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        target = self._file(path)
        if target is None:
            return 404, {"Content-Type": "text/plain"}, b"not found"
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return 200, {"Content-Type": kind}, target.read_bytes()

    def body(self, url: str) -> bytes:
        target = self._file(urlsplit(url).path)
        return target.read_bytes() if target is not None else b""

    def seeds(self) -> list[str]:
        return [f"http://{h}:{self.port}/" for h in self.hosts]

    def reachable(self) -> set[str]:
        """Every URL on the site's hosts reachable from the seeds by ``<a href>`` links."""
        seen: set[str] = set(self.seeds())
        queue = deque(seen)
        while queue:
            url = queue.popleft()
            target = self._file(urlsplit(url).path)
            if target is None or target.suffix != ".html":
                continue
            for href in _HREF.findall(target.read_bytes()):
                link = urldefrag(urljoin(url, href.decode("utf-8", "replace").strip()))[0]
                parts = urlsplit(link)
                if parts.scheme == "http" and parts.netloc == urlsplit(url).netloc \
                        and link not in seen and self._file(parts.path) is not None:
                    seen.add(link)
                    queue.append(link)
        return seen

