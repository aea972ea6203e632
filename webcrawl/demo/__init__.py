"""Local HTTP sites on 127.0.0.x for tests, benchmarks and a first run without internet."""

from webcrawl.demo.server import LogEntry, MultiHostServer, read_log

__all__ = ["LogEntry", "MultiHostServer", "read_log"]
