import asyncio
import math

import pytest

from judges.pairwise import PairwiseJudge, parse_choice, position_lean
from judges.pairwise_align import PairwiseAlignmentAdapter, preference_weights
from judges.types import PairwiseItem
from tests.fakes import ScriptedLM

RUBRIC = {"rubric": "Pick the better answer."}


def item(i: int = 0, good: str = "A", **kw) -> PairwiseItem:
    a, b = ("good", "bad") if good == "A" else ("bad", "good")
    return PairwiseItem(f"p{i}", f"g{i}", f"question {i}", a, b, human_prefers=good, **kw)


def shown_first(messages) -> str:
    return messages[-1]["content"].split("Answer A:\n")[1].split("\n")[0]


def content_lm(p_good_first: float, p_bad_first: float, reply=lambda m: "") -> ScriptedLM:
    """A model that sees quality but also leans to whichever answer is shown first."""
    return ScriptedLM(
        reply=reply,
        p_first=lambda m: p_good_first if shown_first(m) == "good" else p_bad_first,
    )


async def test_a_pure_position_bias_averages_to_one_half_and_flips():
    judge = PairwiseJudge(ScriptedLM(p_first=lambda m: 0.9), RUBRIC)
    verdict = await judge.verdict(item())
    assert verdict.p_a == pytest.approx(0.5)
    assert verdict.p_a_by_order == pytest.approx((0.9, 0.1))
    assert verdict.order_flip


@pytest.mark.parametrize("good", ["A", "B"])
async def test_the_swapped_order_is_mapped_back_to_the_items_labels(good):
    judge = PairwiseJudge(content_lm(0.9, 0.6), RUBRIC)
    verdict = await judge.verdict(item(good=good))
    # A shown first scores P(first) of whatever A is; B shown first scores 1 - P(first).
    p_a_first, p_a_second = (0.9, 0.4) if good == "A" else (0.6, 0.1)
    assert verdict.p_a_by_order == pytest.approx((p_a_first, p_a_second))
    assert verdict.p_a == pytest.approx((p_a_first + p_a_second) / 2)
    assert verdict.prefers == good
    assert verdict.order_flip  # the bias (0.6 for the bad answer first) outweighs quality


async def test_the_position_lean_is_fitted_without_labels_and_ends_the_flips():
    # Quality shows (0.9 vs 0.6 for the good answer first) under a lean to the first
    # answer that makes each order alone pick whatever is shown first.
    judge = PairwiseJudge(content_lm(0.9, 0.6), RUBRIC)
    pairs = [item(i, good) for i, good in enumerate("ABAB")]
    unlabelled = [PairwiseItem(p.id, p.group, p.question, p.answer_a, p.answer_b) for p in pairs]
    assert all(v.order_flip for v in await judge.verdicts(pairs))

    lean = await judge.fit_position_lean(unlabelled)
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    assert lean == pytest.approx((logit(0.9) + logit(0.6)) / 2)
    leaned = PairwiseJudge(judge.lm, RUBRIC, position_lean=lean)
    verdicts = await leaned.verdicts(pairs)
    assert not any(v.order_flip for v in verdicts)  # either order alone now picks the good one
    assert [v.prefers for v in verdicts] == list("ABAB")
    assert await leaned.fit_position_lean(unlabelled) == pytest.approx(lean)  # nothing left
    # a cache of unleaned verdicts re-read with the lean gives the leaned judge's verdicts
    rereads = [v.leaned(lean, 0.5) for v in await judge.verdicts(pairs)]
    assert [v.p_a_by_order for v in rereads] == [pytest.approx(v.p_a_by_order) for v in verdicts]


def test_no_lean_reads_the_orders_exactly_and_no_verdicts_have_none():
    judge_free = PairwiseJudge(ScriptedLM(p_first=lambda m: 0.7), RUBRIC)
    assert position_lean([]) == 0.0
    verdict = asyncio.run(judge_free.verdict(item()))
    assert verdict.p_a_by_order == (0.7, 1.0 - 0.7)  # not through logits
    assert verdict.leaned(0.0, 0.5) == verdict


