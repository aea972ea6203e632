"""The running crawl against a changing test web that knows the truth (bench/liveweb, small
scenario): real ``scrapy crawl liveweb`` processes with the project's settings, each against its
own server, scored only from that server's request log.

Two scenario seeds, each crawled by the learned allocation and by the uniform one
(``WEBCRAWL_PLANNER_POLICY=uniform``: every page at one interval for the same spend, no change
followed), all four at once. The learned policy must find more changes per credit over the seeds
together; every run must spend steadily (no idle stalls), never come closer to a host than its
delay or Crawl-delay, never fetch a page in a loop, and find the pages only a sitemap lists and
the pages born during the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bench.liveweb import ScenarioParams, ServerProcess, evaluate_log
from bench.liveweb.crawlers import Invocation, _stop_daemon, webcrawl_invocation
from bench.liveweb.evaluate import _billable
from bench.liveweb.process import read_log
from webcrawl.extensions.allocator import BUCKET_SECONDS

SEEDS = (1, 2)
POLICIES = ("learned", "uniform")
MINUTES = 2.0
BUDGET = 4.0  # credits per second
CYCLE = 20.0  # seconds: several allocations and cycles within the run
WINDOW = 10.0  # seconds per spend window
WARMUP = 30.0  # discovery of the whole web first


def _invocation(port: int, folder: Path, policy: str, seconds: float) -> Invocation:
    base = webcrawl_invocation(port, seconds, BUDGET, (folder / "data").resolve(),
                               cycle_seconds=CYCLE)
    return Invocation([*base.argv, "-s", f"WEBCRAWL_PLANNER_POLICY={policy}"], base.env,
                      base.pidfiles)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], dict[str, Any]]:
    """Every (seed, policy) crawl, run at once, each on its own server; their evaluations."""
    root = tmp_path_factory.mktemp("liveweb")
    params = {seed: ScenarioParams.small(seed=seed, minutes=MINUTES) for seed in SEEDS}
    servers, crawls = {}, {}
    try:
        for seed in SEEDS:
            for policy in POLICIES:
                folder = root / f"seed{seed}-{policy}"
                folder.mkdir()
                web = ServerProcess(params[seed], folder)
                web.__enter__()
                servers[seed, policy] = web
        for key, web in servers.items():
            folder = root / f"seed{key[0]}-{key[1]}"
            invocation = _invocation(web.port, folder, key[1], params[key[0]].duration)
            crawls[key] = (invocation, folder, _start(invocation, folder / "crawl"))
        until = max(web.info["origin_mono"] + params[k[0]].duration for k, web in servers.items())
        status = {}
        for key, (invocation, folder, process) in crawls.items():
            status[key] = _finish(process, invocation, until)
    finally:
        for web in servers.values():
            web.__exit__(None, None, None)
    out = {}
    for key, web in servers.items():
        result = evaluate_log(web.log, warmup=WARMUP, budget_rate=BUDGET, cycle=CYCLE)
        result["entries"] = read_log(web.log)
        result["status"] = status[key]
        result["crawl_log"] = (root / f"seed{key[0]}-{key[1]}" / "crawl" / "crawl.log").read_text()
        out[key] = result
    return out


def _start(invocation: Invocation, folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "crawl.log", "wb") as log:
        return subprocess.Popen(invocation.argv, cwd=folder, env=invocation.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _finish(process: subprocess.Popen[bytes], invocation: Invocation, until: float) -> int:
    """The crawl's exit status: it stops itself (CLOSESPIDER_TIMEOUT); one still running a
    minute past the run's end is killed (and fails the test). Its embedded Redis goes too."""
    try:
        status = process.wait(max(0.0, until - time.monotonic()) + 60.0)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        status = process.wait()
    for pidfile in invocation.pidfiles:
        _stop_daemon(pidfile)
    return status


