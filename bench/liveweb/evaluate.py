"""Score a run from the server's request log, its header and the scenario (nothing else).

    python -m bench.liveweb.evaluate LOG [--warmup S] [--end S] [--budget CREDITS_PER_S] [--json]

Scored window: [warmup, end] seconds from the origin (default warm-up: a fifth of the run, the
first discovery pass; default end: the scenario's duration); the whole run [0, end] is reported
too. Costs: a credit per answered request (status < 500 and not 429: 304s, redirects and 404s
cost one, failures are free), bytes as written by the server; every request counts (robots.txt,
sitemaps, listings, failures). The references (:mod:`bench.liveweb.oracle`) get the run's own
spend rate on page fetches in the window, in credits (one per page) and in bytes (full pages).
With a lifecycle, a product's dead spans count as the time before its birth does (not scored:
it does not exist), and a moved product is one page at either URL. Change events are scored by
:mod:`bench.liveweb.events`, the lifecycle's fetch costs by :mod:`bench.liveweb.lifecycle_costs`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.liveweb import oracle
from bench.liveweb.freshness import History, fresh_seconds, histories
from bench.liveweb.params import ScenarioParams
from bench.liveweb.politeness import politeness
from bench.liveweb.process import read_header, read_log
from bench.liveweb.scenario import Scenario

__all__ = ["evaluate_entries", "evaluate_log", "markdown"]

PAGE_KINDS = ("hub", "category", "product")


def _billable(e: dict[str, Any]) -> bool:
    return e["status"] < 500 and e["status"] != 429


def _window_metrics(sc: Scenario, entries: list[dict[str, Any]], hist: dict[int, History],
                    start: float, end: float, budget_rate: float | None) -> dict[str, Any]:
    span = max(end - start, 1e-9)
    fresh = np.zeros(len(sc.hosts))
    exist = np.zeros(len(sc.hosts))
    for page in sc.pages:
        spans = sc.alive(page, start, end)
        if not spans:
            continue
        h = hist.get(page.pid, History())
        times, held = h.arrays()
        for lo, hi in spans:
            fresh[page.shop] += page.value * fresh_seconds(page.events, times, held, lo, hi)
            exist[page.shop] += page.value * (hi - lo)
    inside = [e for e in entries if start <= e["t"] < end]
    pages = [e for e in inside if e["kind"] in PAGE_KINDS]
    changes = sum(c for h in hist.values() for t, c in zip(h.times, h.changed) if start <= t < end)
    credits = sum(_billable(e) for e in inside)
    spent = sum(e["bytes"] for e in inside)
    out = {
        "start": start, "end": end,
        "freshness": float(fresh.sum() / exist.sum()) if exist.sum() else 0.0,
        "freshness_by_shop": [float(f / x) if x else 0.0 for f, x in zip(fresh, exist)],
        "requests": len(inside), "credits": credits, "bytes": spent,
        "page_credits": sum(_billable(e) for e in pages), "page_bytes": sum(e["bytes"] for e in pages),
        "not_modified": sum(e["status"] == 304 for e in pages),
        "changes_detected": changes,
        "credits_per_change": credits / changes if changes else None,
        "bytes_per_change": spent / changes if changes else None,
        "credits_per_second": credits / span,
    }
    if budget_rate:
        out["spend_vs_budget"] = credits / span / budget_rate
    return out


def _coverage(sc: Scenario, hist: dict[int, History], end: float, cycle: float) -> dict[str, Any]:
    def share(pages: list[Any]) -> dict[str, Any]:
        firsts = [hist[p.pid].first for p in pages if p.pid in hist and hist[p.pid].first <= end]
        waits = [hist[p.pid].first - p.birth for p in pages
                 if p.pid in hist and hist[p.pid].first <= end]
        return {"pages": len(pages), "fetched": len(firsts),
                "share": len(firsts) / len(pages) if pages else None,
                "median_wait": float(np.median(waits)) if waits else None,
                "max_wait": float(np.max(waits)) if waits else None}

    eligible = [p for p in sc.pages if p.birth <= end - cycle]
    return {"all": share(eligible),
            "sitemap_only": share([p for p in eligible if p.sitemap_only and not p.born_in_run]),
            "born": share([p for p in eligible if p.born_in_run]),
            "by_shop": [share([p for p in eligible if p.shop == s]) for s in range(len(sc.hosts))]}


def _references(sc: Scenario, entries: list[dict[str, Any]], window: dict[str, Any]
                ) -> dict[str, Any]:
    start, end = window["start"], window["end"]
    span = max(end - start, 1e-9)
    pages = [p for p in sc.pages if p.birth < end]
    value = np.array([p.value for p in pages])
    lam = np.array([sc.empirical_rate(p, start, end) for p in pages])
    weight = np.array([sum(b - a for a, b in sc.alive(p, start, end)) / span for p in pages])
    host = np.array([p.shop for p in pages])
    caps = np.array([1.0 / max(sc.params.min_delay, s.crawl_delay) for s in sc.params.shops])
    heads = [e["bytes"] - e["body"] for e in entries if e["status"] == 200 and e["kind"] in PAGE_KINDS]
    head = float(np.median(heads)) if heads else 250.0
    out: dict[str, Any] = {"caps": caps.tolist(), "header_bytes": head}
    for unit, cost, rate in (("credits", np.ones(len(pages)), window["page_credits"] / span),
                             ("bytes", np.array([p.size + head for p in pages]),
                              window["page_bytes"] / span)):
        args = (host, caps, weight)
        f_opt = oracle.optimal_frequencies(value, lam, cost, rate, *args)
        f_uni = oracle.uniform_frequencies(cost, rate, *args)
        f_pro = oracle.proportional_frequencies(lam, cost, rate, *args)
        out[unit] = {"rate": rate,
                     "optimum": oracle.value_freshness(value, lam, f_opt, weight),
                     "uniform": oracle.value_freshness(value, lam, f_uni, weight),
                     "proportional": oracle.value_freshness(value, lam, f_pro, weight),
                     "unvisited": int(np.count_nonzero((f_opt == 0) & (lam > 0)))}
    measured = window["freshness"]
    for unit in ("credits", "bytes"):
        for ref in ("optimum", "uniform", "proportional"):
            denominator = out[unit][ref]
            out[unit][f"vs_{ref}"] = measured / denominator if denominator else None
    return out


def evaluate_entries(sc: Scenario, entries: list[dict[str, Any]], *, warmup: float | None = None,
                     end: float | None = None, cycle: float = 60.0,
                     budget_rate: float | None = None) -> dict[str, Any]:
    """The full report of a run as a dict (see the module docstring for the definitions)."""
    duration = sc.params.duration
    end = duration if end is None else end
    warmup = 0.2 * duration if warmup is None else warmup
    entries = [e for e in entries if e["t"] < end]
    hist = histories(entries)
    window = _window_metrics(sc, entries, hist, warmup, end, budget_rate)
    return {
        "params": sc.params.to_dict(), "warmup": warmup, "end": end, "cycle": cycle,
        "budget_rate": budget_rate,
        "window": window,
        "whole": _window_metrics(sc, entries, hist, 0.0, end, budget_rate),
        "coverage": _coverage(sc, hist, end, cycle),
        "politeness": politeness(entries, sc),
        "references": _references(sc, entries, window),
    }


def evaluate_log(log: str | Path, **options: Any) -> dict[str, Any]:
    """:func:`evaluate_entries` for a finished log and its header file."""
    header = read_header(log)
    sc = Scenario(ScenarioParams.from_dict(header["params"]))
    return evaluate_entries(sc, read_log(log), **options)


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def markdown(result: dict[str, Any], name: str = "run") -> str:
    """The headline figures of one evaluated run as a Markdown table."""
    w, ref, cov, pol = (result["window"], result["references"], result["coverage"],
                        result["politeness"])
    rows = [
        ("value-weighted freshness (window)", _fmt(w["freshness"])),
        ("value-weighted freshness (whole run)", _fmt(result["whole"]["freshness"])),
        ("/ optimum, same credits", _fmt(ref["credits"]["vs_optimum"])),
        ("/ uniform, same credits", _fmt(ref["credits"]["vs_uniform"])),
        ("/ proportional, same credits", _fmt(ref["credits"]["vs_proportional"])),
        ("/ optimum, same bytes (full pages)", _fmt(ref["bytes"]["vs_optimum"])),
        ("freshness by shop", ", ".join(_fmt(f) for f in w["freshness_by_shop"])),
        ("credits (window), per second", f"{w['credits']}, {w['credits_per_second']:.2f}"),
        ("spend / budget rate", _fmt(w.get("spend_vs_budget"))),
        ("changes detected", str(w["changes_detected"])),
        ("credits per detected change", _fmt(w["credits_per_change"], 2)),
        ("bytes per detected change", _fmt(w["bytes_per_change"], 0)),
        ("coverage all / sitemap-only / born",
         " / ".join(_fmt(cov[k]["share"]) for k in ("all", "sitemap_only", "born"))),
        ("politeness: short gaps, early in 429", f"{pol['short_gaps']}, {pol['early_in_429']}"),
    ]
    lines = [f"| {name} | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.liveweb.evaluate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--warmup", type=float)
    parser.add_argument("--end", type=float)
    parser.add_argument("--cycle", type=float, default=60.0)
    parser.add_argument("--budget", type=float, help="budget rate, credits per second")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    try:
        result = evaluate_log(args.log, warmup=args.warmup, end=args.end, cycle=args.cycle,
                          budget_rate=args.budget)
    except (OSError, ValueError, KeyError) as exc:
        parser.error(f"cannot evaluate {args.log}: {exc}")
    print(json.dumps(result, indent=1) if args.json else markdown(result, Path(args.log).stem))
    return 0


if __name__ == "__main__":
    sys.exit(main())
