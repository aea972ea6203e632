"""The one error a bad site file raises.

Every problem found in a site file becomes a :class:`SiteConfigError` whose message names the file,
the field path (``page_types[2].fields.price``), what was found and what was expected, so the user
can fix the file without reading any code. Validation stops at the first problem: one clear message
beats a wall of follow-on errors.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SiteConfigError"]


class SiteConfigError(ValueError):
    """A site file is unreadable or invalid.

    Attributes: ``source`` (the file), ``field`` (dotted path inside it, ``""`` for the whole
    file), ``value`` (the offending value, ``None`` when the field is missing), ``expected`` (what
    would have been accepted) and ``problem`` (what was wrong, ``"got <value>"`` by default).
    """

    def __init__(
        self,
        source: str,
        field: str,
        value: Any,
        expected: str,
        *,
        problem: str | None = None,
    ) -> None:
        self.source = source
        self.field = field
        self.value = value
        self.expected = expected
        self.problem = problem if problem is not None else f"got {value!r}"
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {self.problem}, expected {expected}")

    @property
    def message(self) -> str:
        """The whole message, one line: ``<file>: <field>: got <value>, expected <what>``."""
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only ``problem`` would be lost by the default pickling of exceptions, and
        # errors may cross process boundaries (scrapyd, multiprocessing test runners).
        return (_rebuild, (type(self), self.source, self.field, self.value, self.expected,
                           self.problem))


def _rebuild(cls: type[SiteConfigError], source: str, field: str, value: Any, expected: str,
             problem: str) -> SiteConfigError:
    return cls(source, field, value, expected, problem=problem)
