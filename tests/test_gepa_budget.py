"""Reservations: what a waiter for budget learns when work in flight ends."""

from __future__ import annotations

import asyncio

from gepa_opt.budget import Budget


async def test_a_waiter_wakes_when_work_ends_even_if_it_spent_all_it_reserved() -> None:
    budget = Budget(max_metric_calls=10)
    other = budget.reserve(6)
    woke = asyncio.Event()

    async def waiter() -> None:
        await budget.freed()
        woke.set()

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    other.charge(6)  # spent in full: nothing to give back...
    await asyncio.sleep(0)
    assert not woke.is_set()
    other.release()  # ...but the waiter must learn that nothing is in flight any more
    await asyncio.wait_for(task, 1)
    assert budget.reserved == 0 and budget.remaining == 4


async def test_released_calls_return_to_the_budget() -> None:
    budget = Budget(max_metric_calls=10)
    work = budget.reserve(8)
    assert not budget.fits(3)
    work.charge(5)
    work.release()
    assert budget.metric_calls_used == 5 and budget.reserved == 0 and budget.fits(5)
