"""The MT-Bench benchmark's reward-model arm: it trains on the preferred answer over the
other, scores each answer alone, so swapping the answers changes nothing, and is read on
held-out items as the other arms are."""

import asyncio

import pytest

from benchmarks import pairwise_reward
from benchmarks.pairwise_reward import preference_pairs, reward_arm, reward_verdict
from infra.settings import LoraSettings
from judges.pairwise import position_lean
from judges.types import PairwiseItem
from tests.benchmarks.test_pairwise_lora import pairs


def test_pairs_put_the_preferred_answer_first_whichever_side_it_was_on():
    items = pairs(4, "t")  # A, B, A, B preferred; the preferred one is marked [good]
    made = preference_pairs(items)
    assert len(made) == 4
    assert all("[good]" in p["chosen"][1]["content"] for p in made)
    assert all("[good]" not in p["rejected"][1]["content"] for p in made)
    assert [p["chosen"][0] for p in made] == [
        {"role": "user", "content": f"Q{i}?"} for i in range(4)
    ]


def test_an_unlabelled_item_is_named():
    with pytest.raises(ValueError, match="item u1: field 'human_prefers'"):
        preference_pairs([PairwiseItem("u1", "g", "Q?", "a", "b")])


@pytest.mark.parametrize("score_a, score_b", [(2.0, -1.0), (-0.5, 0.3), (0.0, 0.0)])
def test_both_orders_read_the_same_gap(score_a, score_b):
    verdict = reward_verdict(score_a, score_b)
    assert not verdict.order_flip
    assert verdict.p_a_by_order[0] == pytest.approx(verdict.p_a_by_order[1])
    assert (verdict.p_a > 0.5) == (score_a > score_b)
    assert position_lean([verdict]) == pytest.approx(0.0, abs=1e-9)


class MarkedHead:
    """A head that scores an answer marked [good] higher, whatever it is asked with."""

    steps = 3

    def scores(self, exchanges):
        return [1.0 if "[good]" in e[1]["content"] else -1.0 for e in exchanges]


def test_the_arm_trains_on_train_only_and_agrees_with_no_flips(monkeypatch):
    trained_on = []

    def fake_train(records, base_model_path, cfg, seed):
        trained_on.extend(records)
        return MarkedHead()

    monkeypatch.setattr(pairwise_reward, "train_reward_head", fake_train)

    class Base:
        base_model_path = "unused"

    split = (pairs(6, "t"), pairs(4, "v"), pairs(8, "h"))
    arm = asyncio.run(reward_arm(Base(), split, LoraSettings(), seed=0))
    assert len(trained_on) == arm.records == 6
    assert arm.fit.val_kappa == pytest.approx(1.0)
    assert arm.heldout.accuracy.value == pytest.approx(1.0)
    assert arm.heldout.flip.value == 0.0 and arm.heldout.raw_flip.value == 0.0
