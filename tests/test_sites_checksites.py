"""``scrapy checksites`` run as a user runs it: one line per site file, status 1 on any error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from webcrawl.sites import bundled_site_files

GOOD = """\
name = "{name}"
seeds = ["http://127.0.0.2:${{SHOP_PORT}}/"]
allowed_domains = ["127.0.0.2"]
allowed_private_networks = ["127.0.0.0/8"]

[politeness]
user_agent = "testbot/1.0 (ops@bots.example)"

[budget]
billing = "requests"
amount_per_cycle = 100
cycle_seconds = 60

[[page_types]]
name = "page"
url_pattern = "."
"""


def checksites(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings")
    env.pop("SHOP_PORT", None)
    return subprocess.run([sys.executable, "-m", "scrapy", "checksites", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=60)


def bundled_lines() -> list[str]:
    return [f"ok    {f} ({f.name.removesuffix('.toml')})" for f in bundled_site_files()]


def test_every_file_ok(tmp_path: Path) -> None:
    (tmp_path / "shop.toml").write_text(GOOD.format(name="shop"))
    run = checksites(tmp_path, "-s", f"WEBCRAWL_SITES_DIR={tmp_path}", "-s", "SHOP_PORT=8080")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [*bundled_lines(), f"ok    {tmp_path / 'shop.toml'} (shop)"]


def test_one_line_per_broken_file_and_status_1(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(GOOD.format(name="twin"))
    (tmp_path / "b.toml").write_text(GOOD.format(name="twin"))
    (tmp_path / "c.toml").write_text(GOOD.format(name="other"))  # SHOP_PORT undefined
    run = checksites(tmp_path, "-s", f"WEBCRAWL_SITES_DIR={tmp_path}", "-s", "SHOP_PORT=1")
    assert run.returncode == 1
    a, b, c = (tmp_path / n for n in ("a.toml", "b.toml", "c.toml"))
    twice = (f"name: 'twin' is defined in {a} and {b}, expected each site name defined by one "
             "file only")
    assert run.stdout.splitlines() == [*bundled_lines(), f"error {a}: {twice}",
                                       f"error {b}: {twice}", f"ok    {c} (other)"]
    run = checksites(tmp_path, "-s", f"WEBCRAWL_SITES_DIR={tmp_path}")
    assert run.returncode == 1
    assert run.stdout.splitlines()[-1] == (
        f"error {c}: seeds[0]: got 'http://127.0.0.2:${{SHOP_PORT}}/' with SHOP_PORT undefined, "
        "expected SHOP_PORT to be defined (as a Scrapy setting or an environment variable), "
        "or a default: ${SHOP_PORT:-value}")


def test_only_the_given_files(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(GOOD.format(name="good"))
    bad.write_text(GOOD.format(name="bad").replace('"requests"', '"money"'))
    run = checksites(tmp_path, str(good), str(bad), "-s", "SHOP_PORT=1")
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        f"ok    {good} (good)",
        f"error {bad}: budget.billing: got 'money', expected one of 'bandwidth', 'credits', "
        "'requests'"]


def test_usage_errors(tmp_path: Path) -> None:
    run = checksites(tmp_path, str(tmp_path / "absent.toml"))
    assert run.returncode == 2 and "absent.toml' is not a file" in run.stderr
    run = checksites(tmp_path, "-s", f"WEBCRAWL_SITES_DIR={tmp_path / 'nowhere'}")
    assert run.returncode == 2 and "is not a folder" in run.stderr
    assert "Traceback" not in run.stderr
