"""Find site files, read them and validate them into :class:`SiteConfig` objects.

Sources, in order: every ``*.toml`` bundled inside the ``webcrawl.sites`` package (read through
``importlib.resources``, so a scrapyd egg carries them) and every ``*.toml`` directly inside each
extra folder (the ``WEBCRAWL_SITES_DIR`` setting: a path or an ``os.pathsep``-separated list).
A site name defined by two files is an error naming both.
"""

from __future__ import annotations

import os
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from webcrawl.sites._build import build_site
from webcrawl.sites._expand import Lookup, expand
from webcrawl.sites.errors import SiteConfigError
from webcrawl.sites.schema import SiteConfig

__all__ = [
    "SiteFile",
    "bundled_site_files",
    "check_sites",
    "load_site_file",
    "load_sites",
    "parse_site",
    "site_from_dict",
    "sites_dirs",
]

Variables = Mapping[str, str] | Callable[[str], "str | None"]
"""Where ``${NAME}`` placeholders find their values: a mapping or a lookup function."""


@dataclass(frozen=True)
class SiteFile:
    """The outcome of checking one file: ``site`` when valid, else ``error``.

    ``name`` is the site's name, or for a broken file the name it declares when that much could
    be read (``declared``), else the file's stem, so ``scrapy crawl <name>`` can report the error.
    """

    source: str
    name: str
    site: SiteConfig | None = None
    error: SiteConfigError | None = None
    declared: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_site(text: str, source: str, variables: Variables | None = None) -> SiteConfig:
    """Validate the TOML ``text`` of a site file named ``source``.

    ``variables`` resolves ``${NAME}`` placeholders (default: the environment).
    Raises :class:`SiteConfigError`.
    """
    return build_site(expand(_toml(text, source), source, _lookup(variables)), source)


def site_from_dict(document: Mapping[str, Any], source: str = "<dict>",
                   variables: Variables | None = None) -> SiteConfig:
    """Validate a site document already in memory (what ``tomllib`` would return), e.g. a test's
    site built in code. Raises :class:`SiteConfigError` naming ``source``."""
    return build_site(expand(dict(document), source, _lookup(variables)), source)


def load_site_file(path: str | Path | Traversable, variables: Variables | None = None
                   ) -> SiteConfig:
    """Read and validate one site file. Raises :class:`SiteConfigError`."""
    return parse_site(_read(path), str(path), variables)


def bundled_site_files() -> list[Traversable]:
    """The ``*.toml`` files shipped inside the ``webcrawl.sites`` package, by name."""
    package = resources.files("webcrawl.sites")
    return sorted((f for f in package.iterdir() if f.name.endswith(".toml") and f.is_file()),
                  key=lambda f: f.name)


def sites_dirs(setting: str | Iterable[str] | None) -> tuple[Path, ...]:
    """The folders named by ``WEBCRAWL_SITES_DIR`` (a path, an ``os.pathsep``-separated list or
    a list of paths); each must exist. Raises ``ValueError`` naming the setting."""
    if not setting:
        return ()
    parts = setting.split(os.pathsep) if isinstance(setting, str) else list(setting)
    folders = tuple(Path(p).expanduser() for p in parts if str(p).strip())
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"WEBCRAWL_SITES_DIR={setting!r}: {str(folder)!r} is not a folder; "
                             "expected folders holding site files (*.toml)")
    return folders


def check_sites(dirs: Iterable[str | Path] = (), variables: Variables | None = None, *,
                bundled: bool = True) -> list[SiteFile]:
    """Check every site file (bundled ones unless ``bundled=False``, then those in ``dirs``).

    Never raises for a bad file: each file's outcome is in the list, in source order, and every
    file of a name defined twice carries an error naming both files.
    """
    paths: list[Path | Traversable] = list(bundled_site_files()) if bundled else []
    for folder in dirs:
        paths.extend(sorted(p for p in Path(folder).glob("*.toml") if p.is_file()))
    return _mark_duplicates([_check_one(p, variables) for p in paths])


def load_sites(dirs: Iterable[str | Path] = (), variables: Variables | None = None, *,
               bundled: bool = True) -> dict[str, SiteConfig]:
    """Every site by name; raises the first file's :class:`SiteConfigError` if any is bad."""
    outcomes = check_sites(dirs, variables, bundled=bundled)
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    return {o.name: o.site for o in outcomes if o.site is not None}


def _check_one(path: Path | Traversable, variables: Variables | None) -> SiteFile:
    source = str(path)
    stem = path.name.rsplit(".", 1)[0]
    document: Any = None
    try:
        document = _toml(_read(path), source)
        site = build_site(expand(document, source, _lookup(variables)), source)
    except SiteConfigError as error:
        declared = document.get("name") if isinstance(document, dict) else None
        if isinstance(declared, str) and declared:
            return SiteFile(source, declared, error=error)
        return SiteFile(source, stem, error=error, declared=False)
    return SiteFile(source, site.name, site=site)


def _mark_duplicates(outcomes: list[SiteFile]) -> list[SiteFile]:
    by_name: defaultdict[str, list[str]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.declared:  # a stem stands in for an unreadable name: it proves no clash
            by_name[outcome.name].append(outcome.source)
    marked = []
    for outcome in outcomes:
        sources = by_name.get(outcome.name, [])
        # A broken file keeps its own error: it is the first thing to fix.
        if len(sources) > 1 and outcome.ok:
            files = " and ".join(sources)
            error = SiteConfigError(outcome.source, "name", outcome.name,
                                    "each site name defined by one file only",
                                    problem=f"{outcome.name!r} is defined in {files}")
            outcome = replace(outcome, site=None, error=error)
        marked.append(outcome)
    return marked


def _read(path: str | Path | Traversable) -> str:
    source = str(path)
    try:
        data = Path(path).read_bytes() if isinstance(path, str) else path.read_bytes()
    except OSError as exc:
        raise SiteConfigError(source, "", None, "a readable file",
                              problem=f"cannot read it ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SiteConfigError(source, "", None, "a UTF-8 text file",
                              problem=f"not UTF-8 at line {line} (byte offset {exc.start})"
                              ) from None


def _toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SiteConfigError(source, "", None, "valid TOML (see docs/sites.md)",
                              problem=f"not valid TOML: {exc}") from None


def _lookup(variables: Variables | None) -> Lookup:
    if variables is None:
        return os.environ.get
    if isinstance(variables, Mapping):
        return variables.get
    return variables
