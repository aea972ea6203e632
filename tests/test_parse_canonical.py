"""Canonical URLs and link joining agree with urljoin + w3lib.url.canonicalize_url, except for
the two documented differences (default port removed, session parameters stripped), which the
reference below applies on top of w3lib's result with urllib alone."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import pytest
from selectolax.lexbor import LexborHTMLParser
from w3lib.url import canonicalize_url

from webcrawl.parse import DEFAULT_SESSION_PARAMS, Base, Canonicalizer

ABSOLUTE = [
    "http://www.example.com/do?c=3&b=5&b=2&a=50",
    "HTTP://WWW.Example.COM/Path/To?X=1&x=2",
    "http://example.com:80/a",
    "https://example.com:443/a",
    "http://example.com:8080/a",
    "https://example.com:80/a",
    "http://example.com:443/a",
    "http://example.com:/a",
    "http://example.com:0080/a",
    "http://example.com",
    "http://example.com?a=1",
    "http://example.com/?",
    "http://example.com/a/./b/../c/",
    "http://example.com/../../x",
    "http://example.com/a/b/..",
    "http://example.com/a/.",
    "http://example.com/r\u00e9sum\u00e9",
    "http://example.com/%7Euser/%41b",
    "http://example.com/%7euser",
    "http://example.com/a%2fb%2Fc%3F%3b",
    "http://example.com/a%20b c",
    "http://example.com/100%/x?p=100%",
    "http://example.com/%zz/%e9",
    "http://example.com/?a=1&a=&b",
    "http://example.com/?q=caf\u00e9",
    "http://example.com/?q=%E9&r=%c3%a9",
    "http://example.com/?q=a+b%20c",
    "http://example.com/?b=%2f&a=/",
    "http://example.com/?&&a=1&&",
    "http://example.com/?a=1;b=2",
    "http://example.com/?z",
    "http://example.com/?=x",
    "http://example.com/?a==b",
    "http://example.com/?b=1&A=2&a=3&_=4&-=5&~=6",
    "http://example.com/?a%20b=1&a+b=2&a-b=3",
    "http://example.com/?k=!$'()*,:;@/?",
    "http://b\u00fccher.de/",
    "http://B\u00dcCHER.de/x",
    "http://xn--bcher-kva.de/",
    "http://\u4f8b\u3048.\u30c6\u30b9\u30c8/\u30d1\u30b9",
    "http://m\u00fcnchen.de:8080/?x=\u00f6",
    "http://user:pass@Example.com/",
    "http://User@example.com:80/",
    "http://[::1]/",
    "http://[2001:DB8::0:1]:8080/a",
    "http://[::1]:80/",
    "http://127.0.0.1:80/x",
    "http://example.com./",
    "http://my_host.example.com/",
    "http://example.com/a;b/c;d?e#f",
    "http://example.com/x;",
    "http://example.com/a/..;x",
    "http://example.com/path;jsessionid=ABC123",
    "http://example.com/path;JSESSIONID=ABC;v=1",
    "http://example.com/#frag",
    "http://example.com/a#b?c",
    "http://example.com/a|b[c]{d}",
    "http://example.com/a'b\"c<d>`e^f",
    "http://example.com/~user/",
    "http://example.com/a b/?c d=e f",
    "http://exa\tmple.com/a\nb",
    "http://example.com/?sid=1&a=2",
    "http://example.com/?PHPSESSID=x",
    "http://example.com/?JSESSIONID=y&b=1",
    "http://example.com/?ASPSESSIONIDQASD=z&b=1",
    "http://example.com/?sessionid=&keep=1",
    "http://example.com/p?utm=1&sid=2&session_id=3&zz=4",
    "http://example.com/" + "a/" * 50 + "?" + "&".join(f"k{i}=v{i}" for i in range(30, 0, -1)),
]

NOT_HTTP = [
    "mailto:a@example.com", "javascript:void(0)", "ftp://example.com/", "data:text/html,x",
    "example.com/a", "/relative", "", "http:/example.com", "http://", "https://", "http://[::1",
    "http://example.com:99999/", "file:///etc/passwd",
]

# RFC 3986 section 5.4 (normal and abnormal examples) plus what real pages contain.
BASES = [
    "http://a/b/c/d;p?q",
    "http://example.com/a/b/c.html?x=1",
    "https://Example.com:8443/dir/",
    "http://example.com",
    "https://example.com/path;jsessionid=XYZ?sid=1",
]
HREFS = [
    "g:h", "g", "./g", "g/", "/g", "//g", "?y", "g?y", "#s", "g#s", "g?y#s", ";x", "g;x",
    "g;x?y#s", "", ".", "./", "..", "../", "../g", "../..", "../../", "../../g", "../../../g",
    "../../../../g", "/./g", "/../g", "g.", ".g", "g..", "..g", "./../g", "./g/.", "g/./h",
    "g/../h", "g;x=1/./y", "g;x=1/../y", "g?y/./x", "g?y/../x", "g#s/./x", "g#s/../x", "http:g",
    "  g  ", "\ng\t", " #top", "mailto:x@y", "javascript:void(0)", "JavaScript:x", "tel:123",
    "data:text/html,x", "HTTPS://Other.COM/X", "//other.com:80/x", "ftp://x/", "g h",
    "\u00e9t\u00e9.html", "g\\h", "#", "?b=2&a=1", "page.html?sid=5&a=1", "http://[::1",
    "http://a:99999/", "///x", "//", "https://", "http://?x", "//#y", "g%20h", "%7Eg", "a/b/a/b",
    "http://www.example.com:80/", "?q=caf\u00e9", "g?y=\u00e9&x",
]


def w3lib_reference(url: str) -> str | None:
    """urljoin'ed URL -> w3lib's canonical form, then the two documented differences."""
    try:
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            return None
        canonical = canonicalize_url(url)
    except ValueError:
        return None
    parts = urlsplit(canonical)
    if not parts.hostname:
        return None
    netloc = parts.netloc
    default = {"http": ":80", "https": ":443"}[parts.scheme]
    if netloc.endswith(default):
        netloc = netloc[: -len(default)]

    def keep(item: str) -> bool:
        key = item.partition("=")[0].lower()
        return key not in DEFAULT_SESSION_PARAMS and not key.startswith("aspsessionid")

    query = "&".join(a for a in parts.query.split("&") if a and keep(a))
    path = parts.path
    last = path.rfind("/") + 1
    if ";" in path[last:]:
        head, _, params = path.partition(";") if last == 0 else (path[:last] + path[last:].partition(";")[0], ";", path[last:].partition(";")[2])
        kept = [p for p in params.split(";") if p.partition("=")[0].lower() not in DEFAULT_SESSION_PARAMS]
        path = head + "".join(";" + p for p in kept) if kept else head
    return urlunsplit((parts.scheme, netloc, path, query, ""))


def join_reference(base: str, href: str) -> str | None:
    try:
        return w3lib_reference(urljoin(base, href.strip(" \t\n\r\f")))
    except ValueError:
        return None


@pytest.mark.parametrize("url", ABSOLUTE)
def test_canonical_matches_w3lib(url: str) -> None:
    canon = Canonicalizer()
    assert canon.canonical(url) == w3lib_reference(url)
    assert canon.canonical(url) == w3lib_reference(url)  # memoised answer is the same


@pytest.mark.parametrize("url", ABSOLUTE)
def test_fast_path_agrees_with_slow_path(url: str) -> None:
    canon = Canonicalizer()
    fast = canon._fast(url)
    if fast is not False:
        assert fast == canon._slow(url)


@pytest.mark.parametrize("url", NOT_HTTP)
def test_non_http_has_no_canonical_form(url: str) -> None:
    assert Canonicalizer().canonical(url) is None


@pytest.mark.parametrize("url", ABSOLUTE)
def test_canonical_is_idempotent(url: str) -> None:
    canon = Canonicalizer()
    once = canon.canonical(url)
    assert once is not None
    assert canon.canonical(once) == once


@pytest.mark.parametrize("base", BASES)
def test_join_matches_urljoin_and_w3lib(base: str) -> None:
    canon = Canonicalizer()
    page = Base(canon, base)
    for href in HREFS:
        assert page.join(href) == join_reference(base, href), href
        assert page.join(href) == join_reference(base, href), href  # memoised answer


def test_deliberate_differences_from_urljoin() -> None:
    """Python's urljoin keeps the base query for "?"; RFC 3986 and browsers empty it."""
    base = Base(Canonicalizer(), "http://a/b/c/d;p?q")
    assert urljoin("http://a/b/c/d;p?q", "?") == "http://a/b/c/d;p?q"
    assert base.join("?") == "http://a/b/c/d;p"