def test_every_crawl_ends_cleanly(runs: dict[tuple[int, str], dict[str, Any]]) -> None:
    for key, result in runs.items():
        assert result["status"] == 0, f"{key}: exit {result['status']}\n{result['crawl_log'][-3000:]}"
        assert "Traceback" not in result["crawl_log"], f"{key}: {result['crawl_log'][-3000:]}"


def test_the_learned_policy_finds_more_changes_per_credit_than_uniform(
        runs: dict[tuple[int, str], dict[str, Any]]) -> None:
    def per_credit(policy: str) -> tuple[float, list[float]]:
        changes = sum(runs[s, policy]["window"]["changes_detected"] for s in SEEDS)
        credits = sum(runs[s, policy]["window"]["credits"] for s in SEEDS)
        each = [runs[s, policy]["window"]["changes_detected"] / runs[s, policy]["window"]["credits"]
                for s in SEEDS]
        return changes / credits, each

    learned, learned_each = per_credit("learned")
    uniform, uniform_each = per_credit("uniform")
    assert learned > 1.2 * uniform, (
        f"changes per credit: learned {learned:.3f} {learned_each}, uniform {uniform:.3f} {uniform_each}")


def test_spend_is_steady_and_within_the_budget_rate(
        runs: dict[tuple[int, str], dict[str, Any]]) -> None:
    """After the first discovery pass, every 10-second window spends at least half the budget
    rate, and at most the rate plus what the bucket holds (BUCKET_SECONDS of it: the catch-up
    after a stall or a host's Retry-After) plus what can be in flight (two connections to each
    host, a credit each); over the run, at least 0.85 of the rate."""
    hosts = len(ScenarioParams.small().shops)
    upper = 1.0 + BUCKET_SECONDS / WINDOW + 2 * hosts / (WINDOW * BUDGET)
    for key, result in runs.items():
        end = result["end"]
        windows = []
        t = WARMUP
        while t + WINDOW <= end:
            credits = sum(_billable(e) for e in result["entries"] if t <= e["t"] < t + WINDOW)
            windows.append(credits / WINDOW / BUDGET)
            t += WINDOW
        assert windows and min(windows) >= 0.5 and max(windows) <= upper, (
            f"{key}: spend per window / budget rate {[round(w, 2) for w in windows]}")
        assert result["window"]["spend_vs_budget"] >= 0.85, (key, result["window"]["spend_vs_budget"])


def test_no_host_is_approached_closer_than_its_delay(
        runs: dict[tuple[int, str], dict[str, Any]]) -> None:
    for key, result in runs.items():
        polite = result["politeness"]
        assert polite["short_gaps"] == 0 and polite["early_in_429"] == 0, (key, polite)


def test_no_page_is_fetched_in_a_loop(runs: dict[tuple[int, str], dict[str, Any]]) -> None:
    """A fetch that lands no observation (a 304 sent on to its verification, an error) must not
    bring its page back at every turn of the host: within any 1.5 s, at most three requests for a
    page (its fetch, the verification of a 304, a retry)."""
    span, most = 1.5, 3
    for key, result in runs.items():
        times: dict[Any, list[float]] = {}
        for e in result["entries"]:
            if e["page"] is not None:
                times.setdefault(e["page"], []).append(e["t"])
        loops = []
        for page, ts in times.items():
            for i in range(len(ts) - most):
                if ts[i + most] - ts[i] < span:
                    loops.append((page, [round(t, 2) for t in ts[i:i + most + 1]]))
                    break
        assert not loops, f"{key}: pages requested more than {most} times within {span} s: {loops[:5]}"


def test_sitemap_only_and_new_pages_are_found(runs: dict[tuple[int, str], dict[str, Any]]) -> None:
    for key, result in runs.items():
        coverage = result["coverage"]
        for kind in ("sitemap_only", "born", "all"):
            share = coverage[kind]["share"]
            assert share is None or share == 1.0, (key, kind, coverage[kind])
