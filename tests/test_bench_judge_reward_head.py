"""The reward-head arm's training pairs: a passing exchange over a failing one, every
label used, planted injections on the failing side."""

import math
from collections import Counter

import pytest
import torch

from benchmarks.judge_reward_head import item_exchange, reward_pairs, train_reward_head
from infra.lm.model_files import resolve_model_path
from infra.settings import LoraSettings
from judges.injection import TRAINING
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
