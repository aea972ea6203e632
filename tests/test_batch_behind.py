"""The write batch's send behind (webcrawl.state.batch.WriteBatch.send_behind): the caller's
thread goes on while Redis answers, answers are applied on the caller's thread only, a flush waits
for the send under way and answers it first, and a failed send keeps its calls for the next one.
A real redis-server; CLIENT PAUSE holds its answers back for as long as a test needs."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from webcrawl.runtime import CrawlRuntime
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.pagestore import interval_op
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet

HOST = "127.0.0.2"
URL = f"http://{HOST}/a"


def batch_on(client: Any) -> WriteBatch:
    layout = CrawlLayout("behind", 1)
    scripts = ScriptSet(client)
    queue_ = CrawlQueue(client, scripts, layout, cap=10, default_delay=0.0, lease_seconds=30)
    return WriteBatch(client, scripts, layout, queue_, LandSettings(0.0), bloom_slices=1)


Sent = tuple[list[list[Any]], list[Any], "queue.Queue[Callable[[], None]]"]


def send_one_behind(batch: WriteBatch) -> Sent:
    """One land operation sent behind: its answers, the errors ``done`` got, and what the batch
    posted for the caller's thread to run."""
    answers: list[list[Any]] = []
    done: list[Any] = []
    posted: queue.Queue[Callable[[], None]] = queue.Queue()
    batch.land(HOST, interval_op(URL, 60.0, due_at=0.0), answers.append)
    assert batch.send_behind(posted.put, lambda error, replies: done.append(error))
    return answers, done, posted


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    c, _, _ = connect(redis_url)
    yield c
    c.close()


class Pause:
    """Holds the server's writers (scripts included) until :meth:`end` (or the test's end)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def start(self) -> None:
        self.client.client_pause(60_000, all=False)

    def end(self) -> None:
        self.client.client_unpause()


@pytest.fixture
def pause(redis_client: redis.Redis) -> Iterator[Pause]:
    p = Pause(redis_client)
    yield p
    p.end()


def test_the_caller_goes_on_while_redis_holds_the_answer(client: Any, pause: Pause) -> None:
    batch = batch_on(client)
    pause.start()
    answers, done, posted = send_one_behind(batch)
    # Redis is paused: the call above came back anyway, and nothing was answered.
    assert batch.sending and answers == [] and done == [] and posted.empty()

    pause.end()
    answer = posted.get(timeout=30)
    assert answers == [], "answers are applied only when the caller runs what was posted"
    caller = threading.get_ident()
    seen: list[int] = []
    batch.land(HOST, interval_op(URL + "2", 60.0, due_at=0.0), lambda r: seen.append(
        threading.get_ident()))
    answer()
    assert len(answers) == 1 and done == [None] and not batch.sending
    assert batch.flush() and seen == [caller]


def test_a_flush_answers_the_send_under_way_first_and_each_call_once(client: Any) -> None:
    batch = batch_on(client)
    order: list[str] = []
    done: list[Any] = []
    posted: queue.Queue[Callable[[], None]] = queue.Queue()
    batch.land(HOST, interval_op(URL, 60.0, due_at=0.0), lambda r: order.append("behind"))
    assert batch.send_behind(posted.put, lambda error, replies: done.append(error))
    batch.land(HOST, interval_op(URL + "2", 60.0, due_at=0.0), lambda r: order.append("flush"))

    assert batch.flush()
    assert order == ["behind", "flush"] and done == [None]
    posted.get(timeout=30)()  # the posted answer comes late: it does nothing now
    assert order == ["behind", "flush"] and done == [None] and batch.unsent == 0


def test_a_failed_send_behind_keeps_its_calls_for_the_next_flush(
        redis_url: str, pause: Pause) -> None:
    impatient, _, _ = connect(redis_url, socket_timeout=0.2)
    try:
        batch = batch_on(impatient)
        pause.start()
        answers, done, posted = send_one_behind(batch)
        posted.get(timeout=30)()

        assert len(done) == 1 and isinstance(done[0], redis.TimeoutError)
        assert answers == [] and batch.unsent == 1 and not batch.sending
        pause.end()
        assert batch.flush()
        assert len(answers) == 1 and batch.unsent == 0
    finally:
        impatient.close()


def test_closing_answers_the_send_under_way_and_stops_the_thread(client: Any) -> None:
    before = set(threading.enumerate())
    batch = batch_on(client)
    answers: list[list[Any]] = []
    batch.land(HOST, interval_op(URL, 60.0, due_at=0.0), answers.append)
    assert batch.send_behind(lambda f: None, lambda error, replies: None)
    assert [t.name for t in set(threading.enumerate()) - before] == ["webcrawl-batch_0"]
    batch.close()
    assert len(answers) == 1 and not batch.sending
    assert not set(threading.enumerate()) - before


def test_a_crawls_timed_flush_goes_behind_while_the_reactor_runs(
        redis_url: str, redis_client: redis.Redis) -> None:
    """The runtime's timed flush sends behind: the event loop keeps turning while Redis holds
    the answer, which then comes back through the reactor."""
    import asyncio

    from tests.runtimes import run, runtime_for, until

    runtime: CrawlRuntime = runtime_for(redis_url, {"WEBCRAWL_FLUSH_SECONDS": 0.0})
    answered: list[list[Any]] = []

    async def scenario() -> int:
        redis_client.client_pause(60_000, all=False)
        try:
            runtime.batch.land(HOST, interval_op(URL, 60.0, due_at=0.0), answered.append)
            await until(lambda: runtime.batch.sending)
            turns = 0
            while turns < 20:
                await asyncio.sleep(0)
                turns += 1
            assert not answered and runtime.batch.sending
        finally:
            redis_client.client_unpause()
        await until(lambda: bool(answered))
        return turns

    assert run(scenario()) == 20
    assert runtime.batch.flushes == 1 and not runtime.batch.sending
    runtime.close()
