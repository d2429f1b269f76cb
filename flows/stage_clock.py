"""Wall-clock intervals of a night's stages, for the report and the demo benchmark."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class StageClock:
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)  # epoch seconds

    async def time(self, name: str, work: Awaitable[T]) -> T:
        start = time.time()
        try:
            return await work
        finally:
            self.intervals[name] = (start, time.time())
