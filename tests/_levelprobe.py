"""An extension for tests/test_log_records.py: at close, logs (at WARNING) whether the engine's
logger would still build a DEBUG record."""

from __future__ import annotations

import logging
from typing import Any

from scrapy import signals

logger = logging.getLogger(__name__)


class LevelProbe:
    @classmethod
    def from_crawler(cls, crawler: Any) -> LevelProbe:
        probe = cls()
        crawler.signals.connect(probe.closed, signal=signals.spider_closed)
        return probe

    def closed(self) -> None:
        engine = logging.getLogger("scrapy.core.engine")
        logger.warning("probe: engine DEBUG enabled=%s", engine.isEnabledFor(logging.DEBUG))
