"""The real-site benchmark's truth: its walk of the files on disk, and the site files it writes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench._realsites_corpus import CORPORA, links_of, reachable_files
from bench._realsites_crawl import site_file
from webcrawl.sites import load_site_file


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_links_skip_comments_and_scripts_and_read_every_href_form() -> None:
    base, hrefs = links_of(b"""<html><head><base href="/b/"><script>x = '<a href="js.html">'</script>
        </head><!-- <a href="commented.html"> --><A HREF='upper.html'>u</A> <a class=x href=bare.html>
        <area shape=rect href="map.html"><a name="no-href">n</a><a href="q.html?a=1&amp;b=2">q</a>""")
    assert base == "/b/"
    assert hrefs == ["upper.html", "bare.html", "map.html", "q.html?a=1&b=2"]


def test_the_walk_follows_links_as_the_server_maps_them(tmp_path: Path) -> None:
    write(tmp_path, {
        "doc/index.html": '<a href="a.html#top">a</a> <a href="sub">folder</a> <a href="../out.html">out</a>'
                          '<a href="http://site/doc/abs.html">abs</a> <a href="http://other/doc/x.html">x</a>'
                          '<a href="missing.html">m</a> <a href="pic.png">png</a> <a href="notes.txt">t</a>',
        "doc/a.html": '<a href="./index.html">home</a> <a href="deep/b.html?x=1">b</a>',
        "doc/abs.html": "no links",
        "doc/sub/index.html": '<base href="/doc/deep/"><a href="c.html">c</a>',
        "doc/deep/b.html": '<a href="/doc/">up</a>',
        "doc/deep/c.html": "",
        "doc/notes.txt": '<a href="never.html">text files are not parsed</a>',
        "doc/never.html": "",
        "doc/pic.png": "",
        "doc/orphan.html": "",
        "out.html": "",
    })
    found = reachable_files(tmp_path, "/doc/", "/doc/")
    assert set(found) == {"doc/index.html", "doc/a.html", "doc/abs.html", "doc/sub/index.html",
                          "doc/deep/b.html", "doc/deep/c.html", "doc/notes.txt"}
    assert found["doc/a.html"] == (tmp_path / "doc/a.html").stat().st_size


def test_a_missing_start_page_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        reachable_files(tmp_path, "/", "/")


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda c: c.name)
def test_generated_site_files_are_valid_and_keep_to_the_prefix(corpus, tmp_path: Path) -> None:
    origin = f"http://{corpus.address}:8123"
    path = tmp_path / "site.toml"
    path.write_text(site_file(replace(corpus, root=tmp_path), origin))
    site = load_site_file(path)
    assert list(site.seeds) == [origin + corpus.start]
    assert site.politeness.min_delay_seconds == 0
    assert site.page_type_for(f"{origin}{corpus.prefix}x/y.html") is not None
    denied = site.limits.denied_url_patterns
    assert any(p.search(f"{origin}/elsewhere/page.html") for p in denied) == (corpus.prefix != "/")
    assert not any(p.search(f"{origin}{corpus.prefix}page.html") for p in denied)
