"""ServerClock (webcrawl.state.servertime) against a real redis-server: the offset to the server's
clock is kept from the quickest of several TIME round trips, so a reply held up on its way back
does not put a process's clock off (two processes sharing a host's turns must wake together)."""

from __future__ import annotations

import time
from typing import Any

from webcrawl.state.client import connect
from webcrawl.state.servertime import ServerClock


class SlowReplies:
    """A real client whose TIME replies are held up on some calls (after the server answered)."""

    def __init__(self, client: Any, delays: list[float]) -> None:
        self.client = client
        self.delays = delays
        self.calls = 0

    def time(self) -> Any:
        reply = self.client.time()
        delay = self.delays[self.calls % len(self.delays)]
        self.calls += 1
        if delay:
            time.sleep(delay)  # the reply is late reaching the process, as on a loaded machine
        return reply


def test_the_offset_comes_from_the_quickest_round_trip(redis_url: str) -> None:
    client, _, _ = connect(redis_url)
    try:
        plain = ServerClock(client).measure()  # same machine: the true offset is about 0
        slow = SlowReplies(client, [0.2, 0.2, 0.0, 0.2, 0.2])
        clock = ServerClock(slow)
        offset = clock.measure()
        assert slow.calls == 5
        assert abs(offset - plain) < 0.02, (offset, plain)
        one = ServerClock(SlowReplies(client, [0.2])).measure(samples=1)
        assert one - plain < -0.08, "one late reply alone puts the clock off by half its delay"
        skewed = ServerClock(client, skew=30.0)
        assert abs(skewed.measure() + 30.0 - plain) < 0.02
        assert abs(skewed.time() - time.time()) < 0.05
    finally:
        client.close()
