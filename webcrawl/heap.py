"""Handing memory the process has freed back to the operating system.

A plan over every known page allocates arrays of a few hundred bytes a page for a moment, and
reading a shard's records builds lists of thousands of strings. glibc's ``malloc`` serves
blocks below its mmap threshold (which it raises, up to 32 MB, each time a larger block is freed)
from its heap, and a freed block inside the heap stays with the process: without help, the
process holding the allocation lock keeps the high-water mark of every plan it ran, and its RSS
climbs with the pages of the crawl although what it holds does not. ``malloc_trim(0)`` returns
the free pages of the heap, inside it as well as at its top.

Elsewhere (musl, macOS, Windows) there is no ``malloc_trim``: :func:`trim` does nothing there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["trim"]

_TRIM: Callable[[int], int] | None = None
_LOOKED = False


def _malloc_trim() -> Callable[[int], int] | None:
    global _TRIM, _LOOKED
    if not _LOOKED:
        _LOOKED = True
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name) if name else None
            _TRIM = getattr(libc, "malloc_trim", None)
        except OSError:
            _TRIM = None
        if _TRIM is not None:
            _TRIM.argtypes = [ctypes.c_size_t]
            _TRIM.restype = ctypes.c_int
    return _TRIM


def trim() -> bool:
    """Return the free pages of the C heap to the system; False where the C library cannot."""
    release = _malloc_trim()
    if release is None:
        return False
    release(0)
    return True
