"""Packaging: building webcrawl's wheel prints no setuptools warning, ships the Lua scripts and
the bundled site files, and needs scrapy-redis only for the benchmarks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests._cli import REPO


def test_wheel_builds_without_warnings_and_carries_its_data(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: building in place would write into the repository
    source.mkdir()
    shutil.copy(REPO / "setup.py", source)
    shutil.copytree(REPO / "webcrawl", source / "webcrawl",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
         str(source), "-w", str(tmp_path / "dist")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    # setuptools' warnings are classes (SetuptoolsWarning, BuildBackendWarning...) in "!!" banners.
    assert not re.findall(r"\w+Warning\b", output), output[-3000:]
    [wheel] = (tmp_path / "dist").glob("webcrawl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [line for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    bundled = {p.relative_to(REPO).as_posix() for p in (REPO / "webcrawl").rglob("*")
               if p.suffix in (".lua", ".toml")}
    assert bundled and bundled <= names
    assert not any("__pycache__" in n for n in names)
    redis_extra = [r for r in requires if "scrapy-redis" in r]
    assert redis_extra and all('extra == "bench"' in r for r in redis_extra), requires
