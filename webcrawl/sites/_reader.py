"""Typed reads out of a parsed TOML table, each failure a :class:`SiteConfigError` with its path.

A :class:`Table` knows the file and the field path it sits at, rejects keys it was not told about
(a typo must not pass silently: ``min_dealy_seconds`` would otherwise leave the default in force),
and hands out values only after checking their type and range.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from webcrawl.sites.errors import SiteConfigError

T = TypeVar("T")

_MISSING: Any = object()


class Table:
    """One TOML table at ``path`` (``""`` for the root) of the file ``source``.

    ``keys`` lists the keys allowed; ``None`` allows any (tables whose keys are user names, such
    as a page type's fields).
    """

    def __init__(self, source: str, path: str, data: Any, keys: Collection[str] | None) -> None:
        self.source = source
        self.path = path
        if not isinstance(data, Mapping):
            raise SiteConfigError(source, path, data, "a table")
        self.data: Mapping[str, Any] = data
        for key in data:
            if keys is not None and key not in keys:
                raise SiteConfigError(source, self.at(key), key, _one_of(key, keys),
                                      problem="unknown key")

    def at(self, key: str) -> str:
        """The field path of ``key`` inside this table."""
        return f"{self.path}.{key}" if self.path else key

    def error(self, field: str, value: Any, expected: str, problem: str | None = None
              ) -> SiteConfigError:
        """An error at ``field`` (a full path, usually ``self.at(key)``)."""
        return SiteConfigError(self.source, field, value, expected, problem=problem)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, expected: str, default: Any = _MISSING) -> Any:
        """The value of ``key``; a missing key is an error unless a default is given."""
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            raise self.error(self.at(key), None, expected, problem="missing")
        return default

    def text(self, key: str, expected: str, default: Any = _MISSING,
             check: Callable[[str], bool] | None = None) -> Any:
        """A non-empty string passing ``check``."""
        value = self.raw(key, expected, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value.strip() or (check and not check(value)):
            raise self.error(self.at(key), value, expected)
        return value

    def number(self, key: str, *, minimum: float, maximum: float, default: Any = _MISSING,
               integer: bool = False, exclusive_minimum: bool = False, unit: str = "") -> Any:
        """An int (``integer``) or a finite number, within the bounds."""
        kind = "an integer" if integer else "a number"
        low = f"> {_show(minimum)}" if exclusive_minimum else f">= {_show(minimum)}"
        expected = f"{kind} {low} and <= {_show(maximum)}{f' ({unit})' if unit else ''}"
        value = self.raw(key, expected, default)
        if value is default and default is not _MISSING:
            return value
        # TOML booleans are ints to Python; "true seconds" is a mistake, not a number.
        ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or not math.isfinite(value):
            raise self.error(self.at(key), value, expected)
        too_low = value <= minimum if exclusive_minimum else value < minimum
        if too_low or value > maximum:
            raise self.error(self.at(key), value, expected)
        return float(value) if not integer else value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key, "true or false", default)
        if not isinstance(value, bool):
            raise self.error(self.at(key), value, "true or false")
        return value

    def choice(self, key: str, choices: Collection[str], default: Any = _MISSING) -> Any:
        expected = "one of " + ", ".join(repr(c) for c in choices)
        value = self.raw(key, expected, default)
        if value not in choices or not isinstance(value, str):
            raise self.error(self.at(key), value, expected)
        return value

    def items(self, key: str, expected: str, read: Callable[[str, Any], T],
              default: tuple[T, ...] = (), *, non_empty: bool = False) -> tuple[T, ...]:
        """An array, each element passed through ``read(path, element)``."""
        whole = f"a list of {expected}" + (" (at least one)" if non_empty else "")
        values = self.raw(key, whole, _MISSING if non_empty else None)
        if values is None:
            return default
        if not isinstance(values, list) or (non_empty and not values):
            raise self.error(self.at(key), values, whole)
        return tuple(read(f"{self.at(key)}[{i}]", v) for i, v in enumerate(values))

    def table(self, key: str, keys: Collection[str] | None) -> Table:
        """The sub-table ``key`` (an empty one when missing)."""
        return Table(self.source, self.at(key), self.data.get(key, {}), keys)

    def tables(self, key: str, keys: Collection[str], *, non_empty: bool = False
               ) -> list[Table]:
        """An array of tables (``[[key]]``)."""
        whole = "an array of tables ([[" + self.at(key) + "]])" + (
            ", at least one" if non_empty else "")
        values = self.raw(key, whole, _MISSING if non_empty else [])
        if not isinstance(values, list) or (non_empty and not values):
            raise self.error(self.at(key), values, whole)
        return [Table(self.source, f"{self.at(key)}[{i}]", v, keys) for i, v in enumerate(values)]


def _one_of(key: str, keys: Collection[str]) -> str:
    known = sorted(keys)
    hint = difflib.get_close_matches(key, known, n=1)
    listing = "one of: " + ", ".join(known) if known else "no keys here"
    return listing + (f" (did you mean {hint[0]!r}?)" if hint else "")


def _show(bound: float) -> str:
    """A bound as a user would write it in TOML: ``31_622_400``, not ``3.16224e+07``."""
    return f"{int(bound):_}" if float(bound).is_integer() else repr(bound)