def test_documented_differences_from_w3lib() -> None:
    canon = Canonicalizer()
    assert canonicalize_url("http://example.com:80/") == "http://example.com:80/"
    assert canon.canonical("http://example.com:80/") == "http://example.com/"
    assert canon.canonical("https://example.com:443/?b=1&sid=9&a=2") == "https://example.com/?a=2&b=1"
    assert canon.canonical("http://example.com/x;jsessionid=1?PHPSESSID=2") == "http://example.com/x"


def test_session_parameters_are_configurable() -> None:
    canon = Canonicalizer(frozenset({"token"}))
    assert canon.canonical("http://e.com/?token=1&sid=2") == "http://e.com/?sid=2"


def test_base_href_is_resolved_against_the_page() -> None:
    canon = Canonicalizer()
    base = Base(canon, "http://example.com/a/b.html", "../other/")
    assert base.url == "http://example.com/other/"
    assert base.join("c.html") == "http://example.com/other/c.html"
    assert Base(canon, "http://example.com/a/b.html", "javascript:x").url == "http://example.com/a/b.html"
    with pytest.raises(ValueError, match="not an absolute http"):
        Base(canon, "mailto:x@example.com")


def test_memo_is_bounded() -> None:
    canon = Canonicalizer(cache_size=10)
    base = Base(canon, "http://example.com/d/")
    for i in range(100):
        assert base.join(f"p{i}.html") == f"http://example.com/d/p{i}.html"
        assert canon.canonical(f"http://example.com/q{i}") == f"http://example.com/q{i}"
    assert len(canon._cache) <= 10 and canon._dir_memo_size <= 10


