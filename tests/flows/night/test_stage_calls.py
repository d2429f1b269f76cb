"""Faults per stage: counted under the stage that made the call, and too many end the night."""

from __future__ import annotations

import pytest

from flows.night.calls import call_metrics, check_stage, night_calls
from flows.night.clock import StageClock
from infra.errors import UserFacingError
from infra.lm import CallTally, current_stage


async def test_calls_are_counted_under_the_stage_that_runs_them_and_checked_after_it():
    tally, checked = CallTally(), []

    async def stage_work(fail: bool) -> str:
        tally.call()
        if fail:
            tally.attempt_failed("timeout")
            tally.call_failed("timeout")
        return current_stage.get()

    clock = StageClock(check=checked.append)
    assert await clock.time("judge", stage_work(True)) == "judge"
    assert await clock.time("prompts", stage_work(False)) == "prompts"
    assert current_stage.get() == "other"  # restored after each stage
    assert checked == ["judge", "prompts"]
    faults = night_calls([tally, CallTally()])
    assert faults["judge"].calls == 1 and faults["judge"].calls_failed == {"timeout": 1}
    assert faults["prompts"].failed == 0
    metrics = call_metrics(faults)
    assert metrics["model_calls_failed_judge"] == 1.0 and metrics["model_calls_prompts"] == 1.0


def test_too_many_failed_calls_end_the_night_with_a_sentence_naming_the_stage():
    tally = CallTally()
    token = current_stage.set("eval_seed")
    try:
        for n in range(10):
            tally.call()
            if n < 3:
                tally.call_failed("server_error")
    finally:
        current_stage.reset(token)
    faults = night_calls([tally])["eval_seed"]
    check_stage("eval_seed", faults, max_failed_share=0.3)  # 3 of 10: not more than 30%
    with pytest.raises(UserFacingError, match=r"'eval_seed': 3 of 10 .*3 server_error"):
        check_stage("eval_seed", faults, max_failed_share=0.2)


async def test_a_stage_that_fails_is_not_checked_and_its_error_is_kept():
    checked = []

    async def broken():
        raise ValueError("bug")

    with pytest.raises(ValueError, match="bug"):
        await StageClock(check=checked.append).time("judge", broken())
    assert checked == []


def test_two_models_on_one_stage_add_up_each_at_its_own_prices():
    agent, reflection = CallTally((1.0, 2.0)), CallTally((10.0, 30.0))
    token = current_stage.set("prompts")
    try:
        agent.call()
        agent.tokens(1000, 100)
        reflection.call()
        reflection.tokens(2000, 500)
        reflection.attempt_failed("timeout")
    finally:
        current_stage.reset(token)
    (stage,) = night_calls([agent, reflection]).values()
    assert (stage.calls, stage.prompt_tokens, stage.completion_tokens) == (2, 3000, 600)
    assert stage.cost_usd == pytest.approx((1000 * 1 + 100 * 2 + 2000 * 10 + 500 * 30) / 1e6)
    assert stage.attempts_failed == {"timeout": 1}
    assert call_metrics({"prompts": stage})["model_cost_usd_prompts"] == stage.cost_usd
