"""Markdown tables of evaluated runs: one per seed, and medians with their spread over seeds."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from bench.liveweb.params import ScenarioParams

__all__ = ["METRICS", "per_seed_tables", "shop_labels", "summary_tables"]

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
        traits = [f"validators {s.validators}", f"lastmod {s.lastmod}"]
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
