"""HTML, sitemaps and robots.txt of the test web, rendered from a :class:`Scenario` at a time.

Pages carry noise that never touches a record field: a served-at stamp with microseconds and a
random ad token, so the raw HTML differs on every load while the record does not. Each HTML page
is padded to exactly its page's ``size`` bytes (ASCII only), so byte budgets mean something.
"""

from __future__ import annotations

import html
import time

from bench.liveweb._text import padding
from bench.liveweb.scenario import Page, Scenario

__all__ = ["render_page", "render_robots", "render_sitemap", "w3c"]

OLD_LASTMOD = 1577836800.0  # 2020-01-01T00:00:00Z, the "bogus_old" sitemap date


def w3c(epoch: float) -> str:
    """A W3C datetime (the sitemap format), whole seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _noise(now_epoch: float, token: str) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now_epoch))
    micros = int((now_epoch % 1) * 1_000_000)
    return (f'<p class="served">Served at {stamp}.{micros:06d}Z</p>\n'
            f'<div class="ad" data-token="{token}">Sponsored offer {token[:8]}</div>\n')


def _wrap(sc: Scenario, page: Page, title: str, main: str, noise: str) -> str:
    shop = sc.shop_pages[page.shop][0].name
    head = (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)} | {_esc(shop)}</title></head>\n<body>\n"
            f'<header><a class="home" href="/">{_esc(shop)}</a></header>\n<main>\n')
    tail = f"</main>\n{noise}<footer><p>{_esc(shop)}, a test shop.</p></footer>\n</body></html>\n"
    open_pad, close_pad = '<section class="more"><p>', "</p></section>\n"
    bare = len(head) + len(main) + len(tail) + len(open_pad) + len(close_pad)
    pad = padding(sc.params.seed, page.pid, page.size - bare)
    return head + main + open_pad + pad + close_pad + tail


def _product(sc: Scenario, page: Page, version: int) -> str:
    rec = sc.record(page, version)
    back = ""
    if page.category >= 0:
        cat = sc.pages[page.category]
        back = f'<a class="category" href="{cat.path}">{_esc(cat.name)}</a>\n'
    return (f'<article class="product" data-pid="{page.pid}">\n'
            f'<h1 class="name">{_esc(rec.name)}</h1>\n'
            f'<span class="price">{rec.price}</span> <span class="stock">{rec.stock_text}</span>\n'
            f'<div class="desc">{_esc(rec.description)}</div>\n{back}</article>\n')


def _category(sc: Scenario, page: Page, t: float) -> str:
    items = []
    for p in sc.listed(page, t):
        rec = sc.record(p, sc.version(p, t))
        href = sc.path_at(p, t)
        items.append(f'<li class="item"><a class="name" href="{href}">{_esc(rec.name)}</a> '
                     f'<span class="price">{rec.price}</span> '
                     f'<span class="stock">{rec.stock_text}</span></li>\n')
    return (f'<h1 class="category">{_esc(page.name)}</h1>\n<ul class="listing">\n'
            + "".join(items) + "</ul>\n")


def _hub(sc: Scenario, page: Page) -> str:
    links = "".join(f'<li><a class="cat" href="{sc.pages[c].path}">{_esc(sc.pages[c].name)}</a></li>\n'
                    for c in page.members)
    spec = sc.params.shops[page.shop]
    footer = ('<p class="sitemap"><a href="/sitemap.xml">Sitemap</a></p>\n'
              if spec.sitemap and spec.sitemap_in_site_file else "")
    return f'<h1 class="hub">{_esc(page.name)}</h1>\n<ul class="categories">\n{links}</ul>\n{footer}'


def render_page(sc: Scenario, page: Page, t: float, now_epoch: float, token: str) -> str:
    """The HTML of ``page`` at ``t`` (seconds from the origin); ``now_epoch`` and ``token`` are
    the noise of this load."""
    noise = _noise(now_epoch, token)
    if page.kind == "product":
        return _wrap(sc, page, page.name, _product(sc, page, sc.version(page, t)), noise)
    if page.kind == "category":
        return _wrap(sc, page, page.name, _category(sc, page, t), noise)
    return _wrap(sc, page, page.name, _hub(sc, page), noise)


def render_robots(sc: Scenario, shop: int, base: str) -> str:
    spec = sc.params.shops[shop]
    lines = ["# robots.txt of a liveweb test shop", "User-agent: *", "Disallow: /cart/"]
    if spec.crawl_delay > 0:
        lines.append(f"Crawl-delay: {spec.crawl_delay:g}")
    lines += ["", f"Sitemap: {base}/sitemap.xml", ""] if spec.sitemap else [""]
    return "\n".join(lines)


def _lastmod(sc: Scenario, shop: int, page: Page, t: float, origin: float, now: float) -> str:
    kind = sc.params.shops[shop].lastmod
    if kind == "accurate":  # a moved or restored page's URL is no older than its move or restore
        born = sc.incarnation(page, sc.path_at(page, t), t)
        return w3c(origin + max(sc.changed_at(page, sc.version(page, t)), born))
    if kind == "bogus_now":
        return w3c(now)
    if kind == "bogus_old":
        return w3c(OLD_LASTMOD)
    return ""


def render_sitemap(sc: Scenario, shop: int, part: int | None, t: float, origin: float,
                   now: float, base: str) -> str | None:
    """sitemap.xml (``part`` None) or child ``part`` (1-based) of an index shop; None: no such
    sitemap (or the shop has none). Lists the pages present at ``t`` (born and not dead; a
    moved page at its new URL), sitemap-only ones included."""
    parts = sc.sitemap_parts(shop)
    if not parts:
        return None
    indexed = sc.params.shops[shop].sitemap_index
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    if part is None and indexed:
        rows = []
        for k, pages in enumerate(parts, 1):
            stamps = [_lastmod(sc, shop, p, t, origin, now) for p in pages if sc.present(p, t)]
            stamp = max(stamps) if stamps else ""
            mod = f"<lastmod>{stamp}</lastmod>" if stamp else ""
            rows.append(f"<sitemap><loc>{base}/sitemaps/part-{k}.xml</loc>{mod}</sitemap>\n")
        return head + f"<sitemapindex {ns}>\n" + "".join(rows) + "</sitemapindex>\n"
    if part is None:
        pages = parts[0]
    elif indexed and 1 <= part <= len(parts):
        pages = parts[part - 1]
    else:
        return None
    rows = []
    for p in pages:
        if not sc.present(p, t):
            continue
        stamp = _lastmod(sc, shop, p, t, origin, now)
        mod = f"<lastmod>{stamp}</lastmod>" if stamp else ""
        rows.append(f"<url><loc>{base}{sc.path_at(p, t)}</loc>{mod}</url>\n")
    return head + f"<urlset {ns}>\n" + "".join(rows) + "</urlset>\n"
