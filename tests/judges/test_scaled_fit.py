"""Aligning a judge on its humans' own scale (`judges.align` with `ScaledFit`):
per-example scores, selection, held-out hygiene."""

from __future__ import annotations

import math
import re

import pytest

from gepa_opt import Finished, GEPAConfig
from infra.lm import Completion
from infra.scales import ScoreScale
from judges.agreement import agreement_report, primary_metric
from judges.align import align
from judges.scaled import ScaledJudge
from judges.scaled_fit import ScaledAlignmentAdapter, agreement_value, value_weights
from judges.types import JudgedItem

CATEGORIES = ("bad", "ok", "good")
NOMINAL = ScoreScale("categorical", categories=CATEGORIES)
ONE_TO_FIVE = ScoreScale("numeric", minimum=1, maximum=5)
CONTINUOUS = ScoreScale("numeric", minimum=0.0, maximum=1.5)
SEED = {"rubric": "Judge the reply."}


class FakeLM:
    """Answer probabilities from `probs(rubric, index, reply)` and text from
    `text(rubric, index, reply)`, where index is the item's number; records the item
    ids it is asked about, in order."""

    def __init__(self, probs=lambda r, i, reply: {}, text=lambda r, i, reply: ""):
        self.probs, self.text, self.seen = probs, text, []

    def read(self, messages):
        rubric, user = messages[0]["content"], messages[1]["content"]
        index = int(re.search(r"request (\d+)", user).group(1))
        reply = user.split("<reply>\n")[1].split("\n")[0]
        self.seen.append(f"t{index}")
        return rubric, index, reply

    async def choice_logprobs(self, messages, choices, adapter=None):
        probs = self.probs(*self.read(messages))
        return [math.log(max(probs.get(c, 0.0), 1e-12)) for c in choices]

    async def complete(self, messages, **params):
        return Completion(text=self.text(*self.read(messages)))


def item(i: int, value, reply: str = "", comment: str = "") -> JudgedItem:
    return JudgedItem(f"t{i}", f"request {i}", reply, human_value=value, human_comment=comment)


async def test_categorical_score_is_the_weighted_probability_of_the_human_answer():
    items = [item(0, "bad"), item(1, "bad"), item(2, "good")]
    weights = value_weights(items, NOMINAL)
    assert weights == {"bad": 0.5, "good": 1.0}  # two "bad" weigh as much as one "good"
    lm = FakeLM(probs=lambda r, i, reply: {"bad": 0.2, "ok": 0.3, "good": 0.5})
    batch = await ScaledAlignmentAdapter(lm, NOMINAL, weights).evaluate(items, SEED)
    assert batch.scores == pytest.approx([0.5 * 0.2, 0.5 * 0.2, 1.0 * 0.5])


async def test_boolean_score_maps_the_human_label_to_yes_or_no():
    items = [item(0, True), item(1, False), item(2, False)]
    scale = ScoreScale("boolean")
    lm = FakeLM(probs=lambda r, i, reply: {"Yes": 0.8, "No": 0.2})
    adapter = ScaledAlignmentAdapter(lm, scale, value_weights(items, scale))
    batch = await adapter.evaluate(items, SEED)
    assert batch.scores == pytest.approx([1.0 * 0.8, 0.5 * 0.2, 0.5 * 0.2])


async def test_numeric_score_is_the_distance_of_the_expected_value():
    lm = FakeLM(probs=lambda r, i, reply: {"1": 0.5, "5": 0.5})  # expected value 3
    adapter = ScaledAlignmentAdapter(lm, ONE_TO_FIVE, {})
    batch = await adapter.evaluate([item(0, 4.0), item(1, 1.0), item(2, 3)], SEED)
    assert batch.scores == pytest.approx([1 - 1 / 4, 1 - 2 / 4, 1.0])


