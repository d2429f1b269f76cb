"""What the judge gives back each night: label requests where it is least sure and its
verdicts as scores, on every scale."""

import math
import pickle
import uuid
from datetime import UTC, datetime

import pytest

from infra.scales import ScoreScale
from judges.feedback import NightVerdicts, judge_scores, judge_traces, label_requests
from judges.judge import Judge
from judges.types import JudgedItem

JUDGE = Judge(
    prompts={"rubric": "r"},
    threshold=0.4,
    versions={"agent-judge-rubric": 3},
    heldout={"kappa": 0.35},
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
    assert verdicts().unlabelled == 3


def test_traces_waiting_for_a_label_are_not_asked_again():
    asked = label_requests(verdicts(), JUDGE, 2, pending={"a"})  # asked on an earlier night
    assert [r.trace_id for r in asked] == ["c", "e"]


def test_scores_carry_the_verdict_the_version_and_a_stable_id():
    scores = judge_scores(verdicts(), JUDGE, True, "n1", "flywheel_judge")
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
    again = judge_scores(verdicts(), JUDGE, True, "n1", "flywheel_judge")
    assert [s.id for s in again] == [s.id for s in scores]  # a resend updates, never adds
    assert uuid.UUID(scores[0].id)
    assert scores[0].id != judge_scores(verdicts(), JUDGE, True, "n2", "flywheel_judge")[0].id


# Judges on other scales than pass/fail

TONE = ScoreScale("categorical", ("rude", "neutral", "polite"), values=(0, 1, 2), name="tone")
STARS = ScoreScale("numeric", minimum=1, maximum=5, name="stars")


def scaled_judge(scale: ScoreScale) -> Judge:
    return Judge({"rubric": "r"}, scale, 0.5, {"agent-judge-rubric": 4})


def scaled_verdicts(values: dict) -> NightVerdicts:
    return NightVerdicts(
        scores={"a": 0.9, "b": 0.4, "c": 0.0, "d": 0.5},
        labelled={"d"},
        judged_at=AT,
        values=values,
        margins={"a": 0.8, "b": 0.1, "c": 0.0, "d": 0.05},  # c: unreadable, so 0
    )


def test_categorical_and_numeric_scores_carry_their_kind_and_value():
    tone = judge_scores(
        scaled_verdicts({"a": "polite", "b": "neutral", "d": "neutral"}),
        scaled_judge(TONE),
        True,
        "n1",
        "flywheel_judge",
    )
    assert [(s.trace_id, s.kind, s.value) for s in tone] == [
        ("a", "categorical", "polite"),
        ("b", "categorical", "neutral"),
        ("d", "categorical", "neutral"),
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
        scaled_verdicts({"a": 4.6, "b": 2.6, "c": 1.0, "d": 3.0}),
        scaled_judge(STARS),
        True,
        "n1",
        "j",
    )
    assert [(s.kind, s.value) for s in stars] == [("numeric", v) for v in (4.6, 2.6, 1.0, 3.0)]


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


async def test_the_night_is_judged_on_the_scale_and_stays_picklable():
    class StarsLM:
        """Every reply gets 4 stars with probability 0.7, else 2."""

        async def choice_logprobs(self, messages, choices, adapter=None):
            probs = {"4": 0.7, "2": 0.3}
            return [math.log(probs.get(c, 1e-12)) for c in choices]

    items = [JudgedItem("a", "x", "reply a"), JudgedItem("b", "y", "reply b")]
    verdicts = await judge_traces(StarsLM(), scaled_judge(STARS), items, labelled={"b"})
    assert verdicts.values == pytest.approx({"a": 3.4, "b": 3.4})  # 0.7 * 4 + 0.3 * 2
    assert verdicts.scores == pytest.approx({"a": 0.6, "b": 0.6})  # (3.4 - 1) / 4
    assert verdicts.margins == pytest.approx({"a": 0.4, "b": 0.4})
    assert verdicts.labelled == {"b"}
    assert pickle.loads(pickle.dumps(verdicts)) == verdicts


async def test_each_judge_call_of_the_night_is_counted_as_it_ends():
    class HalfLM:
        async def choice_logprobs(self, messages, choices, adapter=None):
            return [math.log(0.5)] * len(choices)

        async def complete(self, messages, **params):
            from infra.lm import Completion, Usage

            return Completion(text="a reason", usage=Usage(1, 1))

    items = [JudgedItem(f"t{i}", "x", f"reply {i}") for i in range(5)]
    done: list[int] = []
    verdicts = await judge_traces(HalfLM(), JUDGE, items, set(), done=done.append)
    assert len(verdicts.scores) == 5 and done == [1] * 5
    done.clear()
    await judge_traces(HalfLM(), JUDGE, items, set(), with_rationales=True, done=done.append)
    assert done == [1] * 10  # each verdict, then each reason
