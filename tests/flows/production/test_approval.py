"""A night pauses for a person's approval in Prefect, and a timeout leaves it unanswered."""

import asyncio

from prefect import flow, get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateName
from prefect.flow_runs import resume_flow_run

from flows.production.approval import ask_approval
from tests.prefect_harness import prefect_harness


@flow
async def asking(timeout_s: int):
    return await ask_approval(3, "held-out gain +0.100 [0.020, 0.180] over v2", timeout_s)


async def answer_when_paused(run_input: dict) -> None:
    async with get_client() as client:
        for _ in range(200):
            paused = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(name=FlowRunFilterStateName(any_=["Paused"]))
                )
            )
            if paused:
                await resume_flow_run(paused[0].id, run_input=run_input)
                return
            await asyncio.sleep(0.2)
    raise AssertionError("the night never paused")


async def approve_and_ask(timeout_s: int, run_input: dict):
    answer, _ = await asyncio.gather(asking(timeout_s), answer_when_paused(run_input))
    return answer


def test_a_person_approves_in_prefect_and_says_who():
    with prefect_harness():
        answer = asyncio.run(approve_and_ask(60, {"promote": True, "by": "ops"}))
    assert answer.promote and answer.by == "ops"


def test_no_answer_within_the_timeout_is_none():
    with prefect_harness():
        assert asyncio.run(asking(2)) is None
