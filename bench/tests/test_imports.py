"""Every benchmark of ``./run bench`` can at least be loaded: a module of the crawler that moves
or goes must not leave a benchmark that fails only when someone runs it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCH.glob("bench_*.py")))
def test_the_benchmark_loads_with_its_entry_point(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert callable(module.main)
