"""Planner benchmark: time to plan one cycle over 1,000,000 known pages (target: at most 10 s).

Times ``webcrawl.revisit.plan_cycle`` (scoring every page with value x gain / cost, the
verification sample, the priority pass, the re-estimation pass) on synthetic columns, plus the
step that feeds it after a prior refit (group priors by empirical Bayes and every page's
posterior rate), and, side by side, the obvious pure-Python planner (the seed's
``freshness_gain`` per page, ``sorted``, a budget loop). Runs alternate; medians of the runs.

Run: ``./run bench planner`` (or ``python -m bench planner``).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from bench._report import table, write_section
from webcrawl.revisit import EffectiveData, GammaPrior, PlanInput, Reserves, fit_group_priors, plan_cycle, posterior_mean

PAGES = int(os.environ.get("WEBCRAWL_BENCH_PLANNER_PAGES", 1_000_000))
RUNS = 5
DAY = 86400.0


def columns(n: int, rng: np.random.Generator) -> tuple[PlanInput, EffectiveData, np.ndarray]:
    rate = 1 / np.exp(rng.uniform(np.log(900), np.log(365 * DAY), n))
    since = rng.uniform(0, 60 * DAY, n)
    pages = PlanInput(rate=rate, since=since, value=rng.choice([1.0, 3.0, 10.0], n), cost=rng.lognormal(np.log(40), 0.7, n))
    exposure = rng.uniform(0, 200 * DAY, n)
    data = EffectiveData(rng.poisson(rate * exposure).astype(float), exposure, np.zeros(n))
    return pages, data, rng.integers(0, 50, n)


def python_plan(pages: PlanInput, budget: float) -> list[int]:
    """The seed's scoring, one page at a time, then sort and take within the budget."""

    def freshness_gain(rate: float, since: float, interval: float) -> float:
        p_stale = 1 - math.exp(-rate * since)
        return p_stale * ((1 - math.exp(-rate * interval)) / rate if rate > 0 else interval)

    rate, since, value, cost = (c.tolist() for c in (pages.rate, pages.since, pages.value, pages.cost))
    score = [value[i] * freshness_gain(rate[i], since[i], since[i]) / cost[i] for i in range(len(rate))]
    chosen, left = [], budget
    for i in sorted(range(len(score)), key=score.__getitem__, reverse=True):
        if cost[i] > left:
            break
        chosen.append(i)
        left -= cost[i]
    return chosen


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    rng = np.random.default_rng(7)
    pages, data, group = columns(PAGES, rng)
    budget = pages.cost.sum() / 30  # a cycle affords a thirtieth of a full recrawl
    reserves = Reserves()
    fallback = GammaPrior.from_mean(1 / (7 * DAY))

    def plan() -> None:
        plan_cycle(pages, budget, reserves, rng=np.random.default_rng(1), discovery_demand=budget)

    def refit() -> None:
        priors = fit_group_priors(group, data, fallback, ngroups=50)
        posterior_mean(data.events, data.exposure, priors.shape[group], priors.rate[group])

    cases: dict[str, Callable[[], object]] = {
        "plan_cycle (numpy)": plan,
        "fit_group_priors + posterior_mean (numpy)": refit,
        "pure-Python planner (seed's freshness_gain, sorted)": lambda: python_plan(pages, budget),
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for run in range(RUNS):
        for name, fn in cases.items():  # alternate A B C A B C ...
            if name.startswith("pure") and run >= 2:
                continue  # slow; two runs are enough to show the gap
            results[name].append(timed(fn))
        print(f"run {run + 1}/{RUNS} done", flush=True)
    chosen = plan_cycle(pages, budget, reserves, rng=np.random.default_rng(1), discovery_demand=budget)
    rows = []
    base = statistics.median(w for w, _ in results["plan_cycle (numpy)"])
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        rows.append([name, len(runs), wall, cpu, PAGES / wall, wall / base])
    body = (
        f"{PAGES:,} known pages, budget a thirtieth of a full recrawl (the plan: {len(chosen.revisit):,} revisits, "
        f"{len(chosen.reestimation):,} re-estimations, {len(chosen.verification):,} verifications). "
        "Target: planning at most 10 s.\n\n"
        + table(["step", "runs", "median wall s", "median CPU s", "pages per s", "vs plan_cycle"], rows)
    )
    write_section("planner", "Cycle planner at 1,000,000 pages", "./run bench planner", body)
    print(table(["step", "runs", "wall s", "CPU s", "pages/s", "ratio"], rows))


if __name__ == "__main__":
    main()
