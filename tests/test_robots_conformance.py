"""Google's robots.txt test vectors, run through the policy the middleware uses.

Every case not marked ``google_specific`` follows RFC 9309 and must pass. Google-specific cases
must pass too unless listed in :data:`GOOGLE_DIFFERENCES` with the reason webcrawl departs from
Google there (see docs/robots-and-safety.md). The list is empty: all 145 cases agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webcrawl.robots import RobotsPolicy

CASES_FILE = Path(__file__).parent / "data" / "robots_google_cases.json"  # source: tests/data/README.md

# name -> why webcrawl deliberately answers differently from Google's parser.
GOOGLE_DIFFERENCES: dict[str, str] = {}


def _load() -> list[dict]:
    return json.loads(CASES_FILE.read_text(encoding="utf-8"))


CASES = _load()


def test_the_whole_file_is_run():
    assert len(CASES) == 145
    assert len({case["name"] for case in CASES}) == 145


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case(case: dict):
    verdict = RobotsPolicy.parse(case["robots_txt"].encode("utf-8")).allowed(
        case["url"], case["user_agent"]
    )
    if case["name"] in GOOGLE_DIFFERENCES:
        assert case["google_specific"], "only Google-specific cases may differ"
        assert verdict != case["allowed"], f"{case['name']} agrees now: drop it from the list"
    else:
        assert verdict == case["allowed"]


def test_differences_are_google_specific():
    by_name = {case["name"]: case for case in CASES}
    for name in GOOGLE_DIFFERENCES:
        assert by_name[name]["google_specific"]
