"""Score a crawl's change events (``scrapy events <crawl> -o FILE``, JSON lines) against the
truth: the events owed for the fetches the server logged (:mod:`bench.liveweb.expected_events`).

    python -m bench.liveweb.events LOG EVENTS [--site shops] [--site-file FILE] [--json]

Events are matched to what was owed per page and kind: first those whose ``previous`` and
``record`` are right (the closest in time), then the rest (the closest in time). An owed event
with a match is *found*; a found event whose every field keeps the contract is *correct*.
Events left over are *false*: on a URL the truth does not know, a second event for one change,
an event for a temporary redirect (302/307), or one the log does not explain. Identical copies
of an event (same ``event_id``) count once, as re-deliveries; ids that two different events
share are reported.
Record fields are compared as text (whitespace collapsed); a typed price (``{"amount": ...}``
or a number) is compared by its amount.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.liveweb.events_check import (EVENT_FIELDS, KINDS, TIME_TOLERANCE_SECONDS, TRUTH,
                                        EventChecker, locate)
from bench.liveweb.expected_events import Expected, expected_events, product_fetches
from bench.liveweb.params import ScenarioParams
from bench.liveweb.process import read_header, read_log
from bench.liveweb.scenario import Scenario

__all__ = ["EVENT_FIELDS", "KINDS", "page_type_fields", "read_events", "score_events",
           "score_files"]

SITE_FILE = Path(__file__).resolve().parent / "sites" / "newcomer.toml"
EXAMPLES = 8


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a JSON-lines file (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def page_type_fields(site_file: str | Path = SITE_FILE, page_type: str = "product"
                     ) -> tuple[list[str], list[str]]:
    """The field names and the volatile ones of ``page_type`` in a site file."""
    site = tomllib.loads(Path(site_file).read_text())
    kind = next(t for t in site["page_types"] if t["name"] == page_type)
    return list(kind.get("fields", {})), list(kind.get("volatile", []))


def _dedupe(events: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The events with identical copies (a re-delivery: same id, same content) left out, and
    the count of those and of ids two different events share; an event without a string id is
    kept (the checker reports its id)."""
    first: dict[str, list[dict[str, Any]]] = {}
    kept, repeats = [], {"duplicate_ids": 0, "redelivered": 0}
    for ev in events:
        key = ev.get("event_id")
        if isinstance(key, str) and key:
            copies = first.setdefault(key, [])
            if ev in copies:
                repeats["redelivered"] += 1
                continue
            repeats["duplicate_ids"] += len(copies) == 1
            copies.append(ev)
        kept.append(ev)
    return kept, repeats


Pair = tuple[Expected, dict[str, Any]]


def _detected(ev: dict[str, Any]) -> float:
    value = ev.get("detected_at")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _match(owed: list[Expected], events: list[dict[str, Any]],
           fits: Callable[[Expected, dict[str, Any]], bool]) -> list[Pair]:
    """Pairs owed events with events of their page and kind: those that ``fit`` first, then the
    rest, each time the closest in time."""
    pairs: list[Pair] = []
    free = list(range(len(events)))
    left = list(owed)
    for strict in (True, False):
        unmatched = []
        for x in left:
            best = None
            for i in free:
                ev = events[i]
                if ev["kind"] != x.kind or (strict and not fits(x, ev)):
                    continue
                gap = min(abs(_detected(ev) - t) for t in x.times)
                if best is None or gap < best[0]:
                    best = (gap, i)
            if best is None:
                unmatched.append(x)
            else:
                free.remove(best[1])
                pairs.append((x, events[best[1]]))
        left = unmatched
    return pairs


