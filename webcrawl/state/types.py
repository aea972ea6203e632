"""Small ids of page type names (crawl-wide ``types`` hash), so page records keep two bytes, not a
name. Id 0 is "no page type". Ids are given once, atomically, and never change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["TypeIds"]

_ID = """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if id then return tonumber(id) end
id = redis.call('HLEN', KEYS[1]) + 1
redis.call('HSET', KEYS[1], ARGV[1], id)
return id
"""


class TypeIds:
    def __init__(self, client: Any, layout: CrawlLayout) -> None:
        self.client = client
        self.key = layout.types
        self._script = client.register_script(_ID)
        self._ids: dict[str, int] = {}

    def id(self, name: str | None) -> int:
        if not name:
            return 0
        found = self._ids.get(name)
        if found is None:
            found = self._ids[name] = int(self._script(keys=[self.key], args=[name]))
        return found

    def names(self) -> dict[int, str]:
        raw = self.client.hgetall(self.key)
        return {int(v): (k.decode() if isinstance(k, bytes) else k) for k, v in raw.items()}
