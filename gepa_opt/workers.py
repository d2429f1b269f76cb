"""The bounded pool of LM-bound calls (metric calls and reflections) and how busy it was.

Every call the engine makes to the user's system or the reflection LM holds one of
`size` slots, so `max_concurrency` is the number of requests the model server sees at
once. A freed slot goes to the waiting call with the lowest priority (the engine's: a
proposal's minibatch and reflection work first, older proposals first; then valset
passes, the newest winner's first), first come first served among equals: work already
in flight finishes before newer proposals take the slots, and with one slot and a
deterministic adapter and LM a run replays exactly. The pool also measures how long
each kind of call takes, which the "auto" shape is re-decided from.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from typing import Literal, TypeVar

T = TypeVar("T")
CallKind = Literal["metric", "reflection"]
Priority = int | tuple[int | bool, ...]
"""Lower first; any one run uses a single form (ints, or tuples of one length)."""


class WorkerPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self._busy_s = 0.0
        self._started = time.monotonic()
        self._held = 0
        self._queue: list[tuple[Priority, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._freed = asyncio.Event()
        self._seconds: dict[CallKind, float] = {"metric": 0.0, "reflection": 0.0}
        self._calls: dict[CallKind, int] = {"metric": 0, "reflection": 0}

    async def run(self, call: Awaitable[T], priority: Priority = 0, kind: CallKind = "metric") -> T:
        """Await `call` once a slot is free; the time it holds the slot counts as busy."""
        try:
            await self._acquire(priority)
        except BaseException:
            if asyncio.iscoroutine(call):
                call.close()  # cancelled while waiting: it never ran, and never will
            raise
        start = time.monotonic()
        try:
            return await call
        finally:
            seconds = time.monotonic() - start
            self._busy_s += seconds
            self._seconds[kind] += seconds
            self._calls[kind] += 1
            self._release()

    async def _acquire(self, priority: Priority) -> None:
        if self._held < self.size and not self._queue:
            self._held += 1
            return
        turn = asyncio.get_running_loop().create_future()
        entry = (priority, next(self._order), turn)
        heapq.heappush(self._queue, entry)
        try:
            await turn  # the slot is handed over already held
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._release()  # handed a slot just as we were cancelled: pass it on
            elif entry in self._queue:
                self._queue.remove(entry)
                heapq.heapify(self._queue)
            raise

    def _release(self) -> None:
        while self._queue:
            *_, turn = heapq.heappop(self._queue)
            if not turn.done():
                turn.set_result(None)  # the slot passes on, still held
                break
        else:
            self._held -= 1
        self._freed.set()
        self._freed = asyncio.Event()

    def spare(self) -> bool:
        """A slot is free and no call is queued for one: more work would run right away."""
        return self._held < self.size and not self._queue

    async def freed(self) -> None:
        """Return once a slot has been given back."""
        await self._freed.wait()

    def mean_seconds(self, kind: CallKind) -> float | None:
        """Measured seconds per call of this kind so far; None before the first one."""
        calls = self._calls[kind]
        return self._seconds[kind] / calls if calls else None

    def utilization(self) -> float:
        """Busy slot-seconds over available slot-seconds since the pool was made."""
        elapsed = time.monotonic() - self._started
        return self._busy_s / (self.size * elapsed) if elapsed > 0 else 0.0
