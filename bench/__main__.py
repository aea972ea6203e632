"""``python -m bench [name ...]``: run the named benchmarks (all when none is named).

``python -m bench NAME --option ...``: options after one benchmark's name go to that
benchmark's ``main(argv)``; benchmarks whose ``main()`` takes no arguments take no options.

Before any benchmark, webcrawl's modules and the baseline project's are compiled to bytecode, as
an installed package's are (``pip install`` compiles them; Scrapy's came that way). An editable
install writes its bytecode at first import, except where ``PYTHONDONTWRITEBYTECODE`` is set:
there every crawl process would compile about 150 modules from source, a tenth of a second of
start-up that no installed copy pays.
"""

from __future__ import annotations

import compileall
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    available = sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    first_option = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    names, options = argv[:first_option], argv[first_option:]
    if options and len(names) != 1:
        print("options go to one benchmark: python -m bench NAME --option ...", file=sys.stderr)
        return 2
    wanted = [f"bench_{n.removeprefix('bench_')}" for n in names] or available
    for name in wanted:
        if name not in available:
            print(f"unknown benchmark {name!r}; available: {', '.join(available)}", file=sys.stderr)
            return 2
    for folder in (here.parent / "webcrawl", here):
        compileall.compile_dir(folder, quiet=1)
    for name in wanted:
        print(f"== {name}", flush=True)
        entry = importlib.import_module(f"bench.{name}").main
        if inspect.signature(entry).parameters:
            entry(options)  # its own options only (not this command line's benchmark names)
        elif options:
            print(f"{name} takes no options", file=sys.stderr)
            return 2
        else:
            entry()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
