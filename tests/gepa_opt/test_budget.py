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


async def test_a_silent_reflection_endpoint_ends_at_the_reflection_budget() -> None:
    from gepa_opt import GEPAConfig, StopReason, optimize
    from tests.gepa_opt.test_engine import KeywordAdapter, ScriptedReflector, tasks

    async def run(limit: int | None, shape: str):
        reflector = ScriptedReflector([])  # every proposal comes back empty
        config = GEPAConfig(
            max_metric_calls=400, max_reflection_calls=limit, proposal_shape=shape,
            max_concurrency=4, max_idle_iterations=60,
        )  # fmt: skip
        result = await optimize(
            {"p": "Answer."}, tasks("train", 6), tasks("val", 3), KeywordAdapter(), reflector,
            config,
        )  # fmt: skip
        return result, len(reflector.prompts)

    unbounded, asked = await run(None, "1x1")
    assert unbounded.stop_reason is StopReason.STALLED and asked >= 60  # until it stalls
    for shape in ("1x1", "2x3"):
        bounded, asked = await run(10, shape)
        assert bounded.stop_reason is StopReason.REFLECTION_BUDGET, shape
        assert asked == bounded.reflection_calls <= 10 and asked >= 10 - 5  # a 2x3 step: 6
