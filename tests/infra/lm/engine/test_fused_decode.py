"""The fused forward gives transformers' own logits, runs only where it applies, and
gives a prompt's tokens the same bits however its prefill is split or batched."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from infra.lm.engine import decode_attention
from infra.lm.engine.adapters import lora_deltas
from infra.lm.engine.architectures import UnsupportedModelError
from infra.lm.engine.attention import CHUNK
from infra.lm.engine.fused_decode import FusedDecoder, Prompt
from infra.lm.engine.kv_slab import KVSlab
from infra.lm.model_files import resolve_model_path


def tiny_llama(**overrides) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation=decode_attention.NAME,
        **overrides,
    )
    return LlamaForCausalLM(config).eval()


def new_slab(model, rows: int = 4) -> KVSlab:
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return KVSlab(cfg.num_hidden_layers, cfg.num_key_value_heads, head_dim, model.dtype, rows)


def last_logits(model, tokens: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([tokens])).logits[0, -1]


def prefill_then_step(model, prompts: list[list[int]], next_ids: list[int]):
    fused = FusedDecoder(model)
    slab = new_slab(model)
    with torch.inference_mode():
        hidden, kv = fused.prefill([Prompt(p) for p in prompts], fused.base)
        for layers in kv:
            slab.add(layers)
        stepped = fused.step(torch.tensor(next_ids), slab, fused.base)
    return fused.base.head(hidden), stepped


def test_prefill_and_a_step_equal_the_model_forward_on_a_ragged_batch():
    model = tiny_llama()
    prompts = [[3 + i % 60 for i in range(70)], [3, 4], [10, 11, 12]]  # one spans two chunks
    prefilled, stepped = prefill_then_step(model, prompts, [1, 2, 3])
    for row, (prompt, token) in enumerate(zip(prompts, [1, 2, 3], strict=True)):
        torch.testing.assert_close(prefilled[row], last_logits(model, prompt), atol=1e-5, rtol=1e-5)
        ref = last_logits(model, prompt + [token])
        torch.testing.assert_close(stepped[row], ref, atol=1e-5, rtol=1e-5)


def test_a_prompt_gets_the_same_bits_whole_after_a_cached_prefix_and_beside_others():
    model = tiny_llama()
    fused = FusedDecoder(model)
    prompt = [(7 * i) % 61 + 3 for i in range(2 * CHUNK + 21)]
    with torch.inference_mode():
        whole_hidden, (whole_kv,) = fused.prefill([Prompt(prompt)], fused.base)
        _, (prefix_kv,) = fused.prefill([Prompt(prompt[: 2 * CHUNK], outputs=[])], fused.base)
        after = Prompt(prompt[2 * CHUNK :], 2 * CHUNK, prefix_kv)
        others = [Prompt([5, 6, 7]), Prompt(prompt[: CHUNK + 9])]
        hidden, kv = fused.prefill([others[0], after, others[1]], fused.base)
    assert torch.equal(hidden[1], whole_hidden[0])
    for (k, v), (whole_k, whole_v) in zip(kv[1], whole_kv, strict=True):
        assert torch.equal(k, whole_k) and torch.equal(v, whole_v)


def test_an_adapter_runs_as_merged_weights_with_peft_s_numbers(tmp_path):
    model = tiny_llama()
    config = LoraConfig(
        r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False
    )
    peft_model = get_peft_model(tiny_llama(), config)
    peft_model.save_pretrained(tmp_path)
    deltas = lora_deltas(model, tmp_path)
    assert len(deltas) == 3 * model.config.num_hidden_layers
    assert not any("lora" in name for name, _ in model.named_modules())  # unwrapped again
    fused = FusedDecoder(model)
    prompt = [3, 9, 27, 17, 51, 25]
    with torch.inference_mode():
        hidden, _ = fused.prefill([Prompt(prompt)], fused.weights(deltas))
        tuned = fused.base.head(hidden)[0]
        ref = peft_model(input_ids=torch.tensor([prompt])).logits[0, -1]
    torch.testing.assert_close(tuned, ref, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(ref, last_logits(model, prompt), atol=1e-3)


@pytest.mark.slow
def test_equals_the_model_forward_on_the_real_model():
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_path(), dtype=torch.float32, attn_implementation=decode_attention.NAME
    ).eval()
    prompts = [[1, 4093, 28, 1461, 314], [1, 9690, 30]]
    prefilled, stepped = prefill_then_step(model, prompts, [260, 47])
    for row, (prompt, token) in enumerate(zip(prompts, [260, 47], strict=True)):
        # fused kernels sum in another order: float32 rounding over 30 layers, no more
        torch.testing.assert_close(prefilled[row], last_logits(model, prompt), atol=5e-4, rtol=1e-4)
        ref = last_logits(model, prompt + [token])
        torch.testing.assert_close(stepped[row], ref, atol=5e-4, rtol=1e-4)
        assert stepped[row].argmax() == ref.argmax()


@pytest.mark.parametrize(
    "overrides,why",
    [
        ({"attention_bias": True}, "biases on its output and MLP projections"),
        ({"mlp_bias": True}, "biases on its output and MLP projections"),
        ({"hidden_act": "gelu"}, "'gelu' activations"),
    ],
)
def test_only_plain_llama_models_are_fused(overrides, why):
    with pytest.raises(UnsupportedModelError, match=why):
        FusedDecoder(tiny_llama(**overrides))
