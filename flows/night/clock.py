"""The night's stages as it runs them: each one timed for the report and the demo
benchmark, named for the model calls made inside it (`infra.lm.current_stage`: faults are
counted per stage), and checked when it ends (`check`: too many failed calls)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from infra.lm import current_stage

T = TypeVar("T")


@dataclass
class StageClock:
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)  # epoch seconds
    results: dict[str, object] = field(default_factory=dict)  # of the stages that succeeded
    check: Callable[[str], None] | None = None
    """Called with a stage's name once it has succeeded; raises to end the night."""

    async def time(self, name: str, work: Awaitable[T]) -> T:
        token = current_stage.set(name)
        start = time.time()
        try:
            result = await work
        finally:
            self.intervals[name] = (start, time.time())
            current_stage.reset(token)
        if self.check is not None:
            self.check(name)
        self.results[name] = result
        return result
