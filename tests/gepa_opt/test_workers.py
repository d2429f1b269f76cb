"""The worker pool: a call cancelled while it waits for a slot loses no slot."""

import asyncio

from gepa_opt.workers import WorkerPool


async def test_a_cancelled_waiter_loses_no_slot_and_leaves_no_coroutine_unawaited():
    pool = WorkerPool(2)
    gate = asyncio.Event()
    holders = [asyncio.create_task(pool.run(gate.wait())) for _ in range(2)]
    await asyncio.sleep(0)
    never_run = asyncio.sleep(0)
    waiter = asyncio.create_task(pool.run(never_run))
    await asyncio.sleep(0)
    waiter.cancel()
    gate.set()
    await asyncio.gather(*holders)
    await asyncio.gather(waiter, return_exceptions=True)
    assert never_run.cr_frame is None  # closed, not left to warn "never awaited"
    # both slots are back: two calls run at once again
    both = asyncio.Event()
    running = []

    async def meet() -> None:
        running.append(1)
        if len(running) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 1)

    await asyncio.gather(pool.run(meet()), pool.run(meet()))
    assert pool.spare()