async def test_the_threshold_is_fitted_on_training_labels_only():
    seen: list[str] = []

    def p_first(messages):
        # Off-centre but well ranked: p_a is 0.45 where humans prefer A (odd questions)
        # and 0.35 where they prefer B, so no cut at 0.5 can be right.
        question = messages[-1]["content"].split("\n")[1]
        seen.append(question)
        lean = -0.05 if int(question.split()[-1]) % 2 else 0.15
        return 0.5 + lean if shown_first(messages) == "good" else 0.5 - lean

    judge = PairwiseJudge(ScriptedLM(p_first=p_first), RUBRIC)
    train = [item(i, "A" if i % 2 else "B") for i in range(6)]
    unlabelled = PairwiseItem("u", "gu", "question u", "x", "y")
    threshold = await judge.fit_threshold(train + [unlabelled])
    assert 0.35 < threshold < 0.45 and threshold != 0.5
    assert set(seen) == {f"question {i}" for i in range(6)}
    judge.threshold = threshold
    assert [v.prefers for v in await judge.verdicts(train)] == [i.human_prefers for i in train]


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("A", "A"),
        ("**B**.", "B"),
        ("B. It answers the question.", "B"),
        ("A is better because it is correct.", "A"),
        ("Verdict: B", "B"),
        ("The better answer is A, since it shows the steps.", "A"),
        ("A good question, but Answer B gets the result right.", "B"),
        ("Both answers are fine.", None),
        ("Answer A is wrong and answer B is incomplete.", None),
        ("", None),
    ],
)
def test_written_verdicts_are_parsed_leniently_but_never_guessed(text, choice):
    assert parse_choice(text) == choice


async def test_a_text_verdict_that_follows_the_position_is_a_tie():
    judge = PairwiseJudge(ScriptedLM(reply=lambda m: "A. It is better."), RUBRIC)
    verdict = await judge.text_verdict(item())
    assert verdict.by_order == ("A", "B")
    assert verdict.prefers == "tie" and verdict.order_flip


@pytest.mark.parametrize("good", ["A", "B"])
async def test_a_consistent_text_verdict_is_mapped_back(good):
    reply = lambda m: "A" if shown_first(m) == "good" else "B"  # noqa: E731
    verdict = await PairwiseJudge(ScriptedLM(reply=reply), RUBRIC).text_verdict(item(good=good))
    assert verdict.prefers == good and not verdict.order_flip


async def test_unparseable_text_is_counted_not_defaulted():
    replies = iter(["A", "I cannot tell."])
    judge = PairwiseJudge(ScriptedLM(reply=lambda m: next(replies)), RUBRIC)
    verdict = await judge.text_verdict(item())
    assert verdict.prefers == "unparseable" and verdict.by_order == ("A", None)
    assert not verdict.order_flip


async def test_rationale_is_one_short_completion():
    lm = ScriptedLM(reply=lambda m: "  A, because it is right.\n")
    judge = PairwiseJudge(lm, RUBRIC, rationale_max_tokens=20)
    assert await judge.rationale(item()) == "A, because it is right."
    assert len(lm.calls) == 1


def test_preference_weights_balance_the_labels():
    items = [item(i, "A") for i in range(6)] + [item(i, "B") for i in range(6, 9)]
    assert preference_weights(items) == {"A": 0.5, "B": 1.0}


async def test_adapter_scores_the_probability_of_the_humans_choice():
    items = [item(0, "A"), item(1, "B"), item(2, "A")]
    adapter = PairwiseAlignmentAdapter(content_lm(0.8, 0.4), preference_weights(items))
    batch = await adapter.evaluate(items, RUBRIC)
    # p(good better) = (0.8 + 0.6) / 2 = 0.7 in every item; A weighs 1/2, B weighs 1.
    assert batch.scores == pytest.approx([0.35, 0.7, 0.35])
    assert batch.trajectories is None


async def test_adapter_needs_labels():
    adapter = PairwiseAlignmentAdapter(ScriptedLM(), {"A": 1.0, "B": 1.0})
    with pytest.raises(ValueError, match="u1"):
        await adapter.evaluate([PairwiseItem("u1", "g", "q", "a", "b")], RUBRIC)


async def test_reflective_records_show_both_orders_the_flip_and_the_human():
    long_answer = "good " + "x" * 1000
    items = [
        PairwiseItem("p0", "g0", "question 0", long_answer, "bad", "A", "A shows its work."),
        item(1, "B"),
    ]
    adapter = PairwiseAlignmentAdapter(
        ScriptedLM(p_first=lambda m: 0.9, reply=lambda m: "A is right."),
        {"A": 1.0, "B": 1.0},
        max_answer_chars=50,
    )
    batch = await adapter.evaluate(items, RUBRIC, capture_traces=True)
    records = (await adapter.make_reflective_dataset(RUBRIC, batch, ["rubric"]))["rubric"]
    first = records[0]
    assert "Answer A: good xxx" in first["Inputs"] and "more characters]" in first["Inputs"]
    assert len(first["Inputs"]) < 250
    assert "A shown first: 0.90; B shown first: 0.10" in first["Generated Outputs"]
    assert "flipped" in first["Generated Outputs"]
    assert first["Generated Outputs"].endswith("The judge's reason: A is right.")
    assert (
        first["Feedback"]
        == 'The human expert preferred answer A. Their comment: "A shows its work."'
    )
    assert records[1]["Feedback"] == "The human expert preferred answer B."
