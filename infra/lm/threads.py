"""Run heavy torch work off the batcher's thread without slowing it down afterwards.

A thread that runs parallel torch ops keeps an OpenMP pool for as long as it lives, and
libgomp throttles spin-waiting in every pool once it manages more threads than cores
(see `infra.lm.engine.batcher`). asyncio's default executor keeps its threads, so training or any
big tensor work goes to a thread of its own that ends with the work, taking its pool.

A fresh thread starts at the thread count torch was last set to on any thread, and the
batcher's governor sets one while other processes hold the cores: training that started
after such a moment ran on one core of two for the whole run. So the work takes the
thread count of the thread that awaits it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


async def run_in_own_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`await asyncio.to_thread(fn, ...)`, but on a fresh thread that exits when fn returns."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    threads = torch.get_num_threads()  # the caller's, not whatever was set last elsewhere

    def settle(result: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            torch.set_num_threads(threads)
            result = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting caller
            loop.call_soon_threadsafe(settle, None, error)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name=getattr(fn, "__name__", "torch-work"), daemon=True).start()
    return await done
