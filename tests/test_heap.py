"""webcrawl.heap: freed heap memory goes back to the system (glibc), in a process of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from webcrawl import heap

REPO = Path(__file__).resolve().parent.parent

# Fills the heap with 60 MB of blocks too large for Python's small-object allocator and too small
# for mmap, frees all but the last one (which pins the heap's top, so free() alone cannot shrink
# it), and prints RSS in MB: filled, freed, trimmed.
_SCRIPT = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from webcrawl import heap
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    blocks = [bytes(2000) + bytes([i % 256]) for i in range(30_000)]
    pin = bytes(3000)
    filled = rss()
    del blocks
    freed = rss()
    assert heap.trim()
    print(filled, freed, rss())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_hands_freed_heap_pages_back():
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(REPO)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    filled, freed, trimmed = map(float, out.split())
    assert freed > filled - 20, "freeing alone kept the heap (the case trim is for)"
    assert trimmed < freed - 40, (filled, freed, trimmed)


def test_trim_says_whether_it_could():
    assert heap.trim() in (True, False)
    assert heap.trim() is (heap._malloc_trim() is not None)


def test_collect_less_spaces_the_young_generation_passes_only() -> None:
    """In a process of its own: the young generation's threshold is set, the older ones keep
    theirs, and 0 leaves Python's setting alone."""
    script = textwrap.dedent("""
        import gc, sys
        sys.path.insert(0, sys.argv[1])
        from webcrawl import heap
        before = gc.get_threshold()
        heap.collect_less(0)
        kept = gc.get_threshold()
        heap.collect_less(12_345)
        print(before == kept, gc.get_threshold() == (12_345, *before[1:]))
    """)
    done = subprocess.run([sys.executable, "-c", script, str(REPO)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["True", "True"]