async def test_unparseable_scores_zero_and_is_counted():
    lm = FakeLM(text=lambda r, i, reply: "Score: 0.75\nRationale: close." if i else "It is fine.")
    adapter = ScaledAlignmentAdapter(lm, CONTINUOUS, {})
    batch = await adapter.evaluate([item(0, 1.5), item(1, 1.5)], SEED)
    assert batch.scores == pytest.approx([0.0, 1 - 0.75 / 1.5])
    assert adapter.unparseable == 1
    unbounded = ScaledAlignmentAdapter(lm, ScoreScale("numeric"), {})
    assert (await unbounded.evaluate([item(1, 2.75)], SEED)).scores == [1 / (1 + 2.0)]


async def test_a_missing_human_value_raises_naming_the_item():
    adapter = ScaledAlignmentAdapter(FakeLM(), NOMINAL, {"bad": 1.0})
    with pytest.raises(ValueError, match=r"human_value.*'t7'"):
        await adapter.evaluate([item(0, "bad"), item(7, None)], SEED)


async def test_reflective_records_show_verdict_and_the_human_value_and_comment():
    lm = FakeLM(
        probs=lambda r, i, reply: {"bad": 0.1, "ok": 0.2, "good": 0.7},
        text=lambda r, i, reply: "It answers the question.",
    )
    adapter = ScaledAlignmentAdapter(lm, NOMINAL, {"bad": 1.0})
    items = [item(0, "bad", "it broke", comment="the reply ignores the error")]
    batch = await adapter.evaluate(items, SEED, capture_traces=True)
    (record,) = (await adapter.make_reflective_dataset(SEED, batch, ["rubric"]))["rubric"]
    assert record["Inputs"] == "Request: request 0\nReply: it broke"
    assert record["Generated Outputs"] == (
        "good (answer probabilities: good 0.70, ok 0.20, bad 0.10). "
        "The judge's reason: It answers the question."
    )
    assert "bad" in record["Feedback"] and "the reply ignores the error" in record["Feedback"]

    text_lm = FakeLM(text=lambda r, i, reply: "It is fine.")
    adapter = ScaledAlignmentAdapter(text_lm, CONTINUOUS, {})
    batch = await adapter.evaluate([item(1, 0.5)], SEED, capture_traces=True)
    (record,) = (await adapter.make_reflective_dataset(SEED, batch, ["rubric"]))["rubric"]
    assert record["Generated Outputs"].startswith("unparseable: no verdict")
    assert "0.5" in record["Feedback"]


def test_primary_metric_is_a_key_agreement_report_produces():
    cases = [
        (ScoreScale("boolean"), "kappa", [True, False], [True, False]),
        (NOMINAL, "kappa", ["bad", "good"], ["bad", "ok"]),
        (ScoreScale("categorical", CATEGORIES, ordinal=True), "weighted_kappa", ["bad"], ["ok"]),
        (ONE_TO_FIVE, "weighted_kappa", [1.0, 3.0], [2.0, 3.0]),
        (CONTINUOUS, "spearman", [0.1, 0.7], [0.2, 1.4]),
    ]
    for scale, metric, pred, gold in cases:
        assert primary_metric(scale) == metric
        assert metric in agreement_report(pred, gold, scale=scale)


def scored(n: int) -> list[JudgedItem]:
    """Replies state their true 1-5 score; the humans agree with it."""
    return [item(i, float(1 + i % 5), f"score {1 + i % 5}") for i in range(n)]


