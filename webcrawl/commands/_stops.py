"""A continuous crawl's stop conditions given as settings, for ``scrapy crawl``.

``WEBCRAWL_STOP_AFTER_CYCLES`` (an integer >= 1) and ``WEBCRAWL_STOP_AFTER_SECONDS`` (a number
> 0) stand for the site file's ``budget.stop_after_cycles`` and ``budget.stop_after_seconds``, the
way ``WEBCRAWL_CYCLE_CONTINUOUS``, ``WEBCRAWL_CYCLE_SECONDS`` and ``WEBCRAWL_BUDGET_PER_CYCLE``
stand for the site file's other budget fields. The crawl command applies them to the spider's
site before the crawler is built (:func:`with_stops`), so every component reads one site.

Like the site file's fields, they need continuous mode (a one-run cycle ends with its budget or
its work); asked for anyway, or given a bad value, they are a setting error naming the setting.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from webcrawl.settingtypes import SettingError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["STOP_SETTINGS", "stops_from", "with_stops"]

#: setting -> the site file's budget field it stands for
STOP_SETTINGS = {"WEBCRAWL_STOP_AFTER_CYCLES": "stop_after_cycles",
                 "WEBCRAWL_STOP_AFTER_SECONDS": "stop_after_seconds"}


def _value(name: str, raw: Any) -> int | float:
    """The setting's value, checked: an integer >= 1 for cycles, a number > 0 for seconds."""
    cycles = name == "WEBCRAWL_STOP_AFTER_CYCLES"
    try:
        value = int(str(raw).strip()) if cycles else float(raw)
    except (TypeError, ValueError):
        value = 0
    if not value > 0 or value != value:  # NaN is not > 0 either way; said for clarity
        expected = "an integer >= 1" if cycles else "a number of seconds > 0"
        raise SettingError(f"{name}={raw!r}: expected {expected}")
    return value


def stops_from(settings: BaseSettings) -> dict[str, int | float]:
    """The budget fields the settings override (empty when neither setting is given)."""
    out: dict[str, int | float] = {}
    for name, field in STOP_SETTINGS.items():
        raw = settings.get(name)
        if raw not in (None, ""):
            out[field] = _value(name, raw)
    return out


def with_stops(spidercls: type, settings: BaseSettings) -> type:
    """``spidercls``, or a subclass whose site carries the stop settings; raises
    :class:`SettingError` when they are given for a crawl that cannot take them."""
    stops = stops_from(settings)
    if not stops:
        return spidercls
    name = next(n for n, f in STOP_SETTINGS.items() if f in stops)
    site = getattr(spidercls, "site", None)
    if site is None:
        raise SettingError(f"{name}={settings.get(name)!r}: only a site file's spider runs in "
                           "cycles; this spider has no site file")
    if not (site.budget.continuous or settings.getbool("WEBCRAWL_CYCLE_CONTINUOUS", False)):
        raise SettingError(f"{name}={settings.get(name)!r}: a stop condition needs continuous "
                           "mode (a one-run cycle ends with its budget or its work); add -s "
                           "WEBCRAWL_CYCLE_CONTINUOUS=true, or continuous = true in the site "
                           "file's [budget]")
    derived = replace(site, budget=replace(site.budget, **stops))
    return type(spidercls.__name__, (spidercls,), {
        "__module__": spidercls.__module__, "__qualname__": spidercls.__qualname__,
        "__doc__": spidercls.__doc__, "site": derived})
