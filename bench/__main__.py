"""``python -m bench [name ...]``: run the named benchmarks (all when none is named)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    available = sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    wanted = [f"bench_{n.removeprefix('bench_')}" for n in argv] or available
    for name in wanted:
        if name not in available:
            print(f"unknown benchmark {name!r}; available: {', '.join(available)}", file=sys.stderr)
            return 2
        print(f"== {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