DOCS = Path("/usr/share/doc/python3.11/html")


@pytest.mark.skipif(not DOCS.is_dir(), reason="Debian's python3.11-doc is not installed")
def test_python_docs_links_match_w3lib() -> None:
    """Every link of every third python-docs page resolves as urljoin + w3lib resolve it."""
    canon = Canonicalizer()
    checked = 0
    for path in sorted(DOCS.rglob("*.html"))[::3]:
        url = "https://docs.python.org/3.11/" + str(path.relative_to(DOCS))
        base = Base(canon, url)
        hrefs = {n.attrs.get("href") or "" for n in LexborHTMLParser(path.read_bytes()).css("a[href], area[href]")}
        for href in hrefs:
            assert base.join(href) == join_reference(url, href), (url, href)
            checked += 1
    assert checked > 10_000


def test_directory_memo_never_leaks_page_dependent_results() -> None:
    """Two pages of one directory share the href memo; hrefs whose result depends on more
    than the directory (the page path, its query) must not come from it."""
    canon = Canonicalizer()
    first = Base(canon, "http://e.com/d/one.html?p=1")
    second = Base(canon, "http://e.com/d/two.html?p=2")
    for href in ["?q=1", "", "#x", "https://", "//", "http:?x", "http:", " ?y", "x.html", "/abs", "é.html"]:
        first.join(href)
        assert second.join(href) == join_reference(second.url, href), href
