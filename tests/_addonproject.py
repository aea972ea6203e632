"""A Scrapy project made by ``scrapy startproject``, with webcrawl's add-on line in its
settings.py, for the add-on and scrapyd tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.crawls import REPO

ADDON_LINE = 'ADDONS = {"webcrawl.addon.Addon": 0}'


def project_env(**extra: str) -> dict[str, str]:
    """This environment without webcrawl's project or any of its settings, webcrawl importable."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SCRAPY_SETTINGS_MODULE", "WEBCRAWL_REDIS_URL", "WEBCRAWL_DATA_DIR",
                        "WEBCRAWL_SITES_DIR")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return {**env, **extra}


def new_project(folder: Path, name: str = "shopwatch", *, more: str = "") -> Path:
    """``scrapy startproject name`` in ``folder``, its ``ADDONS = {}`` made the add-on line and
    ``more`` appended to its settings.py; the project's folder."""
    made = subprocess.run([sys.executable, "-m", "scrapy", "startproject", name], cwd=folder,
                          env=project_env(), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    project = folder / name
    settings = project / name / "settings.py"
    text = settings.read_text()
    assert "ADDONS = {}" in text and "ROBOTSTXT_OBEY = True" in text  # as any new project
    settings.write_text(text.replace("ADDONS = {}", ADDON_LINE) + more)
    return project
