"""Concurrent calls of one kind, run together on the engine's worker as one batch.

A judge asks about many items at once: how likely "Yes" and "No" are after each prompt,
or each prompt's features. Calls that arrive while the worker is busy wait together (per
adapter), and whichever of their jobs the worker runs first runs every call waiting by
then in one pass: one prefill, on top of the prefix they share (the judge's rubric). A
call's numbers are the same bits alone and among others (see `batcher`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from infra.lm.engine.batcher import Batcher

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass
class _Call(Generic[Item, Result]):
    item: Item
    result: Result | None = None
    error: BaseException | None = None


class Gathered(Generic[Item, Result]):
    """`await gathered(item, adapter)`: `run(items)` gives each waiting item's result, in
    order, on the worker with `adapter` active."""

    def __init__(self, batcher: Batcher, run: Callable[[list[Item]], list[Result]]):
        self.batcher, self.run = batcher, run
        self._waiting: dict[Any, list[_Call]] = {}  # per adapter
        self._lock = threading.Lock()

    async def __call__(self, item: Item, adapter: Any) -> Result:
        call = _Call(item)
        with self._lock:
            self._waiting.setdefault(adapter, []).append(call)
        await self.batcher.call(lambda: self._drain(adapter), adapter)
        if call.error is not None:
            raise call.error
        return call.result

    def _drain(self, adapter: Any) -> None:
        with self._lock:
            calls = self._waiting.pop(adapter, [])
        if not calls:  # an earlier job of this adapter ran them
            return
        try:
            for call, result in zip(calls, self.run([c.item for c in calls]), strict=True):
                call.result = result
        except Exception as error:
            for call in calls:
                call.error = error
