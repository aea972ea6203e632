"""The report page in a real headless Chromium: a real crawl of the demo shop (three cycles with
the embedded Redis), its ``report.html`` loaded over the DevTools protocol, and every chart
checked from the DOM after load: drawn at a size, titled and labelled for screen readers, its
series present with visible marks, its ticks and cycle labels written; the page logs no error.

The checker must be able to fail: the same page with a chart removed and another emptied is
loaded too, and both faults must be named.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import INSTALL_HINT, chromium_binary, open_browser
from tests.crawls import REPO

CYCLE_CHARTS = ("spend", "coverage", "found", "cost-per-change", "freshness")
COUNT_CHARTS = ("found",)  # axes that count fetches: whole-number ticks only

# Runs in the page: what each chart shows once laid out (sizes from the rendering engine).
SURVEY = """(() => {
  const visible = el => { const b = el.getBBox(); return b.width > 0 && b.height > 0; };
  const drawn = el => { const b = el.getBBox(); return b.width > 0 || b.height > 0; };
  return [...document.querySelectorAll('svg.chart')].map(svg => {
    const box = svg.getBoundingClientRect();
    const named = (svg.getAttribute('aria-labelledby') || '').split(' ').filter(Boolean)
      .map(id => (document.getElementById(id) || {}).textContent || '');
    const series = [...svg.querySelectorAll('[data-series]')].map(g => ({
      name: g.dataset.series,
      marks: [...g.querySelectorAll('rect, circle')].filter(visible).length
           + [...g.querySelectorAll('polyline, line')].filter(drawn).length}));
    return {
      key: svg.dataset.chart, empty: svg.dataset.empty === 'true', role: svg.getAttribute('role'),
      width: box.width, height: box.height, named,
      title: (svg.querySelector('text.title') || {}).textContent || '',
      message: (svg.querySelector('text.message') || {}).textContent || '',
      legend: [...svg.querySelectorAll('[data-legend]')].map(g => g.dataset.legend),
      ticks: [...svg.querySelectorAll('.axis text:not(.x):not(.axis-name)')].filter(visible).map(t => t.textContent),
      xs: [...svg.querySelectorAll('.axis text.x')].filter(visible).map(t => t.textContent),
      series,
      page_type: (svg.closest('[data-page-type]') || {dataset: {}}).dataset.pageType || null,
    };
  });
})()"""


def problems(charts: list[dict[str, Any]], cycles: list[str], page_types: list[str]) -> list[str]:
    """Everything wrong with the charts of a page over ``cycles`` and ``page_types``."""
    found: list[str] = []
    keys = [c["key"] for c in charts]
    for key in CYCLE_CHARTS:
        if key not in keys:
            found.append(f"chart {key} missing")
    panels = {c["page_type"] for c in charts if c["page_type"]}
    for name in page_types:
        if name not in panels:
            found.append(f"no charts for page type {name}")
    for c in charts:
        where = f"chart {c['key']}"
        if c["width"] < 100 or c["height"] < 80:
            found.append(f"{where} drawn at {c['width']}x{c['height']}")
        if c["role"] != "img" or len(c["named"]) != 2 or not all(c["named"]):
            found.append(f"{where} has no accessible title and description")
        if not c["title"]:
            found.append(f"{where} has no visible title")
        if c["empty"]:
            if not c["message"]:
                found.append(f"{where} is empty and says nothing")
            continue
        drawn = {s["name"] for s in c["series"] if s["marks"] > 0}
        if not drawn:
            found.append(f"{where} draws no series")
        for name in c["legend"]:
            if name not in {s["name"] for s in c["series"]}:
                found.append(f"{where}: legend {name} has no series")
        if len(c["ticks"]) < 2:
            found.append(f"{where} has no y ticks")
        if not set(cycles) <= set(c["xs"]):
            found.append(f"{where} labels cycles {c['xs']}, expected {cycles}")
        if c["key"] in COUNT_CHARTS or c["key"].endswith("-found"):
            odd = [t for t in c["ticks"] if not re.fullmatch(r"\d{1,3}(,\d{3})*", t)]
            if odd:
                found.append(f"{where} has ticks between whole numbers: {odd}")
    return found


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real three-cycle crawl of the demo shop; its report page and printed report."""
    folder = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, WEBCRAWL_DATA_DIR=str(folder / "data"),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("WEBCRAWL_REDIS_URL", None)
    done = subprocess.run([sys.executable, "-m", "webcrawl.demo", "--fresh", "--port", "0", "--cycles", "3",
                           "--cycle-seconds", "8", "--budget", "200"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "data" / "demo" / "report.html", done.stdout


def test_every_chart_renders_in_chromium(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if chromium_binary() is None:  # a failure, never a skip: the page must be seen in a browser
        pytest.fail(INSTALL_HINT)
    html, printed = request.getfixturevalue("crawled")  # crawl only once Chromium is known to be there
    report = printed.split("webcrawl report", 1)[1]
    cycles = re.findall(r"^(\d+)\s+\d{4}-\d\d-\d\d ", report, re.M)
    assert cycles == ["1", "2", "3"], report
    table = report.split("page type", 1)[1].split("\n\n", 1)[0]
    page_types = [line.split("  ")[0] for line in table.splitlines()[1:] if line.strip()]
    page_types.remove("total")
    assert {"product", "category", "(no type)"} <= set(page_types), page_types

    broken = tmp_path / "broken.html"
    text = html.read_text()
    text = re.sub(r'<svg [^>]*data-chart="freshness".*?</svg>', "", text, flags=re.S)
    text = re.sub(r'(<svg [^>]*data-chart="found".*?)<g data-series=.*?</svg>', r"\1</svg>", text, flags=re.S)
    broken.write_text(text)

    with open_browser() as browser:
        browser.load(html.as_uri())
        charts = browser.evaluate(SURVEY)
        assert browser.errors() == []
        png = browser.screenshot(1280, 1000)
        browser.load(broken.as_uri())
        faults = problems(browser.evaluate(SURVEY), cycles, page_types)
    assert png.startswith(b"\x89PNG") and len(png) > 20_000  # a blank page compresses to little
    assert problems(charts, cycles, page_types) == []
    assert "chart freshness missing" in faults and "chart found draws no series" in faults, faults

    by_key = {c["key"]: c for c in charts}
    spend, found = by_key["spend"], by_key["found"]
    assert {s["name"]: s["marks"] for s in spend["series"]}["budget"] == 3  # one box per cycle
    assert {s["name"] for s in found["series"] if s["marks"]} == {"new", "changed", "no change"}
    # Each cycle's close books its coverage: URLs known, fetched, waiting.
    coverage = by_key["coverage"]
    assert not coverage["empty"], coverage
    assert {s["name"]: s["marks"] for s in coverage["series"]}["fetched"] == 3, coverage
    freshness = {s["name"]: s["marks"] for s in by_key["freshness"]["series"]}
    assert freshness["est. freshness"] >= 3 + 1  # a marker per cycle and the line
