"""The crawl's Redis for a one-shot command (``crawlstate``, ``exclude``), released on every exit.

:func:`command_redis` connects to ``WEBCRAWL_REDIS_URL``, or starts (or joins) the embedded
redis-server under ``WEBCRAWL_DATA_DIR``, and on leaving, whatever the way out (an error, a
closed pipe, Ctrl-C), closes its connection and shuts the embedded server down if this command
was its last user. With ``must_exist``, a data folder holding no embedded server's files is an
error (a read-only command must not create an empty crawl state just to report it empty).

Settings or a server that do not answer end the command with one ``scrapy: error:`` line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webcrawl.commands._errors import fail
from webcrawl.config import StateConfig
from webcrawl.state.client import RedisUnavailable, open_handle
from webcrawl.state.embedded import SOCKET_NAME

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["CommandRedis", "command_redis"]

# What an embedded server leaves in its data folder (webcrawl.state.embedded's arguments).
_EMBEDDED_FILES = (SOCKET_NAME, "appendonly.aof", "dump.rdb")


@dataclass(frozen=True)
class CommandRedis:
    client: Any
    url: str  # for messages: the server's URL, or the embedded server's socket
    where: str  # "Redis at <url>" or "the embedded Redis under <folder>"


def _has_state(folder: Path) -> bool:
    return any((folder / name).exists() for name in _EMBEDDED_FILES)


@contextmanager
def command_redis(settings: BaseSettings, crawl: str, *, must_exist: bool = False
                  ) -> Iterator[CommandRedis]:
    """The Redis holding ``crawl``'s state (see the module docstring)."""
    try:
        config = StateConfig.from_settings(settings, crawl)
    except ValueError as exc:
        fail(str(exc))
    if config.redis_url:
        where = f"Redis at {config.redis_url}"
    else:
        where = f"the embedded Redis under {config.data_dir}"
        if must_exist and not _has_state(config.data_dir):
            fail(f"no crawl {crawl!r}: {config.data_dir} holds no crawl state",
                 "set WEBCRAWL_DATA_DIR to the crawl's data folder, or WEBCRAWL_REDIS_URL to "
                 "its Redis")
    try:
        handle = open_handle(config.redis_url, config.data_dir)
    except RedisUnavailable as exc:
        fail(str(exc))
    except (OSError, RuntimeError) as exc:  # the embedded server could not start
        first = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        fail(f"{where} could not start: {first}", f"see {config.data_dir / 'redis.log'}")
    try:
        yield CommandRedis(handle.client, handle.url, where)
    finally:
        try:
            if handle.embedded is not None:
                handle.embedded.release(handle.client)
        finally:
            handle.client.close()
