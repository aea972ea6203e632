"""webcrawl.net._imports: Scrapy's HTTP/1.1 handler imported without inspect.stack()'s and
inspect.getmodule()'s cost, with
the same result: its deprecated aliases keep their module names, and inspect is left as found."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_handler_imports_with_the_aliases_named_as_scrapy_names_them() -> None:
    script = textwrap.dedent("""
        import inspect, sys, warnings
        sys.path.insert(0, sys.argv[1])
        original = inspect.stack
        calls = []
        def counted(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)
        inspect.stack = counted
        getmodule = inspect.getmodule
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from webcrawl.net import handler
        from scrapy.core.downloader import contextfactory, tls
        print(contextfactory.ScrapyClientContextFactory.__module__,
              contextfactory.AcceptableProtocolsContextFactory.__module__,
              tls.ScrapyClientTLSOptions.__module__,
              inspect.stack is counted and inspect.getmodule is getmodule, len(calls),
              any("parent module" in str(w.message) for w in caught),
              handler.GuardedDownloadHandler.__mro__[1].__name__)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(REPO)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "scrapy.core.downloader.contextfactory", "scrapy.core.downloader.contextfactory",
        "scrapy.core.downloader.tls", "True", "0", "False", "HTTP11DownloadHandler"]
