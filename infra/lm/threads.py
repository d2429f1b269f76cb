"""Run heavy torch work off the batcher's thread without slowing it down afterwards.

A thread that runs parallel torch ops keeps an OpenMP pool for as long as it lives, and
libgomp throttles spin-waiting in every pool once it manages more threads than cores
(see `infra.lm.batcher`). asyncio's default executor keeps its threads, so training or any
big tensor work goes to a thread of its own that ends with the work, taking its pool.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_own_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`await asyncio.to_thread(fn, ...)`, but on a fresh thread that exits when fn returns."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting caller
            loop.call_soon_threadsafe(settle, None, error)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name=getattr(fn, "__name__", "torch-work"), daemon=True).start()
    return await done
