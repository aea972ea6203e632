"""Live freshness: webcrawl and a round-robin crawler against a changing test web that knows the
truth (bench/liveweb), scored from the server's own request log.

For each seed, each crawler gets a fresh server with the same scenario, crawls it for the given
minutes at the same budget rate (credits per second), then the server stops and its log is
evaluated; crawlers alternate their order from seed to seed. Figures: value-weighted freshness
in the scored window (after the warm-up), and against the true-rate references at the run's own
spend (optimum with per-host caps, uniform; in credits and in full-page bytes), spend, cost per
detected change, coverage and politeness.

Run: ``./run bench liveweb [--minutes 10] [--seeds 1,2,3] [--budget 10] [--warmup S]
[--crawlers both|webcrawl|roundrobin] [--small] [--webcrawl-source DIR] [--keep DIR]
[--no-doc]``.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._report import write_section
from bench.liveweb.crawlers import CRAWLERS, crawl_estimate, invocation_for, run_crawler
from bench.liveweb.evaluate import evaluate_log
from bench.liveweb.params import ScenarioParams
from bench.liveweb.process import REPO, ServerProcess
from bench.liveweb.scenario import Scenario
from bench.liveweb.report import per_seed_tables, summary_tables


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="./run bench liveweb", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated scenario seeds")
    parser.add_argument("--budget", type=float, default=10.0, help="credits per second")
    parser.add_argument("--warmup", type=float, help="seconds left out of the score "
                        "(default: a fifth of the run)")
    parser.add_argument("--crawlers", choices=("both", *CRAWLERS), default="both")
    parser.add_argument("--small", action="store_true", help="the small test scenario (~150 pages)")
    parser.add_argument("--webcrawl-source", type=lambda p: Path(p).resolve(), default=REPO,
                        help="run webcrawl from this checkout (default: this repository)")
    parser.add_argument("--keep", help="keep logs and results in this folder")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each on its own server and ports (default 1: one "
                             "after another; 2 runs a seed's two crawlers side by side)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: expected at least 1, got {args.jobs}")
    try:
        args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    if not args.seed_list or args.minutes <= 0 or args.budget <= 0:
        parser.error("need at least one seed, and positive --minutes and --budget")
    return args


def run_one(crawler: str, params: ScenarioParams, budget: float, warmup: float | None,
            folder: Path, webcrawl_source: Path = REPO) -> dict[str, Any]:
    """One crawler on a fresh server for the scenario's duration, evaluated."""
    folder.mkdir(parents=True, exist_ok=True)
    with ServerProcess(params, folder) as web:
        until = web.info["origin_mono"] + params.duration
        invocation = invocation_for(crawler, web.port, params.duration, budget, folder,
                                    webcrawl_source)
        status = run_crawler(invocation, folder / "crawl", until)
    result = evaluate_log(web.log, warmup=warmup, budget_rate=budget)
    result["crawler"], result["exit_status"] = crawler, status
    if crawler == "webcrawl":
        result["estimate"] = crawl_estimate(invocation, folder / "crawl", web.info,
                                            result["window"]["start"], result["window"]["end"])
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> None:
    args = _parse([] if argv is None else argv)
    crawlers = list(CRAWLERS) if args.crawlers == "both" else [args.crawlers]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="liveweb-"))
    print(f"runs in {root}", flush=True)
    results: dict[int, dict[str, dict[str, Any]]] = {seed: {} for seed in args.seed_list}
    runs = []
    for k, seed in enumerate(args.seed_list):
        make = ScenarioParams.small if args.small else ScenarioParams
        params = make(seed=seed, minutes=args.minutes)
        order = crawlers if k % 2 == 0 else crawlers[::-1]
        runs += [(seed, crawler, params) for crawler in order]

    def one(run: tuple[int, str, ScenarioParams]) -> None:
        seed, crawler, params = run
        started = time.monotonic()
        print(f"seed {seed}: {crawler} for {args.minutes:g} min ...", flush=True)
        result = run_one(crawler, params, args.budget, args.warmup,
                         root / f"seed{seed}-{crawler}", args.webcrawl_source)
        results[seed][crawler] = result
        w = result["window"]
        print(f"  seed {seed}, {crawler}: freshness {w['freshness']:.3f}, credits {w['credits']}, "
              f"exit {result['exit_status']}, {time.monotonic() - started:.0f} s", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in [pool.submit(one, run) for run in runs]:
            future.result()
    results = {seed: {c: results[seed][c] for c in crawlers} for seed in args.seed_list}
    body = per_seed_tables(results, crawlers)
    if len(results) > 1:
        body += "\n\n" + summary_tables(results, crawlers)
    print(body)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    if not args.no_doc:
        command = "./run bench liveweb " + " ".join(_documented(argv or []))
        write_section("liveweb", "Live freshness against a changing test web", command.strip(),
                      _preamble(args, crawlers) + body)


def _documented(argv: list[str]) -> list[str]:
    """The options that shape the figures (where runs were kept does not)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--keep":
            skip = True
        elif not arg.startswith("--keep="):
            out.append(arg)
    return out


def _preamble(args: argparse.Namespace, crawlers: list[str]) -> str:
    p = (ScenarioParams.small if args.small else ScenarioParams)(minutes=args.minutes)
    pages = len(Scenario(p).pages)
    warmup = args.warmup if args.warmup is not None else 0.2 * p.duration
    return (f"{len(p.shops)} shops, {pages} pages; {args.minutes:g}-minute runs at "
            f"{args.budget:g} credits/s, seeds {args.seeds}; scored after a {warmup:g} s "
            f"warm-up; crawlers: {', '.join(crawlers)}"
            + (f"; {args.jobs} runs at a time, each on its own server" if args.jobs > 1 else "")
            + ". Shared 2-core machine: figures are "
            "indicative, ratios matter. Test web and scoring: bench/liveweb/__init__.py."
            + ("" if args.webcrawl_source == REPO else
               f" webcrawl was run from another checkout ({args.webcrawl_source}).")
            + "\n\n" + LEGEND + "\n\n")


LEGEND = """Columns: *freshness* value-weighted, time-averaged over the scored window; *its own \
estimate* the crawler's model of that figure (webcrawl's time-averaged estimate per cycle, from \
`scrapy report --json`); \
*/ optimum, credits* and */ uniform, credits* that freshness over the true-rate optimum (per-host \
caps) and the uniform allocation at the run's own page-credit rate; */ optimum, bytes* over the \
full-page optimum at its page-byte rate; *credits* all answered requests in the window; \
*spend / budget* their rate over the budget rate; *credits / change* credits per detected change \
(and its ratio to the round-robin crawler's); *coverage*, *sitemap-only*, *born* the share of \
pages existing at least 60 s before the end that were fetched (*born: max wait* the longest time \
from a page's birth to its first fetch); *short gaps* request gaps under \
a host's delay (its Crawl-delay after robots.txt); *early in 429* requests sooner than \
Retry-After after a 429 inside the throttle window."""


if __name__ == "__main__":
    main(sys.argv[1:])
