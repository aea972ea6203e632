"""Importing Scrapy's HTTP/1.1 download handler without its slowest start-up step.

Three deprecated aliases in Scrapy's TLS modules (``scrapy.core.downloader.contextfactory`` and
``scrapy.core.downloader.tls``) are made by ``create_deprecated_class``, which calls
``inspect.stack()`` to name the module that defines them. ``inspect.stack()`` reads the source of
every frame on the stack and looks each frame's module up among all loaded modules: at the point
a crawl first imports the handler (deep in the engine's start, with some 1,500 modules loaded),
the three calls took about 0.12 s, a tenth of a one-page crawl. Only the caller's frame (item 1,
field 0) is used, so while those modules are first imported :func:`import_http11` lets
``inspect.stack()`` return the frames alone. ``inspect.getmodule()`` of that frame then looks the
module up by the file of every loaded module (a ``realpath`` each, about 900): it finds it by the
frame's module name instead. The aliases get the same module names.
"""

from __future__ import annotations

import inspect
import sys
from contextlib import contextmanager
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

#: Modules whose import calls ``inspect.stack()`` (Scrapy 2.13 to 2.19), in import order.
SLOW = ("scrapy.core.downloader.tls", "scrapy.core.downloader.contextfactory")
HANDLER = "scrapy.core.downloader.handlers.http11"


def _frames_only(context: int = 1) -> list[tuple[Any, ...]]:
    """``inspect.stack()``'s frames, outermost last, without reading any source."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        frames.append((frame, None, None, None, None, None))
        frame = frame.f_back
    return frames


@contextmanager
def _cheap_stack() -> Iterator[None]:
    stack, getmodule = inspect.stack, inspect.getmodule

    def module_of(obj: Any, _filename: str | None = None) -> ModuleType | None:
        if inspect.isframe(obj):
            return sys.modules.get(obj.f_globals.get("__name__", ""))
        return getmodule(obj, _filename)

    inspect.stack = _frames_only  # type: ignore[assignment]
    inspect.getmodule = module_of
    try:
        yield
    finally:
        inspect.stack, inspect.getmodule = stack, getmodule


def import_http11() -> ModuleType:
    """``scrapy.core.downloader.handlers.http11``, imported with :func:`inspect.stack` cheap
    while the modules that call it load (a no-op once they are loaded)."""
    if all(name in sys.modules for name in SLOW):
        return import_module(HANDLER)
    with _cheap_stack():
        return import_module(HANDLER)
