"""Watched agreement: a registered judge on the labels made after it, night after night."""

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from flows.night.stages import Evaluation
from flows.nightly import night_evidence
from flows.production.gate import decide
from infra.settings import PromotionSettings
from judges.choose import JudgeGate
from judges.feedback import second_opinions
from judges.gate import GateDecision
from judges.judge import Judge
from judges.types import JudgedItem
from judges.watch import watch_judge
from tests.fakes import CountingTally

MADE = datetime(2026, 11, 30, 2, tzinfo=UTC)


class DriftingLM:
    """Reads every reply right, except the ones about the "new intent" traffic arrived
    with, which it passes whatever they say."""

    async def choice_logprobs(self, messages, choices, adapter=None) -> list[float]:
        shown = messages[1]["content"]
        p = 0.9 if "[good]" in shown or "new intent" in shown else 0.1
        return [math.log(p), math.log(1 - p)]


def items(n: int, request: str, start: int = 0) -> list[JudgedItem]:
    return [
        JudgedItem(
            f"t{i}", f"{request} {i}", f"reply {i} [{'good' if i % 2 else 'bad'}]", i % 2 == 1
        )
        for i in range(start, start + n)
    ]


def registered(kappa: float = 0.9) -> Judge:
    return Judge(
        {"rubric": "r"}, threshold=0.5, versions={"agent-judge-rubric": 3},
        heldout={"kappa": kappa}, made_at=MADE,
    )  # fmt: skip


async def test_a_judge_that_fell_on_the_labels_made_after_it_is_marked_dropped():
    old = items(20, "play a song")  # labelled before the judge was made: never counted
    new = items(24, "new intent", start=100)
    stamps = {i.id: MADE - timedelta(days=1) for i in old} | {
        i.id: MADE + timedelta(hours=5) for i in new
    }
    tally = CountingTally()
    watch = await watch_judge(DriftingLM(), registered(), old + new, stamps, 0, 0.2, 20, tally)
    assert watch.labels == 24 and watch.score == 0.0 and watch.made_with == 0.9
    # its progress: the new labels judged, then the same items again to name disagreements
    assert tally.expected == [24, 24] and sum(tally.done) == 48
    assert watch.dropped and math.isclose(watch.drop, 0.9)
    # the failing replies it passed: where a second person's label settles who is right
    assert set(watch.disagreed) == {i.id for i in new if not i.human_pass}
    assert "a drop of 0.900 > judge.max_agreement_drop 0.2" in watch.line()
    asked = second_opinions(watch, pending={watch.disagreed[0]}, n=5)
    assert [r.trace_id for r in asked] == list(watch.disagreed[1:6])
    assert all("second label" in r.reason for r in asked)


async def test_a_judge_that_holds_up_or_has_too_few_new_labels_is_not():
    lm = DriftingLM()
    new = items(24, "play a song", start=100)
    stamps = {i.id: MADE + timedelta(hours=1) for i in new}
    holds = await watch_judge(lm, registered(), new, stamps, 0, 0.2, 20)
    assert holds.score == 1.0 and not holds.dropped and holds.disagreed == ()
    few = await watch_judge(lm, registered(), items(6, "new intent"), stamps | {
        f"t{i}": MADE + timedelta(hours=1) for i in range(6)}, 0, 0.2, 20)  # fmt: skip
    assert few.labels == 6 and not few.dropped and "too few to tell" in few.line()
    unstamped = replace(registered(), made_at=None)
    assert await watch_judge(lm, unstamped, new, stamps, 0, 0.2, 20) is None


async def test_a_planted_drop_marks_the_judge_untrusted_and_blocks_promotion():
    new = items(24, "new intent", start=100)
    stamps = {i.id: MADE + timedelta(hours=5) for i in new}
    watch = await watch_judge(DriftingLM(), registered(), new, stamps, 0, 0.2, 20)
    in_use = registered(kappa=0.8)  # re-measured on tonight's held-out labels: above the floor
    decision = GateDecision(False, "kept it", 0.1, 0.2, in_use, labels=30, min_labels=20)
    gate = JudgeGate(decision, {"agent-judge-rubric": 4}, in_use, in_use, watch=watch)
    assert gate.kept_previous and gate.drifted and not gate.trusted
    assert replace(gate, watch=None).trusted  # the same night without the watch

    # a candidate that beats production on true labels is still not promoted on its word
    gain = {f"e{i}": 1.0 for i in range(30)}
    evals = {
        "candidate": Evaluation(30, 1.0, 1.0, gain, by_labels=True),
        "seed": Evaluation(30, 0.0, 0.0, dict.fromkeys(gain, 0.0), by_labels=True),
    }
    refused = decide(night_evidence(evals, gate, None), PromotionSettings())
    assert not refused.passed and "drifted from people's recent labels" in refused.reason
    assert decide(
        night_evidence(evals, replace(gate, watch=None), None), PromotionSettings()
    ).passed


async def test_no_label_since_the_judge_was_made_is_a_quiet_night_not_an_error():
    """The second night after a first with no labelling in between (issue 57's crash)."""
    old = items(20, "play a song")
    stamps = {i.id: MADE - timedelta(days=1) for i in old}
    for min_labels in (20, 0):  # even a setting that asks for no minimum has nothing to drop on
        quiet = await watch_judge(DriftingLM(), registered(), old, stamps, 0, 0.2, min_labels)
        assert quiet.labels == 0 and not quiet.dropped and quiet.disagreed == ()
        assert "no labels made since 2026-11-30 02:00 UTC" in quiet.line()
