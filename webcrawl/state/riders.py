"""Reads and pops that ride along with the write batch's pipeline: one round trip for both.

The crawl's writes go out once per flush in one pipeline (:mod:`webcrawl.state.batch`). A pop or
a look at the queues that must see those writes (a finished fetch moves its host's turn, pushed
URLs are new work) would otherwise cost a flush and then a call of its own: two round trips. A
:class:`RidingClient` is the client the batch pipelines through; a command waiting on it (a
:class:`Rider`) is appended to the next pipeline that executes, after the batch's calls, so it
sees them, and gets its own replies back.

Contract: :meth:`RidingClient.carry` sends the riders with the batch's next flush, or alone in a
pipeline of their own when the batch has nothing to send, and returns their replies. A pipeline
that fails keeps its riders aboard (a retry inside the flush, such as reloading lost scripts,
takes them again); :meth:`carry` takes them off before it raises, and the caller decides whether
to ask again (a pop asks again with its operation id, so a pop the server did run is not done
twice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Rider", "RidingClient"]

Build = Callable[[Any], None]


class Rider:
    """Commands queued by ``build(pipeline)``; ``replies`` once the pipeline answered."""

    __slots__ = ("build", "replies")

    def __init__(self, build: Build) -> None:
        self.build = build
        self.replies: list[Any] | None = None


class RidingClient:
    """A Redis client whose pipelines also carry the riders waiting (see the module docstring).
    Everything else goes to the wrapped client unchanged."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._riders: list[Rider] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    @property
    def unwrapped(self) -> Any:
        """The wrapped client: its pipelines carry no riders."""
        return self._client

    def pipeline(self, transaction: Any = False, shard_hint: Any = None) -> _RidingPipeline:
        return _RidingPipeline(self, self._client.pipeline(transaction=transaction,
                                                           shard_hint=shard_hint))

    def carry(self, builds: list[Build], flush: Callable[[], Any]) -> list[list[Any]]:
        """The replies of each of ``builds``, sent with what ``flush`` sends (the batch's flush),
        or alone when it sends nothing. Raises what the pipeline raised."""
        riders = [Rider(b) for b in builds]
        self._riders.extend(riders)
        try:
            flush()
            if any(r.replies is None for r in riders):
                self.pipeline().execute()
        finally:
            for r in riders:
                if r in self._riders:
                    self._riders.remove(r)
        return [r.replies or [] for r in riders]


class _RidingPipeline:
    """A pipeline of the wrapped client; ``execute`` appends the riders waiting."""

    def __init__(self, owner: RidingClient, pipe: Any) -> None:
        self._owner = owner
        self._pipe = pipe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)

    def __len__(self) -> int:
        return len(self._pipe)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        pipe = self._pipe
        riders = [r for r in self._owner._riders if r.replies is None]
        own = len(pipe)
        spans = []
        for rider in riders:
            start = len(pipe)
            rider.build(pipe)
            spans.append((rider, start, len(pipe)))
        if not len(pipe):
            return []
        replies = pipe.execute(raise_on_error=raise_on_error)
        for rider, start, end in spans:
            rider.replies = list(replies[start:end])
            self._owner._riders.remove(rider)
        return list(replies[:own])
