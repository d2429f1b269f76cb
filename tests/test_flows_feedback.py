"""Label requests and judge scores from a night's verdicts, and failures that stay contained."""

import logging
import math
import pickle
import uuid
from datetime import UTC, datetime

import pytest

from flows.collect import Collected
from flows.feedback import (
    NightVerdicts,
    judge_night,
    judge_scores,
    label_requests,
    send_feedback,
    unlabelled_count,
)
from flows.judge_in_use import JudgeInUse
from flows.runtime import Runtime
from infra.settings import JudgeSettings, Settings
from infra.traces import TraceSourceError
from infra.types import Example
from judges.scales import ScoreScale
from judges.types import JudgedItem

JUDGE = JudgeInUse(
    prompts={"rubric": "r"},
    threshold=0.4,
    versions={"agent-judge-rubric": 3},
    heldout_score=0.35,
    floor=0.2,
    is_new=True,
)
AT = datetime(2026, 11, 30, 3, tzinfo=UTC)


def verdicts() -> NightVerdicts:
    return NightVerdicts(
        scores={"a": 0.41, "b": 0.90, "c": 0.38, "d": 0.40, "e": 0.05},
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


# Judges on other scales than pass/fail

TONE = ScoreScale("categorical", ("rude", "neutral", "polite"), values=(0, 1, 2), name="tone")
STARS = ScoreScale("numeric", minimum=1, maximum=5, name="stars")


def scaled_judge(scale: ScoreScale) -> JudgeInUse:
    return JudgeInUse({"rubric": "r"}, 0.5, {"agent-judge-rubric": 4}, 0.6, 0.2, True, scale)


def scaled_verdicts(values: dict) -> NightVerdicts:
    return NightVerdicts(
        scores={"a": 0.9, "b": 0.4, "c": 0.0, "d": 0.5},
        labelled={"d"},
        judged_at=AT,
        values=values,
        margins={"a": 0.8, "b": 0.1, "c": 0.0, "d": 0.05},  # c: unreadable, so 0
    )


def test_categorical_and_numeric_scores_carry_their_data_type_and_value():
    tone = judge_scores(
        scaled_verdicts({"a": "polite", "b": "neutral", "d": "neutral"}),
        scaled_judge(TONE),
        "n1",
        "flywheel_judge",
    )
    assert [(s.trace_id, s.data_type, s.value) for s in tone] == [
        ("a", "CATEGORICAL", "polite"),
        ("b", "CATEGORICAL", "neutral"),
        ("d", "CATEGORICAL", "neutral"),
    ]  # c's verdict could not be read: nothing on the scale to write
    assert tone[0].metadata == {
        "judge_version": "agent-judge-rubric v4",
        "judge_prompt_versions": {"agent-judge-rubric": 4},
        "threshold": 0.5,
        "score": 0.9,
        "judge_trusted": True,
        "flywheel_run_id": "n1",
    }
    stars = judge_scores(
        scaled_verdicts({"a": 4.6, "b": 2.6, "c": 1.0, "d": 3.0}), scaled_judge(STARS), "n1", "j"
    )
    assert [(s.data_type, s.value) for s in stars] == [("NUMERIC", v) for v in (4.6, 2.6, 1.0, 3.0)]


def test_label_requests_on_other_scales_follow_the_judges_margin():
    verdicts = scaled_verdicts({"a": "polite", "b": "neutral", "d": "neutral"})
    asked = label_requests(verdicts, scaled_judge(TONE), 2)
    assert [(r.trace_id, r.margin) for r in asked] == [("c", 0.0), ("b", 0.1)]  # d is labelled
    assert asked[0].reason == "judge least sure: margin 0.000, verdict unreadable"
    assert asked[1].reason == "judge least sure: margin 0.100, verdict neutral"
    assert [r.trace_id for r in label_requests(verdicts, scaled_judge(TONE), 2, {"c"})] == [
        "b",
        "a",
    ]


async def test_the_night_is_judged_on_the_scale_and_stays_picklable(tmp_path):
    class StarsLM:
        """Every reply gets 4 stars with probability 0.7, else 2."""

        async def choice_logprobs(self, messages, choices, adapter=None):
            probs = {"4": 0.7, "2": 0.3}
            return [math.log(probs.get(c, 1e-12)) for c in choices]

    rt = Runtime(Settings(state_dir=tmp_path))
    rt.__dict__["lm"] = StarsLM()
    examples = [Example("a", {"request": "x"}), Example("b", {"request": "y"})]
    items = [JudgedItem("b", "y", "reply b", human_value=4.0)]
    collected = Collected(examples, items, outputs={"a": "reply a", "b": "reply b"}, scale=STARS)
    verdicts = await judge_night(rt, collected, scaled_judge(STARS))
    assert verdicts.values == pytest.approx({"a": 3.4, "b": 3.4})  # 0.7 * 4 + 0.3 * 2
    assert verdicts.scores == pytest.approx({"a": 0.6, "b": 0.6})  # (3.4 - 1) / 4
    assert verdicts.margins == pytest.approx({"a": 0.4, "b": 0.4})
    assert verdicts.labelled == {"b"}
    assert pickle.loads(pickle.dumps(verdicts)) == verdicts
