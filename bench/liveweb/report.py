"""Markdown tables of evaluated runs: one per seed, and medians with their spread over seeds;
for lifecycle runs, the change-event targets per seed and the events by kind."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.liveweb.params import ScenarioParams

__all__ = ["LIFECYCLE_METRICS", "METRICS", "lifecycle_tables", "per_seed_tables", "shop_labels",
           "summary_tables"]

Results = dict[int, dict[str, dict[str, Any]]]  # seed -> crawler -> evaluate_log() result


def _cov(key: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda r: r["coverage"][key]["share"]


#: (column, how to read it from one result); None when it does not apply.
METRICS: list[tuple[str, Callable[[dict[str, Any]], float | None]]] = [
    ("freshness", lambda r: r["window"]["freshness"]),
    ("its own estimate", lambda r: r.get("estimate")),
    ("/ optimum, credits", lambda r: r["references"]["credits"]["vs_optimum"]),
    ("/ uniform, credits", lambda r: r["references"]["credits"]["vs_uniform"]),
    ("/ optimum, bytes", lambda r: r["references"]["bytes"]["vs_optimum"]),
    ("credits", lambda r: r["window"]["credits"]),
    ("spend / budget", lambda r: r["window"].get("spend_vs_budget")),
    ("credits / change", lambda r: r["window"]["credits_per_change"]),
    ("coverage", _cov("all")),
    ("sitemap-only", _cov("sitemap_only")),
    ("born", _cov("born")),
    ("born: max wait s", lambda r: r["coverage"]["born"].get("max_wait")),
    ("short gaps", lambda r: r["politeness"]["short_gaps"]),
    ("early in 429", lambda r: r["politeness"]["early_in_429"]),
]


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, int) or float(x).is_integer() and abs(x) >= 10:
        return f"{int(x):,}"
    return f"{x:.3f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def shop_labels(params: dict[str, Any]) -> list[str]:
    p = ScenarioParams.from_dict(params)
    labels = []
    for host, s in zip(p.hosts, p.shops):
        traits = [f"validators {s.validators}",
                  f"lastmod {s.lastmod}" if s.sitemap else "no sitemap"]
        traits += ["sitemap index"] * s.sitemap_index
        traits += ["sitemap only in robots.txt"] * (not s.sitemap_in_site_file)
        traits += [f"Crawl-delay {s.crawl_delay:g}"] * (s.crawl_delay > 0)
        traits += ["429 window"] * s.throttled
        labels.append(f"{host} ({', '.join(traits)})")
    return labels


def _vs_baseline(by: dict[str, dict[str, Any]], crawler: str) -> str:
    mine, base = by[crawler]["window"]["credits_per_change"], by.get("roundrobin", {})
    theirs = base["window"]["credits_per_change"] if base else None
    return _fmt(mine / theirs) if mine and theirs else "-"


def per_seed_tables(results: Results, crawlers: list[str]) -> str:
    out = []
    for seed, by in results.items():
        rows = [[c] + [_fmt(fn(by[c])) for _, fn in METRICS] + [_vs_baseline(by, c)]
                for c in crawlers if c in by]
        out.append(f"Seed {seed}:\n\n" + _table(["crawler"] + [m for m, _ in METRICS]
                                                  + ["cost/change vs round-robin"], rows))
        any_result = next(iter(by.values()))
        shops = []
        for s, label in enumerate(shop_labels(any_result["params"])):
            values = [by[c]["window"]["freshness_by_shop"][s] for c in crawlers if c in by]
            ratio = (_fmt(values[0] / values[1]) if len(values) == 2 and values[1] else "-")
            shops.append([label] + [_fmt(v) for v in values] + [ratio])
        names = [c for c in crawlers if c in by]
        ratio_name = f"{names[0]} / {names[1]}" if len(names) == 2 else "ratio"
        out.append(_table(["shop: freshness"] + names + [ratio_name], shops))
    return "\n\n".join(out)


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return _fmt(values[0])
    return f"{_fmt(statistics.median(values))} [{_fmt(min(values))}-{_fmt(max(values))}]"


def summary_tables(results: Results, crawlers: list[str]) -> str:
    """Median [min-max] over seeds of each metric, per crawler, and per-shop freshness."""
    rows = []
    for c in crawlers:
        runs = [by[c] for by in results.values() if c in by]
        row = [c]
        for _, fn in METRICS:
            row.append(_spread([v for v in (fn(r) for r in runs) if v is not None]))
        ratios = []
        for by in results.values():
            mine = by.get(c, {}).get("window", {}).get("credits_per_change")
            base = by.get("roundrobin", {}).get("window", {}).get("credits_per_change")
            if mine and base:
                ratios.append(mine / base)
        rows.append(row + [_spread(ratios)])
    text = (f"Over {len(results)} seed(s), median [min-max]:\n\n"
            + _table(["crawler"] + [m for m, _ in METRICS] + ["cost/change vs round-robin"], rows))
    first = next(iter(next(iter(results.values())).values()))
    shop_rows = []
    for s, label in enumerate(shop_labels(first["params"])):
        row = [label]
        for c in crawlers:
            row.append(_spread([by[c]["window"]["freshness_by_shop"][s]
                                for by in results.values() if c in by]))
        shop_rows.append(row)
    return text + "\n\n" + _table(["shop: freshness"] + crawlers, shop_rows)


#: (column, how to read it from one lifecycle result); the issue's targets in the headers.
LIFECYCLE_METRICS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("events complete (100%)", lambda r: _share(r["events"], "complete")),
    ("events correct (100%)", lambda r: _share(r["events"], "correct_share")),
    ("owed", lambda r: r["events"]["expected"] if r["events"] else None),
    ("false", lambda r: r["events"]["false"] if r["events"] else None),
    ("duplicate ids", lambda r: r["events"]["duplicate_ids"] if r["events"] else None),
    ("dead: most refetches (<= 2)", lambda r: r["lifecycle"]["dead"]["max"]),
    ("dead pages seen", lambda r: r["lifecycle"]["dead"]["pages"]),
    ("moved: most old-URL fetches (<= 1)", lambda r: r["lifecycle"]["moved"]["max"]),
    ("moves seen", lambda r: r["lifecycle"]["moved"]["pages"]),
    ("restores seen", lambda r: "{seen}/{restored}".format(**r["lifecycle"]["restores"])),
    ("births w/o sitemap within 2 cycles", lambda r: "{within_two}/{pages}".format(
        **r["births"]["no_sitemap"])),
    ("their longest wait, cycles", lambda r: r["births"]["no_sitemap"]["max_cycles"]),
    ("freshness", lambda r: r["window"]["freshness"]),
    ("/ optimum, credits", lambda r: r["references"]["credits"]["vs_optimum"]),
    ("killed", lambda r: "yes" if r.get("killed") else "no"),
]


def _share(events: dict[str, Any] | None, key: str) -> str:
    if not events:
        return "no events"
    value = events[key]
    return "-" if value is None else f"{100 * value:.1f}%"


def _cell(x: Any) -> str:
    return x if isinstance(x, str) else _fmt(x)


def lifecycle_tables(results: dict[int, dict[str, Any]]) -> str:
    """One row per seed of the lifecycle targets, then the events by kind over all seeds."""
    rows = [[str(seed)] + [_cell(fn(r)) for _, fn in LIFECYCLE_METRICS]
            for seed, r in results.items()]
    out = _table(["seed"] + [m for m, _ in LIFECYCLE_METRICS], rows)
    kinds: dict[str, Counter[str]] = {}
    for r in results.values():
        for kind, row in ((r["events"] or {}).get("by_kind") or {}).items():
            kinds.setdefault(kind, Counter()).update(row)
    if kinds:
        columns = ("expected", "found", "correct", "false", "tolerated")
        out += "\n\nEvents by kind, all seeds (*owed* by the fetches the server logged; " \
               "*tolerated*: a `new` for a moved page's new URL fetched before its 301):\n\n"
        out += _table(["kind", "owed", "found", "correct", "false", "tolerated"],
                      [[k] + [str(c[m]) for m in columns] for k, c in kinds.items()])
    errors = [f"seed {seed}: {r['events_error']}" for seed, r in results.items()
              if r.get("events_error")]
    if errors:
        out += "\n\nNo events read: " + "; ".join(e.splitlines()[0] for e in errors)
    return out
