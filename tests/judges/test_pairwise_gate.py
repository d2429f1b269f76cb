"""The pairwise judge in the promotion gate: the candidate's win rate over production,
reply against reply, position-balanced, and held back by a judge that follows the order."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from flows.production.gate import decide
from judges.pairwise import SEED_PAIRWISE_PROMPTS, PairwiseJudge
from judges.pairwise_gate import compare_replies
from tests.fakes import ScriptedLM
from tests.flows.production.test_gate import CFG, evidence

IDS = [f"e{i}" for i in range(24)]
REQUESTS = {i: f"request {i}" for i in IDS}
# the candidate is right on 21 of 24, production on 3; 4 replies are the same in both
CANDIDATE = {i: ("right" if n < 21 else "wrong") + f" {n}" for n, i in enumerate(IDS)}
PRODUCTION = {i: ("right" if n >= 21 else "wrong") + f" {n}" for n, i in enumerate(IDS)}
for same in IDS[:4]:
    PRODUCTION[same] = CANDIDATE[same]


def answers(messages: list[dict]) -> tuple[str, str]:
    found = re.search(r"Answer A:\n(.*)\n\nAnswer B:\n(.*)\n\n", messages[-1]["content"], re.S)
    assert found is not None
    return found.group(1), found.group(2)


def judge_reading(lean: float, flips: bool = False) -> PairwiseJudge:
    """Prefers a right answer, pulled towards the first one by `lean` (in logits); with
    `flips`, its pull is stronger than what it reads, on every other request."""

    def p_first(messages: list[dict]) -> float:
        first, second = answers(messages)
        reading = 1.5 * (first.startswith("right") - second.startswith("right"))
        number = int(first.split()[-1])
        pull = 4.0 if flips and number % 2 else lean
        return 1 / (1 + math.exp(-(reading + pull)))

    return PairwiseJudge(ScriptedLM(p_first=p_first), SEED_PAIRWISE_PROMPTS)


async def test_the_better_candidate_wins_side_by_side_and_identical_replies_are_ties():
    found = await compare_replies(judge_reading(lean=2.0), REQUESTS, CANDIDATE, PRODUCTION)
    assert found.n == 24 and found.asked == 20  # the 4 identical replies are not asked
    assert found.win_rate == pytest.approx((17 + 4 * 0.5) / 24)  # 17 wins, 3 losses, 4 ties
    assert found.low > 0.5 and found.flip_rate == 0.0  # the constant lean is taken off


async def test_which_reply_is_called_a_does_not_change_the_decision():
    judge = judge_reading(lean=2.0, flips=True)
    as_a = await compare_replies(judge, REQUESTS, CANDIDATE, PRODUCTION, candidate_as="A")
    as_b = await compare_replies(judge, REQUESTS, CANDIDATE, PRODUCTION, candidate_as="B")
    assert as_a == as_b
    scored = evidence([1.0] * 30, [1.0] * 20 + [0.0] * 10, by_labels=False, judge_trusted=True)
    assert decide(replace(scored, pairwise=as_a), CFG) == decide(
        replace(scored, pairwise=as_b), CFG
    )


async def test_a_judge_that_follows_the_order_holds_the_candidate_back():
    found = await compare_replies(
        judge_reading(lean=0.0, flips=True), REQUESTS, CANDIDATE, PRODUCTION
    )
    assert found.flip_rate > CFG.max_position_flips
    scored = evidence([1.0] * 30, [1.0] * 20 + [0.0] * 10, by_labels=False, judge_trusted=True)
    assert decide(scored, CFG).passed  # the pointwise evidence alone passes
    decision = decide(replace(scored, pairwise=found), CFG)
    assert not decision.passed and "flipped with the order" in decision.reason
    assert "pairwise win rate" in decision.reason


async def test_a_candidate_that_loses_side_by_side_is_refused_whatever_its_mean():
    found = await compare_replies(judge_reading(lean=1.0), REQUESTS, PRODUCTION, CANDIDATE)
    assert found.win_rate < 0.5
    scored = evidence([1.0] * 30, [1.0] * 20 + [0.0] * 10, by_labels=False, judge_trusted=True)
    decision = decide(replace(scored, pairwise=found), CFG)
    assert not decision.passed
    assert "its pairwise win rate's interval does not lie above 0.5" in decision.reason
