"""Faults per stage: counted under the stage that made the call, and too many end the night."""

from __future__ import annotations

import pytest

from flows.faults import check_stage, fault_metrics, night_faults
from flows.stage_clock import StageClock
from infra.errors import UserFacingError
from infra.lm import FaultTally, current_stage


async def test_calls_are_counted_under_the_stage_that_runs_them_and_checked_after_it():
    tally, checked = FaultTally(), []

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
    faults = night_faults([tally, FaultTally()])
    assert faults["judge"].calls == 1 and faults["judge"].calls_failed == {"timeout": 1}
    assert faults["prompts"].failed == 0
    metrics = fault_metrics(faults)
    assert metrics["model_calls_failed_judge"] == 1.0 and metrics["model_calls_prompts"] == 1.0


def test_too_many_failed_calls_end_the_night_with_a_sentence_naming_the_stage():
    tally = FaultTally()
    token = current_stage.set("eval_seed")
    try:
        for n in range(10):
            tally.call()
            if n < 3:
                tally.call_failed("server_error")
    finally:
        current_stage.reset(token)
    faults = night_faults([tally])["eval_seed"]
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
