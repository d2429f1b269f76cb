"""Label requests and judge scores from a night's verdicts, and failures that stay contained."""

import logging
import uuid
from datetime import UTC, datetime

from flows.feedback import (
    NightVerdicts,
    judge_scores,
    label_requests,
    send_feedback,
    unlabelled_count,
)
from flows.judge_in_use import JudgeInUse
from infra.settings import JudgeSettings
from infra.traces import TraceSourceError

JUDGE = JudgeInUse(
    prompts={"rubric": "r"},
    threshold=0.4,
    versions={"agent-judge-rubric": 3},
    heldout_kappa=0.35,
    min_kappa=0.2,
    is_new=True,
)
AT = datetime(2026, 11, 30, 3, tzinfo=UTC)


def verdicts() -> NightVerdicts:
    return NightVerdicts(
        p_pass={"a": 0.41, "b": 0.90, "c": 0.38, "d": 0.40, "e": 0.05},
        labelled={"d", "b"},
        judged_at=AT,
        rationales={"a": "names the right intent"},
    )


def test_label_requests_are_the_least_sure_unlabelled_traces():
    asked = label_requests(verdicts(), JUDGE, 2)
    assert [r.trace_id for r in asked] == ["a", "c"]  # d is nearer, but a human labelled it
    assert asked[0].judge_version == "agent-judge-rubric v3"
    assert asked[0].reason == "judge least sure: p_pass 0.410 vs threshold 0.400"
    assert round(asked[1].margin, 6) == 0.02
    assert unlabelled_count(verdicts()) == 3


def test_traces_waiting_for_a_label_are_not_asked_again():
    asked = label_requests(verdicts(), JUDGE, 2, pending={"a"})  # asked on an earlier night
    assert [r.trace_id for r in asked] == ["c", "e"]


def test_scores_carry_the_verdict_the_version_and_a_stable_id():
    scores = judge_scores(verdicts(), JUDGE, "n1", "flywheel_judge")
    by_trace = {s.trace_id: s for s in scores}
    assert len(scores) == 5  # labelled traces are scored too: every trace it judged
    assert by_trace["a"].value == 1.0 and by_trace["c"].value == 0.0 and by_trace["d"].value == 1.0
    assert by_trace["a"].comment == "names the right intent" and by_trace["b"].comment is None
    assert by_trace["a"].metadata == {
        "judge_version": "agent-judge-rubric v3",
        "judge_prompt_versions": {"agent-judge-rubric": 3},
        "threshold": 0.4,
        "p_pass": 0.41,
        "judge_trusted": True,
        "flywheel_run_id": "n1",
    }
    assert by_trace["a"].timestamp == AT
    again = judge_scores(verdicts(), JUDGE, "n1", "flywheel_judge")
    assert [s.id for s in again] == [s.id for s in scores]  # a resend updates, never adds
    assert uuid.UUID(scores[0].id)
    assert scores[0].id != judge_scores(verdicts(), JUDGE, "n2", "flywheel_judge")[0].id


async def ok() -> NightVerdicts:
    return verdicts()


async def test_both_sent_and_reported():
    async def count(v):
        return 2

    out = await send_feedback(JudgeSettings(), JUDGE, 5, ok, count, count)
    assert (out.unlabelled, out.labels_requested, out.scores_written) == (3, 2, 2)
    assert out.lines() == [
        "Labels requested: 2 of 3 unlabelled traces, where agent-judge-rubric v3 was least sure.",
        "Scores written: 2 of 5 traces, by agent-judge-rubric v3.",
    ]
    assert out.metrics() == {"labels_requested": 2.0, "scores_written": 2.0}


async def test_a_failing_step_is_logged_and_reported_and_the_other_still_runs(caplog):
    async def refuse(v):
        raise TraceSourceError("Langfuse did not take the label requests (503)")

    async def write(v):
        return 5

    with caplog.at_level(logging.ERROR, logger="flows.feedback"):
        out = await send_feedback(JudgeSettings(), JUDGE, 5, ok, refuse, write)
    assert out.labels_requested is None and out.scores_written == 5
    assert out.lines()[0] == (
        "Labels requested: none; label requests failed (TraceSourceError: Langfuse did not "
        "take the label requests (503))."
    )
    assert "stay registered" in caplog.text
    assert out.metrics() == {"scores_written": 5.0}


async def test_judging_failure_skips_both_and_says_why():
    async def broken():
        raise RuntimeError("model server gone")

    async def never(v):
        raise AssertionError("must not be called")

    out = await send_feedback(JudgeSettings(), JUDGE, 5, broken, never, never)
    assert all("judging the night's traces failed" in line for line in out.lines())


async def test_nothing_unlabelled_or_switched_off_is_said():
    async def all_labelled():
        return NightVerdicts({"a": 0.5}, {"a"}, AT)

    async def never(v):
        raise AssertionError("must not be called")

    settings = JudgeSettings(write_scores=False)
    out = await send_feedback(settings, JUDGE, 1, all_labelled, never, never)
    assert out.lines() == [
        "Labels requested: none; every trace of the night already has a human label.",
        "Scores written: none; judge.write_scores is off.",
    ]

    async def write(v):
        return 5

    off = await send_feedback(
        JudgeSettings(active_learning_per_night=0), JUDGE, 5, ok, never, write
    )
    assert off.lines() == [
        "Labels requested: none; judge.active_learning_per_night is 0.",
        "Scores written: 5 of 5 traces, by agent-judge-rubric v3.",
    ]
