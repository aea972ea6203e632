"""Write one benchmark's section of docs/benchmarks.md, leaving the other sections alone.

Each benchmark owns the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``;
a missing section is appended at the end of the file.
"""

from __future__ import annotations

import platform
import re
import time
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\nEach section is written by the script named in it; rerun that command to refresh it."
    " `./run bench` first compiles webcrawl's modules and the baseline project's to bytecode, as an"
    " installed package has them (Scrapy's came that way), so no crawl process compiles source.\n")


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table; floats get three significant decimals."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(name: str, title: str, command: str, body: str) -> None:
    """Replace (or append) section ``name`` of docs/benchmarks.md."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\nReproduce: `{command}` ({stamp}, {machine})\n\n"
        f"{body.strip()}\n<!-- /bench:{name} -->"
    )
    text = DOC.read_text() if DOC.exists() else HEADER
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
