"""Handing memory the process has freed back to the operating system.

A plan over every known page allocates arrays of a few hundred bytes a page for a moment, and
reading a shard's records builds lists of thousands of strings. glibc's ``malloc`` serves
blocks below its mmap threshold (which it raises, up to 32 MB, each time a larger block is freed)
from its heap, and a freed block inside the heap stays with the process: without help, the
process holding the allocation lock keeps the high-water mark of every plan it ran, and its RSS
climbs with the pages of the crawl although what it holds does not. ``malloc_trim(0)`` returns
the free pages of the heap, inside it as well as at its top.

Elsewhere (musl, macOS, Windows) there is no ``malloc_trim``: :func:`trim` does nothing there.

:func:`collect_less` spaces out Python's cyclic garbage collector in a crawl process. With
Python's default (a young-generation pass every 700 net new container objects), a crawl runs
hundreds of passes, each of which walks everything allocated since the last: about a tenth of the
CPU of a one-page crawl (start-up builds several hundred thousand objects) and 7% of a crawl of
small pages. Nearly all of a crawl's objects die by reference counting alone, so passes every
20,000 objects find the same garbage with a twentieth of the work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable
from functools import cache

__all__ = ["collect_less", "trim"]


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        release = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
    if release is not None:
        release.argtypes = [ctypes.c_size_t]
        release.restype = ctypes.c_int
    return release


def trim() -> bool:
    """Return the free pages of the C heap to the system; False where the C library cannot."""
    release = _malloc_trim()
    if release is None:
        return False
    release(0)
    return True


def collect_less(threshold: int) -> None:
    """Run the collector's young-generation pass every ``threshold`` net new container objects
    (the older generations keep their ratios); 0 or less leaves Python's setting alone."""
    if threshold > 0:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(threshold, middle, old)
