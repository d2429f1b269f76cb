"""A checkpoint's tensors read back one at a time, from one file or from shards, as
from_pretrained loads them; a checkpoint without safetensors reads nothing."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from infra.lm.engine.checkpoint_weights import CheckpointWeights
from tests.infra.lm.engine.test_fused_decode import tiny_llama


@pytest.mark.parametrize("shard", [None, "20KB"])
def test_tensors_come_back_as_from_pretrained_loads_them(tmp_path, shard):
    tiny_llama().save_pretrained(tmp_path, **({"max_shard_size": shard} if shard else {}))
    assert (tmp_path / "model.safetensors.index.json").exists() == bool(shard)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    weights = CheckpointWeights.of(tmp_path, torch.bfloat16)
    for name, param in loaded.named_parameters():
        if name in weights:
            assert torch.equal(weights.get(name), param), name
    assert "model.layers.1.mlp.down_proj.weight" in weights


def test_a_checkpoint_without_safetensors_has_none(tmp_path):
    model = tiny_llama()
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")  # an old checkpoint
    assert CheckpointWeights.of(tmp_path, torch.float32) is None
