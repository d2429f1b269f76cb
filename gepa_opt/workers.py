"""The bounded pool of LM-bound calls (metric calls and reflections) and how busy it was.

Every call the engine makes to the user's system or the reflection LM holds one of
`size` slots, so `max_concurrency` is the number of requests the model server sees at
once. Slots are handed out first come, first served: with one slot and a deterministic
adapter and LM, a run replays exactly. The scheduler asks `spare()` to start more work
when slots would otherwise sit idle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class WorkerPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self._slots = asyncio.Semaphore(size)
        self._busy_s = 0.0
        self._started = time.monotonic()
        self._held = self._waiting = 0
        self._freed = asyncio.Event()

    async def run(self, call: Awaitable[T]) -> T:
        """Await `call` once a slot is free; the time it holds the slot counts as busy."""
        self._waiting += 1
        try:
            await self._slots.acquire()
        except BaseException:
            if asyncio.iscoroutine(call):
                call.close()  # cancelled while waiting: it never ran, and never will
            raise
        finally:
            self._waiting -= 1
        self._held += 1
        start = time.monotonic()
        try:
            return await call
        finally:
            self._busy_s += time.monotonic() - start
            self._held -= 1
            self._slots.release()
            self._freed.set()
            self._freed = asyncio.Event()

    def spare(self) -> bool:
        """A slot is free and no call is queued for one: more work would run right away."""
        return self._held < self.size and self._waiting == 0

    async def freed(self) -> None:
        """Return once a slot has been given back."""
        await self._freed.wait()

    def utilization(self) -> float:
        """Busy slot-seconds over available slot-seconds since the pool was made."""
        elapsed = time.monotonic() - self._started
        return self._busy_s / (self.size * elapsed) if elapsed > 0 else 0.0
