"""Live freshness: webcrawl and a round-robin crawler against a changing test web that knows the
truth (bench/liveweb), scored from the server's own request log.

For each seed, each crawler gets a fresh server with the same scenario, crawls it for the given
minutes at the same budget rate (credits per second), then the server stops and its log is
evaluated; crawlers alternate their order from seed to seed. Figures: value-weighted freshness
in the scored window (after the warm-up), and against the true-rate references at the run's own
spend (optimum with per-host caps, uniform; in credits and in full-page bytes), spend, cost per
detected change, coverage and politeness.

Run: ``./run bench liveweb [--minutes 10] [--seeds 1,2,3] [--budget 10] [--warmup S]
[--crawlers both|webcrawl|roundrobin] [--policies learned,uniform] [--small]
[--webcrawl-source DIR] [--keep DIR] [--no-doc]``.

``--policies``: webcrawl once per revisit policy of its planner (``WEBCRAWL_PLANNER_POLICY``):
``learned`` (the default, named ``webcrawl`` in the tables) and ``uniform`` (every page at one
interval for the same spend, no change followed; named ``webcrawl-uniform``), each on its own
server with the same scenario; the figures then add each policy's changes detected per credit
over the seeds and the learned policy's ratio to the uniform one's.

``--lifecycle``: change events instead (its own section of docs/benchmarks.md). The test web's
products also die (404/410), come back, move (301/308) and redirect for a while (302/307); two
shops have no sitemap (``--no-sitemap``); webcrawl alone crawls it from the site file a
newcomer would write (bench/liveweb/sites/newcomer.toml: product pages only), continuously for
``--minutes`` (default 6), killed with SIGKILL once at ``--kill-at`` seconds and restarted when
given; then ``scrapy events shops -o events.jsonl`` is scored against the server's log
(bench/liveweb/events.py), with the refetches of dead and moved pages, births found on the
shops without a sitemap (bench/liveweb/lifecycle_costs.py) and freshness as above.
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
from bench.liveweb.crawlers import (CRAWLERS, NEWCOMER_SITE_FILE, Invocation, crawl_estimate,
                                    crawl_events, invocation_for, newcomer_site_text, run_crawler,
                                    webcrawl_invocation)
from bench.liveweb.evaluate import evaluate_log
from bench.liveweb.events import page_type_fields, read_events, score_events
from bench.liveweb.lifecycle_costs import births_found, lifecycle_costs
from bench.liveweb.params import ScenarioParams
from bench.liveweb.process import REPO, ServerProcess, read_log
from bench.liveweb.scenario import Scenario
from bench.liveweb.report import lifecycle_tables, per_seed_tables, summary_tables


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="./run bench liveweb", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float,
                        help="length of each run (default 10; 6 with --lifecycle)")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated scenario seeds")
    parser.add_argument("--budget", type=float, default=10.0, help="credits per second")
    parser.add_argument("--warmup", type=float, help="seconds left out of the score "
                        "(default: a fifth of the run)")
    parser.add_argument("--crawlers", choices=("both", *CRAWLERS), default="both")
    parser.add_argument("--policies", default="learned",
                        help="webcrawl's planner policies to run, comma-separated (learned, "
                             "uniform); each is a crawler of its own (default: learned)")
    parser.add_argument("--small", action="store_true", help="the small test scenario (~150 pages)")
    parser.add_argument("--webcrawl-source", type=lambda p: Path(p).resolve(), default=REPO,
                        help="run webcrawl from this checkout (default: this repository)")
    parser.add_argument("--keep", help="keep logs and results in this folder")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each on its own server and ports (default 1: one "
                             "after another; 2 runs a seed's two crawlers side by side)")
    lifecycle = parser.add_argument_group("change events (--lifecycle)")
    lifecycle.add_argument("--lifecycle", action="store_true",
                           help="score webcrawl's change events on a web whose products die, "
                                "come back, move and redirect (its own docs section)")
    lifecycle.add_argument("--kill-at", type=float, metavar="SECONDS",
                           help="kill the crawl with SIGKILL once, this long after its start, "
                                "and start it again")
    lifecycle.add_argument("--no-sitemap", default="2,3",
                           help="shops without a sitemap, 0-based (default 2,3: two of four)")
    lifecycle.add_argument("--confirm-seconds", type=float, default=5.0,
                           help="WEBCRAWL_REMOVAL_CONFIRM_SECONDS given to the crawl (default 5)")
    lifecycle.add_argument("--probe-seconds", type=float, default=60.0,
                           help="WEBCRAWL_REMOVED_PROBE_SECONDS given to the crawl (default 60, "
                                "a cycle); fetches of a dead page this far apart are probes")
    args = parser.parse_args(argv)
    if args.minutes is None:
        args.minutes = 6.0 if args.lifecycle else 10.0
    try:
        args.no_sitemap_shops = [int(s) for s in args.no_sitemap.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--no-sitemap: expected comma-separated shops, got {args.no_sitemap!r}")
    if args.lifecycle and args.crawlers == "roundrobin":
        parser.error("--lifecycle scores webcrawl's events: the round-robin crawler has none")
    if args.kill_at is not None and not 0 < args.kill_at < args.minutes * 60:
        parser.error(f"--kill-at: expected seconds inside the run, got {args.kill_at:g}")
    if args.jobs < 1:
        parser.error(f"--jobs: expected at least 1, got {args.jobs}")
    args.policy_list = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in args.policy_list if p not in POLICIES]
    if unknown or not args.policy_list or len(set(args.policy_list)) < len(args.policy_list):
        parser.error(f"--policies: expected distinct ones of {', '.join(POLICIES)}, got "
                     f"{args.policies!r}")
    if args.lifecycle and args.policy_list != ["learned"]:
        parser.error("--policies compares revisit policies on the plain web, not with --lifecycle")
    try:
        args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    if not args.seed_list or args.minutes <= 0 or args.budget <= 0:
        parser.error("need at least one seed, and positive --minutes and --budget")
    return args


#: webcrawl's planner policies (WEBCRAWL_PLANNER_POLICY) that ``--policies`` may name.
POLICIES = ("learned", "uniform")


def crawler_name(crawler: str, policy: str = "learned") -> str:
    """The tables' name of ``crawler`` run with planner ``policy`` (webcrawl's default: its own
    name)."""
    return crawler if crawler != "webcrawl" or policy == "learned" else f"webcrawl-{policy}"


def _policy_of(name: str) -> tuple[str, str]:
    """(crawler, planner policy) of a name :func:`crawler_name` made."""
    crawler, _, policy = name.partition("-")
    return crawler, policy or "learned"


def run_one(crawler: str, params: ScenarioParams, budget: float, warmup: float | None,
            folder: Path, webcrawl_source: Path = REPO) -> dict[str, Any]:
    """One crawler (a name of :func:`crawler_name`) on a fresh server for the scenario's
    duration, evaluated."""
    folder.mkdir(parents=True, exist_ok=True)
    kind, policy = _policy_of(crawler)
    with ServerProcess(params, folder) as web:
        until = web.info["origin_mono"] + params.duration
        invocation = invocation_for(kind, web.port, params.duration, budget, folder,
                                    webcrawl_source)
        if policy != "learned":
            invocation = Invocation([*invocation.argv, "-s", f"WEBCRAWL_PLANNER_POLICY={policy}"],
                                    invocation.env, invocation.pidfiles)
        status = run_crawler(invocation, folder / "crawl", until)
    result = evaluate_log(web.log, warmup=warmup, budget_rate=budget)
    result["crawler"], result["exit_status"] = crawler, status
    if kind == "webcrawl":
        result["estimate"] = crawl_estimate(invocation, folder / "crawl", web.info,
                                            result["window"]["start"], result["window"]["end"])
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    return result


def run_lifecycle(params: ScenarioParams, args: argparse.Namespace, folder: Path,
                  cycle: float = 60.0) -> dict[str, Any]:
    """webcrawl on a fresh lifecycle web from the newcomer's site file for the scenario's
    duration (killed once at ``args.kill_at``), then its events read and everything scored."""
    sites = folder / "sites"
    sites.mkdir(parents=True, exist_ok=True)
    site_file = sites / NEWCOMER_SITE_FILE.name
    site_file.write_text(newcomer_site_text(params))
    settings = {"WEBCRAWL_REMOVAL_CONFIRM_SECONDS": f"{args.confirm_seconds:g}",
                "WEBCRAWL_REMOVED_PROBE_SECONDS": f"{args.probe_seconds:g}"}
    with ServerProcess(params, folder) as web:
        origin = web.info["origin_mono"]
        invocation = webcrawl_invocation(web.port, params.duration, args.budget,
                                         (folder / "data").resolve(), cycle, args.webcrawl_source,
                                         site="shops", sites_dir=sites, settings=settings)
        kill = origin + args.kill_at if args.kill_at is not None else None
        status = run_crawler(invocation, folder / "crawl", origin + params.duration,
                             kill_at_monotonic=kill)
    result = evaluate_log(web.log, warmup=args.warmup, cycle=cycle, budget_rate=args.budget)
    result["crawler"], result["exit_status"] = "webcrawl", status
    result["killed"] = (folder / "crawl" / "crawl-2.log").exists()
    sc, entries = Scenario(params), read_log(web.log)
    result["lifecycle"] = lifecycle_costs(sc, entries, probe_seconds=args.probe_seconds)
    result["births"] = births_found(sc, entries, warmup=result["warmup"], cycle=cycle)
    events_file = folder / "events.jsonl"
    error = crawl_events(invocation, folder / "crawl", "shops", events_file)
    result["events"], result["events_error"] = None, error
    if error is None:
        fields, volatile = page_type_fields(site_file)
        result["events"] = score_events(sc, entries, read_events(events_file), site="shops",
                                        fields=fields, volatile=volatile)
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    return result


def main_lifecycle(args: argparse.Namespace, argv: list[str]) -> None:
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="liveweb-lifecycle-"))
    print(f"runs in {root}", flush=True)
    results: dict[int, dict[str, Any]] = {}

    def one(seed: int) -> None:
        make = ScenarioParams.small if args.small else ScenarioParams
        params = make(seed=seed, minutes=args.minutes).with_lifecycle(args.no_sitemap_shops)
        started = time.monotonic()
        print(f"seed {seed}: webcrawl on the lifecycle web for {args.minutes:g} min ...",
              flush=True)
        r = results[seed] = run_lifecycle(params, args, root / f"seed{seed}-lifecycle")
        ev = r["events"]
        print(f"  seed {seed}: events "
              + (f"complete {ev['complete']}, correct {ev['correct_share']}, false {ev['false']}"
                 if ev else f"not read ({(r['events_error'] or '?').splitlines()[0]})")
              + f"; dead refetches max {r['lifecycle']['dead']['max']}, moved old-URL fetches "
              f"max {r['lifecycle']['moved']['max']}; freshness {r['window']['freshness']:.3f}; "
              f"exit {r['exit_status']}, {time.monotonic() - started:.0f} s", flush=True)
        for key in ("mismatches", "missing", "false_events"):
            for example in (ev or {}).get(key, [])[:3]:
                print(f"    {key}: {example}", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in [pool.submit(one, seed) for seed in args.seed_list]:
            future.result()
    body = lifecycle_tables({seed: results[seed] for seed in args.seed_list})
    print(body)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    if not args.no_doc:
        command = "./run bench liveweb " + " ".join(_documented(argv))
        write_section("liveweb-lifecycle", "Change events against a changing test web",
                      command.strip(), _lifecycle_preamble(args) + body)


def _lifecycle_preamble(args: argparse.Namespace) -> str:
    make = ScenarioParams.small if args.small else ScenarioParams
    p = make(minutes=args.minutes).with_lifecycle(args.no_sitemap_shops)
    sc = Scenario(p)
    fates = [q.fate for q in sc.pages if q.fate is not None]
    count = {k: sum(f.kind == k for f in fates) for k in ("death", "move", "temp")}
    restored = sum(f.restored for f in fates)
    warmup = args.warmup if args.warmup is not None else 0.2 * p.duration
    kill = (f"killed with SIGKILL at {args.kill_at:g} s and restarted"
            if args.kill_at is not None else "not killed")
    return (f"{len(p.shops)} shops ({len(p.no_sitemap)} without a sitemap: "
            f"{', '.join(p.hosts[i] for i in p.no_sitemap)}), {len(sc.pages)} pages; seed 1 has "
            f"{count['death']} deaths ({restored} restored), {count['move']} moves and "
            f"{count['temp']} temporary redirects, and "
            f"{sum(q.born_in_run for q in sc.pages)} births. webcrawl alone, from the newcomer's "
            f"site file (bench/liveweb/sites/newcomer.toml: product pages only), "
            f"{args.minutes:g}-minute continuous runs at {args.budget:g} credits/s, {kill}; "
            f"WEBCRAWL_REMOVAL_CONFIRM_SECONDS={args.confirm_seconds:g}, "
            f"WEBCRAWL_REMOVED_PROBE_SECONDS={args.probe_seconds:g}; seeds {args.seeds}; "
            f"freshness scored after a {warmup:g} s warm-up, births born between then and two "
            f"cycles before the end. The plain liveweb section above is the web without the "
            f"lifecycle (all four shops with a sitemap).\n\n" + LIFECYCLE_LEGEND + "\n\n")


LIFECYCLE_LEGEND = """Columns: *events complete* the share of the events owed (by the fetches \
the server logged: bench/liveweb/expected_events.py) that the crawl reported once; *correct* the \
share reported with every field right (records and changed fields against the truth, times \
within 5 s of the fetch, URLs, status); *false* events nothing owed (a second event for one \
change, one for a temporary redirect, one the log does not explain); *duplicate ids* ids that \
two different events share; *dead: most refetches* the most fetches of a dead page after its \
first 404/410 while it stays dead, fetches a probe interval apart aside (10% early allowed); \
*moved: most old-URL fetches* after the first 301/308; *restores seen* pages seen dead and \
restored before the end that were fetched again after their restore; *births w/o sitemap \
within 2 cycles* pages born on the shops without a sitemap (after the warm-up, two cycles before \
the end at the latest) found within two cycles (120 s) of their birth; *freshness* and \
*/ optimum* as above, dead spans left out."""


def main(argv: list[str] | None = None) -> None:
    args = _parse([] if argv is None else argv)
    if args.lifecycle:
        main_lifecycle(args, argv or [])
        return
    kinds = list(CRAWLERS) if args.crawlers == "both" else [args.crawlers]
    crawlers = [crawler_name(kind, policy) for kind in kinds
                for policy in (args.policy_list if kind == "webcrawl" else ["learned"])]
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
    if len(args.policy_list) > 1 and "webcrawl" in kinds:
        body += "\n\n" + policy_comparison(results, [crawler_name("webcrawl", p)
                                                      for p in args.policy_list])
    print(body)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    if not args.no_doc:
        command = "./run bench liveweb " + " ".join(_documented(argv or []))
        write_section("liveweb", "Live freshness against a changing test web", command.strip(),
                      _preamble(args, crawlers) + body)


def changes_per_credit(runs: list[dict[str, Any]]) -> float | None:
    """Changes detected per credit spent in the scored windows of ``runs``, together."""
    credits = sum(r["window"]["credits"] for r in runs)
    return sum(r["window"]["changes_detected"] for r in runs) / credits if credits else None


def policy_comparison(results: dict[int, dict[str, dict[str, Any]]], names: list[str]) -> str:
    """Each planner policy's changes detected per credit, per seed and over the seeds together,
    and each one's ratio to the first's (``learned``, when it ran)."""
    seeds = list(results)
    rows = []
    first = changes_per_credit([results[s][names[0]] for s in seeds])
    for name in names:
        each = [changes_per_credit([results[s][name]]) for s in seeds]
        together = changes_per_credit([results[s][name] for s in seeds])
        ratio = f"{first / together:.2f}" if first and together else "-"
        rows.append(f"| {name} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in each)
                    + f" | {'-' if together is None else f'{together:.3f}'} | {ratio} |")
    head = ("| planner policy | " + " | ".join(f"seed {s}" for s in seeds)
            + f" | together | {names[0]} / this |\n|" + "---|" * (len(seeds) + 3))
    return ("Changes detected per credit in the scored window, by planner policy "
            "(`WEBCRAWL_PLANNER_POLICY`; uniform: every page at one interval for the same spend, "
            "no change followed):\n\n" + head + "\n" + "\n".join(rows))


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
            + (f" (webcrawl with planner policies {', '.join(args.policy_list)})"
               if len(args.policy_list) > 1 else "")
            + (f"; {args.jobs} runs at a time, each on its own server" if args.jobs > 1 else "")
            + ". The web without its lifecycle (products change and are born, but never die, "
            "move or redirect; every shop has a sitemap): `--lifecycle` has its own section. "
            "Shared 2-core machine: figures are "
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
