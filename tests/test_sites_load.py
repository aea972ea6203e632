"""Finding and reading site files: bundled ones, WEBCRAWL_SITES_DIR folders, duplicate names,
``${NAME}`` placeholders."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

import pytest

from webcrawl.sites import (
    SiteConfigError,
    bundled_site_files,
    check_sites,
    load_site_file,
    load_sites,
    parse_site,
    sites_dirs,
)

SITE = """\
name = "{name}"
seeds = ["{seed}"]
allowed_domains = ["shop.example", "127.0.0.2"]

[politeness]
user_agent = "testbot/1.0 (ops@bots.example)"

[budget]
billing = "requests"
amount_per_cycle = 100
cycle_seconds = 60

[[page_types]]
name = "page"
url_pattern = '^https?://[^/]+/p/\\d+$'
"""


def write(folder: Path, filename: str, name: str, seed: str = "https://shop.example/") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(SITE.format(name=name, seed=seed), encoding="utf-8")
    return path


def test_bundled_files_come_from_the_package() -> None:
    files = bundled_site_files()
    names = [f.name for f in files]
    assert "demo.toml" in names and names == sorted(names)
    assert all(str(f).startswith(str(resources.files("webcrawl.sites"))) for f in files)


def test_one_file_loads(tmp_path: Path) -> None:
    site = load_site_file(write(tmp_path, "a.toml", "alpha"))
    assert site.name == "alpha" and site.source == str(tmp_path / "a.toml")
    assert site.page_types[0].matches("https://shop.example/p/12")
    assert not site.page_types[0].matches("https://shop.example/p/12/x")


def test_sites_dir_files_are_added_to_the_bundled_ones(tmp_path: Path) -> None:
    write(tmp_path / "one", "a.toml", "alpha")
    write(tmp_path / "two", "b.toml", "beta")
    (tmp_path / "two" / "notes.txt").write_text("not a site file")
    dirs = sites_dirs(os.pathsep.join([str(tmp_path / "one"), str(tmp_path / "two")]))
    sites = load_sites(dirs, {})
    assert {"alpha", "beta", "demo"} <= set(sites)
    assert list(load_sites(dirs, {}, bundled=False)) == ["alpha", "beta"]


@pytest.mark.parametrize("setting", [None, "", []])
def test_no_sites_dir(setting: str | list[str] | None) -> None:
    assert sites_dirs(setting) == ()


def test_sites_dir_as_a_list(tmp_path: Path) -> None:
    assert sites_dirs([str(tmp_path)]) == (tmp_path,)


def test_missing_sites_dir_names_the_setting(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ValueError, match=r"^WEBCRAWL_SITES_DIR=.*'.*nowhere' is not a folder"):
        sites_dirs(f"{tmp_path}{os.pathsep}{missing}")


def test_a_name_defined_twice_names_both_files(tmp_path: Path) -> None:
    a = write(tmp_path / "one", "shop.toml", "shop")
    b = write(tmp_path / "two", "copy.toml", "shop")
    outcomes = check_sites([tmp_path / "one", tmp_path / "two"], {}, bundled=False)
    assert [o.ok for o in outcomes] == [False, False]
    for outcome in outcomes:
        assert outcome.error is not None and outcome.name == "shop"
        assert str(outcome.error) == (
            f"{outcome.source}: name: 'shop' is defined in {a} and {b}, expected each site "
            "name defined by one file only")
    with pytest.raises(SiteConfigError, match="is defined in"):
        load_sites([tmp_path / "one", tmp_path / "two"], {}, bundled=False)


def test_a_bundled_name_cannot_be_redefined(tmp_path: Path) -> None:
    write(tmp_path, "mydemo.toml", "demo")
    outcomes = {o.source: o for o in check_sites([tmp_path], {})}
    assert not outcomes[str(tmp_path / "mydemo.toml")].ok
    bundled = next(o for o in outcomes.values() if o.source.endswith(f"sites{os.sep}demo.toml"))
    assert bundled.error is not None and str(tmp_path / "mydemo.toml") in str(bundled.error)


def test_check_sites_reports_each_file_and_never_raises(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", "alpha")
    (tmp_path / "b.toml").write_text('name = "beta"\nseeds = 3\n')
    (tmp_path / "c.toml").write_text("= broken")
    outcomes = check_sites([tmp_path], {}, bundled=False)
    assert [(o.name, o.ok, o.declared) for o in outcomes] == [
        ("alpha", True, True), ("beta", False, True), ("c", False, False)]
    assert outcomes[0].site is not None and outcomes[0].error is None
    assert str(outcomes[1].error).endswith(
        "b.toml: allowed_domains: missing, expected a list of host names (at least one)")


def test_a_stem_never_counts_as_a_duplicate(tmp_path: Path) -> None:
    write(tmp_path, "alpha2.toml", "alpha")
    (tmp_path / "alpha.toml").write_text("= broken")
    outcomes = check_sites([tmp_path], {}, bundled=False)
    assert [(o.name, o.ok) for o in outcomes] == [("alpha", False), ("alpha", True)]


def test_placeholders_take_values_defaults_and_escapes(tmp_path: Path) -> None:
    text = SITE.format(name="alpha", seed="http://127.0.0.2:${PORT}/${SECTION:-shop}/")
    text = text.replace("'^https?://[^/]+/p/\\d+$'", "'^https?://[^/]+/$${literal}$'")
    site = parse_site(text, "a.toml", {"PORT": "8123"})
    assert site.seeds == ("http://127.0.0.2:8123/shop/",)
    assert site.page_types[0].url_pattern.pattern == "^https?://[^/]+/${literal}$"
    assert parse_site(text, "a.toml", lambda n: {"PORT": "1", "SECTION": "b"}.get(n)).seeds \
        == ("http://127.0.0.2:1/b/",)


def test_placeholders_come_from_the_environment_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "a.toml", "alpha", seed="http://127.0.0.2:${WEBCRAWL_TEST_PORT}/")
    monkeypatch.setenv("WEBCRAWL_TEST_PORT", "9999")
    assert load_site_file(path).seeds == ("http://127.0.0.2:9999/",)
    monkeypatch.delenv("WEBCRAWL_TEST_PORT")
    with pytest.raises(SiteConfigError, match=r"seeds\[0\]: got .* with WEBCRAWL_TEST_PORT "
                                              r"undefined"):
        load_site_file(path)


def test_an_expanded_value_is_still_validated() -> None:
    text = SITE.format(name="alpha", seed="http://127.0.0.2:${PORT}/")
    with pytest.raises(SiteConfigError) as info:
        parse_site(text, "a.toml", {"PORT": "port"})
    assert str(info.value) == ("a.toml: seeds[0]: got 'http://127.0.0.2:port/', expected an "
                               "absolute http:// or https:// URL")


DOCS = Path(__file__).resolve().parent.parent / "docs" / "sites.md"


def test_the_documented_example_is_valid() -> None:
    text = DOCS.read_text(encoding="utf-8")
    example = text.split("## Example", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    site = parse_site(example, "docs/sites.md", {})
    assert site.name == "shop" and [p.name for p in site.page_types] == ["product", "category"]


def test_every_key_of_the_format_is_documented() -> None:
    from webcrawl.sites import _build

    text = DOCS.read_text(encoding="utf-8")
    keys = {k for name in dir(_build) if name.endswith("_KEYS") for k in getattr(_build, name)}
    # As `key`, `[key]`, `[[key]]`, `key.sub` or `table.key` in the reference.
    missing = sorted(k for k in keys
                     if not re.search(r"[`.\[]" + re.escape(k) + r"[`.\]]", text))
    assert missing == []


def test_bundled_files_are_read_from_a_zipped_egg(tmp_path: Path) -> None:
    """scrapyd runs the project from a zipped egg: the site files must come with the package."""
    import subprocess
    import sys
    import zipfile

    package = Path(__file__).resolve().parent.parent / "webcrawl"
    egg = tmp_path / "webcrawl.egg"
    with zipfile.ZipFile(egg, "w") as z:
        for path in package.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, path.relative_to(package.parent).as_posix())
    code = ("import webcrawl.sites as s; from webcrawl.sites import load_sites;"
            f"assert s.__file__.startswith({str(egg)!r}), s.__file__;"
            "print(' '.join(sorted(load_sites(variables={}))))")
    run = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(egg)),
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert {"books", "demo"} <= set(run.stdout.split())