def score_events(sc: Scenario, entries: Iterable[dict[str, Any]],
                 events: Sequence[dict[str, Any]], *, site: str, fields: Sequence[str],
                 volatile: Sequence[str] = (), page_type: str = "product") -> dict[str, Any]:
    """Completeness and correctness of ``events`` against the log ``entries`` (see the module
    docstring); the first mismatches, missing and false events are listed for debugging."""
    entries = list(entries)
    unknown = [f for f in fields if f not in volatile and f not in TRUTH]
    if unknown:
        raise ValueError(f"no truth for the record fields {unknown}; known: {sorted(TRUTH)}")
    owed = expected_events(sc, entries)
    fetches = product_fetches(entries)
    kept, repeats = _dedupe(events)
    checker = EventChecker(sc, site, page_type, fields, volatile)
    by_page: dict[int, list[dict[str, Any]]] = defaultdict(list)
    false: list[tuple[str, dict[str, Any]]] = []
    for ev in kept:
        where = locate(sc, ev.get("url"))
        if where is None or ev.get("kind") not in KINDS:
            false.append(("unknown URL or kind", ev))
        else:
            by_page[where[0].pid].append(ev)
    owed_by_page: dict[int, list[Expected]] = defaultdict(list)
    for x in owed:
        owed_by_page[x.page].append(x)
    pairs: list[Pair] = []
    for pid in sorted(set(by_page) | set(owed_by_page)):
        mine = _match(owed_by_page[pid], by_page[pid], checker.fits)
        pairs += mine
        used = {id(ev) for _, ev in mine}
        for ev in by_page[pid]:
            if id(ev) not in used:
                false.append((_why_false(ev, fetches.get(pid, []), mine), ev))
    problems = {id(x): checker.problems(x, ev) for x, ev in pairs}
    matched = {id(x) for x, _ in pairs}
    by_kind: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    for x in owed:
        row = by_kind[x.kind]
        if not x.required:
            row["tolerated"] += id(x) in matched
            continue
        row["expected"] += 1
        row["found"] += id(x) in matched
        row["correct"] += id(x) in matched and not problems[id(x)]
    for _, ev in false:
        if ev.get("kind") in by_kind:
            by_kind[ev["kind"]]["false"] += 1
    expected = sum(r["expected"] for r in by_kind.values())
    found = sum(r["found"] for r in by_kind.values())
    correct = sum(r["correct"] for r in by_kind.values())
    return {
        "events": len(events), **repeats, "expected": expected, "found": found,
        "correct": correct, "complete": found / expected if expected else None,
        "correct_share": correct / expected if expected else None, "false": len(false),
        "false_by_reason": dict(Counter(reason for reason, _ in false)),
        "by_kind": {k: {m: int(v.get(m, 0)) for m in ("expected", "found", "correct", "false",
                                                       "tolerated")} for k, v in by_kind.items()},
        "mismatches": [{"kind": x.kind, "url": ev.get("url"), "problems": problems[id(x)]}
                       for x, ev in pairs if problems[id(x)]][:EXAMPLES],
        "missing": [{"kind": x.kind, "page": x.page, "path": x.path, "at": x.times[0]}
                    for x in owed if x.required and id(x) not in matched][:EXAMPLES],
        "false_events": [{"why": why, "kind": ev.get("kind"), "url": ev.get("url"),
                          "detected_at": ev.get("detected_at")} for why, ev in false][:EXAMPLES],
    }


def _why_false(ev: dict[str, Any], log: list[dict[str, Any]],
               pairs: list[Pair]) -> str:
    """Why an event nothing owed was reported: its URL's last fetch by its detection time was
    a temporary redirect, a matched event of its kind exists (a repeat), or neither."""
    if ev.get("kind") in ("moved", "removed"):
        where = urlsplit(str(ev.get("url"))).path
        before = [e for e in log if e["path"] == where
                  and e["wall"] <= _detected(ev) + TIME_TOLERANCE_SECONDS]
        if before and before[-1]["status"] in (302, 307):
            return "temporary redirect"
    if any(x.kind == ev.get("kind") for x, _ in pairs):
        return "repeated"
    return "unexplained"


def score_files(log: str | Path, events_file: str | Path, *, site: str = "shops",
                site_file: str | Path = SITE_FILE, page_type: str = "product") -> dict[str, Any]:
    """:func:`score_events` for a finished server log and an events file."""
    header = read_header(log)
    sc = Scenario(ScenarioParams.from_dict(header["params"]))
    fields, volatile = page_type_fields(site_file, page_type)
    return score_events(sc, read_log(log), read_events(events_file), site=site, fields=fields,
                        volatile=volatile, page_type=page_type)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.liveweb.events",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("events")
    parser.add_argument("--site", default="shops", help="the site name events carry")
    parser.add_argument("--site-file", default=str(SITE_FILE))
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    try:
        result = score_files(args.log, args.events, site=args.site, site_file=args.site_file)
    except (OSError, ValueError, KeyError) as exc:
        parser.error(f"cannot score {args.events}: {exc}")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"complete {result['complete']}, correct {result['correct_share']}, "
              f"false {result['false']}, duplicate ids {result['duplicate_ids']}")
        for kind, row in result["by_kind"].items():
            print(f"  {kind}: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