async def test_a_rubric_that_agrees_better_on_val_is_chosen_and_heldout_is_never_searched():
    def probs(rubric, i, reply):
        if "read the stated score" in rubric:
            return {reply.split()[1]: 1.0}
        return {"3": 1.0}  # the seed always says 3: no signal

    lm = FakeLM(probs=probs)
    items = scored(30)
    train, val, heldout = items[:12], items[12:21], items[21:]
    seen_by_the_search: set[str] = set()

    def on_event(event):
        if isinstance(event, Finished):
            seen_by_the_search.update(lm.seen)

    async def reflect(prompt: str) -> str:
        return "```\nread the stated score and answer it.\n```"

    aligned = await align(
        lm,
        SEED,
        ONE_TO_FIVE,
        train,
        val,
        heldout,
        GEPAConfig(max_metric_calls=60, reflection_minibatch_size=4, skip_perfect_score=False),
        reflect,
        on_event=on_event,
    )
    assert "read the stated score" in aligned.judge.prompts["rubric"] and not aligned.kept_seed
    assert aligned.primary == "weighted_kappa" and aligned.judge.scale == ONE_TO_FIVE
    assert aligned.val_score == 1.0 and aligned.seed_val_score == 0.0
    judge = aligned.judge
    assert judge.heldout["weighted_kappa"] == 1.0 and judge.heldout["unparseable"] == 0.0
    assert aligned.seed.heldout["weighted_kappa"] == 0.0
    # each held-out label beside the verdict, both placed on the 1-5 scale's order
    (one,) = [v for v in judge.heldout_verdicts if v.id == heldout[0].id]
    assert one.human == one.judged == heldout[0].human_value == 2.0
    assert one.score == pytest.approx(0.25) and one.human_score == 0.25
    assert len(judge.heldout_verdicts) == len(heldout)
    assert {v.judged for v in aligned.seed.heldout_verdicts} == {3.0}
    assert seen_by_the_search and not seen_by_the_search & {i.id for i in heldout}
    assert {i.id for i in heldout} <= set(lm.seen)  # the report did judge them


async def test_a_rubric_that_games_the_surrogate_does_not_replace_the_seed():
    def probs(rubric, i, reply):
        truth = reply.split()[1]
        if "be very sure" in rubric:  # confident, but wrong on every fourth item
            answer = truth if i % 4 else CATEGORIES[(CATEGORIES.index(truth) + 1) % 3]
            return {c: 0.98 if c == answer else 0.01 for c in CATEGORIES}
        return {c: 0.4 if c == truth else 0.3 for c in CATEGORIES}  # weak, always right

    lm = FakeLM(probs=probs)
    items = [item(i, CATEGORIES[i % 3], f"quality {CATEGORIES[i % 3]}") for i in range(36)]

    async def reflect(prompt: str) -> str:
        return "```\nJudge and be very sure.\n```"

    aligned = await align(
        lm,
        SEED,
        NOMINAL,
        items[:12],
        items[12:24],
        items[24:],
        GEPAConfig(max_metric_calls=60, reflection_minibatch_size=4, skip_perfect_score=False),
        reflect,
    )
    assert "be very sure" in aligned.searched["rubric"]  # the search took it
    assert aligned.kept_seed and aligned.judge.prompts == SEED
    assert aligned.seed_val_score == 1.0 and aligned.val_score < 1.0
    assert aligned.judge == aligned.seed


async def no_reflection(prompt: str) -> str:
    raise AssertionError("no proposal fits the budget")


async def test_unparseable_verdicts_are_left_out_of_agreement_and_counted():
    def text(rubric, i, reply):
        return "No idea." if i % 4 == 0 else f"Score: {reply.split()[1]}"

    lm = FakeLM(text=text)
    items = [item(i, 0.1 * i, f"score {0.1 * i:.1f}") for i in range(12)]
    aligned = await align(
        lm,
        SEED,
        CONTINUOUS,
        items[:4],
        items[4:8],
        items[8:],
        GEPAConfig(max_metric_calls=4),  # the seed's val pass only: no proposal fits
        no_reflection,
    )
    assert aligned.primary == "spearman" and aligned.judge.prompts == SEED
    assert aligned.unparseable == 1  # item 4, in val
    assert aligned.judge.heldout["unparseable"] == 1.0 and aligned.judge.heldout["n"] == 3.0
    assert aligned.judge.heldout["spearman"] == pytest.approx(1.0)
    assert len(aligned.judge.heldout_verdicts) == 3  # the one unread is left out here too


async def test_verdicts_on_an_integer_scale_round_to_the_nearest_level():
    lm = FakeLM(probs=lambda r, i, reply: {"2": 0.5, "3": 0.5})  # expected value 2.5
    verdict = await ScaledJudge(lm, SEED, ONE_TO_FIVE).verdict(item(0, 3.0))
    assert verdict.value == pytest.approx(2.5) and agreement_value(verdict, ONE_TO_FIVE) == 3.0
