"""Which known pages a lister's reading has rechecked: a page whose own revisit is in flight, or
found it gone or moved, is not (that answer tells its fate); one the revisit found where it was is."""

from __future__ import annotations

from importlib.resources import files

from webcrawl.parse import PageParser, rules_for_site
from webcrawl.sites import load_site_file
from webcrawl.spiders._listers import Listers

PAGE = "http://127.0.0.1:8000/products/1.html"


def listers() -> Listers:
    site = load_site_file(files("webcrawl.sites") / "demo.toml")
    return Listers(site, PageParser(rules_for_site(site)))


def test_a_page_not_revisited_lately_is_rechecked_once() -> None:
    lister = listers()
    assert lister.to_recheck({PAGE}) == ([PAGE], 0)
    assert lister.to_recheck({PAGE}) == ([], 0)  # several listers stop showing it: one fetch


def test_a_revisit_in_flight_or_that_found_it_gone_tells_its_fate() -> None:
    lister = listers()
    lister.revisiting(PAGE)
    assert lister.to_recheck({PAGE}) == ([], 0)


def test_a_revisit_that_found_the_page_where_it_was_tells_nothing_of_later() -> None:
    lister = listers()
    lister.revisiting(PAGE)
    lister.still_there(PAGE)
    assert lister.to_recheck({PAGE}) == ([PAGE], 0)
