"""The crawler's suite imports nothing of the benchmarks (bench/): a test that leans on a
benchmark's private helpers breaks when the benchmark changes, and measures instead of checking.
The benchmarks' own tests live in bench/tests (``./run tests bench/tests``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DYNAMIC = ("import_module", "__import__")


def bench_imports(path: Path) -> list[str]:
    """The imports of ``bench`` in a file, dynamic ones (``import_module("bench...")``) too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "bench"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "bench":
                found.append(node.module)
        elif isinstance(node, ast.Call) and node.args and getattr(
                node.func, "attr", getattr(node.func, "id", None)) in DYNAMIC:
            name = ast.unparse(node.args[0]).lstrip("f").strip("'\"")
            if name.split(".")[0] == "bench":
                found.append(name)
    return found


@pytest.mark.parametrize("path", sorted(TESTS.rglob("*.py")), ids=lambda p: p.name)
def test_no_test_module_imports_the_benchmarks(path: Path) -> None:
    assert not bench_imports(path), f"{path.name} imports {bench_imports(path)}"


def test_the_check_sees_every_form_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import bench\nimport bench.liveweb as lw\nfrom bench.liveweb import x\n"
                      "import importlib\nimportlib.import_module(f'bench.{name}')\n"
                      "from benchmarks import y\nimport webcrawl.bench\n")
    assert bench_imports(sample) == ["bench", "bench.liveweb", "bench.liveweb", "bench.{name}"]
