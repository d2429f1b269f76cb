"""run_in_own_thread: the work runs on a fresh thread, which is gone once it returns, at its
caller's thread count."""

from __future__ import annotations

import threading

import pytest
import torch

from infra.lm.threads import run_in_own_thread


async def test_result_comes_back_and_the_thread_ends():
    seen: list[threading.Thread] = []

    def work(a: int, b: int = 0) -> int:
        seen.append(threading.current_thread())
        return a + b

    assert await run_in_own_thread(work, 2, b=3) == 5
    assert await run_in_own_thread(work, 1) == 1
    first, second = seen
    assert first is not threading.main_thread() and first is not second
    for thread in seen:
        thread.join(timeout=5)
        assert not thread.is_alive()


async def test_errors_reach_the_caller():
    def fail() -> None:
        raise ValueError("bad record 3: field 'output'")

    with pytest.raises(ValueError, match="bad record 3"):
        await run_in_own_thread(fail)


async def test_the_work_runs_at_the_callers_thread_count_not_the_last_one_set():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        # the batcher's governor, dropping to one thread on its own thread under contention
        governor = threading.Thread(target=torch.set_num_threads, args=(1,))
        governor.start()
        governor.join()
        assert await run_in_own_thread(torch.get_num_threads) == 2
    finally:
        torch.set_num_threads(before)
