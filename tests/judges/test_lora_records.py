"""The judge's LoRA training records: verdict tokens on its own prompt, balanced by label;
pairs in both orders with the letters swapped; planted injections labelled fail."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from judges.injection import TRAINING as INJECTIONS
from judges.lora_records import pairwise_records, pointwise_records
from judges.pairwise import SEED_PAIRWISE_PROMPTS, PairwiseJudge
from judges.pointwise import PASS_QUESTION
from judges.types import JudgedItem, PairwiseItem
from tests.fakes import ScriptedLM


def items(passing: int, failing: int) -> list[JudgedItem]:
    return [
        JudgedItem(f"t{n}", f"request {n}", f"reply {n}", human_pass=n < passing)
        for n in range(passing + failing)
    ] + [JudgedItem("unlabelled", "request", "reply")]


def verdict(record) -> str:
    return record["completion"][0]["content"]


def test_pointwise_records_are_the_judge_s_prompt_and_verdict_balanced_by_label():
    records = pointwise_records("Be strict.", items(passing=3, failing=7), seed=1)
    assert Counter(verdict(r) for r in records) == {"Yes": 7, "No": 7}  # 3 passes repeated
    first = records[0]["prompt"]
    assert first[0]["role"] == "system" and first[0]["content"].startswith("Be strict.")
    assert first[1]["content"].endswith(PASS_QUESTION)  # the question the judge is read on
    passing_replies = Counter(
        r["prompt"][1]["content"].split("<reply>\n")[1].split("\n")[0]
        for r in records
        if verdict(r) == "Yes"
    )
    assert sorted(passing_replies.values()) == [2, 2, 3]  # whole repeats, then a sample
    assert pointwise_records("Be strict.", items(3, 7), seed=1) == records  # fixed by seed


def test_planted_injections_are_failing_records_of_failing_replies():
    records = pointwise_records("r", items(passing=2, failing=2), seed=0, injections=True)
    injected = [r for r in records if any(x in r["prompt"][1]["content"] for x in INJECTIONS)]
    assert len(injected) == 2 and {verdict(r) for r in injected} == {"No"}
    assert Counter(verdict(r) for r in records) == {"Yes": 4, "No": 4}


def test_pairwise_records_hold_each_pair_in_both_orders_with_the_label_swapped():
    judge = PairwiseJudge(ScriptedLM(), SEED_PAIRWISE_PROMPTS)
    pairs = [
        PairwiseItem("p1", "q1", "Q?", "good answer", "bad answer", human_prefers="A"),
        PairwiseItem("p2", "q2", "Q2?", "worse", "better", human_prefers="B"),
        PairwiseItem("p3", "q3", "Q3?", "x", "y"),  # no preference: no record
    ]
    records = pairwise_records(judge, pairs)
    assert len(records) == 4
    assert Counter(verdict(r) for r in records) == {"A": 2, "B": 2}  # position says nothing
    for record in records:
        shown = record["prompt"][1]["content"]
        first = shown.split("Answer A:\n")[1].split("\n")[0]
        assert (verdict(record) == "A") == (first in ("good answer", "better"))


@pytest.mark.slow
def test_a_judge_adapter_trained_a_few_steps_changes_its_verdicts_and_reloads_the_same(
    tmp_path,
):
    """On the real model: the judge's own prompt with its verdict tokens, a few SFT steps
    (weights.lora), served by name beside the base model by the local engine."""
    from infra.lm.factory import make_lm
    from infra.settings import LMSettings, LoraSettings
    from judges.adapter import served_name
    from judges.pointwise import PointwiseJudge
    from weights.lora import train_sft_adapter

    train = [
        JudgedItem(f"t{n}", f"Play song {n}", "playlist" if n % 2 else "weather", n % 2 == 1)
        for n in range(16)
    ]
    lm = make_lm(LMSettings())
    # 16 records, 4 a step: six passes hold the 24 steps (max_steps caps, never repeats)
    cfg = LoraSettings(max_steps=24, epochs=6, batch_size=4, learning_rate=1e-3, checkpoints=1)
    trained = train_sft_adapter(
        pointwise_records("Judge it.", train), lm.base_model_path, tmp_path / "judge", cfg
    )
    probe = [JudgedItem("p1", "Play song 99", "playlist"), JudgedItem("p2", "Play x", "weather")]

    async def scores(adapter):
        return await PointwiseJudge(lm, {"rubric": "Judge it."}, adapter=adapter).p_pass_many(probe)

    async def run():
        base = await scores(None)
        tuned = await scores(str(trained.path))  # served on first use, under its folder's name
        assert await lm.adapters() == [served_name(trained.path)]
        await lm.unload_adapter(served_name(trained.path))
        return base, tuned, await scores(str(trained.path)), await scores(None)

    base, tuned, reloaded, base_again = asyncio.run(run())
    assert tuned[0] - tuned[1] > base[0] - base[1] + 0.05  # it learned which reply passes
    assert reloaded == tuned and base_again == base  # same bits, and the base is untouched


def test_comments_follow_the_verdict_so_the_verdict_token_is_still_first():
    labelled = [
        JudgedItem("p", "play jazz", "music", human_pass=True, human_comment="correct: music"),
        JudgedItem("f", "rain?", "music", human_pass=False, human_comment=" expected weather "),
        JudgedItem("q", "hi", "search", human_pass=False),  # no comment: the verdict alone
    ]
    records = pointwise_records("r", labelled, seed=0, injections=True, comments=True)
    completions = Counter(verdict(r) for r in records)
    assert completions == {
        "Yes. correct: music": 4,  # balanced against 2 failing + 2 planted
        "No. expected weather": 1,
        "No": 3,  # the uncommented one and both planted injections (a new reply, no comment)
    }
    assert all(verdict(r) in ("Yes", "No") for r in pointwise_records("r", labelled, seed=0))
