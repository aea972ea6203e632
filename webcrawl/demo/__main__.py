"""``python -m webcrawl.demo``: serve the demo shop, crawl it cycle after cycle, keep every cycle's
files, end with ``scrapy report demo``.

Each cycle is one ``scrapy crawl demo`` child process in the crawl's continuous mode
(``WEBCRAWL_CYCLE_CONTINUOUS``, the cycle's length and budget as settings) that stops after its
one cycle (``WEBCRAWL_STOP_AFTER_CYCLES=1``): the product's own pacing and cycles, with one log,
feed and stats dump per cycle. The shop runs in real time, so the crawl, the shop's dates
(``Last-Modified``, sitemap ``lastmod``) and the revisit model share one clock.

The shop's products also live and die (:data:`LIFECYCLE`): a few are born, die, come back, move
and redirect for a while during the first run's second and third cycles, and the crawl confirms a
removal within seconds (:data:`REMOVAL_CONFIRM_SECONDS`), so every kind of change event shows.

The demo holds a connection to the crawl's Redis for the whole run (the embedded server stays up
between cycles) and reads the ledger after each cycle for its number, the one ``scrapy report``
shows. A cycle's files go to ``cycles/running/`` while it runs, then to ``cycles/<number>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from webcrawl.commands._reportdata import ledger_for
from webcrawl.demo._summary import SITE, CrawlRun, Paths, cycle_line, read_stats, summary
from webcrawl.demo.lifecycle import Lifecycle
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.items import EXPORTED_FIELDS
from webcrawl.state.client import RedisUnavailable, open_handle

if TYPE_CHECKING:
    from webcrawl.state.ledger import LedgerStore

HOSTS = 4
DEFAULT_PORT = 8000  # the demo site file's default for ${WEBCRAWL_DEMO_PORT}
#: How often the shop's products change, in seconds: each product at its own rate, spread
#: log-uniformly between these (a share of them never changes).
FASTEST_CHANGE, SLOWEST_CHANGE = 5.0, 3600.0
#: The products' lives, in seconds after the shop's first start: fates begin between 20 s and
#: 34 s, after a first cycle of 15 s has discovered the shop, so that the next two cycles see (with
#: the shop's seed 0) 5 of the 200 products born, 20 die (13 come back 12-18 s later), 6 move and
#: 5 redirect for 8-15 s.
LIFECYCLE = Lifecycle(start=20.0, span=14.0, birth_share=0.03, death_share=0.08,
                      dead_for=(12.0, 18.0), move_share=0.04, temp_share=0.03, temp_for=(8.0, 15.0))
#: A page answering 404/410 is fetched again this soon, and removed if it still does; a removed
#: page is probed this often, so one that comes back 12-18 s later is seen restored in the run.
REMOVAL_CONFIRM_SECONDS, REMOVED_PROBE_SECONDS = 5.0, 15.0

DESCRIPTION = """\
Serve the bundled demo shop on 127.0.0.2-5 and crawl it with `scrapy crawl demo` in continuous
mode, one cycle after another, then print `scrapy report demo` and write its HTML page.

