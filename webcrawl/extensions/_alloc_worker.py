"""The allocator's worker thread: what would stall the reactor (Redis reads of every record, the
numpy plan, the interval writes, the cycle's bookings) runs here, one job at a time, in the order
submitted; the reactor gets each job's answer back on its own thread and applies it there.

:meth:`PlanWorker.submit` returns a Deferred fired on the reactor thread (through
``reactor.callFromThread``) with the job's result, or its failure. The thread holds the GIL only
in turns (CPython hands it over every few milliseconds, and numpy and the socket waits release
it), so the reactor keeps its timers and the downloads going while a plan runs.

:class:`Jobs` are the allocator's jobs: they touch the planner and the cycle keeper, which
belong to this thread, and answer with what the reactor must apply (a cycle begun, stats).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from webcrawl.extensions._alloc_cycles import Begun, CycleKeeper
    from webcrawl.extensions._alloc_planner import Planner
    from webcrawl.state.ledger import Cycle

__all__ = ["STATS", "Jobs", "PlanWorker"]

STATS = "webcrawl/allocator/"

T = TypeVar("T")


def _post(f: Callable[[], None]) -> None:
    from twisted.internet import reactor

    reactor.callFromThread(f)  # type: ignore[attr-defined]


class PlanWorker:
    """One thread for the allocator's jobs (see the module docstring)."""

    def __init__(self, post: Callable[[Callable[[], None]], Any] = _post) -> None:
        self.post = post
        self._executor: ThreadPoolExecutor | None = None
        #: jobs submitted whose answers the reactor has not applied yet
        self.pending = 0
        self.done = 0

    @property
    def busy(self) -> bool:
        return self.pending > 0

    def submit(self, job: Callable[[], T]) -> Deferred[T]:
        """Run ``job`` on the thread after the jobs before it; call from the reactor thread."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="webcrawl-allocator")
        d: Deferred[T] = Deferred()
        self.pending += 1
        future = self._executor.submit(job)
        future.add_done_callback(lambda f: self.post(lambda: self._answer(d, f)))
        return d

    def _answer(self, d: Deferred[T], future: Future[T]) -> None:
        self.pending -= 1
        self.done += 1
        error = future.exception()
        if error is not None:
            d.errback(Failure(error, type(error), error.__traceback__))
        else:
            d.callback(future.result())

    def close(self) -> None:
        """Let the thread go once its jobs are done (it never takes a new one)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


class Jobs:
    """The allocator's jobs, run on the worker thread (or, by tests and tools without a reactor,
    on the caller's)."""

    def __init__(self, planner: Planner, cycles: CycleKeeper) -> None:
        self.planner = planner
        self.cycles = cycles

    def begin(self) -> Begun | None:
        """Start or join a cycle; ``None`` while another process holds the planning lock."""
        begun = self.cycles.try_begin()
        if begun is not None and begun.started:
            self.planner.control.reset()  # the bucket starts over: so do the gain's readings
        return begun

    def plan(self, cycle: Cycle | None, not_before: float,
             pull_forward: bool = False) -> dict[str, float]:
        """An allocation, and the ledger's retention by the lock holder: the stats to count."""
        stats = {STATS + k: v for k, v in self.planner.allocate(cycle, not_before, pull_forward).items()}
        if self.planner.holding:
            retained = self.cycles.retain(cycle)
            stats["webcrawl/cycles/rolled_up"] = retained.rolled
            stats["webcrawl/cycles/dead_workers"] = retained.dead_workers
        return stats

    def close(self, cycle: Cycle, not_before: float) -> dict[str, float]:
        """A cycle's end: an allocation (the figures as of now, not as of the last one), then
        the cycle's close figures."""
        stats = self.plan(cycle, not_before) if self.planner.holding else {}
        self.cycles.close(cycle, self.planner.take_means())
        return stats

    def final(self, cycle: Cycle, not_before: float) -> dict[str, float]:
        """The process's end: the cycle's close figures, then it leaves the cycle and lets the
        allocation lock go."""
        stats = self.close(cycle, not_before)
        self.cycles.leave(cycle)
        self.planner.release()
        return stats
