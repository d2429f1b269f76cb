"""The MT-Bench benchmark's reward-model arm: a pairwise judge that never sees two answers
side by side, so the position an answer is shown in cannot sway it.

trl's `RewardTrainer` (`benchmarks.reward_trainer`: a LoRA adapter and a scalar head,
Bradley-Terry loss; the night's judge LoRA settings) trains on each training item as
(question, the answer the expert preferred) over (question, the other answer). Each answer
is then scored on its own, and P(A better) = sigmoid(r_A - r_B). Swapping the answers gives
the same probability, so this judge's flip rate is 0 by construction, not by training:
what the arm has to show is whether it still agrees with the experts. It is read as every
arm is (threshold on p_a fitted on train, kappa on val, held-out items only reported), at
the end of training.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from benchmarks.pairwise_lora import LoraArm, Split
from benchmarks.pairwise_scoring import fit_verdicts, heldout_agreement
from benchmarks.reward_trainer import RewardHead, exchange, train_reward_head
from infra.lm import LM
from infra.lm.threads import run_in_own_thread
from infra.settings import LoraSettings
from judges.pairwise import PairwiseVerdict, pairwise_verdict
from judges.types import PairwiseItem


def preference_pairs(items: Sequence[PairwiseItem]) -> list[dict]:
    """Each labelled item once: the preferred answer chosen, the other rejected."""
    pairs = []
    for item in items:
        if item.human_prefers is None:
            raise ValueError(f"item {item.id}: field 'human_prefers' is needed to train on it")
        a, b = exchange(item.question, item.answer_a), exchange(item.question, item.answer_b)
        chosen, rejected = (a, b) if item.human_prefers == "A" else (b, a)
        pairs.append({"chosen": chosen, "rejected": rejected})
    return pairs


def reward_verdict(score_a: float, score_b: float) -> PairwiseVerdict:
    """Both orders read the same two scores: P(the first is better) is sigmoid of the gap."""
    p_a = 1 / (1 + math.exp(score_b - score_a))
    return pairwise_verdict(p_a, 1 - p_a, lean=0.0, threshold=0.5)


def reward_verdicts(head: RewardHead, items: Sequence[PairwiseItem]) -> list[PairwiseVerdict]:
    scores_a = head.scores([exchange(i.question, i.answer_a) for i in items])
    scores_b = head.scores([exchange(i.question, i.answer_b) for i in items])
    return [reward_verdict(a, b) for a, b in zip(scores_a, scores_b, strict=True)]


async def reward_arm(lm: LM, split: Split, cfg: LoraSettings, seed: int) -> LoraArm:
    train, val, heldout = split
    pairs = preference_pairs(train)
    started = time.perf_counter()
    head = await run_in_own_thread(train_reward_head, pairs, lm.base_model_path, cfg, seed)
    seconds = time.perf_counter() - started
    verdicts = await run_in_own_thread(reward_verdicts, head, train + val + heldout)
    n_train, n_val = len(train), len(val)
    fit = fit_verdicts(verdicts[:n_train], verdicts[n_train : n_train + n_val], train, val)
    return LoraArm(
        name="reward model (each answer scored alone)",
        records=len(pairs),
        trained_on=len(pairs),
        steps=head.steps,
        train_s=seconds,
        fit=fit,
        heldout=heldout_agreement(verdicts[n_train + n_val :], fit, heldout),
        checkpoints={"end": fit.val_kappa},
        kept="end",
        record="the preferred answer over the other, once per training item",
    )
