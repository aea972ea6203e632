"""One-line errors for webcrawl's commands.

A mistake a user can make (a bad setting, an unknown spider or crawl, a Redis that does not
answer) ends a command with one line on stderr, ``scrapy: error: <what>; <hint>``, and exit status
2, never a traceback. Scrapy's own ``UsageError`` also prints the command's usage block; that is
kept for wrong arguments, where the usage helps, and avoided here, where it does not.

:func:`user_error_message` decides which exceptions are the user's: webcrawl's validation errors
(:class:`~webcrawl.settingtypes.SettingError`, site-file errors, an unreachable Redis,
``UsageError``) and any ``ValueError`` whose message starts with a setting's name (the project's
convention for a bad setting value, see :mod:`webcrawl.config`). A component that reads a number
with Scrapy's ``getint``/``getfloat`` fails with Python's own message ("could not convert string
to float: 'abc'"); given the settings, the setting holding that text is named instead. Anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, NoReturn

from scrapy.exceptions import UsageError

from webcrawl.settingtypes import SettingError
from webcrawl.sites import SiteConfigError
from webcrawl.state.client import RedisUnavailable
from webcrawl.state.layout import LayoutMismatch

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["USAGE_EXIT_STATUS", "fail", "one_line", "user_error_message"]

USAGE_EXIT_STATUS = 2

# "WEBCRAWL_X=...", "WEBCRAWL_X: ...", "WEBCRAWL_X is ...", "DOWNLOAD_DELAY=..."
_NAMES_A_SETTING = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?:=|:| )")
# Python's messages for float("x") and int("x"), as Scrapy's getfloat/getint raise them.
_NOT_A_NUMBER = re.compile(r"^(?:could not convert string to float|"
                           r"invalid literal for int\(\) with base 10): '(.*)'$")


def one_line(text: str) -> str:
    """``text`` on one line: inner line breaks become ``; ``, runs of blanks one space."""
    parts = [" ".join(line.split()) for line in str(text).splitlines()]
    return "; ".join(p for p in parts if p)


def user_error_message(exc: BaseException, settings: BaseSettings | None = None) -> str | None:
    """The one-line message of ``exc`` if it is a mistake the user can fix, else ``None``."""
    if isinstance(exc, (UsageError, SettingError, SiteConfigError, RedisUnavailable,
                        LayoutMismatch)):
        return one_line(str(exc)) or None
    if type(exc) is not ValueError:
        return None
    if _NAMES_A_SETTING.match(str(exc)):
        return one_line(str(exc))
    number = _NOT_A_NUMBER.match(str(exc))
    if number is not None and settings is not None:
        holders = [name for name, value in settings.items()
                   if isinstance(value, str) and value.strip() == number.group(1).strip()]
        if len(holders) == 1:
            return f"{holders[0]}={number.group(1)!r} is not a number"
    return None


def fail(message: str, hint: str | None = None) -> NoReturn:
    """Print ``scrapy: error: <message>[; <hint>]`` on stderr and exit with status 2."""
    line = one_line(message) + (f"; {one_line(hint)}" if hint else "")
    sys.stderr.write(f"scrapy: error: {line}\n")
    sys.stderr.flush()
    raise SystemExit(USAGE_EXIT_STATUS)
