"""Sending the judge's feedback: both steps reported, failures that stay contained."""

import logging
from datetime import UTC, datetime

from flows.night.feedback import labels_wanted, send_feedback
from infra.settings import JudgeSettings
from infra.traces import TraceSourceError
from judges.feedback import NightVerdicts

JUDGE = "agent-judge-rubric v3"
AT = datetime(2026, 11, 30, 3, tzinfo=UTC)


def verdicts() -> NightVerdicts:
    return NightVerdicts(
        scores={"a": 0.41, "b": 0.90, "c": 0.38, "d": 0.40, "e": 0.05},
        labelled={"d", "b"},
        judged_at=AT,
    )


async def ok() -> NightVerdicts:
    return verdicts()


async def test_both_sent_and_reported():
    async def count(v):
        return 2

    out = await send_feedback(JudgeSettings(), JUDGE, 5, 5, ok, count, count)
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

    with caplog.at_level(logging.ERROR, logger="flows.night.feedback"):
        out = await send_feedback(JudgeSettings(), JUDGE, 5, 5, ok, refuse, write)
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

    out = await send_feedback(JudgeSettings(), JUDGE, 5, 5, broken, never, never)
    assert all("judging the night's traces failed" in line for line in out.lines())


async def test_nothing_unlabelled_or_switched_off_is_said():
    async def all_labelled():
        return NightVerdicts({"a": 0.5}, {"a"}, AT)

    async def never(v):
        raise AssertionError("must not be called")

    settings = JudgeSettings(write_scores=False)
    out = await send_feedback(settings, JUDGE, 1, 5, all_labelled, never, never)
    assert out.lines() == [
        "Labels requested: none; every trace of the night already has a human label.",
        "Scores written: none; judge.write_scores is off.",
    ]

    async def write(v):
        return 5

    off = await send_feedback(
        JudgeSettings(active_learning_per_night=0), JUDGE, 5, 0, ok, never, write
    )
    assert off.lines() == [
        "Labels requested: none; judge.active_learning_per_night is 0.",
        "Scores written: 5 of 5 traces, by agent-judge-rubric v3.",
    ]


def test_an_untrusted_judge_asks_for_more_labels():
    settings = JudgeSettings(active_learning_per_night=5, untrusted_label_requests=20)
    assert labels_wanted(settings, trusted=True) == 5
    assert labels_wanted(settings, trusted=False) == 20
    assert labels_wanted(JudgeSettings(active_learning_per_night=30), trusted=False) == 30


async def test_a_night_with_no_traces_judges_nothing_and_says_so():
    """No trace in the window: nothing to judge, ask about or score, and no claim that
    every trace already has a label."""

    async def never(*args):
        raise AssertionError("nothing to judge or send")

    out = await send_feedback(JudgeSettings(), JUDGE, 0, 5, never, never, never)
    assert out.labels_requested is None and out.scores_written is None
    assert out.lines() == [
        "Labels requested: none; no traces in the night's window to judge.",
        "Scores written: none; no traces in the night's window to judge.",
    ]
