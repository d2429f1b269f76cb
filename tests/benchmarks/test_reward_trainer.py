"""The reward-head arm's training pairs: a passing exchange over a failing one, every
label used, planted injections on the failing side, the notes of a memory first."""

import argparse
import asyncio
import math
from collections import Counter

import pytest
import torch

from benchmarks import judge_lora
from benchmarks.reward_trainer import item_exchange, reward_pairs, train_reward_head
from infra.lm.model_files import resolve_model_path
from infra.settings import LoraSettings
from judges.injection import TRAINING
from judges.memory import INTRO, ReviewedMemory
from judges.types import JudgedItem


def items(passing: int, failing: int) -> list[JudgedItem]:
    return [
        JudgedItem(f"t{n}", f"request {n}", f"reply {n}", human_pass=n < passing)
        for n in range(passing + failing)
    ] + [JudgedItem("unlabelled", "request", "reply")]


def reply(side) -> str:
    return side[1]["content"]


def test_every_label_is_paired_passing_over_failing():
    pairs = reward_pairs(items(passing=2, failing=5), seed=0, injections=False)
    assert len(pairs) == 5  # the larger side once each
    assert Counter(reply(p["rejected"]) for p in pairs) == {f"reply {n}": 1 for n in range(2, 7)}
    assert sorted(Counter(reply(p["chosen"]) for p in pairs).values()) == [2, 3]
    assert all(p["chosen"][0]["role"] == "user" for p in pairs)
    assert "reply" not in {reply(p["chosen"]) for p in pairs}  # no unlabelled exchange


def test_injections_are_extra_failing_exchanges():
    pairs = reward_pairs(items(passing=3, failing=2), seed=1, injections=True)
    injected = [p for p in pairs if any(s in reply(p["rejected"]) for s in TRAINING)]
    assert len(pairs) == 4 and len(injected) == 2
    assert not any(any(s in reply(p["chosen"]) for s in TRAINING) for p in pairs)


def test_one_sided_labels_cannot_be_paired():
    with pytest.raises(ValueError, match="passing and failing"):
        reward_pairs(items(passing=3, failing=0), seed=0, injections=False)


@pytest.mark.slow
@pytest.mark.parametrize("native_bf16", [False, True])
def test_the_base_is_loaded_in_float32_unless_the_cpu_has_native_bf16(monkeypatch, native_bf16):
    # Left to the checkpoint's own dtype (bf16), an AVX2-only CPU emulated every matmul.
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native_bf16)
    pairs = reward_pairs(items(passing=2, failing=2), seed=0, injections=False)
    cfg = LoraSettings(batch_size=2, micro_batch_size=2, max_seq_length=128, max_steps=1)
    head = train_reward_head(pairs, str(resolve_model_path()), cfg, seed=0)
    frozen = {p.dtype for n, p in head.model.named_parameters() if not p.requires_grad}
    assert frozen == {torch.bfloat16 if native_bf16 else torch.float32}
    assert head.steps == 1
    assert all(math.isfinite(s) for s in head.scores([item_exchange(i) for i in items(1, 1)]))


def test_with_a_memory_each_side_reads_its_own_notes_first():
    labelled = items(passing=2, failing=2)[:-1]
    memory = ReviewedMemory(labelled, k=1)
    pairs = reward_pairs(labelled, seed=0, injections=False, memory=memory)
    for pair in pairs:
        for side in (pair["chosen"], pair["rejected"]):
            assert [turn["role"] for turn in side] == ["system", "user", "assistant"]
            request = side[1]["content"]
            assert side[0]["content"].startswith(INTRO)
            assert request not in side[0]["content"]  # never the note on its own trace
    assert item_exchange(labelled[0]) == item_exchange(labelled[0], None)[-2:]


class Base:
    base_model_path = "unused"


class RecordingHead:
    """Fixed P(pass) per exchange; records the memory it was read with."""

    pairs, steps, seconds = 0, 1, 0.0
    P = {"t0": 0.9, "t1": 0.8, "t2": 0.2, "t3": 0.1, "v0": 0.4, "v3": 0.3}

    def __init__(self):
        self.memories = []

    def p_pass(self, items, memory=None):
        self.memories.append(memory)
        return [self.P.get(i.id.split("#")[0], 0.5) for i in items]


@pytest.mark.parametrize("notes", [0, 1])
def test_the_arm_reads_notes_when_asked_and_cuts_on_train_and_validation(monkeypatch, notes):
    head = RecordingHead()
    trained = []

    def fake_train(pairs, base_model_path, cfg, seed):
        trained.extend(pairs)
        return head

    monkeypatch.setattr(judge_lora, "train_reward_head", fake_train)
    train = items(passing=2, failing=2)[:-1]
    val = [JudgedItem("v0", "request 0", "new", True), JudgedItem("v3", "request 3", "x", False)]
    args = argparse.Namespace(epochs=1, seed=0, injections=False, head_memory=notes)
    arm = asyncio.run(judge_lora.reward_head_arm(Base(), train, val, val, args))
    assert all((p["chosen"][0]["role"] == "system") == bool(notes) for p in trained)
    assert all((m is not None) == bool(notes) for m in head.memories)
    assert arm.name == ("reward head with a memory (1 notes)" if notes else "reward head")
    # the training labels alone would cut at 0.5 and fail the passing validation reply (0.4)
    assert arm.threshold == pytest.approx(0.35)
    assert arm.report["kappa"] == 1.0