The shop's products change in real time, each at its own pace (from every few seconds to about
once an hour; some never). From 20 s after the shop's first start, a few products are born, die
(404 or 410), come back, move to a new address (301 or 308) or redirect for a while (302 or 307).
Each cycle lasts --cycle-seconds and may spend --budget requests, paced evenly over the cycle. On
a new crawl the first cycle discovers the shop; later cycles revisit the pages where the revisit
model expects changes, and read the sitemaps and listings that announce them. Each cycle's line
counts its change events by kind. A later run resumes the crawl, and the shop, where the last one
stopped (the products' births, deaths and moves happen in the first run only); --fresh starts
both over. Cycles are numbered as `scrapy report demo` numbers them.

Files, under $WEBCRAWL_DATA_DIR/demo/ (default .webcrawl/demo/):
  changes.jsonl    change events (new, changed, removed, moved, restored) of every cycle,
                   appended cycle after cycle
  cycles/N/        cycle N: changes.jsonl, stats.json (with start and finish times), crawl.log
  report.html      the report page over every cycle
  requests.jsonl   the shop's request log, appended run after run
--fresh deletes these files along with the crawl's state."""


def start_shop(paths: Paths, port: int = 0) -> ServerProcess:
    """The demo shop on 127.0.0.2-5 in a child process, logging requests to ``requests.jsonl``.
    Its products' histories start at the first run's start (``shop-clock.json``) and go on in
    real time, so a resumed crawl's records are compared with the shop's later state (and its
    products' lives, :data:`LIFECYCLE`, happen once, in the first run)."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    clock = paths.folder / "shop-clock.json"
    kept = json.loads(clock.read_text()) if clock.exists() else {}
    origin = float(kept.get("origin") or time.time())
    shop = start_server_process("shop", HOSTS, paths.requests, port=port, time_scale=1.0,
                                epoch=origin, clock_origin=origin,
                                min_change_interval=FASTEST_CHANGE,
                                max_change_interval=SLOWEST_CHANGE, lifecycle=LIFECYCLE)
    clock.write_text(json.dumps({"origin": origin}))
    return shop


def _forget_copy(paths: Paths) -> None:
    """Delete the demo's pages from the local copy (``--fresh``: the crawl starts over); the
    database is ``WEBCRAWL_DATABASE_URL`` or ``webcrawl.db`` in the data folder, if there is one."""
    url = os.environ.get("WEBCRAWL_DATABASE_URL") or str(paths.data_dir / "webcrawl.db")
    if "://" not in url and not Path(url).exists():
        return
    from webcrawl.database import migrate, open_database
    from webcrawl.database.apply import forget_site

    db = open_database(url)
    try:
        migrate(db)
        with db.transaction() as tx:
            forget_site(tx, SITE)
    finally:
        db.close()


def _settings(redis_url: str | None, paths: Paths) -> dict[str, object]:
    """Where the crawl state is: the same for the crawl, the report and this process."""
    return {"WEBCRAWL_DATA_DIR": paths.data_dir, **({"WEBCRAWL_REDIS_URL": redis_url} if redis_url else {})}


def crawl_command(port: int, paths: Paths, fresh: bool, budget: float, cycle_seconds: float,
                  redis_url: str | None = None) -> list[str]:
    """The ``scrapy crawl demo`` command line of one cycle: continuous mode, stopping after one
    cycle, removals confirmed and removed pages probed within the run; its feed (change events)
    goes to the running cycle's folder and is appended to ``changes.jsonl``."""
    feed = {"format": "jsonlines", "fields": EXPORTED_FIELDS}
    feeds = {str(paths.running / "changes.jsonl"): {**feed, "overwrite": True},
             str(paths.changes): {**feed, "overwrite": False}}
    settings: dict[str, object] = {
        "WEBCRAWL_DEMO_PORT": port, **_settings(redis_url, paths), "WEBCRAWL_RESET": fresh,
        "WEBCRAWL_CYCLE_CONTINUOUS": True, "WEBCRAWL_CYCLE_SECONDS": cycle_seconds,
        "WEBCRAWL_BUDGET_PER_CYCLE": budget, "WEBCRAWL_STOP_AFTER_CYCLES": 1,
        "WEBCRAWL_REMOVAL_CONFIRM_SECONDS": REMOVAL_CONFIRM_SECONDS,
        "WEBCRAWL_REMOVED_PROBE_SECONDS": REMOVED_PROBE_SECONDS,
        "FEEDS": json.dumps(feeds), "LOG_FILE": paths.running / "crawl.log", "LOG_FILE_APPEND": False,
        "LOG_LEVEL": "INFO",
    }
    command = [sys.executable, "-m", "scrapy", "crawl", SITE]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return command


def _env() -> dict[str, str]:
    return {**os.environ, "SCRAPY_SETTINGS_MODULE": os.environ.get("SCRAPY_SETTINGS_MODULE", "webcrawl.settings")}


def run_crawl(port: int, paths: Paths, ledger: LedgerStore, *, budget: float, cycle_seconds: float,
              fresh: bool = False, redis_url: str | None = None) -> CrawlRun:
    """Run one crawl cycle in a child process; keep its feed, log and stats (with start and
    finish times) in ``cycles/<number>/``, the number read from the crawl's ledger."""
    shutil.rmtree(paths.running, ignore_errors=True)
    paths.running.mkdir(parents=True)
    started = time.monotonic()
    done = subprocess.run(crawl_command(port, paths, fresh, budget, cycle_seconds, redis_url),
                          env=_env(), timeout=cycle_seconds + 600, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    seconds = time.monotonic() - started
    stats = read_stats(paths.running / "crawl.log")
    (paths.running / "stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")
    if done.returncode != 0 and done.stderr:
        print(done.stderr.strip()[-3000:], file=sys.stderr)
    current = ledger.current()  # the run stopped after its one cycle: the newest in the ledger
    cycle = current.id if current is not None else None
    return CrawlRun(done.returncode, seconds, stats, cycle, paths.keep_running(cycle))


def report(paths: Paths, redis_url: str | None = None) -> str:
    """``scrapy report demo`` over every cycle so far; the HTML page goes to ``report.html``."""
    command = [sys.executable, "-m", "scrapy", "report", SITE, "--html", str(paths.report)]
    for key, value in _settings(redis_url, paths).items():
        command += ["-s", f"{key}={value}"]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else f"report failed: {done.stderr[-2000:]}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m webcrawl.demo", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="start the demo crawl and its files over")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the shop's port (default {DEFAULT_PORT}; 0: any free one). Page URLs "
                             "include it: keep it from run to run to resume the crawl")
    parser.add_argument("--cycles", type=int, default=3, help="crawl cycles to run (default 3)")
    parser.add_argument("--cycle-seconds", type=float, default=15.0,
                        help="how long each cycle lasts (default 15)")
    parser.add_argument("--budget", type=float, default=450,
                        help="requests each cycle may spend (default 450: enough to discover the "
                             "shop in a first cycle of 15 s)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    if not args.cycle_seconds >= 1:
        parser.error("--cycle-seconds must be at least 1")
    if not args.budget > 0:
        parser.error("--budget must be more than 0")
    paths = Paths(Path(os.environ.get("WEBCRAWL_DATA_DIR") or ".webcrawl").resolve())
    if args.fresh:
        paths.clear()
        _forget_copy(paths)
    redis_url = os.environ.get("WEBCRAWL_REDIS_URL") or None
    try:
        handle = open_handle(redis_url, paths.data_dir)
    except (RedisUnavailable, RuntimeError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    try:
        ledger = ledger_for(handle.client, SITE)
        # A crawl with no cycle yet starts by discovering the shop: that cycle gets the summary.
        discover = args.fresh or not ledger.cycle_ids()
        try:
            shop = start_shop(paths, args.port)
        except RuntimeError as exc:  # the child's last line says why (a port in use, mostly)
            reason = str(exc).strip().splitlines()[-1]
            parser.exit(2, f"{parser.prog}: error: the demo shop did not start on port {args.port}: "
                           f"{reason}; --port 0 picks a free port\n")
        with shop:
            print(f"demo shop on {', '.join(shop.hosts)} port {shop.port}; {args.cycles} cycle(s) "
                  f"of {args.cycle_seconds:g} s and {args.budget:g} requests, `scrapy crawl {SITE}` "
                  f"in continuous mode; data in {paths.data_dir}"
                  f"{' (fresh)' if args.fresh else ''}", flush=True)
            for n in range(args.cycles):
                first = discover and n == 0
                run = run_crawl(shop.port, paths, ledger, budget=args.budget,
                                cycle_seconds=args.cycle_seconds, fresh=args.fresh and n == 0,
                                redis_url=redis_url)
                print(summary(run, paths) if first else cycle_line(run), flush=True)
                if run.returncode != 0:
                    return 1
        print("\n" + report(paths, redis_url))
        print(f"\nreport page {paths.report}")
        return 0
    finally:  # the embedded server stops here unless another process still uses it
        if handle.embedded is not None:
            handle.embedded.release(handle.client)
        handle.client.close()


if __name__ == "__main__":
    sys.exit(main())
