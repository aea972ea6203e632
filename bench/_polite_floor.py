"""``python -m bench._polite_floor crawl fetch ...``: ``scrapy`` with webcrawl's collector setting.

The politeness benchmark's second floor runs vanilla Scrapy's ``fetch`` spider with the two parts of
webcrawl that cut the cost of Scrapy's request cycle itself rather than add work to it: its HTTP
client (given on the command line as the download handler) and its spacing of Python's garbage
collector (:func:`webcrawl.heap.collect_less` at webcrawl's default, applied here before Scrapy
starts, as ``scrapy crawl`` does in a webcrawl project).
"""

from __future__ import annotations

from scrapy.cmdline import execute

from webcrawl.config import DEFAULTS
from webcrawl.heap import collect_less

if __name__ == "__main__":
    collect_less(DEFAULTS["WEBCRAWL_GC_THRESHOLD"])
    execute()
