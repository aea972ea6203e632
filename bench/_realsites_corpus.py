"""The real documentation sites of ``bench_realsites``, and the truth a crawl is judged against.

Each :class:`Corpus` is a Debian documentation package served as one site: its folder, the page
a crawl starts from and the path prefix it must stay under. :func:`reachable_files` walks the
files on disk, independently of both crawlers: from the start page it follows every
``<a href>`` and ``<area href>`` (resolved against the page's URL, or its ``<base href>``) that
stays on the host and under the prefix, exactly as the static server maps URLs to files:

- ``/dir/`` serves ``dir/index.html``; ``/dir`` (a folder) is redirected to ``/dir/``;
- the query string and fragment do not change the file served;
- only HTML files are read for links; a link to a missing file leads nowhere.

Links to files both crawlers skip by extension (Scrapy's ``IGNORED_EXTENSIONS``, which both
LinkExtractor and webcrawl's site spider use by default: images, archives, ``.css``, ...) are left
out: they are not pages of the site. What remains is the set of files a whole crawl must fetch.
"""

from __future__ import annotations

import html
import posixpath
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from scrapy.linkextractors import IGNORED_EXTENSIONS

HTML_SUFFIXES = frozenset({".html", ".htm", ".shtml", ".xhtml"})
SKIPPED_EXTENSIONS = frozenset(IGNORED_EXTENSIONS)

# Comments, scripts and styles may hold text that looks like a tag; no browser sees it as one.
_OPAQUE = re.compile(rb"<!--.*?-->|<script\b.*?</script\s*>|<style\b.*?</style\s*>", re.I | re.S)
_TAG = re.compile(rb"<(a|area|base)\s([^>]*)>", re.I)
_HREF = re.compile(rb"""(?:^|\s)href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""", re.I)
_HOST = "http://site"


@dataclass(frozen=True)
class Corpus:
    """One documentation site: ``root`` served at ``/``, crawled from ``start`` under ``prefix``."""

    name: str
    title: str
    package: str
    root: Path
    start: str
    prefix: str
    address: str

    def available(self) -> bool:
        return (self.root / self.start.lstrip("/")).is_file() or (
            self.start.endswith("/") and (self.root / self.start.lstrip("/") / "index.html").is_file())


CORPORA = (
    Corpus("python", "Python 3.11 docs", "python3.11-doc", Path("/usr/share/doc/python3.11/html"),
           "/", "/", "127.0.0.21"),
    Corpus("postgres", "PostgreSQL 15 docs", "postgresql-doc-15",
           Path("/usr/share/doc/postgresql-doc-15/html"), "/", "/", "127.0.0.22"),
    # The whole rust-doc tree is ~21,000 reachable pages (books, compiler docs, sources): the
    # standard library's reference alone is a whole site of its own.
    Corpus("rust-std", "Rust docs, /std/", "rust-doc", Path("/usr/share/doc/rust-doc/html"),
           "/std/index.html", "/std/", "127.0.0.23"),
)


def links_of(body: bytes) -> tuple[str | None, list[str]]:
    """``(base href or None, hrefs of a and area tags)`` of an HTML document, entities decoded."""
    base, hrefs = None, []
    for tag, attributes in _TAG.findall(_OPAQUE.sub(b"", body)):
        match = _HREF.search(attributes)
        if match is None:
            continue
        value = html.unescape(next(g for g in match.groups() if g is not None).decode("utf-8", "replace"))
        if tag.lower() == b"base":
            base = base or value.strip()
        else:
            hrefs.append(value.strip())
    return base, hrefs


def served_file(root: Path, path: str) -> tuple[str, Path] | None:
    """``(URL path after any redirect, file)`` the server answers ``path`` (decoded) with, or None."""
    if not path.startswith("/"):
        return None
    local = root / path.lstrip("/")
    if path.endswith("/"):
        local = local / "index.html"
    elif local.is_dir():
        path, local = path + "/", local / "index.html"
    try:
        local.resolve().relative_to(root.resolve().parent)
    except ValueError:
        return None
    return (path, local) if local.is_file() else None


def reachable_files(root: Path, start: str, prefix: str) -> dict[str, int]:
    """Files (path relative to ``root``) reachable from ``start`` under ``prefix``, with their sizes."""
    first = served_file(root, start)
    if first is None:
        raise ValueError(f"{root}{start} does not exist")
    found: dict[str, int] = {}
    served: dict[str, tuple[str, Path] | None] = {}  # the same navigation links on every page
    queue: deque[tuple[str, Path]] = deque([first])
    while queue:
        path, local = queue.popleft()
        key = local.relative_to(root).as_posix()
        if key in found:
            continue
        found[key] = local.stat().st_size
        if local.suffix.lower() not in HTML_SUFFIXES:
            continue
        base, hrefs = links_of(local.read_bytes())
        page_url = _HOST + path
        if base:
            page_url = urljoin(page_url, base)
        for href in hrefs:
            target = urlsplit(urldefrag(urljoin(page_url, href))[0])
            if f"{target.scheme}://{target.netloc}" != _HOST:
                continue
            target_path = unquote(target.path) or "/"
            if not target_path.startswith(prefix):
                continue
            extension = posixpath.splitext(target_path)[1].lower().lstrip(".")
            if extension in SKIPPED_EXTENSIONS:
                continue
            if target_path not in served:
                served[target_path] = served_file(root, target_path)
                if served[target_path] is not None:
                    queue.append(served[target_path])  # visited once: ``found`` skips repeats
    return found
