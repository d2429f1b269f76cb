"""Fewer compute threads while other processes compete for this process's cores.

Every parallel op ends at a barrier where its threads wait for each other, and libgomp
spins there before it sleeps. When another process holds one of the cores, a thread
spins through its own time slice waiting for a partner that is not running: beside two
other model processes on 2 cores, a product loop ran 9.5x slower instead of the ~3x its
share of the cores would cost. The governor reads how long the engine's thread waited
for a core (the kernel's schedstat); while that is a large share of the time the engine
runs on one thread, which waits for no partner, and it tries all threads again after a
pause that doubles each time the contention is still there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

SCHEDSTAT = Path("/proc/thread-self/schedstat")  # on-CPU ns, run-queue wait ns, slices
CONTENDED = 0.2  # waited this share of the window for a core: drop to one thread
FREE = 0.05  # waited less than this on one thread: the cores may be free again
FIRST_PAUSE_S, LONGEST_PAUSE_S = 2.0, 60.0


@contextmanager
def at_threads(n: int | None) -> Iterator[None]:
    """Run the block on `n` torch threads (None: as it is), then go back to the count
    before; no switch when it is already `n`."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def waited_s() -> float | None:
    """Seconds the calling thread has spent runnable but not running; None if unknown."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class ThreadGovernor:
    """Call `tick()` on the engine's thread between steps, `rest()` when it goes idle.

    `clock`, `waited` and `use_threads` are the seams tests replace.
    """

    def __init__(
        self,
        threads: int,
        enabled: bool = True,
        window_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        waited: Callable[[], float | None] = waited_s,
        use_threads: Callable[[int], None] = torch.set_num_threads,
    ):
        self.full, self.threads = threads, threads
        self.clock, self.waited_s, self.use_threads = clock, waited, use_threads
        self.enabled = enabled and threads > 1 and waited() is not None
        self.window_s = window_s
        self.pause_s = FIRST_PAUSE_S
        self.retry_at = 0.0
        self.trial = False  # all threads again, on probation
        self.drops = 0  # how often it went down to one thread
        self.rest()

    def reset(self) -> None:
        """All threads again and the first pause, as at the start (on the engine's thread)."""
        self._use(self.full)
        self.trial, self.pause_s, self.retry_at = False, FIRST_PAUSE_S, 0.0
        self.rest()

    def rest(self) -> None:
        """Start a new window: idle time says nothing about contention."""
        self.since, self.waited = self.clock(), self.waited_s()

    def tick(self) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.since < self.window_s:
            return
        waited = self.waited_s()
        share = (waited - self.waited) / (now - self.since)
        self.since, self.waited = now, waited
        if self.threads == self.full:
            if share > CONTENDED:
                if self.trial:  # still contended: wait longer before the next try
                    self.pause_s = min(2 * self.pause_s, LONGEST_PAUSE_S)
                self._use(1)
                self.drops += 1
                self.retry_at = now + self.pause_s
            elif self.trial:
                self.pause_s = FIRST_PAUSE_S
            self.trial = False
        elif now >= self.retry_at and share < FREE:
            self._use(self.full)
            self.trial = True

    def _use(self, threads: int) -> None:
        self.use_threads(threads)
        self.threads = threads
