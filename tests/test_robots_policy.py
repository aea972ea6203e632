"""RFC 9309 rules that the conformance file does not cover: status codes, the parse limit,
Crawl-delay, user-agent product tokens, hostile bodies."""

from __future__ import annotations

import pytest

from webcrawl.robots import (
    MAX_CACHE_SECONDS,
    MIN_PARSE_BYTES,
    Kind,
    RobotsPolicy,
    product_token,
    verdict_for_error,
    verdict_for_response,
)

BODY = b"User-agent: *\nDisallow: /private\n"


@pytest.mark.parametrize(
    ("status", "kind", "ttl"),
    [
        (200, Kind.RULES, 3600), (203, Kind.RULES, 3600),
        (301, Kind.ALLOW_ALL, 3600),  # a redirect left unfollowed: "unavailable"
        (400, Kind.ALLOW_ALL, 3600), (401, Kind.ALLOW_ALL, 3600), (403, Kind.ALLOW_ALL, 3600),
        (404, Kind.ALLOW_ALL, 3600), (410, Kind.ALLOW_ALL, 3600),
        (429, Kind.DISALLOW_ALL, 60), (500, Kind.DISALLOW_ALL, 60),
        (503, Kind.DISALLOW_ALL, 60), (599, Kind.DISALLOW_ALL, 60), (100, Kind.DISALLOW_ALL, 60),
    ],
)
def test_status_rules(status, kind, ttl):
    verdict = verdict_for_response(status, BODY, ttl=3600, error_ttl=60)
    assert verdict.policy.kind is kind
    assert verdict.ttl == ttl
    assert verdict.status == status


def test_verdicts_never_outlive_a_day():
    assert verdict_for_response(200, BODY, ttl=10 * 86400, error_ttl=60).ttl == MAX_CACHE_SECONDS
    assert verdict_for_response(500, BODY, ttl=86400, error_ttl=10 * 86400).ttl == MAX_CACHE_SECONDS
    assert verdict_for_error(error_ttl=10 * 86400).ttl == MAX_CACHE_SECONDS


def test_network_error_disallows_everything_but_robots_txt():
    policy = verdict_for_error(error_ttl=60).policy
    assert not policy.allowed("http://a.example/", "webcrawl")
    assert not policy.allowed("http://a.example/page?x=1", "webcrawl")
    assert policy.allowed("http://a.example/robots.txt", "webcrawl")


def test_allow_all():
    assert RobotsPolicy.allow_all().allowed("http://a.example/private", "webcrawl")


def test_rules():
    policy = RobotsPolicy.parse(BODY)
    assert policy.allowed("http://a.example/public", "webcrawl")
    assert not policy.allowed("http://a.example/private/x", "webcrawl")
    assert policy.allowed("http://a.example/robots.txt", "webcrawl")


def test_first_500_kib_are_parsed_and_a_cut_line_is_dropped():
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * 1000 + b"\n"
    body = head + filler * ((MIN_PARSE_BYTES - len(head)) // len(filler))
    # A line straddling the limit: cut in half it would read "Disallow: /" (everything).
    straddle = b"Disallow: /" + b"y" * 2000 + b"\n"
    body += straddle + b"Disallow: /late\n"
    assert len(body) > MIN_PARSE_BYTES
    policy = RobotsPolicy.parse(body)
    assert not policy.allowed("http://a.example/early", "webcrawl")
    assert policy.allowed("http://a.example/late", "webcrawl")
    assert policy.allowed("http://a.example/other", "webcrawl")
    bigger = RobotsPolicy.parse(body, max_bytes=2 * MIN_PARSE_BYTES)
    assert not bigger.allowed("http://a.example/late", "webcrawl")


def test_bom_and_crlf():
    policy = RobotsPolicy.parse(b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /x\r\n")
    assert not policy.allowed("http://a.example/x", "webcrawl")


def test_crawl_delay_of_the_matching_group():
    policy = RobotsPolicy.parse(
        b"User-agent: *\nCrawl-delay: 2\n\nUser-agent: WebCrawl\nCrawl-delay: 7.5\nDisallow: /x\n"
    )
    assert policy.crawl_delay("webcrawl") == 7.5
    assert policy.crawl_delay("otherbot") == 2.0
    assert RobotsPolicy.parse(b"User-agent: *\nCrawl-delay: soon\n").crawl_delay("a") is None
    assert RobotsPolicy.disallow_all().crawl_delay("a") is None


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("webcrawl/0.1 (+mailto:ops@example.com)", "webcrawl"),
        ("WebCrawl-Demo_bot/2", "webcrawl-demo_bot"),
        ("  Foo Bar", "foo"),
        ("*", "*"),
        ("7up", ""),
    ],
)
def test_product_token(header, token):
    assert product_token(header) == token


def test_group_match_is_by_product_token_not_substring():
    policy = RobotsPolicy.parse(b"User-agent: web\nDisallow: /\n")
    assert policy.allowed("http://a.example/x", "webcrawl")
    assert not policy.allowed("http://a.example/x", "WEB")


def test_groups_with_the_same_agent_are_merged():
    policy = RobotsPolicy.parse(
        b"User-agent: webcrawl\nDisallow: /a\n\nUser-agent: other\nDisallow: /\n"
        b"\nUser-agent: webcrawl\nDisallow: /b\n"
    )
    assert not policy.allowed("http://a.example/a", "webcrawl")
    assert not policy.allowed("http://a.example/b", "webcrawl")
    assert policy.allowed("http://a.example/c", "webcrawl")


@pytest.mark.parametrize(
    "body",
    [
        bytes(range(256)) * 64,  # binary garbage
        b"\xff\xfe" + "User-agent: *\nDisallow: /\n".encode("utf-16-le"),
        b"Disallow: /\n" * 10,  # rules before any user-agent
        b"User-agent: *\nDisallow: " + b"*" * 100_000 + b"x\n",  # long, wildcard-heavy line
        b"User-agent: *\nAllow: /$$$\nDisallow: /%zz%\n",
        b"",
    ],
)
def test_hostile_bodies_parse_and_answer(body):
    policy = RobotsPolicy.parse(body)
    assert isinstance(policy.allowed("http://a.example/page", "webcrawl"), bool)


def test_cached_form_round_trips():
    policy = RobotsPolicy.parse(BODY)
    again = RobotsPolicy(policy.kind, policy.rules)
    assert again == policy
    assert not again.allowed("http://a.example/private", "webcrawl")
